//! The priority queue: controller-runtime's `pkg/controller/priorityqueue`.
//!
//! Ready items are ordered by priority (highest first), then by insertion counter (FIFO within a
//! priority); waiting items by ready time. Both orders are indexed heaps from the
//! `priority-queue` crate, so re-prioritising an item is `O(log n)`. Items handed out and not yet
//! `done` are *locked*: a re-add while locked is parked in `held` and becomes ready on `done`,
//! which keeps the ready heap free of items that could not be handed out anyway.

use std::cmp::{Ordering, Reverse};
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use kcache_utils::sync::{Mutex, MutexGuard};
use priority_queue::PriorityQueue as IndexedHeap;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::error::QueueError;
use crate::item::Item;
use crate::metrics::{DEFAULT_UNFINISHED_WORK_UPDATE_PERIOD, MetricsProvider, QueueMetrics, RetryMetrics};
use crate::queue::FastSet;
use crate::rate_limiters::{ItemExponentialFailureRateLimiter, RateLimiter};
use crate::waiters::{WaitList, wake_all};

/// Priority controller-runtime gives to events that change nothing (`handler.LowPriority`): the
/// creates of an informer's initial list, and updates whose resource version did not change
/// (resyncs and relists), so that a restart's or a relist's flood does not delay real changes.
pub const LOW_PRIORITY: i32 = -100;

/// An informer notification as an event handler sees it, for [`AddOpts::for_event`]:
/// controller-runtime's `CreateEvent`, `UpdateEvent`, `DeleteEvent` and `GenericEvent`, with
/// only what decides the priority.
///
/// # Examples
///
/// ```
/// use kcache_workqueue::{AddOpts, HandlerEvent, LOW_PRIORITY};
///
/// // `on_update(old, new)` of a resync: the same object, the same resource version.
/// let resync = HandlerEvent::Update { old_resource_version: Some("42"), new_resource_version: Some("42") };
/// assert_eq!(AddOpts::for_event(resync).priority, Some(LOW_PRIORITY));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandlerEvent<'a> {
    /// An `on_add`: whether it belongs to the informer's initial list
    /// (`CreateEvent.IsInInitialList`).
    Create {
        /// The add is part of the informer's initial list (the handler's `is_in_initial_list`).
        is_in_initial_list: bool,
    },
    /// An `on_update(old, new)`, with both objects' `metadata.resourceVersion` (`None` when
    /// unset, which compares equal to `Some("")`, as Go's `GetResourceVersion` returns "").
    Update {
        /// The old object's resource version.
        old_resource_version: Option<&'a str>,
        /// The new object's resource version.
        new_resource_version: Option<&'a str>,
    },
    /// An `on_delete`.
    Delete,
    /// An event from another source (controller-runtime's `GenericEvent`).
    Generic,
}

/// Options of [`PriorityQueue::add_with_opts`] (controller-runtime's `AddOpts`).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use kcache_workqueue::AddOpts;
///
/// let opts = AddOpts { priority: Some(10), after: Duration::from_secs(1), ..AddOpts::default() };
/// assert!(!opts.rate_limited);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AddOpts {
    /// Priority of the item; higher is handed out first. `None` means 0, as a nil `Priority`
    /// does in controller-runtime: for a new item, and for an already queued item too, whose
    /// priority a re-add raises to the larger of the two (so a plain [`add`](PriorityQueue::add)
    /// lifts an item queued at [`LOW_PRIORITY`] to 0). A re-add never lowers a priority.
    pub priority: Option<i32>,
    /// Make the item ready only after this delay (zero: ready now).
    pub after: Duration,
    /// Ask the rate limiter for a delay too; the shorter of it and a non-zero `after` is used.
    pub rate_limited: bool,
}

impl AddOpts {
    /// Options for enqueueing on an informer event, as controller-runtime's event handlers choose
    /// them when their queue is a priority queue (`TypedFuncs.Create` / `Update`,
    /// `addToQueueCreate` / `addToQueueUpdate`, `WithLowPriorityWhenUnchanged` in
    /// `pkg/handler/eventhandler.go`): [`LOW_PRIORITY`] for a create from the initial list and
    /// for an update whose resource version did not change (a resync, or a relist that found the
    /// object unchanged); the default priority (`None`, which is 0) for everything else.
    ///
    /// ```
    /// use kcache_workqueue::{AddOpts, HandlerEvent, LOW_PRIORITY};
    ///
    /// let initial = HandlerEvent::Create { is_in_initial_list: true };
    /// assert_eq!(AddOpts::for_event(initial).priority, Some(LOW_PRIORITY));
    /// let changed = HandlerEvent::Update { old_resource_version: Some("7"), new_resource_version: Some("8") };
    /// assert_eq!(AddOpts::for_event(changed).priority, None);
    /// assert_eq!(AddOpts::for_event(HandlerEvent::Delete).priority, None);
    /// ```
    pub fn for_event(event: HandlerEvent<'_>) -> Self {
        let unchanged = match event {
            HandlerEvent::Create { is_in_initial_list } => is_in_initial_list,
            // Compared as strings, not as numbers: resource versions are opaque.
            HandlerEvent::Update { old_resource_version, new_resource_version } => {
                old_resource_version.unwrap_or_default() == new_resource_version.unwrap_or_default()
            }
            HandlerEvent::Delete | HandlerEvent::Generic => false,
        };
        Self { priority: unchanged.then_some(LOW_PRIORITY), ..Self::default() }
    }
}

/// Order of ready items: higher priority first, then lower insertion counter first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ReadyKey {
    priority: i32,
    counter: u64,
}

impl Ord for ReadyKey {
    fn cmp(&self, other: &Self) -> Ordering {
        // The heap pops the maximum: larger priority wins, then the smaller (older) counter.
        self.priority.cmp(&other.priority).then_with(|| other.counter.cmp(&self.counter))
    }
}
impl PartialOrd for ReadyKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Order of waiting items: earliest ready time first (ties by ready order, for determinism).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct WaitKey {
    /// Nanoseconds since the queue's base instant.
    at: u64,
    ready: ReadyKey,
}

impl Ord for WaitKey {
    fn cmp(&self, other: &Self) -> Ordering {
        Reverse(self.at).cmp(&Reverse(other.at)).then_with(|| self.ready.cmp(&other.ready))
    }
}
impl PartialOrd for WaitKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

type Heap<T, P> = IndexedHeap<T, P, foldhash::fast::RandomState>;

struct PqState<T> {
    /// Ready, unlocked items.
    ready: Heap<T, ReadyKey>,
    /// Items whose ready time has not come (locked or not).
    waiting: Heap<T, WaitKey>,
    /// Ready items that are locked (re-added while a worker holds them).
    held: HashMap<T, ReadyKey, foldhash::fast::RandomState>,
    /// Items handed out and not yet done.
    locked: FastSet<T>,
    /// Next insertion counter.
    counter: u64,
    shutting_down: bool,
    /// Async getters parked on an empty ready heap.
    getters: WaitList,
    /// Async drain waiters.
    drainers: WaitList,
    /// Deadline the timer task sleeps towards.
    armed: Option<u64>,
    metrics: Option<Box<QueueMetrics<T>>>,
}

impl<T: Item> PqState<T> {
    fn next_counter(&mut self) -> u64 {
        let c = self.counter;
        self.counter += 1;
        c
    }

    /// Makes `item` ready with `key`, in `held` if it is locked. Returns whether a getter can
    /// take it now.
    fn make_ready(&mut self, item: T, key: ReadyKey) -> bool {
        if let Some(m) = &mut self.metrics {
            m.add(&item, Some(key.priority));
        }
        if self.locked.contains(&item) {
            self.held.insert(item, key);
            false
        } else {
            self.ready.push(item, key);
            true
        }
    }

    /// Moves every waiting item whose time has come to ready; returns how many can be taken.
    fn promote_due(&mut self, now: u64) -> usize {
        if self.waiting.is_empty() {
            return 0;
        }
        let mut takeable = 0;
        while self.waiting.peek().is_some_and(|(_, k)| k.at <= now) {
            if let Some((item, key)) = self.waiting.pop() {
                // A fresh counter: items that become ready together keep deadline order, and
                // an item that waited queues behind those that were ready before it.
                let ready = ReadyKey { priority: key.ready.priority, counter: self.next_counter() };
                takeable += usize::from(self.make_ready(item, ready));
            }
        }
        takeable
    }

    fn take(&mut self) -> Option<(T, i32)> {
        let (item, key) = self.ready.pop()?;
        if let Some(m) = &mut self.metrics {
            m.get(&item, Some(key.priority));
        }
        self.locked.insert(item.clone());
        Some((item, key.priority))
    }

    fn wakers(&mut self, n: usize) -> Vec<std::task::Waker> {
        (0..n).map_while(|_| self.getters.pop()).collect()
    }
}

struct PqShared<T> {
    state: Mutex<PqState<T>>,
    limiter: Arc<dyn RateLimiter<T>>,
    retries: Option<RetryMetrics>,
    /// Wakes the timer task.
    signal: Arc<Notify>,
    base: Instant,
    name: Arc<str>,
}

impl<T> Drop for PqShared<T> {
    fn drop(&mut self) {
        self.signal.notify_one();
    }
}

impl<T> PqShared<T> {
    fn now_nanos(&self) -> u64 {
        self.nanos(Instant::now(), Duration::ZERO)
    }

    fn nanos(&self, now: Instant, after: Duration) -> u64 {
        let since = now.saturating_duration_since(self.base).as_nanos();
        u64::try_from(since.saturating_add(after.as_nanos())).unwrap_or(u64::MAX)
    }
}

/// A work queue ordered by priority, like controller-runtime's `priorityqueue`.
///
/// * Higher priority first; FIFO within a priority (raising an item's priority puts it at the
///   back of its new level).
/// * Re-adding keeps the highest priority and the earliest ready time; an add without delay
///   makes a waiting item ready at once.
/// * An item handed out and not yet `done` is not handed out again; a re-add meanwhile is held
///   and becomes ready on `done`.
/// * [`len`](PriorityQueue::len) counts ready items only (including held ones).
/// * After shutdown, `get` returns `None` at once (controller-runtime does not drain this queue).
///
/// # Examples
///
/// ```
/// use kcache_workqueue::{AddOpts, HandlerEvent, PriorityQueue};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let q = PriorityQueue::new();
/// let initial = HandlerEvent::Create { is_in_initial_list: true };
/// q.add_with_opts(AddOpts::for_event(initial), ["initial-1", "initial-2"]);
/// q.add("changed");
/// assert_eq!(q.get_with_priority().await, Some(("changed", 0)));
/// assert_eq!(q.get_with_priority().await, Some(("initial-1", -100)));
/// # }
/// ```
pub struct PriorityQueue<T> {
    shared: Arc<PqShared<T>>,
}

impl<T> Clone for PriorityQueue<T> {
    fn clone(&self) -> Self {
        Self { shared: self.shared.clone() }
    }
}

impl<T> fmt::Debug for PriorityQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PriorityQueue").field("name", &self.shared.name).finish_non_exhaustive()
    }
}

// No `Default`: construction spawns a task and needs a runtime, which `Default` would hide.
#[allow(clippy::new_without_default)]
impl<T: Item> PriorityQueue<T> {
    /// Creates an unnamed priority queue with controller-runtime's default rate limiter
    /// (per-item exponential, 5 ms up to 1000 s) and no metrics.
    ///
    /// # Panics
    ///
    /// Panics outside a Tokio runtime; use [`PriorityQueue::builder`] for an error instead.
    pub fn new() -> Self {
        match Self::builder().build() {
            Ok(q) => q,
            Err(e) => panic!("{e}"),
        }
    }

    /// Starts configuring a priority queue.
    pub fn builder() -> PriorityQueueBuilder<T> {
        PriorityQueueBuilder {
            name: Arc::from(""),
            limiter: None,
            provider: None,
            update_period: DEFAULT_UNFINISHED_WORK_UPDATE_PERIOD,
        }
    }

    fn lock(&self) -> MutexGuard<'_, PqState<T>> {
        self.shared.state.lock()
    }

    /// Adds `items` with `opts` (controller-runtime's `AddWithOpts`). Adds after shutdown are
    /// dropped.
    pub fn add_with_opts(&self, opts: AddOpts, items: impl IntoIterator<Item = T>) {
        let shared = &*self.shared;
        // Read the clock at most once, and only if some item is delayed.
        let mut now = None;
        let mut st = self.lock();
        if st.shutting_down {
            return;
        }
        let mut takeable = 0;
        let mut rearm = false;
        for item in items {
            let mut after = opts.after;
            if opts.rate_limited {
                let limited = shared.limiter.when(&item);
                if after.is_zero() || limited < after {
                    after = limited;
                }
            }
            let at = if after.is_zero() {
                None
            } else {
                if let Some(r) = &shared.retries {
                    r.retry();
                }
                Some(shared.nanos(*now.get_or_insert_with(Instant::now), after))
            };
            takeable += self.add_one(&mut st, item, opts.priority, at, &mut rearm);
        }
        let wakers = st.wakers(takeable);
        drop(st);
        if rearm {
            shared.signal.notify_one();
        }
        for w in wakers {
            w.wake();
        }
    }

    /// Adds one item; returns 1 if a getter can now take a new item.
    fn add_one(
        &self,
        st: &mut PqState<T>,
        item: T,
        priority: Option<i32>,
        at: Option<u64>,
        rearm: &mut bool,
    ) -> usize {
        // controller-runtime compares `ptr.Deref(o.Priority, 0)` with the queued priority: an
        // unset priority is 0, for a re-add as for a new item.
        let priority = priority.unwrap_or(0);
        // Already ready (unlocked)?
        if let Some(old) = st.ready.get_priority(&item).copied() {
            if priority > old.priority {
                let key = ReadyKey { priority, counter: st.next_counter() };
                st.ready.change_priority(&item, key);
                if let Some(m) = &mut st.metrics {
                    m.move_priority(old.priority, priority);
                }
            }
            return 0;
        }
        // Ready but locked?
        if let Some(old) = st.held.get(&item).copied() {
            if priority > old.priority {
                let key = ReadyKey { priority, counter: st.next_counter() };
                st.held.insert(item, key);
                if let Some(m) = &mut st.metrics {
                    m.move_priority(old.priority, priority);
                }
            }
            return 0;
        }
        // Waiting?
        if let Some(old) = st.waiting.get_priority(&item).copied() {
            let mut key = old;
            if priority > old.ready.priority {
                key.ready = ReadyKey { priority, counter: st.next_counter() };
            }
            match at {
                None => {
                    st.waiting.remove(&item);
                    return usize::from(st.make_ready(item, key.ready));
                }
                Some(at) if at < old.at => {
                    key.at = at;
                    if st.armed.is_none_or(|armed| at < armed) {
                        st.armed = Some(at);
                        *rearm = true;
                    }
                }
                Some(_) => {}
            }
            if key != old {
                st.waiting.change_priority(&item, key);
            }
            return 0;
        }
        // New item.
        let ready = ReadyKey { priority, counter: st.next_counter() };
        match at {
            None => usize::from(st.make_ready(item, ready)),
            Some(at) => {
                st.waiting.push(item, WaitKey { at, ready });
                if st.armed.is_none_or(|armed| at < armed) {
                    st.armed = Some(at);
                    *rearm = true;
                }
                0
            }
        }
    }

    /// Adds `item` now with the default priority.
    pub fn add(&self, item: T) {
        self.add_with_opts(AddOpts::default(), [item]);
    }

    /// Adds `item` after `after`.
    pub fn add_after(&self, item: T, after: Duration) {
        self.add_with_opts(AddOpts { after, ..AddOpts::default() }, [item]);
    }

    /// Adds `item` after the rate limiter's delay.
    pub fn add_rate_limited(&self, item: T) {
        self.add_with_opts(AddOpts { rate_limited: true, ..AddOpts::default() }, [item]);
    }

    /// Waits for the highest-priority ready item; `None` once shut down.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: an item is taken only in the poll that returns it, and a getter woken for an
    /// item but dropped passes the wake-up on.
    pub fn get_with_priority(&self) -> PriorityGet<'_, T> {
        PriorityGet { queue: self, waiter: None }
    }

    /// Like [`get_with_priority`](PriorityQueue::get_with_priority) without the priority.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, like `get_with_priority`.
    pub async fn get(&self) -> Option<T> {
        self.get_with_priority().await.map(|(item, _)| item)
    }

    /// Marks `item` finished; a held re-add of it becomes ready. A no-op for an item that is
    /// not locked.
    pub fn done(&self, item: &T) {
        let mut st = self.lock();
        if !st.locked.remove(item) {
            return;
        }
        if let Some(m) = &mut st.metrics {
            m.done(item);
        }
        let mut wake = None;
        if let Some((owned, key)) = st.held.remove_entry(item) {
            st.ready.push(owned, key);
            wake = st.getters.pop();
        }
        let drainers = if st.locked.is_empty() && st.shutting_down {
            st.drainers.take_all()
        } else {
            Default::default()
        };
        drop(st);
        if let Some(w) = wake {
            w.wake();
        }
        wake_all(drainers);
    }

    /// Number of ready items (held re-adds of locked items count; waiting ones do not).
    pub fn len(&self) -> usize {
        let mut st = self.lock();
        let takeable = if st.waiting.is_empty() { 0 } else { st.promote_due(self.shared.now_nanos()) };
        let n = st.ready.len() + st.held.len();
        let wakers = st.wakers(takeable);
        drop(st);
        for w in wakers {
            w.wake();
        }
        n
    }

    /// Number of items handed out by [`get`](Self::get) and not yet [`done`](Self::done): the
    /// workers' share of the backlog (client-go's `processing` set). An item moves from
    /// [`len`](Self::len) to this count under one lock, so reading `len` first and then this
    /// never sees an item in neither.
    ///
    /// ```
    /// use kcache_workqueue::PriorityQueue;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let q = PriorityQueue::new();
    /// q.add("a");
    /// let item = q.get().await.expect("not shut down");
    /// assert_eq!((q.len(), q.processing_len()), (0, 1));
    /// q.done(&item);
    /// assert_eq!(q.processing_len(), 0);
    /// # }
    /// ```
    pub fn processing_len(&self) -> usize {
        self.lock().locked.len()
    }

    /// Whether no item is ready.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of items waiting for their delay to pass (added with `after` or rate limited),
    /// which [`len`](Self::len) does not count: the priority queue's counterpart of
    /// [`RateLimitingQueue::pending_len`](crate::RateLimitingQueue::pending_len).
    ///
    /// ```
    /// use std::time::Duration;
    /// use kcache_workqueue::PriorityQueue;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let q = PriorityQueue::new();
    /// q.add_after("later", Duration::from_secs(5));
    /// q.add("now");
    /// assert_eq!((q.len(), q.pending_len()), (1, 1));
    /// tokio::time::sleep(Duration::from_secs(5)).await;
    /// assert_eq!((q.len(), q.pending_len()), (2, 0));
    /// # }
    /// ```
    pub fn pending_len(&self) -> usize {
        let mut st = self.lock();
        // Items whose time has come are ready, not pending, even before the timer moved them.
        let takeable = if st.waiting.is_empty() { 0 } else { st.promote_due(self.shared.now_nanos()) };
        let n = st.waiting.len();
        let wakers = st.wakers(takeable);
        drop(st);
        for w in wakers {
            w.wake();
        }
        n
    }

    /// Resets the rate limiter's history for `item`. A no-op for an unknown item.
    pub fn forget(&self, item: &T) {
        self.shared.limiter.forget(item);
    }

    /// How many times `item` was rate limited since it was last forgotten.
    pub fn num_requeues(&self, item: &T) -> usize {
        self.shared.limiter.num_requeues(item)
    }

    /// Shuts down: parked and future getters get `None`, adds are dropped.
    pub fn shut_down(&self) {
        let mut st = self.lock();
        st.shutting_down = true;
        let getters = st.getters.take_all();
        let drainers = st.drainers.take_all();
        drop(st);
        self.shared.signal.notify_one();
        wake_all(getters);
        wake_all(drainers);
    }

    /// Shuts down and waits until every handed-out item is `done`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the queue is shut down on first poll; dropping the future only stops waiting.
    pub async fn shut_down_with_drain(&self) {
        self.shut_down();
        PqDrain { queue: self, waiter: None }.await;
    }

    /// Whether the queue is shutting down.
    pub fn shutting_down(&self) -> bool {
        self.lock().shutting_down
    }

    /// The queue's name (metrics label).
    pub fn name(&self) -> &str {
        &self.shared.name
    }
}

/// Future returned by [`PriorityQueue::get_with_priority`].
#[must_use = "futures do nothing unless polled"]
pub struct PriorityGet<'a, T: Item> {
    queue: &'a PriorityQueue<T>,
    waiter: Option<u64>,
}

impl<T: Item> fmt::Debug for PriorityGet<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PriorityGet").field("waiting", &self.waiter.is_some()).finish()
    }
}

impl<T: Item> Future for PriorityGet<'_, T> {
    type Output = Option<(T, i32)>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let mut st = this.queue.lock();
        if st.shutting_down {
            if let Some(id) = this.waiter.take() {
                st.getters.remove(id);
            }
            return Poll::Ready(None);
        }
        if !st.waiting.is_empty() {
            st.promote_due(this.queue.shared.now_nanos());
        }
        if let Some(found) = st.take() {
            if let Some(id) = this.waiter.take() {
                st.getters.remove(id);
            }
            // Other getters may be parked while more items became ready in this poll.
            let more = if st.ready.is_empty() { None } else { st.getters.pop() };
            drop(st);
            if let Some(w) = more {
                w.wake();
            }
            return Poll::Ready(Some(found));
        }
        st.getters.register(&mut this.waiter, cx.waker());
        Poll::Pending
    }
}

impl<T: Item> Drop for PriorityGet<'_, T> {
    fn drop(&mut self) {
        let Some(id) = self.waiter.take() else { return };
        let mut st = self.queue.lock();
        if st.getters.remove(id) || st.ready.is_empty() {
            return;
        }
        // Woken for an item we will never take: pass the wake-up on.
        let next = st.getters.pop();
        drop(st);
        if let Some(w) = next {
            w.wake();
        }
    }
}

struct PqDrain<'a, T: Item> {
    queue: &'a PriorityQueue<T>,
    waiter: Option<u64>,
}

impl<T: Item> Future for PqDrain<'_, T> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let mut st = this.queue.lock();
        if st.locked.is_empty() {
            if let Some(id) = this.waiter.take() {
                st.drainers.remove(id);
            }
            return Poll::Ready(());
        }
        st.drainers.register(&mut this.waiter, cx.waker());
        Poll::Pending
    }
}

impl<T: Item> Drop for PqDrain<'_, T> {
    fn drop(&mut self) {
        if let Some(id) = self.waiter.take() {
            self.queue.lock().drainers.remove(id);
        }
    }
}

/// Configures a [`PriorityQueue`].
pub struct PriorityQueueBuilder<T> {
    name: Arc<str>,
    limiter: Option<Arc<dyn RateLimiter<T>>>,
    provider: Option<Arc<dyn MetricsProvider>>,
    update_period: Duration,
}

impl<T> fmt::Debug for PriorityQueueBuilder<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PriorityQueueBuilder")
            .field("name", &self.name)
            .field("metrics", &self.provider.is_some())
            .finish_non_exhaustive()
    }
}

impl<T: Item> PriorityQueueBuilder<T> {
    /// Names the queue (metrics label).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Arc::from(name.into());
        self
    }

    /// Rate limiter for `rate_limited` adds (default: exponential 5 ms up to 1000 s).
    pub fn rate_limiter(mut self, limiter: impl RateLimiter<T> + 'static) -> Self {
        self.limiter = Some(Arc::new(limiter));
        self
    }

    /// Reports metrics through `provider`; depth is reported per priority.
    pub fn metrics_provider(mut self, provider: Arc<dyn MetricsProvider>) -> Self {
        self.provider = Some(provider);
        self
    }

    /// How often unfinished-work gauges are refreshed (default 500 ms).
    pub fn unfinished_work_update_period(mut self, period: Duration) -> Self {
        self.update_period = period;
        self
    }

    /// Builds the queue and spawns its timer task.
    ///
    /// # Errors
    ///
    /// [`QueueError::NoRuntime`] outside a Tokio runtime.
    pub fn build(self) -> Result<PriorityQueue<T>, QueueError> {
        let handle = tokio::runtime::Handle::try_current().map_err(QueueError::NoRuntime)?;
        let limiter = self.limiter.unwrap_or_else(|| {
            Arc::new(ItemExponentialFailureRateLimiter::new(
                Duration::from_millis(5),
                Duration::from_secs(1000),
            ))
        });
        let metrics =
            self.provider.as_ref().map(|p| Box::new(QueueMetrics::new(p.clone(), self.name.clone())));
        let retries = self.provider.as_deref().map(|p| RetryMetrics::new(p, &self.name));
        let signal = Arc::new(Notify::new());
        let has_metrics = metrics.is_some();
        let shared = Arc::new(PqShared {
            state: Mutex::new(PqState {
                ready: Heap::default(),
                waiting: Heap::default(),
                held: HashMap::default(),
                locked: FastSet::default(),
                counter: 0,
                shutting_down: false,
                getters: WaitList::default(),
                drainers: WaitList::default(),
                armed: None,
                metrics,
            }),
            limiter,
            retries,
            signal: signal.clone(),
            base: Instant::now(),
            name: self.name,
        });
        handle.spawn(timer_loop(Arc::downgrade(&shared), signal));
        if has_metrics {
            let weak = Arc::downgrade(&shared);
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
        Ok(PriorityQueue { shared })
    }
}

/// Makes waiting items ready at their time and wakes getters for them.
async fn timer_loop<T: Item>(shared: Weak<PqShared<T>>, signal: Arc<Notify>) {
    loop {
        let notified = signal.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let deadline = {
            let Some(shared) = shared.upgrade() else { return };
            let now = shared.nanos(Instant::now(), Duration::ZERO);
            let mut st = shared.state.lock();
            if st.shutting_down {
                return;
            }
            let takeable = st.promote_due(now);
            let wakers = st.wakers(takeable);
            st.armed = st.waiting.peek().map(|(_, k)| k.at);
            let next = st.armed.and_then(|n| shared.base.checked_add(Duration::from_nanos(n)));
            drop(st);
            for w in wakers {
                w.wake();
            }
            next
        };
        match deadline {
            Some(at) => {
                tokio::select! {
                    () = tokio::time::sleep_until(at) => {}
                    () = &mut notified => {}
                }
            }
            None => notified.await,
        }
    }
}
