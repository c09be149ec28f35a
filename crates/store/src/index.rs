//! Index functions and the per-index maps from index value to the set of keys
//! (client-go's `Indexers`, `Index` and `storeIndex`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::error::{BoxError, KeyError};
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

/// A key function made of an index function that gives exactly one value per object, the key
/// (client-go's `IndexFuncToKeyFuncAdapter`). Only useful when that value is unique per object;
/// prefer proper key and index functions.
///
/// The key function fails with [`KeyError::TooManyKeys`] when the index function gives several
/// values, [`KeyError::EmptyIndexKeys`] when it gives none, and [`KeyError::Custom`] with the
/// index function's own error when it fails.
///
/// # Examples
///
/// ```
/// use kcache_store::{index_func, index_func_to_key_func, KeyError};
/// let kf = index_func_to_key_func(index_func(|s: &String| Ok(s.split(',').map(str::to_owned).collect())));
/// assert_eq!(kf(&"uid-1".to_string()).unwrap(), "uid-1");
/// assert!(matches!(kf(&"a,b".to_string()), Err(KeyError::TooManyKeys { .. })));
/// ```
pub fn index_func_to_key_func<K: 'static>(index_func: IndexFunc<K>) -> KeyFunc<K> {
    Arc::new(move |obj: &K| {
        let mut keys = index_func(obj).map_err(KeyError::Custom)?;
        match keys.len() {
            0 => Err(KeyError::EmptyIndexKeys),
            1 => Ok(keys.pop().unwrap_or_default()),
            _ => Err(KeyError::TooManyKeys { keys }),
        }
    })
}

/// The one index value of an object, borrowed from it: what an [`IndexFunc`] that always gives
/// exactly one value computes, without the `Vec` and the `String` it returns.
pub(crate) type SingleValue<K> = for<'a> fn(&'a K) -> &'a str;

/// The shared single-valued index function of `K` and the `SingleValue` it is equivalent to.
struct Registered<K> {
    func: IndexFunc<K>,
    single: SingleValue<K>,
}

impl<K> Clone for Registered<K> {
    fn clone(&self) -> Self {
        Self { func: Arc::clone(&self.func), single: self.single }
    }
}

/// The shared index function of `K` that `single` computes without allocating (made by `make`
/// on the first call), for the namespace index: every call returns the same `Arc`, and a store
/// building an index with it takes each object's value from `single` instead (a relist of 50k
/// objects otherwise allocates and frees a `Vec` and a `String` for each).
#[cfg(feature = "kube")]
pub(crate) fn shared_single_value_index<K: 'static>(
    single: SingleValue<K>,
    make: impl FnOnce() -> IndexFunc<K>,
) -> IndexFunc<K> {
    crate::per_type::get_or_make(|| Registered { func: make(), single }).func
}

/// The borrowing equivalent of `func`, when it is the shared single-valued index function.
fn single_value_of<K: 'static>(func: &IndexFunc<K>) -> Option<SingleValue<K>> {
    let r = crate::per_type::get::<Registered<K>>()?;
    Arc::ptr_eq(&r.func, func).then_some(r.single)
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

/// The most objects a [`ObjSet::Few`] holds: a linear scan of up to this many pointers (two cache
/// lines) is cheaper than hashing, and a `Vec` of them is half the size of a hash set.
pub(crate) const FEW: usize = 16;

/// The objects under one index value. Many index values name a single object (an owner, a
/// unique label); keeping that case inline avoids an allocation per object, and small sets are a
/// plain `Vec`, scanned linearly.
pub(crate) enum ObjSet<K> {
    /// Exactly one object.
    One(Arc<K>),
    /// Two to [`FEW`] distinct objects. While [`IndexEntry::insert_new`] builds an index it may
    /// hold more, until [`IndexEntry::finish`] turns the large ones into `Many`.
    Few(Vec<Arc<K>>),
    /// More objects (fewer only after removals). Never holds fewer than two: `remove` collapses
    /// back to `One`.
    Many(HashSet<ByAddress<K>, Hasher>),
}

impl<K> ObjSet<K> {
    pub(crate) fn insert(&mut self, obj: Arc<K>) {
        match self {
            ObjSet::One(o) if Arc::ptr_eq(o, &obj) => {}
            ObjSet::One(o) => *self = ObjSet::pair(Arc::clone(o), obj),
            ObjSet::Few(v) if v.iter().any(|o| Arc::ptr_eq(o, &obj)) => {}
            ObjSet::Few(v) if v.len() < FEW => v.push(obj),
            ObjSet::Few(v) => {
                let mut set = HashSet::with_capacity_and_hasher(2 * FEW, Hasher::default());
                set.extend(v.drain(..).map(ByAddress));
                set.insert(ByAddress(obj));
                *self = ObjSet::Many(set);
            }
            ObjSet::Many(set) => {
                set.insert(ByAddress(obj));
            }
        }
    }

    /// Two distinct objects, as `Few`.
    fn pair(first: Arc<K>, second: Arc<K>) -> Self {
        let mut v = Vec::with_capacity(4);
        v.push(first);
        v.push(second);
        ObjSet::Few(v)
    }

    /// [`insert`](Self::insert) while an index is being built one object at a time: the object
    /// can only be in the set already if it was the last one added (an index function returned
    /// the value twice), so there is nothing to scan, and `Few` grows without bound until
    /// [`finish`](Self::finish).
    fn insert_new(&mut self, obj: Arc<K>) {
        match self {
            ObjSet::One(o) if Arc::ptr_eq(o, &obj) => {}
            ObjSet::One(o) => *self = ObjSet::pair(Arc::clone(o), obj),
            ObjSet::Few(v) if v.last().is_some_and(|o| Arc::ptr_eq(o, &obj)) => {}
            ObjSet::Few(v) => v.push(obj),
            ObjSet::Many(set) => {
                set.insert(ByAddress(obj));
            }
        }
    }

    /// Restores the `Few` bound after [`insert_new`](Self::insert_new): a large set becomes a
    /// hash set, allocated once at its final size.
    fn finish(&mut self) {
        if let ObjSet::Few(v) = self
            && v.len() > FEW
        {
            let mut set = HashSet::with_capacity_and_hasher(v.len(), Hasher::default());
            set.extend(v.drain(..).map(ByAddress));
            *self = ObjSet::Many(set);
        }
    }

    /// Removes `obj`; returns true when the set is now empty (the caller drops it: client-go
    /// deletes empty index sets so the index does not grow without bound).
    pub(crate) fn remove(&mut self, obj: &Arc<K>) -> bool {
        match self {
            ObjSet::One(o) => Arc::ptr_eq(o, obj),
            ObjSet::Few(v) => {
                if let Some(i) = v.iter().position(|o| Arc::ptr_eq(o, obj)) {
                    v.swap_remove(i);
                }
                if v.len() == 1
                    && let Some(last) = v.pop()
                {
                    *self = ObjSet::One(last);
                }
                false
            }
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
            ObjSet::Few(v) => v.len(),
            ObjSet::Many(set) => set.len(),
        }
    }

    pub(crate) fn for_each<'a>(&'a self, mut f: impl FnMut(&'a Arc<K>)) {
        match self {
            ObjSet::One(o) => f(o),
            ObjSet::Few(v) => v.iter().for_each(f),
            ObjSet::Many(set) => set.iter().for_each(|o| f(&o.0)),
        }
    }
}

/// One registered index: its function (on objects `K`) and its value -> stored slots map (`S`:
/// the objects themselves, or what a serialized store keeps of them; see `crate::repr`).
pub(crate) struct IndexEntry<K, S = K> {
    pub(crate) name: String,
    pub(crate) func: IndexFunc<K>,
    /// `func`'s borrowing equivalent, when it has one (kcache's namespace index): used while
    /// the index is built from many objects at once (a relist).
    pub(crate) single: Option<SingleValue<K>>,
    /// Index value -> objects with that value. Invariant: no empty sets.
    pub(crate) values: HashMap<String, ObjSet<S>, Hasher>,
}

impl<K: 'static, S> IndexEntry<K, S> {
    pub(crate) fn new(name: String, func: IndexFunc<K>) -> Self {
        let single = single_value_of(&func);
        Self { name, func, single, values: HashMap::default() }
    }
}

impl<K, S> IndexEntry<K, S> {
    /// [`insert_new`](Self::insert_new) of a borrowed value: copied only when it is new to the
    /// index.
    pub(crate) fn insert_new_borrowed(&mut self, value: &str, obj: &Arc<S>) {
        match self.values.get_mut(value) {
            Some(set) => set.insert_new(Arc::clone(obj)),
            None => {
                self.values.insert(value.to_owned(), ObjSet::One(Arc::clone(obj)));
            }
        }
    }

    /// Adds `obj` under `value`, taking the value string (one hash, no copy when it is new).
    pub(crate) fn insert(&mut self, value: String, obj: &Arc<S>) {
        match self.values.entry(value) {
            std::collections::hash_map::Entry::Occupied(mut e) => e.get_mut().insert(Arc::clone(obj)),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(ObjSet::One(Arc::clone(obj)));
            }
        }
    }

    /// [`insert`](Self::insert) while the index is being built: every value of one object is
    /// inserted before the next object's (see [`ObjSet::insert_new`]). Call
    /// [`finish`](Self::finish) once every object is in.
    pub(crate) fn insert_new(&mut self, value: String, obj: &Arc<S>) {
        match self.values.entry(value) {
            std::collections::hash_map::Entry::Occupied(mut e) => e.get_mut().insert_new(Arc::clone(obj)),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(ObjSet::One(Arc::clone(obj)));
            }
        }
    }

    /// Ends a build by [`insert_new`](Self::insert_new): sets become what
    /// [`insert`](Self::insert) expects again.
    pub(crate) fn finish(&mut self) {
        self.values.values_mut().for_each(ObjSet::finish);
    }

    pub(crate) fn remove(&mut self, value: &str, obj: &Arc<S>) {
        if let Some(set) = self.values.get_mut(value)
            && set.remove(obj)
        {
            self.values.remove(value);
        }
    }
}
