//! Loom models of the queue core: the stingy, fair and drain invariants, and `get`
//! cancellation. Run with
//! `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p kcache-workqueue --test loom`
//! (`cargo xtask ci` does). The models are kept to two or three threads and one or two items so
//! the bounded search finishes in seconds.

#![cfg(loom)]

use futures::FutureExt;
use kcache_workqueue::Queue;
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;

/// Stingy: with two workers and a re-add while processing, the item is never held by both
/// workers at once, and it runs exactly twice (once, plus once for the re-add).
#[test]
fn stingy_never_two_holders() {
    loom::model(|| {
        let q: Queue<u8> = Queue::new();
        let busy = Arc::new(AtomicBool::new(false));
        let runs = Arc::new(AtomicUsize::new(0));
        // Handshake so the shutdown comes after the re-add (an add after shutdown is dropped).
        let readded = Arc::new((Mutex::new(false), Condvar::new()));
        q.add(1);
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let (q, busy, runs, readded) = (q.clone(), busy.clone(), runs.clone(), readded.clone());
                thread::spawn(move || {
                    while let Some(item) = q.get_blocking() {
                        assert!(!busy.swap(true, Ordering::SeqCst), "item held by two workers");
                        if runs.fetch_add(1, Ordering::SeqCst) == 0 {
                            q.add(item); // re-add while processing: one more run after done
                            *readded.0.lock().unwrap() = true;
                            readded.1.notify_one();
                        }
                        busy.store(false, Ordering::SeqCst);
                        q.done(&item);
                    }
                })
            })
            .collect();
        let mut flag = readded.0.lock().unwrap();
        while !*flag {
            flag = readded.1.wait(flag).unwrap();
        }
        drop(flag);
        q.shut_down_with_drain_blocking();
        for w in workers {
            w.join().unwrap();
        }
        assert_eq!(runs.load(Ordering::SeqCst), 2);
        assert_eq!(q.len(), 0);
    });
}

/// Fair: items added in order by one producer are handed out in that order to a concurrent
/// consumer.
#[test]
fn fair_fifo_order() {
    loom::model(|| {
        let q: Queue<u8> = Queue::new();
        let producer = {
            let q = q.clone();
            thread::spawn(move || {
                q.add(1);
                q.add(2);
            })
        };
        let first = q.get_blocking().unwrap();
        let second = q.get_blocking().unwrap();
        assert_eq!((first, second), (1, 2));
        producer.join().unwrap();
    });
}

/// Drain: `shut_down_with_drain` returns only after the in-flight item is done, and an item
/// re-added during processing is still handed out after shutdown.
#[test]
fn drain_waits_for_in_flight_items() {
    loom::model(|| {
        let q: Queue<u8> = Queue::new();
        q.add(1);
        let item = q.get_blocking().unwrap();
        let finished = Arc::new(AtomicBool::new(false));
        let drain = {
            let (q, finished) = (q.clone(), finished.clone());
            thread::spawn(move || {
                q.shut_down_with_drain_blocking();
                assert!(finished.load(Ordering::SeqCst), "drain returned while an item was in flight");
            })
        };
        q.add(1); // dirty while processing (dropped if the shutdown came first)
        finished.store(true, Ordering::SeqCst);
        q.done(&item);
        drain.join().unwrap();
        // Whatever was re-queued is still handed out, then the queue reports shutdown.
        while let Some(again) = q.get_blocking() {
            q.done(&again);
        }
        assert!(q.shutting_down());
    });
}

/// Cancellation: a `get` polled once and dropped (possibly right after being chosen for a
/// wake-up) neither loses an item nor strands the other getter.
#[test]
fn cancelled_get_loses_nothing() {
    loom::model(|| {
        let q: Queue<u8> = Queue::new();
        let taken = Arc::new(AtomicUsize::new(0));
        let canceller = {
            let (q, taken) = (q.clone(), taken.clone());
            thread::spawn(move || {
                // One poll, then the future is dropped: a cancelled get.
                if let Some(Some(item)) = q.get().now_or_never() {
                    taken.fetch_add(1, Ordering::SeqCst);
                    q.done(&item);
                }
            })
        };
        let waiter = {
            let (q, taken) = (q.clone(), taken.clone());
            thread::spawn(move || {
                let item = loom::future::block_on(q.get()).expect("not shut down");
                taken.fetch_add(1, Ordering::SeqCst);
                q.done(&item);
            })
        };
        q.add(1);
        q.add(2);
        canceller.join().unwrap();
        waiter.join().unwrap();
        assert_eq!(taken.load(Ordering::SeqCst) + q.len(), 2, "an item was lost");
    });
}
