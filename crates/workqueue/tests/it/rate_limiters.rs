//! Scenarios of client-go's `util/workqueue/default_rate_limiters_test.go`, rewritten for the
//! [`RateLimiter`] implementations.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kcache_workqueue::{
    BucketRateLimiter, ItemExponentialFailureRateLimiter, ItemFastSlowRateLimiter, MaxOfRateLimiter,
    RateLimiter, WithMaxWaitRateLimiter, default_controller_rate_limiter,
};

const MS: Duration = Duration::from_millis(1);
const S: Duration = Duration::from_secs(1);

/// Mirrors `TestItemExponentialFailureRateLimiter`.
#[test]
fn item_exponential_failure_rate_limiter() {
    let l = ItemExponentialFailureRateLimiter::new(MS, S);
    for expected in [1, 2, 4, 8, 16] {
        assert_eq!(l.when(&"one"), expected * MS);
    }
    assert_eq!(l.num_requeues(&"one"), 5);
    assert_eq!(l.when(&"two"), MS);
    assert_eq!(l.when(&"two"), 2 * MS);
    assert_eq!(l.num_requeues(&"two"), 2);
    l.forget(&"one");
    assert_eq!(l.num_requeues(&"one"), 0);
    assert_eq!(l.when(&"one"), MS);
}

/// Mirrors `TestItemExponentialFailureRateLimiterOverFlow`, and goes further: a million
/// failures still yield the maximum.
#[test]
fn item_exponential_failure_rate_limiter_overflow() {
    let l = ItemExponentialFailureRateLimiter::new(MS, 1000 * S);
    for _ in 0..5 {
        l.when(&"one");
    }
    assert_eq!(l.when(&"one"), 32 * MS);
    for _ in 0..1000 {
        l.when(&"overflow1");
    }
    assert_eq!(l.when(&"overflow1"), 1000 * S);

    let l = ItemExponentialFailureRateLimiter::new(Duration::from_secs(60), Duration::from_secs(1000 * 3600));
    for _ in 0..2 {
        l.when(&"two");
    }
    assert_eq!(l.when(&"two"), Duration::from_secs(4 * 60));
    for _ in 0..1000 {
        l.when(&"overflow2");
    }
    assert_eq!(l.when(&"overflow2"), Duration::from_secs(1000 * 3600));

    let l = ItemExponentialFailureRateLimiter::new(Duration::MAX, Duration::MAX);
    for _ in 0..1_000_000 {
        assert_eq!(l.when(&"huge"), Duration::MAX);
    }
}

/// Mirrors the overflow guard of `TypedItemExponentialFailureRateLimiter.When`
/// (`float64(baseDelay) * math.Pow(2, exp)`, `maxDelay` only when that exceeds `MaxInt64`), as
/// in `TestItemExponentialFailureRateLimiterOverFlow` but with a zero base: zero times any power
/// of two is zero, so a zero base never backs off, however many failures (upstream: the first
/// 1024; then `Pow` is infinite). Only a product that does not fit yields the maximum.
#[test]
fn item_exponential_failure_rate_limiter_zero_base_never_backs_off() {
    let l = ItemExponentialFailureRateLimiter::new(Duration::ZERO, 1000 * S);
    for failure in 0..1000 {
        assert_eq!(l.when(&"zero"), Duration::ZERO, "failure {failure}");
    }
    assert_eq!(l.num_requeues(&"zero"), 1000);
}

/// Mirrors `TestItemFastSlowRateLimiter`.
#[test]
fn item_fast_slow_rate_limiter() {
    let l = ItemFastSlowRateLimiter::new(5 * MS, 10 * S, 3);
    for expected in [5 * MS, 5 * MS, 5 * MS, 10 * S, 10 * S] {
        assert_eq!(l.when(&"one"), expected);
    }
    assert_eq!(l.num_requeues(&"one"), 5);
    assert_eq!(l.when(&"two"), 5 * MS);
    assert_eq!(l.when(&"two"), 5 * MS);
    assert_eq!(l.num_requeues(&"two"), 2);
    l.forget(&"one");
    assert_eq!(l.num_requeues(&"one"), 0);
    assert_eq!(l.when(&"one"), 5 * MS);
}

/// Mirrors `TestMaxOfRateLimiter`.
#[test]
fn max_of_rate_limiter() {
    let l: MaxOfRateLimiter<&str> = MaxOfRateLimiter::new(vec![
        Box::new(ItemFastSlowRateLimiter::new(5 * MS, 3 * S, 3)),
        Box::new(ItemExponentialFailureRateLimiter::new(MS, S)),
    ]);
    for expected in [5 * MS, 5 * MS, 5 * MS, 3 * S, 3 * S] {
        assert_eq!(l.when(&"one"), expected);
    }
    assert_eq!(l.num_requeues(&"one"), 5);
    assert_eq!(l.when(&"two"), 5 * MS);
    assert_eq!(l.when(&"two"), 5 * MS);
    assert_eq!(l.num_requeues(&"two"), 2);
    l.forget(&"one");
    assert_eq!(l.num_requeues(&"one"), 0);
    assert_eq!(l.when(&"one"), 5 * MS);
}

/// The test limiter of `TestWithMaxWaitRateLimiter`: `base` for the first `threshold` calls,
/// `max` after.
struct StepRateLimiter {
    count: AtomicUsize,
    threshold: usize,
    base: Duration,
    max: Duration,
}

impl RateLimiter<i32> for StepRateLimiter {
    fn when(&self, _item: &i32) -> Duration {
        let n = self.count.fetch_add(1, Ordering::SeqCst) + 1;
        if n <= self.threshold { self.base } else { self.max }
    }
    fn forget(&self, _item: &i32) {}
    fn num_requeues(&self, _item: &i32) -> usize {
        0
    }
}

/// Mirrors `TestWithMaxWaitRateLimiter`.
#[test]
fn with_max_wait_rate_limiter() {
    let step = StepRateLimiter { count: AtomicUsize::new(0), threshold: 100, base: 5 * MS, max: 1000 * S };
    let l = WithMaxWaitRateLimiter::new(step, 500 * S);
    for i in 0..100 {
        assert_eq!(l.when(&i), 5 * MS);
    }
    for i in 100..200 {
        assert_eq!(l.when(&i), 500 * S);
    }
}

/// The token bucket behaves like Go's `rate.Limiter.Reserve`: a full burst is free, then each
/// reservation books the next token (10 qps: 100 ms apart), and tokens refill with time.
#[tokio::test(start_paused = true)]
async fn bucket_rate_limiter_reserves_future_tokens() {
    let l = BucketRateLimiter::new(10.0, 100).unwrap();
    for i in 0..100 {
        assert_eq!(RateLimiter::<i32>::when(&l, &i), Duration::ZERO, "token {i} is in the burst");
    }
    assert_eq!(RateLimiter::<i32>::when(&l, &0), 100 * MS);
    assert_eq!(RateLimiter::<i32>::when(&l, &0), 200 * MS);
    assert_eq!(RateLimiter::<i32>::num_requeues(&l, &0), 0);
    RateLimiter::<i32>::forget(&l, &0); // no-op
    tokio::time::advance(S).await;
    // One second makes ten tokens, but two of them were booked ahead (the 100 ms and 200 ms
    // reservations): eight are free now and the next one is 100 ms away.
    for _ in 0..8 {
        assert_eq!(RateLimiter::<i32>::when(&l, &0), Duration::ZERO);
    }
    assert_eq!(RateLimiter::<i32>::when(&l, &0), 100 * MS);
}

/// Invalid bucket configurations are errors, not panics.
#[test]
fn bucket_rate_limiter_rejects_bad_config() {
    assert!(BucketRateLimiter::new(0.0, 1).is_err());
    assert!(BucketRateLimiter::new(f64::NAN, 1).is_err());
    assert!(BucketRateLimiter::new(f64::INFINITY, 1).is_err());
    assert!(BucketRateLimiter::new(1.0, 0).is_err());
    assert!(BucketRateLimiter::new(0.5, 1).is_ok());
}

/// Found by the `rate_limiters` fuzz target: a very slow bucket (period times burst beyond u64
/// nanoseconds) overflowed inside governor, a panic with overflow checks and garbage delays
/// without; and repeated reservations on a slow bucket pushed its booked time to overflow.
#[tokio::test(start_paused = true)]
async fn bucket_rate_limiter_very_slow_buckets() {
    let e = BucketRateLimiter::new(1e-9, u32::MAX).unwrap_err();
    assert!(matches!(e, kcache_workqueue::QueueError::BucketTooSlow { burst: u32::MAX, .. }), "{e}");
    assert!(BucketRateLimiter::new(1e-9, 1).is_ok(), "one token per 31 years is fine");
    // One token per ~11.6 days: 20,000 reservations book ~630 years ahead, past the booking
    // limit, where the answers stop growing instead of overflowing.
    let l = BucketRateLimiter::new(1e-6, 1).unwrap();
    let mut last = Duration::ZERO;
    for _ in 0..20_000 {
        let d = RateLimiter::<u8>::when(&l, &0);
        assert!(d >= last);
        last = d;
    }
    assert!(last > Duration::from_secs(100 * 365 * 24 * 3600));
}

/// `default_controller_rate_limiter` is max(exponential 5 ms..1000 s, bucket 10 qps burst 100).
#[tokio::test(start_paused = true)]
async fn default_controller_rate_limiter_values() {
    let l = default_controller_rate_limiter::<u32>();
    assert_eq!(l.when(&1), 5 * MS);
    assert_eq!(l.when(&1), 10 * MS);
    assert_eq!(l.num_requeues(&1), 2);
    for i in 2..100 {
        assert_eq!(l.when(&i), 5 * MS);
    }
    // The 101st call overall exceeds the burst: the bucket's 100 ms wins over 5 ms.
    assert_eq!(l.when(&1000), 100 * MS);
    for _ in 0..30 {
        l.when(&7);
    }
    assert_eq!(l.when(&7), 1000 * S, "exponential part capped at 1000 s");
    l.forget(&7);
    assert_eq!(l.num_requeues(&7), 0);
}
