//! Stress: concurrent producers, blocking and async consumers, then close. Bounded sizes, plain
//! threads, no timing assertions. Checks that nothing is lost or duplicated, per-key order holds,
//! and every consumer ends with `Closed`.

use crate::common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::thread;

use common::*;
use kcache_delta_fifo::{
    DeltaFifo, DeltaFifoOptions, Deltas, Fifo, FifoError, FifoExt, RealFifo, RealFifoOptions,
};

const PRODUCERS: usize = 3;
const KEYS_PER_PRODUCER: usize = 300;
const VERSIONS: i64 = 3;

fn stress(f: Arc<dyn Fifo<TObj>>) {
    // (key, value) in processing order; process runs under the FIFO lock, so this order is the
    // order the FIFO handed items out.
    let seen: Arc<Mutex<Vec<(String, i64)>>> = Arc::default();
    let record = |seen: &Arc<Mutex<Vec<(String, i64)>>>, d: &Deltas<TObj>| {
        let mut s = seen.lock().unwrap();
        for delta in d {
            s.push((delta.obj().name.clone(), delta.obj().val));
        }
    };

    let mut consumers = Vec::new();
    for c in 0..3 {
        let f = f.clone();
        let seen = seen.clone();
        consumers.push(thread::spawn(move || {
            loop {
                let r = if c == 0 {
                    // One async consumer, driven by a minimal executor.
                    futures::executor::block_on(f.pop(|d: Deltas<TObj>, _| {
                        record(&seen, &d);
                        Ok::<_, FifoError>(())
                    }))
                } else {
                    f.pop_blocking(&mut |d: Deltas<TObj>, _| {
                        record(&seen, &d);
                        Ok(())
                    })
                };
                match r {
                    Ok(()) => {}
                    Err(FifoError::Closed) => return,
                    Err(e) => panic!("unexpected {e}"),
                }
            }
        }));
    }
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let f = f.clone();
            thread::spawn(move || {
                for v in 0..VERSIONS {
                    for i in 0..KEYS_PER_PRODUCER {
                        let o = mk(&format!("p{p}-{i}"), v);
                        if v == 0 { f.add(o) } else { f.update(o) }.unwrap();
                    }
                }
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    f.close();
    for c in consumers {
        c.join().unwrap();
    }
    assert!(f.is_empty());

    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), PRODUCERS * KEYS_PER_PRODUCER * VERSIONS as usize, "lost or duplicated deltas");
    let mut next: HashMap<&str, i64> = HashMap::new();
    for (k, v) in seen.iter() {
        let expected = next.entry(k).or_insert(0);
        assert_eq!(*v, *expected, "key {k} out of order");
        *expected += 1;
    }
    assert!(next.values().all(|&n| n == VERSIONS));
}

/// DeltaFIFO under three producers and three consumers.
#[test]
fn delta_fifo_concurrent_producers_consumers_close() {
    stress(Arc::new(DeltaFifo::new(DeltaFifoOptions::new(key_fn()))));
}

/// RealFIFO under three producers and three consumers.
#[test]
fn real_fifo_concurrent_producers_consumers_close() {
    stress(Arc::new(RealFifo::new(RealFifoOptions::new(key_fn(), Arc::new(known(&[]))))));
}

/// Close racing with waiting pops and adds: every waiter returns, by an item or by `Closed`, and
/// every item added before close is popped exactly once.
#[test]
fn close_races_with_waiters() {
    for round in 0..50 {
        let f: Arc<dyn Fifo<TObj>> = if round % 2 == 0 {
            Arc::new(DeltaFifo::new(DeltaFifoOptions::new(key_fn())))
        } else {
            Arc::new(RealFifo::new(RealFifoOptions::new(key_fn(), Arc::new(known(&[])))))
        };
        let popped = Arc::new(Mutex::new(0usize));
        let waiters: Vec<_> = (0..4)
            .map(|_| {
                let f = f.clone();
                let popped = popped.clone();
                thread::spawn(move || {
                    loop {
                        match f.pop_blocking(&mut |_, _| {
                            *popped.lock().unwrap() += 1;
                            Ok(())
                        }) {
                            Ok(()) => {}
                            Err(FifoError::Closed) => return,
                            Err(e) => panic!("{e}"),
                        }
                    }
                })
            })
            .collect();
        for i in 0..round {
            f.add(mk(&format!("k{i}"), 0)).unwrap();
        }
        f.close();
        for w in waiters {
            w.join().unwrap();
        }
        assert_eq!(*popped.lock().unwrap(), round);
    }
}
