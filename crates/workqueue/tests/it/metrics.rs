//! Scenarios of client-go's `util/workqueue/metrics_test.go` (exact values on a fake clock,
//! here Tokio's paused clock), plus the retry counter of `delaying_queue_test.go`.

use std::sync::Arc;
use std::time::Duration;

use kcache_workqueue::{DelayingQueue, Queue};
use tokio::time::advance;

use crate::common::{TestProvider, settle};

const US: Duration = Duration::from_micros(1);
const MS: Duration = Duration::from_millis(1);

/// Mirrors `TestMetrics`: depth, adds, queue and work durations and the periodically updated
/// unfinished-work gauges, with exact values.
#[tokio::test(start_paused = true)]
async fn metrics() {
    let mp = Arc::new(TestProvider::default());
    let q: Queue<&str> =
        Queue::builder().name("test").metrics_provider(mp.clone()).unfinished_work_update_period(MS).build();

    q.add("foo");
    assert_eq!(mp.adds.gauge_value(), 1.0);
    assert_eq!(mp.depth.gauge_value(), 1.0);

    advance(50 * US).await;
    let i = q.get().await.unwrap();
    assert_eq!(i, "foo");
    assert_eq!(mp.latency.observation_value(), 5e-05);
    assert_eq!(mp.latency.observation_count(), 1);

    // Added back while processing; the duplicates are collapsed.
    for _ in 0..5 {
        q.add(i);
    }
    assert_eq!(mp.adds.gauge_value(), 2.0);
    assert_eq!(mp.depth.gauge_value(), 1.0);

    advance(25 * US).await;
    q.done(&i);
    assert_eq!(mp.duration.observation_value(), 2.5e-05);
    assert_eq!(mp.duration.observation_count(), 1);
    assert_eq!(mp.depth.gauge_value(), 1.0);

    let i = q.get().await.unwrap();
    assert_eq!(i, "foo");
    assert_eq!(mp.latency.observation_value(), 2.5e-05);
    assert_eq!(mp.latency.observation_count(), 2);

    // Wait for the periodic update (client-go waits on the metric's notify channel).
    let updated = mp.unfinished.notify.notified();
    tokio::pin!(updated);
    updated.as_mut().enable();
    advance(MS).await;
    updated.await;
    assert_eq!(mp.unfinished.gauge_value(), 0.001);
    assert_eq!(mp.longest.gauge_value(), 0.001);

    q.done(&i);
    assert_eq!(mp.duration.observation_value(), 0.001);
    assert_eq!(mp.duration.observation_count(), 2);
    q.shut_down();
}

/// Mirrors `TestMetricShutdown`: the unfinished-work updater stops once the queue shuts down.
#[tokio::test(start_paused = true)]
async fn metric_shutdown() {
    let mp = Arc::new(TestProvider::default());
    let q: Queue<&str> =
        Queue::builder().metrics_provider(mp.clone()).unfinished_work_update_period(MS).build();
    let updated = mp.unfinished.notify.notified();
    tokio::pin!(updated);
    updated.as_mut().enable();
    advance(MS).await;
    updated.await;
    let before = mp.unfinished.set_count();
    assert!(before >= 1);
    q.shut_down();
    advance(Duration::from_secs(3600)).await;
    settle().await;
    assert_eq!(mp.unfinished.set_count(), before, "unexpected update after shutdown");
}

/// Sum and maximum of in-flight ages: two items started 2 ms and 1 ms ago give 3 ms and 2 ms.
#[tokio::test(start_paused = true)]
async fn unfinished_work_sums_in_flight_ages() {
    let mp = Arc::new(TestProvider::default());
    let q: Queue<u8> = Queue::builder()
        .metrics_provider(mp.clone())
        .unfinished_work_update_period(Duration::from_millis(4))
        .build();
    q.add(1);
    q.add(2);
    advance(2 * MS).await;
    let _one = q.get().await.unwrap();
    advance(MS).await;
    let _two = q.get().await.unwrap();
    let updated = mp.unfinished.notify.notified();
    tokio::pin!(updated);
    updated.as_mut().enable();
    advance(MS).await; // t = 4 ms: the first refresh
    updated.await;
    assert_eq!(mp.unfinished.gauge_value(), 0.002 + 0.001);
    assert_eq!(mp.longest.gauge_value(), 0.002);
    q.shut_down();
}

/// client-go counts every AddAfter before shutdown in `retries_total`, zero delays included.
#[tokio::test(start_paused = true)]
async fn retries_count_every_add_after() {
    let mp = Arc::new(TestProvider::default());
    let q: DelayingQueue<&str> = Queue::builder().metrics_provider(mp.clone()).build_delaying().unwrap();
    q.add_after("a", MS);
    q.add_after("a", 2 * MS);
    q.add_after("b", Duration::ZERO);
    assert_eq!(mp.retries(), 3);
    advance(5 * MS).await;
    settle().await;
    // "a" became ready once and "b" was added at once: two effective adds.
    assert_eq!(mp.adds(), 2);
    assert_eq!(mp.depth.gauge_value(), 2.0);
    q.shut_down();
    q.add_after("c", MS);
    assert_eq!(mp.retries(), 3, "no retries after shutdown");
}

/// Without a runtime the unfinished-work refresher runs on a thread; the queue still works.
#[test]
fn metrics_without_a_runtime() {
    let mp = Arc::new(TestProvider::default());
    let q: Queue<u8> = Queue::builder().metrics_provider(mp.clone()).build();
    q.add(1);
    assert_eq!(q.get_blocking(), Some(1));
    q.done(&1);
    assert_eq!(mp.depth.gauge_value(), 0.0);
    assert_eq!(mp.duration.observation_count(), 1);
    q.shut_down();
}
