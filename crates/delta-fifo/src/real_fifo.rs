//! `RealFifo`: client-go's RealFIFO, the in-order FIFO informers use since client-go 1.33;
//! every delta is kept and delivered in arrival order, one per pop.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::sync::Arc;

use kcache_store::{BoxError, KeyError, KeyFunc, KnownObjects, StoreError};

use crate::delta::{Delta, DeltaType, Deltas};
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
}

impl<K> RealFifoOptions<K> {
    /// Options without a transformer.
    pub fn new(key_function: KeyFunc<K>, known_objects: Arc<dyn KnownObjects<K>>) -> Self {
        Self { key_function, known_objects, transformer: None }
    }

    /// Sets [`transformer`](Self::transformer).
    pub fn transformer(mut self, transformer: TransformFunc<K>) -> Self {
        self.transformer = Some(transformer);
        self
    }
}

impl<K> fmt::Debug for RealFifoOptions<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RealFifoOptions")
            .field("transformer", &self.transformer.is_some())
            .finish_non_exhaustive()
    }
}

/// Client-go's RealFIFO: every change queued in arrival order and popped one at a time, with no
/// per-key collapsing, so a handler sees every intermediate state and deletions of objects it
/// never saw.
///
/// * [`add`](Self::add), [`update`](Self::update) and [`delete`](Self::delete) always queue.
/// * [`replace`](Self::replace) queues tombstones first (for queued keys whose last delta is not
///   a deletion, then for known keys neither listed nor queued), then `Replaced` for every
///   listed object. The first replace's whole queue is the initial population.
/// * [`pop`] hands one delta (as a one-element [`Deltas`]) to the process function, under the
///   lock.
/// * The queue operations other than adding (`pop`, `close`, `len`, `has_synced`) are those of
///   the [`Fifo`] and [`FifoExt`] traits, which the informer pops through; `len` counts queued
///   deltas.
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
    core: Core<State<K>>,
}

impl<K> fmt::Debug for RealFifo<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RealFifo").field("core", &self.core).finish_non_exhaustive()
    }
}

pub(crate) struct State<K> {
    /// Every queued delta with its key, oldest first.
    items: VecDeque<(Arc<str>, Delta<K>)>,
    /// Set by the first replace, or by an add/update/delete before it.
    populated: bool,
    /// Pops still to go before the first replace's items are all out.
    initial_population_count: usize,
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
        let (id, delta) = self.items.pop_front()?;
        self.initial_population_count = self.initial_population_count.saturating_sub(1);
        if self.items.is_empty() && self.items.capacity() > KEEP_CAPACITY {
            // A relist queued a delta per object; keep no buffer sized for it once it is drained.
            self.items = VecDeque::new();
        }
        let deltas = Deltas::with_key(Arc::clone(&id), vec![delta]);
        Some(Popped { id, deltas, is_in_initial_list })
    }

    fn key_of<'a>(&'a self, id: &'a Arc<str>) -> &'a str {
        id
    }
}

impl<K: Send + Sync + 'static> RealFifo<K> {
    /// An in-order FIFO with the given options (client-go's `NewRealFIFOWithOptions`).
    pub fn new(options: RealFifoOptions<K>) -> Self {
        let state = State { items: VecDeque::new(), populated: false, initial_population_count: 0 };
        Self {
            key_func: options.key_function,
            known_objects: options.known_objects,
            transformer: options.transformer,
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
            st.items.push_back((key, Delta::new(delta_type, obj)));
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

    /// Applies a full list (client-go's non-atomic `Replace`): first a tombstone for every
    /// queued key not listed whose last queued delta is not a deletion (carrying that delta's
    /// object), in first-queued order; then a tombstone for every known key neither listed nor
    /// queued; then `Replaced` for every listed object. The first call makes the whole queue the
    /// initial population.
    ///
    /// # Errors
    ///
    /// [`StoreError::Key`] or [`StoreError::Transform`] on any listed object; nothing is queued
    /// then.
    pub fn replace(&self, list: Vec<Arc<K>>, resource_version: &str) -> Result<(), StoreError> {
        let _ = resource_version;
        let mut keyed = Vec::with_capacity(list.len());
        for obj in list {
            let key: Arc<str> = Arc::from(self.key_of(&obj)?);
            keyed.push((key, self.transform(obj)?));
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
            st.items.extend(tombstones);
            for (key, obj) in &keyed {
                st.items.push_back((Arc::clone(key), Delta::new(DeltaType::Replaced, Arc::clone(obj))));
            }
            if !st.populated {
                st.populated = true;
                st.initial_population_count = st.items.len();
            }
        });
        Ok(())
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
        for (i, (k, _)) in st.items.iter().enumerate() {
            if last.insert(&**k, i).is_none() {
                order.push(k);
            }
        }
        let mut tombstones: Vec<(Arc<str>, Delta<K>)> = Vec::new();
        for k in order {
            if listed.contains(k) {
                continue;
            }
            let (key, delta) = &st.items[last[k]];
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

    /// Queues a `Sync` delta for every known object whose key has nothing queued (client-go's
    /// `Resync`).
    ///
    /// # Errors
    ///
    /// None today; the `Result` matches [`ReflectorStore::resync`](kcache_store::ReflectorStore::resync).
    pub fn resync(&self) -> Result<(), StoreError> {
        self.core.mutate(|st| {
            let queued: HashSet<Arc<str>, Hasher> = st.items.iter().map(|(k, _)| Arc::clone(k)).collect();
            for key in self.known_objects.list_keys() {
                if queued.contains(&key) {
                    continue;
                }
                if let Some(obj) = self.known_objects.get_by_key(&key) {
                    st.items.push_back((key, Delta::new(DeltaType::Sync, obj)));
                }
            }
        });
        Ok(())
    }

    /// A copy of every queued delta with its key, oldest first.
    pub fn list(&self) -> Vec<(Arc<str>, Delta<K>)> {
        self.core.read(|st| st.items.iter().cloned().collect())
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

crate::fifo::impl_fifo_traits!(RealFifo);

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use kcache_store::{Store, key_func};

    /// A relist queues a delta per object; once they are all popped the queue's buffer is freed
    /// instead of being kept, sized for the relist, for the life of the FIFO.
    #[test]
    fn a_drained_relist_frees_the_queue_buffer() {
        let kf = key_func(|s: &String| Ok(s.clone()));
        let fifo = RealFifo::new(RealFifoOptions::new(kf.clone(), Arc::new(Store::new(kf))));
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
