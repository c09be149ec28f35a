//! Metrics hooks: the reconcile counters a controller reports, and the wiring of every provider
//! (workqueue, reflector, informer, controller) the builder hands to the layers below.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use kcache_informer::{HandlerStats, InformerMetrics, SharedIndexInformer};
use kcache_reflector::ReflectorMetrics;
use kcache_workqueue::MetricsProvider;
use kube::Resource;
use serde::de::DeserializeOwned;

/// How one reconcile ended (a label of [`ControllerMetrics::reconcile_finished`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ReconcileOutcome {
    /// `Ok(Action::await_change())`.
    Success,
    /// `Ok(Action::requeue(d))`.
    RequeueAfter,
    /// `Err(_)`: the error policy decided the retry.
    Error,
    /// The reconcile panicked: retried with the rate limiter.
    Panic,
}

impl ReconcileOutcome {
    /// A short snake_case label, as controller-runtime's `controller_runtime_reconcile_total`
    /// `result` label: `success`, `requeue_after`, `error`, `panic`.
    pub fn label(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::RequeueAfter => "requeue_after",
            Self::Error => "error",
            Self::Panic => "panic",
        }
    }
}

/// Receives a controller's reconcile measurements. Every method has an empty default.
///
/// Exported in controller-runtime's style (`controller_runtime_reconcile_total` and friends),
/// they are `controller_reconcile_total{controller, result}`,
/// `controller_reconcile_time_seconds{controller}` and `controller_active_workers{controller}`
/// (the `prometheus` feature's `PrometheusMetrics`).
pub trait ControllerMetrics: Send + Sync + fmt::Debug {
    /// A reconcile (or `on_gone`) of `controller` ended after `duration`.
    fn reconcile_finished(&self, controller: &str, outcome: ReconcileOutcome, duration: Duration) {
        let _ = (controller, outcome, duration);
    }

    /// A worker of `controller` started (`true`) or finished (`false`) a reconcile.
    fn worker_busy(&self, controller: &str, busy: bool) {
        let _ = (controller, busy);
    }
}

/// An informer seen through what metrics read of it, whatever its type.
#[cfg_attr(not(feature = "prometheus"), allow(dead_code))]
pub(crate) trait ObservedInformer: Send + Sync {
    fn name(&self) -> &str;
    fn objects(&self) -> usize;
    fn fifo_len(&self) -> usize;
    fn synced(&self) -> bool;
    fn handlers(&self) -> Vec<HandlerStats>;
}

impl<K: Resource + DeserializeOwned + Send + Sync + 'static> ObservedInformer for SharedIndexInformer<K> {
    fn name(&self) -> &str {
        SharedIndexInformer::name(self)
    }
    fn objects(&self) -> usize {
        self.indexer().len()
    }
    fn fifo_len(&self) -> usize {
        SharedIndexInformer::fifo_len(self)
    }
    fn synced(&self) -> bool {
        self.has_synced()
    }
    fn handlers(&self) -> Vec<HandlerStats> {
        self.handler_stats()
    }
}

/// Something that reads informers at scrape time (the Prometheus collector).
pub(crate) trait InformerObserver: Send + Sync {
    fn observe(&self, informer: Arc<dyn ObservedInformer>);
}

/// Renders every metric as text (the Prometheus registry's encoder, for `/metrics`).
pub(crate) type EncodeFn = Arc<dyn Fn() -> Result<String, fmt::Error> + Send + Sync>;

/// Every metrics provider a controller hands down; all optional.
#[derive(Clone, Default)]
pub(crate) struct MetricsWiring {
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) encoder: Option<EncodeFn>,
    pub(crate) queue: Option<Arc<dyn MetricsProvider>>,
    pub(crate) reflector: Option<Arc<dyn ReflectorMetrics>>,
    pub(crate) informer: Option<Arc<dyn InformerMetrics>>,
    pub(crate) controller: Option<Arc<dyn ControllerMetrics>>,
    pub(crate) observer: Option<Arc<dyn InformerObserver>>,
}

impl fmt::Debug for MetricsWiring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MetricsWiring")
            .field("queue", &self.queue.is_some())
            .field("reflector", &self.reflector.is_some())
            .field("informer", &self.informer.is_some())
            .field("controller", &self.controller.is_some())
            .field("observer", &self.observer.is_some())
            .finish()
    }
}

impl MetricsWiring {
    /// Hands the reflector and informer providers to `informer` (only possible before it
    /// starts: a shared informer started by someone else keeps what it has) and lets the
    /// observer read it.
    pub(crate) fn wire<K: Resource + DeserializeOwned + Send + Sync + 'static>(
        &self,
        informer: &SharedIndexInformer<K>,
    ) {
        if let Some(m) = &self.reflector
            && informer.set_reflector_metrics(Arc::clone(m)).is_err()
        {
            tracing::debug!(
                informer = informer.name(),
                "informer already started: reflector metrics not set"
            );
        }
        if let Some(m) = &self.informer
            && informer.set_metrics(Arc::clone(m)).is_err()
        {
            tracing::debug!(informer = informer.name(), "informer already started: informer metrics not set");
        }
        if let Some(o) = &self.observer {
            o.observe(Arc::new(informer.clone()));
        }
    }
}
