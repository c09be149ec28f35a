//! Queue metrics: the provider trait (client-go's `MetricsProvider`) and the bookkeeping the
//! queues do under their lock.
//!
//! Names and meanings follow client-go (subsystem `workqueue`, label `name`): `depth`,
//! `adds_total`, `queue_duration_seconds`, `work_duration_seconds`, `unfinished_work_seconds`,
//! `longest_running_processor_seconds`, `retries_total`. A queue built without a provider keeps
//! `None` here and pays one branch per operation; nothing is allocated or timed.

use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

/// A gauge that goes up and down (`depth`).
pub trait GaugeMetric: Send + Sync {
    /// Adds one.
    fn inc(&self);
    /// Subtracts one.
    fn dec(&self);
}

/// A gauge that is set to a value (`unfinished_work_seconds`, `longest_running_processor_seconds`).
pub trait SettableGaugeMetric: Send + Sync {
    /// Sets the value.
    fn set(&self, value: f64);
}

/// A monotonically increasing counter (`adds_total`, `retries_total`).
pub trait CounterMetric: Send + Sync {
    /// Adds one.
    fn inc(&self);
}

/// A distribution of observations in seconds (`queue_duration_seconds`, `work_duration_seconds`).
pub trait HistogramMetric: Send + Sync {
    /// Records one observation.
    fn observe(&self, value: f64);
}

/// Creates the metrics of a named queue, like client-go's `workqueue.MetricsProvider`.
///
/// Each method is called once per queue (the depth-by-priority one once per priority seen).
/// Implementations usually register a labelled child of one metric family with `name` as the
/// label value. The `prometheus` cargo feature ships one backed by `prometheus-client`.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicI64, Ordering};
/// use kcache_workqueue::{CounterMetric, GaugeMetric, HistogramMetric, MetricsProvider, Queue};
/// use kcache_workqueue::{NoopMetric, SettableGaugeMetric};
///
/// #[derive(Debug, Default)]
/// struct Depth(AtomicI64);
/// impl GaugeMetric for Depth {
///     fn inc(&self) { self.0.fetch_add(1, Ordering::Relaxed); }
///     fn dec(&self) { self.0.fetch_sub(1, Ordering::Relaxed); }
/// }
///
/// #[derive(Debug, Default)]
/// struct OnlyDepth(Arc<Depth>);
/// impl MetricsProvider for OnlyDepth {
///     fn new_depth_metric(&self, _name: &str) -> Arc<dyn GaugeMetric> { self.0.clone() }
///     fn new_adds_metric(&self, _: &str) -> Arc<dyn CounterMetric> { Arc::new(NoopMetric) }
///     fn new_latency_metric(&self, _: &str) -> Arc<dyn HistogramMetric> { Arc::new(NoopMetric) }
///     fn new_work_duration_metric(&self, _: &str) -> Arc<dyn HistogramMetric> { Arc::new(NoopMetric) }
///     fn new_unfinished_work_seconds_metric(&self, _: &str) -> Arc<dyn SettableGaugeMetric> {
///         Arc::new(NoopMetric)
///     }
///     fn new_longest_running_processor_seconds_metric(&self, _: &str) -> Arc<dyn SettableGaugeMetric> {
///         Arc::new(NoopMetric)
///     }
///     fn new_retries_metric(&self, _: &str) -> Arc<dyn CounterMetric> { Arc::new(NoopMetric) }
/// }
///
/// let provider = OnlyDepth::default();
/// let depth = provider.0.clone();
/// let q = Queue::builder().name("demo").metrics_provider(Arc::new(provider)).build();
/// q.add("a");
/// q.add("b");
/// assert_eq!(depth.0.load(Ordering::Relaxed), 2);
/// ```
pub trait MetricsProvider: Send + Sync {
    /// `workqueue_depth`: items waiting in the queue (+1 on an effective add, -1 on get).
    fn new_depth_metric(&self, name: &str) -> Arc<dyn GaugeMetric>;
    /// Depth of one priority level of a priority queue. Defaults to the
    /// unlabelled depth gauge, so providers without a priority label still count every item.
    fn new_depth_with_priority_metric(&self, name: &str, priority: i32) -> Arc<dyn GaugeMetric> {
        let _ = priority;
        self.new_depth_metric(name)
    }
    /// `workqueue_adds_total`: effective adds.
    fn new_adds_metric(&self, name: &str) -> Arc<dyn CounterMetric>;
    /// `workqueue_queue_duration_seconds`: time from the first add to the get that hands it out.
    fn new_latency_metric(&self, name: &str) -> Arc<dyn HistogramMetric>;
    /// `workqueue_work_duration_seconds`: time from get to done.
    fn new_work_duration_metric(&self, name: &str) -> Arc<dyn HistogramMetric>;
    /// `workqueue_unfinished_work_seconds`: summed age of in-flight items, refreshed periodically.
    fn new_unfinished_work_seconds_metric(&self, name: &str) -> Arc<dyn SettableGaugeMetric>;
    /// `workqueue_longest_running_processor_seconds`: age of the oldest in-flight item.
    fn new_longest_running_processor_seconds_metric(&self, name: &str) -> Arc<dyn SettableGaugeMetric>;
    /// `workqueue_retries_total`: delayed or rate-limited adds.
    fn new_retries_metric(&self, name: &str) -> Arc<dyn CounterMetric>;
}

/// A metric that records nothing; handy for providers that only export some metrics.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopMetric;

impl GaugeMetric for NoopMetric {
    fn inc(&self) {}
    fn dec(&self) {}
}
impl SettableGaugeMetric for NoopMetric {
    fn set(&self, _value: f64) {}
}
impl CounterMetric for NoopMetric {
    fn inc(&self) {}
}
impl HistogramMetric for NoopMetric {
    fn observe(&self, _value: f64) {}
}

/// How often unfinished-work gauges are refreshed by default (client-go's 500 ms).
pub(crate) const DEFAULT_UNFINISHED_WORK_UPDATE_PERIOD: Duration = Duration::from_millis(500);

/// Most distinct priority labels a priority queue creates; more would explode the series count.
/// Priorities beyond the cap share the gauge of the first priority that overflowed.
const MAX_PRIORITY_LABELS: usize = 25;

/// Seconds elapsed since `t`, as client-go's `sinceInSeconds`.
fn since(now: Instant, t: Instant) -> f64 {
    now.saturating_duration_since(t).as_secs_f64()
}

/// Per-queue metric handles and the timestamps they need. Lives inside the queue's lock, like
/// client-go's `defaultQueueMetrics` (whose methods are called with the queue lock held).
pub(crate) struct QueueMetrics<T> {
    provider: Arc<dyn MetricsProvider>,
    name: Arc<str>,
    depth: Arc<dyn GaugeMetric>,
    /// Depth gauges by priority (priority queue only), created on first use.
    depth_by_priority: HashMap<i32, Arc<dyn GaugeMetric>>,
    /// Shared gauge for priorities past [`MAX_PRIORITY_LABELS`].
    depth_overflow: Option<Arc<dyn GaugeMetric>>,
    adds: Arc<dyn CounterMetric>,
    latency: Arc<dyn HistogramMetric>,
    work_duration: Arc<dyn HistogramMetric>,
    unfinished: Arc<dyn SettableGaugeMetric>,
    longest: Arc<dyn SettableGaugeMetric>,
    /// First-add time of every item counted in depth and not yet handed out.
    add_times: HashMap<T, Instant>,
    /// Get time of every item handed out and not yet done.
    processing_start: HashMap<T, Instant>,
}

impl<T> fmt::Debug for QueueMetrics<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QueueMetrics")
            .field("name", &self.name)
            .field("queued", &self.add_times.len())
            .field("processing", &self.processing_start.len())
            .finish_non_exhaustive()
    }
}

impl<T: Eq + Hash + Clone> QueueMetrics<T> {
    pub(crate) fn new(provider: Arc<dyn MetricsProvider>, name: Arc<str>) -> Self {
        Self {
            depth: provider.new_depth_metric(&name),
            depth_by_priority: HashMap::new(),
            depth_overflow: None,
            adds: provider.new_adds_metric(&name),
            latency: provider.new_latency_metric(&name),
            work_duration: provider.new_work_duration_metric(&name),
            unfinished: provider.new_unfinished_work_seconds_metric(&name),
            longest: provider.new_longest_running_processor_seconds_metric(&name),
            add_times: HashMap::new(),
            processing_start: HashMap::new(),
            provider,
            name,
        }
    }

    fn depth(&mut self, priority: Option<i32>) -> &Arc<dyn GaugeMetric> {
        let Some(p) = priority else { return &self.depth };
        if !self.depth_by_priority.contains_key(&p) && self.depth_by_priority.len() >= MAX_PRIORITY_LABELS {
            let overflow = self
                .depth_overflow
                .get_or_insert_with(|| self.provider.new_depth_with_priority_metric(&self.name, p));
            return overflow;
        }
        let (provider, name) = (&self.provider, &self.name);
        self.depth_by_priority.entry(p).or_insert_with(|| provider.new_depth_with_priority_metric(name, p))
    }

    /// An item became ready (entered the depth count).
    pub(crate) fn add(&mut self, item: &T, priority: Option<i32>) {
        self.adds.inc();
        self.depth(priority).inc();
        if !self.add_times.contains_key(item) {
            self.add_times.insert(item.clone(), Instant::now());
        }
    }

    /// An item was handed to a worker.
    pub(crate) fn get(&mut self, item: &T, priority: Option<i32>) {
        let now = Instant::now();
        self.depth(priority).dec();
        self.processing_start.insert(item.clone(), now);
        if let Some(t) = self.add_times.remove(item) {
            self.latency.observe(since(now, t));
        }
    }

    /// A queued item moved from one priority level to another.
    pub(crate) fn move_priority(&mut self, from: i32, to: i32) {
        self.depth(Some(from)).dec();
        self.depth(Some(to)).inc();
    }

    /// A worker finished an item.
    pub(crate) fn done(&mut self, item: &T) {
        if let Some(t) = self.processing_start.remove(item) {
            self.work_duration.observe(since(Instant::now(), t));
        }
    }

    /// Refreshes the unfinished-work gauges (client-go's `updateUnfinishedWork`).
    pub(crate) fn update_unfinished_work(&self) {
        let now = Instant::now();
        let mut total = 0.0;
        let mut oldest = 0.0_f64;
        for t in self.processing_start.values() {
            let age = since(now, *t);
            total += age;
            oldest = oldest.max(age);
        }
        self.unfinished.set(total);
        self.longest.set(oldest);
    }
}

/// Spawns the periodic unfinished-work refresher: a Tokio task when a runtime is current,
/// otherwise a plain thread (so queues used from threads still report). `tick` returns `false`
/// once the queue is gone or shut down, which ends the loop.
pub(crate) fn spawn_unfinished_work_loop(period: Duration, tick: impl Fn() -> bool + Send + 'static) {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => {
            // The first tick is fixed now, not when the task first runs, so ticks land exactly
            // one period apart from the queue's creation (paused-clock tests rely on it).
            let first = Instant::now() + period;
            handle.spawn(async move {
                let mut interval = tokio::time::interval_at(first, period);
                interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    interval.tick().await;
                    if !tick() {
                        break;
                    }
                }
            });
        }
        Err(_) => {
            let spawned = std::thread::Builder::new().name("workqueue-metrics".into()).spawn(move || {
                loop {
                    std::thread::sleep(period);
                    if !tick() {
                        break;
                    }
                }
            });
            if let Err(e) = spawned {
                tracing::error!(error = %e, "workqueue: could not start the unfinished-work metrics thread");
            }
        }
    }
}

/// The `retries_total` counter of a delaying queue.
#[derive(Clone)]
pub(crate) struct RetryMetrics {
    retries: Arc<dyn CounterMetric>,
}

impl fmt::Debug for RetryMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryMetrics").finish_non_exhaustive()
    }
}

impl RetryMetrics {
    pub(crate) fn new(provider: &dyn MetricsProvider, name: &str) -> Self {
        Self { retries: provider.new_retries_metric(name) }
    }

    pub(crate) fn retry(&self) {
        self.retries.inc();
    }
}
