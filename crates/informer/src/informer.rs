//! `SharedIndexInformer`: reflector -> FIFO -> indexer + processor -> one listener per handler.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use kcache_delta_fifo::{
    AtomicEvent, DeltaFifo, DeltaFifoOptions, DeltaType, Deltas, Fifo, FifoError, FifoExt, RealFifo,
    RealFifoOptions, TransformFunc,
};
use kcache_reflector::{
    ApiListerWatcher, Clock, ListerWatcher, Reflector, ReflectorConfig, ReflectorError, ReflectorHandle,
    ShardMode, SystemClock,
};
use kcache_store::{
    CacheRepr, Indexers, KeyFunc, KnownObjects, ObjectOrTombstone, ReflectorStore, Store, StoreError,
    meta_namespace_key_func, namespace_indexers,
};
use kcache_utils::{FAR_FUTURE, panic_message};
use kube::Resource;
use parking_lot::Mutex;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::error::InformerError;
use crate::failure::{FailureCause, FailurePolicy, InformerFailure, PanicPolicy};
use crate::failure_state::FailureState;
use crate::handler::ResourceEventHandler;
use crate::health::{HealthState, InformerHealth};
use crate::listener::{Listener, ListenerMode, ListenerOptions, Notification};
use crate::lister::Lister;
use crate::metrics::InformerMetrics;
use crate::processor::{HandlerStats, Processor, determine_resync_period};
use crate::sync::{HasSynced, SyncSignal, wait_until};

/// The smallest resync period honoured (client-go's `minimumResyncPeriod`).
pub const MINIMUM_RESYNC_PERIOD: Duration = Duration::from_secs(1);

/// Which FIFO sits between the reflector and the handlers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FifoKind {
    /// The in-order FIFO (client-go's RealFIFO, the informer default since 1.33) with atomic
    /// relists and resyncs (client-go's `AtomicFIFO` feature gate, beta and on by default since
    /// 1.36): every delta in arrival order, except that a relist is applied to the cache as one
    /// unit before any handler hears of it, so a lister sees the cache before the relist or
    /// after it, never half of it. The handlers hear what they would hear without it: the
    /// deletions the relist implies first (as tombstones), then an add or update for every
    /// listed object, in list order.
    #[default]
    InOrder,
    /// The in-order FIFO as client-go 1.33 to 1.35 have it (`AtomicFIFO` off): every delta of a
    /// relist is its own step, applied to the cache and handed to the handlers one at a time,
    /// so a lister can see part of a relist applied.
    InOrderNonAtomic,
    /// client-go's DeltaFIFO: deltas collapsed per key, emitting `Replaced` on relists.
    DeltaFifo,
}

/// Options for one handler.
#[derive(Debug, Clone, Default)]
pub struct HandlerOptions {
    /// A name for logs (defaults to `handler-<id>`).
    pub name: Option<String>,
    /// The handler's resync period; `None` takes the informer's default.
    pub resync_period: Option<Duration>,
    /// How its pending notifications are buffered.
    pub mode: ListenerMode,
    /// Opt-in: updates that did not change an object's resourceVersion reach this handler only
    /// when its own resync is due (as `on_update(o, o)` of that resync).
    ///
    /// By default (false), as in client-go, a handler also receives `on_update(o, o)` for every
    /// unchanged object of each relist (after a 410 Expired, an outage, a watch-list fallback)
    /// and for a watch event that repeats the cached version, whatever its resync period,
    /// until the informer's first resync check; from then on only when it is due for a resync
    /// (client-go's `sharedProcessor.addListener` puts every listener in the syncing set, and
    /// only `shouldResync` takes it out). On an informer without resync that check never runs,
    /// so every relist reaches every handler: level-triggered healing. A controller whose
    /// workqueue dropped a key after too many retries gets it back on the next relist, and
    /// whatever a handler missed during an outage is re-announced.
    ///
    /// Set it to hear only of changes: fewer notifications after each relist (a relist of 50k
    /// unchanged objects is 50k `on_update` calls per handler otherwise), at the cost of that
    /// healing: a key dropped by the handler's workqueue stays dropped until the object changes
    /// or the handler's resync comes.
    pub skip_unchanged_updates: bool,
    /// What a panic in this handler does: [`PanicPolicy::Continue`] (the default) drops the
    /// notification and goes on; [`PanicPolicy::FailInformer`] fails the whole informer. Every
    /// panic is counted and logged either way.
    pub on_panic: PanicPolicy,
}

type WatchErrorFn = Arc<dyn Fn(&str, &ReflectorError) + Send + Sync>;
type MetricsRef = Arc<dyn kcache_reflector::ReflectorMetrics>;

/// Settings that may change only before the informer starts.
struct Settings<K> {
    transform: Option<TransformFunc<K>>,
    watch_error_handler: Option<WatchErrorFn>,
    reflector_metrics: Option<MetricsRef>,
    resync_check_period: Duration,
    default_handler_resync_period: Duration,
    fifo_kind: FifoKind,
    reflector_config: ReflectorConfig,
    clock: Arc<dyn Clock>,
}

struct Inner<K> {
    name: String,
    lw: Arc<dyn ListerWatcher<K>>,
    indexer: Store<K>,
    key_func: KeyFunc<K>,
    processor: Processor<K>,
    settings: Mutex<Settings<K>>,
    started: AtomicBool,
    stopped: AtomicBool,
    synced: AtomicBool,
    sync_signal: Arc<SyncSignal>,
    /// The informer's failure, if it failed; shared with its listeners and listers.
    failure: Arc<FailureState>,
    /// Held while deltas are processed and while a handler is added, so a late handler's replay
    /// of the cache is atomic with respect to the notifications that follow (client-go's
    /// `blockDeltas`).
    block_deltas: Mutex<()>,
    /// The reflector's newest resource version and the one the indexer was last given; see
    /// [`Inner::publish_resource_version`].
    resource_versions: Mutex<ResourceVersions>,
    fifo: OnceLock<Arc<dyn Fifo<K>>>,
    reflector: OnceLock<ReflectorHandle>,
}

/// A shared index informer (client-go's `SharedIndexInformer`): one list-and-watch of a
/// collection, an indexed cache of it, and any number of handlers, each told about every change
/// in order, on its own thread, without waiting for the others.
///
/// Cheap to clone: clones share the informer.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache_informer::{EventHandlerFuncs, SharedIndexInformer};
/// use tokio_util::sync::CancellationToken;
///
/// # async fn run(client: kube::Client) -> anyhow::Result<()> {
/// let informer = SharedIndexInformer::from_api(kube::Api::<ConfigMap>::all(client), Duration::ZERO);
/// let reg = informer.add_event_handler(
///     EventHandlerFuncs::new().on_add(|cm: &std::sync::Arc<ConfigMap>, _| println!("{:?}", cm.metadata.name)),
/// )?;
/// let cancel = CancellationToken::new();
/// tokio::spawn({ let i = informer.clone(); let c = cancel.clone(); async move { i.run(c).await } });
/// kcache_informer::wait_for_cache_sync(&cancel, &[&informer, &reg]).await;
/// let cached = informer.lister().list();
/// # let _ = cached; Ok(()) }
/// ```
pub struct SharedIndexInformer<K> {
    inner: Arc<Inner<K>>,
}

impl<K> Clone for SharedIndexInformer<K> {
    fn clone(&self) -> Self {
        Self { inner: Arc::clone(&self.inner) }
    }
}

impl<K> fmt::Debug for SharedIndexInformer<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedIndexInformer")
            .field("name", &self.inner.name)
            .field("started", &self.inner.started.load(Ordering::Relaxed))
            .field("synced", &self.inner.synced.load(Ordering::Relaxed))
            .finish()
    }
}

impl<K> SharedIndexInformer<K>
where
    K: Resource + DeserializeOwned + Send + Sync + 'static,
{
    /// An informer over `lw` whose handlers resync every `default_resync` (zero: never), keyed by
    /// namespace/name and indexed by namespace. It is named after the resource type
    /// (`ConfigMap`); see [`named`](Self::named).
    pub fn new(lw: impl ListerWatcher<K>, default_resync: Duration) -> Self {
        let name = std::any::type_name::<K>().rsplit("::").next().unwrap_or("informer").to_owned();
        Self::named(lw, default_resync, name)
    }

    /// [`new`](Self::new) with the name that its logs, its reflector's logs and metrics, and its
    /// handlers' default names carry (client-go's `SharedIndexInformerOptions.ObjectDescription`).
    /// Give informers of one type different names when they watch different things: the
    /// factory names a dynamic informer after its resource (`widgets.example.com`).
    ///
    /// ```
    /// use std::time::Duration;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache_informer::SharedIndexInformer;
    /// use kcache_reflector::ApiListerWatcher;
    ///
    /// # fn f(client: kube::Client) {
    /// let lw = ApiListerWatcher::<ConfigMap>::new(kube::Api::namespaced(client, "kube-system"));
    /// let informer = SharedIndexInformer::named(lw, Duration::ZERO, "kube-system configmaps");
    /// assert_eq!(informer.name(), "kube-system configmaps");
    /// # }
    /// ```
    pub fn named(lw: impl ListerWatcher<K>, default_resync: Duration, name: impl Into<String>) -> Self {
        let name = name.into();
        let default_resync = default_resync.min(FAR_FUTURE);
        let key_func = meta_namespace_key_func::<K>();
        let indexer = Store::with_indexers(key_func.clone(), namespace_indexers::<K>());
        let sync_signal = Arc::new(SyncSignal::new());
        let failure = Arc::new(FailureState::new(&name, Arc::clone(&sync_signal)));
        Self {
            inner: Arc::new(Inner {
                name: name.clone(),
                lw: Arc::new(lw),
                indexer,
                key_func,
                processor: Processor::new(),
                settings: Mutex::new(Settings {
                    transform: None,
                    watch_error_handler: None,
                    reflector_metrics: None,
                    resync_check_period: default_resync,
                    default_handler_resync_period: default_resync,
                    fifo_kind: FifoKind::default(),
                    reflector_config: ReflectorConfig { name, ..ReflectorConfig::default() },
                    clock: Arc::new(SystemClock),
                }),
                started: AtomicBool::new(false),
                stopped: AtomicBool::new(false),
                synced: AtomicBool::new(false),
                sync_signal,
                failure,
                block_deltas: Mutex::new(()),
                resource_versions: Mutex::new(ResourceVersions::default()),
                fifo: OnceLock::new(),
                reflector: OnceLock::new(),
            }),
        }
    }

    /// An informer over what `api` addresses (a namespace or all namespaces), through
    /// `ApiListerWatcher::new(api)` with its defaults: objects are cached without
    /// `metadata.managedFields` (use [`new`](Self::new) with
    /// `ApiListerWatcher::new(api).strip_managed_fields(false)` to keep them).
    pub fn from_api(api: kube::Api<K>, default_resync: Duration) -> Self {
        Self::new(ApiListerWatcher::new(api), default_resync)
    }
}

impl<K> SharedIndexInformer<K>
where
    K: Resource + DeserializeOwned + Send + Sync + 'static,
{
    fn before_start<T>(&self, f: impl FnOnce(&mut Settings<K>) -> T) -> Result<T, InformerError> {
        let mut s = self.inner.settings.lock();
        if self.inner.started.load(Ordering::Acquire) {
            return Err(InformerError::AlreadyStarted);
        }
        Ok(f(&mut s))
    }

    /// Transforms every object before it enters the cache (e.g. drops `managedFields`); not
    /// applied to tombstones (client-go's `SetTransform`). The transform must keep the object's
    /// namespace and name: the cache files the result under the key the object arrived with.
    ///
    /// # Errors
    ///
    /// [`InformerError::AlreadyStarted`] after [`run`](Self::run).
    ///
    /// # Panics
    ///
    /// The transform runs on the reflector's task. If it panics, the informer fails
    /// ([`FailureCause::ReflectorPanicked`]): it stops, its handlers too, and reports the
    /// failure ([`InformerFailure`]): a cache that silently skipped an object would be worse
    /// than no cache.
    pub fn set_transform(&self, f: impl Fn(K) -> K + Send + Sync + 'static) -> Result<(), InformerError>
    where
        K: Clone,
    {
        let t: TransformFunc<K> = Arc::new(move |obj: Arc<K>| {
            Ok(Arc::new(f(Arc::try_unwrap(obj).unwrap_or_else(|a| (*a).clone()))))
        });
        self.before_start(|s| s.transform = Some(t))
    }

    /// How the cache holds its objects (see [`CacheRepr`]): [`CacheRepr::Objects`] (the default)
    /// keeps the `Arc<K>`s the reflector decoded; [`CacheRepr::Serialized`] keeps each object as
    /// its compact JSON, which takes a fraction of the memory of a decoded k8s-openapi object
    /// (docs/benchmarks.md, "Scale"), and decodes it again on every read: each lister `get`,
    /// `list` and `by_index` result is a freshly decoded `Arc<K>` (equal to what was cached, not
    /// the same allocation), and each update or delete decodes the object it replaces.
    /// Handlers are unaffected: they receive the objects the reflector decoded, as always.
    ///
    /// Choose it for caches that are large and read by key or index now and then (the usual
    /// controller: reconcile one object, look up its owner); keep the default for caches that
    /// are listed whole often.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kcache_informer::SharedIndexInformer;
    /// use kcache_store::CacheRepr;
    ///
    /// # fn f(client: kube::Client) {
    /// let informer = SharedIndexInformer::from_api(kube::Api::<Pod>::all(client), Duration::ZERO);
    /// informer.set_cache_representation(CacheRepr::Serialized).unwrap();
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`InformerError::AlreadyStarted`] after [`run`](Self::run); [`InformerError::Store`] if
    /// an object already in the cache (put there by hand) cannot be converted.
    pub fn set_cache_representation(&self, repr: CacheRepr) -> Result<(), InformerError>
    where
        K: Serialize,
    {
        // Under the settings lock, so `run` cannot start in between.
        let s = self.inner.settings.lock();
        if self.inner.started.load(Ordering::Acquire) {
            return Err(InformerError::AlreadyStarted);
        }
        self.inner.indexer.set_representation(repr)?;
        drop(s);
        Ok(())
    }

    /// Receives the reflector's list-and-watch errors (client-go's `SetWatchErrorHandler`; which
    /// errors reach it is the reflector's rule, see
    /// [`Reflector::watch_error_handler`](kcache_reflector::Reflector::watch_error_handler)).
    ///
    /// # Errors
    ///
    /// [`InformerError::AlreadyStarted`] after [`run`](Self::run).
    pub fn set_watch_error_handler(
        &self,
        f: impl Fn(&str, &ReflectorError) + Send + Sync + 'static,
    ) -> Result<(), InformerError> {
        self.before_start(|s| s.watch_error_handler = Some(Arc::new(f)))
    }

    /// Reports the reflector's lists, watches, events, relists and resource versions to
    /// `metrics`.
    ///
    /// # Errors
    ///
    /// [`InformerError::AlreadyStarted`] after [`run`](Self::run).
    pub fn set_reflector_metrics(
        &self,
        metrics: Arc<dyn kcache_reflector::ReflectorMetrics>,
    ) -> Result<(), InformerError> {
        self.before_start(|s| s.reflector_metrics = Some(metrics))
    }

    /// Chooses the FIFO ([`FifoKind::InOrder`] by default, with atomic relists;
    /// [`FifoKind::InOrderNonAtomic`] is client-go 1.33's one delta at a time).
    ///
    /// # Errors
    ///
    /// [`InformerError::AlreadyStarted`] after [`run`](Self::run).
    pub fn set_fifo(&self, kind: FifoKind) -> Result<(), InformerError> {
        self.before_start(|s| s.fifo_kind = kind)
    }

    /// Configures the reflector (watch-list, page size, backoff, timeouts). Its name and resync
    /// period are managed by the informer.
    ///
    /// # Errors
    ///
    /// [`InformerError::AlreadyStarted`] after [`run`](Self::run).
    pub fn set_reflector_config(&self, config: ReflectorConfig) -> Result<(), InformerError> {
        self.before_start(|s| s.reflector_config = config)
    }

    /// Uses `clock` for the reflector's timers and resync (a `FakeClock` in tests).
    ///
    /// # Errors
    ///
    /// [`InformerError::AlreadyStarted`] after [`run`](Self::run).
    pub fn set_clock(&self, clock: impl Clock) -> Result<(), InformerError> {
        self.before_start(|s| s.clock = Arc::new(clock))
    }

    /// Chooses what a failure of this informer does ([`FailurePolicy::Stop`] by default: stop
    /// and report; [`FailurePolicy::Abort`]: abort the process, as client-go's crash). See
    /// [`InformerFailure`].
    ///
    /// # Errors
    ///
    /// [`InformerError::AlreadyStarted`] after [`run`](Self::run).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache_informer::{FailurePolicy, SharedIndexInformer};
    ///
    /// # fn f(client: kube::Client) {
    /// let informer = SharedIndexInformer::from_api(kube::Api::<ConfigMap>::all(client), Duration::ZERO);
    /// // Crash like a client-go controller rather than serve a cache that stopped changing.
    /// informer.set_failure_policy(FailurePolicy::Abort).unwrap();
    /// # }
    /// ```
    pub fn set_failure_policy(&self, policy: FailurePolicy) -> Result<(), InformerError> {
        self.before_start(|_| self.inner.failure.set_policy(policy))
    }

    /// Reports this informer's failure and its handlers' panics to `metrics` (see
    /// [`InformerMetrics`] for the metric names).
    ///
    /// # Errors
    ///
    /// [`InformerError::AlreadyStarted`] after [`run`](Self::run).
    pub fn set_metrics(&self, metrics: Arc<dyn InformerMetrics>) -> Result<(), InformerError> {
        self.before_start(|_| self.inner.failure.set_metrics(metrics))
    }

    /// Adds indexers, before or while the informer runs; existing objects are indexed at once.
    ///
    /// # Errors
    ///
    /// A name conflict or a failing index function; [`InformerError::Stopped`] once the
    /// informer has stopped (client-go's `AddIndexers`: "indexer was not added because it has
    /// stopped already").
    pub fn add_indexers(&self, indexers: Indexers<K>) -> Result<(), InformerError> {
        let _g = self.inner.block_deltas.lock();
        if self.inner.stopped.load(Ordering::Acquire) {
            return Err(InformerError::Stopped);
        }
        Ok(self.inner.indexer.add_indexers(indexers)?)
    }

    /// Adds a handler with the informer's default resync period.
    ///
    /// # Errors
    ///
    /// [`InformerError::Stopped`] once the informer has stopped; [`InformerError::HandlerThread`]
    /// (nothing registered) if the operating system refuses the handler's thread.
    pub fn add_event_handler(
        &self,
        handler: impl ResourceEventHandler<K>,
    ) -> Result<HandlerRegistration<K>, InformerError> {
        self.add_event_handler_with_options(handler, HandlerOptions::default())
    }

    /// Adds a handler with its own resync period (client-go's `AddEventHandlerWithResyncPeriod`).
    ///
    /// # Errors
    ///
    /// [`InformerError::Stopped`] once the informer has stopped; [`InformerError::HandlerThread`]
    /// (nothing registered) if the operating system refuses the handler's thread.
    pub fn add_event_handler_with_resync_period(
        &self,
        handler: impl ResourceEventHandler<K>,
        resync_period: Duration,
    ) -> Result<HandlerRegistration<K>, InformerError> {
        self.add_event_handler_with_options(
            handler,
            HandlerOptions { resync_period: Some(resync_period), ..HandlerOptions::default() },
        )
    }

    /// Adds a handler. After start, the handler first receives the current cache as initial-list
    /// adds, to it alone.
    ///
    /// Resync periods follow client-go: at least 1 s; below the informer's check period, the
    /// check period is lowered before start, and the handler's period raised to it after.
    /// Periods above about 30 years (`Duration::MAX`, say) are lowered to that.
    ///
    /// The informer owns its handlers until they are removed or it stops. A handler that needs
    /// the cache should capture a [`Lister`] (or a `Weak` reference) rather than the informer:
    /// an informer that is never run and never removes that handler would otherwise keep itself
    /// alive, with its cache and client.
    ///
    /// # Errors
    ///
    /// [`InformerError::Stopped`] once the informer has stopped; [`InformerError::HandlerThread`]
    /// (nothing registered) if the operating system refuses the handler's thread.
    pub fn add_event_handler_with_options(
        &self,
        handler: impl ResourceEventHandler<K>,
        options: HandlerOptions,
    ) -> Result<HandlerRegistration<K>, InformerError> {
        if self.inner.stopped.load(Ordering::Acquire) {
            return Err(InformerError::Stopped);
        }
        let (requested, effective, now) = {
            let mut s = self.inner.settings.lock();
            let mut period = options.resync_period.unwrap_or(s.default_handler_resync_period).min(FAR_FUTURE);
            if !period.is_zero() {
                if period < MINIMUM_RESYNC_PERIOD {
                    tracing::info!(?period, "resync period too small; using the minimum of 1s");
                    period = MINIMUM_RESYNC_PERIOD;
                }
                // Before start a shorter period lowers the check period; after start the check
                // period is fixed and `determine_resync_period` raises the handler's to it.
                if period < s.resync_check_period && !self.inner.started.load(Ordering::Acquire) {
                    s.resync_check_period = period;
                    self.inner.processor.resync_check_period_changed(period);
                }
            }
            (period, determine_resync_period(period, s.resync_check_period), s.clock.now())
        };
        let _g = self.inner.block_deltas.lock();
        if self.inner.stopped.load(Ordering::Acquire) {
            return Err(InformerError::Stopped);
        }
        let id = self.inner.processor.next_id();
        let listener = Listener::new(
            id,
            Arc::new(handler),
            ListenerOptions {
                name: options.name.unwrap_or_else(|| format!("{}-handler-{id}", self.inner.name)),
                mode: options.mode,
                key_func: self.inner.key_func.clone(),
                requested_resync_period: requested,
                resync_period: effective,
                now,
                skip_unchanged_updates: options.skip_unchanged_updates,
                on_panic: options.on_panic,
            },
            Arc::clone(&self.inner.sync_signal),
            Arc::clone(&self.inner.failure),
        );
        self.inner.processor.add_listener(Arc::clone(&listener)).map_err(InformerError::HandlerThread)?;
        if self.inner.started.load(Ordering::Acquire) {
            for obj in self.inner.indexer.list() {
                listener.add(Notification::Add { obj, initial: true });
            }
        }
        Ok(HandlerRegistration { listener, informer: self.clone() })
    }

    /// Removes a handler: it gets no further notifications (pending ones are dropped). Returns
    /// whether it was registered here: a registration of another informer removes nothing.
    /// Like client-go this does not wait for a notification being handled right now; the
    /// handler's thread ends after it, and [`run`](Self::run) waits for it when the informer
    /// stops.
    pub fn remove_event_handler(&self, registration: &HandlerRegistration<K>) -> bool {
        // Listener ids are per informer: another informer's registration may carry an id that
        // names one of this informer's handlers.
        if !Arc::ptr_eq(&registration.informer.inner, &self.inner) {
            return false;
        }
        self.inner.processor.remove_listener(registration.listener.id).is_some()
    }

    /// Whether the initial list has been fully delivered into the cache, and the informer has
    /// not failed: once it fails ([`failure`](Self::failure)), false for good, so that whatever
    /// gates on it (a readiness check, [`wait_for_cache_sync`](crate::wait_for_cache_sync))
    /// stops trusting a cache that no longer follows the API server. An informer stopped by its
    /// cancellation token stays synced: its cache is what it was when asked to stop.
    pub fn has_synced(&self) -> bool {
        self.inner.synced.load(Ordering::Acquire) && !self.inner.failure.is_failed()
    }

    /// Whether [`run`](Self::run) has ended.
    pub fn is_stopped(&self) -> bool {
        self.inner.stopped.load(Ordering::Acquire)
    }

    /// The failure that stopped this informer, if one did (see [`InformerFailure`]). Set as soon
    /// as the failure happens, before [`run`](Self::run) has finished stopping the handlers.
    pub fn failure(&self) -> Option<InformerFailure> {
        self.inner.failure.get().cloned()
    }

    /// The informer's health, for a readiness probe: [`HealthState::Synced`] only while it runs
    /// with its initial list in the cache, [`HealthState::Failed`] once a failure stopped it.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache_informer::SharedIndexInformer;
    ///
    /// // The body of a `/readyz` handler: 200 when ready, 503 with the reason otherwise.
    /// fn readyz(informer: &SharedIndexInformer<ConfigMap>) -> (u16, String) {
    ///     let health = informer.health();
    ///     (if health.is_ready() { 200 } else { 503 }, health.to_string())
    /// }
    /// ```
    pub fn health(&self) -> InformerHealth {
        let state = if let Some(f) = self.inner.failure.get() {
            HealthState::Failed(f.clone())
        } else if self.is_stopped() {
            HealthState::Stopped
        } else if !self.inner.started.load(Ordering::Acquire) {
            HealthState::NotStarted
        } else if self.has_synced() {
            HealthState::Synced
        } else {
            HealthState::Syncing
        };
        InformerHealth::new(&self.inner.name, state)
    }

    /// Completes with this informer's failure as soon as it fails (at once if it has failed);
    /// never if it does not. The informer's counterpart of
    /// [`SharedInformerFactory::wait_for_failure`](crate::SharedInformerFactory::wait_for_failure),
    /// for whoever watches one informer that something else runs (a controller reading a
    /// factory's informer, say).
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it only observes.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache_informer::SharedIndexInformer;
    /// use tokio_util::sync::CancellationToken;
    ///
    /// # async fn f(informer: SharedIndexInformer<ConfigMap>, cancel: CancellationToken) {
    /// tokio::select! {
    ///     failure = informer.wait_for_failure() => eprintln!("{failure}"),
    ///     () = cancel.cancelled() => {}
    /// }
    /// # }
    /// ```
    pub async fn wait_for_failure(&self) -> InformerFailure {
        self.inner.failure.stopping().await;
        // `fail` records the failure before it cancels `stopping`.
        self.inner.failure.get().cloned().expect("a failed informer has its failure recorded")
    }

    /// The counters of every handler registered now (whoever registered it), in registration
    /// order: name, backlog, largest backlog, deliveries, panics. For metrics that report each
    /// handler's backlog; [`HandlerRegistration`] has the same counters for one handler.
    ///
    /// ```
    /// use std::time::Duration;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache_informer::{EventHandlerFuncs, HandlerOptions, SharedIndexInformer};
    ///
    /// # fn f(client: kube::Client) {
    /// let informer = SharedIndexInformer::from_api(kube::Api::<ConfigMap>::all(client), Duration::ZERO);
    /// let options = HandlerOptions { name: Some("enqueue".into()), ..HandlerOptions::default() };
    /// informer.add_event_handler_with_options(EventHandlerFuncs::new(), options).unwrap();
    /// let stats = informer.handler_stats();
    /// assert_eq!((stats[0].name.as_str(), stats[0].pending), ("enqueue", 0));
    /// # }
    /// ```
    pub fn handler_stats(&self) -> Vec<HandlerStats> {
        self.inner.processor.stats()
    }

    /// Calls `hook` when this informer fails (the factory's channel).
    pub(crate) fn on_failure(&self, hook: impl Fn(&InformerFailure) + Send + Sync + 'static) {
        self.inner.failure.add_hook(hook);
    }

    /// The resource version the reflector last synced to ("" before start).
    pub fn last_sync_resource_version(&self) -> String {
        self.inner.reflector.get().map(ReflectorHandle::last_sync_resource_version).unwrap_or_default()
    }

    /// The shard of the collection this informer caches (KEP-5866): its reflector config's
    /// [`shard_selector`](ReflectorConfig::shard_selector), else its lister-watcher's (the
    /// factory's informers take it from their [`InformerScope`](crate::InformerScope)); `None`
    /// for the whole collection.
    pub fn shard_selector(&self) -> Option<kcache_shard_selector::ShardSelector> {
        let configured = self.inner.settings.lock().reflector_config.shard_selector.clone();
        configured.or_else(|| self.inner.lw.shard_selector())
    }

    /// Who keeps the cache to the [`shard_selector`](Self::shard_selector): see
    /// [`ReflectorHandle::shard_mode`]. Before [`run`](Self::run), [`ShardMode::ServerSide`]
    /// with a selector (what the reflector starts in) and [`ShardMode::Unsharded`] without.
    ///
    /// ```
    /// use std::time::Duration;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache_informer::{InformerScope, SharedInformerFactory};
    /// use kcache_reflector::ShardMode;
    /// use kcache_shard_selector::{ShardKey, ShardSelector};
    ///
    /// # async fn f(client: kube::Client) {
    /// let factory = SharedInformerFactory::new(client, Duration::ZERO);
    /// let shard = ShardSelector::split(ShardKey::Uid, 2).swap_remove(0);
    /// let informer = factory.informer::<ConfigMap>(&InformerScope::all().shard(shard));
    /// assert_eq!(informer.shard_mode(), ShardMode::ServerSide);
    /// # }
    /// ```
    pub fn shard_mode(&self) -> ShardMode {
        match self.inner.reflector.get() {
            Some(h) => h.shard_mode(),
            None if self.shard_selector().is_some() => ShardMode::ServerSide,
            None => ShardMode::Unsharded,
        }
    }

    /// The indexed cache (client-go's `GetIndexer`). Reads never block each other.
    pub fn indexer(&self) -> &Store<K> {
        &self.inner.indexer
    }

    /// A lister over the cache. It keeps answering from the cache if the informer fails (from
    /// the state the cache last reached); its [`failure`](Lister::failure) tells.
    pub fn lister(&self) -> Lister<K> {
        Lister::of_informer(self.inner.indexer.clone(), Arc::clone(&self.inner.failure))
    }

    /// Number of items waiting in the FIFO (0 before start): keys for the DeltaFIFO; deltas for the
    /// in-order FIFO, an atomic relist or resync counting as one.
    pub fn fifo_len(&self) -> usize {
        self.inner.fifo.get().map_or(0, |f| f.len())
    }

    /// The informer's name (the resource type's, by default).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Runs the informer until `cancel` fires or it fails: starts the handlers' threads and the
    /// reflector, then pops the FIFO into the cache and the handlers. On the way out it stops the
    /// reflector and every handler thread (waiting for handlers to finish their current
    /// notification).
    ///
    /// # Errors
    ///
    /// [`InformerError::AlreadyStarted`] if it runs already; [`InformerError::Stopped`] if it ran;
    /// [`InformerError::Failed`] if the informer failed (an index function failed for an object,
    /// the reflector's task panicked in a transform, or a handler with
    /// [`PanicPolicy::FailInformer`] panicked), after stopping everything else as a cancel
    /// would; [`InformerError::HandlerThread`] if the operating system refuses a handler's
    /// thread (the informer is then stopped).
    ///
    /// # Panics
    ///
    /// When polled outside a Tokio runtime, before it changes anything: the informer can still
    /// be run within one afterwards.
    ///
    /// # Cancel safety
    ///
    /// Prefer cancelling `cancel`: `run` then returns only once the reflector task and every
    /// handler thread have ended. Dropping the future instead (an aborted task) also stops them,
    /// without waiting: the reflector task ends at its next poll and each handler thread after its
    /// current notification. Either way the informer is stopped for good.
    pub async fn run(&self, cancel: CancellationToken) -> Result<(), InformerError> {
        // Before anything starts: a panic from `tokio::spawn` further down would leave handler
        // threads running with nobody to stop them.
        assert!(
            tokio::runtime::Handle::try_current().is_ok(),
            "SharedIndexInformer::run must be polled within a Tokio runtime"
        );
        if self.inner.stopped.load(Ordering::Acquire) {
            return Err(InformerError::Stopped);
        }
        let (kind, transform, watch_error_handler, metrics, check, mut config, clock) = {
            let s = self.inner.settings.lock();
            if self.inner.started.swap(true, Ordering::AcqRel) {
                return Err(InformerError::AlreadyStarted);
            }
            (
                s.fifo_kind,
                s.transform.clone(),
                s.watch_error_handler.clone(),
                s.reflector_metrics.clone(),
                s.resync_check_period,
                s.reflector_config.clone(),
                Arc::clone(&s.clock),
            )
        };
        let known: Arc<dyn KnownObjects<K>> = Arc::new(self.inner.indexer.clone());
        let fifo: Arc<dyn Fifo<K>> = match kind {
            FifoKind::InOrder | FifoKind::InOrderNonAtomic => {
                let mut o = RealFifoOptions::new(self.inner.key_func.clone(), known)
                    .atomic_events(kind == FifoKind::InOrder);
                if let Some(t) = transform {
                    o = o.transformer(t);
                }
                Arc::new(RealFifo::new(o))
            }
            FifoKind::DeltaFifo => {
                let mut o = DeltaFifoOptions::new(self.inner.key_func.clone())
                    .known_objects(known)
                    .emit_delta_type_replaced(true);
                if let Some(t) = transform {
                    o = o.transformer(t);
                }
                Arc::new(DeltaFifo::new(o))
            }
        };
        let _ = self.inner.fifo.set(Arc::clone(&fifo));

        config.name.clone_from(&self.inner.name);
        config.resync_period = check;
        let sink = SyncingStore { fifo: Arc::clone(&fifo), inner: Arc::clone(&self.inner) };
        let inner = Arc::clone(&self.inner);
        let resync_clock = Arc::clone(&clock);
        let mut reflector = Reflector::new(Arc::clone(&self.inner.lw), sink)
            // The FIFO's own key function (the same `Arc`): a watch-list's keys, computed for
            // its temporary store, are then handed on to the FIFO instead of computed again
            // (`ReflectorStore::replace_keyed`). It is namespace/name, as the reflector's default.
            .key_func(self.inner.key_func.clone())
            .config(config)
            .clock(ClockRef(clock))
            .should_resync(move || inner.processor.should_resync(resync_clock.now()));
        if let Some(h) = watch_error_handler {
            reflector = reflector.watch_error_handler(move |name, e| h(name, e));
        }
        if let Some(m) = metrics {
            reflector = reflector.metrics(m);
        }
        let _ = self.inner.reflector.set(reflector.handle());

        let reflector_cancel = cancel.child_token();
        // Armed before the handler threads start: if starting one fails (a panic), the informer
        // stops for good instead of being left started with nothing running it.
        let mut guard = RunGuard {
            inner: Arc::clone(&self.inner),
            reflector_cancel: reflector_cancel.clone(),
            fifo: Arc::clone(&fifo),
            armed: true,
        };
        self.inner.processor.start().map_err(InformerError::HandlerThread)?;
        let mut reflector_task = tokio::spawn(reflector.run(reflector_cancel.clone()));
        tracing::debug!(informer = %self.inner.name, "informer started");

        // Set when the reflector task ended by itself: it returns only when cancelled, so that
        // means it panicked (in a user transform, say).
        let mut reflector_ended = None;
        loop {
            let inner = &self.inner;
            // The error of a change the cache could not apply, kept typed for the failure.
            let mut not_applied = None;
            let popped = tokio::select! {
                () = cancel.cancelled() => break,
                // A handler with `PanicPolicy::FailInformer` panicked.
                () = inner.failure.stopping() => break,
                joined = &mut reflector_task => {
                    reflector_ended = Some(joined);
                    break;
                }
                r = fifo.pop(|deltas, initial| {
                    inner.handle_deltas(deltas, initial).map_err(|e| {
                        let message = e.to_string();
                        not_applied = Some(e);
                        message
                    })
                }) => r,
            };
            match popped {
                Ok(()) => {}
                Err(FifoError::Closed) => break,
                // `FifoError::Process`: the cache could not apply what was popped.
                Err(e) => match not_applied {
                    Some(not_applied) => {
                        // client-go panics here (`storeIndex.updateSingleIndex`): a cache that
                        // skipped a change would differ from the API server without telling
                        // anyone.
                        inner.failure.fail(FailureCause::Cache(Arc::new(not_applied)));
                        break;
                    }
                    // Not from `handle_deltas` (no such error exists today): reported, not fatal.
                    None => {
                        tracing::error!(informer = %inner.name, error = %e, "failed to pop from the FIFO")
                    }
                },
            }
            inner.check_synced(fifo.as_ref());
            inner.publish_resource_version(fifo.as_ref());
        }

        reflector_cancel.cancel();
        fifo.close();
        let joined = match reflector_ended {
            Some(joined) => joined,
            None => reflector_task.await,
        };
        if let Err(e) = joined
            && e.is_panic()
        {
            let payload = e.into_panic();
            let message = panic_message(&*payload).unwrap_or("a panic with a non-string payload").to_owned();
            // Recorded before the handlers are stopped, so that health and `has_synced` say so at
            // once (and a policy of aborting aborts here). The message stays in the failure, out
            // of the log: a transform's panic message could quote the object.
            self.inner.failure.fail(FailureCause::ReflectorPanicked(message));
        }
        self.inner.mark_stopped();
        // Stopped here, on the runtime, so that they stop even if the blocking pool refuses
        // the join below (a runtime shutting down).
        let listeners = self.inner.processor.stop_without_join();
        let inner = Arc::clone(&self.inner);
        // Joining the handler threads waits for their current notifications: off the runtime.
        let _ = tokio::task::spawn_blocking(move || inner.processor.join(&listeners)).await;
        guard.armed = false;
        self.inner.sync_signal.bump();
        if let Some(failure) = self.inner.failure.get() {
            return Err(InformerError::Failed(failure.clone()));
        }
        tracing::debug!(informer = %self.inner.name, "informer stopped");
        Ok(())
    }
}

/// Stops what [`SharedIndexInformer::run`] started when its future is dropped before it finished
/// (an aborted task, a `select!` that took another branch). Without it the reflector task and
/// every handler thread would run for ever with nobody left to stop them. It cannot wait in
/// `drop`: the reflector task ends at its next poll and each handler thread after its current
/// notification.
struct RunGuard<K: Resource + Send + Sync + 'static> {
    inner: Arc<Inner<K>>,
    reflector_cancel: CancellationToken,
    fifo: Arc<dyn Fifo<K>>,
    /// False once `run` stopped everything itself.
    armed: bool,
}

impl<K: Resource + Send + Sync + 'static> Drop for RunGuard<K> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        tracing::debug!(informer = %self.inner.name, "informer run future dropped; stopping its reflector and handlers");
        self.reflector_cancel.cancel();
        self.fifo.close();
        self.inner.mark_stopped();
        self.inner.processor.stop_without_join();
        self.inner.sync_signal.bump();
    }
}

impl<K: Resource + Send + Sync + 'static> Inner<K> {
    /// Marks the informer stopped under `block_deltas`, which `add_event_handler` holds while it
    /// checks the flag and registers: a handler is either registered before the processor stops
    /// (and stopped with it) or refused, never started after the stop.
    fn mark_stopped(&self) {
        let _g = self.block_deltas.lock();
        self.stopped.store(true, Ordering::Release);
    }

    /// Gives the indexer the reflector's newest resource version once the FIFO is drained, so the
    /// cache's [`last_sync_resource_version`](Store::last_sync_resource_version) is the version
    /// of what it holds: set by lists (client-go's store `Replace`) as well as by events and
    /// bookmarks, and never ahead of a change still queued. The version is read before the FIFO's
    /// length: the reflector queues a change before it hands over its version, so an empty FIFO
    /// then means every change up to that version reached the indexer (pops apply a delta under
    /// the FIFO's lock).
    ///
    /// Runs after every pop, so the common case (nothing new to publish) is one uncontended lock
    /// and a string comparison. The lock is held throughout, so the pending version cannot change
    /// between reading it and the FIFO's length, and two publishers cannot set an older version
    /// after a newer one.
    fn publish_resource_version(&self, fifo: &dyn Fifo<K>) {
        let mut guard = self.resource_versions.lock();
        let ResourceVersions { pending, published } = &mut *guard;
        if pending == published || !fifo.is_empty() {
            return;
        }
        self.indexer.update_resource_version(pending);
        published.clone_from(pending);
    }

    fn set_pending_resource_version(&self, resource_version: &str) {
        let mut guard = self.resource_versions.lock();
        guard.pending.clear();
        guard.pending.push_str(resource_version);
    }

    fn check_synced(&self, fifo: &dyn Fifo<K>) {
        if !self.synced.load(Ordering::Acquire) && fifo.has_synced() {
            self.synced.store(true, Ordering::Release);
            self.sync_signal.bump();
        }
    }

    /// client-go's `processDeltas`: apply each delta to the indexer, then notify the handlers; an
    /// atomic relist or resync as a whole. Runs under the FIFO's lock.
    fn handle_deltas(&self, deltas: Deltas<K>, is_in_initial_list: bool) -> Result<(), StoreError> {
        let _g = self.block_deltas.lock();
        match deltas.atomic_event() {
            None => self.handle_object_deltas(deltas, is_in_initial_list),
            Some(AtomicEvent::ReplacedAll { resource_version }) => {
                let list_version = resource_version.clone();
                self.handle_replaced_all(deltas, &list_version, is_in_initial_list)
            }
            Some(AtomicEvent::SyncAll) => {
                self.handle_sync_all(deltas);
                Ok(())
            }
            // An atomic event this informer does not know (the enum is non-exhaustive): its
            // deltas, applied one by one, still leave the cache right.
            Some(_) => self.handle_object_deltas(deltas, is_in_initial_list),
        }
    }

    /// client-go's `processReplacedAllInfo`: the whole relist goes into the indexer in one step
    /// ([`Store::replace_with_keys`], so no reader sees part of it), then the handlers hear of
    /// it in the order the deltas come: the tombstones of the known objects the list lacks,
    /// then an add or an update for every listed object, in list order ("processing all
    /// deletions first matches behavior of RealFIFO#Replace"). Only afterwards, so a handler
    /// that reads the cache finds the whole relist applied. Called under `block_deltas`.
    fn handle_replaced_all(
        &self,
        deltas: Deltas<K>,
        list_version: &str,
        is_in_initial_list: bool,
    ) -> Result<(), StoreError> {
        // The new contents: every listed object under the key the FIFO computed for it (an
        // atomic event has a key per delta; one without is keyed here). The tombstones need no
        // store operation: the replace drops every key not listed.
        // (The FIFO's atomic relists key every delta: then nothing is computed, and no table
        // of 16 bytes an object is allocated for nothing.)
        let keyed = |i: usize| deltas.key_at(i).is_some() || deltas[i].delta_type == DeltaType::Deleted;
        let computed: Vec<Option<Arc<str>>> = if (0..deltas.len()).all(keyed) {
            Vec::new()
        } else {
            (0..deltas.len())
                .map(|i| {
                    if keyed(i) {
                        Ok(None)
                    } else {
                        self.indexer.key_of(deltas[i].obj()).map(|k| Some(Arc::from(k)))
                    }
                })
                .collect::<Result<_, _>>()?
        };
        let listed =
            deltas.iter().enumerate().filter(|(_, d)| d.delta_type != DeltaType::Deleted).filter_map(
                |(i, d)| Some((deltas.key_at(i).or_else(|| computed.get(i)?.as_ref())?, d.obj())),
            );
        // Records the list's resource version with the contents it describes (client-go's
        // `clientState.Replace(info.Objects, info.ResourceVersion)`); `publish_resource_version`
        // moves it on once the FIFO has drained.
        let mut previous = self.indexer.replace_with_keys(listed, list_version)?.into_iter();
        // The keys are not needed any more: free them before the notifications go out, in one
        // burst that the handlers' buffers have to absorb.
        for d in deltas.into_vec() {
            if d.delta_type == DeltaType::Deleted {
                self.processor.distribute(&Notification::Delete(d.object), false);
                continue;
            }
            let obj = Arc::clone(d.obj());
            match previous.next().flatten() {
                Some(old) => {
                    let is_sync = resource_version(&*old) == resource_version(&*obj);
                    self.processor.distribute(&Notification::Update { old, new: obj }, is_sync);
                }
                None => {
                    self.processor.distribute(&Notification::Add { obj, initial: is_in_initial_list }, false);
                }
            }
        }
        Ok(())
    }

    /// client-go's `SyncAll` case of `processDeltas`: `OnUpdate(obj, obj)` for every cached
    /// object, a resync (its resource version is unchanged). The objects are the cache's own,
    /// so nothing is written. Called under `block_deltas`.
    fn handle_sync_all(&self, deltas: Deltas<K>) {
        for d in deltas {
            let obj = Arc::clone(d.obj());
            self.processor.distribute(&Notification::Update { old: Arc::clone(&obj), new: obj }, true);
        }
    }

    /// The changes to one object, delta by delta: each applied to the indexer, then handed to
    /// the handlers. Called under `block_deltas`.
    fn handle_object_deltas(&self, deltas: Deltas<K>, is_in_initial_list: bool) -> Result<(), StoreError> {
        // The key the FIFO queued the deltas under is the indexer's key too (one key function
        // for both), so the indexer files each object under it without computing it again.
        let key = deltas.key().cloned();
        for d in deltas {
            match d.delta_type {
                DeltaType::Sync | DeltaType::Replaced | DeltaType::Added | DeltaType::Updated => {
                    let obj = Arc::clone(d.object.object());
                    let key = match &key {
                        Some(k) => Arc::clone(k),
                        None => Arc::from(self.indexer.key_of(&obj).map_err(StoreError::from)?),
                    };
                    match self.indexer.insert_with_key(key, Arc::clone(&obj))? {
                        Some(old) => {
                            // Events that did not change the resource version are syncs and
                            // go only to the listeners in the syncing set (client-go's
                            // `OnUpdate`): every listener until the first resync check, then
                            // those due for a resync.
                            let is_sync = resource_version(&*old) == resource_version(&*obj);
                            self.processor.distribute(&Notification::Update { old, new: obj }, is_sync);
                        }
                        None => {
                            self.processor
                                .distribute(&Notification::Add { obj, initial: is_in_initial_list }, false);
                        }
                    }
                }
                DeltaType::Deleted => {
                    match &d.object {
                        ObjectOrTombstone::Tombstone(t) => {
                            self.indexer.delete_by_key(&t.key).map_err(StoreError::from)?;
                        }
                        ObjectOrTombstone::Object(o) => {
                            self.indexer.delete(o)?;
                        }
                    }
                    self.processor.distribute(&Notification::Delete(d.object), false);
                }
            }
        }
        Ok(())
    }
}

fn resource_version<K: Resource>(obj: &K) -> Option<&str> {
    obj.meta().resource_version.as_deref()
}

/// Resource versions between the reflector and the indexer (both empty at first).
#[derive(Default)]
struct ResourceVersions {
    /// The newest version the reflector handed to the FIFO: a list's, an event's or a
    /// bookmark's.
    pending: String,
    /// The version the indexer was last given (only [`Inner::publish_resource_version`] sets it).
    published: String,
}

/// The reflector's view of the FIFO: marks the informer synced when a write leaves the FIFO
/// synced with nothing of the initial list left to deliver (an empty first list), and hands the
/// resource versions of lists, events and bookmarks to the indexer once the FIFO has delivered
/// what came before them.
struct SyncingStore<K> {
    fifo: Arc<dyn Fifo<K>>,
    inner: Arc<Inner<K>>,
}

impl<K: Resource + Send + Sync + 'static> SyncingStore<K> {
    fn after(&self, r: Result<(), StoreError>) -> Result<(), StoreError> {
        self.inner.check_synced(self.fifo.as_ref());
        self.inner.publish_resource_version(self.fifo.as_ref());
        r
    }
}

impl<K: Resource + Send + Sync + 'static> ReflectorStore<K> for SyncingStore<K> {
    fn add(&self, obj: Arc<K>) -> Result<(), StoreError> {
        self.after(self.fifo.add(obj))
    }
    fn update(&self, obj: Arc<K>) -> Result<(), StoreError> {
        self.after(self.fifo.update(obj))
    }
    fn delete(&self, obj: Arc<K>) -> Result<(), StoreError> {
        self.after(self.fifo.delete(obj))
    }
    fn replace(&self, list: Vec<Arc<K>>, resource_version: &str) -> Result<(), StoreError> {
        let r = self.fifo.replace(list, resource_version);
        if r.is_ok() {
            self.inner.set_pending_resource_version(resource_version);
        }
        self.after(r)
    }
    fn replace_keyed(
        &self,
        list: Vec<(Arc<str>, Arc<K>)>,
        key_func: &KeyFunc<K>,
        resource_version: &str,
    ) -> Result<(), StoreError> {
        let r = self.fifo.replace_keyed(list, key_func, resource_version);
        if r.is_ok() {
            self.inner.set_pending_resource_version(resource_version);
        }
        self.after(r)
    }
    fn resync(&self) -> Result<(), StoreError> {
        self.fifo.resync()
    }
    fn update_resource_version(&self, resource_version: &str) {
        self.fifo.update_resource_version(resource_version);
        self.inner.set_pending_resource_version(resource_version);
        self.inner.publish_resource_version(self.fifo.as_ref());
    }
}

/// Lets an `Arc<dyn Clock>` be handed to the reflector.
#[derive(Debug)]
struct ClockRef(Arc<dyn Clock>);

impl Clock for ClockRef {
    fn now(&self) -> tokio::time::Instant {
        self.0.now()
    }
    fn sleep(&self, d: Duration) -> kcache_reflector::Sleep {
        self.0.sleep(d)
    }
}

impl<K: Resource + DeserializeOwned + Send + Sync + 'static> HasSynced for SharedIndexInformer<K> {
    fn has_synced(&self) -> bool {
        SharedIndexInformer::has_synced(self)
    }

    fn wait_synced(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(wait_until(&self.inner.sync_signal, move || {
            self.has_synced() || self.is_stopped() || self.inner.failure.is_failed()
        }))
    }
}

/// A handler's registration (client-go's `ResourceEventHandlerRegistration`): its own sync state
/// and backlog.
pub struct HandlerRegistration<K> {
    listener: Arc<Listener<K>>,
    informer: SharedIndexInformer<K>,
}

impl<K> fmt::Debug for HandlerRegistration<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandlerRegistration").field("listener", &self.listener).finish()
    }
}

impl<K: Resource + DeserializeOwned + Send + Sync + 'static> HandlerRegistration<K> {
    /// True once the informer has synced and every initial-list add reached this handler; false
    /// for good once the informer failed ([`failure`](Self::failure)).
    pub fn has_synced(&self) -> bool {
        self.informer.has_synced() && self.listener.initial_pending() == 0
    }

    /// The failure that stopped the informer, if one did: this handler gets nothing more, and
    /// whatever it built from its notifications may lag behind the API server.
    pub fn failure(&self) -> Option<InformerFailure> {
        self.informer.failure()
    }

    /// Notifications waiting for this handler: the backlog gauge, reported from the first pending
    /// notification (client-go only traces beyond 1024).
    pub fn pending(&self) -> usize {
        self.listener.pending()
    }

    /// The largest backlog this handler has had.
    pub fn pending_high_water(&self) -> usize {
        self.listener.high_water()
    }

    /// Notifications delivered to the handler so far.
    pub fn delivered(&self) -> u64 {
        self.listener.delivered()
    }

    /// Times the handler panicked (each was caught; under [`PanicPolicy::Continue`] the listener
    /// went on, under [`PanicPolicy::FailInformer`] the informer failed).
    pub fn panics(&self) -> u64 {
        self.listener.panics()
    }

    /// The handler's effective resync period (zero: never).
    pub fn resync_period(&self) -> Duration {
        self.listener.resync_period()
    }

    /// The handler's name in logs.
    pub fn name(&self) -> &str {
        &self.listener.name
    }
}

impl<K: Resource + DeserializeOwned + Send + Sync + 'static> HasSynced for HandlerRegistration<K> {
    fn has_synced(&self) -> bool {
        HandlerRegistration::has_synced(self)
    }

    fn wait_synced(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(wait_until(&self.informer.inner.sync_signal, move || {
            self.has_synced() || self.informer.is_stopped() || self.informer.inner.failure.is_failed()
        }))
    }
}
