//! The `Fifo` trait both queues implement, the `Pop` future, and the lock-plus-wakeup core they
//! share: a mutex around the queue state, a condvar for blocking pops and a waker list for async
//! pops.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use kcache_store::{BoxError, ReflectorStore};
use kcache_utils::sync::{AtomicBool, AtomicUsize, Condvar, Mutex, MutexGuard};

use crate::delta::Deltas;
use crate::error::FifoError;

/// The process function of a pop, as a trait object: receives the popped deltas and whether they
/// belong to the initial list, runs under the FIFO's lock. The deltas are the changes to one
/// object or, from a [`RealFifo`](crate::RealFifo) with
/// [`atomic_events`](crate::RealFifoOptions::atomic_events), possibly a whole relist or resync
/// ([`Deltas::atomic_event`]).
pub type ProcessFn<'a, K> = dyn FnMut(Deltas<K>, bool) -> Result<(), BoxError> + 'a;

/// What an informer pops from: client-go's `Queue`, implemented by
/// [`DeltaFifo`](crate::DeltaFifo) and [`RealFifo`](crate::RealFifo). Object-safe, so the informer
/// can hold an `Arc<dyn Fifo<K>>` and pick the queue at run time; the generic, async
/// [`FifoExt::pop`] works on `dyn Fifo<K>` too.
pub trait Fifo<K>: ReflectorStore<K> {
    /// Pops the next item if there is one and runs `process` on it under the FIFO's lock.
    ///
    /// Returns `Pending` (having registered `cx`'s waker) when the FIFO is empty and open.
    ///
    /// # Errors
    ///
    /// [`FifoError::Closed`] once closed and empty; [`FifoError::Process`] with `process`'s error.
    ///
    /// # Cancel safety
    ///
    /// An item is removed only by a call that also runs `process` on it and returns `Ready`.
    fn poll_pop(&self, cx: &mut Context<'_>, process: &mut ProcessFn<'_, K>) -> Poll<Result<(), FifoError>>;

    /// Blocks the thread until an item is queued, then pops it and runs `process` on it under the
    /// FIFO's lock (client-go's `Pop`).
    ///
    /// # Errors
    ///
    /// [`FifoError::Closed`] once closed and empty; [`FifoError::Process`] with `process`'s error.
    fn pop_blocking(&self, process: &mut ProcessFn<'_, K>) -> Result<(), FifoError>;

    /// Closes the FIFO: pops drain what is queued, then every waiter gets [`FifoError::Closed`].
    fn close(&self);

    /// Whether [`close`](Self::close) was called.
    fn is_closed(&self) -> bool;

    /// Whether the first list has been popped and processed entirely, so still false while the
    /// process function of its last item runs (or an add, update or delete came before any
    /// list). Lock-free, so it may be called from inside a process function.
    fn has_synced(&self) -> bool;

    /// The queue depth: keys for a DeltaFIFO; for the in-order FIFO deltas, an atomic relist or
    /// resync counting as one. Lock-free, for metrics, callable from inside a process function.
    fn len(&self) -> usize;

    /// Whether nothing is queued.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The generic pop methods, for every [`Fifo`] including `dyn Fifo<K>`.
pub trait FifoExt<K>: Fifo<K> {
    /// Waits until an item is queued, pops it and runs `process(deltas, is_in_initial_list)` on it
    /// while holding the FIFO's lock, so producers wait for a slow `process` (client-go's
    /// backpressure). Returns `process`'s error; the item is not requeued. An item is the
    /// changes to one object, or one [atomic event](crate::AtomicEvent) of an in-order FIFO (a
    /// whole relist or resync, all of whose deltas `process` receives at once).
    ///
    /// # Errors
    ///
    /// [`FifoError::Closed`] once closed and empty; [`FifoError::Process`] with `process`'s error.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: dropping the future before it completes never loses an item, because an item
    /// is removed only in the same poll that runs `process` on it and completes.
    fn pop<P, E>(&self, process: P) -> Pop<'_, K, Self, P>
    where
        P: FnMut(Deltas<K>, bool) -> Result<(), E>,
        E: Into<BoxError>,
    {
        Pop { fifo: self, process, _k: PhantomData }
    }
}

impl<K, F: Fifo<K> + ?Sized> FifoExt<K> for F {}

/// The future of [`FifoExt::pop`].
#[must_use = "futures do nothing unless polled"]
pub struct Pop<'a, K, F: ?Sized, P> {
    fifo: &'a F,
    process: P,
    _k: PhantomData<fn() -> K>,
}

// `process` is never pinned: it is only called through `&mut`, so the future may move freely.
impl<K, F: ?Sized, P> Unpin for Pop<'_, K, F, P> {}

impl<K, F: ?Sized, P> fmt::Debug for Pop<'_, K, F, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pop").finish_non_exhaustive()
    }
}

impl<K, F, P, E> Future for Pop<'_, K, F, P>
where
    F: Fifo<K> + ?Sized,
    P: FnMut(Deltas<K>, bool) -> Result<(), E>,
    E: Into<BoxError>,
{
    type Output = Result<(), FifoError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let process = &mut this.process;
        let mut adapter = |d: Deltas<K>, initial: bool| process(d, initial).map_err(Into::into);
        this.fifo.poll_pop(cx, &mut adapter)
    }
}

/// One popped item, handed from the queue state to the shared pop logic.
pub(crate) struct Popped<K, I> {
    /// The key, for the slow-process trace.
    pub(crate) id: I,
    pub(crate) deltas: Deltas<K>,
    pub(crate) is_in_initial_list: bool,
}

/// The queue-specific half of a FIFO.
pub(crate) trait QueueState<K>: QueueBase {
    /// How a pop names the popped item's key (only shown by the slow-process trace).
    type Id;
    /// Removes the next item, updating the initial-population count.
    fn pop_front(&mut self) -> Option<Popped<K, Self::Id>>;
    /// The key `id` names. Only valid under the lock of the pop that returned `id`, before any
    /// other change to the state (the process function cannot change it: it runs under that lock).
    fn key_of<'a>(&'a self, id: &'a Self::Id) -> &'a str;
}

/// Client-go traces a pop whose process takes longer than this while the queue is deeper than
/// [`SLOW_DEPTH`]: "slow event handlers blocking the queue".
const SLOW_PROCESS: Duration = Duration::from_millis(100);
/// See [`SLOW_PROCESS`].
const SLOW_DEPTH: usize = 10;

/// The capacity (in queued keys or deltas) a drained FIFO keeps. A queue grown past it by a relist
/// or a burst is freed once it empties instead of being kept for the FIFO's life (a 10k-object
/// relist leaves 560 KB in the in-order FIFO otherwise).
pub(crate) const KEEP_CAPACITY: usize = 1024;

pub(crate) struct Locked<S> {
    pub(crate) state: S,
    closed: bool,
    /// Wakers of async pops that found the queue empty. Woken (all of them) when the queue
    /// becomes non-empty or the FIFO closes; a dropped `Pop` leaves a stale waker that is
    /// discarded at the next wake-up.
    wakers: Vec<Waker>,
}

/// The lock, the wake-up machinery and the lock-free mirrors of depth, closed and synced.
pub(crate) struct Core<S> {
    name: &'static str,
    locked: Mutex<Locked<S>>,
    /// Blocking pops wait here.
    cond: Condvar,
    /// Mirrors `state.depth()`, updated under the lock, read without it.
    depth: AtomicUsize,
    /// Mirrors `closed`.
    closed: AtomicBool,
    /// Mirrors `state.has_synced()`.
    synced: AtomicBool,
}

impl<S> fmt::Debug for Core<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(self.name)
            .field("depth", &self.depth.load(Ordering::Relaxed))
            .field("closed", &self.closed.load(Ordering::Relaxed))
            .field("synced", &self.synced.load(Ordering::Relaxed))
            .finish()
    }
}

impl<S> Core<S> {
    pub(crate) fn new(name: &'static str, state: S) -> Self {
        Self {
            name,
            locked: Mutex::new(Locked { state, closed: false, wakers: Vec::new() }),
            cond: Condvar::new(),
            depth: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            synced: AtomicBool::new(false),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.depth.load(Ordering::Acquire)
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    pub(crate) fn has_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// Read access to the state under the lock.
    pub(crate) fn read<R>(&self, f: impl FnOnce(&S) -> R) -> R {
        f(&self.locked.lock().state)
    }

    pub(crate) fn close(&self)
    where
        S: QueueBase,
    {
        let mut g = self.locked.lock();
        g.closed = true;
        self.closed.store(true, Ordering::Release);
        self.wake_all(g);
    }

    /// Runs a mutation under the lock, then refreshes the mirrors and wakes the waiters if the
    /// queue went from empty to non-empty. Waiters exist only while the queue is empty (they
    /// re-check under the lock before sleeping), so no other transition needs a wake-up.
    pub(crate) fn mutate<R>(&self, f: impl FnOnce(&mut S) -> R) -> R
    where
        S: QueueBase,
    {
        let mut g = self.locked.lock();
        let before = g.state.depth();
        let r = f(&mut g.state);
        let after = g.state.depth();
        self.depth.store(after, Ordering::Release);
        self.synced.store(g.state.has_synced(), Ordering::Release);
        if before == 0 && after > 0 {
            self.wake_all(g);
        }
        r
    }

    fn wake_all(&self, mut g: MutexGuard<'_, Locked<S>>) {
        let wakers = std::mem::take(&mut g.wakers);
        drop(g);
        self.cond.notify_all();
        for w in wakers {
            w.wake();
        }
    }

    /// Pops one item under `g` and runs `process` still holding the lock. `None` when empty.
    fn run_one<K>(
        &self,
        g: &mut MutexGuard<'_, Locked<S>>,
        process: &mut ProcessFn<'_, K>,
    ) -> Option<Result<(), FifoError>>
    where
        S: QueueState<K>,
    {
        let popped = g.state.pop_front()?;
        let depth = g.state.depth();
        self.depth.store(depth, Ordering::Release);
        // The popped item counts toward the initial list until `process` is done with it: publish
        // `synced` only afterwards (even if `process` fails or panics), so no one sees the FIFO
        // synced while the last initial item is still on its way into the informer's indexer.
        // Client-go's RealFIFO defers the decrement for this reason; its DeltaFIFO's `HasSynced`
        // waits for the lock `Pop` holds while processing. `process` cannot change the state (it
        // runs under the lock), so the value can be read now.
        let _publish_synced = PublishOnDrop { flag: &self.synced, value: g.state.has_synced() };
        // Like client-go, only time the process function when the queue is deep: with the lock
        // held during processing, depth can only build up if the handler is slow.
        let start = (depth > SLOW_DEPTH).then(Instant::now);
        let id = popped.id;
        let result = process(popped.deltas, popped.is_in_initial_list).map_err(FifoError::Process);
        if let Some(start) = start {
            let elapsed = start.elapsed();
            if elapsed > SLOW_PROCESS {
                tracing::warn!(
                    fifo = self.name,
                    id = %g.state.key_of(&id),
                    depth,
                    elapsed_ms = elapsed.as_millis() as u64,
                    reason = "slow event handlers blocking the queue",
                    "{} Pop Process",
                    self.name,
                );
            }
        }
        Some(result)
    }

    pub(crate) fn poll_pop<K>(
        &self,
        cx: &mut Context<'_>,
        process: &mut ProcessFn<'_, K>,
    ) -> Poll<Result<(), FifoError>>
    where
        S: QueueState<K>,
    {
        let mut g = self.locked.lock();
        if let Some(r) = self.run_one(&mut g, process) {
            return Poll::Ready(r);
        }
        if g.closed {
            return Poll::Ready(Err(FifoError::Closed));
        }
        if !g.wakers.iter().any(|w| w.will_wake(cx.waker())) {
            g.wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }

    pub(crate) fn pop_blocking<K>(&self, process: &mut ProcessFn<'_, K>) -> Result<(), FifoError>
    where
        S: QueueState<K>,
    {
        let mut g = self.locked.lock();
        loop {
            if let Some(r) = self.run_one(&mut g, process) {
                return r;
            }
            if g.closed {
                return Err(FifoError::Closed);
            }
            g = self.cond.wait(g);
        }
    }
}

/// Stores `value` into `flag` when dropped: after the process function returns or unwinds.
struct PublishOnDrop<'a> {
    flag: &'a AtomicBool,
    value: bool,
}

impl Drop for PublishOnDrop<'_> {
    fn drop(&mut self) {
        self.flag.store(self.value, Ordering::Release);
    }
}

/// The parts of [`QueueState`] that do not depend on the object type, so `mutate` and `close`
/// need no `K`.
pub(crate) trait QueueBase {
    /// The queue depth.
    fn depth(&self) -> usize;
    /// `populated && initial_population_count == 0`.
    fn has_synced(&self) -> bool;
}

/// Implements [`ReflectorStore`] and [`Fifo`] for a FIFO type that has inherent `add`, `update`,
/// `delete`, `replace` and `resync` methods and a `core` field holding the shared lock-and-wake-up
/// core: both queues share one definition of this plumbing. Named after the type, `replace_keyed`
/// forwards `ReflectorStore::replace_keyed` to the inherent method of that name (otherwise the
/// trait's default, which ignores the keys, stands).
macro_rules! impl_fifo_traits {
    ($fifo:ident $(, $replace_keyed:ident)?) => {
        impl<K: Send + Sync + 'static> kcache_store::ReflectorStore<K> for $fifo<K> {
            fn add(&self, obj: std::sync::Arc<K>) -> Result<(), kcache_store::StoreError> {
                $fifo::add(self, obj)
            }
            fn update(&self, obj: std::sync::Arc<K>) -> Result<(), kcache_store::StoreError> {
                $fifo::update(self, obj)
            }
            fn delete(&self, obj: std::sync::Arc<K>) -> Result<(), kcache_store::StoreError> {
                $fifo::delete(self, obj)
            }
            fn replace(
                &self,
                list: Vec<std::sync::Arc<K>>,
                resource_version: &str,
            ) -> Result<(), kcache_store::StoreError> {
                $fifo::replace(self, list, resource_version)
            }
            $(
                fn $replace_keyed(
                    &self,
                    list: Vec<(std::sync::Arc<str>, std::sync::Arc<K>)>,
                    key_func: &kcache_store::KeyFunc<K>,
                    resource_version: &str,
                ) -> Result<(), kcache_store::StoreError> {
                    $fifo::$replace_keyed(self, list, key_func, resource_version)
                }
            )?
            fn resync(&self) -> Result<(), kcache_store::StoreError> {
                $fifo::resync(self)
            }
        }

        impl<K: Send + Sync + 'static> $crate::fifo::Fifo<K> for $fifo<K> {
            fn poll_pop(
                &self,
                cx: &mut std::task::Context<'_>,
                process: &mut $crate::fifo::ProcessFn<'_, K>,
            ) -> std::task::Poll<Result<(), $crate::error::FifoError>> {
                self.core.poll_pop(cx, process)
            }
            fn pop_blocking(
                &self,
                process: &mut $crate::fifo::ProcessFn<'_, K>,
            ) -> Result<(), $crate::error::FifoError> {
                self.core.pop_blocking(process)
            }
            fn close(&self) {
                self.core.close();
            }
            fn is_closed(&self) -> bool {
                self.core.is_closed()
            }
            fn has_synced(&self) -> bool {
                self.core.has_synced()
            }
            fn len(&self) -> usize {
                self.core.len()
            }
        }
    };
}

pub(crate) use impl_fifo_traits;
