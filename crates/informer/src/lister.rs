//! Listers: typed, read-only views of an informer's cache (client-go's generated listers).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use kcache_store::{IndexError, NAMESPACE_INDEX, Store, meta_namespace_key};
use kube::Resource;
use kube::core::{Selector, SelectorExt};

use crate::failure::InformerFailure;
use crate::failure_state::FailureState;

/// The labels of an object that has none.
const NO_LABELS: &BTreeMap<String, String> = &BTreeMap::new();

/// The objects of `objs` whose labels `selector` matches; all of them for an empty selector.
fn select<K: Resource>(objs: Vec<Arc<K>>, selector: &Selector) -> Vec<Arc<K>> {
    if selector.selects_all() {
        return objs;
    }
    objs.into_iter().filter(|o| selector.matches(o.meta().labels.as_ref().unwrap_or(NO_LABELS))).collect()
}

/// Reads an informer's cache. Returns `Arc`s: nothing is copied, and callers must not expect to
/// mutate what they read (clone the object first).
///
/// A lister from [`SharedIndexInformer::lister`](crate::SharedIndexInformer::lister) keeps
/// answering if its informer fails, from the state the cache last reached, as client-go's
/// listers keep reading an indexer nobody updates; [`failure`](Self::failure) tells such a
/// cache from a live one. Where serving a frozen cache would be wrong, check it, or gate on
/// the informer's `has_synced` (false once it failed).
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache_informer::Lister;
/// use kcache_store::{Store, meta_namespace_key_func, namespace_indexers};
///
/// let store = Store::with_indexers(meta_namespace_key_func::<ConfigMap>(), namespace_indexers::<ConfigMap>());
/// let mut cm = ConfigMap::default();
/// cm.metadata.name = Some("web".into());
/// cm.metadata.namespace = Some("prod".into());
/// store.add(Arc::new(cm)).unwrap();
///
/// let lister = Lister::new(store);
/// assert!(lister.namespaced("prod").get("web").is_some());
/// assert_eq!(lister.namespaced("dev").list().len(), 0);
/// ```
pub struct Lister<K> {
    indexer: Store<K>,
    /// The informer's failure state; `None` for a lister over a plain store.
    failure: Option<Arc<FailureState>>,
}

impl<K> Clone for Lister<K> {
    fn clone(&self) -> Self {
        Self { indexer: self.indexer.clone(), failure: self.failure.clone() }
    }
}

impl<K> fmt::Debug for Lister<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lister").finish_non_exhaustive()
    }
}

impl<K: Resource + Send + Sync + 'static> Lister<K> {
    /// A lister over `indexer` (a plain store: [`failure`](Self::failure) is always `None`).
    pub fn new(indexer: Store<K>) -> Self {
        Self { indexer, failure: None }
    }

    pub(crate) fn of_informer(indexer: Store<K>, failure: Arc<FailureState>) -> Self {
        Self { indexer, failure: Some(failure) }
    }

    /// The failure that stopped this lister's informer, if one did: the cache then holds the
    /// last state it reached and no longer follows the API server.
    pub fn failure(&self) -> Option<InformerFailure> {
        self.failure.as_ref().and_then(|f| f.get().cloned())
    }

    /// Every object in the cache.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.indexer.list()
    }

    /// Every object whose labels `selector` matches (client-go's `ListAll` and a lister's
    /// `List(selector)`); an empty selector selects every object. An object without labels
    /// matches only selectors that require no label to exist (`!key`, `key notin (...)`, `key!=v`).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache_informer::Lister;
    /// use kcache_store::{Store, meta_namespace_key_func, namespace_indexers};
    /// use kube::core::{Expression, Selector};
    ///
    /// let store = Store::with_indexers(meta_namespace_key_func::<ConfigMap>(), namespace_indexers::<ConfigMap>());
    /// for (name, app) in [("web", Some("shop")), ("db", Some("billing")), ("bare", None)] {
    ///     let mut cm = ConfigMap::default();
    ///     cm.metadata.name = Some(name.into());
    ///     cm.metadata.namespace = Some("prod".into());
    ///     cm.metadata.labels = app.map(|a| [("app".to_string(), a.to_string())].into());
    ///     store.add(Arc::new(cm)).unwrap();
    /// }
    /// let lister = Lister::new(store);
    /// let shop: Selector = Expression::Equal("app".into(), "shop".into()).into();
    /// assert_eq!(lister.list_selected(&shop).len(), 1);
    /// assert_eq!(lister.list_selected(&Selector::default()).len(), 3);
    /// ```
    pub fn list_selected(&self, selector: &Selector) -> Vec<Arc<K>> {
        select(self.indexer.list(), selector)
    }

    /// Every object the predicate accepts: for what a label selector cannot say (an annotation, a
    /// field, an owner).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache_informer::Lister;
    /// use kcache_store::Store;
    ///
    /// let store = Store::<ConfigMap>::for_resource();
    /// for (name, paused) in [("a", true), ("b", false)] {
    ///     let mut cm = ConfigMap::default();
    ///     cm.metadata.name = Some(name.into());
    ///     if paused {
    ///         cm.metadata.annotations = Some([("example.com/paused".to_string(), "true".to_string())].into());
    ///     }
    ///     store.add(Arc::new(cm)).unwrap();
    /// }
    /// let paused = Lister::new(store)
    ///     .list_filtered(|cm| cm.metadata.annotations.as_ref().is_some_and(|a| a.contains_key("example.com/paused")));
    /// assert_eq!(paused.len(), 1);
    /// assert_eq!(paused[0].metadata.name.as_deref(), Some("a"));
    /// ```
    pub fn list_filtered(&self, pred: impl Fn(&K) -> bool) -> Vec<Arc<K>> {
        self.indexer.list().into_iter().filter(|o| pred(o)).collect()
    }

    /// The object under `key` ("namespace/name", or "name" for cluster-scoped objects).
    pub fn get(&self, key: &str) -> Option<Arc<K>> {
        self.indexer.get_by_key(key)
    }

    /// Objects whose index `index_name` has the value `value` (e.g. pods by node).
    ///
    /// # Errors
    ///
    /// [`IndexError::NoSuchIndex`] when no such index exists.
    pub fn by_index(&self, index_name: &str, value: &str) -> Result<Vec<Arc<K>>, IndexError> {
        self.indexer.by_index(index_name, value)
    }

    /// A view of one namespace. `""` means every namespace for `list`, as client-go's
    /// `ListAllByNamespace` reads `metav1.NamespaceAll`; for `get` it looks up a cluster-scoped
    /// name, where client-go's namespace listers look up the key `"/name"` and find nothing.
    pub fn namespaced(&self, namespace: &str) -> NamespaceLister<K> {
        NamespaceLister {
            indexer: self.indexer.clone(),
            namespace: namespace.to_owned(),
            failure: self.failure.clone(),
        }
    }
}

/// One namespace of a [`Lister`].
pub struct NamespaceLister<K> {
    indexer: Store<K>,
    namespace: String,
    failure: Option<Arc<FailureState>>,
}

impl<K> fmt::Debug for NamespaceLister<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NamespaceLister").field("namespace", &self.namespace).finish()
    }
}

impl<K: Resource + Send + Sync + 'static> NamespaceLister<K> {
    /// Every object in the namespace (through the namespace index when there is one); for the
    /// namespace `""`, every object, as client-go's `ListAllByNamespace` treats it as all
    /// namespaces.
    pub fn list(&self) -> Vec<Arc<K>> {
        if self.namespace.is_empty() {
            return self.indexer.list();
        }
        match self.indexer.by_index(NAMESPACE_INDEX, &self.namespace) {
            Ok(v) => v,
            Err(_) => self
                .indexer
                .list()
                .into_iter()
                .filter(|o| o.meta().namespace.as_deref() == Some(self.namespace.as_str()))
                .collect(),
        }
    }

    /// The objects of the namespace whose labels `selector` matches (client-go's
    /// `ListAllByNamespace`, a namespace lister's `List(selector)`); see
    /// [`Lister::list_selected`].
    pub fn list_selected(&self, selector: &Selector) -> Vec<Arc<K>> {
        select(self.list(), selector)
    }

    /// The object called `name` in the namespace.
    pub fn get(&self, name: &str) -> Option<Arc<K>> {
        self.indexer.get_by_key(&meta_namespace_key(&self.namespace, name))
    }

    /// As [`Lister::failure`].
    pub fn failure(&self) -> Option<InformerFailure> {
        self.failure.as_ref().and_then(|f| f.get().cloned())
    }
}
