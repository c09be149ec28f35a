//! Object keys: client-go's `MetaNamespaceKeyFunc`, `SplitMetaNamespaceKey`, the deletion tombstone
//! `DeletedFinalStateUnknown` and `DeletionHandlingMetaNamespaceKeyFunc`.

use std::fmt;
use std::sync::Arc;

use crate::error::KeyError;

/// Computes the key an object is stored under (client-go's `KeyFunc`).
///
/// Must be deterministic: the same object always yields the same key.
pub type KeyFunc<K> = Arc<dyn Fn(&K) -> Result<String, KeyError> + Send + Sync>;

/// Wraps a closure as a [`KeyFunc`].
///
/// # Examples
///
/// ```
/// use kcache_store::key_func;
/// let f = key_func(|s: &String| Ok(s.clone()));
/// assert_eq!(f(&"a".to_string()).unwrap(), "a");
/// ```
pub fn key_func<K, F>(f: F) -> KeyFunc<K>
where
    F: Fn(&K) -> Result<String, KeyError> + Send + Sync + 'static,
{
    Arc::new(f)
}

/// The key of a namespaced object, `namespace/name`, or `name` when the namespace is empty
/// (client-go's `MetaNamespaceKeyFunc` on the two fields).
///
/// # Examples
///
/// ```
/// use kcache_store::meta_namespace_key;
/// assert_eq!(meta_namespace_key("default", "web"), "default/web");
/// assert_eq!(meta_namespace_key("", "node-1"), "node-1");
/// ```
pub fn meta_namespace_key(namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        return name.to_owned();
    }
    let mut key = String::with_capacity(namespace.len() + 1 + name.len());
    key.push_str(namespace);
    key.push('/');
    key.push_str(name);
    key
}

/// Splits a key made by [`meta_namespace_key`] into `(namespace, name)`; the namespace is empty for
/// cluster-scoped keys (client-go's `SplitMetaNamespaceKey`).
///
/// # Errors
///
/// [`KeyError::InvalidKey`] when the key has more than one `/`.
///
/// # Examples
///
/// ```
/// use kcache_store::split_meta_namespace_key;
/// assert_eq!(split_meta_namespace_key("default/web").unwrap(), ("default", "web"));
/// assert_eq!(split_meta_namespace_key("node-1").unwrap(), ("", "node-1"));
/// assert!(split_meta_namespace_key("a/b/c").is_err());
/// ```
pub fn split_meta_namespace_key(key: &str) -> Result<(&str, &str), KeyError> {
    let mut parts = key.split('/');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(name), None, _) => Ok(("", name)),
        (Some(ns), Some(name), None) => Ok((ns, name)),
        _ => Err(KeyError::InvalidKey { key: key.to_owned() }),
    }
}

/// Placed in a FIFO when an object was deleted but the watch missed the deletion event (found by
/// a relist); `obj` is the last state known, which may be stale (client-go's
/// `DeletedFinalStateUnknown`).
pub struct DeletedFinalStateUnknown<K> {
    /// The key the object was stored under.
    pub key: String,
    /// The newest state of the object that was known before it disappeared.
    pub obj: Arc<K>,
}

impl<K> Clone for DeletedFinalStateUnknown<K> {
    fn clone(&self) -> Self {
        Self { key: self.key.clone(), obj: Arc::clone(&self.obj) }
    }
}

impl<K: fmt::Debug> fmt::Debug for DeletedFinalStateUnknown<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeletedFinalStateUnknown").field("key", &self.key).field("obj", &self.obj).finish()
    }
}

impl<K: PartialEq> PartialEq for DeletedFinalStateUnknown<K> {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key && self.obj == other.obj
    }
}

/// What a delete notification carries: the object, or a [`DeletedFinalStateUnknown`] tombstone when
/// the deletion was inferred from a relist.
pub enum ObjectOrTombstone<K> {
    /// The object itself.
    Object(Arc<K>),
    /// A tombstone carrying the key and the last known state.
    Tombstone(DeletedFinalStateUnknown<K>),
}

impl<K> ObjectOrTombstone<K> {
    /// The object, or the last known state inside the tombstone.
    pub fn object(&self) -> &Arc<K> {
        match self {
            Self::Object(o) => o,
            Self::Tombstone(t) => &t.obj,
        }
    }

    /// The tombstone, if this is one.
    pub fn tombstone(&self) -> Option<&DeletedFinalStateUnknown<K>> {
        match self {
            Self::Object(_) => None,
            Self::Tombstone(t) => Some(t),
        }
    }

    /// Whether this is a tombstone.
    pub fn is_tombstone(&self) -> bool {
        matches!(self, Self::Tombstone(_))
    }
}

impl<K> Clone for ObjectOrTombstone<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Object(o) => Self::Object(Arc::clone(o)),
            Self::Tombstone(t) => Self::Tombstone(t.clone()),
        }
    }
}

impl<K: fmt::Debug> fmt::Debug for ObjectOrTombstone<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Object(o) => f.debug_tuple("Object").field(o).finish(),
            Self::Tombstone(t) => f.debug_tuple("Tombstone").field(t).finish(),
        }
    }
}

impl<K: PartialEq> PartialEq for ObjectOrTombstone<K> {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Object(a), Self::Object(b)) => a == b,
            (Self::Tombstone(a), Self::Tombstone(b)) => a == b,
            _ => false,
        }
    }
}

/// The key of an object or a tombstone: a tombstone's stored key, else `key_func` on the object
/// (client-go's `DeletionHandlingMetaNamespaceKeyFunc`, for any key function).
///
/// # Errors
///
/// Whatever `key_func` returns for an object.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use kcache_store::{deletion_handling_key, key_func, DeletedFinalStateUnknown, ObjectOrTombstone};
/// let kf = key_func(|s: &String| Ok(s.clone()));
/// let tomb = ObjectOrTombstone::Tombstone(DeletedFinalStateUnknown {
///     key: "ns/gone".to_string(),
///     obj: Arc::new("stale".to_string()),
/// });
/// assert_eq!(deletion_handling_key(&kf, &tomb).unwrap(), "ns/gone");
/// let live = ObjectOrTombstone::Object(Arc::new("ns/here".to_string()));
/// assert_eq!(deletion_handling_key(&kf, &live).unwrap(), "ns/here");
/// ```
pub fn deletion_handling_key<K>(
    key_func: &KeyFunc<K>,
    obj: &ObjectOrTombstone<K>,
) -> Result<String, KeyError> {
    match obj {
        ObjectOrTombstone::Object(o) => key_func(o),
        ObjectOrTombstone::Tombstone(t) => Ok(t.key.clone()),
    }
}
