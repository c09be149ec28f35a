//! `RealFifo`: client-go's RealFIFO, the in-order FIFO informers use since client-go 1.33;
//! every delta is kept and delivered in arrival order, one per pop, except that a relist or a
//! resync is one atomic pop (client-go's `AtomicFIFO`, on by default since 1.36).

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::sync::Arc;

use kcache_store::{BoxError, KeyError, KeyFunc, KnownObjects, StoreError};

use crate::delta::{AtomicEvent, Delta, DeltaType, Deltas};
use crate::delta_fifo::TransformFunc;
use crate::error::FifoError;
use crate::fifo::{Core, KEEP_CAPACITY, Popped, QueueBase, QueueState};

type Hasher = foldhash::fast::RandomState;

/// Configuration of a [`RealFifo`] (client-go's `RealFIFOOptions`). Known objects are required.
pub struct RealFifoOptions<K> {
    /// Computes each object's key.
    pub key_function: KeyFunc<K>,
    /// The objects the consumer already has (usually the informer's indexer): used to find
    /// deletions on a relist and for resync.
    pub known_objects: Arc<dyn KnownObjects<K>>,
    /// Applied to every incoming object except tombstones and resync `Sync`s.
    pub transformer: Option<TransformFunc<K>>,
    /// Queue a relist and a resync as one item each, popped as an [`AtomicEvent`] (client-go's
    /// `AtomicEvents`, which informers turn on with the `AtomicFIFO` feature gate: beta and on by
    /// default since client-go 1.36). True by default, as it is for client-go's informers (a
    /// `RealFIFOOptions` written by hand starts with it false).
    ///
    /// On: [`replace`](RealFifo::replace) queues one `ReplacedAll` item and
    /// [`resync`](RealFifo::resync) one `SyncAll` item. Their pop hands over every delta of the
    /// relist (tombstones for the known objects the list lacks, then `Replaced` in list order)
    /// or of the resync (`Sync` for every known object) at once, computed against the known
    /// objects when it is popped, so after everything queued before it has been processed.
    /// A consumer applies the whole relist to its store before it notifies anyone: readers of
    /// an informer's cache never see half of a relist.
    ///
    /// Off: the client-go 1.33 to 1.35 behaviour. Every delta of a relist or a resync is its own
    /// item and its own pop, computed when it is queued (against the queue and the known
    /// objects).
    pub atomic_events: bool,
}

impl<K> RealFifoOptions<K> {
    /// Options without a transformer, with [`atomic_events`](Self::atomic_events) on.
    pub fn new(key_function: KeyFunc<K>, known_objects: Arc<dyn KnownObjects<K>>) -> Self {
        Self { key_function, known_objects, transformer: None, atomic_events: true }
    }

    /// Sets [`transformer`](Self::transformer).
    pub fn transformer(mut self, transformer: TransformFunc<K>) -> Self {
        self.transformer = Some(transformer);
        self
    }

    /// Sets [`atomic_events`](Self::atomic_events); `false` selects client-go 1.33's one delta
    /// per pop.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use kcache_delta_fifo::{Fifo, RealFifo, RealFifoOptions};
    /// use kcache_store::{key_func, Store};
    ///
    /// let kf = key_func(|s: &String| Ok(s.clone()));
    /// let known = Arc::new(Store::new(kf.clone()));
    /// let atomic = RealFifo::new(RealFifoOptions::new(kf.clone(), known.clone()));
    /// let per_delta = RealFifo::new(RealFifoOptions::new(kf, known).atomic_events(false));
    /// for f in [&atomic, &per_delta] {
    ///     f.replace(vec![Arc::new("a".to_string()), Arc::new("b".to_string())], "7").unwrap();
    /// }
    /// assert_eq!(atomic.len(), 1);
    /// assert_eq!(per_delta.len(), 2);
    /// ```
    pub fn atomic_events(mut self, atomic: bool) -> Self {
        self.atomic_events = atomic;
        self
    }
}

impl<K> fmt::Debug for RealFifoOptions<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RealFifoOptions")
            .field("transformer", &self.transformer.is_some())
            .field("atomic_events", &self.atomic_events)
            .finish_non_exhaustive()
    }
}

/// Client-go's RealFIFO: every change queued in arrival order and popped one at a time, with no
/// per-key collapsing, so a handler sees every intermediate state and deletions of objects it
/// never saw.
///
/// * [`add`](Self::add), [`update`](Self::update) and [`delete`](Self::delete) always queue.
/// * With [`atomic_events`](RealFifoOptions::atomic_events) (the default, client-go's
///   `AtomicFIFO`): [`replace`](Self::replace) queues one item, and its pop hands over the
///   whole relist as one [`AtomicEvent::ReplacedAll`]: tombstones for the known objects the
///   list lacks, then `Replaced` for every listed object. [`resync`](Self::resync) queues one
///   item whose pop is an [`AtomicEvent::SyncAll`]: `Sync` for every known object. Both are
///   computed against the known objects when popped, so after everything queued before them.
/// * Without: [`replace`](Self::replace) queues tombstones first (for queued keys whose last
///   delta is not a deletion, then for known keys neither listed nor queued), then `Replaced`
///   for every listed object, each a pop of its own; [`resync`](Self::resync) queues `Sync` for
///   every known object with nothing queued.
/// * The first replace's whole queue is the initial population.
/// * [`pop`] hands one delta (as a one-element [`Deltas`]), or one atomic event, to the process
///   function, under the lock.
/// * The queue operations other than adding (`pop`, `close`, `len`, `has_synced`) are those of
///   the [`Fifo`] and [`FifoExt`] traits, which the informer pops through; `len` counts queued
///   items: deltas, and atomic events as one each.
///
/// [`pop`]: crate::FifoExt::pop
/// [`Fifo`]: crate::Fifo
/// [`FifoExt`]: crate::FifoExt
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use kcache_delta_fifo::{DeltaType, Fifo, RealFifo, RealFifoOptions};
/// use kcache_store::{key_func, Store};
///
/// let kf = key_func(|s: &(String, u32)| Ok(s.0.clone()));
/// let known = Store::new(kf.clone());
/// let fifo = RealFifo::new(RealFifoOptions::new(kf, Arc::new(known)));
/// fifo.add(Arc::new(("a".to_string(), 1))).unwrap();
/// fifo.update(Arc::new(("a".to_string(), 2))).unwrap();
/// assert_eq!(fifo.len(), 2);
///
/// let mut types = Vec::new();
/// while !fifo.is_empty() {
///     fifo.pop_blocking(|d, _| {
///         types.push(d[0].delta_type);
///         Ok::<_, std::convert::Infallible>(())
///     })
///     .unwrap();
/// }
/// assert_eq!(types, [DeltaType::Added, DeltaType::Updated]);
/// ```
pub struct RealFifo<K> {
    key_func: KeyFunc<K>,
    known_objects: Arc<dyn KnownObjects<K>>,
    transformer: Option<TransformFunc<K>>,
    atomic_events: bool,
    core: Core<State<K>>,
}

impl<K> fmt::Debug for RealFifo<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RealFifo")
            .field("core", &self.core)
            .field("atomic_events", &self.atomic_events)
            .finish_non_exhaustive()
    }
}

/// One queued item.
enum Item<K> {
    /// A delta and the key it was queued under.
    Delta(Arc<str>, Delta<K>),
    /// An atomic relist: the listed objects (keyed, transformed) and the list's version. Boxed:
    /// rare, and the queue's slots stay the size of a delta.
    ReplacedAll(Box<ReplacedAll<K>>),
    /// An atomic resync.
    SyncAll,
}

/// What an atomic [`RealFifo::replace`] queues (client-go's `ReplacedAllInfo`).
struct ReplacedAll<K> {
    resource_version: String,
    /// The listed objects with their keys, in list order.
    objects: Vec<(Arc<str>, Arc<K>)>,
}

pub(crate) struct State<K> {
    /// Every queued item, oldest first. Atomic items only with `atomic_events`.
    items: VecDeque<Item<K>>,
    /// Set by the first replace, or by an add/update/delete before it.
    populated: bool,
    /// Pops still to go before the first replace's items are all out.
    initial_population_count: usize,
    /// The FIFO's known objects: an atomic item's deltas are computed against them when it is
    /// popped (under the lock, so after the process function of every earlier item returned).
    known_objects: Arc<dyn KnownObjects<K>>,
}

impl<K> QueueBase for State<K> {
    fn depth(&self) -> usize {
        self.items.len()
    }

    fn has_synced(&self) -> bool {
        self.populated && self.initial_population_count == 0
    }
}

impl<K> QueueState<K> for State<K> {
    type Id = Arc<str>;

    fn pop_front(&mut self) -> Option<Popped<K, Arc<str>>> {
        let is_in_initial_list = !self.has_synced();
        let item = self.items.pop_front()?;
        self.initial_population_count = self.initial_population_count.saturating_sub(1);
        if self.items.is_empty() && self.items.capacity() > KEEP_CAPACITY {
            // A relist queued a delta per object; keep no buffer sized for it once it is drained.
            self.items = VecDeque::new();
        }
        let (id, deltas) = match item {
            Item::Delta(id, delta) => {
                let deltas = Deltas::with_key(Arc::clone(&id), vec![delta]);
                (id, deltas)
            }
            Item::ReplacedAll(r) => (Arc::from("ReplacedAll"), replaced_all(*r, &*self.known_objects)),
            Item::SyncAll => (Arc::from("SyncAll"), sync_all(&*self.known_objects)),
        };
        Some(Popped { id, deltas, is_in_initial_list })
    }

    fn key_of<'a>(&'a self, id: &'a Arc<str>) -> &'a str {
        id
    }
}

/// The deltas of an atomic relist, against the known objects as they are now (client-go's
/// `processReplacedAllInfo`, which runs `reconcileReplacement` against the informer's store with
/// no queued items): a tombstone carrying the known object for every known key not listed, then
/// `Replaced` for every listed object, in list order.
fn replaced_all<K>(r: ReplacedAll<K>, known_objects: &dyn KnownObjects<K>) -> Deltas<K> {
    let ReplacedAll { resource_version, objects } = r;
    let known_keys = known_objects.list_keys();
    let mut keys: Vec<Arc<str>> = Vec::new();
    let mut deltas: Vec<Delta<K>> = Vec::new();
    if !known_keys.is_empty() {
        let listed: HashSet<&str, Hasher> = objects.iter().map(|(k, _)| &**k).collect();
        for key in known_keys {
            if listed.contains(&*key) {
                continue;
            }
            let Some(obj) = known_objects.get_by_key(&key) else {
                tracing::debug!(key = %key, "known object vanished during replace; no tombstone");
                continue;
            };
            deltas.push(Delta::tombstone(key.to_string(), obj));
            keys.push(key);
        }
    }
    // Exact sizes: a relist of 50k objects is a few megabytes of deltas.
    keys.reserve_exact(objects.len());
    deltas.reserve_exact(objects.len());
    for (key, obj) in objects {
        keys.push(key);
        deltas.push(Delta::new(DeltaType::Replaced, obj));
    }
    Deltas::atomic(AtomicEvent::ReplacedAll { resource_version }, keys, deltas)
}

/// The deltas of an atomic resync: `Sync` for every known object (client-go's `SyncAll`, which
/// the informer turns into `OnUpdate(obj, obj)` for every object of its store). Nothing queued
/// before it can be pending: it is popped after all of it.
fn sync_all<K>(known_objects: &dyn KnownObjects<K>) -> Deltas<K> {
    let known_keys = known_objects.list_keys();
    let mut keys = Vec::with_capacity(known_keys.len());
    let mut deltas = Vec::with_capacity(known_keys.len());
    for key in known_keys {
        if let Some(obj) = known_objects.get_by_key(&key) {
            deltas.push(Delta::new(DeltaType::Sync, obj));
            keys.push(key);
        }
    }
    Deltas::atomic(AtomicEvent::SyncAll, keys, deltas)
}

impl<K: Send + Sync + 'static> RealFifo<K> {
    /// An in-order FIFO with the given options (client-go's `NewRealFIFOWithOptions`).
    pub fn new(options: RealFifoOptions<K>) -> Self {
        let state = State {
            items: VecDeque::new(),
            populated: false,
            initial_population_count: 0,
            known_objects: Arc::clone(&options.known_objects),
        };
        Self {
            key_func: options.key_function,
            known_objects: options.known_objects,
            transformer: options.transformer,
            atomic_events: options.atomic_events,
            core: Core::new("RealFIFO", state),
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

    /// Marks the FIFO populated after an add, update or delete that failed: client-go's `Add`,
    /// `Update` and `Delete` set `populated` before computing the key or transforming.
    fn mark_populated(&self, err: StoreError) -> StoreError {
        self.core.mutate(|st| st.populated = true);
        err
    }

    fn enqueue(&self, delta_type: DeltaType, obj: Arc<K>) -> Result<(), StoreError> {
        let key: Arc<str> = Arc::from(self.key_of(&obj).map_err(|e| self.mark_populated(e.into()))?);
        let obj = self.transform(obj).map_err(|e| self.mark_populated(e))?;
        self.core.mutate(|st| {
            st.populated = true;
            st.items.push_back(Item::Delta(key, Delta::new(delta_type, obj)));
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

    /// Queues a `Deleted` delta. Unlike the DeltaFIFO, always: the handler decides what a
    /// deletion of an unknown object means.
    ///
    /// # Errors
    ///
    /// [`StoreError::Key`] or [`StoreError::Transform`]; nothing is queued then.
    pub fn delete(&self, obj: Arc<K>) -> Result<(), StoreError> {
        self.enqueue(DeltaType::Deleted, obj)
    }

    /// Applies a full list (client-go's `Replace`). The first call makes the whole queue the
    /// initial population.
    ///
    /// With [`atomic_events`](RealFifoOptions::atomic_events): queues the list as one item, popped
    /// as an [`AtomicEvent::ReplacedAll`] whose deltas are computed then.
    ///
    /// Without: queues first a tombstone for every queued key not listed whose last queued delta
    /// is not a deletion (carrying that delta's object), in first-queued order; then a tombstone
    /// for every known key neither listed nor queued; then `Replaced` for every listed object.
    ///
    /// # Errors
    ///
    /// [`StoreError::Key`] or [`StoreError::Transform`] on any listed object; nothing is queued
    /// then.
    pub fn replace(&self, list: Vec<Arc<K>>, resource_version: &str) -> Result<(), StoreError> {
        let mut keyed = Vec::with_capacity(list.len());
        for obj in list {
            let key: Arc<str> = Arc::from(self.key_of(&obj)?);
            keyed.push((key, self.transform(obj)?));
        }
        self.replace_with(keyed, resource_version)
    }

    /// [`replace`](Self::replace) with the keys `key_func` computed for the objects (a
    /// reflector's watch-list hands them on: `ReflectorStore::replace_keyed`). When `key_func` is
    /// this FIFO's own key function (the same `Arc`), the objects are queued under these keys and
    /// the key function is not called again; otherwise the keys are ignored and this is
    /// `replace`. Each key is then computed once per object per watch-list instead of twice,
    /// the second time long after the object was decoded, when it is no longer in the CPU's
    /// cache, and `list` itself is what is queued (docs/benchmarks.md, "Watch-list sync: keys
    /// once, fewer hand-offs").
    ///
    /// # Errors
    ///
    /// As [`replace`](Self::replace).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use kcache_delta_fifo::{Fifo, RealFifo, RealFifoOptions};
    /// use kcache_store::{key_func, Store};
    ///
    /// let kf = key_func(|s: &String| Ok(s.clone()));
    /// let known = Arc::new(Store::new(kf.clone()));
    /// let fifo = RealFifo::new(RealFifoOptions::new(kf.clone(), known));
    /// fifo.replace_keyed(vec![(Arc::from("a"), Arc::new("a".to_string()))], &kf, "1").unwrap();
    /// assert_eq!(fifo.len(), 1);
    /// ```
    pub fn replace_keyed(
        &self,
        list: Vec<(Arc<str>, Arc<K>)>,
        key_func: &KeyFunc<K>,
        resource_version: &str,
    ) -> Result<(), StoreError> {
        if !Arc::ptr_eq(key_func, &self.key_func) {
            return self.replace(list.into_iter().map(|(_, obj)| obj).collect(), resource_version);
        }
        // The list is queued as it is, without a new table of keys (only a transformer maps
        // it, in place).
        let keyed = match &self.transformer {
            None => list,
            Some(_) => list
                .into_iter()
                .map(|(key, obj)| Ok((key, self.transform(obj)?)))
                .collect::<Result<Vec<_>, StoreError>>()?,
        };
        self.replace_with(keyed, resource_version)
    }

    /// The rest of [`replace`](Self::replace), once every object has its key and is transformed.
    fn replace_with(&self, keyed: Vec<(Arc<str>, Arc<K>)>, resource_version: &str) -> Result<(), StoreError> {
        if self.atomic_events {
            let item = ReplacedAll { resource_version: resource_version.to_owned(), objects: keyed };
            self.core.mutate(|st| {
                st.items.push_back(Item::ReplacedAll(Box::new(item)));
                Self::mark_replaced(st);
            });
            return Ok(());
        }
        self.core.mutate(|st| {
            let known_keys = self.known_objects.list_keys();
            let tombstones = if st.items.is_empty() && known_keys.is_empty() {
                // Nothing queued or known (a first list): nothing can be missing from it.
                Vec::new()
            } else {
                Self::tombstones(st, &keyed, known_keys, &*self.known_objects)
            };
            st.items.reserve(tombstones.len() + keyed.len());
            st.items.extend(tombstones.into_iter().map(|(key, delta)| Item::Delta(key, delta)));
            for (key, obj) in keyed {
                st.items.push_back(Item::Delta(key, Delta::new(DeltaType::Replaced, obj)));
            }
            Self::mark_replaced(st);
        });
        Ok(())
    }

    /// The first replace makes everything queued the initial population (client-go counts
    /// `len(f.items)`, an atomic relist being one item).
    fn mark_replaced(st: &mut State<K>) {
        if !st.populated {
            st.populated = true;
            st.initial_population_count = st.items.len();
        }
    }

    /// A tombstone for each key queued or known but not `listed` by a replace: the last state
    /// queued for it, or else the known object.
    fn tombstones(
        st: &State<K>,
        listed: &[(Arc<str>, Arc<K>)],
        known_keys: Vec<Arc<str>>,
        known_objects: &dyn KnownObjects<K>,
    ) -> Vec<(Arc<str>, Delta<K>)> {
        let listed: HashSet<&str, Hasher> = listed.iter().map(|(k, _)| &**k).collect();
        // The last queued delta per key, and the keys in first-queued order.
        let mut last: HashMap<&str, usize, Hasher> = HashMap::default();
        let mut order: Vec<&str> = Vec::new();
        for (i, item) in st.items.iter().enumerate() {
            // Only deltas: atomic items are never queued without `atomic_events`, and this
            // function runs only without it.
            if let Item::Delta(k, _) = item
                && last.insert(&**k, i).is_none()
            {
                order.push(k);
            }
        }
        let mut tombstones: Vec<(Arc<str>, Delta<K>)> = Vec::new();
        for k in order {
            if listed.contains(k) {
                continue;
            }
            let Item::Delta(key, delta) = &st.items[last[k]] else { continue };
            // Already marked deleted: a second tombstone would report it twice.
            if delta.delta_type == DeltaType::Deleted {
                continue;
            }
            tombstones.push((Arc::clone(key), Delta::tombstone(key.to_string(), Arc::clone(delta.obj()))));
        }
        for key in known_keys {
            if listed.contains(&*key) || last.contains_key(&*key) {
                continue;
            }
            let Some(obj) = known_objects.get_by_key(&key) else {
                tracing::debug!(key = %key, "known object vanished during replace; no tombstone");
                continue;
            };
            let delta = Delta::tombstone(key.to_string(), obj);
            tombstones.push((key, delta));
        }
        tombstones
    }

    /// The periodic resync (client-go's `Resync`).
    ///
    /// With [`atomic_events`](RealFifoOptions::atomic_events): queues one item, popped as an
    /// [`AtomicEvent::SyncAll`] with a `Sync` for every object known then.
    ///
    /// Without: queues a `Sync` delta for every known object whose key has nothing queued (a
    /// queued change would otherwise be followed by a `Sync` carrying the state before it).
    ///
    /// # Errors
    ///
    /// None today; the `Result` matches [`ReflectorStore::resync`](kcache_store::ReflectorStore::resync).
    pub fn resync(&self) -> Result<(), StoreError> {
        if self.atomic_events {
            self.core.mutate(|st| st.items.push_back(Item::SyncAll));
            return Ok(());
        }
        self.core.mutate(|st| {
            let queued: HashSet<Arc<str>, Hasher> = st
                .items
                .iter()
                .filter_map(|item| match item {
                    Item::Delta(k, _) => Some(Arc::clone(k)),
                    Item::ReplacedAll(_) | Item::SyncAll => None,
                })
                .collect();
            for key in self.known_objects.list_keys() {
                if queued.contains(&key) {
                    continue;
                }
                if let Some(obj) = self.known_objects.get_by_key(&key) {
                    st.items.push_back(Item::Delta(key, Delta::new(DeltaType::Sync, obj)));
                }
            }
        });
        Ok(())
    }

    /// A copy of every queued delta with its key, oldest first. Queued atomic events are not
    /// listed: their deltas exist only once they are popped (so `list().len()` is below
    /// [`len`](crate::Fifo::len) while one is queued).
    pub fn list(&self) -> Vec<(Arc<str>, Delta<K>)> {
        self.core.read(|st| {
            st.items
                .iter()
                .filter_map(|item| match item {
                    Item::Delta(k, d) => Some((Arc::clone(k), d.clone())),
                    Item::ReplacedAll(_) | Item::SyncAll => None,
                })
                .collect()
        })
    }

    /// The blocking twin of [`pop`] (client-go's `Pop`). Unlike [`Fifo::pop_blocking`] it takes
    /// any closure and error type, as [`pop`] does.
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

crate::fifo::impl_fifo_traits!(RealFifo, replace_keyed);

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use kcache_store::{Store, key_func};

    /// A relist queues a delta per object; once they are all popped the queue's buffer is freed
    /// instead of being kept, sized for the relist, for the life of the FIFO.
    #[test]
    fn a_drained_relist_frees_the_queue_buffer() {
        let kf = key_func(|s: &String| Ok(s.clone()));
        let fifo =
            RealFifo::new(RealFifoOptions::new(kf.clone(), Arc::new(Store::new(kf))).atomic_events(false));
        let list: Vec<Arc<String>> = (0..5000).map(|i| Arc::new(format!("k{i}"))).collect();
        fifo.replace(list, "1").unwrap();
        assert!(fifo.core.read(|st| st.items.capacity()) >= 5000);
        let mut popped = 0;
        while fifo.core.read(|st| !st.items.is_empty()) {
            fifo.pop_blocking(|_, _| Ok::<(), std::convert::Infallible>(())).unwrap();
            popped += 1;
        }
        assert_eq!(popped, 5000);
        assert!(fifo.core.read(|st| st.items.capacity()) <= KEEP_CAPACITY);
        // A small queue keeps its buffer.
        fifo.add(Arc::new("x".to_owned())).unwrap();
        fifo.pop_blocking(|_, _| Ok::<(), std::convert::Infallible>(())).unwrap();
        assert!(fifo.core.read(|st| st.items.capacity()) > 0);
    }
}
