//! Loom models of the FIFO core's pop / close / wake-up protocol (the mutex, condvar, waker list
//! and lock-free mirrors in `src/fifo.rs`), and of the in-order FIFO's atomic relist popped
//! while it is queued, run by CI with `RUSTFLAGS="--cfg loom"` and `LOOM_MAX_PREEMPTIONS=2`.
//! Sizes are tiny on purpose: loom explores every interleaving.
#![cfg(loom)]

use std::sync::Arc;

use kcache_delta_fifo::{
    DeltaFifo, DeltaFifoOptions, Deltas, Fifo, FifoError, FifoExt, RealFifo, RealFifoOptions,
};
use kcache_store::{Store, key_func};
use loom::thread;

fn fifos() -> Vec<Arc<dyn Fifo<String>>> {
    let kf = key_func(|s: &String| Ok(s.clone()));
    vec![
        Arc::new(DeltaFifo::new(DeltaFifoOptions::new(kf.clone()))),
        Arc::new(RealFifo::new(RealFifoOptions::new(kf.clone(), Arc::new(Store::new(kf))))),
    ]
}

/// An in-order FIFO with atomic events (the default) and empty known objects.
fn atomic_real_fifo() -> Arc<RealFifo<String>> {
    let kf = key_func(|s: &String| Ok(s.clone()));
    Arc::new(RealFifo::new(RealFifoOptions::new(kf.clone(), Arc::new(Store::new(kf)))))
}

/// Drains with blocking pops until `Closed`; returns how many items it processed.
fn drain_blocking(f: &dyn Fifo<String>) -> usize {
    let mut n = 0;
    loop {
        match f.pop_blocking(&mut |_: Deltas<String>, _| {
            n += 1;
            Ok(())
        }) {
            Ok(()) => {}
            Err(FifoError::Closed) => return n,
            Err(e) => panic!("{e}"),
        }
    }
}

/// A blocking pop racing with an add and a close: the item is delivered exactly once and the
/// consumer then sees `Closed` (no lost wake-up, no early `Closed`).
#[test]
fn blocking_pop_add_close() {
    for which in 0..2 {
        loom::model(move || {
            let f = fifos().swap_remove(which);
            let producer = {
                let f = f.clone();
                thread::spawn(move || {
                    f.add(Arc::new("a".to_string())).unwrap();
                    f.close();
                })
            };
            assert_eq!(drain_blocking(&*f), 1);
            producer.join().unwrap();
            assert!(f.is_empty());
        });
    }
}

/// Two blocking consumers, one item, then close: exactly one of them gets the item and both
/// return.
#[test]
fn two_consumers_one_item_close() {
    loom::model(|| {
        let f = fifos().swap_remove(0);
        let other = {
            let f = f.clone();
            thread::spawn(move || drain_blocking(&*f))
        };
        f.add(Arc::new("a".to_string())).unwrap();
        f.close();
        let mine = drain_blocking(&*f);
        assert_eq!(mine + other.join().unwrap(), 1);
    });
}

/// An async pop woken by an add from another thread (the waker list, not the condvar).
#[test]
fn async_pop_woken_by_add() {
    for which in 0..2 {
        loom::model(move || {
            let f = fifos().swap_remove(which);
            let producer = {
                let f = f.clone();
                thread::spawn(move || f.add(Arc::new("a".to_string())).unwrap())
            };
            let mut got = None;
            loom::future::block_on(f.pop(|d: Deltas<String>, _| {
                got = Some((**d[0].obj()).clone());
                Ok::<_, FifoError>(())
            }))
            .unwrap();
            assert_eq!(got.as_deref(), Some("a"));
            producer.join().unwrap();
            // The lock-free depth mirror agrees once both sides are done.
            assert_eq!(f.len(), 0);
        });
    }
}

/// An async pop woken by close returns `Closed`.
#[test]
fn async_pop_woken_by_close() {
    loom::model(|| {
        let f = fifos().swap_remove(1);
        let closer = {
            let f = f.clone();
            thread::spawn(move || f.close())
        };
        let r = loom::future::block_on(f.pop(|_: Deltas<String>, _| Ok::<_, FifoError>(())));
        assert!(matches!(r, Err(FifoError::Closed)));
        closer.join().unwrap();
    });
}

/// A first relist queued by one thread while another pops: the consumer gets an add queued
/// before it, then the whole relist in one pop flagged initial, and the lock-free `has_synced`
/// mirror stays false while that pop is processed and is true once it is done.
#[test]
fn atomic_relist_is_one_initial_pop() {
    loom::model(|| {
        let f = atomic_real_fifo();
        let producer = {
            let f = f.clone();
            thread::spawn(move || {
                f.replace(vec![Arc::new("a".to_string()), Arc::new("b".to_string())], "1").unwrap();
                f.close();
            })
        };
        let mut pops = Vec::new();
        loop {
            let r = f.pop_blocking(|d: Deltas<String>, initial| {
                pops.push((d.len(), d.atomic_event().is_some(), initial, f.has_synced()));
                Ok::<_, FifoError>(())
            });
            match r {
                Ok(()) => {}
                Err(FifoError::Closed) => break,
                Err(e) => panic!("{e}"),
            }
        }
        producer.join().unwrap();
        assert_eq!(pops, [(2, true, true, false)]);
        assert!(f.has_synced());
        assert!(f.is_empty());
    });
}

/// An add from another thread races an atomic resync and the pops: each is delivered once and
/// whole (the resync as one atomic pop), and two blocking pops get both, whichever came first.
#[test]
fn atomic_resync_and_add_race_the_pops() {
    loom::model(|| {
        let f = atomic_real_fifo();
        let adder = {
            let f = f.clone();
            thread::spawn(move || f.add(Arc::new("a".to_string())).unwrap())
        };
        f.resync().unwrap();
        let (mut atomic, mut plain) = (0, 0);
        for _ in 0..2 {
            f.pop_blocking(|d: Deltas<String>, _| {
                if d.atomic_event().is_some() {
                    atomic += 1;
                } else {
                    assert_eq!(d.len(), 1);
                    plain += 1;
                }
                Ok::<_, FifoError>(())
            })
            .unwrap();
        }
        adder.join().unwrap();
        assert_eq!((atomic, plain), (1, 1));
        assert!(f.is_empty());
    });
}
