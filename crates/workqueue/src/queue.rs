//! The fair, stingy queue: client-go's `workqueue.Typed[T]` (a FIFO, a dirty set and a
//! processing set under one lock), with an async, cancel-safe `get` and a blocking twin.
//!
//! Read it beside client-go's `util/workqueue/queue.go`: the storage interface and its FIFO
//! default, then the queue and its `add`, `get`, `done` and shutdown. The dirty and processing
//! sets are one table of item records here, in `slot_table.rs`.

use std::any::TypeId;
use std::collections::{HashSet, VecDeque};
use std::fmt;
use std::future::Future;
use std::hash::{BuildHasher, Hash};
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use kcache_utils::sync::{Condvar, Mutex, MutexGuard};

use crate::item::Item;
use crate::metrics::{DEFAULT_UNFINISHED_WORK_UPDATE_PERIOD, MetricsProvider, QueueMetrics};
use crate::slot_table::{Done, SlotTable};
use crate::waiters::{WaitList, wake_all};

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
pub struct FifoStorage<T>(VecDeque<T>);

impl<T> Default for FifoStorage<T> {
    fn default() -> Self {
        Self(VecDeque::new())
    }
}

impl<T: Send + 'static> QueueStorage<T> for FifoStorage<T> {
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

/// Everything the queue lock protects.
pub(crate) struct State<T, S> {
    /// Order of work. Invariant: every stored item is dirty and not processing.
    pub(crate) storage: S,
    /// Every item that is dirty, processing or both: its record and where to find it.
    pub(crate) table: SlotTable<T>,
    /// Number of records with `processing` set.
    pub(crate) processing: usize,
    /// With the default [`FifoStorage`] (which pops in push order), the slot of every stored
    /// item in the same order, so `take` finds the item's record without hashing the item or
    /// probing the table. Empty with any other storage.
    stored_slots: VecDeque<u32>,
    /// Whether `storage` is a [`FifoStorage`] that started empty, so `stored_slots` stays in step.
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

impl<T: Item, S: QueueStorage<T>> State<T, S> {
    /// Pushes a new or re-added item (in slot `slot`) onto the storage.
    fn store(&mut self, item: T, slot: u32) {
        self.storage.push(item);
        if self.in_push_order {
            self.stored_slots.push_back(slot);
        }
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
                debug_assert!(self.table.holds(slot, &item), "stored_slots out of step with the FIFO");
                Some(slot)
            }
            None => self.table.find(shared.hash_of(&item), &item),
        };
        self.table.take(slot, &item, || shared.hash_of(&item));
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
pub struct Queue<T, S = FifoStorage<T>> {
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
            storage: FifoStorage::default(),
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
        if let Some(entry) = st.table.find(h, item).and_then(|slot| st.table.record(slot)) {
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
        let slot = st.table.insert(h, item.clone(), true, false);
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
        let Some(outcome) = st.table.done(h, item) else {
            tracing::trace!(queue = %self.shared.name, "workqueue: done on an item not being processed ignored");
            return;
        };
        st.processing -= 1;
        // A removed item is dropped after the lock is released.
        let (removed, requeue) = match outcome {
            Done::Finished(removed) => (removed, None),
            Done::Requeue { slot, item: again } => (None, Some((slot, again))),
        };
        if let Some(m) = &mut st.metrics {
            m.done(item);
        }
        let wake = match requeue {
            Some((slot, again)) => {
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
pub struct QueueBuilder<T, S = FifoStorage<T>> {
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
        let in_push_order = TypeId::of::<S>() == TypeId::of::<FifoStorage<T>>() && self.storage.is_empty();
        let shared = Arc::new(Shared {
            hasher: foldhash::fast::RandomState::default(),
            state: Mutex::new(State {
                storage: self.storage,
                table: SlotTable::new(),
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
