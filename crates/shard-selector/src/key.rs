//! The field a shard selector hashes: `object.metadata.uid` or `object.metadata.namespace`
//! (apimachinery's `ResolveFieldValue`, `pkg/sharding/accessor.go`).

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The object field whose hash places an object in a shard.
///
/// Displays as the CEL path the selector grammar uses (`object.metadata.uid`), which is not the
/// fieldSelector form (`metadata.uid`): the `object.` prefix anchors the path to the object.
///
/// # Examples
///
/// ```
/// use kcache_shard_selector::ShardKey;
///
/// assert_eq!(ShardKey::Uid.to_string(), "object.metadata.uid");
/// assert_eq!(ShardKey::from_path("object.metadata.namespace"), Some(ShardKey::Namespace));
/// assert_eq!(ShardKey::from_path("object.metadata.name"), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ShardKey {
    /// `object.metadata.uid`: spreads every object independently.
    Uid,
    /// `object.metadata.namespace`: keeps a namespace's objects on one shard.
    Namespace,
}

impl ShardKey {
    /// The CEL path of this key, e.g. `object.metadata.uid`.
    pub const fn path(self) -> &'static str {
        match self {
            ShardKey::Uid => "object.metadata.uid",
            ShardKey::Namespace => "object.metadata.namespace",
        }
    }

    /// The key for a CEL path, or `None` for a path the server does not support.
    pub fn from_path(path: &str) -> Option<ShardKey> {
        match path {
            "object.metadata.uid" => Some(ShardKey::Uid),
            "object.metadata.namespace" => Some(ShardKey::Namespace),
            _ => None,
        }
    }

    /// The value this key hashes in `meta`; an unset field is `""`, as Go's
    /// `accessor.GetUID()` / `GetNamespace()` return the zero string.
    ///
    /// # Examples
    ///
    /// ```
    /// use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    /// use kcache_shard_selector::ShardKey;
    ///
    /// let meta = ObjectMeta { uid: Some("u-1".into()), ..Default::default() };
    /// assert_eq!(ShardKey::Uid.value(&meta), "u-1");
    /// assert_eq!(ShardKey::Namespace.value(&meta), "");
    /// ```
    pub fn value(self, meta: &ObjectMeta) -> &str {
        match self {
            ShardKey::Uid => meta.uid.as_deref().unwrap_or(""),
            ShardKey::Namespace => meta.namespace.as_deref().unwrap_or(""),
        }
    }
}

impl fmt::Display for ShardKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.path())
    }
}
