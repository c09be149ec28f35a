//! Sources: one informer per watched type, with the handler that turns its events into keys of
//! the primary type (the object itself, its controller owner, or a mapper's keys) and enqueues
//! them.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use kcache_informer::{
    HandlerOptions, HandlerRegistration, HasSynced, InformerFailure, InformerHealth, ObjectOrTombstone,
    ResourceEventHandler, SharedIndexInformer, SharedInformerFactory,
};
use kcache_store::{IndexError, Indexers, index_func};
use kcache_workqueue::{AddOpts, HandlerEvent, PriorityQueue};
use kube::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::context::Caches;
use crate::error::ControllerError;
use crate::key::ObjectKey;
use crate::metrics::MetricsWiring;
use crate::watch::Watch;

/// Maps an object of a watched type to the keys of the primary type it affects.
pub(crate) type MapFn<K, S> = Arc<dyn Fn(&S) -> Vec<ObjectKey<K>> + Send + Sync>;
/// Decides which keys this controller owns (sharding).
pub(crate) type KeyFilter<K> = Arc<dyn Fn(&ObjectKey<K>) -> bool + Send + Sync>;
/// Decides which objects this controller owns, by their metadata (feature `sharding`).
#[cfg(feature = "sharding")]
pub(crate) type ObjectFilter = Arc<dyn Fn(&kube::api::ObjectMeta) -> bool + Send + Sync>;

/// The kind of the primary type, as controller owner references name it.
#[derive(Debug, Clone)]
pub(crate) struct OwnerKind {
    group: String,
    kind: String,
    namespaced: bool,
}

impl OwnerKind {
    pub(crate) fn of<K: Resource<DynamicType = ()>>() -> Self
    where
        K::Scope: 'static,
    {
        Self {
            group: K::group(&()).into_owned(),
            kind: K::kind(&()).into_owned(),
            namespaced: std::any::TypeId::of::<K::Scope>()
                != std::any::TypeId::of::<kube::core::ClusterResourceScope>(),
        }
    }

    /// The name of the owner index on an owned type's informer: one per owner kind, so that
    /// controllers of different kinds that own one type (and share its informer) do not clash,
    /// and controllers of one kind share it.
    fn index_name(&self) -> String {
        if self.group.is_empty() {
            format!("controller-owner:{}", self.kind)
        } else {
            format!("controller-owner:{}.{}", self.kind, self.group)
        }
    }

    /// The key of `obj`'s controller owner, if it is of this kind (controller-runtime's
    /// `EnqueueRequestForOwner` with `OnlyControllerOwner`: `metav1.GetControllerOf`, then the
    /// group and kind compared, not the version). An owner of a namespaced kind lives in the
    /// object's namespace: owner references do not cross namespaces.
    fn owner_key<K, S: Resource>(&self, obj: &S) -> Option<ObjectKey<K>> {
        let meta = obj.meta();
        let owner = meta.owner_references.as_deref()?.iter().find(|r| r.controller == Some(true))?;
        let group = owner.api_version.rsplit_once('/').map_or("", |(g, _)| g);
        if owner.kind != self.kind || group != self.group {
            return None;
        }
        let namespace = if self.namespaced { meta.namespace.as_deref() } else { None };
        Some(ObjectKey::new(namespace, &owner.name))
    }
}

/// How a source's events become keys.
pub(crate) enum Mapping<K, S> {
    /// The primary type: the object's own key.
    Itself,
    /// An owned type: its controller owner's key.
    Owner(OwnerKind),
    /// Any type: the mapper's keys.
    Mapper(MapFn<K, S>),
}

impl<K, S: Resource> Mapping<K, S> {
    fn keys(&self, obj: &S, out: &mut Vec<ObjectKey<K>>) {
        match self {
            Self::Itself => out.push(ObjectKey::<S>::from_object(obj).cast()),
            Self::Owner(kind) => out.extend(kind.owner_key(obj)),
            Self::Mapper(f) => out.extend(f(obj)),
        }
    }
}

/// What a controller's run needs to register its sources.
pub(crate) struct Setup<K> {
    pub(crate) controller: Arc<str>,
    pub(crate) queue: PriorityQueue<ObjectKey<K>>,
    pub(crate) shard: Option<KeyFilter<K>>,
    /// The assignment's checks (feature `sharding`).
    #[cfg(feature = "sharding")]
    pub(crate) assignment: Option<ShardFilter<K>>,
    pub(crate) metrics: MetricsWiring,
}

/// A shard assignment's checks (feature `sharding`, built by `crate::sharding`), type-erased for
/// the handlers: by object (the primary type's events) and by key (the other types').
#[cfg(feature = "sharding")]
pub(crate) struct ShardFilter<K> {
    pub(crate) object: ObjectFilter,
    pub(crate) key: KeyFilter<K>,
}

#[cfg(feature = "sharding")]
impl<K> Clone for ShardFilter<K> {
    fn clone(&self) -> Self {
        Self { object: Arc::clone(&self.object), key: Arc::clone(&self.key) }
    }
}

/// One watched type, before registration.
pub(crate) trait Source<K>: Send + Sync {
    /// Gets the informer from `factory`, adds the owner index, registers the enqueueing handler.
    fn register(
        &self,
        factory: &SharedInformerFactory,
        setup: &Setup<K>,
    ) -> Result<Box<dyn Registered>, ControllerError>;
}

/// One watched type, registered.
pub(crate) trait Registered: Send + Sync {
    fn synced(&self) -> &dyn HasSynced;
    fn health(&self) -> InformerHealth;
    /// Completes when the informer fails.
    fn failure(&self) -> Pin<Box<dyn Future<Output = InformerFailure> + Send>>;
    /// Removes the handler (the informer goes on, for its other users).
    fn remove(&self);
    fn add_to(&self, caches: &mut Caches);
}

/// A source of type `S` for a controller of `K`.
pub(crate) struct SourceSpec<K, S> {
    pub(crate) role: &'static str,
    pub(crate) watch: Watch,
    pub(crate) mapping: Mapping<K, S>,
}

impl<K, S> Source<K> for SourceSpec<K, S>
where
    K: Send + Sync + 'static,
    S: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Send + Sync + 'static,
    S::Scope: 'static,
{
    fn register(
        &self,
        factory: &SharedInformerFactory,
        setup: &Setup<K>,
    ) -> Result<Box<dyn Registered>, ControllerError> {
        let informer = factory.informer::<S>(&self.watch.scope);
        setup.metrics.wire(&informer);
        let informer_error =
            |source| ControllerError::Informer { informer: informer.name().to_owned(), source };
        let owner_index = match &self.mapping {
            Mapping::Owner(kind) => {
                let name = kind.index_name();
                let func_kind = kind.clone();
                let func = index_func(move |obj: &S| {
                    Ok(func_kind.owner_key::<(), S>(obj).map(|k| k.as_str().to_owned()).into_iter().collect())
                });
                match informer.add_indexers(Indexers::from([(name.clone(), func)])) {
                    // Another controller of the same owner kind added it: the same function.
                    Ok(()) | Err(kcache_informer::InformerError::Index(IndexError::Conflict { .. })) => {}
                    Err(e) => return Err(informer_error(e)),
                }
                Some(name)
            }
            Mapping::Itself | Mapping::Mapper(_) => None,
        };
        let handler = Enqueue {
            queue: setup.queue.clone(),
            watch: self.watch.clone(),
            mapping: match &self.mapping {
                Mapping::Itself => Mapping::Itself,
                Mapping::Owner(k) => Mapping::Owner(k.clone()),
                Mapping::Mapper(f) => Mapping::Mapper(Arc::clone(f)),
            },
            shard: setup.shard.clone(),
            #[cfg(feature = "sharding")]
            assignment: setup.assignment.clone(),
        };
        let options = HandlerOptions {
            name: Some(format!("{}/{}/{}", setup.controller, self.role, informer.name())),
            // The filter would drop them anyway: spare the listener the notifications.
            skip_unchanged_updates: self.watch.resource_version_changed,
            ..HandlerOptions::default()
        };
        let registration =
            informer.add_event_handler_with_options(handler, options).map_err(informer_error)?;
        Ok(Box::new(RegisteredSource { informer, registration, owner_index }))
    }
}

struct RegisteredSource<S> {
    informer: SharedIndexInformer<S>,
    registration: HandlerRegistration<S>,
    owner_index: Option<String>,
}

impl<S> Registered for RegisteredSource<S>
where
    S: Resource + DeserializeOwned + Send + Sync + 'static,
{
    fn synced(&self) -> &dyn HasSynced {
        &self.registration
    }

    fn health(&self) -> InformerHealth {
        self.informer.health()
    }

    fn failure(&self) -> Pin<Box<dyn Future<Output = InformerFailure> + Send>> {
        let informer = self.informer.clone();
        Box::pin(async move { informer.wait_for_failure().await })
    }

    fn remove(&self) {
        self.informer.remove_event_handler(&self.registration);
    }

    fn add_to(&self, caches: &mut Caches) {
        caches.insert(self.informer.lister(), self.owner_index.clone());
    }
}

/// The handler: filters events (the watch's filters), maps them to keys, drops keys of other
/// shards, enqueues the rest with controller-runtime's priorities.
struct Enqueue<K, S> {
    queue: PriorityQueue<ObjectKey<K>>,
    watch: Watch,
    mapping: Mapping<K, S>,
    shard: Option<KeyFilter<K>>,
    #[cfg(feature = "sharding")]
    assignment: Option<ShardFilter<K>>,
}

impl<K, S> fmt::Debug for Enqueue<K, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Enqueue")
            .field("queue", &self.queue)
            .field("watch", &self.watch)
            .finish_non_exhaustive()
    }
}

impl<K: Send + Sync + 'static, S: Resource> Enqueue<K, S> {
    fn enqueue(&self, opts: AddOpts, objects: &[&S]) {
        let mut keys = Vec::with_capacity(objects.len());
        for obj in objects {
            // The primary type: owned by the object's own uid or namespace.
            #[cfg(feature = "sharding")]
            if let (Some(assignment), Mapping::Itself) = (&self.assignment, &self.mapping)
                && !(assignment.object)(obj.meta())
            {
                continue;
            }
            self.mapping.keys(obj, &mut keys);
        }
        if keys.len() > 1 {
            keys.sort();
            keys.dedup();
        }
        if let Some(shard) = &self.shard {
            keys.retain(|k| shard(k));
        }
        // Other types: owned if the primary they map to is cached here and owned.
        #[cfg(feature = "sharding")]
        if let (Some(assignment), Mapping::Owner(_) | Mapping::Mapper(_)) = (&self.assignment, &self.mapping)
        {
            keys.retain(|k| (assignment.key)(k));
        }
        if !keys.is_empty() {
            self.queue.add_with_opts(opts, keys);
        }
    }
}

impl<K, S> ResourceEventHandler<S> for Enqueue<K, S>
where
    K: Send + Sync + 'static,
    S: Resource + Send + Sync + 'static,
{
    fn on_add(&self, obj: &Arc<S>, is_in_initial_list: bool) {
        if self.watch.selects(&**obj) {
            self.enqueue(AddOpts::for_event(HandlerEvent::Create { is_in_initial_list }), &[obj]);
        }
    }

    fn on_update(&self, old: &Arc<S>, new: &Arc<S>) {
        match (self.watch.selects(&**old), self.watch.selects(&**new)) {
            (true, true) => {
                if self.watch.update_counts(&**old, &**new) {
                    let event = HandlerEvent::Update {
                        old_resource_version: old.meta().resource_version.as_deref(),
                        new_resource_version: new.meta().resource_version.as_deref(),
                    };
                    // Both sides, as controller-runtime's handlers map both: an owner or a
                    // mapped key may have changed.
                    self.enqueue(AddOpts::for_event(event), &[old, new]);
                }
            }
            // Left the filter: a delete for the controller.
            (true, false) => self.enqueue(AddOpts::for_event(HandlerEvent::Delete), &[old]),
            // Entered it: an add.
            (false, true) => {
                self.enqueue(AddOpts::for_event(HandlerEvent::Create { is_in_initial_list: false }), &[new]);
            }
            (false, false) => {}
        }
    }

    fn on_delete(&self, obj: &ObjectOrTombstone<S>) {
        if self.watch.selects(&**obj.object()) {
            self.enqueue(AddOpts::for_event(HandlerEvent::Delete), &[obj.object()]);
        }
    }
}
