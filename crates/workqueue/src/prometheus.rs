//! A [`MetricsProvider`] backed by the `prometheus-client` crate (cargo feature `prometheus`).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::metrics::{CounterMetric, GaugeMetric, HistogramMetric, MetricsProvider, SettableGaugeMetric};

/// Label set: `name`, plus `priority` on the depth of priority queues.
type Labels = Vec<(&'static str, String)>;
type HistogramFamily = Family<Labels, Histogram, fn() -> Histogram>;

/// client-go's buckets for the duration histograms (component-base
/// `ExponentialBuckets(10e-7, 10, 10)`: 1 µs up to about 16 minutes).
fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(10e-7, 10.0, 10))
}

/// Registers client-go's workqueue metrics in a `prometheus-client` [`Registry`] and hands
/// out labelled children per queue.
///
/// Metric names: `workqueue_depth`, `workqueue_adds_total`, `workqueue_queue_duration_seconds`,
/// `workqueue_work_duration_seconds`, `workqueue_unfinished_work_seconds`,
/// `workqueue_longest_running_processor_seconds`, `workqueue_retries_total`. Every series has a
/// `name` label; depth also has a `priority` label, empty for queues without priorities.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use kcache_workqueue::{PrometheusMetricsProvider, Queue};
/// use prometheus_client::registry::Registry;
///
/// let mut registry = Registry::default();
/// let provider = PrometheusMetricsProvider::new(&mut registry);
/// let q = Queue::builder().name("pods").metrics_provider(Arc::new(provider)).build();
/// q.add("a");
///
/// let mut text = String::new();
/// prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
/// assert!(text.contains(r#"workqueue_depth{name="pods",priority=""} 1"#));
/// assert!(text.contains(r#"workqueue_adds_total{name="pods"} 1"#));
/// ```
#[derive(Clone)]
pub struct PrometheusMetricsProvider {
    depth: Family<Labels, Gauge>,
    adds: Family<Labels, Counter>,
    latency: HistogramFamily,
    work_duration: HistogramFamily,
    unfinished: Family<Labels, Gauge<f64, AtomicU64>>,
    longest: Family<Labels, Gauge<f64, AtomicU64>>,
    retries: Family<Labels, Counter>,
}

impl fmt::Debug for PrometheusMetricsProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PrometheusMetricsProvider").finish_non_exhaustive()
    }
}

impl PrometheusMetricsProvider {
    /// Registers the metric families under the `workqueue` prefix of `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        let this = Self {
            depth: Family::default(),
            adds: Family::default(),
            latency: Family::new_with_constructor(duration_histogram),
            work_duration: Family::new_with_constructor(duration_histogram),
            unfinished: Family::default(),
            longest: Family::default(),
            retries: Family::default(),
        };
        let r = registry.sub_registry_with_prefix("workqueue");
        r.register("depth", "Current depth of workqueue", this.depth.clone());
        r.register("adds", "Total number of adds handled by workqueue", this.adds.clone());
        r.register(
            "queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            this.latency.clone(),
        );
        r.register(
            "work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            this.work_duration.clone(),
        );
        r.register(
            "unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been observed by \
             work_duration. Large values indicate stuck threads. One can deduce the number of stuck \
             threads by observing the rate at which this increases.",
            this.unfinished.clone(),
        );
        r.register(
            "longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            this.longest.clone(),
        );
        r.register("retries", "Total number of retries handled by workqueue", this.retries.clone());
        this
    }
}

fn name(name: &str) -> Labels {
    vec![("name", name.to_owned())]
}

impl GaugeMetric for Gauge {
    fn inc(&self) {
        Gauge::inc(self);
    }
    fn dec(&self) {
        Gauge::dec(self);
    }
}

impl SettableGaugeMetric for Gauge<f64, AtomicU64> {
    fn set(&self, value: f64) {
        Gauge::set(self, value);
    }
}

impl CounterMetric for Counter {
    fn inc(&self) {
        Counter::inc(self);
    }
}

impl HistogramMetric for Histogram {
    fn observe(&self, value: f64) {
        Histogram::observe(self, value);
    }
}

impl MetricsProvider for PrometheusMetricsProvider {
    fn new_depth_metric(&self, n: &str) -> Arc<dyn GaugeMetric> {
        Arc::new(self.depth.get_or_create_owned(&vec![("name", n.to_owned()), ("priority", String::new())]))
    }
    fn new_depth_with_priority_metric(&self, n: &str, priority: i32) -> Arc<dyn GaugeMetric> {
        Arc::new(
            self.depth.get_or_create_owned(&vec![("name", n.to_owned()), ("priority", priority.to_string())]),
        )
    }
    fn new_adds_metric(&self, n: &str) -> Arc<dyn CounterMetric> {
        Arc::new(self.adds.get_or_create_owned(&name(n)))
    }
    fn new_latency_metric(&self, n: &str) -> Arc<dyn HistogramMetric> {
        Arc::new(self.latency.get_or_create_owned(&name(n)))
    }
    fn new_work_duration_metric(&self, n: &str) -> Arc<dyn HistogramMetric> {
        Arc::new(self.work_duration.get_or_create_owned(&name(n)))
    }
    fn new_unfinished_work_seconds_metric(&self, n: &str) -> Arc<dyn SettableGaugeMetric> {
        Arc::new(self.unfinished.get_or_create_owned(&name(n)))
    }
    fn new_longest_running_processor_seconds_metric(&self, n: &str) -> Arc<dyn SettableGaugeMetric> {
        Arc::new(self.longest.get_or_create_owned(&name(n)))
    }
    fn new_retries_metric(&self, n: &str) -> Arc<dyn CounterMetric> {
        Arc::new(self.retries.get_or_create_owned(&name(n)))
    }
}
