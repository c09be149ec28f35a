//! Fuzz target: random add / get / done / shut_down / add_after / clock-advance sequences on a
//! `DelayingQueue` (the fair, stingy queue plus its timer task) under Tokio's paused clock,
//! checked step by step against a reference model of client-go's `workqueue` semantics:
//!
//! * FIFO order; an item waiting in the queue is not queued twice (the dirty set);
//! * an item being processed (handed out, not yet done) is never handed out again; adding it
//!   marks it dirty, and `done` puts it back once;
//! * `done` for an item not being processed is a no-op;
//! * after shutdown adds and delayed adds are dropped and pending delayed items forgotten,
//!   queued items are still handed out, then `get` reports the end;
//! * `add_after`: ready at now + delay, a re-add keeps the earlier time, due items are added in
//!   ready-time order; a delay too large to represent never becomes due.
//!
//! `get` is polled once (`now_or_never`): ready with an item, ready with `None` after shutdown,
//! or pending when the queue is empty.
#![no_main]

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use arbitrary::Arbitrary;
use futures::FutureExt;
use kcache_workqueue::{DelayingQueue, Queue};
use libfuzzer_sys::fuzz_target;

/// Distinct items: few, so that re-adds, re-gets and collisions are common.
const ITEMS: u8 = 6;

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Op {
    Add(u8),
    Get,
    Done(u8),
    ShutDown,
    /// Delay in milliseconds.
    AddAfter(u8, u8),
    /// A delay far beyond any clock (seconds; saturates the queue's deadline arithmetic).
    AddAfterHuge(u8, u64),
    /// Advance the paused clock by this many milliseconds.
    Advance(u8),
}

#[derive(Default, Debug)]
struct Model {
    queue: VecDeque<u8>,
    dirty: BTreeSet<u8>,
    processing: BTreeSet<u8>,
    shutting_down: bool,
    /// Pending delayed items and their ready time (nanoseconds since the start, saturated as the
    /// queue saturates them: `u64::MAX` is "never").
    pending: BTreeMap<u8, u64>,
    now: u64,
}

impl Model {
    fn add(&mut self, x: u8) {
        if self.shutting_down || !self.dirty.insert(x) {
            return;
        }
        if !self.processing.contains(&x) {
            self.queue.push_back(x);
        }
    }

    /// `Some(Some(x))`: handed out; `Some(None)`: shut down and empty; `None`: would wait.
    fn get(&mut self) -> Option<Option<u8>> {
        match self.queue.pop_front() {
            Some(x) => {
                self.dirty.remove(&x);
                self.processing.insert(x);
                Some(Some(x))
            }
            None if self.shutting_down => Some(None),
            None => None,
        }
    }

    fn done(&mut self, x: u8) {
        if self.processing.remove(&x) && self.dirty.contains(&x) {
            self.queue.push_back(x);
        }
    }

    fn shut_down(&mut self) {
        self.shutting_down = true;
        self.pending.clear();
    }

    fn deadline(&self, after: Duration) -> u64 {
        u64::try_from(u128::from(self.now).saturating_add(after.as_nanos())).unwrap_or(u64::MAX)
    }

    fn add_after(&mut self, x: u8, after: Duration) {
        if self.shutting_down {
            return;
        }
        if after.is_zero() {
            self.add(x);
            return;
        }
        let at = self.deadline(after);
        let slot = self.pending.entry(x).or_insert(at);
        *slot = (*slot).min(at);
    }

    fn advance(&mut self, by: Duration) {
        self.now += u64::try_from(by.as_nanos()).expect("small advance");
        let mut due: Vec<(u64, u8)> =
            self.pending.iter().filter(|(_, at)| **at <= self.now).map(|(x, at)| (*at, *x)).collect();
        due.sort_unstable();
        for (_, x) in due {
            self.pending.remove(&x);
            self.add(x);
        }
    }

    /// Whether a new ready time `at` for `x` would tie with another pending item's, so that the
    /// order they become ready in is undefined (a heap is not stable): the harness avoids ties.
    fn ties(&self, x: u8, at: u64) -> bool {
        at != u64::MAX && self.pending.iter().any(|(y, t)| *y != x && *t == at)
    }
}

/// Lets the queue's timer task run (it needs a few scheduler turns to wake, move due items and
/// park again). The paused clock never auto-advances here: yielding keeps the runtime busy.
async fn settle() {
    for _ in 0..4 {
        tokio::task::yield_now().await;
    }
}

fn check(q: &DelayingQueue<u8>, m: &Model, op: &Op) {
    assert_eq!(q.len(), m.queue.len(), "len after {op:?}: {m:?}");
    assert_eq!(q.pending_len(), m.pending.len(), "pending_len after {op:?}: {m:?}");
    assert_eq!(q.shutting_down(), m.shutting_down, "shutting_down after {op:?}");
}

async fn run(ops: Vec<Op>) {
    let q: DelayingQueue<u8> = Queue::builder().build_delaying().expect("inside a runtime");
    let mut m = Model::default();
    for op in &ops {
        match *op {
            Op::Add(x) => {
                let x = x % ITEMS;
                q.add(x);
                m.add(x);
            }
            Op::Get => {
                let want = m.get();
                let got = q.get().now_or_never();
                assert_eq!(got, want, "get: {m:?}");
            }
            Op::Done(x) => {
                let x = x % ITEMS;
                q.done(&x);
                m.done(x);
            }
            Op::ShutDown => {
                q.shut_down();
                m.shut_down();
                settle().await;
            }
            Op::AddAfter(x, ms) => {
                let x = x % ITEMS;
                let mut after = Duration::from_millis(ms.into());
                while !after.is_zero() && m.ties(x, m.deadline(after)) {
                    after += Duration::from_millis(1);
                }
                q.add_after(x, after);
                m.add_after(x, after);
                settle().await;
            }
            Op::AddAfterHuge(x, secs) => {
                let x = x % ITEMS;
                let after = Duration::from_secs(secs.max(1 << 40));
                q.add_after(x, after);
                m.add_after(x, after);
                settle().await;
            }
            Op::Advance(ms) => {
                let by = Duration::from_millis(ms.into());
                tokio::time::advance(by).await;
                m.advance(by);
                settle().await;
            }
        }
        check(&q, &m, op);
    }
    // Shut down and drain: what is queued comes out in order, then the end.
    q.shut_down();
    m.shut_down();
    settle().await;
    loop {
        let want = m.get();
        assert_eq!(q.get().now_or_never(), want, "draining after shutdown: {m:?}");
        if want == Some(None) {
            break;
        }
    }
}

fuzz_target!(|ops: Vec<Op>| {
    if ops.len() > 300 {
        return;
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime");
    rt.block_on(run(ops));
});
