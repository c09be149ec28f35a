//! The furthest ahead kcache plans.

use std::time::Duration;

/// About 30 years: the furthest ahead kcache plans. A longer period, timeout or grace
/// (`Duration::MAX` is the natural way to say "never") is lowered to this before it is added to
/// an `Instant`, so no deadline overflows and panics. Thirty years is "never" for a process, and
/// far from overflow on every platform: tokio's far-future `Instant` is 30 years ahead for the
/// same reason.
///
/// The reflector caps its minimum watch timeout and hung-watch grace with it, the informer its
/// resync periods.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// use kcache_utils::FAR_FUTURE;
///
/// let never = Duration::MAX;
/// let deadline = Instant::now() + never.min(FAR_FUTURE); // `Instant::now() + never` panics
/// assert!(deadline > Instant::now());
/// ```
pub const FAR_FUTURE: Duration = Duration::from_secs(30 * 365 * 24 * 60 * 60);
