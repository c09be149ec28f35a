//! `ObjectKey<K>`: the typed (namespace, name) key of the controller's workqueue.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;
use std::sync::Arc;

use kube::Resource;
use kube_runtime::reflector::ObjectRef;

/// The key of an object of kind `K`: its namespace (none for a cluster-scoped object) and name.
/// The items of a controller's workqueue, and what a [`watches`](crate::Controller::watches)
/// mapper returns. controller-runtime's `reconcile.Request` (`types.NamespacedName`), typed by
/// kind as kube-runtime's `ObjectRef<K>` is.
///
/// It keeps the informer cache's key (`namespace/name`, or `name`; client-go's
/// `MetaNamespaceKeyFunc`) in one shared string, so cloning it is a reference count and a cache
/// lookup ([`as_str`](Self::as_str)) allocates nothing. Equality, hashing and order are those of
/// that string.
///
/// # Examples
///
/// ```
/// use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
/// use kcache_controller::ObjectKey;
///
/// let key = ObjectKey::<ConfigMap>::new(Some("default"), "web");
/// assert_eq!((key.namespace(), key.name()), (Some("default"), "web"));
/// assert_eq!(key.as_str(), "default/web");
/// assert_eq!(key.to_string(), "default/web");
///
/// // A Secret of the same name, as a mapper would return it.
/// let secret: ObjectKey<Secret> = key.cast();
/// assert_eq!(secret.as_str(), "default/web");
///
/// let ns = ObjectKey::<Namespace>::new(None, "kube-system");
/// assert_eq!((ns.namespace(), ns.as_str()), (None, "kube-system"));
/// ```
pub struct ObjectKey<K> {
    /// `namespace/name`, or `name` when there is no namespace.
    key: Arc<str>,
    /// Length of the namespace at the start of `key`; 0 when there is none (the name then starts
    /// at 0, otherwise one past the `/`).
    namespace_len: usize,
    /// `fn() -> K`: the key neither owns nor shares a `K`, so it is `Send + Sync` whatever `K` is.
    _kind: PhantomData<fn() -> K>,
}

impl<K> ObjectKey<K> {
    /// The key of `name` in `namespace`; `None` (or `Some("")`) for a cluster-scoped object.
    pub fn new(namespace: Option<&str>, name: &str) -> Self {
        match namespace.filter(|ns| !ns.is_empty()) {
            Some(ns) => {
                Self { key: Arc::from(format!("{ns}/{name}")), namespace_len: ns.len(), _kind: PhantomData }
            }
            None => Self { key: Arc::from(name), namespace_len: 0, _kind: PhantomData },
        }
    }

    /// The key parsed from an informer cache key (`namespace/name` or `name`, as
    /// `kcache_store::meta_namespace_key` makes them and tombstones carry them).
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache_controller::ObjectKey;
    ///
    /// let key = ObjectKey::<ConfigMap>::from_cache_key("default/web");
    /// assert_eq!((key.namespace(), key.name()), (Some("default"), "web"));
    /// ```
    pub fn from_cache_key(key: &str) -> Self {
        match key.split_once('/') {
            Some((ns, name)) => Self::new(Some(ns), name),
            None => Self::new(None, key),
        }
    }

    /// The namespace, if the object has one.
    pub fn namespace(&self) -> Option<&str> {
        (self.namespace_len > 0).then(|| &self.key[..self.namespace_len])
    }

    /// The name.
    pub fn name(&self) -> &str {
        if self.namespace_len == 0 { &self.key } else { &self.key[self.namespace_len + 1..] }
    }

    /// The informer cache's key: `namespace/name`, or `name` without a namespace
    /// (`Lister::get` takes it).
    pub fn as_str(&self) -> &str {
        &self.key
    }

    /// The same namespace and name as the key of another kind (the Secret named after a
    /// ConfigMap, say).
    pub fn cast<O>(&self) -> ObjectKey<O> {
        ObjectKey { key: Arc::clone(&self.key), namespace_len: self.namespace_len, _kind: PhantomData }
    }

    /// The shared string, for crate-internal cheap copies (the context's current key).
    pub(crate) fn shared_str(&self) -> &Arc<str> {
        &self.key
    }
}

impl<K: Resource> ObjectKey<K> {
    /// The key of `obj` (an object without a name has the empty name).
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache_controller::ObjectKey;
    /// use kube::api::ObjectMeta;
    ///
    /// let cm = ConfigMap {
    ///     metadata: ObjectMeta { name: Some("web".into()), namespace: Some("prod".into()), ..Default::default() },
    ///     ..Default::default()
    /// };
    /// assert_eq!(ObjectKey::from_object(&cm).as_str(), "prod/web");
    /// ```
    pub fn from_object(obj: &K) -> Self {
        let meta = obj.meta();
        Self::new(meta.namespace.as_deref(), meta.name.as_deref().unwrap_or_default())
    }
}

impl<K: Resource> From<&K> for ObjectKey<K> {
    fn from(obj: &K) -> Self {
        Self::from_object(obj)
    }
}

/// kube-runtime's reference to the same object (for kube-runtime APIs that take one).
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache_controller::ObjectKey;
/// use kube_runtime::reflector::ObjectRef;
///
/// let key = ObjectKey::<ConfigMap>::new(Some("default"), "web");
/// let r: ObjectRef<ConfigMap> = key.clone().into();
/// assert_eq!(r, ObjectRef::new("web").within("default"));
/// assert_eq!(ObjectKey::from(&r), key);
/// ```
impl<K> From<ObjectKey<K>> for ObjectRef<K>
where
    K: Resource,
    K::DynamicType: Default,
{
    fn from(key: ObjectKey<K>) -> Self {
        let r = ObjectRef::new(key.name());
        match key.namespace() {
            Some(ns) => r.within(ns),
            None => r,
        }
    }
}

impl<K: Resource> From<&ObjectRef<K>> for ObjectKey<K> {
    fn from(r: &ObjectRef<K>) -> Self {
        Self::new(r.namespace.as_deref(), &r.name)
    }
}

impl<K> Clone for ObjectKey<K> {
    fn clone(&self) -> Self {
        Self { key: Arc::clone(&self.key), namespace_len: self.namespace_len, _kind: PhantomData }
    }
}

impl<K> PartialEq for ObjectKey<K> {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl<K> Eq for ObjectKey<K> {}

impl<K> Hash for ObjectKey<K> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key.hash(state);
    }
}

impl<K> PartialOrd for ObjectKey<K> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<K> Ord for ObjectKey<K> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key.cmp(&other.key)
    }
}

impl<K> fmt::Display for ObjectKey<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.key)
    }
}

impl<K> fmt::Debug for ObjectKey<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = std::any::type_name::<K>().rsplit("::").next().unwrap_or("?");
        write!(f, "ObjectKey<{kind}>({:?})", &*self.key)
    }
}
