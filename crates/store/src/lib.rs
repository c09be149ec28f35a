//! The indexed, thread-safe object cache informers serve reads from: the Rust counterpart of
//! client-go's `Store`, `ThreadSafeStore` and `Indexer` (`k8s.io/client-go/tools/cache`).
//!
//! # Concepts
//!
//! * [`Store`] is client-go's `Indexer`: a thread-safe map from key to object plus named indices.
//!   Objects are held as `Arc<K>`; `list`, `get` and `by_index` hand out clones of the `Arc`,
//!   never copies of the object. Readers share a read lock and never block each other.
//! * A [`KeyFunc`] gives every object its key. [`meta_namespace_key`] builds client-go's
//!   `namespace/name` keys, [`split_meta_namespace_key`] takes them apart, and with the default
//!   feature `kube` [`meta_namespace_key_func`] does it for any `kube::Resource`.
//! * [`IndexFunc`]s map an object to index values; [`NAMESPACE_INDEX`] is the built-in one.
//!   Index functions may fail: the error goes back to the caller and the store is unchanged
//!   (client-go panics instead).
//! * [`DeletedFinalStateUnknown`] is the tombstone a FIFO emits for a deletion it inferred from a
//!   relist; [`ObjectOrTombstone`] is what a delete notification carries.
//! * [`ReflectorStore`] is what a reflector writes into (this store, or a FIFO from
//!   `kcache-delta-fifo`); [`KnownObjects`] is what a FIFO reads to detect deletions.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use kcache_store::{Store, key_func, index_func, Indexers};
//!
//! #[derive(Debug, PartialEq)]
//! struct Pod { namespace: String, name: String, node: String }
//!
//! let kf = key_func(|p: &Pod| Ok(kcache_store::meta_namespace_key(&p.namespace, &p.name)));
//! let mut indexers = Indexers::new();
//! indexers.insert("node".to_string(), index_func(|p: &Pod| Ok(vec![p.node.clone()])));
//! let store = Store::with_indexers(kf, indexers);
//!
//! let pod = |name: &str, node: &str| Arc::new(Pod {
//!     namespace: "default".into(), name: name.into(), node: node.into(),
//! });
//! store.replace(vec![pod("a", "n1"), pod("b", "n2"), pod("c", "n1")], "100").unwrap();
//! assert_eq!(store.by_index("node", "n1").unwrap().len(), 2);
//! assert_eq!(store.last_sync_resource_version(), "100");
//!
//! store.update(pod("c", "n2")).unwrap();
//! assert_eq!(store.index_keys("node", "n1").unwrap(), vec![Arc::from("default/a")]);
//! ```

mod error;
mod index;
mod key;
#[cfg(feature = "kube")]
mod kube;
mod per_type;
mod repr;
mod store;
mod traits;

pub use error::{BoxError, IndexError, KeyError, Result, StoreError};
pub use index::{
    IndexFunc, Indexers, NAMESPACE_INDEX, index_func, index_func_to_key_func, namespace_index_func_from_key,
};
pub use key::{
    DeletedFinalStateUnknown, KeyFunc, ObjectOrTombstone, deletion_handling_key, key_func,
    meta_namespace_key, split_meta_namespace_key,
};
#[cfg(feature = "kube")]
pub use kube::{
    CONTROLLER_UID_INDEX, OWNER_UID_INDEX, controller_uid_index_func, label_index_func,
    meta_namespace_index_func, meta_namespace_key_func, namespace_indexers, owner_uid_index_func,
    resource_key,
};
pub use repr::CacheRepr;
pub use store::Store;
pub use traits::{KnownObjects, ReflectorStore};
