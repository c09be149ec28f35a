//! Stress test of the stingy and "add is followed by a run" guarantees with many producers and
//! workers on a multi-threaded runtime and plain threads, and of drain losing nothing.
//!
//! Bounded by operation counts, not wall-clock time; nothing asserts on timing.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use kcache_workqueue::Queue;
use rand::Rng;

const KEYS: usize = 64;
const PRODUCERS: usize = 8;
const ADDS_PER_PRODUCER: usize = 20_000;
const WORKERS: usize = 8;

/// Per-key bookkeeping shared by producers and workers.
struct Tracker {
    /// 1 while a worker holds the key.
    busy: Vec<AtomicUsize>,
    /// Global sequence number of the latest add of each key.
    last_add: Vec<AtomicU64>,
    /// Sequence number observed at the start of the latest run of each key.
    last_run_start: Vec<AtomicU64>,
    /// Global sequence: adds and run starts draw from it.
    seq: AtomicU64,
    runs: AtomicUsize,
}

impl Tracker {
    fn new() -> Arc<Self> {
        Self::with_keys(KEYS)
    }

    fn with_keys(keys: usize) -> Arc<Self> {
        Arc::new(Self {
            busy: (0..keys).map(|_| AtomicUsize::new(0)).collect(),
            last_add: (0..keys).map(|_| AtomicU64::new(0)).collect(),
            last_run_start: (0..keys).map(|_| AtomicU64::new(0)).collect(),
            seq: AtomicU64::new(1),
            runs: AtomicUsize::new(0),
        })
    }

    fn add(&self, q: &Queue<usize>, key: usize) {
        // Record before adding: a run that starts after this add sees a later sequence number.
        let s = self.seq.fetch_add(1, Ordering::SeqCst);
        self.last_add[key].fetch_max(s, Ordering::SeqCst);
        q.add(key);
    }

    fn run(&self, q: &Queue<usize>, key: usize) {
        self.start(key);
        std::hint::spin_loop();
        self.finish(q, key);
    }

    /// A worker took `key` and starts processing it.
    fn start(&self, key: usize) {
        assert_eq!(self.busy[key].swap(1, Ordering::SeqCst), 0, "key {key} processed concurrently");
        let s = self.seq.fetch_add(1, Ordering::SeqCst);
        self.last_run_start[key].fetch_max(s, Ordering::SeqCst);
        self.runs.fetch_add(1, Ordering::Relaxed);
    }

    /// The worker is finished with `key`.
    fn finish(&self, q: &Queue<usize>, key: usize) {
        self.busy[key].store(0, Ordering::SeqCst);
        q.done(&key);
    }

    /// Every key's latest add is followed by a run that started after it.
    fn check_every_add_was_followed_by_a_run(&self) {
        for key in 0..self.busy.len() {
            let added = self.last_add[key].load(Ordering::SeqCst);
            let ran = self.last_run_start[key].load(Ordering::SeqCst);
            assert!(
                added == 0 || ran > added,
                "key {key}: last add {added} has no later run (last run {ran})"
            );
        }
    }
}

/// Tokio tasks on a multi-threaded runtime, drained with `shut_down_with_drain`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_producers_and_workers_async() {
    let q: Queue<usize> = Queue::new();
    let t = Tracker::new();
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (q, t) = (q.clone(), t.clone());
            tokio::spawn(async move {
                while let Some(key) = q.get().await {
                    t.run(&q, key);
                    if rand::rng().random_bool(0.01) {
                        tokio::task::yield_now().await;
                    }
                }
            })
        })
        .collect();
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|_| {
            let (q, t) = (q.clone(), t.clone());
            tokio::spawn(async move {
                for i in 0..ADDS_PER_PRODUCER {
                    let key = rand::rng().random_range(0..KEYS);
                    t.add(&q, key);
                    if i % 64 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
            })
        })
        .collect();
    for p in producers {
        p.await.unwrap();
    }
    // Every add happened before the shutdown, so drain + draining gets must run them all.
    q.shut_down_with_drain().await;
    for w in workers {
        w.await.unwrap();
    }
    assert_eq!(q.len(), 0);
    t.check_every_add_was_followed_by_a_run();
    assert!(t.runs.load(Ordering::Relaxed) >= KEYS.min(PRODUCERS * ADDS_PER_PRODUCER) / 2);
}

/// Plain threads with `get_blocking`, and workers that re-add keys while processing them.
#[test]
fn many_producers_and_workers_threads() {
    producers_and_workers_on_threads(KEYS, WORKERS, 1);
}

/// As [`many_producers_and_workers_threads`] with 4096 keys, 16 workers each holding up to 4 items
/// at once and finishing them in random order: many more items in flight than the queue remembers
/// as just taken (8), so `done` finds items both without and through its table, and leaves stale
/// table entries that sweeps remove while other threads add and take.
#[test]
fn many_producers_and_workers_threads_more_in_flight() {
    producers_and_workers_on_threads(4096, 16, 4);
}

/// `keys` keys, `workers` worker threads each taking up to `hold` items before finishing them.
fn producers_and_workers_on_threads(keys: usize, workers: usize, hold: usize) {
    let q: Queue<usize> = Queue::new();
    let t = Tracker::with_keys(keys);
    // Re-adds happen under the read lock; the write lock closes them before shutdown, so no
    // re-add can land after it (those are dropped by design and would fail the check).
    let readds_open = Arc::new(std::sync::RwLock::new(true));
    let workers: Vec<_> = (0..workers)
        .map(|_| {
            let (q, t, readds_open) = (q.clone(), t.clone(), readds_open.clone());
            std::thread::spawn(move || {
                let mut held: Vec<usize> = Vec::with_capacity(hold);
                let finish_all = |held: &mut Vec<usize>| {
                    while !held.is_empty() {
                        let key = held.swap_remove(rand::rng().random_range(0..held.len()));
                        t.finish(&q, key);
                    }
                };
                loop {
                    // Never wait for more while holding items: with the queue empty, finish first.
                    if !held.is_empty() && (held.len() == hold || q.is_empty()) {
                        finish_all(&mut held);
                    }
                    let Some(key) = q.get_blocking() else {
                        if held.is_empty() {
                            break;
                        }
                        // Shut down: finishing may queue re-added items again, so get once more.
                        finish_all(&mut held);
                        continue;
                    };
                    t.start(key);
                    if rand::rng().random_bool(0.05) {
                        let open = readds_open.read().unwrap();
                        if *open {
                            // Re-add while processing: must produce one more run after done.
                            t.add(&q, key);
                        }
                    }
                    held.push(key);
                }
            })
        })
        .collect();
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|_| {
            let (q, t) = (q.clone(), t.clone());
            std::thread::spawn(move || {
                for _ in 0..ADDS_PER_PRODUCER / 4 {
                    t.add(&q, rand::rng().random_range(0..keys));
                }
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    *readds_open.write().unwrap() = false;
    q.shut_down_with_drain_blocking();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(q.len(), 0);
    t.check_every_add_was_followed_by_a_run();
}
