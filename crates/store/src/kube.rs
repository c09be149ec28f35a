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
pub fn meta_namespace_key_func<K: Resource + 'static>() -> KeyFunc<K> {
    Arc::new(resource_key::<K>)
}

/// The namespace index function: one value, the namespace, `""` for cluster-scoped objects
/// (client-go's `MetaNamespaceIndexFunc`).
pub fn meta_namespace_index_func<K: Resource + 'static>() -> IndexFunc<K> {
    Arc::new(|obj: &K| Ok(vec![obj.meta().namespace.clone().unwrap_or_default()]))
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
