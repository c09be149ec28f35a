//! Shared index informers: the Rust counterpart of client-go's `SharedIndexInformer`,
//! `SharedInformerFactory` and listers.
//!
//! An informer composes the lower crates into the path every controller needs:
//!
//! ```text
//! API server -> Reflector -> FIFO -> handle deltas -> indexer (listers read here)
//!                                                  \-> processor -> one listener per handler
//! ```
//!
//! * **One watch, many handlers.** A [`SharedIndexInformer`] runs one list-and-watch
//!   (`kcache-reflector`, watch-list by default) and keeps an indexed cache (`kcache-store`).
//!   Every change is handed to each registered [`ResourceEventHandler`] as `on_add`,
//!   `on_update(old, new)` or `on_delete` (with a tombstone for deletes missed while
//!   disconnected).
//! * **A slow handler hurts only itself.** Each handler runs on its own thread behind its own
//!   buffer (a one-item lookahead and a growing ring, as client-go). The distributor never waits.
//!   Unlike client-go, the backlog is visible from the first pending notification
//!   ([`HandlerRegistration::pending`]), and an opt-in [`ListenerMode::Coalescing`] bounds a
//!   stalled handler's memory by distinct keys instead of events. A handler's panic is caught,
//!   counted and logged; by default ([`PanicPolicy::Continue`]) its listener goes on with the
//!   next notification, and with [`PanicPolicy::FailInformer`] the informer fails.
//! * **Sync.** [`SharedIndexInformer::has_synced`] turns true once the initial list is in the
//!   cache; each handler's [`HandlerRegistration::has_synced`] once it has also received every
//!   initial-list add. A handler added after start first receives the cache as initial-list
//!   adds, to it alone.
//! * **Relists and resync** follow client-go's rules. An update that did not change the
//!   resourceVersion (a relist's unchanged object, a periodic resync) is a sync, delivered as
//!   `on_update(o, o)` to the handlers in the syncing set: every handler until the informer's
//!   first resync check, then those due for a resync. So on an informer without resync every
//!   relist reaches every handler (level-triggered healing after a 410 or an outage), unless a
//!   handler sets [`HandlerOptions::skip_unchanged_updates`]. Resync periods are at least 1 s,
//!   per handler.
//! * [`SharedInformerFactory`] shares one informer per (type, namespace, selectors);
//!   [`Lister`] reads the cache without copying.
//!
//! # Failures
//!
//! A client-go informer crashes the process when its cache cannot follow the API server any
//! more: an index function that fails for an object, a panic in a transform or (by default) in
//! a handler. A library must not crash, and must not hide either: here such an informer
//! *fails*. It stops, with its handlers, and the [`InformerFailure`] (naming the informer and
//! the [`FailureCause`]) is
//!
//! * returned by [`SharedIndexInformer::run`] ([`InformerError::Failed`]), and by
//!   [`SharedInformerFactory::wait_for_failure`] for a factory's informers;
//! * reported by the health checks for readiness probes ([`SharedIndexInformer::health`],
//!   [`SharedInformerFactory::health`]) and by `failure()` on the informer, its
//!   registrations and its listers, while `has_synced` turns false for the informer and its
//!   registrations (listers keep answering from the cache's last state);
//! * logged once at error level, never with the object, and counted ([`InformerMetrics`]).
//!
//! [`FailurePolicy::Abort`] aborts the process instead, for those who want client-go's crash.
//! What fails an informer, and what does not:
//!
//! | event | client-go | kcache |
//! |---|---|---|
//! | an index function fails for an object | panic (`storeIndex.updateSingleIndex`): the process dies | the informer fails ([`FailureCause::Cache`]) |
//! | a transform panics | panic in the reflector's goroutine: the process dies | the informer fails ([`FailureCause::ReflectorPanicked`]) |
//! | a handler panics | `HandleCrash` re-panics (`ReallyCrash`): the process dies | by default logged, counted, notification dropped; with [`PanicPolicy::FailInformer`] the informer fails |
//! | list or watch errors, bad frames, 410s | retried, relisted | the same (the reflector's rules) |
//!
//! The in-order FIFO is the default queue, as in client-go since 1.33, with atomic relists as in
//! client-go since 1.36 (feature `AtomicFIFO`): a relist reaches the cache as one unit before any
//! handler hears of it, so a [`Lister`] never sees half of one. [`FifoKind::InOrderNonAtomic`]
//! selects the 1.33 behaviour (one delta at a time), [`FifoKind::DeltaFifo`] client-go's
//! DeltaFIFO.
//!
//! The crate asks kube for its client only and picks no TLS stack: the application enables
//! kube's `rustls-tls` (with `ring` or `aws-lc-rs`) or `openssl-tls`, as with kube-runtime.
//!
//! # Example
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::time::Duration;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kcache_informer::{EventHandlerFuncs, InformerScope, SharedInformerFactory};
//!
//! # async fn run(client: kube::Client) {
//! let factory = SharedInformerFactory::new(client, Duration::from_secs(600));
//! let informer = factory.informer::<ConfigMap>(&InformerScope::namespace("default"));
//! informer
//!     .add_event_handler(
//!         EventHandlerFuncs::new()
//!             .on_add(|cm: &Arc<ConfigMap>, _| println!("add {:?}", cm.metadata.name))
//!             .on_update(|_, new: &Arc<ConfigMap>| println!("update {:?}", new.metadata.name))
//!             .on_delete(|gone| println!("delete {:?}", gone.object().metadata.name)),
//!     )
//!     .unwrap();
//! factory.start();
//! factory.wait_for_cache_sync().await;
//! let cached = informer.lister().namespaced("default").list();
//! # let _ = cached;
//! factory.shutdown().await;
//! # }
//! ```

mod error;
mod factory;
mod failure;
mod failure_state;
mod handler;
mod health;
mod informer;
mod listener;
mod lister;
mod metrics;
mod processor;
mod sync;

pub use error::InformerError;
pub use factory::{InformerScope, SharedInformerFactory};
pub use failure::{FailureCause, FailurePolicy, InformerFailure, PanicPolicy};
pub use handler::{EventHandlerFuncs, FilteringHandler, ResourceEventHandler};
pub use health::{FactoryHealth, HealthState, InformerHealth};
pub use informer::{
    FifoKind, HandlerOptions, HandlerRegistration, MINIMUM_RESYNC_PERIOD, SharedIndexInformer,
};
pub use listener::ListenerMode;
pub use lister::{Lister, NamespaceLister};
pub use metrics::InformerMetrics;
pub use processor::HandlerStats;
pub use sync::{HasSynced, wait_for_cache_sync};

pub use kcache_store::{CacheRepr, DeletedFinalStateUnknown, ObjectOrTombstone};
