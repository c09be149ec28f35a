//! Index functions and the per-index maps from index value to the set of keys
//! (client-go's `Indexers`, `Index` and `storeIndex`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::error::BoxError;
use crate::key::{KeyFunc, split_meta_namespace_key};

/// Computes the index values of an object (client-go's `IndexFunc`). An error leaves the store
/// unchanged and is returned to the caller of the write.
pub type IndexFunc<K> = Arc<dyn Fn(&K) -> Result<Vec<String>, BoxError> + Send + Sync>;

/// Named index functions (client-go's `Indexers`).
pub type Indexers<K> = HashMap<String, IndexFunc<K>>;

/// The name of the built-in namespace index (client-go's `NamespaceIndex`).
pub const NAMESPACE_INDEX: &str = "namespace";

/// The hasher of every map in the store: foldhash is several times faster than SipHash on short
/// keys, and the maps are not exposed to attacker-chosen keys beyond object names the API server
/// already accepted. Seeds are still random per map.
pub(crate) type Hasher = foldhash::fast::RandomState;

/// Wraps a closure as an [`IndexFunc`].
///
/// # Examples
///
/// ```
/// use kcache_store::index_func;
/// let by_len = index_func(|s: &String| Ok(vec![s.len().to_string()]));
/// assert_eq!(by_len(&"abc".to_string()).unwrap(), vec!["3".to_string()]);
/// ```
pub fn index_func<K, F>(f: F) -> IndexFunc<K>
where
    F: Fn(&K) -> Result<Vec<String>, BoxError> + Send + Sync + 'static,
{
    Arc::new(f)
}

/// A namespace index function that reads the namespace out of the object's key, for key functions
/// that produce `namespace/name` keys; cluster-scoped objects index under `""`, as client-go's
/// `MetaNamespaceIndexFunc` does.
///
/// # Examples
///
/// ```
/// use kcache_store::{key_func, namespace_index_func_from_key};
/// let kf = key_func(|s: &String| Ok(s.clone()));
/// let ns = namespace_index_func_from_key(kf);
/// assert_eq!(ns(&"team-a/web".to_string()).unwrap(), vec!["team-a".to_string()]);
/// ```
pub fn namespace_index_func_from_key<K: 'static>(key_func: KeyFunc<K>) -> IndexFunc<K> {
    Arc::new(move |obj: &K| {
        let key = key_func(obj)?;
        let (ns, _) = split_meta_namespace_key(&key)?;
        Ok(vec![ns.to_owned()])
    })
}

/// The keys under one index value. Most index values in practice name one object (an owner UID, a
/// node name for a single pod, a unique label); keeping that case inline avoids a hash set
/// allocation per object.
#[derive(Debug)]
pub(crate) enum KeySet {
    /// Exactly one key.
    One(Arc<str>),
    /// Two or more keys. Never holds fewer than two: `remove` collapses back to `One`.
    Many(HashSet<Arc<str>, Hasher>),
}

impl KeySet {
    pub(crate) fn insert(&mut self, key: Arc<str>) {
        match self {
            KeySet::One(k) if **k == *key => {}
            KeySet::One(k) => {
                let mut set = HashSet::with_capacity_and_hasher(2, Hasher::default());
                set.insert(Arc::clone(k));
                set.insert(key);
                *self = KeySet::Many(set);
            }
            KeySet::Many(set) => {
                set.insert(key);
            }
        }
    }

    /// Removes `key`; returns true when the set is now empty (the caller drops it: client-go
    /// deletes empty index sets so the index does not grow without bound).
    pub(crate) fn remove(&mut self, key: &str) -> bool {
        match self {
            KeySet::One(k) => **k == *key,
            KeySet::Many(set) => {
                set.remove(key);
                if set.len() == 1
                    && let Some(last) = set.iter().next().cloned()
                {
                    *self = KeySet::One(last);
                }
                set_is_empty(self)
            }
        }
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            KeySet::One(_) => 1,
            KeySet::Many(set) => set.len(),
        }
    }

    pub(crate) fn for_each<'a>(&'a self, mut f: impl FnMut(&'a Arc<str>)) {
        match self {
            KeySet::One(k) => f(k),
            KeySet::Many(set) => set.iter().for_each(f),
        }
    }
}

fn set_is_empty(s: &KeySet) -> bool {
    matches!(s, KeySet::Many(set) if set.is_empty())
}

/// One registered index: its function and its value -> keys map.
pub(crate) struct IndexEntry<K> {
    pub(crate) name: String,
    pub(crate) func: IndexFunc<K>,
    /// Index value -> keys of the objects with that value. Invariant: no empty sets.
    pub(crate) values: HashMap<String, KeySet, Hasher>,
}

impl<K> IndexEntry<K> {
    pub(crate) fn new(name: String, func: IndexFunc<K>) -> Self {
        Self { name, func, values: HashMap::default() }
    }

    pub(crate) fn insert(&mut self, value: &str, key: &Arc<str>) {
        match self.values.get_mut(value) {
            Some(set) => set.insert(Arc::clone(key)),
            None => {
                self.values.insert(value.to_owned(), KeySet::One(Arc::clone(key)));
            }
        }
    }

    pub(crate) fn remove(&mut self, value: &str, key: &str) {
        if let Some(set) = self.values.get_mut(value)
            && set.remove(key)
        {
            self.values.remove(value);
        }
    }
}
