//! The async `pop`: waking, cancel safety, close, and the backpressure of running the process
//! function under the FIFO's lock (client-go's `Pop` contract from `delta_fifo.go`).

use crate::common;

use std::sync::Arc;
use std::sync::mpsc;
use std::task::{Context, Poll};
use std::thread;
use std::time::Duration;

use common::*;
use futures::FutureExt;
use futures::task::noop_waker;
use kcache_delta_fifo::{
    DeltaFifo, DeltaFifoOptions, Deltas, Fifo, FifoError, FifoExt, RealFifo, RealFifoOptions,
};

fn both() -> Vec<Arc<dyn Fifo<TObj>>> {
    vec![
        Arc::new(DeltaFifo::new(DeltaFifoOptions::new(key_fn()))),
        Arc::new(RealFifo::new(RealFifoOptions::new(key_fn(), Arc::new(known(&[]))))),
    ]
}

/// A pop started on an empty FIFO completes when another task adds.
#[tokio::test(start_paused = true)]
async fn pop_waits_for_add() {
    for f in both() {
        let producer = {
            let f = f.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(10)).await;
                f.add(mk("a", 1)).unwrap();
            })
        };
        let mut got = None;
        f.pop(|d: Deltas<TObj>, initial| {
            got = Some((d[0].obj().val, initial));
            Ok::<_, FifoError>(())
        })
        .await
        .unwrap();
        assert_eq!(got, Some((1, false)));
        producer.await.unwrap();
    }
}

/// Dropping a pending pop loses nothing: the item added later goes to the next pop.
#[test]
fn cancelled_pop_loses_nothing() {
    for f in both() {
        let waker = noop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut calls = 0;
        {
            let mut fut = f.pop(|_: Deltas<TObj>, _| {
                calls += 1;
                Ok::<_, FifoError>(())
            });
            assert!(fut.poll_unpin(&mut cx).is_pending());
        } // dropped while pending
        assert_eq!(calls, 0);
        f.add(mk("a", 1)).unwrap();
        assert_eq!(f.len(), 1);
        // A future created but never polled removes nothing either.
        drop(f.pop(ok));
        assert_eq!(f.len(), 1);
        let mut seen = 0;
        let mut fut = f.pop(|d: Deltas<TObj>, _| {
            seen = d[0].obj().val;
            Ok::<_, FifoError>(())
        });
        assert!(matches!(fut.poll_unpin(&mut cx), Poll::Ready(Ok(()))));
        drop(fut);
        assert_eq!(seen, 1);
        assert!(f.is_empty());
    }
}

/// Close wakes every async waiter with `Closed`.
#[tokio::test(start_paused = true)]
async fn close_wakes_all_async_waiters() {
    for f in both() {
        let waiters: Vec<_> = (0..4)
            .map(|_| {
                let f = f.clone();
                tokio::spawn(async move { f.pop(ok).await })
            })
            .collect();
        tokio::task::yield_now().await;
        f.close();
        for w in waiters {
            assert!(matches!(w.await.unwrap(), Err(FifoError::Closed)));
        }
        assert!(f.is_closed());
    }
}

/// Close with items queued: async pops drain them first.
#[tokio::test]
async fn close_drains_first() {
    for f in both() {
        f.add(mk("a", 1)).unwrap();
        f.add(mk("b", 2)).unwrap();
        f.close();
        f.pop(ok).await.unwrap();
        f.pop(ok).await.unwrap();
        assert!(matches!(f.pop(ok).await, Err(FifoError::Closed)));
    }
}

/// The process function runs under the FIFO's lock: a producer cannot add until it returns
/// (client-go's backpressure), while the lock-free `len`/`has_synced`/`is_closed` stay usable from
/// inside it.
#[test]
fn process_runs_under_the_lock() {
    for f in both() {
        f.add(mk("a", 1)).unwrap();
        let (done_tx, done_rx) = mpsc::channel();
        let producer_f = f.clone();
        let mut producer = None;
        f.pop_blocking(&mut |_: Deltas<TObj>, _| {
            assert_eq!(f.len(), 0);
            assert!(f.has_synced());
            assert!(!f.is_closed());
            let pf = producer_f.clone();
            let tx = done_tx.clone();
            producer = Some(thread::spawn(move || {
                pf.add(mk("b", 2)).unwrap();
                tx.send(()).unwrap();
            }));
            // The producer cannot finish while we hold the lock. (A correct FIFO never lets it
            // through, so this wait cannot flake; it only bounds how long we look.)
            assert!(done_rx.recv_timeout(Duration::from_millis(50)).is_err());
            Ok(())
        })
        .unwrap();
        done_rx.recv().unwrap();
        producer.unwrap().join().unwrap();
        assert_eq!(f.len(), 1);
    }
}

/// A slow process with a deep queue triggers the trace path without affecting the result.
#[test]
fn slow_process_with_deep_queue() {
    for f in both() {
        for i in 0..12 {
            f.add(mk(&format!("k{i}"), i)).unwrap();
        }
        f.pop_blocking(&mut |_: Deltas<TObj>, _| {
            thread::sleep(Duration::from_millis(110));
            Ok(())
        })
        .unwrap();
        assert_eq!(f.len(), 11);
    }
}
