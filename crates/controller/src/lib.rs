//! A controller builder over kcache's shared informers and workqueues: the layer kube-runtime
//! and controller-runtime users expect, without hiding the layers below.
//!
//! A client-go controller is the same glue every time: informers from a factory, handlers that
//! turn events into keys, a rate-limited workqueue, workers that look the key up in a lister and
//! reconcile, retries with per-key backoff, a graceful shutdown. [`Controller`] is that glue:
//!
//! | kcache-controller | controller-runtime | kube-runtime |
//! |---|---|---|
//! | [`Controller::new`] / [`with_factory`](Controller::with_factory) with a [`Watch`] | `ControllerManagedBy(mgr).For(&K{})` | `Controller::new(api, watcher::Config)` |
//! | [`owns::<S>`](Controller::owns) | `Owns(&S{})` (`EnqueueRequestForOwner`, `OnlyControllerOwner`) | `owns` |
//! | [`watches::<W>(mapper)`](Controller::watches) | `Watches(&W{}, EnqueueRequestsFromMapFunc(f))` | `watches` |
//! | [`Watch::filter_labels`], [`generation_changed`](Watch::generation_changed), [`resource_version_changed`](Watch::resource_version_changed) | predicates | predicates |
//! | [`reconcile`](Controller::reconcile)`(async fn(Arc<K>, Context<T>) -> Result<Action, E>)` | `Reconcile(ctx, req)` | `run(reconcile, ..)` |
//! | [`on_gone`](Controller::on_gone)`(async fn(ObjectKey<K>, Context<T>))` | `Reconcile` after a `NotFound` `Get` | (not reconciled) |
//! | [`error_policy`](Controller::error_policy) ([`Retry`]), default rate-limited | rate-limited requeue, `TerminalError` | `error_policy` |
//! | [`ObjectKey<K>`] | `reconcile.Request` | `ObjectRef<K>` |
//! | [`Action`] (kube-runtime's own) | `reconcile.Result` | `Action` |
//! | [`workers`](Controller::workers), [`run`](Controller::run)`(cancel)` | `MaxConcurrentReconciles`, `mgr.Start(ctx)` | `Config::concurrency`, `run` |
//! | [`HealthCheck`], `Controller::http` (feature `http`) | `AddHealthzCheck`, `AddReadyzCheck`, metrics server | — |
//! | [`gate`](Controller::gate) ([`WorkGate`]), [`shard`](Controller::shard) | `LeaderElection`, — | — |
//!
//! What kcache adds below it: cached **and indexed** reads ([`Context::owned`] is an index
//! lookup), informers shared with other controllers through a
//! [`SharedInformerFactory`](kcache_informer::SharedInformerFactory), per-key exponential
//! backoff, client-go's workqueue metrics, tombstones for deletes missed while disconnected.
//!
//! # Where code runs
//!
//! * **Reconciles** (and `on_gone`, the error policy) run on the Tokio runtime that polls
//!   [`Controller::run`], `workers` at a time, never two for one key.
//! * **Event handlers** of an informer run on the informer's listener threads, one thread per
//!   handler: plain OS threads without a Tokio context, so `tokio::spawn` there panics. The
//!   controller's own handlers only enqueue keys. For an async handler of your own use
//!   [`AsyncHandler`], which runs an async fn on the runtime it was created in.
//!
//! # Example
//!
//! The ConfigMap → Secret controller (`examples/configmap_secret.rs`, with the tests in
//! `tests/it/configmap_secret.rs`): every ConfigMap labelled `app=x` gets a Secret of the same
//! name, owned by it, with the same data.
//!
//! ```no_run
#![doc = include_str!("../examples/configmap_secret.rs")]
//! ```
//!
//! # Features
//!
//! * `prometheus`: `PrometheusMetrics`, one registry for the workqueue, reflector, informer
//!   (each handler's backlog included) and reconcile metrics, wired by `Controller::metrics`.
//! * `http`: `Controller::http` serves `/healthz`, `/readyz` and `/metrics`.

mod action;
mod async_handler;
mod context;
mod controller;
mod error;
mod gate;
mod health;
#[cfg(feature = "http")]
mod http;
mod key;
mod leader;
mod metrics;
#[cfg(feature = "prometheus")]
mod prometheus;
#[cfg(feature = "sharding")]
mod sharding;
mod source;
mod watch;
mod worker;

pub use action::{Action, FALLBACK_REQUEUE, Retry, requeue_after};
pub use async_handler::{AsyncHandler, Notification};
pub use context::Context;
pub use controller::{Controller, NoReconciler};
pub use error::{ControllerError, Result};
pub use gate::{GateFuture, WatchGate, WorkGate};
pub use health::{Backlog, ControllerHealth, ControllerState, GateHealth, HealthCheck};
pub use key::ObjectKey;
pub use metrics::{ControllerMetrics, ReconcileOutcome};
#[cfg(feature = "prometheus")]
pub use prometheus::PrometheusMetrics;
pub use watch::Watch;
pub use worker::Reconciler;
