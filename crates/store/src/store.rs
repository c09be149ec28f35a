//! The indexed, thread-safe store (client-go's `cache.NewIndexer`: `Store`, `ThreadSafeStore` and
//! `Indexer` in one type).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use parking_lot::RwLock;

use crate::error::{IndexError, KeyError, StoreError};
use crate::index::{Hasher, IndexEntry, Indexers};
use crate::key::KeyFunc;
use crate::repr::{CacheRepr, Objects, Repr, Serialized};
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
    state: RwLock<Contents<K>>,
}

/// The contents in one of the representations of [`CacheRepr`]. Every method matches once and
/// runs the same generic code on either, so the default path is the code it always was, with
/// `Arc<K>` slots.
enum Contents<K> {
    Objects(State<K, Objects>),
    Serialized(State<K, Serialized<K>>),
}

/// Runs `$body` with `$st` bound to the state inside `$contents` (a `&Contents` or
/// `&mut Contents`), whichever representation it has: the body is compiled once for each.
macro_rules! with_state {
    ($contents:expr, $st:ident => $body:expr) => {
        match $contents {
            Contents::Objects($st) => $body,
            Contents::Serialized($st) => $body,
        }
    };
}

struct State<K, R: Repr<K>> {
    /// Key -> stored object. Index sets hold the same `Arc`s (compared by address), so an object
    /// is never copied however many indices mention it.
    items: HashMap<Arc<str>, Arc<R::Slot>, Hasher>,
    /// The registered indices, in registration order. Names are unique.
    indices: Vec<IndexEntry<K, R::Slot>>,
    /// The resource version of the last replace or bookmark.
    resource_version: String,
    /// How objects become slots and back.
    repr: R,
}

impl<K> Clone for Store<K> {
    fn clone(&self) -> Self {
        Self { shared: Arc::clone(&self.shared) }
    }
}

impl<K> fmt::Debug for Store<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let contents = self.shared.state.read();
        let mut d = f.debug_struct("Store");
        with_state!(&*contents, st => d
            .field("len", &st.items.len())
            .field("indices", &st.indices.iter().map(|i| i.name.as_str()).collect::<Vec<_>>())
            .field("resource_version", &st.resource_version)
            .field("representation", &<_ as Repr<K>>::kind(&st.repr)));
        d.finish()
    }
}

/// Key -> stored slot.
type Items<S> = HashMap<Arc<str>, Arc<S>, Hasher>;

/// New items and their indices, built outside the lock.
type Built<K, S> = (Items<S>, Vec<IndexEntry<K, S>>);

/// The index values of one object, one `Vec` per registered index, in `indices` order.
type Values = Vec<Vec<String>>;

fn compute_values<K, S>(indices: &[IndexEntry<K, S>], obj: &K, key: &str) -> Result<Values, IndexError> {
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
fn empty_like<K, S, T>(indices: &[IndexEntry<K, S>]) -> Vec<IndexEntry<K, T>> {
    indices
        .iter()
        .map(|i| IndexEntry {
            name: i.name.clone(),
            func: Arc::clone(&i.func),
            single: i.single,
            values: HashMap::default(),
        })
        .collect()
}

/// Adds one object (`obj`, stored as `slot`) to indices being built (with
/// [`IndexEntry::insert_new`]: call [`IndexEntry::finish`] on each once every object is in). On
/// error the caller discards the half-built indices.
fn index_one<K, S>(
    indices: &mut [IndexEntry<K, S>],
    obj: &K,
    slot: &Arc<S>,
    key: &str,
) -> Result<(), IndexError> {
    for idx in indices.iter_mut() {
        if let Some(single) = idx.single {
            idx.insert_new_borrowed(single(obj), slot);
            continue;
        }
        let values = (idx.func)(obj).map_err(|source| IndexError::IndexFunc {
            key: key.to_owned(),
            index: idx.name.clone(),
            source,
        })?;
        for v in values {
            idx.insert_new(v, slot);
        }
    }
    Ok(())
}

/// Fills fresh indices from every item, one pass over the items so each object is touched while
/// it is in cache. On error the caller discards the half-built indices.
fn index_all<K, R: Repr<K>>(
    repr: &R,
    indices: &mut [IndexEntry<K, R::Slot>],
    items: &HashMap<Arc<str>, Arc<R::Slot>, Hasher>,
) -> Result<(), IndexError> {
    if indices.is_empty() {
        return Ok(());
    }
    for (key, slot) in items {
        index_one(indices, &*repr.load(slot), slot, key)?;
    }
    indices.iter_mut().for_each(IndexEntry::finish);
    Ok(())
}

/// New contents in `repr`'s representation from `(key, object)` pairs, indexed by `indices`
/// (fresh ones; this finishes them). When two pairs share a key the later one wins.
fn build<'a, K: 'a, R: Repr<K>>(
    repr: &R,
    mut indices: Vec<IndexEntry<K, R::Slot>>,
    pairs: impl Iterator<Item = (Arc<str>, &'a Arc<K>)>,
    capacity: usize,
) -> Result<Built<K, R::Slot>, StoreError> {
    let mut items: HashMap<Arc<str>, Arc<R::Slot>, Hasher> =
        HashMap::with_capacity_and_hasher(capacity, Hasher::default());
    // One pass in list order: each object's index values are computed while it is in cache,
    // and objects are visited in the order they were (most likely) allocated, not in the hash
    // order of `items`.
    let mut reindex = false;
    for (key, obj) in pairs {
        let slot = repr.pack(&key, obj)?;
        if !reindex && index_one(&mut indices, obj, &slot, &key).is_err() {
            // The object may yet be displaced by a later one with the same key (the later one
            // wins, and only the winners count): decide on the winners only, below.
            reindex = true;
        }
        if items.insert(key, slot).is_some() {
            // A duplicate key: the displaced object is in the indices already.
            reindex = true;
        }
    }
    if reindex {
        indices = empty_like(&indices);
        index_all(repr, &mut indices, &items)?;
    } else {
        indices.iter_mut().for_each(IndexEntry::finish);
    }
    Ok((items, indices))
}

/// `from`'s items in `to`'s representation, indexed like `like` (its functions, fresh sets): a
/// representation change, or contents built while the indices changed.
fn rebuild<K, A: Repr<K>, B: Repr<K>>(
    from: &State<K, A>,
    to: B,
    like: &[IndexEntry<K, B::Slot>],
    resource_version: String,
) -> Result<State<K, B>, StoreError> {
    let objects: Vec<(Arc<str>, Arc<K>)> =
        from.items.iter().map(|(k, s)| (Arc::clone(k), from.repr.load(s))).collect();
    let (items, indices) =
        build(&to, empty_like(like), objects.iter().map(|(k, o)| (Arc::clone(k), o)), objects.len())?;
    Ok(State { items, indices, resource_version, repr: to })
}

impl<K, R: Repr<K>> State<K, R> {
    fn new(indices: Vec<IndexEntry<K, R::Slot>>, repr: R) -> Self {
        Self { items: HashMap::default(), indices, resource_version: String::new(), repr }
    }

    /// Files `obj` under `key`, returning the object it replaced. Nothing changes when an index
    /// function or the encoding fails.
    ///
    /// `key` becomes an `Arc<str>` only for a new entry (an `Arc<str>` is kept as it is): an
    /// update, a watch's commonest event, keeps the stored key and allocates none.
    fn put<Q: AsRef<str> + Into<Arc<str>>>(
        &mut self,
        key: Q,
        obj: Arc<K>,
    ) -> Result<Option<Arc<K>>, StoreError> {
        let new_values = compute_values(&self.indices, &obj, key.as_ref())?;
        if let Some((stored_key, old_slot)) = self.items.get_key_value(key.as_ref()) {
            let old_slot = Arc::clone(old_slot);
            let slot = self.repr.pack(stored_key, &obj)?;
            let old = self.repr.load(&old_slot);
            if !self.indices.is_empty() {
                let old_values = compute_values(&self.indices, &old, key.as_ref())?;
                for ((idx, old_vals), new_vals) in self.indices.iter_mut().zip(&old_values).zip(new_values) {
                    // The sets hold the slot itself, so even an unchanged value needs the old
                    // slot swapped for the new one.
                    for v in old_vals {
                        idx.remove(v, &old_slot);
                    }
                    for v in new_vals {
                        idx.insert(v, &slot);
                    }
                }
            }
            if let Some(entry) = self.items.get_mut(key.as_ref()) {
                *entry = slot;
            }
            Ok(Some(old))
        } else {
            let key: Arc<str> = key.into();
            let slot = self.repr.pack(&key, &obj)?;
            for (idx, new_vals) in self.indices.iter_mut().zip(new_values) {
                for v in new_vals {
                    idx.insert(v, &slot);
                }
            }
            self.items.insert(key, slot);
            Ok(None)
        }
    }

    fn remove(&mut self, key: &str) -> Result<Option<Arc<K>>, IndexError> {
        let Some(old_slot) = self.items.get(key) else { return Ok(None) };
        let old_slot = Arc::clone(old_slot);
        let old = self.repr.load(&old_slot);
        let old_values = compute_values(&self.indices, &old, key)?;
        for (idx, old_vals) in self.indices.iter_mut().zip(&old_values) {
            for v in old_vals {
                idx.remove(v, &old_slot);
            }
        }
        self.items.remove(key);
        Ok(Some(old))
    }

    /// Clones of the stored slots (under the lock) and the representation to load them with
    /// (after it: a serialized store decodes outside the lock).
    fn slots(&self) -> (Vec<Arc<R::Slot>>, R) {
        (self.items.values().cloned().collect(), self.repr)
    }
}

/// Loads every slot into its object (for the default representation a move of each `Arc`,
/// collected in place).
fn load_all<K, R: Repr<K>>(slots: Vec<Arc<R::Slot>>, repr: &R) -> Vec<Arc<K>> {
    slots.into_iter().map(|s| repr.load_owned(s)).collect()
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
        let state = Contents::Objects(State::new(indices, Objects));
        Self { shared: Arc::new(Shared { key_func, state: RwLock::new(state) }) }
    }

    /// How this store holds its objects ([`CacheRepr::Objects`] unless
    /// [`set_representation`](Self::set_representation) changed it).
    pub fn representation(&self) -> CacheRepr {
        with_state!(&*self.shared.state.read(), st => Repr::<K>::kind(&st.repr))
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
        let replaced = with_state!(&mut *self.shared.state.write(), st => st.put(key, obj))?;
        // The replaced object (a whole object graph to free, for an update) is dropped after
        // the lock is released, not while readers wait for it.
        drop(replaced);
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
        with_state!(&mut *self.shared.state.write(), st => st.put(key, obj))
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
        with_state!(&mut *self.shared.state.write(), st => st.remove(key))
    }

    /// Every object, in no particular order.
    pub fn list(&self) -> Vec<Arc<K>> {
        let contents = self.shared.state.read();
        with_state!(&*contents, st => {
            let (slots, repr) = st.slots();
            drop(contents);
            load_all(slots, &repr)
        })
    }

    /// Every key, in no particular order.
    pub fn list_keys(&self) -> Vec<Arc<str>> {
        with_state!(&*self.shared.state.read(), st => st.items.keys().cloned().collect())
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
        let contents = self.shared.state.read();
        with_state!(&*contents, st => {
            let slot = st.items.get(key).cloned()?;
            let repr = st.repr;
            drop(contents);
            Some(repr.load_owned(slot))
        })
    }

    /// Whether an object is stored under `key`.
    pub fn contains_key(&self, key: &str) -> bool {
        with_state!(&*self.shared.state.read(), st => st.items.contains_key(key))
    }

    /// The number of objects.
    pub fn len(&self) -> usize {
        with_state!(&*self.shared.state.read(), st => st.items.len())
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
        // functions (and of the representation), so a relist of many objects does not block
        // readers while key and index functions run; a failing function then leaves the old
        // state untouched. (The key function needs no lock: it is fixed at construction.)
        let keys =
            list.iter().map(|obj| self.key_of(obj).map(Arc::<str>::from)).collect::<Result<Vec<_>, _>>()?;
        let new = self.build_outside_lock(keys.into_iter().zip(&list), list.len(), resource_version)?;
        let old = self.swap_in(new)?;
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
        for (key, obj) in items.clone() {
            debug_assert!(
                self.key_of(obj).ok().is_none_or(|k| *k == **key),
                "replace_with_keys: a key is not the key function's for its object"
            );
        }
        let pairs = items.clone().map(|(k, o)| (Arc::clone(k), o));
        let new = self.build_outside_lock(pairs, items.size_hint().0, resource_version)?;
        let old = self.swap_in(new)?;
        // Outside the lock, from the contents swapped out: no reader waits for these lookups,
        // nor for the old contents to be freed.
        let previous = with_state!(&old, st => items.map(|(key, _)| st.items.get(&**key).map(|s| st.repr.load(s))).collect());
        drop(old);
        Ok(previous)
    }

    /// New contents of `pairs`, built from a snapshot of the index functions and of the
    /// representation taken under the read lock, without holding it: key and index functions
    /// may run long (and may read the store).
    fn build_outside_lock<'a>(
        &self,
        pairs: impl Iterator<Item = (Arc<str>, &'a Arc<K>)>,
        capacity: usize,
        resource_version: &str,
    ) -> Result<Contents<K>, StoreError>
    where
        K: 'a,
    {
        let snapshot = match &*self.shared.state.read() {
            Contents::Objects(st) => Contents::Objects(State::new(empty_like(&st.indices), st.repr)),
            Contents::Serialized(st) => Contents::Serialized(State::new(empty_like(&st.indices), st.repr)),
        };
        Ok(match snapshot {
            Contents::Objects(st) => {
                let (items, indices) = build(&st.repr, st.indices, pairs, capacity)?;
                Contents::Objects(State {
                    items,
                    indices,
                    resource_version: resource_version.to_owned(),
                    repr: st.repr,
                })
            }
            Contents::Serialized(st) => {
                let (items, indices) = build(&st.repr, st.indices, pairs, capacity)?;
                Contents::Serialized(State {
                    items,
                    indices,
                    resource_version: resource_version.to_owned(),
                    repr: st.repr,
                })
            }
        })
    }

    /// Makes `new` (built from a snapshot of the index functions and of the representation)
    /// the contents, under the write lock, and returns the old contents for the caller to drop
    /// outside it. If the indices or the representation changed in between, `new` is rebuilt
    /// under the lock to match them.
    fn swap_in(&self, new: Contents<K>) -> Result<Contents<K>, StoreError> {
        let mut contents = self.shared.state.write();
        let new = match (&*contents, new) {
            (Contents::Objects(cur), Contents::Objects(new)) if same_indices(&cur.indices, &new.indices) => {
                Contents::Objects(new)
            }
            (Contents::Serialized(cur), Contents::Serialized(new))
                if same_indices(&cur.indices, &new.indices) =>
            {
                Contents::Serialized(new)
            }
            (cur, new) => {
                // `add_indexers` or `set_representation` ran in between: build again, under
                // the lock this time.
                let rv = with_state!(&new, st => st.resource_version.clone());
                match cur {
                    Contents::Objects(cur) => {
                        Contents::Objects(with_state!(&new, st => rebuild(st, cur.repr, &cur.indices, rv))?)
                    }
                    Contents::Serialized(cur) => Contents::Serialized(
                        with_state!(&new, st => rebuild(st, cur.repr, &cur.indices, rv))?,
                    ),
                }
            }
        };
        Ok(std::mem::replace(&mut *contents, new))
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
        with_state!(&*self.shared.state.read(), st => st.resource_version.clone())
    }

    /// Records the resource version of a bookmark (or any event) without changing the contents.
    pub fn update_resource_version(&self, resource_version: &str) {
        with_state!(&mut *self.shared.state.write(), st => {
            st.resource_version.clear();
            st.resource_version.push_str(resource_version);
        });
    }

    /// Adds indices and indexes every object already stored (client-go's `AddIndexers`).
    ///
    /// # Errors
    ///
    /// [`IndexError::Conflict`] if a name is already registered; [`IndexError::IndexFunc`] if a new
    /// index function fails on a stored object. No index is added in either case.
    pub fn add_indexers(&self, indexers: Indexers<K>) -> Result<(), IndexError> {
        with_state!(&mut *self.shared.state.write(), st => {
            let mut conflicts: Vec<String> =
                indexers.keys().filter(|n| st.indices.iter().any(|i| &i.name == *n)).cloned().collect();
            if !conflicts.is_empty() {
                conflicts.sort();
                return Err(IndexError::Conflict { names: conflicts });
            }
            let mut new: Vec<IndexEntry<K, _>> =
                indexers.into_iter().map(|(n, f)| IndexEntry::new(n, f)).collect();
            new.sort_by(|a, b| a.name.cmp(&b.name));
            index_all(&st.repr, &mut new, &st.items)?;
            st.indices.extend(new);
            Ok(())
        })
    }

    /// The registered index functions by name (client-go's `GetIndexers`).
    pub fn get_indexers(&self) -> Indexers<K> {
        with_state!(&*self.shared.state.read(), st => {
            st.indices.iter().map(|i| (i.name.clone(), Arc::clone(&i.func))).collect()
        })
    }

    /// The objects sharing any index value with `obj` on `index_name` (client-go's `Index`).
    ///
    /// # Errors
    ///
    /// [`IndexError::NoSuchIndex`] for an unknown index; [`IndexError::IndexFunc`] if the index
    /// function fails on `obj`.
    pub fn index(&self, index_name: &str, obj: &K) -> Result<Vec<Arc<K>>, IndexError> {
        let contents = self.shared.state.read();
        with_state!(&*contents, st => {
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
            } else {
                // Several values: an object may match more than one, report it once.
                let mut seen: HashSet<*const _, Hasher> = HashSet::default();
                for value in &values {
                    if let Some(set) = idx.values.get(value.as_str()) {
                        set.for_each(|o| {
                            if seen.insert(Arc::as_ptr(o)) {
                                out.push(Arc::clone(o));
                            }
                        });
                    }
                }
            }
            let repr = st.repr;
            drop(contents);
            Ok(load_all(out, &repr))
        })
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
        let contents = self.shared.state.read();
        let mut out = with_state!(&*contents, st => {
            let idx = find(&st.indices, index_name)?;
            let mut out = Vec::new();
            if let Some(set) = idx.values.get(value) {
                out.reserve(set.len());
                set.for_each(|o| {
                    if let Some(key) = <_ as Repr<K>>::slot_key_of(&st.repr, o) {
                        // A serialized store's slot knows its key.
                        out.push(Arc::clone(key));
                    } else if let Ok(key) = (self.shared.key_func)(&st.repr.load(o))
                        && let Some((k, _)) = st.items.get_key_value(key.as_str())
                    {
                        // The key function is deterministic and succeeded when `o` was stored;
                        // hand out the stored key so callers share its allocation.
                        out.push(Arc::clone(k));
                    }
                });
            }
            out
        });
        drop(contents);
        out.sort_unstable();
        Ok(out)
    }

    /// Every value currently present in `index_name`; empty for an unknown index (client-go's
    /// `ListIndexFuncValues`).
    pub fn list_index_func_values(&self, index_name: &str) -> Vec<String> {
        with_state!(&*self.shared.state.read(), st => match find(&st.indices, index_name) {
            Ok(idx) => idx.values.keys().cloned().collect(),
            Err(_) => Vec::new(),
        })
    }

    /// The objects whose `index_name` values include `value`, in time proportional to the result
    /// (client-go's `ByIndex`).
    ///
    /// # Errors
    ///
    /// [`IndexError::NoSuchIndex`] for an unknown index.
    pub fn by_index(&self, index_name: &str, value: &str) -> Result<Vec<Arc<K>>, IndexError> {
        let contents = self.shared.state.read();
        with_state!(&*contents, st => {
            let idx = find(&st.indices, index_name)?;
            let mut out = Vec::new();
            if let Some(set) = idx.values.get(value) {
                out.reserve(set.len());
                set.for_each(|o| out.push(Arc::clone(o)));
            }
            let repr = st.repr;
            drop(contents);
            Ok(load_all(out, &repr))
        })
    }
}

impl<K> Store<K>
where
    K: serde::Serialize + serde::de::DeserializeOwned + Send + Sync + 'static,
{
    /// Changes how the store holds its objects (see [`CacheRepr`]): [`CacheRepr::Serialized`]
    /// keeps each object as its compact JSON and decodes it on every read, for caches too large
    /// to hold decoded. Objects already stored are converted; readers see the same contents
    /// before and after. An informer sets this before it starts
    /// (`SharedIndexInformer::set_cache_representation`).
    ///
    /// # Errors
    ///
    /// [`StoreError::Encode`] if an object cannot be encoded, [`StoreError::Index`] if an index
    /// function fails while the contents are indexed again; the store is unchanged then.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use kcache_store::{CacheRepr, Store, key_func};
    ///
    /// let store = Store::new(key_func(|s: &String| Ok(s.clone())));
    /// store.set_representation(CacheRepr::Serialized).unwrap();
    /// store.add(Arc::new("team-a/web".to_string())).unwrap();
    /// // Each read decodes a new object, equal to the one stored.
    /// let read = store.get_by_key("team-a/web").unwrap();
    /// assert_eq!(*read, "team-a/web");
    /// assert_eq!(store.representation(), CacheRepr::Serialized);
    /// ```
    pub fn set_representation(&self, repr: CacheRepr) -> Result<(), StoreError> {
        let mut contents = self.shared.state.write();
        let new = match (&*contents, repr) {
            (Contents::Objects(_), CacheRepr::Objects) => return Ok(()),
            (Contents::Serialized(st), _) if st.repr.kind() == repr => return Ok(()),
            (Contents::Serialized(st), CacheRepr::Objects) => Contents::Objects(rebuild(
                st,
                Objects,
                &empty_like(&st.indices),
                st.resource_version.clone(),
            )?),
            (cur, _) => {
                let to = match repr {
                    #[cfg(feature = "zstd")]
                    CacheRepr::Compressed => Serialized::zstd(),
                    #[cfg(not(feature = "zstd"))]
                    CacheRepr::Compressed => return Err(StoreError::Unsupported { representation: repr }),
                    _ => Serialized::json(),
                };
                Contents::Serialized(with_state!(cur, st => rebuild(
                    st,
                    to,
                    &empty_like(&st.indices),
                    st.resource_version.clone(),
                ))?)
            }
        };
        let old = std::mem::replace(&mut *contents, new);
        drop(contents);
        drop(old);
        Ok(())
    }
}

/// Whether two index lists are the same registered functions (neither changed in between).
fn same_indices<K, S, T>(a: &[IndexEntry<K, S>], b: &[IndexEntry<K, T>]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(a, b)| a.name == b.name && Arc::ptr_eq(&a.func, &b.func))
}

fn find<'a, K, S>(indices: &'a [IndexEntry<K, S>], name: &str) -> Result<&'a IndexEntry<K, S>, IndexError> {
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

    /// Under the store's own key function (the same `Arc`), the objects are filed under the
    /// keys given, none computed again; under any other, [`replace`](Store::replace).
    fn replace_keyed(
        &self,
        list: Vec<(Arc<str>, Arc<K>)>,
        key_func: &KeyFunc<K>,
        resource_version: &str,
    ) -> Result<(), StoreError> {
        if !Arc::ptr_eq(key_func, &self.shared.key_func) {
            return Store::replace(self, list.into_iter().map(|(_, obj)| obj).collect(), resource_version);
        }
        let pairs = list.iter().map(|(key, obj)| (Arc::clone(key), obj));
        let new = self.build_outside_lock(pairs, list.len(), resource_version)?;
        let old = self.swap_in(new)?;
        drop(list);
        // Outside the lock, as `replace`.
        drop(old);
        Ok(())
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
