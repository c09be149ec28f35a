//! Injectable time (cargo feature `clock`): the reflector and the leader elector read the clock
//! and sleep only through [`Clock`].
//!
//! Production uses [`SystemClock`] (tokio's timer and the system's wall clock). Tests use
//! [`FakeClock`], which never moves on its own: a test advances it explicitly and can ask how long
//! the code under test is waiting. That keeps timing tests deterministic even when requests cross
//! real sockets, where tokio's paused clock would auto-advance whenever the runtime waits for I/O.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use tokio::sync::oneshot;
use tokio::time::Instant;

/// A boxed sleep future.
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A source of time and of sleeps.
///
/// Like `k8s.io/utils/clock.Clock` in client-go: code that reads time through it can be driven by
/// a [`FakeClock`] in tests.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// The current instant.
    fn now(&self) -> Instant;
    /// A future that completes once `duration` has passed on this clock.
    fn sleep(&self, duration: Duration) -> Sleep;
    /// The current wall-clock time, for timestamps written where other processes read them (a
    /// Lease's `renewTime`). Never used to measure a duration: that is what [`now`](Clock::now)
    /// is for. The default is the system's clock; [`FakeClock`] moves it with its instant.
    fn wall_now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// The real clock: `tokio::time` (which a test may still pause).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn sleep(&self, duration: Duration) -> Sleep {
        Box::pin(tokio::time::sleep(duration))
    }
}

/// A manual clock for tests: time moves only when [`advance`](FakeClock::advance) is called.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use kcache_utils::{Clock, FakeClock};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let clock = FakeClock::new();
/// let start = clock.now();
/// let sleep = clock.sleep(Duration::from_secs(5));
/// assert_eq!(clock.pending_sleeps(), vec![Duration::from_secs(5)]);
/// clock.advance(Duration::from_secs(5));
/// sleep.await; // completes: the clock reached its deadline
/// assert_eq!(clock.now() - start, Duration::from_secs(5));
/// # }
/// ```
#[derive(Clone)]
pub struct FakeClock {
    inner: Arc<Mutex<FakeInner>>,
    /// Signalled whenever a new sleep is registered, so a test can wait for the reflector to
    /// start waiting.
    sleep_registered: Arc<tokio::sync::Notify>,
}

struct FakeInner {
    now: Instant,
    /// The instant the clock started at, and the wall-clock time it stood for: `wall_now` is
    /// `wall_start + (now - start)`.
    start: Instant,
    wall_start: SystemTime,
    /// Pending sleeps: deadline and the sender that completes the sleep.
    sleepers: Vec<(Instant, oneshot::Sender<()>)>,
}

impl fmt::Debug for FakeClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        f.debug_struct("FakeClock").field("now", &inner.now).field("sleepers", &inner.sleepers.len()).finish()
    }
}

impl Default for FakeClock {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeClock {
    /// A fake clock starting at the current tokio instant and the current wall-clock time.
    pub fn new() -> Self {
        let now = Instant::now();
        let inner = FakeInner { now, start: now, wall_start: SystemTime::now(), sleepers: Vec::new() };
        Self { inner: Arc::new(Mutex::new(inner)), sleep_registered: Arc::new(tokio::sync::Notify::new()) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FakeInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Moves time forward by `by`, completing every sleep whose deadline is reached.
    pub fn advance(&self, by: Duration) {
        let mut inner = self.lock();
        inner.now += by;
        let now = inner.now;
        let (due, pending): (Vec<_>, Vec<_>) = inner.sleepers.drain(..).partition(|(at, _)| *at <= now);
        inner.sleepers = pending;
        drop(inner);
        for (_, tx) in due {
            let _ = tx.send(());
        }
    }

    /// The remaining durations of the sleeps currently pending, shortest first (sleeps whose
    /// future was dropped are pruned).
    pub fn pending_sleeps(&self) -> Vec<Duration> {
        let mut inner = self.lock();
        inner.sleepers.retain(|(_, tx)| !tx.is_closed());
        let now = inner.now;
        let mut out: Vec<_> =
            inner.sleepers.iter().map(|(at, _)| at.saturating_duration_since(now)).collect();
        out.sort();
        out
    }

    /// Waits until at least `n` sleeps are pending, then returns them (as [`pending_sleeps`]).
    ///
    /// [`pending_sleeps`]: FakeClock::pending_sleeps
    pub async fn wait_for_sleepers(&self, n: usize) -> Vec<Duration> {
        loop {
            let notified = self.sleep_registered.notified();
            let pending = self.pending_sleeps();
            if pending.len() >= n {
                return pending;
            }
            notified.await;
        }
    }

    /// Waits until a pending sleep's remaining duration satisfies `pred`, and returns it.
    pub async fn wait_for_sleep(&self, pred: impl Fn(Duration) -> bool) -> Duration {
        loop {
            let notified = self.sleep_registered.notified();
            if let Some(d) = self.pending_sleeps().into_iter().find(|d| pred(*d)) {
                return d;
            }
            notified.await;
        }
    }

    /// Advances time to the earliest pending sleep's deadline and returns how far it moved, or
    /// `None` when nothing is sleeping. Sleeps whose future was dropped do not count.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use futures::FutureExt;
    /// use kcache_utils::{Clock, FakeClock};
    ///
    /// let clock = FakeClock::new();
    /// let start = clock.now();
    /// assert_eq!(clock.advance_to_next(), None); // nothing sleeps: time stands still
    /// assert_eq!(clock.now(), start);
    ///
    /// let mut long = clock.sleep(Duration::from_secs(30));
    /// let short = clock.sleep(Duration::from_secs(10));
    /// drop(clock.sleep(Duration::from_secs(5))); // dropped: skipped
    /// assert_eq!(clock.advance_to_next(), Some(Duration::from_secs(10)));
    /// assert!(short.now_or_never().is_some(), "the earliest sleep is due");
    /// assert!((&mut long).now_or_never().is_none(), "the later one is not");
    /// assert_eq!(clock.advance_to_next(), Some(Duration::from_secs(20)));
    /// assert!(long.now_or_never().is_some());
    /// assert_eq!(clock.now() - start, Duration::from_secs(30));
    /// ```
    pub fn advance_to_next(&self) -> Option<Duration> {
        let next = self.pending_sleeps().into_iter().next()?;
        self.advance(next);
        Some(next)
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Instant {
        self.lock().now
    }

    /// The wall-clock time the clock started at, plus the time it was advanced by.
    ///
    /// ```
    /// use std::time::Duration;
    /// use kcache_utils::{Clock, FakeClock};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let clock = FakeClock::new();
    /// let before = clock.wall_now();
    /// clock.advance(Duration::from_secs(90));
    /// assert_eq!(clock.wall_now().duration_since(before).unwrap(), Duration::from_secs(90));
    /// # }
    /// ```
    fn wall_now(&self) -> SystemTime {
        let inner = self.lock();
        inner.wall_start + (inner.now - inner.start)
    }

    fn sleep(&self, duration: Duration) -> Sleep {
        let (tx, rx) = oneshot::channel();
        {
            let mut inner = self.lock();
            if duration.is_zero() {
                let _ = tx.send(());
            } else if let Some(at) = inner.now.checked_add(duration) {
                inner.sleepers.push((at, tx));
            } else {
                // Past what an `Instant` can hold: a sleep that never ends. The sender is
                // dropped, which the future below turns into waiting for ever.
                drop(tx);
            }
        }
        self.sleep_registered.notify_waiters();
        Box::pin(async move {
            // A dropped sender means the clock is gone: never complete.
            if rx.await.is_err() {
                std::future::pending::<()>().await;
            }
        })
    }
}
