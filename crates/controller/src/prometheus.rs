//! `PrometheusMetrics` (feature `prometheus`): one prometheus-client registry for the
//! workqueue, reflector, informer and reconcile metrics.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use kcache_informer::{InformerFailure, InformerMetrics, SharedIndexInformer};
use kcache_reflector::{ErrorKind, ReflectorMetrics, RelistReason, ShardMode};
use kcache_workqueue::{MetricsProvider, PrometheusMetricsProvider};
use kube::Resource;
use parking_lot::{Mutex, MutexGuard};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use serde::de::DeserializeOwned;

use crate::metrics::{
    ControllerMetrics, InformerObserver, MetricsWiring, ObservedInformer, ReconcileOutcome,
};

type Labels = Vec<(&'static str, String)>;
type HistogramFamily = Family<Labels, Histogram, fn() -> Histogram>;

/// client-go's duration buckets (component-base `ExponentialBuckets(10e-7, 10, 10)`: 1 µs up
/// to about 16 minutes), as the workqueue's.
fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(10e-7, 10.0, 10))
}

fn label(key: &'static str, value: &str) -> Labels {
    vec![(key, value.to_owned())]
}

fn gauge_value(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Every kcache metric in one prometheus-client [`Registry`]: give it to a controller
/// ([`Controller::metrics`](crate::Controller::metrics)) and serve [`encode`](Self::encode)
/// (or let [`Controller::http`](crate::Controller::http) serve `/metrics`).
///
/// | metrics | labels | from |
/// |---|---|---|
/// | `workqueue_depth`, `workqueue_adds_total`, `workqueue_queue_duration_seconds`, `workqueue_work_duration_seconds`, `workqueue_unfinished_work_seconds`, `workqueue_longest_running_processor_seconds`, `workqueue_retries_total` | `name` (the controller's) | client-go's workqueue metrics ([`PrometheusMetricsProvider`]) |
/// | `reflector_lists_total`, `reflector_list_duration_seconds`, `reflector_list_failures_total` (`kind`), `reflector_watches_total` (`watch_list`), `reflector_watch_ends_total` (`result`), `reflector_watch_events_total` (`type`), `reflector_relists_total` (`reason`), `reflector_last_resource_version_timestamp_seconds`, `reflector_shard_mode` (`mode`: 1 for `unsharded`, `server_side` or `client_side`, whichever is in effect) | `name` (the informer's) | [`ReflectorMetrics`] |
/// | `informer_failures_total` (`cause`), `informer_handler_panics_total` (`handler`) | `name` | [`InformerMetrics`] |
/// | `informer_cache_objects`, `informer_fifo_length`, `informer_synced`, `informer_handler_pending`, `informer_handler_pending_high_water`, `informer_handler_delivered_total` (`handler`) | `name` | read from each informer at scrape time: every handler's backlog, whoever registered it |
/// | `controller_reconcile_total` (`result`), `controller_reconcile_time_seconds`, `controller_active_workers` | `controller` | [`ControllerMetrics`] (controller-runtime's `controller_runtime_*`) |
///
/// Cheap to clone: clones share the registry. The informers a controller reads are observed by
/// the controller; [`observe_informer`](Self::observe_informer) adds others.
///
/// # Examples
///
/// ```no_run
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache_controller::{Controller, PrometheusMetrics, Watch};
///
/// # fn f(client: kube::Client) {
/// let metrics = PrometheusMetrics::new();
/// let controller = Controller::<ConfigMap>::new(client, Watch::all()).metrics(&metrics);
/// // Later, in a /metrics handler:
/// let text = metrics.encode().unwrap();
/// # let _ = (controller, text);
/// # }
/// ```
#[derive(Clone)]
pub struct PrometheusMetrics {
    inner: Arc<Inner>,
}

struct Inner {
    registry: Mutex<Registry>,
    workqueue: PrometheusMetricsProvider,
    reflector: Arc<ReflectorFamilies>,
    informer: Arc<InformerFamilies>,
    controller: Arc<ControllerFamilies>,
    observed: Arc<Observed>,
}

impl fmt::Debug for PrometheusMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PrometheusMetrics").field("observed", &self.inner.observed).finish_non_exhaustive()
    }
}

impl Default for PrometheusMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl PrometheusMetrics {
    /// A registry with every metric family registered.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let workqueue = PrometheusMetricsProvider::new(&mut registry);
        let reflector = Arc::new(ReflectorFamilies::register(registry.sub_registry_with_prefix("reflector")));
        let observed = Arc::new(Observed::default());
        let informer_registry = registry.sub_registry_with_prefix("informer");
        let informer = Arc::new(InformerFamilies::register(informer_registry));
        informer_registry.register_collector(Box::new(Arc::clone(&observed)));
        let controller =
            Arc::new(ControllerFamilies::register(registry.sub_registry_with_prefix("controller")));
        Self {
            inner: Arc::new(Inner {
                registry: Mutex::new(registry),
                workqueue,
                reflector,
                informer,
                controller,
                observed,
            }),
        }
    }

    /// The registry, to register metrics of your own next to kcache's.
    pub fn registry(&self) -> MutexGuard<'_, Registry> {
        self.inner.registry.lock()
    }

    /// Every metric as OpenMetrics text (the body of a `/metrics` response, content type
    /// `application/openmetrics-text; version=1.0.0; charset=utf-8`).
    ///
    /// # Errors
    ///
    /// Only if formatting fails (a collector's error).
    pub fn encode(&self) -> Result<String, fmt::Error> {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.inner.registry.lock())?;
        Ok(text)
    }

    /// The workqueue metrics provider, for a queue of your own
    /// (`Queue::builder().metrics_provider(..)`).
    pub fn workqueue(&self) -> Arc<dyn MetricsProvider> {
        Arc::new(self.inner.workqueue.clone())
    }

    /// The reflector metrics, for an informer of your own
    /// (`SharedIndexInformer::set_reflector_metrics`).
    pub fn reflector(&self) -> Arc<dyn ReflectorMetrics> {
        self.inner.reflector.clone()
    }

    /// The informer metrics (failures, handler panics), for a factory or an informer of your own
    /// (`SharedInformerFactory::metrics`, `SharedIndexInformer::set_metrics`).
    pub fn informer(&self) -> Arc<dyn InformerMetrics> {
        self.inner.informer.clone()
    }

    /// The reconcile metrics.
    pub fn controller(&self) -> Arc<dyn ControllerMetrics> {
        self.inner.controller.clone()
    }

    /// Reports `informer`'s cache size, FIFO length, sync state and every handler's backlog at
    /// each scrape (an informer is observed once, by name, however often it is given).
    pub fn observe_informer<K: Resource + DeserializeOwned + Send + Sync + 'static>(
        &self,
        informer: &SharedIndexInformer<K>,
    ) {
        self.inner.observed.observe(Arc::new(informer.clone()));
    }

    pub(crate) fn wiring(&self) -> MetricsWiring {
        let this = self.clone();
        MetricsWiring {
            encoder: Some(Arc::new(move || this.encode())),
            queue: Some(self.workqueue()),
            reflector: Some(self.reflector()),
            informer: Some(self.informer()),
            controller: Some(self.controller()),
            observer: Some(self.inner.observed.clone()),
        }
    }
}

#[derive(Debug)]
struct ReflectorFamilies {
    lists: Family<Labels, Counter<u64, AtomicU64>>,
    list_duration: HistogramFamily,
    list_failures: Family<Labels, Counter<u64, AtomicU64>>,
    watches: Family<Labels, Counter<u64, AtomicU64>>,
    watch_ends: Family<Labels, Counter<u64, AtomicU64>>,
    events: Family<Labels, Counter<u64, AtomicU64>>,
    relists: Family<Labels, Counter<u64, AtomicU64>>,
    last_sync: Family<Labels, Gauge<f64, AtomicU64>>,
    shard_mode: Family<Labels, Gauge>,
}

impl ReflectorFamilies {
    fn register(r: &mut Registry) -> Self {
        let this = Self {
            lists: Family::default(),
            list_duration: Family::new_with_constructor(duration_histogram),
            list_failures: Family::default(),
            watches: Family::default(),
            watch_ends: Family::default(),
            events: Family::default(),
            relists: Family::default(),
            last_sync: Family::default(),
            shard_mode: Family::default(),
        };
        r.register("lists", "Completed LISTs (all pages), by reflector", this.lists.clone());
        r.register("list_duration_seconds", "How long a complete LIST took", this.list_duration.clone());
        r.register("list_failures", "Failed LISTs, by error kind", this.list_failures.clone());
        r.register("watches", "Watches opened (watch_list: a watch-list request)", this.watches.clone());
        r.register("watch_ends", "Watches ended, cleanly or by error kind", this.watch_ends.clone());
        r.register("watch_events", "Watch events received, by type", this.events.clone());
        r.register("relists", "Relists, by reason", this.relists.clone());
        r.register(
            "last_resource_version_timestamp_seconds",
            "When the reflector last published a resource version (Unix time): its cache's age is now minus this",
            this.last_sync.clone(),
        );
        r.register(
            "shard_mode",
            "Who filters by the reflector's shard selector: 1 for the mode in effect (unsharded, server_side, client_side), 0 for the others",
            this.shard_mode.clone(),
        );
        this
    }
}

impl ReflectorMetrics for ReflectorFamilies {
    fn list_completed(&self, reflector: &str, _items: usize, duration: Duration) {
        self.lists.get_or_create(&label("name", reflector)).inc();
        self.list_duration.get_or_create(&label("name", reflector)).observe(duration.as_secs_f64());
    }
    fn list_failed(&self, reflector: &str, kind: ErrorKind) {
        let labels = vec![("name", reflector.to_owned()), ("kind", kind.as_str().to_owned())];
        self.list_failures.get_or_create(&labels).inc();
    }
    fn watch_started(&self, reflector: &str, watch_list: bool) {
        let labels = vec![("name", reflector.to_owned()), ("watch_list", watch_list.to_string())];
        self.watches.get_or_create(&labels).inc();
    }
    fn watch_ended(&self, reflector: &str, error: Option<ErrorKind>) {
        let result = error.map_or("clean", ErrorKind::as_str);
        let labels = vec![("name", reflector.to_owned()), ("result", result.to_owned())];
        self.watch_ends.get_or_create(&labels).inc();
    }
    fn event_received(&self, reflector: &str, event_type: &'static str) {
        let labels = vec![("name", reflector.to_owned()), ("type", event_type.to_owned())];
        self.events.get_or_create(&labels).inc();
    }
    fn relist(&self, reflector: &str, reason: RelistReason) {
        let labels = vec![("name", reflector.to_owned()), ("reason", reason.as_str().to_owned())];
        self.relists.get_or_create(&labels).inc();
    }
    fn last_sync_resource_version(&self, reflector: &str, _resource_version: &str) {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        self.last_sync.get_or_create(&label("name", reflector)).set(now.as_secs_f64());
    }
    fn shard_mode(&self, reflector: &str, mode: ShardMode) {
        for m in ShardMode::ALL {
            let labels = vec![("name", reflector.to_owned()), ("mode", m.as_str().to_owned())];
            self.shard_mode.get_or_create(&labels).set(i64::from(m == mode));
        }
    }
}

#[derive(Debug)]
struct InformerFamilies {
    failures: Family<Labels, Counter<u64, AtomicU64>>,
    handler_panics: Family<Labels, Counter<u64, AtomicU64>>,
}

impl InformerFamilies {
    fn register(r: &mut Registry) -> Self {
        let this = Self { failures: Family::default(), handler_panics: Family::default() };
        r.register("failures", "Informer failures (the informer stopped), by cause", this.failures.clone());
        r.register("handler_panics", "Panics of event handlers, by handler", this.handler_panics.clone());
        this
    }
}

impl InformerMetrics for InformerFamilies {
    fn informer_failed(&self, failure: &InformerFailure) {
        let labels =
            vec![("name", failure.informer().to_owned()), ("cause", failure.cause().label().to_owned())];
        self.failures.get_or_create(&labels).inc();
    }
    fn handler_panicked(&self, informer: &str, handler: &str) {
        let labels = vec![("name", informer.to_owned()), ("handler", handler.to_owned())];
        self.handler_panics.get_or_create(&labels).inc();
    }
}

#[derive(Debug)]
struct ControllerFamilies {
    reconciles: Family<Labels, Counter<u64, AtomicU64>>,
    reconcile_time: HistogramFamily,
    active_workers: Family<Labels, Gauge>,
}

impl ControllerFamilies {
    fn register(r: &mut Registry) -> Self {
        let this = Self {
            reconciles: Family::default(),
            reconcile_time: Family::new_with_constructor(duration_histogram),
            active_workers: Family::default(),
        };
        r.register(
            "reconcile",
            "Reconciles, by result (success, requeue_after, error, panic)",
            this.reconciles.clone(),
        );
        r.register("reconcile_time_seconds", "How long a reconcile took", this.reconcile_time.clone());
        r.register("active_workers", "Workers reconciling now", this.active_workers.clone());
        this
    }
}

impl ControllerMetrics for ControllerFamilies {
    fn reconcile_finished(&self, controller: &str, outcome: ReconcileOutcome, duration: Duration) {
        let labels = vec![("controller", controller.to_owned()), ("result", outcome.label().to_owned())];
        self.reconciles.get_or_create(&labels).inc();
        self.reconcile_time.get_or_create(&label("controller", controller)).observe(duration.as_secs_f64());
    }
    fn worker_busy(&self, controller: &str, busy: bool) {
        let gauge = self.active_workers.get_or_create(&label("controller", controller));
        if busy {
            gauge.inc();
        } else {
            gauge.dec();
        }
    }
}

/// The informers read at scrape time, by name.
#[derive(Default)]
struct Observed {
    informers: Mutex<Vec<Arc<dyn ObservedInformer>>>,
}

impl fmt::Debug for Observed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<String> = self.informers.lock().iter().map(|i| i.name().to_owned()).collect();
        f.debug_struct("Observed").field("informers", &names).finish()
    }
}

impl InformerObserver for Observed {
    fn observe(&self, informer: Arc<dyn ObservedInformer>) {
        let mut informers = self.informers.lock();
        // One series per informer: controllers sharing one informer observe it once.
        if !informers.iter().any(|i| i.name() == informer.name()) {
            informers.push(informer);
        }
    }
}

impl Collector for Observed {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), fmt::Error> {
        let objects = Family::<Labels, Gauge>::default();
        let fifo = Family::<Labels, Gauge>::default();
        let synced = Family::<Labels, Gauge>::default();
        let pending = Family::<Labels, Gauge>::default();
        let high_water = Family::<Labels, Gauge>::default();
        let delivered = Family::<Labels, Counter<u64, AtomicU64>>::default();
        for informer in self.informers.lock().iter() {
            let name = informer.name();
            objects.get_or_create(&label("name", name)).set(gauge_value(informer.objects() as u64));
            fifo.get_or_create(&label("name", name)).set(gauge_value(informer.fifo_len() as u64));
            synced.get_or_create(&label("name", name)).set(i64::from(informer.synced()));
            for h in informer.handlers() {
                let labels = vec![("name", name.to_owned()), ("handler", h.name)];
                pending.get_or_create(&labels).set(gauge_value(h.pending as u64));
                high_water.get_or_create(&labels).set(gauge_value(h.pending_high_water as u64));
                delivered.get_or_create(&labels).inc_by(h.delivered);
            }
        }
        let families: [(&str, &str, &dyn EncodeMetric); 6] = [
            ("cache_objects", "Objects in the informer's cache", &objects),
            (
                "fifo_length",
                "Deltas (in-order FIFO) or keys (DeltaFIFO) waiting in the informer's FIFO",
                &fifo,
            ),
            ("synced", "1 while the informer runs with its initial list in the cache", &synced),
            ("handler_pending", "Notifications waiting for an event handler: its backlog", &pending),
            ("handler_pending_high_water", "The largest backlog an event handler has had", &high_water),
            ("handler_delivered", "Notifications delivered to an event handler", &delivered),
        ];
        for (name, help, family) in families {
            let metric = encoder.encode_descriptor(name, help, None, family.metric_type())?;
            family.encode(metric)?;
        }
        Ok(())
    }
}
