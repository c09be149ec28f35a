//! Rate limiters for retries: client-go's `default_rate_limiters.go`.
//!
//! A [`RateLimiter`] answers "how long should this item wait before its next attempt?" and keeps
//! whatever per-item history it needs until [`forget`](RateLimiter::forget).

use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use governor::clock::Clock;
use governor::middleware::NoOpMiddleware;
use governor::nanos::Nanos;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter as Governor};
use parking_lot::Mutex;

use crate::error::QueueError;

type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// Decides how long an item waits before it is retried: client-go's `TypedRateLimiter`.
pub trait RateLimiter<T>: Send + Sync {
    /// How long `item` should wait now. Calling it records one more failure.
    fn when(&self, item: &T) -> Duration;
    /// Stops tracking `item` (it succeeded). A no-op for an item never seen.
    fn forget(&self, item: &T);
    /// How many times `item` has been rate limited since it was last forgotten.
    fn num_requeues(&self, item: &T) -> usize;
}

impl<T, R: RateLimiter<T> + ?Sized> RateLimiter<T> for Arc<R> {
    fn when(&self, item: &T) -> Duration {
        (**self).when(item)
    }
    fn forget(&self, item: &T) {
        (**self).forget(item)
    }
    fn num_requeues(&self, item: &T) -> usize {
        (**self).num_requeues(item)
    }
}

impl<T, R: RateLimiter<T> + ?Sized> RateLimiter<T> for Box<R> {
    fn when(&self, item: &T) -> Duration {
        (**self).when(item)
    }
    fn forget(&self, item: &T) {
        (**self).forget(item)
    }
    fn num_requeues(&self, item: &T) -> usize {
        (**self).num_requeues(item)
    }
}

/// Per-item exponential backoff: `base * 2^failures`, capped at `max`.
///
/// The failure count is read before it is incremented, so the first delay is `base`. The
/// arithmetic is done in 128-bit integers and any overflow yields `max`, at any failure count;
/// a zero base never backs off.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use kcache_workqueue::{ItemExponentialFailureRateLimiter, RateLimiter};
///
/// let rl = ItemExponentialFailureRateLimiter::new(Duration::from_millis(5), Duration::from_secs(1000));
/// assert_eq!(rl.when(&"a"), Duration::from_millis(5));
/// assert_eq!(rl.when(&"a"), Duration::from_millis(10));
/// assert_eq!(rl.num_requeues(&"a"), 2);
/// rl.forget(&"a");
/// assert_eq!(rl.when(&"a"), Duration::from_millis(5));
/// ```
pub struct ItemExponentialFailureRateLimiter<T> {
    failures: Mutex<FastMap<T, u32>>,
    base: Duration,
    max: Duration,
}

impl<T> fmt::Debug for ItemExponentialFailureRateLimiter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ItemExponentialFailureRateLimiter")
            .field("base", &self.base)
            .field("max", &self.max)
            .field("tracked", &self.failures.lock().len())
            .finish()
    }
}

impl<T: Eq + Hash + Clone> ItemExponentialFailureRateLimiter<T> {
    /// Creates a limiter starting at `base` and doubling up to `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self { failures: Mutex::new(FastMap::default()), base, max }
    }

    fn backoff(&self, exp: u32) -> Duration {
        let base = self.base.as_nanos();
        if base == 0 {
            // Zero times any power of two is zero (client-go multiplies in float64): only a
            // product that does not fit is clamped to `max`.
            return Duration::ZERO;
        }
        let Some(factor) = 1u128.checked_shl(exp) else { return self.max };
        let Some(nanos) = base.checked_mul(factor) else { return self.max };
        match u64::try_from(nanos) {
            Ok(n) => Duration::from_nanos(n).min(self.max),
            Err(_) => self.max,
        }
    }
}

impl<T: Eq + Hash + Clone + Send + Sync> RateLimiter<T> for ItemExponentialFailureRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        let exp = {
            let mut failures = self.failures.lock();
            match failures.get_mut(item) {
                Some(n) => {
                    let exp = *n;
                    *n = n.saturating_add(1);
                    exp
                }
                None => {
                    failures.insert(item.clone(), 1);
                    0
                }
            }
        };
        self.backoff(exp)
    }

    fn forget(&self, item: &T) {
        self.failures.lock().remove(item);
    }

    fn num_requeues(&self, item: &T) -> usize {
        self.failures.lock().get(item).map_or(0, |n| *n as usize)
    }
}

/// `fast` for the first `max_fast_attempts` attempts of an item, `slow` after that.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use kcache_workqueue::{ItemFastSlowRateLimiter, RateLimiter};
///
/// let rl = ItemFastSlowRateLimiter::new(Duration::from_millis(5), Duration::from_secs(10), 1);
/// assert_eq!(rl.when(&1), Duration::from_millis(5));
/// assert_eq!(rl.when(&1), Duration::from_secs(10));
/// ```
pub struct ItemFastSlowRateLimiter<T> {
    attempts: Mutex<FastMap<T, usize>>,
    fast: Duration,
    slow: Duration,
    max_fast_attempts: usize,
}

impl<T> fmt::Debug for ItemFastSlowRateLimiter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ItemFastSlowRateLimiter")
            .field("fast", &self.fast)
            .field("slow", &self.slow)
            .field("max_fast_attempts", &self.max_fast_attempts)
            .finish_non_exhaustive()
    }
}

impl<T: Eq + Hash + Clone> ItemFastSlowRateLimiter<T> {
    /// Creates the limiter.
    pub fn new(fast: Duration, slow: Duration, max_fast_attempts: usize) -> Self {
        Self { attempts: Mutex::new(FastMap::default()), fast, slow, max_fast_attempts }
    }
}

impl<T: Eq + Hash + Clone + Send + Sync> RateLimiter<T> for ItemFastSlowRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        let mut attempts = self.attempts.lock();
        let n = match attempts.get_mut(item) {
            Some(n) => {
                *n = n.saturating_add(1);
                *n
            }
            None => {
                attempts.insert(item.clone(), 1);
                1
            }
        };
        if n <= self.max_fast_attempts { self.fast } else { self.slow }
    }

    fn forget(&self, item: &T) {
        self.attempts.lock().remove(item);
    }

    fn num_requeues(&self, item: &T) -> usize {
        self.attempts.lock().get(item).copied().unwrap_or(0)
    }
}

/// Largest `period * burst` a [`BucketRateLimiter`] accepts (about 73 years), and the latest
/// time (about 146 years after its creation) at which it books a token. Together they keep every
/// time governor computes (at most booking limit + 2 spans) below `2^63` nanoseconds.
const MAX_BUCKET_SPAN_NANOS: u128 = 1 << 61;
const MAX_BOOKING_NANOS: u64 = 1 << 62;

/// Governor clock reading Tokio time (so paused-clock tests are deterministic), with a
/// one-shot override used to reserve a future token.
#[derive(Debug, Clone)]
struct ReservationClock {
    start: tokio::time::Instant,
    /// When not `u64::MAX`, the instant (nanoseconds since `start`) `now` reports.
    at: Arc<AtomicU64>,
}

impl ReservationClock {
    fn real(&self) -> Nanos {
        let nanos = self.start.elapsed().as_nanos();
        Nanos::new(u64::try_from(nanos).unwrap_or(u64::MAX - 1))
    }
}

impl Clock for ReservationClock {
    type Instant = Nanos;

    fn now(&self) -> Nanos {
        match self.at.load(Ordering::Relaxed) {
            u64::MAX => self.real(),
            at => Nanos::new(at),
        }
    }
}

/// An overall token bucket shared by all items (client-go's `TypedBucketRateLimiter` around
/// `rate.Limiter`), built on the `governor` crate.
///
/// `when` behaves like Go's `Reserve().Delay()`: it always takes a token, from the future if the
/// bucket is empty, and returns how long until that token exists. `num_requeues` is always 0 and
/// `forget` does nothing. Time is Tokio's clock.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use kcache_workqueue::{BucketRateLimiter, RateLimiter};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), kcache_workqueue::QueueError> {
/// let rl = BucketRateLimiter::new(10.0, 2)?; // 10 per second, burst 2
/// assert_eq!(RateLimiter::<&str>::when(&rl, &"a"), Duration::ZERO);
/// assert_eq!(RateLimiter::<&str>::when(&rl, &"b"), Duration::ZERO);
/// assert_eq!(RateLimiter::<&str>::when(&rl, &"c"), Duration::from_millis(100));
/// assert_eq!(RateLimiter::<&str>::when(&rl, &"d"), Duration::from_millis(200));
/// # Ok(())
/// # }
/// ```
pub struct BucketRateLimiter {
    limiter: Governor<NotKeyed, InMemoryState, ReservationClock, NoOpMiddleware<Nanos>>,
    clock: ReservationClock,
    /// Serialises reservations: the clock override must not leak into a concurrent check.
    reserve: Mutex<()>,
    qps: f64,
    burst: u32,
}

impl fmt::Debug for BucketRateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BucketRateLimiter").field("qps", &self.qps).field("burst", &self.burst).finish()
    }
}

impl BucketRateLimiter {
    /// A bucket refilling `qps` tokens per second and holding at most `burst`; it starts full.
    ///
    /// # Errors
    ///
    /// [`QueueError::InvalidRate`] unless `qps` is positive and finite; [`QueueError::ZeroBurst`] for a
    /// zero burst; [`QueueError::BucketTooSlow`] when `burst / qps` exceeds about 70 years.
    pub fn new(qps: f64, burst: u32) -> Result<Self, QueueError> {
        if !(qps.is_finite() && qps > 0.0) {
            return Err(QueueError::InvalidRate(qps));
        }
        let burst_nz = NonZeroU32::new(burst).ok_or(QueueError::ZeroBurst)?;
        let period = Duration::try_from_secs_f64(1.0 / qps).map_err(|_| QueueError::InvalidRate(qps))?;
        // governor multiplies and adds u64 nanoseconds unchecked (its tolerance is period times
        // burst): a very slow bucket overflowed there (found by the rate_limiters fuzz target).
        if period.max(Duration::from_nanos(1)).as_nanos() * u128::from(burst) > MAX_BUCKET_SPAN_NANOS {
            return Err(QueueError::BucketTooSlow { qps, burst });
        }
        let quota = Quota::with_period(period.max(Duration::from_nanos(1)))
            .ok_or(QueueError::InvalidRate(qps))?
            .allow_burst(burst_nz);
        let clock =
            ReservationClock { start: tokio::time::Instant::now(), at: Arc::new(AtomicU64::new(u64::MAX)) };
        let limiter = Governor::direct_with_clock(quota, clock.clone());
        Ok(Self { limiter, clock, reserve: Mutex::new(()), qps, burst })
    }

    fn reserve(&self) -> Duration {
        let _serial = self.reserve.lock();
        let now = self.clock.real();
        match self.limiter.check() {
            Ok(()) => Duration::ZERO,
            Err(not_until) => {
                // Take the first token that will exist by checking "at" its time, then go back
                // to real time. GCRA state is a theoretical arrival time, so this books the slot
                // exactly like Go's reservation does.
                let at = not_until.earliest_possible();
                if at.as_u64() > MAX_BOOKING_NANOS {
                    // Booking would push governor's state towards u64 overflow; a wait of over
                    // a century is "never" anyway, so answer it without taking the token.
                    return Duration::from_nanos(at.as_u64().saturating_sub(now.as_u64()));
                }
                self.clock.at.store(at.as_u64(), Ordering::Relaxed);
                let taken = self.limiter.check();
                self.clock.at.store(u64::MAX, Ordering::Relaxed);
                debug_assert!(taken.is_ok(), "a token must exist at its earliest possible time");
                Duration::from_nanos(at.as_u64().saturating_sub(now.as_u64()))
            }
        }
    }
}

impl<T> RateLimiter<T> for BucketRateLimiter {
    fn when(&self, _item: &T) -> Duration {
        self.reserve()
    }
    fn forget(&self, _item: &T) {}
    fn num_requeues(&self, _item: &T) -> usize {
        0
    }
}

/// The maximum of several limiters' answers (client-go's `TypedMaxOfRateLimiter`).
///
/// `when` asks every limiter (so each records the failure) and returns the longest delay;
/// `num_requeues` is the maximum; `forget` forgets everywhere.
pub struct MaxOfRateLimiter<T> {
    limiters: Vec<Box<dyn RateLimiter<T>>>,
}

impl<T> fmt::Debug for MaxOfRateLimiter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MaxOfRateLimiter").field("limiters", &self.limiters.len()).finish()
    }
}

impl<T> MaxOfRateLimiter<T> {
    /// Combines `limiters`.
    pub fn new(limiters: Vec<Box<dyn RateLimiter<T>>>) -> Self {
        Self { limiters }
    }
}

impl<T> RateLimiter<T> for MaxOfRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        self.limiters.iter().map(|l| l.when(item)).max().unwrap_or_default()
    }
    fn forget(&self, item: &T) {
        for l in &self.limiters {
            l.forget(item);
        }
    }
    fn num_requeues(&self, item: &T) -> usize {
        self.limiters.iter().map(|l| l.num_requeues(item)).max().unwrap_or(0)
    }
}

/// Caps another limiter's delay at `max_wait` (client-go's `TypedWithMaxWaitRateLimiter`).
#[derive(Debug)]
pub struct WithMaxWaitRateLimiter<R> {
    limiter: R,
    max_wait: Duration,
}

impl<R> WithMaxWaitRateLimiter<R> {
    /// Wraps `limiter`.
    pub fn new(limiter: R, max_wait: Duration) -> Self {
        Self { limiter, max_wait }
    }
}

impl<T, R: RateLimiter<T>> RateLimiter<T> for WithMaxWaitRateLimiter<R> {
    fn when(&self, item: &T) -> Duration {
        self.limiter.when(item).min(self.max_wait)
    }
    fn forget(&self, item: &T) {
        self.limiter.forget(item)
    }
    fn num_requeues(&self, item: &T) -> usize {
        self.limiter.num_requeues(item)
    }
}

/// client-go's `DefaultTypedControllerRateLimiter`: the maximum of a per-item exponential
/// backoff (5 ms doubling up to 1000 s) and an overall token bucket (10 qps, burst 100).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use kcache_workqueue::{RateLimiter, default_controller_rate_limiter};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let rl = default_controller_rate_limiter::<String>();
/// assert_eq!(rl.when(&"x".to_string()), Duration::from_millis(5));
/// # }
/// ```
pub fn default_controller_rate_limiter<T: Eq + Hash + Clone + Send + Sync + 'static>() -> MaxOfRateLimiter<T>
{
    let bucket = match BucketRateLimiter::new(10.0, 100) {
        Ok(b) => b,
        // 10 qps and a burst of 100 are valid constants; this arm cannot run.
        Err(e) => unreachable!("default bucket limiter: {e}"),
    };
    MaxOfRateLimiter::new(vec![
        Box::new(ItemExponentialFailureRateLimiter::new(Duration::from_millis(5), Duration::from_secs(1000))),
        Box::new(bucket),
    ])
}

/// client-go's `DefaultTypedItemBasedRateLimiter`: exponential from 1 ms up to 1000 s.
pub fn default_item_based_rate_limiter<T: Eq + Hash + Clone>() -> ItemExponentialFailureRateLimiter<T> {
    ItemExponentialFailureRateLimiter::new(Duration::from_millis(1), Duration::from_secs(1000))
}
