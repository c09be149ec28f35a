//! `DeltaFifo`: client-go's DeltaFIFO, a queue of keys where each key carries every change
//! since it was queued.

use std::collections::{HashSet, VecDeque};
use std::hash::BuildHasher;

use hashbrown::HashTable;
use std::fmt;
use std::sync::Arc;

use kcache_store::{BoxError, KeyError, KeyFunc, KnownObjects, StoreError};

use crate::delta::{Delta, DeltaType, Deltas, QueuedDelta, QueuedDeltas};
use crate::error::FifoError;
use crate::fifo::{Core, KEEP_CAPACITY, Popped, QueueBase, QueueState};

type Hasher = foldhash::fast::RandomState;

/// Rewrites an object on its way into a FIFO, e.g. to drop managed fields and save memory
/// (client-go's `TransformFunc`). Not applied to tombstones or to `Sync` deltas from a resync,
/// whose objects already went through it.
pub type TransformFunc<K> = Arc<dyn Fn(Arc<K>) -> Result<Arc<K>, BoxError> + Send + Sync>;

/// Configuration of a [`DeltaFifo`] (client-go's `DeltaFIFOOptions`).
pub struct DeltaFifoOptions<K> {
    /// Computes each object's key.
    pub key_function: KeyFunc<K>,
    /// The objects the consumer already has (usually the informer's indexer): used to find
    /// deletions on a relist, to decide whether a delete is news, and for resync. Without it a
    /// relist only detects deletions of keys still queued, and resync does nothing.
    pub known_objects: Option<Arc<dyn KnownObjects<K>>>,
    /// Emit [`DeltaType::Replaced`] for listed objects; when false, [`DeltaType::Sync`] as old
    /// client-go did (kept for compatibility; informers turn it on).
    pub emit_delta_type_replaced: bool,
    /// Applied to every incoming object except tombstones and resync `Sync`s.
    pub transformer: Option<TransformFunc<K>>,
}

impl<K> DeltaFifoOptions<K> {
    /// Options with `key_function`, no known objects, `Sync` for listed objects and no transformer.
    pub fn new(key_function: KeyFunc<K>) -> Self {
        Self { key_function, known_objects: None, emit_delta_type_replaced: false, transformer: None }
    }

    /// Sets [`known_objects`](Self::known_objects).
    pub fn known_objects(mut self, known: Arc<dyn KnownObjects<K>>) -> Self {
        self.known_objects = Some(known);
        self
    }

    /// Sets [`emit_delta_type_replaced`](Self::emit_delta_type_replaced).
    pub fn emit_delta_type_replaced(mut self, emit: bool) -> Self {
        self.emit_delta_type_replaced = emit;
        self
    }

    /// Sets [`transformer`](Self::transformer).
    pub fn transformer(mut self, transformer: TransformFunc<K>) -> Self {
        self.transformer = Some(transformer);
        self
    }
}

impl<K> Clone for DeltaFifoOptions<K> {
    fn clone(&self) -> Self {
        Self {
            key_function: Arc::clone(&self.key_function),
            known_objects: self.known_objects.clone(),
            emit_delta_type_replaced: self.emit_delta_type_replaced,
            transformer: self.transformer.clone(),
        }
    }
}

impl<K> fmt::Debug for DeltaFifoOptions<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeltaFifoOptions")
            .field("known_objects", &self.known_objects.is_some())
            .field("emit_delta_type_replaced", &self.emit_delta_type_replaced)
            .field("transformer", &self.transformer.is_some())
            .finish_non_exhaustive()
    }
}

/// Client-go's DeltaFIFO: a producer-consumer queue of keys, each carrying the [`Deltas`]
/// accumulated since it was queued.
///
/// * A key is queued once, at the position of its first pending change; later changes append to
///   its deltas without moving it ("line jumpers" keep their place).
/// * Consecutive deletions are collapsed as client-go's `dedupDeltas` does (see
///   [`Deltas`]); nothing else is coalesced.
/// * [`replace`](Self::replace) queues `Replaced` (or `Sync`) for every listed object and a
///   [`DeletedFinalStateUnknown`](kcache_store::DeletedFinalStateUnknown) tombstone for every
///   key that is queued but not listed, or known but neither listed nor queued.
/// * [`pop`] runs the process function while holding the FIFO's lock, so a slow consumer blocks
///   producers: memory stays bounded and latency grows instead.
/// * The queue operations other than adding (`pop`, `close`, `len`, `has_synced`) are those of
///   the [`Fifo`] and [`FifoExt`] traits, which the informer pops through; `len` counts queued
///   keys.
///
/// [`pop`]: crate::FifoExt::pop
/// [`Fifo`]: crate::Fifo
/// [`FifoExt`]: crate::FifoExt
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use kcache_delta_fifo::{DeltaFifo, DeltaFifoOptions, DeltaType, Fifo};
/// use kcache_store::key_func;
///
/// let fifo = DeltaFifo::new(DeltaFifoOptions::new(key_func(|s: &(String, u32)| Ok(s.0.clone()))));
/// fifo.add(Arc::new(("a".to_string(), 1))).unwrap();
/// fifo.update(Arc::new(("b".to_string(), 1))).unwrap();
/// fifo.update(Arc::new(("a".to_string(), 2))).unwrap();
///
/// let mut seen = Vec::new();
/// fifo.pop_blocking(|deltas, _initial| {
///     seen = deltas.iter().map(|d| (d.delta_type, d.obj().1)).collect();
///     Ok::<_, std::convert::Infallible>(())
/// })
/// .unwrap();
/// assert_eq!(seen, [(DeltaType::Added, 1), (DeltaType::Updated, 2)]);
/// assert_eq!(fifo.len(), 1);
/// ```
pub struct DeltaFifo<K> {
    key_func: KeyFunc<K>,
    known_objects: Option<Arc<dyn KnownObjects<K>>>,
    emit_delta_type_replaced: bool,
    transformer: Option<TransformFunc<K>>,
    core: Core<State<K>>,
}

impl<K> fmt::Debug for DeltaFifo<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeltaFifo")
            .field("core", &self.core)
            .field("emit_delta_type_replaced", &self.emit_delta_type_replaced)
            .finish_non_exhaustive()
    }
}

/// One queued key with the deltas pending for it.
struct Entry<K> {
    /// Where the key starts in `State::keys`, as an offset from the first byte ever stored there.
    key_at: u64,
    key_len: usize,
    /// `State::hash_key(key)`.
    hash: u32,
    deltas: QueuedDeltas<K>,
}

/// A popped key: where it was in `State::keys` (its bytes stay there until the next key is
/// queued).
pub(crate) struct PoppedKey {
    at: u64,
    len: usize,
}

/// Dead bytes at the front of `State::keys` tolerated before they are dropped (unless they are
/// less than half of it).
const KEYS_SLACK: usize = 4096;

/// An index slot: the sequence number of a queued key, 4 bytes, so the index stays small enough to
/// be cached. The key's hash is its entry's (`Entry::hash`), read when the index is resized; a
/// stale slot (its key popped) has no entry and may go anywhere, as no lookup can match it.
#[derive(Clone, Copy)]
struct Slot {
    seq: u32,
}

/// The table hash of `s`: its entry's, or 0 for a stale slot (anywhere will do).
fn slot_hash<K>(queue: &VecDeque<Entry<K>>, head: u32, s: &Slot) -> u64 {
    queue.get(s.seq.wrapping_sub(head) as usize).map_or(0, |e| widen(e.hash))
}

/// The 64-bit table hash of a 32-bit key hash: the same bits in both halves, so the table's
/// bucket (low bits) and tag (top bits) both come from the stored 32 bits.
fn widen(h: u32) -> u64 {
    (u64::from(h) << 32) | u64::from(h)
}

/// The key of length `len` stored at offset `at` of a key string whose first byte is at offset
/// `base`; empty if it is no longer there (never the case for a queued entry).
fn key_in(keys: &str, base: u64, at: u64, len: usize) -> &str {
    let start = usize::try_from(at.wrapping_sub(base)).unwrap_or(usize::MAX);
    start.checked_add(len).and_then(|end| keys.get(start..end)).unwrap_or("")
}

/// The queue of keys and their deltas, in one ring buffer.
///
/// A key is queued once, deltas are only ever appended to a queued key, and keys only leave from
/// the front (a pop), so the queue itself holds the entries and never moves one relative to the
/// head: the entry queued with sequence number `seq` (the number of keys queued before it,
/// wrapping at `u32`) sits at position `seq - head`. The index maps a key's hash to sequence
/// numbers, 4 bytes a slot. The keys themselves are stored back to back in one string, in queue
/// order, so queueing and popping a key allocates and frees nothing; the popped keys' bytes at
/// its front are dropped when a key is queued and they are at least half of it (amortised O(1)
/// per byte) or the queue is empty.
///
/// A pop does not touch the index: the popped key's slot goes stale (its position falls outside
/// the queue). Every lookup therefore checks that a slot's position is inside the queue and that
/// the entry there has the key looked up, which also makes a slot whose sequence number wrapped
/// around harmless. When the index is full it is rebuilt from its live slots only: at the same
/// capacity if at least a third of its slots were stale (the O(capacity) rebuild then frees at
/// least capacity / 3 slots, each left by one pop: amortised O(1) per pop), else at twice the
/// capacity (amortised like any growth). So the index only grows while at least two thirds of its
/// slots are live, and hashbrown never rehashes it itself (a stale slot has no hash to go by).
pub(crate) struct State<K> {
    /// Queued keys in the order they were first queued. Invariant: every key at most once, with
    /// a live index slot, and its deltas are never empty.
    queue: VecDeque<Entry<K>>,
    /// The sequence number of `queue[0]`.
    head: u32,
    /// The keys of the queued entries in queue order, after those of some popped ones.
    keys: String,
    /// The number of bytes ever dropped from the front of `keys`.
    keys_base: u64,
    /// A slot for every queued key, plus stale slots of popped keys.
    index: HashTable<Slot>,
    hasher: Hasher,
    /// Set by the first replace, or by an add/update/delete before it.
    populated: bool,
    /// Pops still to go before the first replace's items are all out.
    initial_population_count: usize,
}

impl<K> State<K> {
    fn new() -> Self {
        Self {
            queue: VecDeque::new(),
            head: 0,
            keys: String::new(),
            keys_base: 0,
            index: HashTable::new(),
            hasher: Hasher::default(),
            populated: false,
            initial_population_count: 0,
        }
    }

    fn hash_key(&self, key: &str) -> u32 {
        // Truncation intended: the index keeps 32 bits of hash per slot.
        self.hasher.hash_one(key) as u32
    }

    /// `e`'s key.
    fn key(&self, e: &Entry<K>) -> &str {
        key_in(&self.keys, self.keys_base, e.key_at, e.key_len)
    }

    /// The position in `queue` of `key` (hashed to `h`), if it is queued.
    fn find(&self, key: &str, h: u32) -> Option<usize> {
        let (queue, head, keys, base) = (&self.queue, self.head, &self.keys, self.keys_base);
        let live = |s: &Slot| {
            let pos = s.seq.wrapping_sub(head) as usize;
            queue.get(pos).is_some_and(|e| e.hash == h && key_in(keys, base, e.key_at, e.key_len) == key)
        };
        self.index.find(widen(h), live).map(|s| s.seq.wrapping_sub(head) as usize)
    }

    fn get(&self, key: &str) -> Option<&QueuedDeltas<K>> {
        self.find(key, self.hash_key(key)).map(|p| &self.queue[p].deltas)
    }

    fn contains_key(&self, key: &str) -> bool {
        self.find(key, self.hash_key(key)).is_some()
    }

    /// Appends `delta` to `key`'s deltas, queueing the key at the back if it is not queued.
    fn queue_delta(&mut self, key: &str, delta: Delta<K>) {
        let delta = QueuedDelta::from(delta);
        let h = self.hash_key(key);
        if let Some(pos) = self.find(key, h) {
            self.queue[pos].deltas.push_dedup(delta);
            return;
        }
        if self.index.len() == self.index.capacity() {
            // Full: rebuild without the stale slots, at twice the capacity unless at least a
            // third of the slots were stale. The table never grows by itself, which would rehash
            // stale slots (they have no hash of their own any more) all into one cluster.
            let stale = self.index.len() - self.queue.len();
            let capacity = self.index.capacity();
            self.rebuild_index(if 3 * stale >= capacity && stale > 0 {
                capacity
            } else {
                2 * capacity.max(2)
            });
        }
        // At most u32::MAX keys are queued at once (far beyond memory), so the sequence numbers
        // of queued keys never collide.
        let seq = self.head.wrapping_add(self.queue.len() as u32);
        let (queue, head) = (&self.queue, self.head);
        // There is room (see above), so this never rehashes and the hasher is not called.
        self.index.insert_unique(widen(h), Slot { seq }, |s| slot_hash(queue, head, s));
        self.drop_popped_keys();
        let key_at = self.keys_base + self.keys.len() as u64;
        self.keys.push_str(key);
        self.queue.push_back(Entry { key_at, key_len: key.len(), hash: h, deltas: QueuedDeltas::new(delta) });
    }

    /// Drops the popped keys' bytes from the front of `keys` when the queue is empty or they are
    /// at least half of it (and over [`KEYS_SLACK`]).
    fn drop_popped_keys(&mut self) {
        let end = self.keys_base + self.keys.len() as u64;
        let live_at = self.queue.front().map_or(end, |e| e.key_at);
        let dead = (live_at - self.keys_base) as usize;
        if dead == self.keys.len() {
            self.keys.clear();
            self.keys.shrink_to(KEYS_SLACK);
        } else if dead >= KEYS_SLACK && 2 * dead >= self.keys.len() {
            self.keys.drain(..dead);
        } else {
            return;
        }
        self.keys_base = live_at;
    }

    /// Rebuilds the index with room for at least `capacity` slots, dropping the slots of popped
    /// keys (erasing in place would leave deleted markers that count against the capacity until a
    /// rehash). Every slot kept is live, so each is placed by its entry's hash.
    fn rebuild_index(&mut self, capacity: usize) {
        let (queue, head) = (&self.queue, self.head);
        let mut index = HashTable::with_capacity(capacity.max(queue.len()));
        for s in self.index.iter() {
            let pos = s.seq.wrapping_sub(head) as usize;
            if let Some(e) = queue.get(pos) {
                index.insert_unique(widen(e.hash), *s, |s| slot_hash(queue, head, s));
            }
        }
        self.index = index;
    }
}

impl<K> QueueBase for State<K> {
    fn depth(&self) -> usize {
        self.queue.len()
    }

    fn has_synced(&self) -> bool {
        self.populated && self.initial_population_count == 0
    }
}

impl<K> QueueState<K> for State<K> {
    type Id = PoppedKey;

    fn pop_front(&mut self) -> Option<Popped<K, PoppedKey>> {
        let is_in_initial_list = !self.has_synced();
        let Entry { key_at, key_len, deltas, .. } = self.queue.pop_front()?;
        let key = PoppedKey { at: key_at, len: key_len };
        // The key's index slot goes stale; see `State`.
        self.head = self.head.wrapping_add(1);
        self.initial_population_count = self.initial_population_count.saturating_sub(1);
        if self.queue.is_empty() {
            // Every index slot is stale now, so a large index can go with a large queue. The
            // popped key's bytes stay until the next key is queued (`drop_popped_keys`).
            if self.queue.capacity() > KEEP_CAPACITY {
                self.queue = VecDeque::new();
            }
            if self.index.capacity() > KEEP_CAPACITY {
                self.index = HashTable::new();
            }
        }
        let shared: Arc<str> = Arc::from(key_in(&self.keys, self.keys_base, key_at, key_len));
        Some(Popped { id: key, deltas: deltas.into_deltas(shared), is_in_initial_list })
    }

    fn key_of<'a>(&'a self, id: &'a PoppedKey) -> &'a str {
        // Popping drops no key bytes, so they are there until the next key is queued.
        key_in(&self.keys, self.keys_base, id.at, id.len)
    }
}

impl<K: Send + Sync + 'static> DeltaFifo<K> {
    /// A DeltaFIFO with the given options (client-go's `NewDeltaFIFOWithOptions`).
    pub fn new(options: DeltaFifoOptions<K>) -> Self {
        let state = State::new();
        Self {
            key_func: options.key_function,
            known_objects: options.known_objects,
            emit_delta_type_replaced: options.emit_delta_type_replaced,
            transformer: options.transformer,
            core: Core::new("DeltaFIFO", state),
        }
    }

    /// The key of `obj` under this FIFO's key function.
    ///
    /// # Errors
    ///
    /// Whatever the key function returns.
    pub fn key_of(&self, obj: &K) -> Result<String, KeyError> {
        (self.key_func)(obj)
    }

    fn transform(&self, obj: Arc<K>) -> Result<Arc<K>, StoreError> {
        match &self.transformer {
            Some(t) => t(obj).map_err(StoreError::Transform),
            None => Ok(obj),
        }
    }

    /// Marks the FIFO populated after an add or update that failed: client-go's `Add` and
    /// `Update` set `populated` before computing the key or transforming.
    fn mark_populated(&self, err: StoreError) -> StoreError {
        self.core.mutate(|st| st.populated = true);
        err
    }

    fn enqueue(&self, delta_type: DeltaType, obj: Arc<K>) -> Result<(), StoreError> {
        let key = self.key_of(&obj).map_err(|e| self.mark_populated(e.into()))?;
        // The transformer runs before taking the lock, so a slow transformer does not stall the
        // consumer; the queue order is still the order of the locked section below.
        let obj = self.transform(obj).map_err(|e| self.mark_populated(e))?;
        self.core.mutate(|st| {
            st.populated = true;
            st.queue_delta(&key, Delta::new(delta_type, obj));
        });
        Ok(())
    }

    /// Queues an `Added` delta.
    ///
    /// # Errors
    ///
    /// [`StoreError::Key`] or [`StoreError::Transform`]; nothing is queued then.
    pub fn add(&self, obj: Arc<K>) -> Result<(), StoreError> {
        self.enqueue(DeltaType::Added, obj)
    }

    /// Queues an `Updated` delta.
    ///
    /// # Errors
    ///
    /// [`StoreError::Key`] or [`StoreError::Transform`]; nothing is queued then.
    pub fn update(&self, obj: Arc<K>) -> Result<(), StoreError> {
        self.enqueue(DeltaType::Updated, obj)
    }

    /// Queues a `Deleted` delta, unless the key is neither queued nor known: then the deletion
    /// was already reported by a relist and is skipped.
    ///
    /// # Errors
    ///
    /// [`StoreError::Key`] or [`StoreError::Transform`]; nothing is queued then. A skipped
    /// deletion reports no transform error (client-go skips it before transforming).
    pub fn delete(&self, obj: Arc<K>) -> Result<(), StoreError> {
        let key = self.key_of(&obj)?;
        let obj = self.transform(obj);
        self.core.mutate(|st| {
            st.populated = true;
            let queued = st.contains_key(&key);
            let known = self.known_objects.as_ref().is_some_and(|k| k.contains_key(&key));
            if !queued && !known {
                return Ok(());
            }
            st.queue_delta(&key, Delta::new(DeltaType::Deleted, obj?));
            Ok(())
        })
    }

    /// Applies a full list (client-go's `Replace`): `Replaced` (or `Sync` when
    /// `emit_delta_type_replaced` is off) for every listed object; a tombstone carrying the newest
    /// queued object for every queued key not listed; a tombstone carrying the known object for
    /// every known key neither listed nor queued. The first call sets the initial population
    /// count to listed keys plus tombstones. The resource version is not used by the FIFO.
    ///
    /// A known key whose object vanished between listing the keys and reading it gets no
    /// tombstone (client-go queues one with a nil object; `DeletedFinalStateUnknown::obj` is never
    /// empty here).
    ///
    /// # Errors
    ///
    /// [`StoreError::Key`] or [`StoreError::Transform`] on any listed object; nothing is queued
    /// then.
    pub fn replace(&self, list: Vec<Arc<K>>, resource_version: &str) -> Result<(), StoreError> {
        let _ = resource_version;
        let mut keyed = Vec::with_capacity(list.len());
        for obj in list {
            let key = self.key_of(&obj)?;
            keyed.push((key, self.transform(obj)?));
        }
        let action = if self.emit_delta_type_replaced { DeltaType::Replaced } else { DeltaType::Sync };
        self.core.mutate(|st| {
            let mut listed: HashSet<&str, Hasher> =
                HashSet::with_capacity_and_hasher(keyed.len(), Hasher::default());
            // Into an empty queue (the usual first list), size the tables once instead of
            // rehashing as they grow; otherwise most listed keys may already be queued.
            if st.queue.is_empty() {
                // Every slot is stale: drop them rather than rehash them.
                st.index = HashTable::with_capacity(keyed.len());
                st.queue.reserve(keyed.len());
            }
            for (key, obj) in &keyed {
                listed.insert(key.as_str());
                st.queue_delta(key, Delta::new(action, Arc::clone(obj)));
            }
            let mut queued_deletions = 0;
            // Queued keys not in the list: deleted while we were not watching. Walk the queue (not
            // the map, as client-go does) so the order is deterministic.
            // Appending to queued keys moves no entry, so this can walk the queue in place.
            let (keys, base) = (&st.keys, st.keys_base);
            for entry in st.queue.iter_mut() {
                let key = key_in(keys, base, entry.key_at, entry.key_len);
                if listed.contains(key) {
                    continue;
                }
                let Some(newest) = entry.deltas.newest() else { continue };
                let obj = Arc::clone(newest.obj());
                queued_deletions += 1;
                entry.deltas.push_dedup(Delta::tombstone(key.to_owned(), obj).into());
            }
            if let Some(known) = &self.known_objects {
                for key in known.list_keys() {
                    if listed.contains(&*key) || st.contains_key(&key) {
                        continue;
                    }
                    let Some(obj) = known.get_by_key(&key) else {
                        tracing::debug!(key = %key, "known object vanished during replace; no tombstone");
                        continue;
                    };
                    queued_deletions += 1;
                    st.queue_delta(&key, Delta::tombstone(key.to_string(), obj));
                }
            }
            if !st.populated {
                st.populated = true;
                st.initial_population_count = listed.len() + queued_deletions;
            }
        });
        Ok(())
    }

    /// Queues a `Sync` delta for every known object whose key has nothing queued (client-go's
    /// `Resync`); does nothing without known objects. Keys with queued deltas are skipped so that
    /// a stale known object cannot overtake a newer queued one.
    ///
    /// # Errors
    ///
    /// None today; the `Result` matches [`ReflectorStore::resync`](kcache_store::ReflectorStore::resync).
    pub fn resync(&self) -> Result<(), StoreError> {
        let Some(known) = &self.known_objects else { return Ok(()) };
        self.core.mutate(|st| {
            for key in known.list_keys() {
                if st.contains_key(&key) {
                    continue;
                }
                if let Some(obj) = known.get_by_key(&key) {
                    st.queue_delta(&key, Delta::new(DeltaType::Sync, obj));
                }
            }
        });
        Ok(())
    }

    /// The newest object of every queued key, in queue order (client-go's `List`, which 1.33
    /// removed).
    pub fn list(&self) -> Vec<Arc<K>> {
        self.core.read(|st| {
            st.queue.iter().filter_map(|e| e.deltas.newest().map(|d| Arc::clone(d.obj()))).collect()
        })
    }

    /// Every queued key, in queue order (client-go's `ListKeys`, which 1.33 removed).
    pub fn list_keys(&self) -> Vec<Arc<str>> {
        self.core.read(|st| st.queue.iter().map(|e| Arc::from(st.key(e))).collect())
    }

    /// A copy of the deltas queued for `key` (client-go's `GetByKey`, which 1.33 removed).
    pub fn get_by_key(&self, key: &str) -> Option<Deltas<K>> {
        self.core.read(|st| st.get(key).map(QueuedDeltas::to_deltas))
    }

    /// A copy of the deltas queued for `obj`'s key (client-go's `Get`, which 1.33 removed).
    ///
    /// # Errors
    ///
    /// Whatever the key function returns.
    pub fn get(&self, obj: &K) -> Result<Option<Deltas<K>>, KeyError> {
        let key = self.key_of(obj)?;
        Ok(self.get_by_key(&key))
    }

    /// The blocking twin of [`pop`] (client-go's `Pop`): parks the thread until a key is queued
    /// or the FIFO is closed. Unlike [`Fifo::pop_blocking`] it takes any closure and error type,
    /// as [`pop`] does.
    ///
    /// [`pop`]: crate::FifoExt::pop
    /// [`Fifo::pop_blocking`]: crate::Fifo::pop_blocking
    ///
    /// # Errors
    ///
    /// [`FifoError::Closed`] once closed and empty; [`FifoError::Process`] with `process`'s error.
    pub fn pop_blocking<P, E>(&self, mut process: P) -> Result<(), FifoError>
    where
        P: FnMut(Deltas<K>, bool) -> Result<(), E>,
        E: Into<BoxError>,
    {
        self.core.pop_blocking(&mut |d, i| process(d, i).map_err(Into::into))
    }
}

crate::fifo::impl_fifo_traits!(DeltaFifo);

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::Arc;

    use super::State;
    use crate::delta::{Delta, DeltaType};
    use crate::fifo::{QueueBase, QueueState};

    /// A splitmix64 step: deterministic pseudo-random numbers without a dependency.
    fn next(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Drives the queue state through a long random run of queueing and popping (with the
    /// sequence numbers wrapping around `u32` part-way), against a plain model: every pop, lookup
    /// and depth must agree, and stale index slots must stay bounded.
    fn churn(keys: u64, steps: usize, pop_percent: u64, seed: u64) {
        let mut st: State<u64> = State::new();
        st.head = u32::MAX - 1000;
        let mut model: VecDeque<(String, Vec<u64>)> = VecDeque::new();
        let mut rng = seed;
        let mut max_depth = 0;
        for step in 0..steps {
            let r = next(&mut rng);
            if r % 100 < pop_percent {
                let got = st.pop_front().map(|p| {
                    (st.key_of(&p.id).to_string(), p.deltas.iter().map(|d| **d.obj()).collect::<Vec<_>>())
                });
                assert_eq!(got, model.pop_front(), "pop at step {step}");
            } else {
                let key = format!("ns/key-{}", (r >> 8) % keys);
                let v = step as u64;
                st.queue_delta(&key, Delta::new(DeltaType::Updated, Arc::new(v)));
                match model.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, vs)) => vs.push(v),
                    None => model.push_back((key, vec![v])),
                }
            }
            assert_eq!(st.depth(), model.len());
            max_depth = max_depth.max(model.len());
            let probe = format!("ns/key-{}", next(&mut rng) % keys);
            let want = model.iter().find(|(k, _)| *k == probe).map(|(_, vs)| vs.clone());
            let got = st.get(&probe).map(|d| d.to_deltas().iter().map(|d| **d.obj()).collect::<Vec<_>>());
            assert_eq!(got, want, "lookup of {probe} at step {step}");
            // Live slots plus stale ones: the index only grows while two thirds are live.
            assert!(st.index.len() <= 3 * max_depth + 16, "index {} for depth {max_depth}", st.index.len());
            // Keys here are at most 14 bytes; popped ones are dropped once they are half the string.
            let bound = 2 * 14 * max_depth + super::KEYS_SLACK + 14;
            assert!(st.keys.len() <= bound, "key bytes {} for depth {max_depth}", st.keys.len());
        }
        while let Some(p) = st.pop_front() {
            assert_eq!(Some(st.key_of(&p.id).to_string()), model.pop_front().map(|(k, _)| k));
        }

        assert!(model.is_empty());
    }

    /// A relist queues a key per object; once they are all popped the queue, the index and the
    /// key string no longer keep buffers sized for it, and the FIFO works on as before.
    #[test]
    fn a_drained_relist_frees_its_buffers() {
        let mut st: State<u64> = State::new();
        for n in 0..5000u64 {
            st.queue_delta(&format!("ns/key-{n}"), Delta::new(DeltaType::Replaced, Arc::new(n)));
        }
        assert!(st.queue.capacity() >= 5000 && st.index.capacity() >= 5000);
        let mut last = None;
        while let Some(p) = st.pop_front() {
            last = Some(st.key_of(&p.id).to_string());
        }
        assert_eq!(last.as_deref(), Some("ns/key-4999"));
        assert!(st.queue.capacity() <= super::KEEP_CAPACITY);
        assert!(st.index.capacity() <= super::KEEP_CAPACITY);
        st.queue_delta("ns/again", Delta::new(DeltaType::Added, Arc::new(1)));
        assert!(st.keys.capacity() <= super::KEYS_SLACK);
        assert!(st.contains_key("ns/again") && !st.contains_key("ns/key-1"));
        let p = st.pop_front().unwrap();
        assert_eq!(st.key_of(&p.id), "ns/again");
    }

    /// A full index is rebuilt from its live slots: grown when few slots are stale, at the same
    /// capacity when many are; stale slots are never carried into the new table (hashbrown's own
    /// rehash would pile them into one cluster, as they have no hash).
    #[test]
    fn a_full_index_is_rebuilt_from_live_slots_only() {
        let mut st: State<u64> = State::new();
        let mut n = 0u64;
        let mut push = |st: &mut State<u64>| {
            st.queue_delta(&format!("ns/k{n}"), Delta::new(DeltaType::Added, Arc::new(n)));
            n += 1;
        };
        for _ in 0..100 {
            push(&mut st);
        }
        // Fills the index, pops `pops(capacity)` keys, then queues one more key, which finds the
        // index full; returns the capacity it was full at.
        let mut fill_pop_push = |st: &mut State<u64>, pops: fn(usize) -> usize| {
            while st.index.len() < st.index.capacity() {
                push(st);
            }
            let full = st.index.capacity();
            for _ in 0..pops(full) {
                st.pop_front();
            }
            push(st);
            full
        };
        // A few pops (under a third): the next key grows the index, without the stale slots.
        let full = fill_pop_push(&mut st, |c| c / 10);
        assert_eq!(st.index.len(), st.queue.len());
        assert!(st.index.capacity() >= 2 * full, "grew from {full} to {}", st.index.capacity());
        // Many pops (over a third): the next full index is rebuilt at the same capacity.
        let full = fill_pop_push(&mut st, |c| c / 2);
        assert_eq!(st.index.len(), st.queue.len());
        assert_eq!(st.index.capacity(), full);
        // Every queued key is still found.
        let queued: Vec<String> = st
            .queue
            .iter()
            .map(|e| super::key_in(&st.keys, st.keys_base, e.key_at, e.key_len).to_owned())
            .collect();
        for k in &queued {
            assert!(st.get(k).is_some(), "{k}");
        }
    }

    #[test]
    fn a_queued_delta_takes_16_bytes() {
        assert_eq!(std::mem::size_of::<crate::delta::QueuedDelta<u64>>(), 16);
    }

    #[test]
    fn churn_with_few_keys_queued() {
        churn(64, 20_000, 50, 1);
    }

    #[test]
    fn churn_with_a_deep_queue() {
        churn(2_000, 30_000, 30, 2);
    }

    #[test]
    fn churn_draining_and_refilling() {
        churn(500, 30_000, 60, 3);
    }
}
