//! Fuzz target: the workqueue's rate limiters with arbitrary parameters (zero, tiny and huge
//! durations, any attempt threshold, any qps and burst) and random when / forget /
//! num_requeues / clock-advance sequences, under Tokio's paused clock.
//!
//! Checks against reference formulas: the per-item exponential limiter answers
//! `min(base * 2^failures, max)` (`max` when that overflows, zero for a zero base) and counts
//! failures; the fast-slow limiter answers `fast` for the first `max_fast_attempts` attempts; the
//! max-of limiter the larger answer; the max-wait wrapper caps. The token bucket must accept or
//! reject its parameters without panicking, answer zero while it holds tokens, and never hand
//! out two tokens for the same instant: at a fixed instant its answers grow by one period per call.
#![no_main]

use std::collections::HashMap;
use std::time::Duration;

use arbitrary::Arbitrary;
use kcache_workqueue::{
    BucketRateLimiter, ItemExponentialFailureRateLimiter, ItemFastSlowRateLimiter, MaxOfRateLimiter,
    RateLimiter, WithMaxWaitRateLimiter,
};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug, Clone, Copy)]
struct Dur {
    secs: u64,
    nanos: u32,
    /// Most inputs should be small enough for the exponential growth to matter.
    small: bool,
}

impl Dur {
    fn get(self) -> Duration {
        if self.small {
            Duration::from_nanos(u64::from(self.nanos % 10_000_000))
        } else {
            Duration::new(self.secs, self.nanos % 1_000_000_000)
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Op {
    When(u8),
    Forget(u8),
    NumRequeues(u8),
    /// Milliseconds.
    Advance(u16),
}

#[derive(Arbitrary, Debug)]
struct Input {
    base: Dur,
    max: Dur,
    fast: Dur,
    slow: Dur,
    max_fast_attempts: u8,
    max_wait: Dur,
    qps: f64,
    burst: u32,
    ops: Vec<Op>,
}

fn exponential(base: Duration, max: Duration, failures: u32) -> Duration {
    if base.is_zero() {
        // Zero times any power of two is zero, however many failures.
        return Duration::ZERO;
    }
    let exact = 1u128.checked_shl(failures).and_then(|f| base.as_nanos().checked_mul(f));
    match exact.and_then(|n| u64::try_from(n).ok()) {
        Some(n) => Duration::from_nanos(n).min(max),
        None => max,
    }
}

/// The bucket's period: one token per `1 / qps` seconds, at least a nanosecond.
fn period(qps: f64) -> Option<Duration> {
    Duration::try_from_secs_f64(1.0 / qps).ok().map(|p| p.max(Duration::from_nanos(1)))
}

async fn run(input: &Input) {
    let (base, max) = (input.base.get(), input.max.get());
    let (fast, slow) = (input.fast.get(), input.slow.get());
    let max_fast = usize::from(input.max_fast_attempts);
    let max_wait = input.max_wait.get();

    let exp = ItemExponentialFailureRateLimiter::new(base, max);
    let fast_slow = ItemFastSlowRateLimiter::new(fast, slow, max_fast);
    let max_of: MaxOfRateLimiter<u8> = MaxOfRateLimiter::new(vec![
        Box::new(ItemExponentialFailureRateLimiter::new(base, max)),
        Box::new(ItemFastSlowRateLimiter::new(fast, slow, max_fast)),
    ]);
    let capped = WithMaxWaitRateLimiter::new(ItemExponentialFailureRateLimiter::new(base, max), max_wait);

    let bucket = BucketRateLimiter::new(input.qps, input.burst);
    // The bucket also refuses `period * burst` beyond 2^61 ns (its arithmetic would overflow).
    let valid = input.qps.is_finite()
        && input.qps > 0.0
        && input.burst > 0
        && period(input.qps).is_some_and(|p| p.as_nanos() * u128::from(input.burst) <= 1 << 61);
    assert_eq!(bucket.is_ok(), valid, "qps {} burst {}: {:?}", input.qps, input.burst, bucket.as_ref().err());
    // Calls since the clock last moved, the last answer, and whether the clock ever moved.
    let mut bucket_calls_now: u64 = 0;
    let mut last_bucket: Option<Duration> = None;
    let mut advanced = false;

    let mut failures: HashMap<u8, u32> = HashMap::new();
    for op in &input.ops {
        match *op {
            Op::When(x) => {
                let n = failures.get(&x).copied().unwrap_or(0);
                let want_exp = exponential(base, max, n);
                assert_eq!(exp.when(&x), want_exp, "exponential, failure {n}");
                let want_fs = if (n as usize) < max_fast { fast } else { slow };
                assert_eq!(fast_slow.when(&x), want_fs, "fast-slow, attempt {}", n + 1);
                assert_eq!(max_of.when(&x), want_exp.max(want_fs), "max-of");
                assert_eq!(capped.when(&x), want_exp.min(max_wait), "max-wait");
                failures.insert(x, n.saturating_add(1));

                if let Ok(b) = &bucket {
                    let d = RateLimiter::<u8>::when(b, &x);
                    let p = period(input.qps).expect("valid above");
                    if !advanced && bucket_calls_now < u64::from(input.burst) {
                        // Still within the initial burst at the starting instant.
                        assert_eq!(d, Duration::ZERO, "call {bucket_calls_now} of burst {}", input.burst);
                    }
                    if let Some(prev) = last_bucket.filter(|_| bucket_calls_now > 0) {
                        // Same instant as the previous call: the next token is one period later
                        // (or the bucket refilled to zero wait only if the previous was zero too).
                        // Beyond ~146 years the bucket answers without booking (no growth).
                        if prev > Duration::ZERO && prev.saturating_add(p) < Duration::from_nanos(1 << 62) {
                            let want = prev.saturating_add(p);
                            let diff = if d > want { d - want } else { want - d };
                            assert!(
                                diff <= Duration::from_nanos(2),
                                "bucket: {d:?} after {prev:?}, period {p:?}"
                            );
                        }
                        assert!(d >= prev, "bucket went backwards: {d:?} after {prev:?}");
                    }
                    bucket_calls_now += 1;
                    last_bucket = Some(d);
                }
            }
            Op::Forget(x) => {
                exp.forget(&x);
                fast_slow.forget(&x);
                max_of.forget(&x);
                capped.forget(&x);
                failures.remove(&x);
            }
            Op::NumRequeues(x) => {
                let n = failures.get(&x).copied().unwrap_or(0) as usize;
                assert_eq!(exp.num_requeues(&x), n);
                assert_eq!(fast_slow.num_requeues(&x), n);
                assert_eq!(max_of.num_requeues(&x), n);
                assert_eq!(capped.num_requeues(&x), n);
                if let Ok(b) = &bucket {
                    assert_eq!(RateLimiter::<u8>::num_requeues(b, &x), 0);
                }
            }
            Op::Advance(ms) => {
                if ms > 0 {
                    tokio::time::advance(Duration::from_millis(ms.into())).await;
                    bucket_calls_now = 0;
                    advanced = true;
                }
            }
        }
    }
}

fuzz_target!(|input: Input| {
    if input.ops.len() > 500 {
        return;
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime");
    rt.block_on(run(&input));
});
