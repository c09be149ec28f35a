//! The traits that connect the store to the reflector (which writes into it) and to the FIFOs
//! (which read the keys the consumer already knows).

use std::sync::Arc;

use crate::error::StoreError;
use crate::key::KeyFunc;

/// What a reflector writes into: the store itself, a DeltaFIFO or an in-order FIFO (client-go's
/// `ReflectorStore`, the write half of `Store`).
///
/// Object-safe, so a reflector can hold an `Arc<dyn ReflectorStore<K>>`.
pub trait ReflectorStore<K>: Send + Sync {
    /// An object was added (a watch `ADDED` event).
    ///
    /// # Errors
    ///
    /// A key, index or transform error; nothing was changed.
    fn add(&self, obj: Arc<K>) -> Result<(), StoreError>;

    /// An object was modified (a watch `MODIFIED` event).
    ///
    /// # Errors
    ///
    /// A key, index or transform error; nothing was changed.
    fn update(&self, obj: Arc<K>) -> Result<(), StoreError>;

    /// An object was deleted (a watch `DELETED` event); `obj` is its final state.
    ///
    /// # Errors
    ///
    /// A key, index or transform error; nothing was changed.
    fn delete(&self, obj: Arc<K>) -> Result<(), StoreError>;

    /// A full list arrived: make the contents equal to `list` at `resource_version`.
    ///
    /// # Errors
    ///
    /// A key, index or transform error on any object.
    fn replace(&self, list: Vec<Arc<K>>, resource_version: &str) -> Result<(), StoreError>;

    /// [`replace`](Self::replace) with each object's key already computed by `key_func`: a
    /// reflector's watch-list computes every key for its temporary store while the object is
    /// fresh in the CPU's cache, and hands the keys on with the objects. A store whose own key
    /// function is the same `Arc` (`Arc::ptr_eq`) may file the objects under these keys instead
    /// of computing each again; any other must ignore them. The default does: it calls
    /// `replace` with the objects, in order. The outcome is `replace`'s either way.
    ///
    /// # Errors
    ///
    /// As [`replace`](Self::replace).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use kcache_store::{ReflectorStore, Store, key_func};
    ///
    /// let keys = key_func(|s: &String| Ok(s.clone()));
    /// let store = Store::new(keys.clone());
    /// let list = vec![(Arc::from("a"), Arc::new("a".to_string()))];
    /// ReflectorStore::replace_keyed(&store, list, &keys, "10").unwrap();
    /// assert_eq!(store.list_keys(), [Arc::from("a")]);
    /// ```
    fn replace_keyed(
        &self,
        list: Vec<(Arc<str>, Arc<K>)>,
        key_func: &KeyFunc<K>,
        resource_version: &str,
    ) -> Result<(), StoreError> {
        let _ = key_func;
        self.replace(list.into_iter().map(|(_, obj)| obj).collect(), resource_version)
    }

    /// The periodic resync: FIFOs queue a `Sync` for every known object; a store does nothing.
    ///
    /// # Errors
    ///
    /// A key or transform error.
    fn resync(&self) -> Result<(), StoreError>;

    /// A bookmark (or any event) moved the resource version on without changing objects. The
    /// default ignores it, like client-go stores that do not implement `ResourceVersionUpdater`.
    fn update_resource_version(&self, resource_version: &str) {
        let _ = resource_version;
    }
}

/// The objects the consumer of a FIFO already knows about, used to detect deletions on a relist
/// and to produce `Sync` deltas on resync (client-go's `KeyListerGetter`, usually the informer's
/// indexer).
pub trait KnownObjects<K>: Send + Sync {
    /// Every known key.
    fn list_keys(&self) -> Vec<Arc<str>>;

    /// The known object under `key`.
    fn get_by_key(&self, key: &str) -> Option<Arc<K>>;

    /// Whether `key` is known. The default calls [`get_by_key`](Self::get_by_key).
    fn contains_key(&self, key: &str) -> bool {
        self.get_by_key(key).is_some()
    }
}

impl<K, T: ReflectorStore<K> + ?Sized> ReflectorStore<K> for Arc<T> {
    fn add(&self, obj: Arc<K>) -> Result<(), StoreError> {
        (**self).add(obj)
    }
    fn update(&self, obj: Arc<K>) -> Result<(), StoreError> {
        (**self).update(obj)
    }
    fn delete(&self, obj: Arc<K>) -> Result<(), StoreError> {
        (**self).delete(obj)
    }
    fn replace(&self, list: Vec<Arc<K>>, resource_version: &str) -> Result<(), StoreError> {
        (**self).replace(list, resource_version)
    }
    fn replace_keyed(
        &self,
        list: Vec<(Arc<str>, Arc<K>)>,
        key_func: &KeyFunc<K>,
        resource_version: &str,
    ) -> Result<(), StoreError> {
        (**self).replace_keyed(list, key_func, resource_version)
    }
    fn resync(&self) -> Result<(), StoreError> {
        (**self).resync()
    }
    fn update_resource_version(&self, resource_version: &str) {
        (**self).update_resource_version(resource_version)
    }
}

impl<K, T: KnownObjects<K> + ?Sized> KnownObjects<K> for Arc<T> {
    fn list_keys(&self) -> Vec<Arc<str>> {
        (**self).list_keys()
    }
    fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        (**self).get_by_key(key)
    }
    fn contains_key(&self, key: &str) -> bool {
        (**self).contains_key(key)
    }
}
