//! `DeltaFifo`: client-go's DeltaFIFO, a queue of keys where each key carries every change
//! since it was queued.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::sync::Arc;

use kcache_store::{BoxError, KeyError, KeyFunc, KnownObjects, StoreError};

use crate::delta::{Delta, DeltaType, Deltas};
use crate::error::FifoError;
use crate::fifo::{Core, FifoExt, Pop, Popped, QueueBase, QueueState};

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
/// * [`pop`](Self::pop) runs the process function while holding the FIFO's lock, so a slow
///   consumer blocks producers: memory stays bounded and latency grows instead.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use kcache_delta_fifo::{DeltaFifo, DeltaFifoOptions, DeltaType};
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

pub(crate) struct State<K> {
    /// Key -> pending deltas. Invariant: a key is in `items` iff it is in `queue`, exactly once,
    /// and its deltas are never empty.
    items: HashMap<Arc<str>, Deltas<K>, Hasher>,
    /// Keys in the order they were first queued.
    queue: VecDeque<Arc<str>>,
    /// Set by the first replace, or by an add/update/delete before it.
    populated: bool,
    /// Pops still to go before the first replace's items are all out.
    initial_population_count: usize,
}

impl<K> State<K> {
    fn queue_delta(&mut self, key: &str, delta: Delta<K>) {
        if let Some(deltas) = self.items.get_mut(key) {
            deltas.push_dedup(delta);
        } else {
            let key: Arc<str> = Arc::from(key);
            self.queue.push_back(Arc::clone(&key));
            self.items.insert(key, Deltas(vec![delta]));
        }
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
    fn pop_front(&mut self) -> Option<Popped<K>> {
        loop {
            let is_in_initial_list = !self.has_synced();
            let id = self.queue.pop_front()?;
            self.initial_population_count = self.initial_population_count.saturating_sub(1);
            // The invariant says this always succeeds; client-go skips the key if not.
            if let Some(deltas) = self.items.remove(&id) {
                return Some(Popped { id, deltas, is_in_initial_list });
            }
        }
    }
}

impl<K: Send + Sync + 'static> DeltaFifo<K> {
    /// A DeltaFIFO with the given options (client-go's `NewDeltaFIFOWithOptions`).
    pub fn new(options: DeltaFifoOptions<K>) -> Self {
        let state = State {
            items: HashMap::default(),
            queue: VecDeque::new(),
            populated: false,
            initial_population_count: 0,
        };
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

    fn enqueue(&self, delta_type: DeltaType, obj: Arc<K>) -> Result<(), StoreError> {
        let key = self.key_of(&obj)?;
        // The transformer runs before taking the lock, so a slow transformer does not stall the
        // consumer; the queue order is still the order of the locked section below.
        let obj = self.transform(obj)?;
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
    /// [`StoreError::Key`] or [`StoreError::Transform`]; nothing is queued then.
    pub fn delete(&self, obj: Arc<K>) -> Result<(), StoreError> {
        let key = self.key_of(&obj)?;
        let obj = self.transform(obj)?;
        self.core.mutate(|st| {
            st.populated = true;
            let queued = st.items.contains_key(key.as_str());
            let known = self.known_objects.as_ref().is_some_and(|k| k.contains_key(&key));
            if !queued && !known {
                return;
            }
            st.queue_delta(&key, Delta::new(DeltaType::Deleted, obj));
        });
        Ok(())
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
            if st.items.is_empty() {
                st.items.reserve(keyed.len());
                st.queue.reserve(keyed.len());
            }
            for (key, obj) in &keyed {
                listed.insert(key.as_str());
                st.queue_delta(key, Delta::new(action, Arc::clone(obj)));
            }
            let mut queued_deletions = 0;
            // Queued keys not in the list: deleted while we were not watching. Walk the queue (not
            // the map, as client-go does) so the order is deterministic.
            let missing: Vec<Arc<str>> =
                st.queue.iter().filter(|k| !listed.contains(&***k)).cloned().collect();
            for key in missing {
                let Some(newest) = st.items.get(&key).and_then(|d| d.newest()) else { continue };
                let obj = Arc::clone(newest.obj());
                queued_deletions += 1;
                st.queue_delta(&key, Delta::tombstone(key.to_string(), obj));
            }
            if let Some(known) = &self.known_objects {
                for key in known.list_keys() {
                    if listed.contains(&*key) || st.items.contains_key(&key) {
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
                if st.items.contains_key(&key) {
                    continue;
                }
                if let Some(obj) = known.get_by_key(&key) {
                    st.queue_delta(&key, Delta::new(DeltaType::Sync, obj));
                }
            }
        });
        Ok(())
    }

    /// The newest object of every queued key, in queue order (client-go's `List`).
    pub fn list(&self) -> Vec<Arc<K>> {
        self.core.read(|st| {
            st.queue
                .iter()
                .filter_map(|k| st.items.get(k).and_then(|d| d.newest()).map(|d| Arc::clone(d.obj())))
                .collect()
        })
    }

    /// Every queued key, in queue order (client-go's `ListKeys`).
    pub fn list_keys(&self) -> Vec<Arc<str>> {
        self.core.read(|st| st.queue.iter().cloned().collect())
    }

    /// A copy of the deltas queued for `key` (client-go's `GetByKey`).
    pub fn get_by_key(&self, key: &str) -> Option<Deltas<K>> {
        self.core.read(|st| st.items.get(key).cloned())
    }

    /// A copy of the deltas queued for `obj`'s key (client-go's `Get`).
    ///
    /// # Errors
    ///
    /// Whatever the key function returns.
    pub fn get(&self, obj: &K) -> Result<Option<Deltas<K>>, KeyError> {
        let key = self.key_of(obj)?;
        Ok(self.get_by_key(&key))
    }

    /// Waits for a key, pops it and runs `process(deltas, is_in_initial_list)` under the lock.
    /// See [`FifoExt::pop`].
    ///
    /// # Errors
    ///
    /// [`FifoError::Closed`] once closed and empty; [`FifoError::Process`] with `process`'s error.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: an item is removed only in the poll that processes it and completes.
    pub fn pop<P, E>(&self, process: P) -> Pop<'_, K, Self, P>
    where
        P: FnMut(Deltas<K>, bool) -> Result<(), E>,
        E: Into<BoxError>,
    {
        FifoExt::pop(self, process)
    }

    /// The blocking twin of [`pop`](Self::pop) (client-go's `Pop`): parks the thread until a
    /// key is queued or the FIFO is closed.
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

    /// Closes the FIFO: pops drain what is queued, then return [`FifoError::Closed`].
    pub fn close(&self) {
        self.core.close();
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.core.is_closed()
    }

    /// Whether the first replace's items have all been popped, or an add, update or delete came
    /// first (client-go's `HasSynced`). Lock-free.
    pub fn has_synced(&self) -> bool {
        self.core.has_synced()
    }

    /// The number of queued keys. Lock-free, for metrics.
    pub fn len(&self) -> usize {
        self.core.len()
    }

    /// Whether no key is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

crate::fifo::impl_fifo_traits!(DeltaFifo);
