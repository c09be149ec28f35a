//! Scenarios of client-go's `util/workqueue/rate_limiting_queue_test.go`, rewritten for
//! [`RateLimitingQueue`] on Tokio's paused clock.

use std::time::Duration;

use kcache_workqueue::{ItemExponentialFailureRateLimiter, RateLimitingQueue};
use tokio::time::Instant;

const MS: Duration = Duration::from_millis(1);

/// Waits for the next item and returns how long after `start` it became available.
async fn ready_after(q: &RateLimitingQueue<&'static str>) -> Duration {
    let start = Instant::now();
    let item = q.get().await.unwrap();
    q.done(&item);
    start.elapsed()
}

/// Mirrors `TestRateLimitingQueue`: each `add_rate_limited` waits `base * 2^n`, per item, and
/// `forget` resets an item's backoff. The Go test reads the readyAt of each hand-off; here the
/// paused clock shows exactly when the item became available.
#[tokio::test(start_paused = true)]
async fn rate_limiting_queue() {
    let q = RateLimitingQueue::new(ItemExponentialFailureRateLimiter::new(MS, Duration::from_secs(1)));

    q.add_rate_limited("one");
    assert_eq!(ready_after(&q).await, MS);
    q.add_rate_limited("one");
    assert_eq!(ready_after(&q).await, 2 * MS);
    assert_eq!(q.num_requeues(&"one"), 2);

    q.add_rate_limited("two");
    assert_eq!(ready_after(&q).await, MS);
    q.add_rate_limited("two");
    assert_eq!(ready_after(&q).await, 2 * MS);

    q.forget(&"one");
    assert_eq!(q.num_requeues(&"one"), 0);
    q.add_rate_limited("one");
    assert_eq!(ready_after(&q).await, MS);
}

/// Misuse: `forget` of an item the limiter never saw is a no-op; rate-limited adds after
/// shutdown are dropped.
#[tokio::test(start_paused = true)]
async fn misuse_is_a_no_op() {
    let q = RateLimitingQueue::new(ItemExponentialFailureRateLimiter::new(MS, Duration::from_secs(1)));
    q.forget(&"never-seen");
    assert_eq!(q.num_requeues(&"never-seen"), 0);
    q.shut_down();
    q.add_rate_limited("late");
    assert_eq!(q.pending_len(), 0);
    assert_eq!(q.get().await, None);
}
