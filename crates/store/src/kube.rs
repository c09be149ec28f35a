//! Key and namespace-index functions for any `kube::Resource` (feature `kube`).

use std::sync::Arc;

use kube_core::Resource;

use crate::error::KeyError;
use crate::index::{IndexFunc, Indexers, NAMESPACE_INDEX};
use crate::key::{KeyFunc, meta_namespace_key};
use crate::store::Store;

/// The key of a Kubernetes object: `namespace/name`, or `name` when cluster-scoped (client-go's
/// `MetaNamespaceKeyFunc`).
///
/// # Errors
///
/// [`KeyError::MissingName`] when `metadata.name` is unset or empty (the API cannot tell the two
/// apart: Go's `omitempty` drops an empty name). This differs from client-go, which keys such an
/// object `"namespace/"` (or `""`): only bad input lacks a name, and keyed that way every nameless
/// object of a namespace would share one cache entry.
///
/// # Examples
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
/// let cm = ConfigMap {
///     metadata: ObjectMeta { name: Some("cfg".into()), namespace: Some("prod".into()), ..Default::default() },
///     ..Default::default()
/// };
/// assert_eq!(kcache_store::resource_key(&cm).unwrap(), "prod/cfg");
/// ```
pub fn resource_key<K: Resource>(obj: &K) -> Result<String, KeyError> {
    let meta = obj.meta();
    let name = meta.name.as_deref().filter(|n| !n.is_empty()).ok_or(KeyError::MissingName)?;
    Ok(meta_namespace_key(meta.namespace.as_deref().unwrap_or(""), name))
}

/// [`resource_key`] as a [`KeyFunc`].
///
/// Every call for the same `K` returns the same `Arc`, so a reflector and a store (or a FIFO)
/// built with it separately share one key function, and a watch-list's keys, computed by the
/// reflector, are used as they are by the store (`ReflectorStore::replace_keyed` compares key
/// functions by `Arc::ptr_eq`).
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache_store::meta_namespace_key_func;
/// assert!(Arc::ptr_eq(&meta_namespace_key_func::<ConfigMap>(), &meta_namespace_key_func::<ConfigMap>()));
/// ```
pub fn meta_namespace_key_func<K: Resource + 'static>() -> KeyFunc<K> {
    crate::per_type::get_or_make::<KeyFunc<K>>(|| Arc::new(resource_key::<K>))
}

/// The namespace index function: one value, the namespace, `""` for cluster-scoped objects
/// (client-go's `MetaNamespaceIndexFunc`).
///
/// Every call for the same `K` returns the same `Arc`, which a [`Store`] recognises: building an
/// index with it from many objects at once (a relist) reads each namespace in place instead of
/// calling it.
pub fn meta_namespace_index_func<K: Resource + 'static>() -> IndexFunc<K> {
    crate::index::shared_single_value_index::<K>(namespace_of::<K>, || {
        Arc::new(|obj: &K| Ok(vec![namespace_of(obj).to_owned()]))
    })
}

/// The namespace of `obj`, `""` for cluster-scoped objects.
fn namespace_of<K: Resource>(obj: &K) -> &str {
    obj.meta().namespace.as_deref().unwrap_or("")
}

/// The index name conventionally given to [`owner_uid_index_func`].
pub const OWNER_UID_INDEX: &str = "ownerUID";

/// The index name conventionally given to [`controller_uid_index_func`] (kube-controller-manager's
/// ReplicaSet and Job controllers name theirs `controllerUID` too).
pub const CONTROLLER_UID_INDEX: &str = "controllerUID";

/// An index by the value of one label: an object with label `key` is filed under its value,
/// one without it under nothing. The index controllers most often add, for example to find every
/// Pod of an `app` without scanning the cache; it reads only `metadata`, so it works as well on
/// a metadata-only cache (kube's `PartialObjectMeta`).
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::Pod;
/// use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
/// use kcache_store::{Indexers, Store, label_index_func, meta_namespace_key_func};
///
/// let store = Store::with_indexers(
///     meta_namespace_key_func::<Pod>(),
///     Indexers::from([("app".to_owned(), label_index_func::<Pod>("app"))]),
/// );
/// let pod = |name: &str, app: &str| {
///     let labels = [("app".to_owned(), app.to_owned())].into();
///     Arc::new(Pod { metadata: ObjectMeta { name: Some(name.into()), labels: Some(labels), ..Default::default() }, ..Default::default() })
/// };
/// store.add(pod("web-1", "web")).unwrap();
/// store.add(pod("web-2", "web")).unwrap();
/// store.add(pod("db-1", "db")).unwrap();
/// assert_eq!(store.by_index("app", "web").unwrap().len(), 2);
/// ```
pub fn label_index_func<K: Resource + 'static>(key: impl Into<String>) -> IndexFunc<K> {
    let key = key.into();
    Arc::new(move |obj: &K| {
        Ok(obj.meta().labels.as_ref().and_then(|l| l.get(&key)).cloned().into_iter().collect())
    })
}

/// An index by owner: an object is filed under the uid of each of its
/// `metadata.ownerReferences` (the relation the garbage collector follows), so the dependents of
/// an owner are one lookup away: `by_index(OWNER_UID_INDEX, uid)`. Reads only `metadata`.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
/// use kcache_store::{Indexers, OWNER_UID_INDEX, Store, meta_namespace_key_func, owner_uid_index_func};
///
/// let store = Store::with_indexers(
///     meta_namespace_key_func::<ConfigMap>(),
///     Indexers::from([(OWNER_UID_INDEX.to_owned(), owner_uid_index_func::<ConfigMap>())]),
/// );
/// let owner = OwnerReference { uid: "u-1".into(), name: "app".into(), kind: "Deployment".into(), api_version: "apps/v1".into(), ..Default::default() };
/// let meta = ObjectMeta { name: Some("cfg".into()), owner_references: Some(vec![owner]), ..Default::default() };
/// store.add(Arc::new(ConfigMap { metadata: meta, ..Default::default() })).unwrap();
/// assert_eq!(store.by_index(OWNER_UID_INDEX, "u-1").unwrap().len(), 1);
/// ```
pub fn owner_uid_index_func<K: Resource + 'static>() -> IndexFunc<K> {
    Arc::new(|obj: &K| {
        let owners = obj.meta().owner_references.as_deref().unwrap_or_default();
        let mut uids: Vec<String> = owners.iter().map(|o| o.uid.clone()).collect();
        // An object never lists an owner twice (the API server dedups owner references), but
        // an index value must be unique per object.
        uids.sort_unstable();
        uids.dedup();
        Ok(uids)
    })
}

/// An index by controller: an object is filed under the uid of its controller owner (the one
/// owner reference with `controller: true`, apimachinery's `GetControllerOf`), one without a
/// controller under nothing. kube-controller-manager's ReplicaSet and Job controllers keep this
/// index on their Pod informers to find the Pods a controller owns. Reads only `metadata`.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::Pod;
/// use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
/// use kcache_store::{CONTROLLER_UID_INDEX, Indexers, Store, controller_uid_index_func, meta_namespace_key_func};
///
/// let store = Store::with_indexers(
///     meta_namespace_key_func::<Pod>(),
///     Indexers::from([(CONTROLLER_UID_INDEX.to_owned(), controller_uid_index_func::<Pod>())]),
/// );
/// let rs = OwnerReference { uid: "rs-1".into(), controller: Some(true), ..Default::default() };
/// let meta = ObjectMeta { name: Some("web-1".into()), owner_references: Some(vec![rs]), ..Default::default() };
/// store.add(Arc::new(Pod { metadata: meta, ..Default::default() })).unwrap();
/// assert_eq!(store.by_index(CONTROLLER_UID_INDEX, "rs-1").unwrap().len(), 1);
/// ```
pub fn controller_uid_index_func<K: Resource + 'static>() -> IndexFunc<K> {
    Arc::new(|obj: &K| {
        let owners = obj.meta().owner_references.as_deref().unwrap_or_default();
        Ok(owners.iter().find(|o| o.controller == Some(true)).map(|o| o.uid.clone()).into_iter().collect())
    })
}

/// The indexers client-go's informers start with: [`NAMESPACE_INDEX`] only.
pub fn namespace_indexers<K: Resource + 'static>() -> Indexers<K> {
    [(NAMESPACE_INDEX.to_owned(), meta_namespace_index_func::<K>())].into()
}

impl<K: Resource + Send + Sync + 'static> Store<K> {
    /// A store for Kubernetes objects keyed by [`resource_key`] with the namespace index, the
    /// same as client-go's `NewIndexer(MetaNamespaceKeyFunc, Indexers{NamespaceIndex: ...})`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    /// use kcache_store::{Store, NAMESPACE_INDEX};
    ///
    /// let store = Store::<ConfigMap>::for_resource();
    /// let meta = ObjectMeta { name: Some("cfg".into()), namespace: Some("prod".into()), ..Default::default() };
    /// store.add(Arc::new(ConfigMap { metadata: meta, ..Default::default() })).unwrap();
    /// assert_eq!(store.by_index(NAMESPACE_INDEX, "prod").unwrap().len(), 1);
    /// ```
    pub fn for_resource() -> Self {
        Self::with_indexers(meta_namespace_key_func::<K>(), namespace_indexers::<K>())
    }
}
