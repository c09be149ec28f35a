//! `SharedInformerFactory`: one informer per (resource type, namespace, selectors, shard), shared by
//! every caller that asks for it.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use kcache_reflector::ApiListerWatcher;
use kcache_shard_selector::ShardSelector;
use kcache_store::CacheRepr;
use kube::Resource;
use kube::api::{ApiResource, DynamicObject};
use kube::core::PartialObjectMeta;
use parking_lot::Mutex;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::error::InformerError;
use crate::failure::{FailurePolicy, InformerFailure};
use crate::health::{FactoryHealth, InformerHealth};
use crate::informer::SharedIndexInformer;
use crate::metrics::InformerMetrics;
use crate::sync::HasSynced;

/// Which part of a collection an informer watches.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct InformerScope {
    /// A namespace, or `None` for all namespaces. `Some("")` means all namespaces too (client-go's
    /// `metav1.NamespaceAll`), and a cluster-scoped type ignores the namespace, as client-go's
    /// generated informers ignore `WithNamespace`.
    pub namespace: Option<String>,
    /// A label selector.
    pub label_selector: Option<String>,
    /// A field selector.
    pub field_selector: Option<String>,
    /// One shard of the collection (KEP-5866 sharded list and watch): sent as `shardSelector`,
    /// checked, and applied on the client when the server does not filter (see
    /// [`Reflector::shard_selector`](kcache_reflector::Reflector::shard_selector)). Informers
    /// of different shards are never shared.
    pub shard_selector: Option<ShardSelector>,
}

impl InformerScope {
    /// Everything.
    pub fn all() -> Self {
        Self::default()
    }

    /// One namespace; `""` is all namespaces, as in client-go.
    pub fn namespace(ns: &str) -> Self {
        Self { namespace: Some(ns.to_owned()), ..Self::default() }
    }

    /// Adds a label selector.
    #[must_use]
    pub fn labels(mut self, selector: &str) -> Self {
        self.label_selector = Some(selector.to_owned());
        self
    }

    /// Adds a field selector.
    #[must_use]
    pub fn fields(mut self, selector: &str) -> Self {
        self.field_selector = Some(selector.to_owned());
        self
    }

    /// Restricts to one shard (`shardSelector`).
    ///
    /// ```
    /// use kcache_informer::InformerScope;
    /// use kcache_shard_selector::{ShardKey, ShardSelector};
    ///
    /// let shards: Vec<InformerScope> =
    ///     ShardSelector::split(ShardKey::Uid, 3).into_iter().map(|s| InformerScope::all().shard(s)).collect();
    /// assert_ne!(shards[0], shards[1]);
    /// ```
    #[must_use]
    pub fn shard(mut self, selector: ShardSelector) -> Self {
        self.shard_selector = Some(selector);
        self
    }

    /// The namespace to list in: `None` for all (`""` included).
    fn namespace_filter(&self) -> Option<&str> {
        self.namespace.as_deref().filter(|ns| !ns.is_empty())
    }
}

/// A factory informer's name: `base`, then `/namespace` (the one it lists in, if any),
/// `;labels=...`, `;fields=...` and `;shard=...` (the selector as sent).
fn scoped_name(base: &str, namespace: Option<&str>, scope: &InformerScope) -> String {
    let mut name = base.to_owned();
    if let Some(ns) = namespace {
        name.push('/');
        name.push_str(ns);
    }
    if let Some(l) = &scope.label_selector {
        name.push_str(";labels=");
        name.push_str(l);
    }
    if let Some(f) = &scope.field_selector {
        name.push_str(";fields=");
        name.push_str(f);
    }
    if let Some(s) = &scope.shard_selector {
        name.push_str(";shard=");
        name.push_str(&s.to_string());
    }
    name
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    type_id: TypeId,
    url: String,
    labels: Option<String>,
    fields: Option<String>,
    shard: Option<ShardSelector>,
}

trait AnyInformer: Send + Sync {
    fn as_any(&self) -> &dyn Any;
    fn spawn(&self, cancel: CancellationToken) -> JoinHandle<()>;
    fn synced(&self) -> &dyn HasSynced;
    fn health(&self) -> InformerHealth;
}

impl<K> AnyInformer for SharedIndexInformer<K>
where
    K: Resource + DeserializeOwned + Send + Sync + 'static,
{
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn spawn(&self, cancel: CancellationToken) -> JoinHandle<()> {
        let informer = self.clone();
        tokio::spawn(async move {
            match informer.run(cancel).await {
                Ok(()) => {}
                // Logged when it happened, and handed to `wait_for_failure` through the hook.
                Err(InformerError::Failed(_)) => {}
                Err(e) => tracing::warn!(informer = informer.name(), error = %e, "informer did not run"),
            }
        })
    }

    fn synced(&self) -> &dyn HasSynced {
        self
    }

    fn health(&self) -> InformerHealth {
        SharedIndexInformer::health(self)
    }
}

struct Entry {
    informer: Arc<dyn AnyInformer>,
    task: Option<JoinHandle<()>>,
    /// Whether `start` ran it; stays set after `shutdown` (client-go's `startedInformers`), so
    /// a wait after a shutdown still reports the informers that never synced.
    started: bool,
}

/// Hands out shared informers (client-go's `SharedInformerFactory`): asking twice for the same
/// resource type, namespace, selectors and shard returns the same informer, so one watch connection
/// serves every controller in the process.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use k8s_openapi::api::core::v1::{ConfigMap, Pod};
/// use kcache_informer::{InformerScope, SharedInformerFactory};
///
/// # async fn run(client: kube::Client) {
/// let factory = SharedInformerFactory::new(client, Duration::ZERO);
/// let pods = factory.informer::<Pod>(&InformerScope::all());
/// let same = factory.informer::<Pod>(&InformerScope::all());
/// let cms = factory.informer::<ConfigMap>(&InformerScope::namespace("default"));
/// factory.start();
/// factory.wait_for_cache_sync().await;
/// # let _ = (pods, same, cms);
/// factory.shutdown().await;
/// # }
/// ```
pub struct SharedInformerFactory {
    client: kube::Client,
    default_resync: Duration,
    strip_managed_fields: bool,
    protobuf: bool,
    compact_objects: bool,
    cache_representation: CacheRepr,
    failure_policy: FailurePolicy,
    metrics: Option<Arc<dyn InformerMetrics>>,
    entries: Mutex<HashMap<Key, Entry>>,
    cancel: CancellationToken,
    /// The first failure of any of its informers (each informer's failure hook sends it).
    first_failure: tokio::sync::watch::Sender<Option<InformerFailure>>,
}

impl fmt::Debug for SharedInformerFactory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedInformerFactory")
            .field("informers", &self.entries.lock().len())
            .field("default_resync", &self.default_resync)
            .field("strip_managed_fields", &self.strip_managed_fields)
            .field("protobuf", &self.protobuf)
            .field("compact_objects", &self.compact_objects)
            .field("cache_representation", &self.cache_representation)
            .field("failure_policy", &self.failure_policy)
            .finish_non_exhaustive()
    }
}

impl SharedInformerFactory {
    /// A factory whose informers resync their handlers every `default_resync` (zero: never).
    pub fn new(client: kube::Client, default_resync: Duration) -> Self {
        Self {
            client,
            default_resync,
            strip_managed_fields: true,
            protobuf: false,
            compact_objects: false,
            cache_representation: CacheRepr::Objects,
            failure_policy: FailurePolicy::default(),
            metrics: None,
            entries: Mutex::new(HashMap::new()),
            cancel: CancellationToken::new(),
            first_failure: tokio::sync::watch::Sender::new(None),
        }
    }

    /// The client the informers list and watch with (for companions that must talk to the same
    /// API server, such as a controller's leader elector).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use kcache_informer::SharedInformerFactory;
    /// # fn f(client: kube::Client) {
    /// let factory = SharedInformerFactory::new(client, Duration::ZERO);
    /// let same_server: kube::Client = factory.client().clone();
    /// # let _ = same_server;
    /// # }
    /// ```
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// What a failure of any of this factory's informers does
    /// ([`SharedIndexInformer::set_failure_policy`]): [`FailurePolicy::Stop`] by default,
    /// [`FailurePolicy::Abort`] for client-go's crash.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use kcache_informer::{FailurePolicy, SharedInformerFactory};
    ///
    /// # fn f(client: kube::Client) {
    /// let factory = SharedInformerFactory::new(client, Duration::ZERO).failure_policy(FailurePolicy::Abort);
    /// # let _ = factory;
    /// # }
    /// ```
    #[must_use]
    pub fn failure_policy(mut self, policy: FailurePolicy) -> Self {
        self.failure_policy = policy;
        self
    }

    /// Reports the failures and handler panics of every informer of this factory to `metrics`
    /// ([`SharedIndexInformer::set_metrics`]).
    #[must_use]
    pub fn metrics(mut self, metrics: Arc<dyn InformerMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Whether every informer of this factory decodes objects without `metadata.managedFields`
    /// (see [`ApiListerWatcher::strip_managed_fields`]). **On by default**: they are skipped
    /// while parsing, never allocated, and cached objects have `managed_fields: None`, as in the
    /// informers of kube-controller-manager and kube-scheduler, which clear them with a
    /// transform. Pass `false` to cache them, as client-go's library default does; on a real
    /// API server that costs about 2.6 KB of heap per object (k8s-openapi decodes each
    /// `fieldsV1` into a `serde_json::Value` tree).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use kcache_informer::SharedInformerFactory;
    ///
    /// # fn f(client: kube::Client) {
    /// // Every cache of this factory keeps managedFields.
    /// let factory = SharedInformerFactory::new(client, Duration::ZERO).strip_managed_fields(false);
    /// # let _ = factory;
    /// # }
    /// ```
    #[must_use]
    pub fn strip_managed_fields(mut self, strip: bool) -> Self {
        self.strip_managed_fields = strip;
        self
    }

    /// Whether this factory's informers of built-in kinds list and watch in Kubernetes' protobuf
    /// instead of JSON (see [`ApiListerWatcher::protobuf`]). **Off by default.** Dynamic
    /// informers (custom resources) and kinds without a protobuf form stay on JSON, and a
    /// server that answers JSON is read as JSON.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use kcache_informer::SharedInformerFactory;
    ///
    /// # fn f(client: kube::Client) {
    /// // As kube-controller-manager's `ContentType: application/vnd.kubernetes.protobuf`.
    /// let factory = SharedInformerFactory::new(client, Duration::ZERO).protobuf(true);
    /// # let _ = factory;
    /// # }
    /// ```
    #[must_use]
    pub fn protobuf(mut self, on: bool) -> Self {
        self.protobuf = on;
        self
    }

    /// Whether this factory's informers copy each decoded object once into an allocation of its
    /// exact size before caching it (see [`ApiListerWatcher::compact_objects`]). **Off by
    /// default.** Decoding leaves spare capacity in every `Vec` of a k8s-openapi object; the
    /// copy drops it, about 20% of a Pod cache (docs/benchmarks.md, "Where the bytes go").
    /// Users see the same objects.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use kcache_informer::SharedInformerFactory;
    ///
    /// # fn f(client: kube::Client) {
    /// let factory = SharedInformerFactory::new(client, Duration::ZERO).compact_objects(true);
    /// # let _ = factory;
    /// # }
    /// ```
    #[must_use]
    pub fn compact_objects(mut self, on: bool) -> Self {
        self.compact_objects = on;
        self
    }

    /// How the caches of this factory's informers hold their objects
    /// ([`SharedIndexInformer::set_cache_representation`]): [`CacheRepr::Objects`] by default;
    /// [`CacheRepr::Serialized`] keeps each object as its compact JSON, a fraction of the memory,
    /// and decodes it on every lister read (docs/benchmarks.md, "Scale"). Handlers are
    /// unaffected.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use kcache_informer::{CacheRepr, SharedInformerFactory};
    ///
    /// # fn f(client: kube::Client) {
    /// let factory =
    ///     SharedInformerFactory::new(client, Duration::ZERO).cache_representation(CacheRepr::Serialized);
    /// # let _ = factory;
    /// # }
    /// ```
    #[must_use]
    pub fn cache_representation(mut self, repr: CacheRepr) -> Self {
        self.cache_representation = repr;
        self
    }

    /// The shared informer for `K` in `scope`, created on first use.
    ///
    /// `K` is `Clone` and `Serialize` (every k8s-openapi type and every `CustomResource` is) so
    /// that the factory's [`compact_objects`](Self::compact_objects) and
    /// [`cache_representation`](Self::cache_representation) reach typed informers too.
    ///
    /// It is named (in its logs, its reflector's metrics, its health and its failures) after
    /// the type, followed by what narrows the scope: `ConfigMap` for every namespace,
    /// `ConfigMap/default` for one, `ConfigMap/default;labels=app=web;fields=...` with
    /// selectors. So two informers of one type in different scopes never share a name.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache_informer::{InformerScope, SharedInformerFactory};
    ///
    /// # fn f(client: kube::Client) {
    /// let factory = SharedInformerFactory::new(client, Duration::ZERO);
    /// assert_eq!(factory.informer::<ConfigMap>(&InformerScope::all()).name(), "ConfigMap");
    /// let web = InformerScope::namespace("default").labels("app=web");
    /// assert_eq!(factory.informer::<ConfigMap>(&web).name(), "ConfigMap/default;labels=app=web");
    /// # }
    /// ```
    pub fn informer<K>(&self, scope: &InformerScope) -> SharedIndexInformer<K>
    where
        K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Send + Sync + 'static,
        K::Scope: 'static,
    {
        let cluster_scoped = TypeId::of::<K::Scope>() == TypeId::of::<kube::core::ClusterResourceScope>();
        let namespace = if cluster_scoped { None } else { scope.namespace_filter() };
        let url = K::url_path(&(), namespace);
        let base = std::any::type_name::<K>().rsplit("::").next().unwrap_or("informer");
        let name = scoped_name(base, namespace, scope);
        let protobuf = self.protobuf;
        self.get_or_create(TypeId::of::<K>(), url, scope, None, name, |lw| lw.protobuf(protobuf))
    }

    /// The shared informer for a dynamically typed resource (custom resources), named after the
    /// resource (`widgets.example.com`, then the scope as for [`informer`](Self::informer)).
    /// Its lister-watcher checks every object's `apiVersion` and `kind` against `resource`
    /// ([`ApiListerWatcher::expect_type`]), so an object of another type is a decode error and a
    /// relist, never an entry in this cache.
    pub fn dynamic_informer(
        &self,
        resource: &ApiResource,
        scope: &InformerScope,
    ) -> SharedIndexInformer<DynamicObject> {
        let url = DynamicObject::url_path(resource, scope.namespace_filter());
        let expect = (resource.api_version.as_str(), resource.kind.as_str());
        // Named after the resource (`widgets.example.com`), not the Rust type every dynamic
        // informer shares, so that logs and metrics tell them apart.
        let base = if resource.group.is_empty() {
            resource.plural.clone()
        } else {
            format!("{}.{}", resource.plural, resource.group)
        };
        let name = scoped_name(&base, scope.namespace_filter(), scope);
        self.get_or_create(TypeId::of::<DynamicObject>(), url, scope, Some(expect), name, |lw| lw)
    }

    /// The shared metadata-only informer for a resource (client-go's `metadatainformer`
    /// `ForResource`): its cache holds kube's [`PartialObjectMeta`], each object's `metadata`
    /// and nothing else, listed and watched as `PartialObjectMetadata` (see
    /// [`ApiListerWatcher`'s metadata only](ApiListerWatcher#metadata-only)). It works for
    /// built-in resources (`ApiResource::erase::<Pod>(&())`) and custom ones alike, with
    /// watch-list, listers and the namespace index as any informer; add label or owner indexes
    /// with [`SharedIndexInformer::add_indexers`] and [`kcache_store::label_index_func`],
    /// [`kcache_store::owner_uid_index_func`] or [`kcache_store::controller_uid_index_func`].
    ///
    /// A metadata informer is shared like any other, by resource, namespace and selectors, and
    /// is never the same informer as a full one of the same resource
    /// ([`informer`](Self::informer), [`dynamic_informer`](Self::dynamic_informer)): the two
    /// caches hold different things. It is named `metadata:` followed by the resource and the
    /// scope (`metadata:pods`, `metadata:widgets.example.com/default`).
    ///
    /// An `ApiResource` does not say whether the resource is namespaced: for a cluster-scoped
    /// one, give `scope` no namespace, as with [`dynamic_informer`](Self::dynamic_informer)
    /// (the request would name one, and the server answer 404).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kcache_informer::{InformerScope, SharedInformerFactory};
    /// use kcache_store::{CONTROLLER_UID_INDEX, Indexers, controller_uid_index_func};
    /// use kube::api::ApiResource;
    ///
    /// # async fn run(client: kube::Client) {
    /// let factory = SharedInformerFactory::new(client, Duration::ZERO);
    /// let pods = factory.metadata_informer(&ApiResource::erase::<Pod>(&()), &InformerScope::all());
    /// assert_eq!(pods.name(), "metadata:pods");
    /// pods.add_indexers(Indexers::from([(CONTROLLER_UID_INDEX.to_owned(), controller_uid_index_func())]))
    ///     .unwrap();
    /// factory.start();
    /// factory.wait_for_cache_sync().await;
    /// // The Pods a ReplicaSet controls, from the metadata cache.
    /// let owned = pods.lister().by_index(CONTROLLER_UID_INDEX, "uid-of-the-replicaset");
    /// # let _ = owned;
    /// # }
    /// ```
    pub fn metadata_informer(
        &self,
        resource: &ApiResource,
        scope: &InformerScope,
    ) -> SharedIndexInformer<PartialObjectMeta> {
        let url = DynamicObject::url_path(resource, scope.namespace_filter());
        let base = if resource.group.is_empty() {
            format!("metadata:{}", resource.plural)
        } else {
            format!("metadata:{}.{}", resource.plural, resource.group)
        };
        let name = scoped_name(&base, scope.namespace_filter(), scope);
        self.get_or_create(TypeId::of::<PartialObjectMeta>(), url, scope, None, name, |lw| lw)
    }

    fn get_or_create<K>(
        &self,
        type_id: TypeId,
        url: String,
        scope: &InformerScope,
        expect: Option<(&str, &str)>,
        name: String,
        configure: impl FnOnce(ApiListerWatcher<K>) -> ApiListerWatcher<K>,
    ) -> SharedIndexInformer<K>
    where
        K: Resource + Clone + Serialize + DeserializeOwned + Send + Sync + 'static,
    {
        let key = Key {
            type_id,
            url: url.clone(),
            labels: scope.label_selector.clone(),
            fields: scope.field_selector.clone(),
            shard: scope.shard_selector.clone(),
        };
        let mut entries = self.entries.lock();
        if let Some(e) = entries.get(&key)
            && let Some(i) = e.informer.as_any().downcast_ref::<SharedIndexInformer<K>>()
        {
            return i.clone();
        }
        let mut lw = ApiListerWatcher::<K>::with_url(self.client.clone(), url)
            .strip_managed_fields(self.strip_managed_fields)
            .compact_objects(self.compact_objects);
        if let Some(l) = &scope.label_selector {
            lw = lw.labels(l);
        }
        if let Some(f) = &scope.field_selector {
            lw = lw.fields(f);
        }
        lw = lw.shard_selector(scope.shard_selector.clone());
        if let Some((api_version, kind)) = expect {
            lw = lw.expect_type(api_version, kind);
        }
        let lw = configure(lw);
        let informer = SharedIndexInformer::named(lw, self.default_resync, name);
        // Not started yet, and empty: these cannot fail.
        let _ = informer.set_cache_representation(self.cache_representation);
        let _ = informer.set_failure_policy(self.failure_policy);
        if let Some(m) = &self.metrics {
            let _ = informer.set_metrics(Arc::clone(m));
        }
        let first_failure = self.first_failure.clone();
        informer.on_failure(move |failure| {
            first_failure.send_if_modified(|first| {
                let is_first = first.is_none();
                if is_first {
                    *first = Some(failure.clone());
                }
                is_first
            });
        });
        entries.insert(key, Entry { informer: Arc::new(informer.clone()), task: None, started: false });
        informer
    }

    /// Starts every informer not started yet (client-go's `Start`). Call again after asking for
    /// more informers.
    ///
    /// After [`shutdown`](Self::shutdown) it does nothing, as in client-go.
    ///
    /// # Panics
    ///
    /// Must be called within a tokio runtime. An informer it could not start is left as it was,
    /// so a later `start` within a runtime starts it.
    pub fn start(&self) {
        if self.cancel.is_cancelled() {
            return;
        }
        for e in self.entries.lock().values_mut() {
            if !e.started {
                e.task = Some(e.informer.spawn(self.cancel.child_token()));
                e.started = true;
            }
        }
    }

    /// Waits until every started informer has synced; returns false if the factory shut down
    /// first, or if an informer stopped without syncing or failed (see
    /// [`wait_for_failure`](Self::wait_for_failure)).
    pub async fn wait_for_cache_sync(&self) -> bool {
        let informers: Vec<_> =
            self.entries.lock().values().filter(|e| e.started).map(|e| Arc::clone(&e.informer)).collect();
        let refs: Vec<&dyn HasSynced> = informers.iter().map(|i| i.synced()).collect();
        crate::sync::wait_for_cache_sync(&self.cancel, &refs).await
    }

    /// Completes with the first failure of any informer of this factory, as soon as it happens
    /// (the failed informer stops; the others go on); with `None` once the factory is shut down
    /// ([`shutdown`](Self::shutdown), or dropped) without a failure. Informers handed out after
    /// the wait began count too. A failure that happened before the call is returned at once.
    ///
    /// The factory's counterpart of the error [`SharedIndexInformer::run`] returns: the
    /// factory runs its informers, so this is where an application hears of their failures.
    /// [`health`](Self::health) answers the same question without waiting.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it only observes.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache_informer::{InformerScope, SharedInformerFactory};
    ///
    /// # async fn run(client: kube::Client) {
    /// let factory = SharedInformerFactory::new(client, Duration::ZERO);
    /// let _cms = factory.informer::<ConfigMap>(&InformerScope::all());
    /// factory.start();
    /// tokio::select! {
    ///     Some(failure) = factory.wait_for_failure() => {
    ///         eprintln!("{failure}");
    ///         factory.shutdown().await;
    ///         std::process::exit(1);
    ///     }
    ///     _ = tokio::signal::ctrl_c() => factory.shutdown().await,
    /// }
    /// # }
    /// ```
    pub async fn wait_for_failure(&self) -> Option<InformerFailure> {
        let mut failures = self.first_failure.subscribe();
        loop {
            if let Some(f) = failures.borrow_and_update().clone() {
                return Some(f);
            }
            tokio::select! {
                // The factory holds the sender, so this cannot fail while `self` lives.
                _ = failures.changed() => {}
                () = self.cancel.cancelled() => return self.first_failure.borrow().clone(),
            }
        }
    }

    /// The health of every informer handed out, sorted by name: for readiness probes
    /// ([`FactoryHealth::is_ready`]) and to name the informers that failed
    /// ([`FactoryHealth::failures`]).
    ///
    /// ```no_run
    /// use kcache_informer::SharedInformerFactory;
    ///
    /// // The body of a `/readyz` handler.
    /// fn readyz(factory: &SharedInformerFactory) -> (u16, String) {
    ///     let health = factory.health();
    ///     (if health.is_ready() { 200 } else { 503 }, health.to_string())
    /// }
    /// ```
    pub fn health(&self) -> FactoryHealth {
        let mut informers: Vec<_> = self.entries.lock().values().map(|e| e.informer.health()).collect();
        informers.sort_by(|a, b| a.name.cmp(&b.name));
        FactoryHealth { informers }
    }

    /// Stops every informer and waits for them (and their handler threads) to end.
    pub async fn shutdown(&self) {
        self.cancel.cancel();
        let tasks: Vec<_> = self.entries.lock().values_mut().filter_map(|e| e.task.take()).collect();
        for t in tasks {
            let _ = t.await;
        }
    }

    /// Number of distinct informers handed out.
    pub fn len(&self) -> usize {
        self.entries.lock().len()
    }

    /// Whether no informer was handed out yet.
    pub fn is_empty(&self) -> bool {
        self.entries.lock().is_empty()
    }
}

impl Drop for SharedInformerFactory {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}
