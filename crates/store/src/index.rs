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

/// An indexed object, hashed and compared by the address of its allocation, not its contents.
///
/// Index sets hold the objects themselves, so `by_index` hands out `Arc`s without a second lookup
/// in the item map (that lookup, a cache miss per result, dominated `by_index` at 100k objects),
/// and an 8-byte pointer is the cheapest set element. Identity is sound because the store holds a
/// strong reference to every indexed object, so no other object can reuse its address while it is
/// in a set, and each object is stored under exactly one key.
pub(crate) struct ByAddress<K>(pub(crate) Arc<K>);

impl<K> PartialEq for ByAddress<K> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl<K> Eq for ByAddress<K> {}

impl<K> std::hash::Hash for ByAddress<K> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (Arc::as_ptr(&self.0) as *const () as usize).hash(state);
    }
}

/// The objects under one index value. Many index values name a single object (an owner, a
/// unique label); keeping that case inline avoids a hash set allocation per object.
pub(crate) enum ObjSet<K> {
    /// Exactly one object.
    One(Arc<K>),
    /// Two or more objects. Never holds fewer than two: `remove` collapses back to `One`.
    Many(HashSet<ByAddress<K>, Hasher>),
}

impl<K> ObjSet<K> {
    pub(crate) fn insert(&mut self, obj: Arc<K>) {
        match self {
            ObjSet::One(o) if Arc::ptr_eq(o, &obj) => {}
            ObjSet::One(o) => {
                let mut set = HashSet::with_capacity_and_hasher(2, Hasher::default());
                set.insert(ByAddress(Arc::clone(o)));
                set.insert(ByAddress(obj));
                *self = ObjSet::Many(set);
            }
            ObjSet::Many(set) => {
                set.insert(ByAddress(obj));
            }
        }
    }

    /// Removes `obj`; returns true when the set is now empty (the caller drops it: client-go
    /// deletes empty index sets so the index does not grow without bound).
    pub(crate) fn remove(&mut self, obj: &Arc<K>) -> bool {
        match self {
            ObjSet::One(o) => Arc::ptr_eq(o, obj),
            ObjSet::Many(set) => {
                set.remove(&ByAddress(Arc::clone(obj)));
                if set.len() == 1 {
                    let last = set.iter().next().map(|o| Arc::clone(&o.0));
                    if let Some(last) = last {
                        *self = ObjSet::One(last);
                    }
                }
                false
            }
        }
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            ObjSet::One(_) => 1,
            ObjSet::Many(set) => set.len(),
        }
    }

    pub(crate) fn for_each<'a>(&'a self, mut f: impl FnMut(&'a Arc<K>)) {
        match self {
            ObjSet::One(o) => f(o),
            ObjSet::Many(set) => set.iter().for_each(|o| f(&o.0)),
        }
    }
}

/// One registered index: its function and its value -> objects map.
pub(crate) struct IndexEntry<K> {
    pub(crate) name: String,
    pub(crate) func: IndexFunc<K>,
    /// Index value -> objects with that value. Invariant: no empty sets.
    pub(crate) values: HashMap<String, ObjSet<K>, Hasher>,
}

impl<K> IndexEntry<K> {
    pub(crate) fn new(name: String, func: IndexFunc<K>) -> Self {
        Self { name, func, values: HashMap::default() }
    }

    /// Adds `obj` under `value`, taking the value string (one hash, no copy when it is new).
    pub(crate) fn insert(&mut self, value: String, obj: &Arc<K>) {
        match self.values.entry(value) {
            std::collections::hash_map::Entry::Occupied(mut e) => e.get_mut().insert(Arc::clone(obj)),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(ObjSet::One(Arc::clone(obj)));
            }
        }
    }

    pub(crate) fn remove(&mut self, value: &str, obj: &Arc<K>) {
        if let Some(set) = self.values.get_mut(value)
            && set.remove(obj)
        {
            self.values.remove(value);
        }
    }
}
