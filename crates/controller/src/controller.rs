//! `Controller`: the builder, and its `run`.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use kcache_informer::{HasSynced, InformerMetrics, SharedInformerFactory, wait_for_cache_sync};
use kcache_reflector::ReflectorMetrics;
use kcache_workqueue::{MetricsProvider, PriorityQueue, RateLimiter};
use kube::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::action::{Action, Retry};
use crate::context::{Caches, Context, ContextShared};
use crate::error::{ControllerError, Result};
use crate::gate::WorkGate;
use crate::health::{Backlog, ControllerState, HealthCheck, HealthShared};
use crate::key::ObjectKey;
use crate::leader::Leadership;
use crate::metrics::{ControllerMetrics, MetricsWiring};
use crate::source::{KeyFilter, Mapping, OwnerKind, Registered, Setup, Source, SourceSpec};
use crate::watch::Watch;
use crate::worker::{Reconciler, Workers};

/// The state of a [`Controller`] before [`reconcile`](Controller::reconcile) was given.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoReconciler;

/// What every state of the builder has.
struct Parts<K> {
    factory: Arc<SharedInformerFactory>,
    /// Whether the factory is the controller's own (from [`Controller::new`]): then `run` shuts
    /// it down on the way out.
    owns_factory: bool,
    name: Arc<str>,
    primary: Watch,
    sources: Vec<Box<dyn Source<K>>>,
    workers: usize,
    rate_limiter: Option<Arc<dyn RateLimiter<ObjectKey<K>>>>,
    gate: Option<Arc<dyn WorkGate>>,
    shard: Option<KeyFilter<K>>,
    metrics: MetricsWiring,
    health: Arc<HealthShared>,
    #[cfg(feature = "http")]
    http: Option<crate::http::Endpoint>,
    #[cfg(feature = "leaderelection")]
    leader: Option<crate::leader::LeaderElection>,
    #[cfg(feature = "sharding")]
    sharding: Option<crate::sharding::ShardSpec>,
}

/// A controller: the glue between shared informers, a workqueue and a reconcile function that
/// every controller otherwise writes by hand. controller-runtime's builder
/// (`ControllerManagedBy(mgr).For(..).Owns(..).Watches(..).Complete(r)`) and kube-runtime's
/// `Controller`, over kcache's informers.
///
/// * [`new`](Self::new) / [`with_factory`](Self::with_factory) set the primary type `K` (its
///   key is the work item, an [`ObjectKey<K>`]) and what of it to [`Watch`];
///   [`owns`](Self::owns) adds a type whose controller owner is a `K`,
///   [`watches`](Self::watches) any type with a mapper to the keys it affects.
/// * [`reconcile`](Self::reconcile) takes `async fn(Arc<K>, Context<T>) -> Result<Action, E>`:
///   the object comes from the cache, as in kube-runtime. When the object is gone (deleted,
///   or no longer selected by the primary watch), [`on_gone`](Self::on_gone) runs with its key
///   instead; without it nothing runs, as in kube-runtime.
/// * Errors go to the [`error_policy`](Self::error_policy) (default: the rate-limited requeue,
///   per-key exponential backoff); [`Action::requeue`] asks for another look later.
/// * [`run`](Self::run) starts the informers, waits for their caches, runs
///   [`workers`](Self::workers) workers until cancelled, then drains: running reconciles
///   finish, nothing new starts.
///
/// Every step is expressible with the crates below: the informers come from a
/// [`SharedInformerFactory`] (shareable with other controllers: one watch per type and scope),
/// the handlers are plain [`ResourceEventHandler`](kcache_informer::ResourceEventHandler)s that
/// enqueue keys into a [`PriorityQueue`] with controller-runtime's priorities
/// ([`AddOpts::for_event`](kcache_workqueue::AddOpts::for_event)), and the workers follow the
/// `processNextWorkItem` loop of `kcache_workqueue::run_workers`.
///
/// # Scale-out
///
/// * **Leader election**: [`gate`](Self::gate) runs the workers only while a [`WorkGate`] is
///   open; informers stay warm on every replica and keys keep being queued, so a new leader
///   starts at once with every key.
/// * **Sharding**: [`shard`](Self::shard) keeps only this replica's keys, whichever source
///   produced them.
///
/// # Examples
///
/// ```no_run
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::{ConfigMap, Secret};
/// use kcache_controller::{Action, Context, Controller, ObjectKey, Watch};
/// use tokio_util::sync::CancellationToken;
///
/// async fn apply(cm: Arc<ConfigMap>, ctx: Context<kube::Client>) -> Result<Action, kube::Error> {
///     let _owned: Vec<Arc<Secret>> = ctx.owned::<Secret>();
///     Ok(Action::await_change())
/// }
///
/// async fn cleanup(key: ObjectKey<ConfigMap>, ctx: Context<kube::Client>) -> Result<Action, kube::Error> {
///     let _owned: Vec<Arc<Secret>> = ctx.owned::<Secret>(); // still in the cache
///     Ok(Action::await_change())
/// }
///
/// # async fn run(client: kube::Client) -> Result<(), kcache_controller::ControllerError> {
/// let cancel = CancellationToken::new();
/// Controller::<ConfigMap>::new(client.clone(), Watch::all().labels("app=x"))
///     .owns::<Secret>(Watch::all())
///     .workers(4)
///     .context(client)
///     .reconcile(apply)
///     .on_gone(cleanup)
///     .run(cancel)
///     .await
/// # }
/// ```
pub struct Controller<K, T = (), R = NoReconciler> {
    parts: Parts<K>,
    data: Arc<T>,
    reconciler: R,
}

impl<K, T, R: fmt::Debug> fmt::Debug for Controller<K, T, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Controller")
            .field("name", &self.parts.name)
            .field("primary", &self.parts.primary)
            .field("sources", &self.parts.sources.len())
            .field("workers", &self.parts.workers)
            .field("gate", &self.parts.gate)
            .field("metrics", &self.parts.metrics)
            .field("reconciler", &self.reconciler)
            .finish_non_exhaustive()
    }
}

impl<K> Controller<K>
where
    K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Send + Sync + 'static,
    K::Scope: 'static,
{
    /// A controller of `K`, with informers from a factory of its own (no resync), which
    /// [`run`](Self::run) shuts down when it returns. To share informers with other
    /// controllers, use [`with_factory`](Self::with_factory).
    pub fn new(client: kube::Client, watch: Watch) -> Self {
        let factory = Arc::new(SharedInformerFactory::new(client, Duration::ZERO));
        let mut c = Self::with_factory(factory, watch);
        c.parts.owns_factory = true;
        c
    }

    /// A controller of `K` whose informers come from `factory`: informers of the same type and
    /// scope are shared with whoever else asks the factory (other controllers, your own
    /// handlers). The controller starts the informers it asks for and never stops the factory:
    /// its owner does, after the controllers have returned.
    pub fn with_factory(factory: Arc<SharedInformerFactory>, watch: Watch) -> Self {
        let name: Arc<str> = Arc::from(K::kind(&()).to_lowercase());
        let primary = SourceSpec::<K, K> { role: "for", watch: watch.clone(), mapping: Mapping::Itself };
        Self {
            parts: Parts {
                factory,
                owns_factory: false,
                health: Arc::new(HealthShared::new(Arc::clone(&name))),
                name,
                primary: watch,
                sources: vec![Box::new(primary)],
                workers: 1,
                rate_limiter: None,
                gate: None,
                shard: None,
                metrics: MetricsWiring::default(),
                #[cfg(feature = "http")]
                http: None,
                #[cfg(feature = "leaderelection")]
                leader: None,
                #[cfg(feature = "sharding")]
                sharding: None,
            },
            data: Arc::new(()),
            reconciler: NoReconciler,
        }
    }
}

impl<K, T, R> Controller<K, T, R>
where
    K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Send + Sync + 'static,
    K::Scope: 'static,
{
    /// Also watches `S`, whose objects are *owned* by a `K`: an event of an `S` enqueues the
    /// key of its controller owner, if that is a `K` (controller-runtime's `Owns`, i.e.
    /// `EnqueueRequestForOwner` with `OnlyControllerOwner`; kube-runtime's `owns`). An update
    /// enqueues the owners of the old and the new object.
    ///
    /// The informer of `S` gets an index from owner to owned objects, which
    /// [`Context::owned`] reads: the reconcile finds what it owns without a scan or an API call.
    #[must_use]
    pub fn owns<S>(mut self, watch: Watch) -> Self
    where
        S: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Send + Sync + 'static,
        S::Scope: 'static,
    {
        let source =
            SourceSpec::<K, S> { role: "owns", watch, mapping: Mapping::Owner(OwnerKind::of::<K>()) };
        self.parts.sources.push(Box::new(source));
        self
    }

    /// Also watches `W`: an event of a `W` enqueues the keys `mapper` returns for it
    /// (controller-runtime's `Watches` with `EnqueueRequestsFromMapFunc`; kube-runtime's
    /// `watches`). An update enqueues the keys of the old and the new object.
    ///
    /// ```no_run
    /// use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    /// use kcache_controller::{Controller, ObjectKey, Watch};
    ///
    /// # fn f(client: kube::Client) {
    /// // A Secret affects the ConfigMap named in its `config` annotation.
    /// let controller = Controller::<ConfigMap>::new(client, Watch::all()).watches::<Secret, _>(
    ///     Watch::all(),
    ///     |s: &Secret| {
    ///         let target = s.metadata.annotations.as_ref().and_then(|a| a.get("config"));
    ///         target.map(|name| ObjectKey::new(s.metadata.namespace.as_deref(), name))
    ///     },
    /// );
    /// # let _ = controller;
    /// # }
    /// ```
    #[must_use]
    pub fn watches<W, I>(mut self, watch: Watch, mapper: impl Fn(&W) -> I + Send + Sync + 'static) -> Self
    where
        W: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Send + Sync + 'static,
        W::Scope: 'static,
        I: IntoIterator<Item = ObjectKey<K>>,
    {
        let mapper = Arc::new(move |w: &W| mapper(w).into_iter().collect::<Vec<_>>());
        let source = SourceSpec::<K, W> { role: "watches", watch, mapping: Mapping::Mapper(mapper) };
        self.parts.sources.push(Box::new(source));
        self
    }

    /// The controller's name: its workqueue's (the `name` label of the workqueue metrics), its
    /// handlers' prefix, its log lines' `controller` field. The lowercased kind by default
    /// (`configmap`); give controllers of one kind different names.
    #[must_use]
    pub fn name(mut self, name: &str) -> Self {
        self.parts.name = Arc::from(name);
        *self.parts.health.name.lock() = Arc::clone(&self.parts.name);
        self
    }

    /// How many keys are reconciled at once (at least 1; 1 by default, as controller-runtime's
    /// `MaxConcurrentReconciles`). A key is never reconciled by two workers at once.
    #[must_use]
    pub fn workers(mut self, workers: usize) -> Self {
        self.parts.workers = workers.max(1);
        self
    }

    /// The rate limiter of failed keys (default: per-key exponential backoff from 5 ms to
    /// 1000 s, controller-runtime's; `kcache_workqueue::default_controller_rate_limiter()` adds
    /// client-go's overall 10 qps bucket).
    #[must_use]
    pub fn rate_limiter(mut self, limiter: impl RateLimiter<ObjectKey<K>> + 'static) -> Self {
        self.parts.rate_limiter = Some(Arc::new(limiter));
        self
    }

    /// Runs the workers only while `gate` is open: the hook for leader election (see
    /// [`WorkGate`]). The informers sync and the keys are queued on every replica; the gate's
    /// state and health show in the [`HealthCheck`].
    ///
    /// ```no_run
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache_controller::{Controller, Watch};
    ///
    /// # fn f(client: kube::Client) {
    /// let (leading, gate) = tokio::sync::watch::channel(false);
    /// let controller = Controller::<ConfigMap>::new(client, Watch::all()).gate(gate);
    /// // The elector's callbacks: leading.send_replace(true) / leading.send_replace(false).
    /// # let _ = (controller, leading);
    /// # }
    /// ```
    #[must_use]
    pub fn gate(mut self, gate: impl WorkGate) -> Self {
        let gate: Arc<dyn WorkGate> = Arc::new(gate);
        *self.parts.health.gate.lock() = Some(Arc::clone(&gate));
        self.parts.gate = Some(gate);
        self
    }

    /// Runs the workers only while this replica leads the Lease of `config`
    /// (kcache-leaderelection, client-go's semantics; feature `leaderelection`), as
    /// controller-runtime's manager with `LeaderElection: true`: every replica syncs its
    /// informers and queues keys, so a new leader starts warm; only the leader's workers take
    /// keys. The elector talks to the API server through the factory's client.
    ///
    /// - A replica that loses its lease (no renewal within the renew deadline) closes its gate,
    ///   drains its running reconciles and [`run`](Self::run) returns
    ///   [`ControllerError::LeaderElectionLost`], as controller-runtime's manager stops with
    ///   "leader election lost".
    /// - A cancelled `run` drains the workers first, then stops the elector, which releases the
    ///   lease if [`release_on_cancel`](kcache_leaderelection::LeaderElectionConfig::release_on_cancel)
    ///   is set (controller-runtime's `LeaderElectionReleaseOnCancel`): a successor takes over at
    ///   its next try.
    /// - The [`HealthCheck`] shows the gate, unhealthy when this replica believes it leads but has
    ///   not renewed its lease for 20 s past its expiry (kube-controller-manager's healthz adaptor
    ///   tolerance).
    ///
    /// It replaces any [`gate`](Self::gate).
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache_controller::{Action, Context, Controller, Watch};
    /// use kcache_leaderelection::LeaderElectionConfig;
    ///
    /// async fn reconcile(_: Arc<ConfigMap>, _: Context<()>) -> Result<Action, kube::Error> {
    ///     Ok(Action::await_change())
    /// }
    ///
    /// # async fn f(client: kube::Client) -> Result<(), kcache_controller::ControllerError> {
    /// let identity = std::env::var("POD_NAME").unwrap_or_else(|_| "replica-a".into());
    /// Controller::<ConfigMap>::new(client, Watch::all())
    ///     .leader_election(LeaderElectionConfig::new("default", "my-controller", identity).release_on_cancel(true))
    ///     .reconcile(reconcile)
    ///     .run(tokio_util::sync::CancellationToken::new())
    ///     .await
    /// # }
    /// ```
    #[cfg(feature = "leaderelection")]
    #[must_use]
    pub fn leader_election(mut self, config: kcache_leaderelection::LeaderElectionConfig) -> Self {
        let client = self.parts.factory.client().clone();
        let candidate = self.parts.leader.take().and_then(|l| l.candidate);
        self.parts.leader = Some(crate::leader::LeaderElection { client, config, candidate });
        self
    }

    /// Coordinated leader election (KEP-4355): publishes `candidate` as this replica's
    /// `LeaseCandidate` while the controller runs, so that kube-apiserver's coordinator can pick
    /// the leader; pair it with [`leader_election`](Self::leader_election) given a config with
    /// [`coordinated(true)`](kcache_leaderelection::LeaderElectionConfig::coordinated). The
    /// server needs `--feature-gates=CoordinatedLeaderElection=true` and
    /// `--runtime-config=coordination.k8s.io/v1beta1=true` (v1.36). Given alone, it turns on a
    /// coordinated election of the candidate's Lease, with the candidate's name as identity and
    /// controller-runtime's durations.
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache_controller::{Action, Context, Controller, Watch};
    /// use kcache_leaderelection::{LeaderElectionConfig, LeaseCandidateConfig};
    ///
    /// async fn reconcile(_: Arc<ConfigMap>, _: Context<()>) -> Result<Action, kube::Error> {
    ///     Ok(Action::await_change())
    /// }
    ///
    /// # async fn f(client: kube::Client) -> Result<(), kcache_controller::ControllerError> {
    /// let election = LeaderElectionConfig::new("kube-system", "my-controller", "pod-a").coordinated(true);
    /// let candidate = LeaseCandidateConfig::for_election(&election, "1.36.0", "1.36.0");
    /// Controller::<ConfigMap>::new(client, Watch::all())
    ///     .leader_election(election)
    ///     .lease_candidate(candidate)
    ///     .reconcile(reconcile)
    ///     .run(tokio_util::sync::CancellationToken::new())
    ///     .await
    /// # }
    /// ```
    #[cfg(feature = "leaderelection")]
    #[must_use]
    pub fn lease_candidate(mut self, candidate: kcache_leaderelection::LeaseCandidateConfig) -> Self {
        match &mut self.parts.leader {
            Some(l) => l.candidate = Some(candidate),
            None => {
                let client = self.parts.factory.client().clone();
                // Until `leader_election` gives the election's config, an uncoordinated default
                // that it replaces (keeping the candidate).
                let config = kcache_leaderelection::LeaderElectionConfig::new(
                    candidate.namespace.clone(),
                    candidate.lease_name.clone(),
                    candidate.name.clone(),
                )
                .coordinated(true);
                self.parts.leader =
                    Some(crate::leader::LeaderElection { client, config, candidate: Some(candidate) });
            }
        }
        self
    }

    /// Keeps only the keys for which `owns_key` is true, from every source: the keys of this
    /// replica's shard. A key of another shard is never enqueued, so it is neither reconciled
    /// nor, when its object is missing from a sharded cache, taken for gone.
    ///
    /// ```no_run
    /// use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache_controller::{Controller, Watch};
    ///
    /// # fn f(client: kube::Client) {
    /// // Replica 1 of 3 owns the namespaces that hash to 1.
    /// let hasher = BuildHasherDefault::<DefaultHasher>::default();
    /// let controller = Controller::<ConfigMap>::new(client, Watch::all())
    ///     .shard(move |key| hasher.hash_one(key.namespace()) % 3 == 1);
    /// # let _ = controller;
    /// # }
    /// ```
    #[must_use]
    pub fn shard(mut self, owns_key: impl Fn(&ObjectKey<K>) -> bool + Send + Sync + 'static) -> Self {
        self.parts.shard = Some(Arc::new(owns_key));
        self
    }

    /// Reconciles only this replica's share of the primary objects, as assigned by `coordinator`
    /// (kcache-sharding's member Leases; feature `sharding`): the replicas of one group split the
    /// hash space of the objects' uids (or namespaces, per the coordinator's
    /// [`ShardingConfig::key`](kcache_sharding::ShardingConfig::key)) and hand ranges over as
    /// replicas join and leave. [`run`](Self::run) runs the coordinator for its whole life and,
    /// after the workers drained, stops it: a graceful leave (its Lease is deleted), so the others
    /// take its ranges over at their next round. A coordinator that fails ends `run` with
    /// [`ControllerError::Sharding`].
    ///
    /// - **Enqueue**: an event of the primary type enqueues its key only if this replica owns the
    ///   object now ([`ShardCoordinator::owns`](kcache_sharding::ShardCoordinator::owns)); a key
    ///   mapped from an [`owns`](Self::owns) or [`watches`](Self::watches) source only if its
    ///   primary object is in the primary cache and owned.
    /// - **Dequeue**: a worker checks again when it takes a key: a key whose range was lost while
    ///   it waited (queued, or waiting for a rate-limited retry) is forgotten and marked done,
    ///   never reconciled. The keys are dropped as the workers reach them, not swept from the
    ///   queue at the change.
    /// - **Gained ranges**: the cached primary objects of a gained range are enqueued at once.
    /// - **A reconcile already running when its range is lost finishes** (its
    ///   [`Context::shutdown`] is not cancelled): the range's new owner may start on the same
    ///   object meanwhile, so reconciles must tolerate a concurrent one (optimistic concurrency on
    ///   `resourceVersion`, as every controller's writes already must). Cancelling would leave
    ///   half-done work without making the overlap impossible.
    /// - The primary informer watches every object of the primary watch (the assignment filters
    ///   here, not on the server): the controller's caches are read by every [`Context`] for the
    ///   whole run, so they are not rebuilt with each selector. [`static_shard`](Self::static_shard)
    ///   has a fixed share and puts its selector on the primary informer's scope.
    ///
    /// It replaces any [`static_shard`](Self::static_shard); it combines with
    /// [`shard`](Self::shard) (both must hold).
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache_controller::{Action, Context, Controller, Watch};
    /// use kcache_sharding::{ShardCoordinator, ShardingConfig};
    ///
    /// async fn reconcile(_: Arc<ConfigMap>, _: Context<()>) -> Result<Action, kube::Error> {
    ///     Ok(Action::await_change())
    /// }
    ///
    /// # async fn f(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
    /// let identity = std::env::var("POD_NAME").unwrap_or_else(|_| "replica-a".into());
    /// let coordinator =
    ///     ShardCoordinator::new(client.clone(), ShardingConfig::new("default", "my-controller", identity))?;
    /// Controller::<ConfigMap>::new(client, Watch::all())
    ///     .shard_coordinator(coordinator)
    ///     .reconcile(reconcile)
    ///     .run(tokio_util::sync::CancellationToken::new())
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "sharding")]
    #[must_use]
    pub fn shard_coordinator(self, coordinator: kcache_sharding::ShardCoordinator) -> Self {
        self.set_sharding(crate::sharding::ShardSpec::Coordinator(coordinator))
    }

    /// Reconciles only the primary objects of replica `shard.index()` of `shard.replicas()`, by
    /// the hash of their uid (kcache-sharding's [`StaticShard`](kcache_sharding::StaticShard):
    /// equal contiguous ranges, no Leases; feature `sharding`). The primary informer's scope
    /// carries the shard's selector, so the API server (KEP-5866) sends only this share; keys are
    /// filtered at enqueue and at dequeue as with [`shard_coordinator`](Self::shard_coordinator).
    /// The deployment guarantees that no two processes have the same index (a StatefulSet's
    /// ordinal).
    ///
    /// It replaces any [`shard_coordinator`](Self::shard_coordinator).
    ///
    /// ```no_run
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache_controller::{Controller, Watch};
    /// use kcache_sharding::StaticShard;
    ///
    /// # fn f(client: kube::Client) -> Result<(), kcache_sharding::Error> {
    /// let pod = std::env::var("POD_NAME").unwrap_or_else(|_| "my-controller-0".into());
    /// let controller =
    ///     Controller::<ConfigMap>::new(client, Watch::all()).static_shard(StaticShard::from_pod_name(&pod, 3)?);
    /// # let _ = controller;
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "sharding")]
    #[must_use]
    pub fn static_shard(self, shard: kcache_sharding::StaticShard) -> Self {
        self.set_sharding(crate::sharding::ShardSpec::Static(shard))
    }

    /// Records the sharding and rebuilds the primary source with its scope.
    #[cfg(feature = "sharding")]
    fn set_sharding(mut self, spec: crate::sharding::ShardSpec) -> Self {
        let mut watch = self.parts.primary.clone();
        watch.scope.shard_selector = spec.fixed_selector();
        self.parts.sources[0] = Box::new(SourceSpec::<K, K> { role: "for", watch, mapping: Mapping::Itself });
        self.parts.sharding = Some(spec);
        self
    }

    /// Reports the workqueue's metrics (client-go's `workqueue_*`, labelled with the
    /// controller's name) to `provider`.
    #[must_use]
    pub fn queue_metrics(mut self, provider: Arc<dyn MetricsProvider>) -> Self {
        self.parts.metrics.queue = Some(provider);
        self
    }

    /// Reports the reflector metrics of the informers this controller starts to `metrics`
    /// (an informer someone else already started keeps its own).
    #[must_use]
    pub fn reflector_metrics(mut self, metrics: Arc<dyn ReflectorMetrics>) -> Self {
        self.parts.metrics.reflector = Some(metrics);
        self
    }

    /// Reports the failures and handler panics of the informers this controller starts to
    /// `metrics` (an informer someone else already started keeps its own).
    #[must_use]
    pub fn informer_metrics(mut self, metrics: Arc<dyn InformerMetrics>) -> Self {
        self.parts.metrics.informer = Some(metrics);
        self
    }

    /// Reports reconciles (outcome, duration) and busy workers to `metrics`.
    #[must_use]
    pub fn controller_metrics(mut self, metrics: Arc<dyn ControllerMetrics>) -> Self {
        self.parts.metrics.controller = Some(metrics);
        self
    }

    /// Every metric in one call: the workqueue's, the reflectors', the informers' (failures,
    /// handler panics, cache sizes, each handler's backlog) and the reconciles', into the
    /// Prometheus registry of `metrics`.
    #[cfg(feature = "prometheus")]
    #[must_use]
    pub fn metrics(mut self, metrics: &crate::prometheus::PrometheusMetrics) -> Self {
        self.parts.metrics = metrics.wiring();
        self
    }

    /// Serves `/healthz` (liveness), `/readyz` (readiness) and, with `metrics` (feature
    /// `prometheus`) set, `/metrics` over HTTP on `addr`, for as long as [`run`](Self::run) runs. A bind
    /// error ends `run` with [`ControllerError::Http`].
    #[cfg(feature = "http")]
    #[must_use]
    pub fn http(mut self, addr: std::net::SocketAddr) -> Self {
        self.parts.http = Some(crate::http::Endpoint::Addr(addr));
        self
    }

    /// [`http`](Self::http) on a listener bound already (to learn the port of `127.0.0.1:0`).
    #[cfg(feature = "http")]
    #[must_use]
    pub fn http_listener(mut self, listener: std::net::TcpListener) -> Self {
        self.parts.http = Some(crate::http::Endpoint::Listener(listener));
        self
    }

    /// A handle on this controller's health and readiness, valid before, during and after
    /// [`run`](Self::run).
    pub fn health_check(&self) -> HealthCheck {
        HealthCheck { shared: Arc::clone(&self.parts.health) }
    }

    /// The factory the informers come from.
    pub fn factory(&self) -> &Arc<SharedInformerFactory> {
        &self.parts.factory
    }
}

impl<K, T> Controller<K, T, NoReconciler>
where
    K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Send + Sync + 'static,
    K::Scope: 'static,
    T: Send + Sync + 'static,
{
    /// The application's data every reconcile gets in its [`Context`] (a client, settings),
    /// kube-runtime's `Arc<Ctx>`. `()` until set.
    #[must_use]
    pub fn context<U: Send + Sync + 'static>(self, data: U) -> Controller<K, U, NoReconciler> {
        self.context_arc(Arc::new(data))
    }

    /// [`context`](Self::context) with data the application keeps a handle on (counters it
    /// reads while the controller runs, say): every [`Context`] derefs to the same `U`.
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache_controller::{Action, Controller, Watch};
    ///
    /// # fn f(client: kube::Client) {
    /// let reconciles = Arc::new(AtomicU64::new(0));
    /// let controller = Controller::<ConfigMap>::new(client, Watch::all())
    ///     .context_arc(Arc::clone(&reconciles))
    ///     .reconcile(|_cm, ctx| async move {
    ///         ctx.fetch_add(1, Ordering::Relaxed);
    ///         Ok::<_, kube::Error>(Action::await_change())
    ///     });
    /// // `reconciles` counts them from here.
    /// # let _ = controller;
    /// # }
    /// ```
    #[must_use]
    pub fn context_arc<U: Send + Sync + 'static>(self, data: Arc<U>) -> Controller<K, U, NoReconciler> {
        Controller { parts: self.parts, data, reconciler: NoReconciler }
    }

    /// The reconcile: called with the object (from the cache) of each key a worker takes, while
    /// the object exists and the primary watch selects it. Kube-runtime's reconciler.
    ///
    /// `Ok(Action::await_change())`: done until the next event; `Ok(Action::requeue(d))`: look
    /// again in `d`; both forget the key's backoff. `Err(e)`: logged with the key and the
    /// error, then the [`error_policy`](Controller::error_policy) decides (default: the
    /// rate-limited requeue). A panic is caught, logged (without its message) and retried
    /// with the rate limiter.
    ///
    /// `E` needs only `Display` (an `anyhow::Error` will do).
    pub fn reconcile<F, Fut, E>(self, reconcile: F) -> Controller<K, T, Reconciler<K, T, E>>
    where
        F: Fn(Arc<K>, Context<T>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<Action, E>> + Send + 'static,
        E: fmt::Display + Send + 'static,
    {
        let reconciler = Reconciler {
            reconcile: Arc::new(move |obj, ctx| Box::pin(reconcile(obj, ctx))),
            on_gone: None,
            error_policy: None,
        };
        Controller { parts: self.parts, data: self.data, reconciler }
    }
}

impl<K, T, E> Controller<K, T, Reconciler<K, T, E>>
where
    K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Send + Sync + 'static,
    K::Scope: 'static,
    T: Send + Sync + 'static,
    E: fmt::Display + Send + 'static,
{
    /// Reconciles a key whose object is gone: deleted, or no longer selected by the primary
    /// watch (a label removed). Called with the key; the caches of the other types still have
    /// what the object owned ([`Context::owned`]). Without it a gone key is forgotten, as
    /// kube-runtime forgets a request for an object missing from its store.
    ///
    /// A deletion is seen as soon as it happens, but only if the process runs then: objects
    /// deleted while the controller was down are never reported gone. Owner references (the
    /// API server's garbage collector) or a finalizer ([`kube_runtime::finalizer()`](kube_runtime::finalizer::finalizer)) cover
    /// that.
    #[must_use]
    pub fn on_gone<G, Fut>(mut self, on_gone: G) -> Self
    where
        G: Fn(ObjectKey<K>, Context<T>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<Action, E>> + Send + 'static,
    {
        self.reconciler.on_gone = Some(Arc::new(move |key, ctx| Box::pin(on_gone(key, ctx))));
        self
    }

    /// Decides what a failed reconcile does next ([`Retry`]); without it, the rate-limited
    /// requeue. kube-runtime's `error_policy`, with the key instead of the object (which a
    /// failed `on_gone` does not have).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache_controller::{Action, Controller, Retry, Watch};
    ///
    /// # fn f(client: kube::Client) {
    /// let controller = Controller::<ConfigMap>::new(client, Watch::all())
    ///     .reconcile(|_cm, _ctx| async { Ok::<_, kube::Error>(Action::await_change()) })
    ///     .error_policy(|_key, error, _ctx| match error {
    ///         kube::Error::Api(status) if status.code == 422 => Retry::Never,
    ///         _ => Retry::After(Duration::from_secs(5)),
    ///     });
    /// # let _ = controller;
    /// # }
    /// ```
    #[must_use]
    pub fn error_policy(
        mut self,
        policy: impl Fn(&ObjectKey<K>, &E, &Context<T>) -> Retry + Send + Sync + 'static,
    ) -> Self {
        self.reconciler.error_policy = Some(Arc::new(policy));
        self
    }

    /// Runs the controller until `cancel` fires: registers the handlers on the factory's
    /// informers, starts them (those not started yet), waits until their caches are synced
    /// (so no reconcile ever reads a partial cache), then runs the workers.
    ///
    /// On cancel it drains: the handlers are removed, no new key is taken, the reconciles that
    /// are running finish (their [`Context::shutdown`] is cancelled), then `run` returns
    /// `Ok(())`. Keys still queued are dropped; the next run lists everything again. A factory
    /// of the controller's own ([`new`](Controller::new)) is shut down; a shared one goes on.
    ///
    /// # Errors
    ///
    /// [`ControllerError::InformerFailed`] when an informer the controller reads fails (it stops the
    /// same way first); [`ControllerError::InformerStopped`] when one stops before it synced;
    /// [`ControllerError::Informer`] when one refuses the handler; [`ControllerError::Queue`] outside a Tokio
    /// runtime; [`ControllerError::Http`] when the endpoint cannot listen.
    ///
    /// # Cancel safety
    ///
    /// Prefer cancelling `cancel`. Dropping the future stops the workers at their next await
    /// (a reconcile cut short re-adds its key) and removes the handlers, without waiting.
    pub async fn run(self, cancel: CancellationToken) -> Result<()> {
        let health = Arc::clone(&self.parts.health);
        let factory = Arc::clone(&self.parts.factory);
        let owns_factory = self.parts.owns_factory;
        let result = self.run_inner(cancel).await;
        health.set_state(match &result {
            Ok(()) => ControllerState::Stopped,
            Err(e) => ControllerState::Failed(e.to_string()),
        });
        if owns_factory {
            factory.shutdown().await;
        }
        result
    }

    async fn run_inner(self, cancel: CancellationToken) -> Result<()> {
        // `mut` and the `default()` below are used by the optional features only.
        #[allow(unused_mut)]
        let Controller { mut parts, data, reconciler } = self;
        parts.health.set_state(ControllerState::Syncing);
        #[allow(unused_mut, clippy::default_constructed_unit_structs)]
        let mut leadership = Leadership::default();
        #[cfg(feature = "leaderelection")]
        if let Some(election) = parts.leader.take() {
            let (elected, gate) = election.start(&parts.name)?;
            leadership = elected;
            let gate: Arc<dyn WorkGate> = Arc::new(gate);
            *parts.health.gate.lock() = Some(Arc::clone(&gate));
            parts.gate = Some(gate);
        }
        #[cfg(not(feature = "sharding"))]
        let mut sharding = NoSharding;
        #[cfg(feature = "sharding")]
        let (mut sharding, ownership) = match parts.sharding.take() {
            Some(spec) => {
                let (running, shares) = crate::sharding::Running::start(spec);
                let ownership =
                    Arc::new(crate::sharding::Ownership { shares, primary: std::sync::OnceLock::new() });
                (running, Some(ownership))
            }
            None => (crate::sharding::Running::default(), None),
        };
        let mut queue = PriorityQueue::<ObjectKey<K>>::builder().name(parts.name.to_string());
        if let Some(limiter) = parts.rate_limiter {
            queue = queue.rate_limiter(limiter);
        }
        if let Some(provider) = &parts.metrics.queue {
            queue = queue.metrics_provider(Arc::clone(provider));
        }
        let queue = queue.build().map_err(ControllerError::Queue)?;
        *parts.health.backlog.lock() = Some({
            let queue = queue.clone();
            // `ready` before `reconciling`: a key a worker takes in between is counted in one
            // of them, so an idle reading (all zero) means nothing is queued or taken.
            Box::new(move || {
                let ready = queue.len();
                let reconciling = queue.processing_len();
                Backlog { ready, waiting: queue.pending_len(), reconciling }
            })
        });
        let stop = CancellationToken::new();
        // From here on, however `run` ends (even dropped), the handlers go and the queue stops.
        let mut guard = Guard { registered: Vec::new(), queue: queue.clone(), stop: stop.clone() };

        let setup = Setup {
            controller: Arc::clone(&parts.name),
            queue: queue.clone(),
            shard: parts.shard.clone(),
            #[cfg(feature = "sharding")]
            assignment: ownership.as_ref().map(crate::source::ShardFilter::new),
            metrics: parts.metrics.clone(),
        };
        for source in &parts.sources {
            guard.registered.push(Arc::from(source.register(&parts.factory, &setup)?));
        }
        let registered = guard.registered.clone();
        *parts.health.informers.lock() = registered
            .iter()
            .map(|r| {
                let r = Arc::clone(r);
                Box::new(move || r.health()) as crate::health::InformerHealthFn
            })
            .collect();
        let mut caches = Caches::default();
        for r in &registered {
            r.add_to(&mut caches);
        }
        let lister = caches.lister::<K>().expect("the primary source is always registered first");
        #[cfg(feature = "sharding")]
        if let Some(ownership) = &ownership {
            let _ = ownership.primary.set(lister.clone());
            sharding.follow(&ownership.shares, lister.clone(), parts.primary.clone(), queue.clone());
        }
        let context =
            Arc::new(ContextShared { name: Arc::clone(&parts.name), caches, shutdown: stop.clone() });

        #[cfg(feature = "http")]
        let _http = match parts.http {
            Some(endpoint) => Some(
                crate::http::serve(
                    endpoint,
                    HealthCheck { shared: Arc::clone(&parts.health) },
                    parts.metrics.encoder.clone(),
                )
                .map_err(ControllerError::Http)?,
            ),
            None => None,
        };

        parts.factory.start();
        let mut failures = futures::future::select_all(registered.iter().map(|r| r.failure()));
        let synced: Vec<&dyn HasSynced> = registered.iter().map(|r| r.synced()).collect();
        let all_synced = tokio::select! {
            ok = wait_for_cache_sync(&cancel, &synced) => ok,
            (failure, _, _) = &mut failures => return Err(ControllerError::InformerFailed(failure)),
            lost = leadership.lost() => return Err(lost),
            failed = sharding.failed() => return Err(failed),
        };
        drop(synced);
        if !all_synced {
            if cancel.is_cancelled() {
                return Ok(());
            }
            return Err(not_synced(&registered));
        }
        tracing::debug!(controller = %parts.name, "caches synced; starting workers");
        parts.health.set_state(ControllerState::Running);

        let workers = Arc::new(Workers {
            name: Arc::clone(&parts.name),
            queue: queue.clone(),
            primary: parts.primary,
            lister,
            data,
            context,
            reconciler,
            gate: parts.gate,
            metrics: parts.metrics.controller.clone(),
            stop: stop.clone(),
            #[cfg(feature = "sharding")]
            ownership,
        });
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..parts.workers {
            tasks.spawn(Arc::clone(&workers).run());
        }
        let outcome = tokio::select! {
            () = cancel.cancelled() => Ok(()),
            (failure, _, _) = &mut failures => Err(ControllerError::InformerFailed(failure)),
            lost = leadership.lost() => Err(lost),
            failed = sharding.failed() => Err(failed),
        };
        tracing::debug!(controller = %parts.name, "stopping: draining the workers");
        guard.stop_sources();
        // Waits for the keys handed out to be done: running reconciles finish.
        queue.shut_down_with_drain().await;
        while let Some(joined) = tasks.join_next().await {
            if let Err(e) = joined {
                tracing::error!(controller = %parts.name, error = %e, "a worker task ended abnormally");
            }
        }
        // Only now, with no reconcile running, may the lease go to a successor.
        leadership.stop().await;
        // The same for the shard ranges: the coordinator leaves only after the drain.
        #[cfg(feature = "sharding")]
        sharding.stop().await;
        tracing::debug!(controller = %parts.name, "stopped");
        outcome
    }
}

/// Without the feature `sharding`: no coordinator, nothing that fails.
#[cfg(not(feature = "sharding"))]
struct NoSharding;

#[cfg(not(feature = "sharding"))]
impl NoSharding {
    /// Never completes.
    async fn failed(&mut self) -> ControllerError {
        std::future::pending().await
    }
}

/// The error for caches that did not sync though nobody cancelled: a failed informer, or one
/// stopped (its factory shut down).
fn not_synced(registered: &[Arc<dyn Registered>]) -> ControllerError {
    let healths: Vec<_> = registered.iter().map(|r| r.health()).collect();
    if let Some(failure) = healths.iter().find_map(|h| h.failure()) {
        return ControllerError::InformerFailed(failure.clone());
    }
    let informer = healths.iter().find(|h| !h.is_ready()).map(|h| h.name.clone()).unwrap_or_default();
    ControllerError::InformerStopped { informer }
}

/// Removes the handlers and stops the queue when `run` ends, however it ends.
struct Guard<K: 'static> {
    registered: Vec<Arc<dyn Registered>>,
    queue: PriorityQueue<ObjectKey<K>>,
    stop: CancellationToken,
}

impl<K: 'static> Guard<K> {
    fn stop_sources(&mut self) {
        self.stop.cancel();
        for r in self.registered.drain(..) {
            r.remove();
        }
    }
}

impl<K: 'static> Drop for Guard<K> {
    fn drop(&mut self) {
        self.stop_sources();
        self.queue.shut_down();
    }
}
