//! The delaying queue: client-go's `TypedDelayingInterface` (`AddAfter`), with one indexed heap
//! and one timer task for all pending items.
//!
//! client-go hands each `AddAfter` to its waiting loop over a 1000-slot channel, so callers block
//! once a thousand adds are in flight. Here `add_after` inserts into the heap under a short mutex
//! and wakes the timer task only when the earliest deadline moved earlier: it never blocks, no
//! matter how many items are pending.

use std::fmt;
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::error::QueueError;
use crate::item::Item;
use crate::metrics::RetryMetrics;
use crate::pending::Pending;
use crate::queue::{FifoStorage, Queue, QueueBuilder, QueueStorage};

struct Waiting<T> {
    /// Every pending item exactly once (re-adds only move the deadline earlier). Deadlines are
    /// `u64` nanoseconds since `base` rather than 16-byte `Instant`s, to keep items small.
    heap: Pending<T>,
    /// Deadline the timer task is currently sleeping towards; `None` when it sleeps without one.
    /// `add_after` wakes the task only for an earlier deadline, so repeated adds stay cheap.
    armed: Option<u64>,
}

pub(crate) struct DelayInner<T, S> {
    pub(crate) queue: Queue<T, S>,
    waiting: Mutex<Waiting<T>>,
    /// Wakes the timer task (new earliest deadline, shutdown, last handle dropped).
    signal: Arc<Notify>,
    /// Time zero of the heap's `u64` deadlines.
    base: Instant,
    retries: Option<RetryMetrics>,
}

impl<T, S> Drop for DelayInner<T, S> {
    fn drop(&mut self) {
        // The timer task holds only a weak reference; wake it so it notices and exits.
        self.signal.notify_one();
    }
}

impl<T, S> DelayInner<T, S> {
    fn deadline_nanos(&self, now: Instant, after: Duration) -> u64 {
        let since_base = now.saturating_duration_since(self.base).as_nanos();
        u64::try_from(since_base.saturating_add(after.as_nanos())).unwrap_or(u64::MAX)
    }
}

/// A [`Queue`] that can also add items after a delay: client-go's `DelayingInterface`.
///
/// All pending items share one heap and one Tokio timer task. A re-add of a pending item keeps
/// the earlier of the two ready times; a zero delay is a plain [`add`](DelayingQueue::add).
/// Time is Tokio's, so tests can pause and advance it.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use kcache_workqueue::DelayingQueue;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let q = DelayingQueue::new();
/// let start = tokio::time::Instant::now();
/// q.add_after("retry-me", Duration::from_secs(5));
/// q.add_after("retry-me", Duration::from_secs(1)); // the earlier deadline wins
/// assert_eq!(q.len(), 0);
/// assert_eq!(q.get().await, Some("retry-me"));
/// assert_eq!(start.elapsed(), Duration::from_secs(1));
/// # }
/// ```
pub struct DelayingQueue<T, S = FifoStorage<T>> {
    pub(crate) inner: Arc<DelayInner<T, S>>,
}

impl<T, S> Clone for DelayingQueue<T, S> {
    fn clone(&self) -> Self {
        Self { inner: self.inner.clone() }
    }
}

impl<T, S> fmt::Debug for DelayingQueue<T, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DelayingQueue").field("name", &self.inner.queue.shared.name).finish_non_exhaustive()
    }
}

// No `Default`: construction spawns a task and needs a runtime, which `Default` would hide.
#[allow(clippy::new_without_default)]
impl<T: Item> DelayingQueue<T> {
    /// Creates an unnamed delaying queue without metrics and starts its timer task.
    ///
    /// # Panics
    ///
    /// Panics when called outside a Tokio runtime (like `tokio::spawn`); use
    /// [`QueueBuilder::build_delaying`] to get an error instead.
    pub fn new() -> Self {
        match Queue::builder().build_delaying() {
            Ok(q) => q,
            Err(e) => panic!("{e}"),
        }
    }
}

impl<T: Item, S: QueueStorage<T>> QueueBuilder<T, S> {
    /// Builds a [`DelayingQueue`] and spawns its timer task on the current Tokio runtime.
    ///
    /// # Errors
    ///
    /// [`QueueError::NoRuntime`] when called outside a Tokio runtime.
    pub fn build_delaying(self) -> Result<DelayingQueue<T, S>, QueueError> {
        let handle = tokio::runtime::Handle::try_current().map_err(QueueError::NoRuntime)?;
        let queue = self.build();
        let retries = queue.shared.provider.as_deref().map(|p| RetryMetrics::new(p, &queue.shared.name));
        let signal = Arc::new(Notify::new());
        let inner = Arc::new(DelayInner {
            queue,
            waiting: Mutex::new(Waiting { heap: Pending::default(), armed: None }),
            signal: signal.clone(),
            base: Instant::now(),
            retries,
        });
        handle.spawn(timer_loop(Arc::downgrade(&inner), signal));
        Ok(DelayingQueue { inner })
    }
}

/// Most due items moved per lock acquisition.
const MOVE_BATCH: usize = 1024;

/// The single task that moves due items from the heap into the queue.
async fn timer_loop<T: Item, S: QueueStorage<T>>(inner: Weak<DelayInner<T, S>>, signal: Arc<Notify>) {
    let mut due = Vec::new();
    loop {
        // Register interest before reading the heap, so a wake-up between the read and the
        // sleep is not lost (Notify also keeps one permit for exactly this case).
        let notified = signal.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();

        let deadline = {
            let Some(inner) = inner.upgrade() else { return };
            if inner.queue.shutting_down() {
                inner.waiting.lock().heap.clear();
                return;
            }
            let now_nanos = inner.deadline_nanos(Instant::now(), Duration::ZERO);
            let next = loop {
                // Move due items in bounded batches so `add_after` callers never wait behind a
                // million items becoming due at once.
                let (more, armed) = {
                    let mut w = inner.waiting.lock();
                    while due.len() < MOVE_BATCH {
                        match w.heap.pop_ready(now_nanos) {
                            Some(item) => due.push(item),
                            None => break,
                        }
                    }
                    let more = due.len() == MOVE_BATCH;
                    if !more {
                        w.armed = w.heap.peek_at();
                    }
                    (more, w.armed)
                };
                // Add outside the heap lock: `add` takes the queue lock and may wake getters.
                for item in due.drain(..) {
                    inner.queue.add(item);
                }
                if !more {
                    break armed;
                }
                tokio::task::yield_now().await;
            };
            // A deadline too far to represent as an Instant is treated as "never".
            next.and_then(|n| inner.base.checked_add(Duration::from_nanos(n)))
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

macro_rules! forward_queue_methods {
    ($($queue:tt)+) => {
        /// Marks `item` as needing processing; see [`Queue::add`].
        pub fn add(&self, item: T) {
            self.$($queue)+.add(item)
        }

        /// Marks `item` as needing processing, cloning it only if it is not queued yet; see
        /// [`Queue::add_ref`].
        pub fn add_ref(&self, item: &T) {
            self.$($queue)+.add_ref(item)
        }

        /// Number of items ready to be handed out (pending delayed items are not counted).
        pub fn len(&self) -> usize {
            self.$($queue)+.len()
        }

        /// Whether no item is ready to be handed out.
        pub fn is_empty(&self) -> bool {
            self.$($queue)+.is_empty()
        }

        /// Waits for the next item; see [`Queue::get`].
        ///
        /// # Cancel safety
        ///
        /// Cancel safe: dropping the future never loses an item.
        pub fn get(&self) -> crate::queue::Get<'_, T, S> {
            self.$($queue)+.get()
        }

        /// Blocking twin of `get` for plain threads; see [`Queue::get_blocking`].
        pub fn get_blocking(&self) -> Option<T> {
            self.$($queue)+.get_blocking()
        }

        /// Marks `item` as finished; see [`Queue::done`]. A no-op for an item not being processed.
        pub fn done(&self, item: &T) {
            self.$($queue)+.done(item)
        }

        /// Whether the queue is shutting down.
        pub fn shutting_down(&self) -> bool {
            self.$($queue)+.shutting_down()
        }

        /// The queue's name (metrics label).
        pub fn name(&self) -> &str {
            self.$($queue)+.name()
        }
    };
}
pub(crate) use forward_queue_methods;

impl<T: Item, S: QueueStorage<T>> DelayingQueue<T, S> {
    forward_queue_methods!(inner.queue);

    /// Adds `item` once `after` has elapsed (client-go's `AddAfter`).
    ///
    /// A zero delay adds at once. If the item is already pending, the earlier ready time wins.
    /// Never blocks. After shutdown this is a no-op.
    pub fn add_after(&self, item: T, after: Duration) {
        let inner = &*self.inner;
        if inner.queue.shutting_down() {
            return;
        }
        if let Some(r) = &inner.retries {
            r.retry();
        }
        if after.is_zero() {
            inner.queue.add(item);
            return;
        }
        let at = inner.deadline_nanos(Instant::now(), after);
        let wake = {
            let mut w = inner.waiting.lock();
            w.heap.insert_or_earlier(item, at);
            if w.armed.is_none_or(|armed| at < armed) {
                w.armed = Some(at);
                true
            } else {
                false
            }
        };
        if wake {
            inner.signal.notify_one();
        }
    }

    /// Number of items waiting for their delay to pass.
    pub fn pending_len(&self) -> usize {
        self.inner.waiting.lock().heap.len()
    }

    /// Shuts down: drops pending delayed items and stops the timer; see [`Queue::shut_down`].
    pub fn shut_down(&self) {
        self.inner.queue.shut_down();
        self.inner.signal.notify_one();
    }

    /// Shuts down and waits for in-flight items; see [`Queue::shut_down_with_drain`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the queue is shut down on first poll; dropping the future only stops waiting.
    pub async fn shut_down_with_drain(&self) {
        self.inner.queue.begin_drain();
        self.inner.signal.notify_one();
        self.inner.queue.wait_drained().await;
    }

    /// Blocking twin of [`shut_down_with_drain`](DelayingQueue::shut_down_with_drain).
    pub fn shut_down_with_drain_blocking(&self) {
        self.inner.queue.begin_drain();
        self.inner.signal.notify_one();
        self.inner.queue.wait_drained_blocking();
    }

    /// The underlying [`Queue`].
    pub fn queue(&self) -> &Queue<T, S> {
        &self.inner.queue
    }
}
