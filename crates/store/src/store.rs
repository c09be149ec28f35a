//! The indexed, thread-safe store (client-go's `cache.NewIndexer`: `Store`, `ThreadSafeStore` and
//! `Indexer` in one type).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use parking_lot::RwLock;

use crate::error::{IndexError, KeyError, StoreError};
use crate::index::{Hasher, IndexEntry, Indexers};
use crate::key::KeyFunc;
use crate::traits::{KnownObjects, ReflectorStore};

/// An indexed, thread-safe map from key to `Arc<K>`: the informer's cache.
///
/// The counterpart of client-go's `Indexer` (a `cache.NewIndexer(keyFunc, indexers)`): a `Store`
/// whose keys come from a [`KeyFunc`], plus named [`IndexFunc`](crate::IndexFunc)s that map each object to index
/// values, so that [`by_index`](Self::by_index) answers "which objects have value `v`" in time
/// proportional to the answer.
///
/// `Store` is a cheap handle: clones share the same contents. Reads take a shared lock and never
/// block each other; objects are handed out as `Arc<K>`, never deep-copied, and must be treated as
/// read-only (as in client-go, where mutating a cached object is a bug).
///
/// Every write first computes everything that can fail (the key, every index value of the new
/// and of the old object) and only then changes anything, so an error from a key or index
/// function leaves the store exactly as it was.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use kcache_store::{Store, key_func, namespace_index_func_from_key, NAMESPACE_INDEX};
///
/// // Objects are plain "namespace/name" strings here; real code stores Kubernetes objects.
/// let kf = key_func(|s: &String| Ok(s.clone()));
/// let store = Store::with_indexers(
///     kf.clone(),
///     [(NAMESPACE_INDEX.to_string(), namespace_index_func_from_key(kf))].into(),
/// );
/// store.add(Arc::new("team-a/web".to_string())).unwrap();
/// store.add(Arc::new("team-a/db".to_string())).unwrap();
/// store.add(Arc::new("team-b/web".to_string())).unwrap();
///
/// assert_eq!(store.len(), 3);
/// assert!(store.get_by_key("team-b/web").is_some());
/// let mut in_a: Vec<_> = store.by_index(NAMESPACE_INDEX, "team-a").unwrap();
/// in_a.sort();
/// assert_eq!(*in_a[0], "team-a/db");
/// ```
pub struct Store<K> {
    shared: Arc<Shared<K>>,
}

struct Shared<K> {
    key_func: KeyFunc<K>,
    state: RwLock<State<K>>,
}

struct State<K> {
    /// Key -> object. Index sets hold the same `Arc<K>`s (compared by address), so an object is
    /// never copied however many indices mention it.
    items: HashMap<Arc<str>, Arc<K>, Hasher>,
    /// The registered indices, in registration order. Names are unique.
    indices: Vec<IndexEntry<K>>,
    /// The resource version of the last replace or bookmark.
    resource_version: String,
}

impl<K> Clone for Store<K> {
    fn clone(&self) -> Self {
        Self { shared: Arc::clone(&self.shared) }
    }
}

impl<K> fmt::Debug for Store<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.shared.state.read();
        f.debug_struct("Store")
            .field("len", &st.items.len())
            .field("indices", &st.indices.iter().map(|i| i.name.as_str()).collect::<Vec<_>>())
            .field("resource_version", &st.resource_version)
            .finish()
    }
}

/// The index values of one object, one `Vec` per registered index, in `indices` order.
type Values = Vec<Vec<String>>;

fn compute_values<K>(indices: &[IndexEntry<K>], obj: &K, key: &str) -> Result<Values, IndexError> {
    indices
        .iter()
        .map(|idx| {
            (idx.func)(obj).map_err(|source| IndexError::IndexFunc {
                key: key.to_owned(),
                index: idx.name.clone(),
                source,
            })
        })
        .collect()
}

/// Empty indices with the names and functions of `indices`.
fn empty_like<K>(indices: &[IndexEntry<K>]) -> Vec<IndexEntry<K>> {
    indices.iter().map(|i| IndexEntry::new(i.name.clone(), Arc::clone(&i.func))).collect()
}

/// Adds one object to indices being built (with [`IndexEntry::insert_new`]: call
/// [`IndexEntry::finish`] on each once every object is in). On error the caller discards the
/// half-built indices.
fn index_one<K>(indices: &mut [IndexEntry<K>], obj: &Arc<K>, key: &str) -> Result<(), IndexError> {
    for idx in indices.iter_mut() {
        let values = (idx.func)(obj).map_err(|source| IndexError::IndexFunc {
            key: key.to_owned(),
            index: idx.name.clone(),
            source,
        })?;
        for v in values {
            idx.insert_new(v, obj);
        }
    }
    Ok(())
}

/// Fills fresh indices from every item, one pass over the items so each object is touched while
/// it is in cache. On error the caller discards the half-built indices.
fn index_all<K>(
    indices: &mut [IndexEntry<K>],
    items: &HashMap<Arc<str>, Arc<K>, Hasher>,
) -> Result<(), IndexError> {
    if indices.is_empty() {
        return Ok(());
    }
    for (key, obj) in items {
        index_one(indices, obj, key)?;
    }
    indices.iter_mut().for_each(IndexEntry::finish);
    Ok(())
}

impl<K> State<K> {
    /// Adds or replaces the object under `key`. Nothing changes when an index function fails.
    /// Files `obj` under `key` (an owned `String` or a shared `Arc<str>`, which a new entry keeps
    /// as it is), returning the object it replaced.
    fn put<S>(&mut self, key: S, obj: Arc<K>) -> Result<Option<Arc<K>>, IndexError>
    where
        S: AsRef<str> + Into<Arc<str>>,
    {
        let new_values = compute_values(&self.indices, &obj, key.as_ref())?;
        if let Some(old) = self.items.get(key.as_ref()) {
            let old = Arc::clone(old);
            if !self.indices.is_empty() {
                let old_values = compute_values(&self.indices, &old, key.as_ref())?;
                for ((idx, old_vals), new_vals) in self.indices.iter_mut().zip(&old_values).zip(new_values) {
                    // The sets hold the object itself, so even an unchanged value needs the old
                    // object swapped for the new one.
                    for v in old_vals {
                        idx.remove(v, &old);
                    }
                    for v in new_vals {
                        idx.insert(v, &obj);
                    }
                }
            }
            if let Some(slot) = self.items.get_mut(key.as_ref()) {
                *slot = obj;
            }
            Ok(Some(old))
        } else {
            for (idx, new_vals) in self.indices.iter_mut().zip(new_values) {
                for v in new_vals {
                    idx.insert(v, &obj);
                }
            }
            self.items.insert(key.into(), obj);
            Ok(None)
        }
    }

    fn remove(&mut self, key: &str) -> Result<Option<Arc<K>>, IndexError> {
        let Some(old) = self.items.get(key) else { return Ok(None) };
        let old_values = compute_values(&self.indices, old, key)?;
        let old = Arc::clone(old);
        for (idx, old_vals) in self.indices.iter_mut().zip(&old_values) {
            for v in old_vals {
                idx.remove(v, &old);
            }
        }
        Ok(self.items.remove(key))
    }
}

impl<K: Send + Sync + 'static> Store<K> {
    /// A store without indices (client-go's `NewStore`).
    pub fn new(key_func: KeyFunc<K>) -> Self {
        Self::with_indexers(key_func, Indexers::new())
    }

    /// A store with the given indices (client-go's `NewIndexer`).
    pub fn with_indexers(key_func: KeyFunc<K>, indexers: Indexers<K>) -> Self {
        let mut indices: Vec<_> = indexers.into_iter().map(|(n, f)| IndexEntry::new(n, f)).collect();
        indices.sort_by(|a, b| a.name.cmp(&b.name));
        let state = State { items: HashMap::default(), indices, resource_version: String::new() };
        Self { shared: Arc::new(Shared { key_func, state: RwLock::new(state) }) }
    }

    /// The key `obj` is stored under.
    ///
    /// # Errors
    ///
    /// Whatever the key function returns.
    pub fn key_of(&self, obj: &K) -> Result<String, KeyError> {
        (self.shared.key_func)(obj)
    }

    /// The key function this store was built with.
    pub fn key_func(&self) -> &KeyFunc<K> {
        &self.shared.key_func
    }

    /// Inserts or replaces `obj` under its key, updating every index.
    ///
    /// # Errors
    ///
    /// [`StoreError::Key`] if the key function fails, [`StoreError::Index`] if an index function
    /// fails on the new or the old object; the store is unchanged in both cases.
    pub fn add(&self, obj: Arc<K>) -> Result<(), StoreError> {
        let key = self.key_of(&obj)?;
        self.shared.state.write().put(key, obj)?;
        Ok(())
    }

    /// Inserts or replaces `obj` under `key`, which the caller already has, updating every index
    /// and returning the object it replaced. One lock and no key computation: what an informer
    /// does with each delta a FIFO pops, using the key the FIFO queued it under.
    ///
    /// `key` must be what the store's key function gives for `obj` (debug builds check it);
    /// an object filed under another key is found by [`get_by_key`](Self::get_by_key) with that
    /// key but not by [`get`](Self::get). A new entry keeps `key` itself, so a key shared with
    /// a FIFO is stored once.
    ///
    /// # Errors
    ///
    /// [`StoreError::Index`] if an index function fails on the new or the old object; the store
    /// is unchanged then.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use kcache_store::{key_func, Store};
    ///
    /// let store = Store::new(key_func(|s: &String| Ok(s.clone())));
    /// assert_eq!(store.insert_with_key(Arc::from("a"), Arc::new("a".to_string())).unwrap(), None);
    /// let old = store.insert_with_key(Arc::from("a"), Arc::new("a".to_string())).unwrap();
    /// assert_eq!(old.as_deref().map(String::as_str), Some("a"));
    /// assert_eq!(store.len(), 1);
    /// ```
    pub fn insert_with_key(&self, key: Arc<str>, obj: Arc<K>) -> Result<Option<Arc<K>>, StoreError> {
        debug_assert!(
            self.key_of(&obj).ok().is_none_or(|k| *k == *key),
            "insert_with_key: the key is not the key function's for the object"
        );
        Ok(self.shared.state.write().put(key, obj)?)
    }

    /// Same as [`add`](Self::add): client-go's `Update` also inserts a missing object.
    ///
    /// # Errors
    ///
    /// As for [`add`](Self::add).
    pub fn update(&self, obj: Arc<K>) -> Result<(), StoreError> {
        self.add(obj)
    }

    /// Removes the object stored under `obj`'s key, returning it. A missing key is not an error.
    ///
    /// # Errors
    ///
    /// [`StoreError::Key`] if the key function fails, [`StoreError::Index`] if an index function
    /// fails on the stored object (then nothing is removed).
    pub fn delete(&self, obj: &K) -> Result<Option<Arc<K>>, StoreError> {
        let key = self.key_of(obj)?;
        Ok(self.delete_by_key(&key)?)
    }

    /// Removes the object stored under `key`, returning it.
    ///
    /// # Errors
    ///
    /// [`IndexError::IndexFunc`] if an index function fails on the stored object (then nothing is
    /// removed).
    pub fn delete_by_key(&self, key: &str) -> Result<Option<Arc<K>>, IndexError> {
        self.shared.state.write().remove(key)
    }

    /// Every object, in no particular order.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.shared.state.read().items.values().cloned().collect()
    }

    /// Every key, in no particular order.
    pub fn list_keys(&self) -> Vec<Arc<str>> {
        self.shared.state.read().items.keys().cloned().collect()
    }

    /// The object stored under `obj`'s key.
    ///
    /// # Errors
    ///
    /// Whatever the key function returns.
    pub fn get(&self, obj: &K) -> Result<Option<Arc<K>>, KeyError> {
        let key = self.key_of(obj)?;
        Ok(self.get_by_key(&key))
    }

    /// The object stored under `key`, in O(1).
    pub fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.shared.state.read().items.get(key).cloned()
    }

    /// Whether an object is stored under `key`.
    pub fn contains_key(&self, key: &str) -> bool {
        self.shared.state.read().items.contains_key(key)
    }

    /// The number of objects.
    pub fn len(&self) -> usize {
        self.shared.state.read().items.len()
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Replaces the whole contents with `list` and records `resource_version` (client-go's
    /// `Replace`). When two objects share a key the later one wins.
    ///
    /// # Errors
    ///
    /// [`StoreError::Key`] or [`StoreError::Index`] if a key or index function fails on any
    /// object; the old contents and resource version are then kept intact.
    pub fn replace(&self, list: Vec<Arc<K>>, resource_version: &str) -> Result<(), StoreError> {
        // Build the new items and indices outside the lock from a snapshot of the index
        // functions, so a relist of many objects does not block readers while key and index
        // functions run; a failing function then leaves the old state untouched. (The key
        // function needs no lock: it is fixed at construction.)
        let mut indices = empty_like(&self.shared.state.read().indices);
        let mut items: HashMap<Arc<str>, Arc<K>, Hasher> =
            HashMap::with_capacity_and_hasher(list.len(), Hasher::default());
        // One pass in list order: each object's key and index values are computed while it is in
        // cache, and objects are visited in the order they were (most likely) allocated, not in
        // the hash order of `items`.
        let mut reindex = false;
        for obj in list {
            let key = self.key_of(&obj)?;
            if !reindex && index_one(&mut indices, &obj, &key).is_err() {
                // The object may yet be displaced by a later one with the same key (the later
                // one wins, and only the winners count): keep computing keys, so a key error
                // still comes first, then index the winners again below.
                reindex = true;
            }
            if items.insert(Arc::from(key), obj).is_some() {
                // A duplicate key: the displaced object is in the indices already.
                reindex = true;
            }
        }
        if reindex {
            indices = empty_like(&indices);
            index_all(&mut indices, &items)?;
        } else {
            indices.iter_mut().for_each(IndexEntry::finish);
        }
        let old = self.swap_in(items, indices, resource_version)?;
        // Drop the old contents outside the lock: freeing 100k objects takes a while.
        drop(old);
        Ok(())
    }

    /// [`replace`](Self::replace) with keys the caller already has: makes the contents exactly
    /// `items` (borrowed: the store keeps clones of the `Arc`s), each object filed under the key
    /// it comes with, records `resource_version`, and returns for each item the object its key
    /// held before, in `items` order. What an informer
    /// does with a relist its FIFO popped as one unit (client-go's `processReplacedAllInfo`,
    /// which reads the old objects and then calls `Replace`).
    ///
    /// Readers see the old contents or the new, never a mix: the new contents and indices are
    /// built without the lock and swapped in under it. When two items share a key the later one
    /// is stored; both are given the object the key held before. Each key must be what the
    /// store's key function gives for its object (debug builds check it), as for
    /// [`insert_with_key`](Self::insert_with_key).
    ///
    /// # Errors
    ///
    /// [`StoreError::Index`] if an index function fails on any object; the old contents and
    /// resource version are then kept intact.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use kcache_store::{key_func, Store};
    ///
    /// let store = Store::new(key_func(|s: &(String, u32)| Ok(s.0.clone())));
    /// store.add(Arc::new(("a".to_string(), 1))).unwrap();
    /// store.add(Arc::new(("gone".to_string(), 1))).unwrap();
    /// let list: Vec<(Arc<str>, Arc<(String, u32)>)> =
    ///     vec![(Arc::from("a"), Arc::new(("a".to_string(), 2))), (Arc::from("b"), Arc::new(("b".to_string(), 1)))];
    /// let previous = store.replace_with_keys(list.iter().map(|(k, o)| (k, o)), "10").unwrap();
    /// assert_eq!(previous[0].as_ref().map(|o| o.1), Some(1));
    /// assert!(previous[1].is_none());
    /// let mut keys = store.list_keys();
    /// keys.sort();
    /// assert_eq!(keys, [Arc::from("a"), Arc::from("b")]);
    /// assert_eq!(store.last_sync_resource_version(), "10");
    /// ```
    pub fn replace_with_keys<'a, I>(
        &self,
        items: I,
        resource_version: &str,
    ) -> Result<Vec<Option<Arc<K>>>, StoreError>
    where
        I: IntoIterator<Item = (&'a Arc<str>, &'a Arc<K>)>,
        I::IntoIter: Clone,
        K: 'a,
    {
        // Borrowed items, walked twice (to build, then to look up the previous objects): the
        // caller's own list of the objects is all the memory a relist takes besides the store.
        let items = items.into_iter();
        let mut indices = empty_like(&self.shared.state.read().indices);
        let mut map: HashMap<Arc<str>, Arc<K>, Hasher> =
            HashMap::with_capacity_and_hasher(items.size_hint().0, Hasher::default());
        // As in `replace`: one pass in list order, indexing each object while it is in cache.
        let mut reindex = false;
        for (key, obj) in items.clone() {
            debug_assert!(
                self.key_of(obj).ok().is_none_or(|k| *k == **key),
                "replace_with_keys: a key is not the key function's for its object"
            );
            if !reindex && index_one(&mut indices, obj, key).is_err() {
                // Perhaps an object a later one with the same key displaces: decide on the
                // winners only, below.
                reindex = true;
            }
            if map.insert(Arc::clone(key), Arc::clone(obj)).is_some() {
                reindex = true;
            }
        }
        if reindex {
            indices = empty_like(&indices);
            index_all(&mut indices, &map)?;
        } else {
            indices.iter_mut().for_each(IndexEntry::finish);
        }
        let old = self.swap_in(map, indices, resource_version)?;
        // Outside the lock, from the contents swapped out: no reader waits for these lookups,
        // nor for the old contents to be freed.
        let previous = items.map(|(key, _)| old.items.get(&**key).cloned()).collect();
        drop(old);
        Ok(previous)
    }

    /// Makes `items` and `indices` (built from a snapshot of the index functions) the contents,
    /// under the write lock, and returns the old state for the caller to drop outside it.
    fn swap_in(
        &self,
        items: HashMap<Arc<str>, Arc<K>, Hasher>,
        mut indices: Vec<IndexEntry<K>>,
        resource_version: &str,
    ) -> Result<State<K>, IndexError> {
        let mut st = self.shared.state.write();
        let unchanged = st.indices.len() == indices.len()
            && st
                .indices
                .iter()
                .zip(&indices)
                .all(|(a, b)| a.name == b.name && Arc::ptr_eq(&a.func, &b.func));
        if !unchanged {
            // `add_indexers` ran in between: index again, under the lock this time.
            indices = empty_like(&st.indices);
            index_all(&mut indices, &items)?;
        }
        Ok(std::mem::replace(
            &mut *st,
            State { items, indices, resource_version: resource_version.to_owned() },
        ))
    }

    /// Does nothing: a store has nothing to resync; only FIFOs do (client-go's `cache.Resync`).
    ///
    /// # Errors
    ///
    /// Never.
    pub fn resync(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// The resource version of the last [`replace`](Self::replace) or
    /// [`update_resource_version`](Self::update_resource_version); empty before either.
    pub fn last_sync_resource_version(&self) -> String {
        self.shared.state.read().resource_version.clone()
    }

    /// Records the resource version of a bookmark (or any event) without changing the contents.
    pub fn update_resource_version(&self, resource_version: &str) {
        let mut st = self.shared.state.write();
        st.resource_version.clear();
        st.resource_version.push_str(resource_version);
    }

    /// Adds indices and indexes every object already stored (client-go's `AddIndexers`).
    ///
    /// # Errors
    ///
    /// [`IndexError::Conflict`] if a name is already registered; [`IndexError::IndexFunc`] if a new
    /// index function fails on a stored object. No index is added in either case.
    pub fn add_indexers(&self, indexers: Indexers<K>) -> Result<(), IndexError> {
        let mut st = self.shared.state.write();
        let mut conflicts: Vec<String> =
            indexers.keys().filter(|n| st.indices.iter().any(|i| &i.name == *n)).cloned().collect();
        if !conflicts.is_empty() {
            conflicts.sort();
            return Err(IndexError::Conflict { names: conflicts });
        }
        let mut new: Vec<IndexEntry<K>> = indexers.into_iter().map(|(n, f)| IndexEntry::new(n, f)).collect();
        new.sort_by(|a, b| a.name.cmp(&b.name));
        index_all(&mut new, &st.items)?;
        st.indices.extend(new);
        Ok(())
    }

    /// The registered index functions by name (client-go's `GetIndexers`).
    pub fn get_indexers(&self) -> Indexers<K> {
        self.shared.state.read().indices.iter().map(|i| (i.name.clone(), Arc::clone(&i.func))).collect()
    }

    /// The objects sharing any index value with `obj` on `index_name` (client-go's `Index`).
    ///
    /// # Errors
    ///
    /// [`IndexError::NoSuchIndex`] for an unknown index; [`IndexError::IndexFunc`] if the index
    /// function fails on `obj`.
    pub fn index(&self, index_name: &str, obj: &K) -> Result<Vec<Arc<K>>, IndexError> {
        let st = self.shared.state.read();
        let idx = find(&st.indices, index_name)?;
        let values = (idx.func)(obj).map_err(|source| IndexError::IndexFunc {
            key: self.key_of(obj).unwrap_or_default(),
            index: index_name.to_owned(),
            source,
        })?;
        let mut out = Vec::new();
        if let [value] = values.as_slice() {
            if let Some(set) = idx.values.get(value.as_str()) {
                out.reserve(set.len());
                set.for_each(|o| out.push(Arc::clone(o)));
            }
            return Ok(out);
        }
        // Several values: an object may match more than one, report it once.
        let mut seen: HashSet<*const K, Hasher> = HashSet::default();
        for value in &values {
            if let Some(set) = idx.values.get(value.as_str()) {
                set.for_each(|o| {
                    if seen.insert(Arc::as_ptr(o)) {
                        out.push(Arc::clone(o));
                    }
                });
            }
        }
        Ok(out)
    }

    /// The keys of the objects whose `index_name` values include `value`, sorted (client-go's
    /// `IndexKeys`, which returns `sets.List` of the key set).
    ///
    /// Index sets hold objects, not keys, so this runs the key function once per result and sorts;
    /// prefer [`by_index`](Self::by_index) on hot paths.
    ///
    /// # Errors
    ///
    /// [`IndexError::NoSuchIndex`] for an unknown index.
    pub fn index_keys(&self, index_name: &str, value: &str) -> Result<Vec<Arc<str>>, IndexError> {
        let st = self.shared.state.read();
        let idx = find(&st.indices, index_name)?;
        let mut out = Vec::new();
        if let Some(set) = idx.values.get(value) {
            out.reserve(set.len());
            set.for_each(|o| {
                // The key function is deterministic and succeeded when `o` was stored; hand out
                // the stored key so callers share its allocation.
                if let Ok(key) = (self.shared.key_func)(o)
                    && let Some((k, _)) = st.items.get_key_value(key.as_str())
                {
                    out.push(Arc::clone(k));
                }
            });
        }
        drop(st);
        out.sort_unstable();
        Ok(out)
    }

    /// Every value currently present in `index_name`; empty for an unknown index (client-go's
    /// `ListIndexFuncValues`).
    pub fn list_index_func_values(&self, index_name: &str) -> Vec<String> {
        let st = self.shared.state.read();
        match find(&st.indices, index_name) {
            Ok(idx) => idx.values.keys().cloned().collect(),
            Err(_) => Vec::new(),
        }
    }

    /// The objects whose `index_name` values include `value`, in time proportional to the result
    /// (client-go's `ByIndex`).
    ///
    /// # Errors
    ///
    /// [`IndexError::NoSuchIndex`] for an unknown index.
    pub fn by_index(&self, index_name: &str, value: &str) -> Result<Vec<Arc<K>>, IndexError> {
        let st = self.shared.state.read();
        let idx = find(&st.indices, index_name)?;
        let mut out = Vec::new();
        if let Some(set) = idx.values.get(value) {
            out.reserve(set.len());
            set.for_each(|o| out.push(Arc::clone(o)));
        }
        Ok(out)
    }
}

fn find<'a, K>(indices: &'a [IndexEntry<K>], name: &str) -> Result<&'a IndexEntry<K>, IndexError> {
    indices.iter().find(|i| i.name == name).ok_or_else(|| IndexError::NoSuchIndex { name: name.to_owned() })
}

impl<K: Send + Sync + 'static> ReflectorStore<K> for Store<K> {
    fn add(&self, obj: Arc<K>) -> Result<(), StoreError> {
        Store::add(self, obj)
    }

    fn update(&self, obj: Arc<K>) -> Result<(), StoreError> {
        Store::update(self, obj)
    }

    fn delete(&self, obj: Arc<K>) -> Result<(), StoreError> {
        Store::delete(self, &obj).map(drop)
    }

    fn replace(&self, list: Vec<Arc<K>>, resource_version: &str) -> Result<(), StoreError> {
        Store::replace(self, list, resource_version)
    }

    fn resync(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn update_resource_version(&self, resource_version: &str) {
        Store::update_resource_version(self, resource_version);
    }
}

impl<K: Send + Sync + 'static> KnownObjects<K> for Store<K> {
    fn list_keys(&self) -> Vec<Arc<str>> {
        Store::list_keys(self)
    }

    fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        Store::get_by_key(self, key)
    }

    fn contains_key(&self, key: &str) -> bool {
        Store::contains_key(self, key)
    }
}
