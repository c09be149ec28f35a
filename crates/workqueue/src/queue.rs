//! The fair, stingy queue: client-go's `workqueue.Typed[T]` (a FIFO, a dirty set and a
//! processing set under one lock), with an async, cancel-safe `get` and a blocking twin.

use std::any::{Any, TypeId};
use std::collections::{HashSet, VecDeque};
use std::fmt;
use std::future::Future;
use std::hash::{BuildHasher, Hash};
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use hashbrown::HashTable;

use crate::loom::{Condvar, Mutex, MutexGuard};
use crate::metrics::{DEFAULT_UNFINISHED_WORK_UPDATE_PERIOD, MetricsProvider, QueueMetrics};
use crate::waiters::{WaitList, wake_all};

/// Shorthand for the bounds every queue puts on its items: client-go's `comparable`, plus what
/// it takes to share items between tasks and threads.
pub trait Item: Eq + Hash + Clone + Send + Sync + 'static {}
impl<T: Eq + Hash + Clone + Send + Sync + 'static> Item for T {}

/// The hash set the queues use: foldhash is several times faster than SipHash on short keys and
/// queue keys are not attacker-chosen in a way that matters (they come from the API server).
pub(crate) type FastSet<T> = HashSet<T, foldhash::fast::RandomState>;

/// Ordering storage behind a [`Queue`], client-go's `Queue[T]` interface.
///
/// The queue guarantees that an item is pushed at most once until it is popped again, and calls
/// [`touch`](QueueStorage::touch) when an item that is already waiting in storage is added again
/// (a priority storage can use it to move the item forward).
///
/// # Examples
///
/// A LIFO storage (not something a controller wants, but it shows the contract):
///
/// ```
/// use kcache_workqueue::{Queue, QueueStorage};
///
/// #[derive(Debug, Default)]
/// struct Lifo(Vec<u32>);
/// impl QueueStorage<u32> for Lifo {
///     fn push(&mut self, item: u32) { self.0.push(item) }
///     fn pop(&mut self) -> Option<u32> { self.0.pop() }
///     fn len(&self) -> usize { self.0.len() }
/// }
///
/// let q = Queue::builder().storage(Lifo::default()).build();
/// q.add(1);
/// q.add(2);
/// assert_eq!(q.get_blocking(), Some(2));
/// ```
pub trait QueueStorage<T>: Send + 'static {
    /// Appends an item that is not currently stored.
    fn push(&mut self, item: T);
    /// Removes and returns the next item to hand out.
    fn pop(&mut self) -> Option<T>;
    /// Number of stored items.
    fn len(&self) -> usize;
    /// Whether nothing is stored.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Called when a stored (dirty, not processing) item is added again. The default does nothing.
    fn touch(&mut self, item: &T) {
        let _ = item;
    }
}

/// The default storage: first in, first out, on a `VecDeque`.
///
/// `pop_front` moves the item out of the ring, so nothing keeps a popped item alive (the Go
/// version has to zero the slot by hand so the garbage collector can reclaim it).
#[derive(Debug, Clone)]
pub struct Fifo<T>(VecDeque<T>);

impl<T> Default for Fifo<T> {
    fn default() -> Self {
        Self(VecDeque::new())
    }
}

impl<T: Send + 'static> QueueStorage<T> for Fifo<T> {
    fn push(&mut self, item: T) {
        self.0.push_back(item);
    }
    fn pop(&mut self) -> Option<T> {
        self.0.pop_front()
    }
    fn len(&self) -> usize {
        self.0.len()
    }
}

/// One known item: client-go's dirty and processing sets folded into one record, so each
/// operation hashes the item once and probes once. Records live in [`State::slots`]; the hash
/// table holds only where they are.
struct Slot<T> {
    item: T,
    /// The item's 32 hash bits, as in its [`Index`] (free: it fits in the record's padding).
    hash: u32,
    /// Needs processing (stored, or re-added while processing).
    dirty: bool,
    /// Handed out by `get` and not yet `done`.
    processing: bool,
}

/// A bucket of the item table: where the item's [`Slot`] is, and 32 bits of the item's hash
/// ([`Shared::hash_of`]), so growing the table never hashes an item again nor reads its slot (for
/// `Arc<str>` keys that would read every key's bytes, a cache miss each).
#[derive(Clone, Copy)]
struct Index {
    slot: u32,
    hash: u32,
}

/// Everything the queue lock protects.
pub(crate) struct State<T, S> {
    /// Order of work. Invariant: every stored item is dirty and not processing.
    pub(crate) storage: S,
    /// Every item that is dirty, processing or both, by item. An item that is neither is
    /// removed from `slots` at once, and from the table at once or, if `done` found it through
    /// `recent`, at the next sweep (see `stale`).
    items: HashTable<Index>,
    /// The items' records, `None` where `free` lists the slot for reuse. Slots are handed out in
    /// the order items arrive, so a FIFO's `take` walks them nearly in order instead of probing
    /// the table at random (with a million queued items, a cache miss per take).
    slots: Vec<Option<Slot<T>>>,
    /// Free slots, reused last freed first.
    free: Vec<u32>,
    /// Slots and hashes of the items `take` handed out most recently (at most [`RECENT`]), so
    /// that `done` finds a just-taken item without the table. With a large queue the table is far
    /// bigger than the cache, and probing it costs `done` two cache misses (control bytes and
    /// bucket).
    recent: Vec<(u32, u32)>,
    /// Slots `done` emptied through `recent` without probing the table: their [`Index`] is still
    /// there. Such a slot stays empty (it is not in `free`), so its index matches no item, until
    /// [`sweep_if_due`](State::sweep_if_due) removes those indexes together and frees the slots.
    stale: Vec<u32>,
    /// One bit per slot, set only during a sweep for the slots in `stale`.
    stale_bits: Vec<u64>,
    /// Number of records with `processing` set.
    processing: usize,
    /// With the default [`Fifo`] storage (which pops in push order), the slot of every stored
    /// item in the same order, so `take` finds the item's record without hashing the item or
    /// probing the table. Empty with any other storage.
    stored_slots: VecDeque<u32>,
    /// Whether `storage` is a [`Fifo`] that started empty, so `stored_slots` stays in step.
    in_push_order: bool,
    /// Set once by `shut_down`/`shut_down_with_drain`; adds are dropped from then on.
    pub(crate) shutting_down: bool,
    /// Whether a `shut_down_with_drain` caller waits for `processing` to empty.
    pub(crate) drain: bool,
    /// Async getters parked on an empty queue.
    getters: WaitList,
    /// Threads parked in `get_blocking` (counted so `add` skips the condvar when there are none).
    blocking_getters: usize,
    /// Async `shut_down_with_drain` callers parked until `processing` empties.
    drainers: WaitList,
    /// `None` unless a metrics provider was configured.
    metrics: Option<Box<QueueMetrics<T>>>,
}

/// Item equality, with `Arc<str>` keys compared by pointer first. When a key is added again
/// through the same `Arc` (see [`Queue::add_ref`]), the entry and the caller share one
/// allocation, and `Arc`'s `==` would still compare the bytes through `memcmp` (a quarter of a
/// coalescing `add`'s time). `TypeId` stands in for specialization; the check folds away at
/// compile time, and other item types compare with `==` alone.
#[inline]
fn same_item<T: Item>(a: &T, b: &T) -> bool {
    if TypeId::of::<T>() == TypeId::of::<Arc<str>>() {
        let any = |x: &T| (x as &dyn Any).downcast_ref::<Arc<str>>().map(Arc::as_ptr);
        if any(a).zip(any(b)).is_some_and(|(x, y)| std::ptr::eq(x, y)) {
            return true;
        }
    }
    a == b
}

/// How many recently taken items `done` looks for before it probes the table. Enough for a
/// typical worker pool; with more workers, the older items' `done` probes the table.
const RECENT: usize = 8;

/// Stale indexes tolerated before a sweep, whatever the size of the table.
const MIN_SWEEP: usize = 64;

/// The table hash of a stored 32-bit hash: the same bits in both halves, so the bucket (low bits)
/// and the control tag (top bits) both come from them.
fn widen(h: u32) -> u64 {
    (u64::from(h) << 32) | u64::from(h)
}

/// Whether slot `slot` holds `item`.
#[inline]
fn holds<T: Item>(slots: &[Option<Slot<T>>], slot: u32, item: &T) -> bool {
    slots.get(slot as usize).and_then(Option::as_ref).is_some_and(|s| same_item(&s.item, item))
}

/// The table's equality test for `item` (hash `h`): the hash bits first, then the item in the slot.
#[inline]
fn index_of<'a, T: Item>(slots: &'a [Option<Slot<T>>], h: u32, item: &'a T) -> impl Fn(&Index) -> bool + 'a {
    move |ix| ix.hash == h && holds(slots, ix.slot, item)
}

impl<T: Item, S: QueueStorage<T>> State<T, S> {
    /// Pushes a new or re-added item (in slot `slot`) onto the storage.
    fn store(&mut self, item: T, slot: u32) {
        self.storage.push(item);
        if self.in_push_order {
            self.stored_slots.push_back(slot);
        }
    }

    /// The slot of `item` (hash `h`), if the queue knows the item.
    fn find(&self, h: u32, item: &T) -> Option<u32> {
        self.items.find(widen(h), index_of(&self.slots, h, item)).map(|ix| ix.slot)
    }

    /// Records a new item (hash `h`) and returns its slot.
    fn insert(&mut self, h: u32, item: T, dirty: bool, processing: bool) -> u32 {
        let record = Slot { item, hash: h, dirty, processing };
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize] = Some(record);
                slot
            }
            None => {
                // More than 2^32 items would need hundreds of GiB first.
                let slot = u32::try_from(self.slots.len()).expect("workqueue: more than 2^32 items");
                self.slots.push(Some(record));
                slot
            }
        };
        self.items.insert_unique(widen(h), Index { slot, hash: h }, |ix| widen(ix.hash));
        slot
    }

    /// The record in `slot`, which the caller found in the table.
    fn record(&mut self, slot: u32) -> Option<&mut Slot<T>> {
        self.slots.get_mut(slot as usize).and_then(Option::as_mut)
    }

    /// Moves the next stored item from dirty to processing and returns it. `shared` hashes it
    /// when the storage keeps no slots.
    fn take(&mut self, shared: &Shared<T, S>) -> Option<T> {
        let item = self.storage.pop()?;
        if let Some(m) = &mut self.metrics {
            m.get(&item, None);
        }
        let slot = match self.stored_slots.pop_front() {
            Some(slot) => {
                debug_assert!(holds(&self.slots, slot, &item), "stored_slots out of step with the FIFO");
                Some(slot)
            }
            None => self.find(shared.hash_of(&item), &item),
        };
        let taken = match slot.and_then(|slot| Some(slot).zip(self.record(slot))) {
            Some((slot, record)) => {
                record.dirty = false;
                record.processing = true;
                (slot, record.hash)
            }
            // Unreachable while the storage keeps its contract (it only returns pushed items);
            // tracking the item anyway keeps `done` and the stingy rule working.
            None => {
                let h = shared.hash_of(&item);
                (self.insert(h, item.clone(), false, true), h)
            }
        };
        if self.recent.len() == RECENT {
            // The oldest item's `done` will probe the table, which still indexes it.
            self.recent.remove(0);
        }
        self.recent.push(taken);
        self.processing += 1;
        Some(item)
    }

    /// Chooses one parked getter to wake for a newly stored item.
    fn wake_one(&mut self) -> Wake {
        if let Some(w) = self.getters.pop() {
            Wake::Task(w)
        } else if self.blocking_getters > 0 {
            Wake::Thread
        } else {
            Wake::Nobody
        }
    }

    /// Where `recent` holds the slot of `item` (hash `h`), if it does. Only a slot whose hash
    /// matches is read, so an item that is not there costs no record reads.
    fn recent_of(&self, h: u32, item: &T) -> Option<usize> {
        self.recent.iter().position(|&(slot, hash)| {
            hash == h && self.slots[slot as usize].as_ref().is_some_and(|r| same_item(&r.item, item))
        })
    }

    /// Removes the indexes of the `stale` slots from the table, in one pass over it, once they
    /// outnumber the live ones (so the table is at most about twice its size, and each stale
    /// index costs a constant share of a sequential pass instead of a random probe), and frees
    /// the slots.
    fn sweep_if_due(&mut self) {
        let stale = self.stale.len();
        if stale < MIN_SWEEP || stale * 2 < self.items.len() {
            return;
        }
        let words = self.slots.len().div_ceil(64);
        if self.stale_bits.len() < words {
            self.stale_bits.resize(words, 0);
        }
        for &slot in &self.stale {
            self.stale_bits[slot as usize / 64] |= 1 << (slot % 64);
        }
        let bits = &self.stale_bits;
        self.items.retain(|ix| bits[ix.slot as usize / 64] & (1 << (ix.slot % 64)) == 0);
        for &slot in &self.stale {
            self.stale_bits[slot as usize / 64] = 0;
        }
        self.free.append(&mut self.stale);
    }

    fn must_wait_for_drain(&self) -> bool {
        self.drain && self.processing > 0
    }
}

/// A wake-up decided under the lock and delivered after it is released.
#[must_use]
enum Wake {
    Nobody,
    Task(std::task::Waker),
    Thread,
}

/// An item handed to `add` by value or by reference; cloned only if it must be stored.
enum Arg<'a, T> {
    Owned(T),
    Borrowed(&'a T),
}

impl<T: Clone> Arg<'_, T> {
    fn get(&self) -> &T {
        match self {
            Arg::Owned(t) => t,
            Arg::Borrowed(t) => t,
        }
    }

    fn into_owned(self) -> T {
        match self {
            Arg::Owned(t) => t,
            Arg::Borrowed(t) => t.clone(),
        }
    }
}

pub(crate) struct Shared<T, S> {
    pub(crate) state: Mutex<State<T, S>>,
    /// Outside the lock: `add` and `done` hash their item before locking, so reading a key's
    /// bytes (often a cache miss) is not done while other threads wait for the lock.
    hasher: foldhash::fast::RandomState,
    /// Signals `get_blocking` callers.
    get_cond: Condvar,
    /// Signals blocking `shut_down_with_drain` callers.
    drain_cond: Condvar,
    /// Queue name (metrics label, tracing field).
    pub(crate) name: Arc<str>,
    /// The provider the queue was built with; delaying queues take their retry counter from it.
    pub(crate) provider: Option<Arc<dyn MetricsProvider>>,
}

impl<T: Hash, S> Shared<T, S> {
    /// The 32 hash bits an entry keeps for `item`.
    fn hash_of(&self, item: &T) -> u32 {
        self.hasher.hash_one(item) as u32
    }
}

impl<T, S> Shared<T, S> {
    fn deliver(&self, wake: Wake) {
        match wake {
            Wake::Nobody => {}
            Wake::Task(w) => w.wake(),
            Wake::Thread => self.get_cond.notify_one(),
        }
    }
}

/// A fair, stingy work queue: the counterpart of client-go's `workqueue.TypedInterface`.
///
/// * **Fair**: items are handed out in the order they were added.
/// * **Stingy**: an item is never handed to two workers at once, and any number of adds before
///   a `get` result in one run. An add while the item is being processed results in exactly one
///   more run, after [`done`](Queue::done).
/// * **Shutdown**: after [`shut_down`](Queue::shut_down) adds are dropped, `get` hands out what
///   is still queued and then returns `None`.
///
/// `Queue` is a handle: clones share the same queue. It does not need a Tokio runtime; use
/// [`get`](Queue::get) from tasks and [`get_blocking`](Queue::get_blocking) from threads.
///
/// # Examples
///
/// ```
/// use kcache_workqueue::Queue;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let q = Queue::new();
/// q.add("default/web");
/// q.add("default/db");
/// q.add("default/web"); // already queued: collapses into the first add
/// assert_eq!(q.len(), 2);
///
/// let key = q.get().await.unwrap();
/// assert_eq!(key, "default/web");
/// q.add("default/web"); // re-added while processing: not handed out again yet
/// assert_eq!(q.get().await, Some("default/db"));
/// q.done(&"default/db");
/// q.done(&key); // now it is queued again
/// assert_eq!(q.get().await, Some("default/web"));
/// q.done(&"default/web");
///
/// q.shut_down();
/// assert_eq!(q.get().await, None);
/// # }
/// ```
pub struct Queue<T, S = Fifo<T>> {
    pub(crate) shared: Arc<Shared<T, S>>,
}

impl<T, S> Clone for Queue<T, S> {
    fn clone(&self) -> Self {
        Self { shared: self.shared.clone() }
    }
}

impl<T, S> fmt::Debug for Queue<T, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Queue").field("name", &self.shared.name).finish_non_exhaustive()
    }
}

impl<T: Item> Default for Queue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Item> Queue<T> {
    /// Creates an unnamed FIFO queue without metrics (client-go's `workqueue.NewTyped`).
    pub fn new() -> Self {
        Self::builder().build()
    }

    /// Starts configuring a queue: name, metrics, storage.
    pub fn builder() -> QueueBuilder<T> {
        QueueBuilder {
            name: Arc::from(""),
            provider: None,
            update_period: DEFAULT_UNFINISHED_WORK_UPDATE_PERIOD,
            storage: Fifo::default(),
            _item: std::marker::PhantomData,
        }
    }
}

impl<T: Item, S: QueueStorage<T>> Queue<T, S> {
    /// Marks `item` as needing processing.
    ///
    /// Does nothing if the item is already queued (beyond a storage `touch`); if the item is
    /// being processed it is queued again when [`done`](Queue::done) is called. Adds after
    /// shutdown are dropped: a documented no-op, as in client-go.
    pub fn add(&self, item: T) {
        self.add_item(Arg::Owned(item));
    }

    /// [`add`](Queue::add) for a caller that holds the item by reference: the item is cloned
    /// only when it is not already queued, so the common coalescing case (a key added again
    /// before a worker got it) costs no clone and no drop.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use kcache_workqueue::Queue;
    ///
    /// let q: Queue<Arc<str>> = Queue::new();
    /// let key: Arc<str> = Arc::from("default/web");
    /// for _ in 0..3 {
    ///     q.add_ref(&key); // cloned once, on the first add
    /// }
    /// assert_eq!(q.len(), 1);
    /// assert_eq!(Arc::strong_count(&key), 3); // ours, the dirty set's, the FIFO's
    /// ```
    pub fn add_ref(&self, item: &T) {
        self.add_item(Arg::Borrowed(item));
    }

    fn add_item(&self, arg: Arg<'_, T>) {
        let item = arg.get();
        let h = self.shared.hash_of(item);
        let mut guard = self.shared.state.lock();
        if guard.shutting_down {
            tracing::trace!(queue = %self.shared.name, "workqueue: add after shutdown dropped");
            return;
        }
        // Reborrow the guard once so the fields below can be borrowed separately.
        let st = &mut *guard;
        if let Some(entry) = st.find(h, item).and_then(|slot| st.slots[slot as usize].as_mut()) {
            if entry.dirty {
                // Already waiting: let a priority storage react, unless a worker holds the item.
                if !entry.processing {
                    st.storage.touch(item);
                }
                return;
            }
            // Being processed: mark it dirty but do not push it, or a second worker could get
            // it; `done` pushes it instead.
            entry.dirty = true;
            if let Some(m) = &mut st.metrics {
                m.add(item, None);
            }
            return;
        }
        if let Some(m) = &mut st.metrics {
            m.add(item, None);
        }
        let slot = st.insert(h, item.clone(), true, false);
        st.store(arg.into_owned(), slot);
        let wake = st.wake_one();
        drop(guard);
        self.shared.deliver(wake);
    }

    /// Number of items waiting to be handed out (not counting items being processed).
    pub fn len(&self) -> usize {
        self.shared.state.lock().storage.len()
    }

    /// Whether no item is waiting to be handed out.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Waits for the next item; `None` once the queue is shut down and empty.
    ///
    /// The caller must call [`done`](Queue::done) with the item when it has finished with it.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe. An item is taken off the queue only in the same poll that
    /// returns it, so dropping the future never loses an item; if the future had already been
    /// woken for an item, dropping it passes the wake-up on to another waiting getter.
    pub fn get(&self) -> Get<'_, T, S> {
        Get { shared: &self.shared, waiter: None }
    }

    /// Blocking twin of [`get`](Queue::get) for plain threads. Do not call it from async code.
    pub fn get_blocking(&self) -> Option<T> {
        let mut st = self.shared.state.lock();
        loop {
            if let Some(item) = st.take(&self.shared) {
                return Some(item);
            }
            if st.shutting_down {
                return None;
            }
            st.blocking_getters += 1;
            st = self.shared.get_cond.wait(st);
            st.blocking_getters -= 1;
        }
    }

    /// Marks `item` as finished. If it was added again while it was being processed it goes back
    /// on the queue now.
    ///
    /// Calling `done` for an item that is not being processed is a no-op.
    pub fn done(&self, item: &T) {
        let h = self.shared.hash_of(item);
        let mut guard = self.shared.state.lock();
        let st = &mut *guard;
        // A just-taken item is found in `recent`; if it is finished (not re-added), its record is
        // emptied and its index left for a later sweep. Otherwise probe the table.
        let (slot, finished) = if let Some(pos) = st.recent_of(h, item) {
            let (slot, _) = st.recent.remove(pos);
            debug_assert!(st.slots[slot as usize].as_ref().is_some_and(|r| r.processing));
            let dirty = st.slots[slot as usize].as_ref().is_some_and(|r| r.dirty);
            if !dirty {
                st.stale.push(slot);
            }
            (slot, !dirty)
        } else {
            let slots = &st.slots;
            let found = st.items.find_entry(widen(h), index_of(slots, h, item)).ok().and_then(|entry| {
                let record = slots[entry.get().slot as usize].as_ref().filter(|r| r.processing)?;
                Some((record.dirty, entry))
            });
            let Some((dirty, entry)) = found else {
                tracing::trace!(queue = %self.shared.name, "workqueue: done on an item not being processed ignored");
                return;
            };
            let slot = entry.get().slot;
            let finished = !dirty;
            if finished {
                entry.remove();
                st.free.push(slot);
            }
            (slot, finished)
        };
        st.processing -= 1;
        // A removed item is dropped after the lock is released.
        let mut removed = None;
        let requeue = if finished {
            removed = st.slots[slot as usize].take().map(|r| r.item);
            st.sweep_if_due();
            None
        } else {
            st.slots[slot as usize].as_mut().map(|record| {
                record.processing = false;
                record.item.clone()
            })
        };
        if let Some(m) = &mut st.metrics {
            m.done(item);
        }
        let wake = match requeue {
            Some(again) => {
                st.store(again, slot);
                st.wake_one()
            }
            None => Wake::Nobody,
        };
        // A drain waits for the processing set only, not for queued items (client-go): release
        // it as soon as the last in-flight item is done, even if that item was queued again.
        let drained = st.drain && st.processing == 0;
        let mut st = guard;
        let drainers = if drained { st.drainers.take_all() } else { Default::default() };
        drop(st);
        drop(removed);
        self.shared.deliver(wake);
        if drained {
            self.shared.drain_cond.notify_all();
            wake_all(drainers);
        }
    }

    /// Shuts the queue down without waiting: adds are dropped from now on, getters hand out what
    /// is left and then see `None`. Also releases any [`shut_down_with_drain`] waiter.
    ///
    /// [`shut_down_with_drain`]: Queue::shut_down_with_drain
    pub fn shut_down(&self) {
        let mut st = self.shared.state.lock();
        st.drain = false;
        self.shut_down_locked(st);
    }

    /// Shuts the queue down and waits until every item handed out so far is `done`.
    ///
    /// Queued items are not waited for: workers keep calling `get`, which hands them out until
    /// the queue is empty. A later [`shut_down`](Queue::shut_down) stops the wait early.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the queue is shut down when the future is first polled; dropping it only
    /// stops waiting.
    pub async fn shut_down_with_drain(&self) {
        self.begin_drain();
        self.wait_drained().await;
    }

    /// Waits until no item is being processed or the drain is called off.
    pub(crate) async fn wait_drained(&self) {
        DrainWait { shared: &self.shared, waiter: None }.await;
    }

    /// Blocking twin of [`shut_down_with_drain`](Queue::shut_down_with_drain).
    pub fn shut_down_with_drain_blocking(&self) {
        self.begin_drain();
        self.wait_drained_blocking();
    }

    /// Blocks until no item is being processed or the drain is called off.
    pub(crate) fn wait_drained_blocking(&self) {
        let mut st = self.shared.state.lock();
        while st.must_wait_for_drain() {
            st = self.shared.drain_cond.wait(st);
        }
    }

    pub(crate) fn begin_drain(&self) {
        let mut st = self.shared.state.lock();
        st.drain = true;
        self.shut_down_locked(st);
    }

    fn shut_down_locked(&self, mut st: MutexGuard<'_, State<T, S>>) {
        let first = !st.shutting_down;
        st.shutting_down = true;
        let getters = st.getters.take_all();
        let drainers = st.drainers.take_all();
        let (queued, processing) = (st.storage.len(), st.processing);
        drop(st);
        if first {
            tracing::debug!(queue = %self.shared.name, queued, processing, "workqueue: shutting down");
        }
        self.shared.get_cond.notify_all();
        self.shared.drain_cond.notify_all();
        wake_all(getters);
        wake_all(drainers);
    }

    /// Whether [`shut_down`](Queue::shut_down) or a drain has been called.
    pub fn shutting_down(&self) -> bool {
        self.shared.state.lock().shutting_down
    }

    /// The name given at construction (metrics label).
    pub fn name(&self) -> &str {
        &self.shared.name
    }
}

/// Future returned by [`Queue::get`].
#[must_use = "futures do nothing unless polled"]
pub struct Get<'a, T: Item, S: QueueStorage<T>> {
    shared: &'a Shared<T, S>,
    /// Our id in the getters list once we have parked at least once.
    waiter: Option<u64>,
}

impl<T: Item, S: QueueStorage<T>> fmt::Debug for Get<'_, T, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Get").field("waiting", &self.waiter.is_some()).finish()
    }
}

impl<T: Item, S: QueueStorage<T>> Future for Get<'_, T, S> {
    type Output = Option<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let this = self.get_mut();
        let mut st = this.shared.state.lock();
        // Taking the item and returning it happen in this one poll: that is the cancel safety.
        if let Some(item) = st.take(this.shared) {
            if let Some(id) = this.waiter.take() {
                st.getters.remove(id);
            }
            return Poll::Ready(Some(item));
        }
        if st.shutting_down {
            if let Some(id) = this.waiter.take() {
                st.getters.remove(id);
            }
            return Poll::Ready(None);
        }
        st.getters.register(&mut this.waiter, cx.waker());
        Poll::Pending
    }
}

impl<T: Item, S: QueueStorage<T>> Drop for Get<'_, T, S> {
    fn drop(&mut self) {
        let Some(id) = self.waiter.take() else { return };
        let mut st = self.shared.state.lock();
        if st.getters.remove(id) {
            return;
        }
        // We were woken for an item but will never take it: pass the wake-up on.
        if !st.storage.is_empty() {
            let wake = st.wake_one();
            drop(st);
            self.shared.deliver(wake);
        }
    }
}

/// Waits until a drain completes or is called off by `shut_down`.
struct DrainWait<'a, T: Item, S: QueueStorage<T>> {
    shared: &'a Shared<T, S>,
    waiter: Option<u64>,
}

impl<T: Item, S: QueueStorage<T>> Future for DrainWait<'_, T, S> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let mut st = this.shared.state.lock();
        if !st.must_wait_for_drain() {
            if let Some(id) = this.waiter.take() {
                st.drainers.remove(id);
            }
            return Poll::Ready(());
        }
        st.drainers.register(&mut this.waiter, cx.waker());
        Poll::Pending
    }
}

impl<T: Item, S: QueueStorage<T>> Drop for DrainWait<'_, T, S> {
    fn drop(&mut self) {
        if let Some(id) = self.waiter.take() {
            self.shared.state.lock().drainers.remove(id);
        }
    }
}

/// Configures a [`Queue`] (and the delaying and rate-limiting queues built on it).
///
/// # Examples
///
/// ```
/// use kcache_workqueue::Queue;
///
/// let q: Queue<String> = Queue::builder().name("pods").build();
/// assert_eq!(q.name(), "pods");
/// ```
pub struct QueueBuilder<T, S = Fifo<T>> {
    pub(crate) name: Arc<str>,
    pub(crate) provider: Option<Arc<dyn MetricsProvider>>,
    pub(crate) update_period: Duration,
    pub(crate) storage: S,
    _item: std::marker::PhantomData<fn() -> T>,
}

impl<T, S> fmt::Debug for QueueBuilder<T, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QueueBuilder")
            .field("name", &self.name)
            .field("metrics", &self.provider.is_some())
            .field("update_period", &self.update_period)
            .finish_non_exhaustive()
    }
}

impl<T: Item, S: QueueStorage<T>> QueueBuilder<T, S> {
    /// Names the queue (the `name` label of its metrics).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Arc::from(name.into());
        self
    }

    /// Reports metrics through `provider`. Without one the queue keeps no metric state at all.
    pub fn metrics_provider(mut self, provider: Arc<dyn MetricsProvider>) -> Self {
        self.provider = Some(provider);
        self
    }

    /// How often `unfinished_work_seconds` and `longest_running_processor_seconds` are refreshed
    /// (default 500 ms, as in client-go).
    pub fn unfinished_work_update_period(mut self, period: Duration) -> Self {
        self.update_period = period;
        self
    }

    /// Replaces the ordering storage (client-go's `WithQueue` option).
    pub fn storage<S2: QueueStorage<T>>(self, storage: S2) -> QueueBuilder<T, S2> {
        QueueBuilder {
            name: self.name,
            provider: self.provider,
            update_period: self.update_period,
            storage,
            _item: std::marker::PhantomData,
        }
    }

    /// Builds the queue. With a metrics provider this starts the periodic unfinished-work
    /// refresher: a Tokio task when called inside a runtime, a small thread otherwise.
    pub fn build(self) -> Queue<T, S> {
        let metrics =
            self.provider.as_ref().map(|p| Box::new(QueueMetrics::new(p.clone(), self.name.clone())));
        let has_metrics = metrics.is_some();
        // The storage's type is known here; `TypeId` stands in for specialization.
        let in_push_order = TypeId::of::<S>() == TypeId::of::<Fifo<T>>() && self.storage.is_empty();
        let shared = Arc::new(Shared {
            hasher: foldhash::fast::RandomState::default(),
            state: Mutex::new(State {
                storage: self.storage,
                items: HashTable::new(),
                slots: Vec::new(),
                free: Vec::new(),
                recent: Vec::with_capacity(RECENT),
                stale: Vec::new(),
                stale_bits: Vec::new(),
                processing: 0,
                stored_slots: VecDeque::new(),
                in_push_order,
                shutting_down: false,
                drain: false,
                getters: WaitList::default(),
                blocking_getters: 0,
                drainers: WaitList::default(),
                metrics,
            }),
            get_cond: Condvar::new(),
            drain_cond: Condvar::new(),
            name: self.name,
            provider: self.provider,
        });
        if has_metrics {
            let weak: Weak<Shared<T, S>> = Arc::downgrade(&shared);
            crate::metrics::spawn_unfinished_work_loop(self.update_period, move || {
                let Some(shared) = weak.upgrade() else { return false };
                let st = shared.state.lock();
                if st.shutting_down {
                    return false;
                }
                if let Some(m) = &st.metrics {
                    m.update_unfinished_work();
                }
                true
            });
        }
        Queue { shared }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// `done`'s fast path leaves stale indexes in the table; the sweep keeps them from piling up.
    /// Runs items through add, get and done with up to 100 in flight (more than [`RECENT`], so
    /// both lookup paths run) and checks after every step that stale indexes never exceed the
    /// live ones by more than a sweep's threshold, that every empty slot is free or stale, and
    /// that everything ends swept or reusable.
    #[test]
    fn stale_indexes_are_swept() {
        let q: Queue<u64> = Queue::new();
        let mut held = VecDeque::new();
        for i in 0..30_000u64 {
            q.add(i);
            q.add(i % 1000); // some re-adds, queued or in flight
            if let Some(item) = q.get_blocking() {
                held.push_back(item);
            }
            if held.len() > 100 {
                let item = held.pop_front().unwrap();
                q.done(&item);
            }
            if i % 16 != 0 {
                continue;
            }
            let st = q.shared.state.lock();
            let live = st.slots.iter().filter(|s| s.is_some()).count();
            assert_eq!(st.items.len(), live + st.stale.len(), "step {i}");
            assert!(
                st.stale.len() < MIN_SWEEP.max(live + 1),
                "step {i}: {} stale, {live} live",
                st.stale.len()
            );
            assert_eq!(st.slots.len(), live + st.stale.len() + st.free.len(), "step {i}");
        }
        for item in held {
            q.done(&item);
        }
        while let Some(item) = (!q.is_empty()).then(|| q.get_blocking()).flatten() {
            q.done(&item);
        }
        let st = q.shared.state.lock();
        assert_eq!(st.processing, 0);
        assert!(st.items.len() == st.stale.len() && st.stale.len() < MIN_SWEEP);
    }
}
