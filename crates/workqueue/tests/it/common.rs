//! Test helpers shared by the integration tests: a recording metrics provider (the
//! `testMetricsProvider` of client-go's metrics_test.go and the `fakeMetricsProvider` of
//! controller-runtime's priority queue tests).

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::sync::Arc;

use kcache_workqueue::{CounterMetric, GaugeMetric, HistogramMetric, MetricsProvider, SettableGaugeMetric};
use parking_lot::Mutex;
use tokio::sync::Notify;

/// One recorded metric: counts for gauges/counters, last value and count for observations.
#[derive(Debug, Default)]
pub struct TestMetric {
    inner: Mutex<Recorded>,
    /// Notified on every update (client-go's `notifyCh`).
    pub notify: Notify,
}

#[derive(Debug, Default, Clone, Copy)]
struct Recorded {
    inc: i64,
    dec: i64,
    set: Option<f64>,
    set_count: usize,
    observed_value: f64,
    observed_count: usize,
}

impl TestMetric {
    /// Value as client-go's `gaugeValue`: the last set value, else inc - dec.
    pub fn gauge_value(&self) -> f64 {
        let r = *self.inner.lock();
        r.set.unwrap_or((r.inc - r.dec) as f64)
    }
    /// How many times `set` was called.
    pub fn set_count(&self) -> usize {
        self.inner.lock().set_count
    }
    pub fn observation_value(&self) -> f64 {
        self.inner.lock().observed_value
    }
    pub fn observation_count(&self) -> usize {
        self.inner.lock().observed_count
    }
}

impl GaugeMetric for TestMetric {
    fn inc(&self) {
        self.inner.lock().inc += 1;
        self.notify.notify_waiters();
    }
    fn dec(&self) {
        self.inner.lock().dec += 1;
        self.notify.notify_waiters();
    }
}
impl CounterMetric for TestMetric {
    fn inc(&self) {
        GaugeMetric::inc(self);
    }
}
impl SettableGaugeMetric for TestMetric {
    fn set(&self, value: f64) {
        let mut r = self.inner.lock();
        r.set = Some(value);
        r.set_count += 1;
        drop(r);
        self.notify.notify_waiters();
    }
}
impl HistogramMetric for TestMetric {
    fn observe(&self, value: f64) {
        let mut r = self.inner.lock();
        r.observed_value = value;
        r.observed_count += 1;
        drop(r);
        self.notify.notify_waiters();
    }
}

/// Records every metric of one queue; depth is also kept per priority.
#[derive(Debug, Default)]
pub struct TestProvider {
    pub depth: Arc<TestMetric>,
    pub depth_by_priority: Mutex<BTreeMap<i32, Arc<TestMetric>>>,
    pub adds: Arc<TestMetric>,
    pub latency: Arc<TestMetric>,
    pub duration: Arc<TestMetric>,
    pub unfinished: Arc<TestMetric>,
    pub longest: Arc<TestMetric>,
    pub retries: Arc<TestMetric>,
}

impl TestProvider {
    /// Depth per priority, as controller-runtime's tests compare it (`map[int]int`).
    pub fn depths(&self) -> BTreeMap<i32, i64> {
        self.depth_by_priority.lock().iter().map(|(p, m)| (*p, m.gauge_value() as i64)).collect()
    }
    pub fn adds(&self) -> i64 {
        self.adds.gauge_value() as i64
    }
    pub fn retries(&self) -> i64 {
        self.retries.gauge_value() as i64
    }
}

impl MetricsProvider for TestProvider {
    fn new_depth_metric(&self, _name: &str) -> Arc<dyn GaugeMetric> {
        self.depth.clone()
    }
    fn new_depth_with_priority_metric(&self, _name: &str, priority: i32) -> Arc<dyn GaugeMetric> {
        self.depth_by_priority.lock().entry(priority).or_default().clone()
    }
    fn new_adds_metric(&self, _name: &str) -> Arc<dyn CounterMetric> {
        self.adds.clone()
    }
    fn new_latency_metric(&self, _name: &str) -> Arc<dyn HistogramMetric> {
        self.latency.clone()
    }
    fn new_work_duration_metric(&self, _name: &str) -> Arc<dyn HistogramMetric> {
        self.duration.clone()
    }
    fn new_unfinished_work_seconds_metric(&self, _name: &str) -> Arc<dyn SettableGaugeMetric> {
        self.unfinished.clone()
    }
    fn new_longest_running_processor_seconds_metric(&self, _name: &str) -> Arc<dyn SettableGaugeMetric> {
        self.longest.clone()
    }
    fn new_retries_metric(&self, _name: &str) -> Arc<dyn CounterMetric> {
        self.retries.clone()
    }
}

/// Lets spawned tasks (timers) run after the paused clock moved.
pub async fn settle() {
    for _ in 0..8 {
        tokio::task::yield_now().await;
    }
}
