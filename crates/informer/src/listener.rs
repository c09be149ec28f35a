//! One listener per handler: a buffer the distributor never waits on, and a thread that feeds the
//! handler in order (client-go's `processorListener`, without its OOM-by-design).

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use kcache_ring_buffer::{LISTENER_INITIAL_CAPACITY, Ring, RingOptions};
use kcache_store::{KeyFunc, ObjectOrTombstone};
use parking_lot::{Condvar, Mutex};
use tokio::time::Instant;

use crate::failure::{FailureCause, PanicPolicy};
use crate::failure_state::FailureState;
use crate::handler::ResourceEventHandler;
use crate::sync::SyncSignal;

/// How a listener buffers the notifications its handler has not taken yet.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ListenerMode {
    /// client-go's behaviour: every notification is kept, in order, in a growing ring buffer
    /// (initial capacity 1024) behind a one-item lookahead. A stalled handler costs memory in
    /// proportion to the events it has not consumed. Unlike client-go's, whose ring never
    /// shrinks, the ring goes back to 1024 slots once the handler has caught up, so a burst does
    /// not pin its peak allocation for the life of the informer. The backlog is visible from the
    /// first pending notification through
    /// [`HandlerRegistration::pending`](crate::HandlerRegistration::pending).
    #[default]
    Unbounded,
    /// Opt-in: pending notifications are coalesced per object key, so a stalled handler costs
    /// memory in proportion to the distinct keys it is behind on, not to the events.
    ///
    /// What a handler observes in this mode, per key:
    /// * the latest state wins: several pending updates become one `on_update(old, new)` whose
    ///   `old` is the old object of the *first* pending update (the state the handler last saw)
    ///   and whose `new` is the latest;
    /// * an add followed by updates is one `on_add` with the latest state (its initial-list flag
    ///   is kept);
    /// * a delete supersedes pending updates: one `on_delete` with the final state;
    /// * an add followed by a delete vanishes: the handler sees neither;
    /// * a delete followed by a re-create is delivered as `on_delete` then `on_add`;
    /// * a resync (`on_update(o, o)`) merges like any update.
    ///
    /// Per-key order is preserved; across keys, notifications are delivered in the order each key
    /// first became pending. Intermediate states are never delivered once superseded, so a
    /// handler must not count events; it sees every key's final state.
    Coalescing,
}

/// A notification for a handler.
pub(crate) enum Notification<K> {
    Add { obj: Arc<K>, initial: bool },
    Update { old: Arc<K>, new: Arc<K> },
    Delete(ObjectOrTombstone<K>),
}

impl<K> Clone for Notification<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Add { obj, initial } => Self::Add { obj: Arc::clone(obj), initial: *initial },
            Self::Update { old, new } => Self::Update { old: Arc::clone(old), new: Arc::clone(new) },
            Self::Delete(o) => Self::Delete(o.clone()),
        }
    }
}

impl<K> Notification<K> {
    fn is_initial(&self) -> bool {
        matches!(self, Self::Add { initial: true, .. })
    }
}

/// The most notifications a handler thread takes out of its buffer under one lock.
const LISTENER_BATCH: usize = 64;

/// The outcome of merging a new notification into the last pending one of its key.
enum Merge<K> {
    /// Replace the last pending notification with this one.
    Into(Notification<K>),
    /// Both cancel out (an add followed by a delete).
    Vanish,
    /// Keep both (a delete followed by an add).
    Append(Notification<K>),
}

fn merge<K>(last: Notification<K>, new: Notification<K>) -> Merge<K> {
    use Notification::{Add, Delete, Update};
    match (last, new) {
        (Add { initial, .. }, Update { new, .. }) => Merge::Into(Add { obj: new, initial }),
        (Add { initial: a, .. }, Add { obj, initial: b }) => Merge::Into(Add { obj, initial: a || b }),
        (Add { .. }, Delete(_)) => Merge::Vanish,
        (Update { old, .. }, Update { new, .. }) => Merge::Into(Update { old, new }),
        (Update { old, .. }, Add { obj, .. }) => Merge::Into(Update { old, new: obj }),
        (Update { .. }, Delete(d)) => Merge::Into(Delete(d)),
        (Delete(d), Delete(n)) => {
            // As DeltaFIFO's dedup: keep the one that is not a tombstone.
            if n.is_tombstone() && !d.is_tombstone() {
                Merge::Into(Delete(d))
            } else {
                Merge::Into(Delete(n))
            }
        }
        (Delete(_), n @ Add { .. }) => Merge::Append(n),
        (Delete(d), Update { new, .. }) => {
            // Cannot happen from an informer (an update needs the object to exist); treat it as a
            // re-create so nothing is lost.
            let _ = d;
            Merge::Append(Add { obj: new, initial: false })
        }
    }
}

/// The buffer itself.
enum Queue<K> {
    Unbounded {
        /// The one-item lookahead: the ring is touched only when a second notification arrives
        /// before the handler took the first.
        next: Option<Notification<K>>,
        ring: Ring<Notification<K>>,
    },
    Coalescing {
        key_func: KeyFunc<K>,
        /// Keys in the order they first became pending. Invariant: a key is here iff it is in
        /// `entries`, exactly once.
        order: VecDeque<Arc<str>>,
        /// At most two notifications per key (a delete followed by a re-create).
        entries: HashMap<Arc<str>, VecDeque<Notification<K>>>,
    },
}

impl<K> Queue<K> {
    /// client-go's listener buffer (1024 slots to start with), which shrinks back to that size
    /// once drained.
    fn unbounded() -> Self {
        let size = LISTENER_INITIAL_CAPACITY;
        Self::Unbounded { next: None, ring: Ring::new(RingOptions { initial_size: size, normal_size: size }) }
    }

    /// Adds `n`; returns the change in the number of pending notifications and in the number of
    /// pending initial-list adds.
    fn push(&mut self, n: Notification<K>) -> (isize, isize) {
        let initial = isize::from(n.is_initial());
        match self {
            Self::Unbounded { next, ring } => {
                if next.is_none() {
                    *next = Some(n);
                } else {
                    ring.write_one(n);
                }
                (1, initial)
            }
            Self::Coalescing { key_func, order, entries } => push_coalescing(key_func, order, entries, n),
        }
    }

    fn take(&mut self) -> Option<Notification<K>> {
        match self {
            Self::Unbounded { next, ring } => {
                let n = next.take()?;
                *next = ring.read_one();
                Some(n)
            }
            Self::Coalescing { order, entries, .. } => loop {
                let key = order.pop_front()?;
                let Some(entry) = entries.get_mut(&key) else { continue };
                let n = entry.pop_front();
                if entry.is_empty() {
                    entries.remove(&key);
                } else {
                    order.push_front(key);
                }
                if n.is_some() {
                    return n;
                }
            },
        }
    }

    /// Moves up to `max` notifications into `out`, in order: all that are pending of an unbounded
    /// buffer, one of a coalescing one (which merges into what is still queued, so it hands out
    /// nothing before the handler is ready for it).
    fn take_batch(&mut self, out: &mut Vec<Notification<K>>, max: usize) {
        let max = if matches!(self, Self::Coalescing { .. }) { 1 } else { max };
        while out.len() < max {
            match self.take() {
                Some(n) => out.push(n),
                None => break,
            }
        }
    }

    fn clear(&mut self) {
        match self {
            Self::Unbounded { next, ring } => {
                *next = None;
                ring.drain();
            }
            Self::Coalescing { order, entries, .. } => {
                order.clear();
                entries.clear();
            }
        }
    }
}

struct State<K> {
    queue: Queue<K>,
    stopped: bool,
}

/// A listener: buffer + handler thread + its sync and resync bookkeeping.
pub(crate) struct Listener<K> {
    pub(crate) id: u64,
    pub(crate) name: String,
    handler: Arc<dyn ResourceEventHandler<K>>,
    state: Mutex<State<K>>,
    wake: Condvar,
    /// Notifications waiting for the handler (the backlog gauge).
    pending: AtomicUsize,
    /// Highest backlog seen.
    high_water: AtomicUsize,
    /// Initial-list adds not delivered yet (client-go's `SingleFileTracker` count).
    initial_pending: AtomicUsize,
    delivered: AtomicU64,
    panics: AtomicU64,
    /// The resync period asked for when the handler was added.
    pub(crate) requested_resync_period: Duration,
    /// The effective resync period (zero: never).
    resync_period: Mutex<Duration>,
    next_resync: Mutex<Instant>,
    /// Whether this listener is in the processor's syncing set: it receives updates that did not
    /// change the resource version (a resync's Sync deltas, a relist's unchanged objects, a
    /// watch event repeating the cached version). As client-go's `sharedProcessor.addListener`,
    /// a listener starts in the set, so a handler of an informer without resync (whose resync
    /// check never runs) receives every relist's unchanged objects; only the resync check
    /// (`sharedProcessor.shouldResync`) sets the flag, to whether the listener is due. A handler
    /// added with [`HandlerOptions::skip_unchanged_updates`](crate::HandlerOptions::skip_unchanged_updates)
    /// starts outside it.
    pub(crate) syncing: AtomicBool,
    sync_signal: Arc<SyncSignal>,
    /// The informer's failure state: counts this handler's panics, and fails the informer on one
    /// under [`PanicPolicy::FailInformer`].
    failure: Arc<FailureState>,
    on_panic: PanicPolicy,
    thread: Mutex<Option<JoinHandle<()>>>,
    started: AtomicBool,
    /// Set by [`stop`](Self::stop) with the state's `stopped`: the handler thread checks it
    /// before each notification of the batch it took, without the lock.
    stopping: AtomicBool,
}

impl<K> fmt::Debug for Listener<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Listener")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("pending", &self.pending.load(Ordering::Relaxed))
            .finish()
    }
}

/// Options for one listener.
pub(crate) struct ListenerOptions<K> {
    pub(crate) name: String,
    pub(crate) mode: ListenerMode,
    pub(crate) key_func: KeyFunc<K>,
    pub(crate) requested_resync_period: Duration,
    pub(crate) resync_period: Duration,
    pub(crate) now: Instant,
    /// Starts outside the syncing set (see [`Listener::syncing`]).
    pub(crate) skip_unchanged_updates: bool,
    pub(crate) on_panic: PanicPolicy,
}

impl<K: Send + Sync + 'static> Listener<K> {
    pub(crate) fn new(
        id: u64,
        handler: Arc<dyn ResourceEventHandler<K>>,
        opts: ListenerOptions<K>,
        sync_signal: Arc<SyncSignal>,
        failure: Arc<FailureState>,
    ) -> Arc<Self> {
        let queue = match opts.mode {
            ListenerMode::Unbounded => Queue::unbounded(),
            ListenerMode::Coalescing => {
                Queue::Coalescing { key_func: opts.key_func, order: VecDeque::new(), entries: HashMap::new() }
            }
        };
        Arc::new(Self {
            id,
            name: opts.name,
            handler,
            state: Mutex::new(State { queue, stopped: false }),
            wake: Condvar::new(),
            pending: AtomicUsize::new(0),
            high_water: AtomicUsize::new(0),
            initial_pending: AtomicUsize::new(0),
            delivered: AtomicU64::new(0),
            panics: AtomicU64::new(0),
            requested_resync_period: opts.requested_resync_period,
            resync_period: Mutex::new(opts.resync_period),
            next_resync: Mutex::new(opts.now + opts.resync_period),
            syncing: AtomicBool::new(!opts.skip_unchanged_updates),
            sync_signal,
            failure,
            on_panic: opts.on_panic,
            thread: Mutex::new(None),
            started: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
        })
    }

    /// Queues a notification. Never waits for the handler.
    pub(crate) fn add(&self, n: Notification<K>) {
        let mut st = self.state.lock();
        if st.stopped {
            return;
        }
        let (dp, di) = st.queue.push(n);
        apply_delta(&self.pending, dp);
        apply_delta(&self.initial_pending, di);
        let now = self.pending.load(Ordering::Relaxed);
        self.high_water.fetch_max(now, Ordering::Relaxed);
        drop(st);
        if di < 0 && self.initial_pending.load(Ordering::Acquire) == 0 {
            self.sync_signal.bump();
        }
        self.wake.notify_one();
    }

    /// Starts the handler thread (idempotent). Fails only if the OS refuses a thread; the
    /// listener is then not started, and a later call tries again.
    pub(crate) fn start(self: &Arc<Self>) -> std::io::Result<()> {
        if self.started.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let me = Arc::clone(self);
        match std::thread::Builder::new().name(format!("kcache-listener-{}", self.id)).spawn(move || me.run())
        {
            Ok(handle) => {
                *self.thread.lock() = Some(handle);
                Ok(())
            }
            Err(e) => {
                self.started.store(false, Ordering::Release);
                Err(e)
            }
        }
    }

    fn run(&self) {
        // Notifications are taken out of the buffer in batches, under one lock: taken one at a
        // time, the handler thread and the informer (which queues each one under the same lock)
        // took turns on that lock for every notification.
        let mut batch = Vec::with_capacity(LISTENER_BATCH);
        loop {
            {
                let mut st = self.state.lock();
                loop {
                    if st.stopped {
                        return;
                    }
                    st.queue.take_batch(&mut batch, LISTENER_BATCH);
                    if !batch.is_empty() {
                        break;
                    }
                    self.wake.wait(&mut st);
                }
            }
            for n in batch.drain(..) {
                if !self.deliver(n) {
                    return;
                }
            }
        }
    }

    /// Hands one notification of a batch to the handler. `false` when the listener has stopped
    /// (then the notification, and the rest of the batch, are dropped, as `stop` drops what is
    /// still buffered) or the handler's panic failed the informer.
    fn deliver(&self, n: Notification<K>) -> bool {
        if self.stopping.load(Ordering::Acquire) {
            return false;
        }
        // Still counted as pending until now: the gauge is the backlog the handler has not been
        // handed. Saturating, because `stop` may have zeroed it since the batch was taken.
        let _ = self.pending.fetch_update(Ordering::AcqRel, Ordering::Acquire, |p| Some(p.saturating_sub(1)));
        {
            let initial = n.is_initial();
            let handler = &self.handler;
            let result = catch_unwind(AssertUnwindSafe(|| match &n {
                Notification::Add { obj, initial } => handler.on_add(obj, *initial),
                Notification::Update { old, new } => handler.on_update(old, new),
                Notification::Delete(d) => handler.on_delete(d),
            }));
            drop(n);
            if let Err(payload) = result {
                self.panics.fetch_add(1, Ordering::Relaxed);
                self.failure.handler_panicked(&self.name);
                // The panic's message stays out of the log: it could quote the object.
                match self.on_panic {
                    PanicPolicy::Continue => tracing::error!(
                        informer = %self.failure.informer(),
                        handler = %self.name,
                        "event handler panicked; its notification is dropped and the listener continues with the next"
                    ),
                    PanicPolicy::FailInformer => {
                        tracing::error!(
                            informer = %self.failure.informer(),
                            handler = %self.name,
                            "event handler panicked; its panic policy makes this a failure of the informer"
                        );
                        let message = kcache_utils::panic_message(&*payload)
                            .unwrap_or("a panic with a non-string payload")
                            .to_owned();
                        drop(payload);
                        self.failure
                            .fail(FailureCause::HandlerPanicked { handler: self.name.clone(), message });
                        // Nothing more for this handler: the informer is stopping. The
                        // notification was not delivered, so it is not counted as delivered.
                        return false;
                    }
                }
            }
            self.delivered.fetch_add(1, Ordering::Relaxed);
            if initial && self.initial_pending.fetch_sub(1, Ordering::AcqRel) == 1 {
                self.sync_signal.bump();
            }
        }
        true
    }

    /// Stops the handler thread after its current notification; pending ones are dropped.
    pub(crate) fn stop(&self) {
        let mut st = self.state.lock();
        st.stopped = true;
        self.stopping.store(true, Ordering::Release);
        st.queue.clear();
        self.pending.store(0, Ordering::Release);
        drop(st);
        self.wake.notify_all();
    }

    /// Takes its thread's handle (for the processor to join a removed listener without keeping
    /// the listener itself alive).
    pub(crate) fn take_thread(&self) -> Option<JoinHandle<()>> {
        self.thread.lock().take()
    }

    /// Waits for the handler thread to end (after [`stop`](Self::stop)).
    pub(crate) fn join(&self) {
        let handle = self.thread.lock().take();
        if let Some(h) = handle {
            if h.thread().id() == std::thread::current().id() {
                return; // a handler removing itself
            }
            let _ = h.join();
        }
    }

    pub(crate) fn pending(&self) -> usize {
        self.pending.load(Ordering::Acquire)
    }

    pub(crate) fn high_water(&self) -> usize {
        self.high_water.load(Ordering::Relaxed)
    }

    pub(crate) fn delivered(&self) -> u64 {
        self.delivered.load(Ordering::Relaxed)
    }

    pub(crate) fn panics(&self) -> u64 {
        self.panics.load(Ordering::Relaxed)
    }

    pub(crate) fn initial_pending(&self) -> usize {
        self.initial_pending.load(Ordering::Acquire)
    }

    pub(crate) fn resync_period(&self) -> Duration {
        *self.resync_period.lock()
    }

    pub(crate) fn set_resync_period(&self, period: Duration) {
        *self.resync_period.lock() = period;
    }

    /// client-go's `shouldResync`: due when the period is set and the time has come.
    pub(crate) fn should_resync(&self, now: Instant) -> bool {
        let period = self.resync_period();
        !period.is_zero() && now >= *self.next_resync.lock()
    }

    pub(crate) fn determine_next_resync(&self, now: Instant) {
        *self.next_resync.lock() = now + self.resync_period();
    }
}

/// Pushes into a coalescing queue: merges `n` into the last pending notification of its key.
/// Returns the change in pending notifications and in pending initial-list adds.
fn push_coalescing<K>(
    key_func: &KeyFunc<K>,
    order: &mut VecDeque<Arc<str>>,
    entries: &mut HashMap<Arc<str>, VecDeque<Notification<K>>>,
    n: Notification<K>,
) -> (isize, isize) {
    let initial = isize::from(n.is_initial());
    let key: Arc<str> = match &n {
        Notification::Add { obj, .. } | Notification::Update { new: obj, .. } => {
            key_func(obj).map(Arc::from).unwrap_or_else(|_| Arc::from(""))
        }
        Notification::Delete(ObjectOrTombstone::Tombstone(t)) => Arc::from(t.key.as_str()),
        Notification::Delete(ObjectOrTombstone::Object(obj)) => {
            key_func(obj).map(Arc::from).unwrap_or_else(|_| Arc::from(""))
        }
    };
    let entry = match entries.get_mut(&key) {
        Some(e) => e,
        None => {
            order.push_back(Arc::clone(&key));
            entries.entry(key).or_default()
        }
    };
    let Some(last) = entry.pop_back() else {
        entry.push_back(n);
        return (1, initial);
    };
    // Keep a copy of a pending delete: `Append` puts it back in front of the new add.
    let kept = matches!(last, Notification::Delete(_)).then(|| last.clone());
    let before = isize::from(last.is_initial()) + initial;
    match merge(last, n) {
        Merge::Into(m) => {
            let after = isize::from(m.is_initial());
            entry.push_back(m);
            (0, after - before + initial)
        }
        Merge::Vanish => (-1, -before + initial),
        Merge::Append(m) => {
            if let Some(d) = kept {
                entry.push_back(d);
            }
            let after = isize::from(m.is_initial());
            entry.push_back(m);
            (1, after - before + initial)
        }
    }
}

fn apply_delta(counter: &AtomicUsize, delta: isize) {
    if delta > 0 {
        counter.fetch_add(delta.unsigned_abs(), Ordering::AcqRel);
    } else if delta < 0 {
        counter.fetch_sub(delta.unsigned_abs(), Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    //! The listener's queues: the coalescing merge rules, one test per promise of
    //! [`ListenerMode::Coalescing`], and the unbounded ring giving memory back once drained.

    use kcache_store::DeletedFinalStateUnknown;

    use super::*;

    /// An object: its key and a version.
    type Obj = (&'static str, u32);

    fn queue() -> Queue<Obj> {
        let key_func: KeyFunc<Obj> = Arc::new(|o: &Obj| Ok(o.0.to_owned()));
        Queue::Coalescing { key_func, order: VecDeque::new(), entries: HashMap::new() }
    }

    fn add(key: &'static str, v: u32, initial: bool) -> Notification<Obj> {
        Notification::Add { obj: Arc::new((key, v)), initial }
    }

    fn update(key: &'static str, old: u32, new: u32) -> Notification<Obj> {
        Notification::Update { old: Arc::new((key, old)), new: Arc::new((key, new)) }
    }

    fn delete(key: &'static str, v: u32) -> Notification<Obj> {
        Notification::Delete(ObjectOrTombstone::Object(Arc::new((key, v))))
    }

    fn tombstone(key: &'static str, v: u32) -> Notification<Obj> {
        Notification::Delete(ObjectOrTombstone::Tombstone(DeletedFinalStateUnknown {
            key: key.to_owned(),
            obj: Arc::new((key, v)),
        }))
    }

    /// What a handler would be called with, as text.
    fn show(n: &Notification<Obj>) -> String {
        match n {
            Notification::Add { obj, initial } => format!("add {}@{} initial={initial}", obj.0, obj.1),
            Notification::Update { old, new } => format!("update {}@{}->{}", new.0, old.1, new.1),
            Notification::Delete(ObjectOrTombstone::Object(o)) => format!("delete {}@{}", o.0, o.1),
            Notification::Delete(ObjectOrTombstone::Tombstone(t)) => {
                format!("delete {}@{} tombstone", t.key, t.obj.1)
            }
        }
    }

    /// Pushes every notification, then drains the queue. Returns what was delivered and the
    /// summed changes of the pending and initial-pending counters.
    fn run(pushes: Vec<Notification<Obj>>) -> (Vec<String>, isize, isize) {
        let mut q = queue();
        let (mut pending, mut initial) = (0, 0);
        for n in pushes {
            let (p, i) = q.push(n);
            pending += p;
            initial += i;
        }
        let mut out = Vec::new();
        while let Some(n) = q.take() {
            out.push(show(&n));
        }
        (out, pending, initial)
    }

    #[test]
    fn updates_keep_the_first_old_object_and_the_latest_new_one() {
        let (out, pending, _) = run(vec![update("a", 1, 2), update("a", 2, 3), update("a", 3, 4)]);
        assert_eq!(out, ["update a@1->4"]);
        assert_eq!(pending, 1);
    }

    #[test]
    fn a_delete_supersedes_pending_updates() {
        let (out, pending, _) = run(vec![update("a", 1, 2), update("a", 2, 3), delete("a", 3)]);
        assert_eq!(out, ["delete a@3"]);
        assert_eq!(pending, 1);
    }

    #[test]
    fn an_add_then_a_delete_vanishes() {
        let (out, pending, initial) = run(vec![add("a", 1, true), update("a", 1, 2), delete("a", 2)]);
        assert!(out.is_empty(), "{out:?}");
        assert_eq!((pending, initial), (0, 0));
    }

    #[test]
    fn an_add_then_updates_is_one_add_of_the_latest_state_keeping_its_initial_flag() {
        let (out, pending, initial) = run(vec![add("a", 1, true), update("a", 1, 2), update("a", 2, 3)]);
        assert_eq!(out, ["add a@3 initial=true"]);
        assert_eq!((pending, initial), (1, 1));
    }

    #[test]
    fn a_delete_then_a_re_create_delivers_both_in_order() {
        let (out, pending, _) = run(vec![update("a", 1, 2), delete("a", 2), add("a", 5, false)]);
        assert_eq!(out, ["delete a@2", "add a@5 initial=false"]);
        assert_eq!(pending, 2);
    }

    #[test]
    fn a_real_delete_wins_over_a_tombstone() {
        let (out, _, _) = run(vec![delete("a", 2), tombstone("a", 1)]);
        assert_eq!(out, ["delete a@2"]);
        let (out, _, _) = run(vec![tombstone("a", 1), delete("a", 2)]);
        assert_eq!(out, ["delete a@2"]);
    }

    #[test]
    fn a_resync_merges_like_an_update() {
        let (out, _, _) = run(vec![update("a", 1, 2), update("a", 2, 2)]);
        assert_eq!(out, ["update a@1->2"]);
    }

    #[test]
    fn keys_come_out_in_the_order_they_first_became_pending() {
        let (out, pending, _) =
            run(vec![update("a", 1, 2), update("b", 1, 2), update("a", 2, 3), add("c", 1, false)]);
        assert_eq!(out, ["update a@1->3", "update b@1->2", "add c@1 initial=false"]);
        assert_eq!(pending, 3);
    }

    #[test]
    fn the_unbounded_ring_gives_its_memory_back_once_drained() {
        let mut q: Queue<Obj> = Queue::unbounded();
        for v in 0..5000 {
            let _ = q.push(update("a", v, v + 1));
        }
        let capacity = |q: &Queue<Obj>| match q {
            Queue::Unbounded { ring, .. } => ring.capacity(),
            Queue::Coalescing { .. } => unreachable!(),
        };
        assert_eq!(capacity(&q), 8192, "grew by doubling to hold the burst");
        let mut taken = 0;
        while let Some(n) = q.take() {
            assert_eq!(show(&n), format!("update a@{taken}->{}", taken + 1), "in order");
            taken += 1;
        }
        assert_eq!(taken, 5000);
        assert_eq!(capacity(&q), LISTENER_INITIAL_CAPACITY, "back to the normal size");
    }

    #[test]
    fn memory_is_per_key_not_per_event() {
        let mut q = queue();
        for v in 0..10_000u32 {
            let _ = q.push(update(["a", "b", "c"][(v % 3) as usize], v, v + 1));
        }
        let Queue::Coalescing { order, entries, .. } = &q else { unreachable!() };
        assert_eq!(order.len(), 3);
        assert_eq!(entries.values().map(VecDeque::len).sum::<usize>(), 3);
    }

    /// client-go's `processorListener.pop`/`run` hand the handler one notification at a time
    /// from the buffer; the handler thread here takes what an unbounded buffer holds in batches
    /// (under one lock), in order, and a coalescing buffer's notifications one at a time, so
    /// that a later change still merges into every notification the handler has not been
    /// handed.
    #[test]
    fn the_handler_thread_takes_batches_from_an_unbounded_buffer_only() {
        let mut q: Queue<Obj> = Queue::unbounded();
        for v in 0..100 {
            let _ = q.push(update("a", v, v + 1));
        }
        let mut batch = Vec::new();
        q.take_batch(&mut batch, 64);
        assert_eq!(batch.len(), 64);
        assert!(batch.iter().enumerate().all(|(i, n)| show(n) == format!("update a@{i}->{}", i + 1)));
        batch.clear();
        q.take_batch(&mut batch, 64);
        assert_eq!(batch.len(), 36, "the rest");
        assert!(q.take().is_none());

        let mut q = queue();
        let _ = q.push(add("a", 1, false));
        let _ = q.push(add("b", 1, false));
        batch.clear();
        q.take_batch(&mut batch, 64);
        assert_eq!(batch.iter().map(show).collect::<Vec<_>>(), ["add a@1 initial=false"]);
        let _ = q.push(update("b", 1, 2));
        assert_eq!(show(&q.take().unwrap()), "add b@2 initial=false", "merged while still buffered");
    }
}
