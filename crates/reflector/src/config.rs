//! A reflector's options ([`ReflectorConfig`]) and the limits they are held to, with
//! client-go's defaults.

use std::time::Duration;

use kcache_shard_selector::ShardSelector;

use crate::backoff::BackoffConfig;
#[cfg(doc)]
use crate::error::ReflectorError;
#[cfg(doc)]
use crate::lister_watcher::ListerWatcher;

/// client-go's default page size for the initial and relist LIST (`pager.defaultPageSize`).
pub const DEFAULT_PAGE_SIZE: u32 = 500;

/// The smallest watch timeout honoured; smaller requested minimums are raised to it ("values
/// lower than 5m will not be honored to avoid negative performance impact on controlplane").
pub const MIN_WATCH_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// A watch that closes sooner than this without any event is a [`ReflectorError::VeryShortWatch`].
pub const VERY_SHORT_WATCH: Duration = Duration::from_secs(1);

/// Options of a [`Reflector`](crate::Reflector); the defaults are client-go's.
#[derive(Debug, Clone)]
pub struct ReflectorConfig {
    /// Name used in logs, spans and metrics.
    pub name: String,
    /// Period of the store resync; zero disables it.
    pub resync_period: Duration,
    /// An explicit LIST page size (client-go's `WatchListPageSize`); `None` follows the pager
    /// rules (500, or unpaginated when listing at a specific resource version).
    pub page_size: Option<u32>,
    /// Try watch-list (one stream with `sendInitialEvents=true`) before LIST + WATCH.
    pub use_watch_list: bool,
    /// Minimum watch timeout; watch timeouts are uniform in `[min, 2*min)`. Values below
    /// [`MIN_WATCH_TIMEOUT`] are raised to it; values above about 30 years are lowered to that.
    pub min_watch_timeout: Duration,
    /// Backoff between list-and-watch attempts and watch retries.
    pub backoff: BackoffConfig,
    /// How long watch InternalErrors are retried without relisting (client-go's
    /// `MaxInternalErrorRetryDuration`, default zero: never). Counted from the first internal
    /// error of a run; a minute without one starts a new run.
    pub max_internal_error_retry_duration: Duration,
    /// A watch stream still open this long after its `timeoutSeconds` is considered hung and
    /// replaced. `Duration::MAX` (or anything above about 30 years) means never in practice.
    pub hung_watch_grace: Duration,
    /// Seed for jitter and watch timeouts, for reproducible tests; `None` is random.
    pub seed: Option<u64>,
    /// The shard to cache (KEP-5866), sent as `shardSelector` on every LIST, WATCH and
    /// watch-list request; `None` adopts the lister-watcher's
    /// ([`ListerWatcher::shard_selector`]), if any. See [`Reflector::shard_selector`](crate::Reflector::shard_selector).
    pub shard_selector: Option<ShardSelector>,
}

impl Default for ReflectorConfig {
    fn default() -> Self {
        Self {
            name: "reflector".to_owned(),
            resync_period: Duration::ZERO,
            page_size: None,
            use_watch_list: true,
            min_watch_timeout: MIN_WATCH_TIMEOUT,
            backoff: BackoffConfig::default(),
            max_internal_error_retry_duration: Duration::ZERO,
            hung_watch_grace: Duration::from_secs(30),
            seed: None,
            shard_selector: None,
        }
    }
}
