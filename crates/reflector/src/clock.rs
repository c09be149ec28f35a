//! Injectable time: the reflector reads the clock and sleeps only through [`Clock`].
//!
//! Production uses [`SystemClock`] (tokio's timer). Tests use [`FakeClock`], which never moves on
//! its own: a test advances it explicitly and can ask how long the reflector is waiting. That keeps
//! timing tests deterministic even when requests cross real sockets, where tokio's paused clock
//! would auto-advance whenever the runtime waits for I/O.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

/// A boxed sleep future.
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A source of time and of sleeps.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// The current instant.
    fn now(&self) -> Instant;
    /// A future that completes once `duration` has passed on this clock.
    fn sleep(&self, duration: Duration) -> Sleep;
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
/// use kcache_reflector::{Clock, FakeClock};
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
    /// A fake clock starting at the current tokio instant.
    pub fn new() -> Self {
        Self {
            inner: Arc::new(Mutex::new(FakeInner { now: Instant::now(), sleepers: Vec::new() })),
            sleep_registered: Arc::new(tokio::sync::Notify::new()),
        }
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
    /// use kcache_reflector::{Clock, FakeClock};
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
