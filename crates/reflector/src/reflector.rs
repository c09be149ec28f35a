//! The reflector: list (or watch-list), then watch, for ever, into a [`ReflectorStore`].

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kcache_shard_selector::ShardSelector;
use kcache_store::{KeyFunc, ReflectorStore};
use kcache_utils::FAR_FUTURE;
use kube::Resource;
use rand::{Rng, SeedableRng};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::backoff::Backoff;
use crate::clock::{Clock, Sleep, SystemClock};
use crate::config::{DEFAULT_PAGE_SIZE, MIN_WATCH_TIMEOUT, ReflectorConfig, VERY_SHORT_WATCH};
use crate::error::{ReflectorError, Result};
use crate::lister_watcher::{ListOptions, ListerWatcher, WatchEvent, WatchOptions, WatchStream};
use crate::metrics::{NoopMetrics, ReflectorMetrics, RelistReason};
use crate::shard::ShardFilter;
use crate::shard_mode::{ShardMode, ShardModeCell};
use crate::temp_store::TempStore;

/// Called with each error that ends a list-and-watch attempt (client-go's `WatchErrorHandler`):
/// see [`Reflector::watch_error_handler`] for which errors those are.
pub type WatchErrorHandler = Arc<dyn Fn(&str, &ReflectorError) + Send + Sync>;

/// Asked before each periodic resync; `false` skips it (client-go's `ShouldResync`).
pub type ShouldResync = Arc<dyn Fn() -> bool + Send + Sync>;

/// The default watch error handler, as client-go's `DefaultWatchErrorHandler`: an expired
/// resource version at debug (it is routine: the next list is at the last synced version),
/// everything else at error level (client-go's `utilruntime.HandleError`, "Failed to watch").
///
/// # Examples
///
/// A handler that counts errors and still logs them as the default does:
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache_reflector::{ApiListerWatcher, Reflector, default_watch_error_handler};
/// use kcache_store::{Store, meta_namespace_key_func};
///
/// # async fn run(client: kube::Client) {
/// let failures = Arc::new(AtomicU64::new(0));
/// let counter = Arc::clone(&failures);
/// let store = Store::new(meta_namespace_key_func::<ConfigMap>());
/// let lw = ApiListerWatcher::new(kube::Api::<ConfigMap>::namespaced(client, "default"));
/// let reflector = Reflector::new(lw, store).watch_error_handler(move |name, err| {
///     counter.fetch_add(1, Ordering::Relaxed);
///     default_watch_error_handler(name, err);
/// });
/// # drop(reflector);
/// # }
/// ```
pub fn default_watch_error_handler(name: &str, err: &ReflectorError) {
    if err.is_expired() {
        tracing::debug!(reflector = name, error = %err, "watch closed: resource version expired");
    } else {
        tracing::error!(reflector = name, error = %err, kind = err.kind().as_str(), "failed to list and watch");
    }
}

/// Shared, observable state of a running reflector.
#[derive(Debug, Default)]
struct State {
    /// The resume point: the last resource version the reflector has earned.
    last_sync_resource_version: Mutex<String>,
    /// The last resource version is unusable (410 or too large): relist from "".
    resource_version_unavailable: AtomicBool,
    /// A LIST at "0" came back paginated: the server has no watch cache for this resource, keep
    /// paginating.
    paginated_result: AtomicBool,
    /// Who filters by the shard selector; moves only from server-side to client-side.
    shard_mode: ShardModeCell,
}

/// A cheap handle on a reflector's state, usable while it runs.
#[derive(Debug, Clone)]
pub struct ReflectorHandle {
    state: Arc<State>,
}

impl ReflectorHandle {
    /// The resource version the reflector last synced to: the list's, the watch-list bookmark's,
    /// or the last earned watch event's (client-go's `LastSyncResourceVersion`).
    pub fn last_sync_resource_version(&self) -> String {
        self.state.last_sync_resource_version.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Whether the last resource version became unusable and the next list will be from "".
    pub fn is_last_sync_resource_version_unavailable(&self) -> bool {
        self.state.resource_version_unavailable.load(Ordering::Acquire)
    }

    /// Who keeps the cache to the reflector's shard selector: [`ShardMode::Unsharded`] without
    /// one; with one, [`ShardMode::ServerSide`] until the server is shown not to filter, then
    /// [`ShardMode::ClientSide`] for the rest of the reflector's life (see
    /// [`Reflector::shard_selector`]).
    pub fn shard_mode(&self) -> ShardMode {
        self.state.shard_mode.get()
    }
}

/// Keeps a store in step with one collection on the API server (client-go's `Reflector`).
///
/// `run` loops until cancelled: list (or watch-list), then watch, re-watching from the last earned
/// resource version, relisting when it expires, backing off on failures. See the
/// [crate documentation](crate) for the rules it follows.
pub struct Reflector<K> {
    lw: Arc<dyn ListerWatcher<K>>,
    store: Arc<dyn ReflectorStore<K>>,
    key_func: KeyFunc<K>,
    config: ReflectorConfig,
    clock: Arc<dyn Clock>,
    on_error: WatchErrorHandler,
    should_resync: Option<ShouldResync>,
    metrics: Arc<dyn ReflectorMetrics>,
    state: Arc<State>,
    /// The lister-watcher's own shard selector, used when the config names none.
    lw_shard_selector: Option<ShardSelector>,
    /// Whether a LIST without `shardInfo` proves the server did not filter
    /// ([`ListerWatcher::lists_carry_shard_info`]).
    lists_carry_shard_info: bool,
}

impl<K> fmt::Debug for Reflector<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reflector").field("config", &self.config).field("state", &self.state).finish()
    }
}

/// How a watch's event loop ended without an error.
enum Ended {
    /// The stream closed (normally: the server's timeout).
    Closed,
    /// Cancellation was requested.
    Cancelled,
    /// Watch-list mode: the initial-events-end bookmark arrived at this resource version.
    InitialEventsEnd(String),
}

/// An open watch stream and when its request's deadline for being declared hung falls.
struct OpenWatch<K> {
    stream: WatchStream<K>,
    /// The request's start plus its `timeoutSeconds` plus the hung-watch grace: a watch-list
    /// stream that goes on as the live watch keeps the deadline of the request that opened it.
    hung_at: HungDeadline,
}

/// When a watch counts as hung, and how long after its request that is.
#[derive(Clone, Copy)]
struct HungDeadline {
    at: tokio::time::Instant,
    open_for: Duration,
}

/// Where a watch's events go.
enum Sink<'a, K> {
    /// The real store, with resource-version publication.
    Live { propagate_from_start: bool },
    /// The watch-list's temporary store.
    Temporary(&'a mut TempStore<K>),
}

impl<K> Reflector<K>
where
    K: Resource + serde::de::DeserializeOwned + Send + Sync + 'static,
{
    /// A reflector feeding `store` from `lw`, with client-go's defaults.
    ///
    /// Objects are keyed by namespace and name (client-go's `MetaNamespaceKeyFunc`) in the
    /// watch-list's temporary store, with [`meta_namespace_key_func`](kcache_store::meta_namespace_key_func):
    /// the same `Arc` as a store made with it, which then takes the keys as they are.
    pub fn new(lw: impl ListerWatcher<K>, store: impl ReflectorStore<K> + 'static) -> Self {
        let lw_shard_selector = lw.shard_selector();
        let lists_carry_shard_info = lw.lists_carry_shard_info();
        let state = State::default();
        state.shard_mode.set(ShardMode::initial(lw_shard_selector.as_ref()));
        Self {
            lw_shard_selector,
            lists_carry_shard_info,
            lw: Arc::new(lw),
            store: Arc::new(store),
            key_func: kcache_store::meta_namespace_key_func::<K>(),
            config: ReflectorConfig::default(),
            clock: Arc::new(SystemClock),
            on_error: Arc::new(default_watch_error_handler),
            should_resync: None,
            metrics: Arc::new(NoopMetrics),
            state: Arc::new(state),
        }
    }
}

impl<K> Reflector<K>
where
    K: Resource + Send + Sync + 'static,
{
    /// Replaces the whole configuration.
    #[must_use]
    pub fn config(mut self, config: ReflectorConfig) -> Self {
        self.config = config;
        self.state.shard_mode.set(ShardMode::initial(self.selector()));
        self
    }

    /// Caches one shard of the collection (KEP-5866 sharded list and watch); `None` (the
    /// default) adopts the lister-watcher's selector
    /// ([`ApiListerWatcher::shard_selector`](crate::ApiListerWatcher::shard_selector)), if any.
    ///
    /// The selector is sent as `shardSelector` on every LIST, WATCH and watch-list request
    /// (through [`ListOptions::shard_selector`] and [`WatchOptions::shard_selector`]), in
    /// apimachinery's canonical rendering. kube-apiserver v1.36+ with the `ShardedListAndWatch`
    /// gate then sends only this shard's objects; a server without the gate (or older) ignores
    /// the parameter silently and sends everything. The reflector tells the two apart:
    ///
    /// * a LIST page without `metadata.shardInfo` naming this selector means the server did
    ///   not filter (except for metadata-only lists, whose `PartialObjectMetadataList`
    ///   kube-apiserver sends without `shardInfo` either way: see
    ///   [`ListerWatcher::lists_carry_shard_info`]);
    /// * a watch-list's end bookmark carries no `shardInfo`, and a watch nothing of the kind,
    ///   so every object that arrives is hashed: one outside the selector means the server did
    ///   not filter.
    ///
    /// Either switches the reflector from [`ShardMode::ServerSide`] to
    /// [`ShardMode::ClientSide`], logged once at info level and reported to
    /// [`ReflectorMetrics::shard_mode`]; [`ReflectorHandle::shard_mode`] tells the mode in
    /// effect. The switch is for the life of the reflector: a server's feature gate changes
    /// only with a restart, and behind a load balancer servers with and without the gate may
    /// take turns, so re-detecting on each relist would make the mode flap without changing
    /// the cache. The selector is still sent (a server that filters saves both sides the
    /// work).
    ///
    /// In every mode, an object outside the selector (in a list, a watch-list or a watch
    /// event) is dropped before the store: the store's content is the same whichever side
    /// filtered. The hash is apimachinery's (64-bit FNV-1a of the uid or namespace), a few
    /// nanoseconds per object.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache_reflector::{ApiListerWatcher, Reflector, ShardMode};
    /// use kcache_shard_selector::{ShardKey, ShardSelector};
    /// use kcache_store::{Store, meta_namespace_key_func};
    ///
    /// # async fn run(client: kube::Client) {
    /// let shard = ShardSelector::split(ShardKey::Uid, 3).swap_remove(0);
    /// let store = Store::new(meta_namespace_key_func::<ConfigMap>());
    /// let lw = ApiListerWatcher::new(kube::Api::<ConfigMap>::all(client));
    /// let reflector = Reflector::new(lw, store).shard_selector(Some(shard));
    /// assert_eq!(reflector.handle().shard_mode(), ShardMode::ServerSide);
    /// # }
    /// ```
    #[must_use]
    pub fn shard_selector(mut self, selector: Option<ShardSelector>) -> Self {
        self.config.shard_selector = selector;
        self.state.shard_mode.set(ShardMode::initial(self.selector()));
        self
    }

    /// The shard selector in effect: the config's, else the lister-watcher's.
    fn selector(&self) -> Option<&ShardSelector> {
        self.config.shard_selector.as_ref().or(self.lw_shard_selector.as_ref())
    }

    /// The filter by the selector in effect, if any.
    fn shard_filter(&self) -> Option<ShardFilter<'_>> {
        self.selector().map(|selector| ShardFilter {
            selector,
            mode: &self.state.shard_mode,
            metrics: &*self.metrics,
            reflector: &self.config.name,
        })
    }

    /// Sets the name used in logs and metrics.
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.config.name = name.into();
        self
    }

    /// Sets the resync period (zero disables resync).
    #[must_use]
    pub fn resync_period(mut self, period: Duration) -> Self {
        self.config.resync_period = period;
        self
    }

    /// Turns watch-list on (the default) or off.
    #[must_use]
    pub fn use_watch_list(mut self, enabled: bool) -> Self {
        self.config.use_watch_list = enabled;
        self
    }

    /// Forces an explicit LIST page size.
    #[must_use]
    pub fn page_size(mut self, size: u32) -> Self {
        self.config.page_size = Some(size);
        self
    }

    /// Sets how long past its timeout a silent watch is kept before it counts as hung.
    #[must_use]
    pub fn hung_watch_grace(mut self, grace: Duration) -> Self {
        self.config.hung_watch_grace = grace;
        self
    }

    /// Uses `clock` for every timer and timestamp (a [`FakeClock`](crate::FakeClock) in tests).
    #[must_use]
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Sets the handler called with each error that ends a list-and-watch attempt (client-go's
    /// `SetWatchErrorHandler`); the default is [`default_watch_error_handler`].
    ///
    /// As in client-go v0.37 (`Run` calls the handler when `ListAndWatch` returns an error),
    /// these errors reach the handler, and the reflector then backs off and lists again:
    ///
    /// * a LIST that failed (after the immediate retry from "" that an expired or too-large
    ///   resource version gets), or whose result the store refused (`replace` failed);
    /// * a watch that could not be opened after the LIST (or the watch-list), other than a
    ///   refused connection or a 429, which are retried with backoff inside the watch loop.
    ///
    /// These do not, as in client-go: a watch stream that ends with an error, whatever the
    /// error (410 Expired after compaction, any other ERROR event, an undecodable frame, a very
    /// short watch, a resync the store refused, and kcache's hung-watch detection). The watch
    /// loop logs them (an expired version at debug, the rest at warn, client-go's "watch ended
    /// with error"), reports them to [`ReflectorMetrics::watch_ended`], and the reflector backs
    /// off and relists (a hung watch is re-watched at once). A normal close is re-watched at
    /// once from the last synced resource version. A failed watch-list is not reported either:
    /// that cycle falls back to LIST + WATCH, whose errors are.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache_reflector::{ApiListerWatcher, ErrorKind, Reflector};
    /// use kcache_store::{Store, meta_namespace_key_func};
    ///
    /// # async fn run(client: kube::Client) {
    /// let seen: Arc<Mutex<Vec<ErrorKind>>> = Arc::default();
    /// let record = Arc::clone(&seen);
    /// let store = Store::new(meta_namespace_key_func::<ConfigMap>());
    /// let lw = ApiListerWatcher::new(kube::Api::<ConfigMap>::namespaced(client, "default"));
    /// let reflector = Reflector::new(lw, store)
    ///     .watch_error_handler(move |_name, err| record.lock().unwrap().push(err.kind()));
    /// # drop(reflector);
    /// # }
    /// ```
    #[must_use]
    pub fn watch_error_handler(
        mut self,
        handler: impl Fn(&str, &ReflectorError) + Send + Sync + 'static,
    ) -> Self {
        self.on_error = Arc::new(handler);
        self
    }

    /// Sets the predicate consulted before each periodic resync.
    #[must_use]
    pub fn should_resync(mut self, f: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        self.should_resync = Some(Arc::new(f));
        self
    }

    /// Reports to `metrics`.
    #[must_use]
    pub fn metrics(mut self, metrics: Arc<dyn ReflectorMetrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Keys the watch-list's temporary store with `key_func` instead of namespace/name.
    ///
    /// The keys go on to the store with the objects at the bookmark that ends the initial
    /// events ([`ReflectorStore::replace_keyed`]): a store or FIFO whose key function is this
    /// same `Arc` files the objects under them without computing any again.
    #[must_use]
    pub fn key_func(mut self, key_func: KeyFunc<K>) -> Self {
        self.key_func = key_func;
        self
    }

    /// A handle to observe the reflector while it runs.
    pub fn handle(&self) -> ReflectorHandle {
        ReflectorHandle { state: Arc::clone(&self.state) }
    }

    /// The resource version the reflector last synced to.
    pub fn last_sync_resource_version(&self) -> String {
        self.handle().last_sync_resource_version()
    }

    /// Runs until `cancel` is cancelled: list-and-watch, hand any error to the watch error
    /// handler, back off, repeat (client-go's `Run`: immediate first attempt, sliding backoff).
    ///
    /// Never returns on its own, whatever the server does.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future stops the reflector at once; nothing is half-written to the store
    /// (each store call is synchronous).
    pub async fn run(self, cancel: CancellationToken) {
        let seed = self.config.seed.unwrap_or_else(rand::random);
        // The reset window starts now, as client-go's starts when `NewReflector` builds the
        // delay function (`DelayWithReset` reads `c.Now()`).
        let mut backoff = Backoff::with_seed(self.config.backoff, seed, self.clock.now());
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0x5eed);
        tracing::debug!(reflector = %self.config.name, "starting reflector");
        self.metrics.shard_mode(&self.config.name, self.state.shard_mode.get());
        loop {
            if cancel.is_cancelled() {
                break;
            }
            let span = tracing::debug_span!("list_and_watch", reflector = %self.config.name);
            let result = self.list_and_watch(&cancel, &mut backoff, &mut rng).instrument(span).await;
            if cancel.is_cancelled() {
                break;
            }
            let mut retry_after = None;
            // Only what ends the attempt with an error reaches the handler: a failed LIST, a
            // watch that could not be opened. A watch that ended with an error ended the attempt
            // with `Ok` (client-go's `watch` returns nil), and is backed off all the same.
            if let Err(err) = &result {
                retry_after = err.retry_after();
                (self.on_error)(&self.config.name, err);
            }
            // Sliding: the delay starts when the attempt ended.
            let delay = backoff.next_delay(self.clock.now()).max(retry_after.unwrap_or_default());
            tokio::select! {
                () = cancel.cancelled() => break,
                () = self.clock.sleep(delay) => {}
            }
        }
        tracing::debug!(reflector = %self.config.name, "reflector stopped");
    }

    fn set_last_sync_resource_version(&self, rv: &str) {
        // Copied into the `String` already there: no allocation per event once it is long
        // enough.
        let mut last = self.state.last_sync_resource_version.lock().unwrap_or_else(|e| e.into_inner());
        last.clear();
        last.push_str(rv);
        drop(last);
        self.metrics.last_sync_resource_version(&self.config.name, rv);
    }

    fn set_unavailable(&self, unavailable: bool) {
        self.state.resource_version_unavailable.store(unavailable, Ordering::Release);
    }

    /// client-go's `relistResourceVersion`: "" once the last one is unusable, "0" before any
    /// sync (so the first list may be served from the watch cache), else the last synced one.
    fn relist_resource_version(&self) -> String {
        if self.state.resource_version_unavailable.load(Ordering::Acquire) {
            return String::new();
        }
        let last = self.last_sync_resource_version();
        if last.is_empty() { "0".to_owned() } else { last }
    }

    /// client-go's `rewatchResourceVersion`, the starting point of a watch-list.
    fn rewatch_resource_version(&self) -> String {
        if self.state.resource_version_unavailable.load(Ordering::Acquire) {
            return String::new();
        }
        self.last_sync_resource_version()
    }

    fn watch_timeout(&self, rng: &mut impl Rng) -> u64 {
        let min = self.config.min_watch_timeout.clamp(MIN_WATCH_TIMEOUT, FAR_FUTURE).as_secs();
        min + rng.random_range(0..min.max(1))
    }

    /// When a watch requested at `start` with `timeout_seconds` counts as hung: the server
    /// closes every watch at its timeout, so one still open past it plus the grace is not being
    /// served.
    fn hung_deadline(&self, start: tokio::time::Instant, timeout_seconds: u64) -> HungDeadline {
        let grace = self.config.hung_watch_grace.min(FAR_FUTURE);
        let open_for = Duration::from_secs(timeout_seconds).min(2 * FAR_FUTURE) + grace;
        HungDeadline { at: start + open_for, open_for }
    }

    async fn sleep_or_cancel(&self, delay: Duration, cancel: &CancellationToken) -> bool {
        tokio::select! {
            () = cancel.cancelled() => false,
            () = self.clock.sleep(delay) => true,
        }
    }

    async fn list_and_watch(
        &self,
        cancel: &CancellationToken,
        backoff: &mut Backoff,
        rng: &mut impl Rng,
    ) -> Result<()> {
        let mut stream = None;
        let mut fallback = !self.config.use_watch_list;
        if self.config.use_watch_list {
            match self.watch_list(cancel, backoff, rng).await {
                Ok(Some(s)) => stream = Some(s),
                Ok(None) => return Ok(()),
                Err(err) => {
                    // Any failure, including a half-read stream (dropped here, never reused),
                    // falls back to LIST + WATCH from a known-good starting point.
                    tracing::debug!(
                        reflector = %self.config.name,
                        error = %err,
                        "data could not be fetched in watch-list mode; falling back to LIST + WATCH \
                         (expected if the server does not support watch-list or has it disabled)"
                    );
                    self.metrics.relist(&self.config.name, RelistReason::WatchListFallback);
                    fallback = true;
                }
            }
        }
        if fallback && !self.list(cancel).await? {
            return Ok(());
        }
        self.watch_with_resync(stream, cancel, backoff, rng).await
    }

    /// LIST with client-go's pager rules. Returns `Ok(false)` when cancelled.
    async fn list(&self, cancel: &CancellationToken) -> Result<bool> {
        let rv = self.relist_resource_version();
        let page_size = self.page_size_for(&rv);
        let started = self.clock.now();
        let listed = tokio::select! {
            () = cancel.cancelled() => return Ok(false),
            r = self.list_pages(&rv, page_size) => r,
        };
        let listed = match listed {
            Err(err) if err.is_expired() || err.is_too_large_resource_version() || rejected_rv(&err, &rv) => {
                // The resource version we listed at is gone (or not there yet, or the server
                // cannot parse it): mark it unusable and retry at once from "", so the reflector
                // always makes progress.
                self.set_unavailable(true);
                self.metrics.relist(&self.config.name, RelistReason::ResourceVersionUnavailable);
                let rv = self.relist_resource_version();
                tokio::select! {
                    () = cancel.cancelled() => return Ok(false),
                    r = self.list_pages(&rv, page_size) => r,
                }
            }
            other => other,
        };
        let (mut items, list_rv, paginated, shard_info) = match listed {
            Err(err) => {
                // Whatever failed (a 404 for a resource type not served yet included), the store
                // keeps what it has, as in client-go: a failed LIST is retried after backoff,
                // never applied as an empty list.
                self.metrics.list_failed(&self.config.name, err.kind());
                return Err(err);
            }
            Ok(v) => v,
        };
        if rv == "0" && paginated {
            self.state.paginated_result.store(true, Ordering::Release);
        }
        if let Some(filter) = self.shard_filter() {
            // A metadata-only list says nothing either way: its objects alone are the evidence.
            filter.filter_list(&mut items, shard_info || !self.lists_carry_shard_info);
        }
        self.set_unavailable(false);
        let count = items.len();
        if let Err(e) = self.store.replace(items, &list_rv) {
            let err = ReflectorError::Store(e.to_string());
            self.metrics.list_failed(&self.config.name, err.kind());
            return Err(err);
        }
        self.set_last_sync_resource_version(&list_rv);
        self.metrics.list_completed(
            &self.config.name,
            count,
            self.clock.now().saturating_duration_since(started),
        );
        tracing::debug!(reflector = %self.config.name, items = count, resource_version = %list_rv, "listed");
        Ok(true)
    }

    /// Whether a list page's `metadata.shardInfo.selector` says the server filtered by the
    /// selector in effect: present, and naming the same selector (kube-apiserver echoes its
    /// canonical rendering, our `Display`; a selector that parses to the same one counts too).
    /// Another selector (a proxy's cached answer for another shard, say) is no proof.
    fn filtered_as_asked(&self, shard_info: Option<&str>) -> bool {
        match (shard_info, self.selector()) {
            (Some(echoed), Some(asked)) => {
                echoed == asked.to_string() || ShardSelector::parse(echoed).is_ok_and(|e| &e == asked)
            }
            _ => false,
        }
    }

    /// The pager's page size for a list at `rv` (client-go's `list` switch).
    fn page_size_for(&self, rv: &str) -> Option<u32> {
        if let Some(size) = self.config.page_size {
            return Some(size);
        }
        if self.state.paginated_result.load(Ordering::Acquire) {
            return Some(DEFAULT_PAGE_SIZE);
        }
        if !rv.is_empty() && rv != "0" {
            // Listing at a specific resource version without a limit lets the server answer from
            // its watch cache: "to avoid thundering herd on etcd (e.g. on master upgrades)".
            return None;
        }
        Some(DEFAULT_PAGE_SIZE)
    }

    /// Lists every page. On a continue token expired (reason `Expired`), one full unpaginated list
    /// at the original resource version (client-go's `FullListIfExpired`). Returns the items,
    /// the list's resource version, whether it came in pages, and whether every page carried
    /// `metadata.shardInfo`.
    async fn list_pages(&self, rv: &str, limit: Option<u32>) -> Result<(Vec<Arc<K>>, String, bool, bool)> {
        let mut items = Vec::new();
        let shard_selector = self.selector().cloned();
        let mut opts =
            ListOptions { resource_version: rv.to_owned(), limit, continue_token: None, shard_selector };
        let mut paginated = false;
        let mut shard_info = true;
        let mut first_page_rv: Option<String> = None;
        loop {
            let page = match self.lw.list(opts.clone()).await {
                Ok(p) => p,
                // Only reason Expired (`errors.IsResourceExpired`), not every 410: a Gone goes
                // back to `list`, which retries from "".
                Err(err) if err.is_resource_expired() && opts.continue_token.is_some() => {
                    tracing::debug!(reflector = %self.config.name, "continue token expired; full list");
                    self.metrics.relist(&self.config.name, RelistReason::ContinueExpired);
                    let full = ListOptions { limit: None, continue_token: None, ..opts };
                    let page = self.lw.list(full).await?;
                    let shard_info = self.filtered_as_asked(page.shard_info.as_deref());
                    return Ok((page.items, page.resource_version, paginated, shard_info));
                }
                Err(err) => return Err(err),
            };
            shard_info &= self.filtered_as_asked(page.shard_info.as_deref());
            if items.is_empty() {
                items = page.items;
            } else {
                items.extend(page.items);
            }
            // The list's resource version is its first page's, as in client-go's pager: the
            // later pages are read at it through the continue token.
            let list_rv = first_page_rv.get_or_insert(page.resource_version);
            match page.continue_token {
                Some(token) => {
                    paginated = true;
                    opts.continue_token = Some(token);
                }
                None => return Ok((items, std::mem::take(list_rv), paginated, shard_info)),
            }
        }
    }

    /// Watch-list: one stream whose initial events fill a temporary store, swapped in atomically
    /// by `replace` at the end bookmark; the same stream then goes on as the live watch.
    /// `Ok(None)` means cancelled.
    async fn watch_list(
        &self,
        cancel: &CancellationToken,
        backoff: &mut Backoff,
        rng: &mut impl Rng,
    ) -> Result<Option<OpenWatch<K>>> {
        loop {
            if cancel.is_cancelled() {
                return Ok(None);
            }
            let timeout = self.watch_timeout(rng);
            let opts = WatchOptions {
                resource_version: self.rewatch_resource_version(),
                timeout_seconds: timeout,
                allow_bookmarks: true,
                send_initial_events: true,
                shard_selector: self.selector().cloned(),
            };
            let start = self.clock.now();
            self.metrics.watch_started(&self.config.name, true);
            let opened = tokio::select! {
                () = cancel.cancelled() => return Ok(None),
                r = self.lw.watch(opts) => r,
            };
            let mut stream = match opened {
                Ok(s) => s,
                Err(err) => {
                    self.metrics.watch_ended(&self.config.name, Some(err.kind()));
                    if self.retry_watch_list_after(&err, cancel, backoff).await? {
                        continue;
                    }
                    return Err(err);
                }
            };
            let hung_at = self.hung_deadline(start, timeout);
            let mut temp = TempStore::with_capacity(0);
            let mut no_resync = None;
            let outcome = self
                .handle_watch(&mut stream, Sink::Temporary(&mut temp), start, hung_at, &mut no_resync, cancel)
                .await;
            match outcome {
                Ok(Ended::InitialEventsEnd(rv)) => {
                    self.set_unavailable(false);
                    let count = temp.len();
                    if let Err(e) = self.store.replace_keyed(temp.into_entries(), &self.key_func, &rv) {
                        let err = ReflectorError::Store(format!("unable to sync watch-list result: {e}"));
                        self.metrics.watch_ended(&self.config.name, Some(err.kind()));
                        return Err(err);
                    }
                    self.set_last_sync_resource_version(&rv);
                    tracing::debug!(reflector = %self.config.name, items = count, resource_version = %rv,
                        "watch-list synced; continuing on the same stream");
                    return Ok(Some(OpenWatch { stream, hung_at }));
                }
                Ok(Ended::Cancelled) => return Ok(None),
                Ok(Ended::Closed) => {
                    // client-go's `watchList` opens another watch-list at once here, with no
                    // backoff; a server or proxy that keeps cutting the stream would then stream
                    // the whole initial state again and again. kcache treats it as any other
                    // watch-list failure: the half-filled temporary store is dropped and this
                    // cycle falls back to LIST + WATCH (the next cycle tries watch-list again).
                    let err = ReflectorError::WatchListIncomplete;
                    self.metrics.watch_ended(&self.config.name, Some(err.kind()));
                    return Err(err);
                }
                Err(err) => {
                    drop(stream);
                    self.metrics.watch_ended(&self.config.name, Some(err.kind()));
                    if self.retry_watch_list_after(&err, cancel, backoff).await? {
                        continue;
                    }
                    return Err(err);
                }
            }
        }
    }

    /// client-go's `isErrorRetriableWithSideEffectsFn` for watch-list: back off and retry on a
    /// refused connection or 429; retry from "" on an unusable resource version.
    async fn retry_watch_list_after(
        &self,
        err: &ReflectorError,
        cancel: &CancellationToken,
        backoff: &mut Backoff,
    ) -> Result<bool> {
        if err.is_watch_retriable() {
            let delay = backoff.next_delay(self.clock.now()).max(err.retry_after().unwrap_or_default());
            tracing::debug!(reflector = %self.config.name, error = %err, ?delay, "watch-list backing off");
            return Ok(self.sleep_or_cancel(delay, cancel).await);
        }
        if err.is_expired() || err.is_too_large_resource_version() {
            if self.state.resource_version_unavailable.swap(true, Ordering::AcqRel) {
                // Already retrying from "": a second expiry cannot be cured by retrying.
                return Ok(false);
            }
            return Ok(true);
        }
        Ok(false)
    }

    fn resync_timer(&self) -> Option<Sleep> {
        (!self.config.resync_period.is_zero()).then(|| self.clock.sleep(self.config.resync_period))
    }

    /// The watch loop with its resync timer (client-go's `watchWithResync` and `watch`): re-watch
    /// from the last resource version after each clean close; return when a relist is needed.
    /// Only a watch that could not be opened is returned as an error (the attempt's error, for
    /// the watch error handler); a watch that ended with one returns `Ok` after logging it.
    /// Exactly one resync timer is alive at a time: it is replaced only after it fired, and
    /// dropped when this function returns.
    async fn watch_with_resync(
        &self,
        mut stream: Option<OpenWatch<K>>,
        cancel: &CancellationToken,
        backoff: &mut Backoff,
        rng: &mut impl Rng,
    ) -> Result<()> {
        let mut resync = self.resync_timer();
        let mut internal_retry = InternalErrorRetry::default();
        loop {
            if cancel.is_cancelled() {
                return Ok(());
            }
            let start = self.clock.now();
            let timeout = self.watch_timeout(rng);
            let (mut s, hung_at) = match stream.take() {
                Some(open) => (open.stream, open.hung_at),
                None => {
                    let rv = self.last_sync_resource_version();
                    let opts = WatchOptions {
                        resource_version: rv.clone(),
                        timeout_seconds: timeout,
                        allow_bookmarks: true,
                        send_initial_events: false,
                        shard_selector: self.selector().cloned(),
                    };
                    self.metrics.watch_started(&self.config.name, false);
                    let opened = tokio::select! {
                        () = cancel.cancelled() => return Ok(()),
                        r = self.lw.watch(opts) => r,
                    };
                    match opened {
                        Ok(s) => (s, self.hung_deadline(start, timeout)),
                        Err(err) if err.is_watch_retriable() => {
                            self.metrics.watch_ended(&self.config.name, Some(err.kind()));
                            let delay = backoff
                                .next_delay(self.clock.now())
                                .max(err.retry_after().unwrap_or_default());
                            tracing::debug!(reflector = %self.config.name, error = %err, ?delay,
                                "watch failed, backing off");
                            match self.wait_with_resync(delay, &mut resync, cancel).await {
                                Ok(true) => continue,
                                Ok(false) => return Ok(()),
                                Err(err) => {
                                    self.watch_ended_with(&err);
                                    return Ok(());
                                }
                            }
                        }
                        Err(err) => {
                            self.metrics.watch_ended(&self.config.name, Some(err.kind()));
                            self.count_relist_after(&err);
                            return Err(err);
                        }
                    }
                }
            };
            let propagate_from_start = {
                let rv = self.last_sync_resource_version();
                // A watch from "" or "0" starts with synthetic ADDED events in no particular
                // resource-version order: publish nothing until we are past them.
                !(rv.is_empty() || rv == "0")
            };
            let outcome = self
                .handle_watch(
                    &mut s,
                    Sink::Live { propagate_from_start },
                    start,
                    hung_at,
                    &mut resync,
                    cancel,
                )
                .await;
            drop(s);
            match outcome {
                Ok(Ended::Cancelled) => return Ok(()),
                Ok(Ended::Closed | Ended::InitialEventsEnd(_)) => {
                    self.metrics.watch_ended(&self.config.name, None);
                    continue;
                }
                Err(err) => {
                    self.metrics.watch_ended(&self.config.name, Some(err.kind()));
                    match &err {
                        ReflectorError::WatchHung(_) => {
                            // The connection died silently; the resource version we hold is as
                            // good as after a clean close, so re-watch from it rather than relist
                            // (a 410 on that watch still leads to a relist). Logged at warn (and
                            // counted by `watch_ended`), as any watch that ended with an error;
                            // client-go has no such detection, so its handler never sees one.
                            tracing::warn!(reflector = %self.config.name, error = %err,
                                "watch hung; watching again from the last synced resource version");
                            continue;
                        }
                        ReflectorError::TooManyRequests { .. } => {
                            let delay = backoff
                                .next_delay(self.clock.now())
                                .max(err.retry_after().unwrap_or_default());
                            tracing::debug!(reflector = %self.config.name, ?delay, "watch returned 429, backing off");
                            match self.wait_with_resync(delay, &mut resync, cancel).await {
                                Ok(true) => continue,
                                Ok(false) => return Ok(()),
                                Err(err) => {
                                    self.watch_ended_with(&err);
                                    return Ok(());
                                }
                            }
                        }
                        _ if err.is_internal_error()
                            && internal_retry.should_retry(
                                self.clock.now(),
                                self.config.max_internal_error_retry_duration,
                            ) =>
                        {
                            tracing::debug!(reflector = %self.config.name, error = %err, "retrying watch after internal error");
                            continue;
                        }
                        _ => {
                            self.watch_ended_with(&err);
                            return Ok(());
                        }
                    }
                }
            }
        }
    }

    /// A watch ended with `err` (an ERROR event, a decode error, a very short watch, a resync the
    /// store refused): client-go's `watch` logs it and returns nil, so `ListAndWatch` succeeds,
    /// the watch error handler is not called, and `Run` backs off before the next list. The
    /// same here: logged, counted as the cause of the coming relist, not returned.
    fn watch_ended_with(&self, err: &ReflectorError) {
        self.count_relist_after(err);
        if err.is_expired() {
            // "Don't set LastSyncResourceVersionUnavailable": the relist is at the last synced
            // version, which the server answers with data at least that new.
            tracing::debug!(reflector = %self.config.name, error = %err, "watch closed; relisting");
        } else {
            tracing::warn!(reflector = %self.config.name, error = %err, kind = err.kind().as_str(),
                "watch ended with error; relisting after backoff");
        }
    }

    /// Counts the relist that follows a watch that failed with `err`.
    fn count_relist_after(&self, err: &ReflectorError) {
        let reason = if err.is_expired() { RelistReason::Expired } else { RelistReason::WatchError };
        self.metrics.relist(&self.config.name, reason);
    }

    /// Sleeps `delay` while still serving the resync timer. `Ok(false)` when cancelled.
    async fn wait_with_resync(
        &self,
        delay: Duration,
        resync: &mut Option<Sleep>,
        cancel: &CancellationToken,
    ) -> Result<bool> {
        let mut sleep = self.clock.sleep(delay);
        loop {
            tokio::select! {
                () = cancel.cancelled() => return Ok(false),
                () = &mut sleep => return Ok(true),
                () = wait_opt(resync) => self.fire_resync(resync)?,
            }
        }
    }

    /// The resync timer fired: resync the store if allowed, then arm the next timer.
    fn fire_resync(&self, resync: &mut Option<Sleep>) -> Result<()> {
        // The fired timer is dropped before the next is made: never two alive at once.
        *resync = None;
        if self.should_resync.as_ref().is_none_or(|f| f()) {
            tracing::debug!(reflector = %self.config.name, "forcing resync");
            self.store.resync().map_err(|e| ReflectorError::Store(format!("resync failed: {e}")))?;
        }
        *resync = self.resync_timer();
        Ok(())
    }

    /// Reads one watch until it closes, fails, is cancelled, or (watch-list) reaches the end
    /// of initial events.
    async fn handle_watch(
        &self,
        stream: &mut WatchStream<K>,
        mut sink: Sink<'_, K>,
        start: tokio::time::Instant,
        hung_at: HungDeadline,
        resync: &mut Option<Sleep>,
        cancel: &CancellationToken,
    ) -> Result<Ended> {
        let mut hung = self.clock.sleep(hung_at.at.saturating_duration_since(self.clock.now()));
        let mut event_count: u64 = 0;
        let mut besides_added = false;
        // Made once for the whole watch: a new `cancelled()` future per event registers with the
        // token (a lock) on its first poll and unregisters (another) when dropped.
        let cancelled = cancel.cancelled();
        tokio::pin!(cancelled);
        // The event's resource version, in one buffer for the whole watch: copied from each
        // event rather than cloned into a new `String` (an allocation and a free per event).
        let mut rv = String::new();
        loop {
            let item = tokio::select! {
                biased;
                () = &mut cancelled => return Ok(Ended::Cancelled),
                () = wait_opt(resync) => {
                    self.fire_resync(resync)?;
                    continue;
                }
                () = &mut hung => return Err(ReflectorError::WatchHung(hung_at.open_for)),
                item = stream.next() => item,
            };
            let event = match item {
                None => break,
                Some(Err(err)) => return Err(err),
                Some(Ok(ev)) => ev,
            };
            rv.clear();
            let label = match &event {
                WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => {
                    rv.push_str(o.meta().resource_version.as_deref().unwrap_or_default());
                    event_label(&event)
                }
                WatchEvent::Bookmark(b) => {
                    rv.push_str(&b.resource_version);
                    "BOOKMARK"
                }
                WatchEvent::Error(status) => {
                    return Err(ReflectorError::from_status((**status).clone(), None, None));
                }
            };
            self.metrics.event_received(&self.config.name, label);
            if rv.is_empty() {
                return Err(ReflectorError::MissingResourceVersion("watch event object"));
            }
            event_count += 1;
            let event = match (self.shard_filter(), event) {
                // Outside the shard: never delivered, whatever the server claimed. Its resource
                // version still counts (the stream has moved past it).
                (
                    Some(filter),
                    WatchEvent::Added(obj) | WatchEvent::Modified(obj) | WatchEvent::Deleted(obj),
                ) if !filter.admits(
                    &*obj,
                    if matches!(sink, Sink::Temporary(_)) { "watch-list" } else { "watch" },
                ) =>
                {
                    if !matches!(label, "ADDED") {
                        besides_added = true;
                    }
                    None
                }
                (_, event) => Some(event),
            };
            match (&mut sink, event) {
                (_, None) => {}
                // Live changes can come between the initial events and the end bookmark (the
                // server sends that bookmark from its bookmark timer): client-go applies them to
                // the temporary store, and so do we.
                (Sink::Temporary(temp), Some(WatchEvent::Added(obj) | WatchEvent::Modified(obj))) => {
                    let key = (self.key_func)(&obj).map_err(|e| ReflectorError::Store(e.to_string()))?;
                    temp.upsert(key, obj);
                }
                (Sink::Temporary(temp), Some(WatchEvent::Deleted(obj))) => {
                    let key = (self.key_func)(&obj).map_err(|e| ReflectorError::Store(e.to_string()))?;
                    temp.remove(&key);
                }
                (Sink::Temporary(_), Some(WatchEvent::Bookmark(b))) if !b.initial_events_end => {
                    // The API server's first bookmark after the initial events is the annotated
                    // one, so a plain bookmark first means a server that ignored
                    // sendInitialEvents and serves a plain watch. (client-go keeps reading until
                    // the stream ends, then opens another watch-list; it never falls back here.)
                    return Err(ReflectorError::WatchListUnsupported(
                        "a bookmark without the initial-events-end annotation arrived first",
                    ));
                }
                (Sink::Temporary(_), Some(WatchEvent::Bookmark(_))) => {
                    tracing::debug!(reflector = %self.config.name, items = event_count - 1,
                        "received the bookmark that marks the end of initial events");
                    return Ok(Ended::InitialEventsEnd(std::mem::take(&mut rv)));
                }
                (Sink::Live { .. }, Some(ev)) => {
                    let result = match ev {
                        WatchEvent::Added(obj) => self.store.add(obj),
                        WatchEvent::Modified(obj) => {
                            besides_added = true;
                            self.store.update(obj)
                        }
                        WatchEvent::Deleted(obj) => {
                            besides_added = true;
                            self.store.delete(obj)
                        }
                        WatchEvent::Bookmark(_) => {
                            besides_added = true;
                            Ok(())
                        }
                        WatchEvent::Error(_) => Ok(()),
                    };
                    if let Err(e) = result {
                        // client-go logs and goes on: one bad object must not stop the watch.
                        tracing::error!(reflector = %self.config.name, error = %e, event = label,
                            "unable to apply watch event to the store");
                    }
                }
                (Sink::Temporary(_), Some(WatchEvent::Error(_))) => {}
            }
            if let Sink::Live { propagate_from_start } = &sink {
                let propagate_from_start = *propagate_from_start;
                // Publish only a resource version we have earned: from a known resource version
                // at once, from "" or "0" only after the first non-ADDED event.
                if propagate_from_start || besides_added {
                    self.set_last_sync_resource_version(&rv);
                    self.store.update_resource_version(&rv);
                }
            }
        }
        if event_count == 0 && self.clock.now().saturating_duration_since(start) < VERY_SHORT_WATCH {
            return Err(ReflectorError::VeryShortWatch);
        }
        Ok(Ended::Closed)
    }
}

/// After this long without an internal error, the next one opens a new retry window (client-go's
/// `minResetPeriod` of the reflector's `RetryWithDeadline`).
const INTERNAL_ERROR_RETRY_RESET: Duration = Duration::from_secs(60);

/// client-go's `RetryWithDeadline` for watch InternalErrors: the retry window opens at the
/// *first* internal error (not when the watch loop started, or a long-healthy watch would never
/// be retried) and a quiet minute closes it.
#[derive(Debug, Default)]
struct InternalErrorRetry {
    /// When the current run of internal errors began; `None` when there is none.
    first: Option<tokio::time::Instant>,
    /// When the latest internal error of the current run happened.
    last: Option<tokio::time::Instant>,
}

impl InternalErrorRetry {
    /// Records an internal error at `now` and says whether to re-watch without relisting.
    fn should_retry(&mut self, now: tokio::time::Instant, max: Duration) -> bool {
        if self.last.is_some_and(|last| now.saturating_duration_since(last) >= INTERNAL_ERROR_RETRY_RESET) {
            self.first = None;
        }
        let first = *self.first.get_or_insert(now);
        self.last = Some(now);
        if !max.is_zero() && now.saturating_duration_since(first) <= max {
            return true;
        }
        // Out of time: relist, and let the next internal error start afresh.
        *self = Self::default();
        false
    }
}

/// A 400 to a LIST at a specific resource version: the server cannot use that version (a watch
/// event carried a resource version it does not understand, such as a non-numeric one). client-go
/// retries such a LIST at the same version for ever; relisting from "" recovers.
fn rejected_rv(err: &ReflectorError, rv: &str) -> bool {
    matches!(err, ReflectorError::Rejected(s) if s.code == 400) && !rv.is_empty() && rv != "0"
}

fn event_label<K>(ev: &WatchEvent<K>) -> &'static str {
    match ev {
        WatchEvent::Added(_) => "ADDED",
        WatchEvent::Modified(_) => "MODIFIED",
        WatchEvent::Deleted(_) => "DELETED",
        WatchEvent::Bookmark(_) => "BOOKMARK",
        WatchEvent::Error(_) => "ERROR",
    }
}

/// Awaits an optional timer; never completes when there is none.
async fn wait_opt(timer: &mut Option<Sleep>) {
    match timer {
        Some(t) => t.await,
        None => std::future::pending().await,
    }
}
