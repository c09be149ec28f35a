//! kcache in one dependency: client-go's cache machinery rebuilt in Rust (reflector, FIFOs,
//! indexed store, shared informers, workqueues) and a controller builder on top, re-exported
//! from the small crates, with a [`prelude`] of the names their APIs need.
//!
//! | module | crate | client-go / controller-runtime |
//! |---|---|---|
//! | [`controller`] | `kcache-controller` | controller-runtime's builder, kube-runtime's `Controller` |
//! | [`informer`] | `kcache-informer` | `SharedIndexInformer`, `SharedInformerFactory`, listers |
//! | [`reflector`] | `kcache-reflector` | `Reflector`, `ListerWatcher`, the pager |
//! | [`delta_fifo`] | `kcache-delta-fifo` | `DeltaFIFO`, `RealFIFO` |
//! | [`store`] | `kcache-store` | `ThreadSafeStore`, `Indexer`, key functions |
//! | [`workqueue`] | `kcache-workqueue` | `util/workqueue`, controller-runtime's priority queue |
//! | [`ring_buffer`] | `kcache-ring-buffer` | `k8s.io/utils/buffer` |
//! | [`shard_selector`] | `kcache-shard-selector` | apimachinery `pkg/sharding` (KEP-5866 shard selectors) |
//! | `leaderelection` (feature `leaderelection`) | `kcache-leaderelection` | `tools/leaderelection` |
//! | `sharding` (feature `sharding`) | `kcache-sharding` | none: shard assignment through member Leases (KEP-5866 sharded list and watch) |
//! | `testserver` (feature `testserver`) | `kcache-testserver` | envtest, fake clientsets |
//!
//! Each crate stays usable alone: a program that needs only a workqueue depends on
//! `kcache-workqueue` and nothing else. Features: `prometheus`, `http` (the controller's),
//! `leaderelection` (the crate, and `Controller::leader_election`), `sharding` (the crate, and `Controller::shard_coordinator` / `static_shard`) and
//! `testserver`.
//!
//! # Example
//!
//! ```no_run
//! use std::sync::Arc;
//! use k8s_openapi::api::core::v1::{ConfigMap, Secret};
//! use kcache::prelude::*;
//!
//! async fn reconcile(cm: Arc<ConfigMap>, ctx: Context<kube::Client>) -> Result<Action, kube::Error> {
//!     let owned: Vec<Arc<Secret>> = ctx.owned::<Secret>();
//!     println!("{} owns {} secrets", ctx.key(), owned.len());
//!     Ok(Action::await_change())
//! }
//!
//! # async fn run(client: kube::Client) -> Result<(), kcache::controller::ControllerError> {
//! let cancel = CancellationToken::new();
//! Controller::<ConfigMap>::new(client.clone(), Watch::all().labels("app=x"))
//!     .owns::<Secret>(Watch::all())
//!     .context(client)
//!     .reconcile(reconcile)
//!     .run(cancel)
//!     .await
//! # }
//! ```

pub use kcache_controller as controller;
pub use kcache_delta_fifo as delta_fifo;
pub use kcache_informer as informer;
#[cfg(feature = "leaderelection")]
pub use kcache_leaderelection as leaderelection;
pub use kcache_reflector as reflector;
pub use kcache_ring_buffer as ring_buffer;
pub use kcache_shard_selector as shard_selector;
#[cfg(feature = "sharding")]
pub use kcache_sharding as sharding;
pub use kcache_store as store;
#[cfg(feature = "testserver")]
pub use kcache_testserver as testserver;
pub use kcache_workqueue as workqueue;

/// The names a controller or an informer user needs, for `use kcache::prelude::*`.
///
/// It exports no traits anonymously and nothing that kube's own prelude has, so
/// `use kube::prelude::*; use kcache::prelude::*;` together resolve every name. [`Action`](kcache_controller::Action) is
/// kube-runtime's own type; `Controller` is kcache's (an explicit
/// `use kube::runtime::Controller` would shadow it).
pub mod prelude {
    #[cfg(feature = "prometheus")]
    pub use kcache_controller::PrometheusMetrics;
    pub use kcache_controller::{
        Action, AsyncHandler, Context, Controller, HealthCheck, Notification, ObjectKey, Retry, Watch,
        WorkGate,
    };
    pub use kcache_informer::{
        DeletedFinalStateUnknown, EventHandlerFuncs, FilteringHandler, HandlerOptions, HasSynced,
        InformerScope, Lister, ObjectOrTombstone, ResourceEventHandler, SharedIndexInformer,
        SharedInformerFactory, wait_for_cache_sync,
    };
    pub use kcache_store::{
        IndexFunc, Indexers, NAMESPACE_INDEX, index_func, meta_namespace_index_func, meta_namespace_key,
        meta_namespace_key_func, namespace_indexers, split_meta_namespace_key,
    };
    pub use kcache_workqueue::{
        AddOpts, HandlerEvent, PriorityQueue, Queue, RateLimitingQueue, Requeue,
        default_controller_rate_limiter, run_workers,
    };
    pub use tokio_util::sync::CancellationToken;
}
