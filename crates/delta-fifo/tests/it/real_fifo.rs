//! Tests copied from client-go's `tools/cache/the_real_fifo_test.go` and manually rewritten for
//! `RealFifo`; each test names the upstream test it mirrors. Upstream runs these on a FIFO from
//! `NewRealFIFO`, whose `AtomicEvents` is off, so these run with
//! [`atomic_events(false)`](RealFifoOptions::atomic_events); the atomic tests are in
//! `real_fifo_atomic.rs`.

use crate::common;

use std::sync::Arc;
use std::thread;

use common::*;
use kcache_delta_fifo::DeltaType::{Added, Deleted, Replaced, Sync, Updated};
use kcache_delta_fifo::{Deltas, Fifo, FifoError, RealFifo, RealFifoOptions};
use kcache_store::BoxError;

fn fifo_known(objs: &[Arc<TObj>]) -> RealFifo<TObj> {
    RealFifo::new(options(objs))
}

/// Options as `NewRealFIFO` sets them: no atomic events.
fn options(objs: &[Arc<TObj>]) -> RealFifoOptions<TObj> {
    RealFifoOptions::new(key_fn(), Arc::new(known(objs))).atomic_events(false)
}

fn fifo() -> RealFifo<TObj> {
    fifo_known(&[])
}

fn pop1(f: &RealFifo<TObj>) -> kcache_delta_fifo::Delta<TObj> {
    let (deltas, _) = pop(f);
    assert_eq!(deltas.len(), 1, "the in-order FIFO pops one delta at a time");
    deltas.into_iter().next().unwrap()
}

/// Mirrors `TestRealFIFO_basic`: two producers, one consumer, per-producer order kept.
#[test]
fn basic() {
    let f = Arc::new(fifo());
    const AMOUNT: i64 = 500;
    let producers: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|p| {
            let f = f.clone();
            thread::spawn(move || {
                for i in 0..AMOUNT {
                    f.add(mk(&format!("{p}{i}"), i + 1)).unwrap();
                }
            })
        })
        .collect();
    let (mut last_a, mut last_b) = (0, 0);
    for _ in 0..AMOUNT * 2 {
        let delta = pop1(&f);
        let o = delta.obj();
        let last = if o.name.starts_with('a') { &mut last_a } else { &mut last_b };
        assert!(o.val > *last);
        *last = o.val;
    }
    for p in producers {
        p.join().unwrap();
    }
}

/// Mirrors `TestRealFIFO_replaceWithDeleteDeltaIn`: a key whose last queued delta is a deletion
/// gets no tombstone.
#[test]
fn replace_with_delete_delta_in() {
    let old = mk("foo", 5);
    let f = fifo_known(std::slice::from_ref(&old));
    f.delete(old.clone()).unwrap();
    f.replace(vec![], "0").unwrap();
    assert_eq!(pop1(&f), d(Deleted, old.clone()));
    assert!(f.is_empty());

    // Upstream's exact scenario: listed again after the queued deletion, the relist's `Replaced`
    // follows the deletion (kubernetes#83810).
    let f = fifo_known(std::slice::from_ref(&old));
    f.delete(old.clone()).unwrap();
    f.replace(vec![mk("foo", 6)], "").unwrap();
    let items: Vec<_> = f.list().into_iter().map(|(_, d)| d).collect();
    assert_eq!(items, [d(Deleted, old), d(Replaced, mk("foo", 6))]);
}

/// Mirrors the table of `TestRealFIFOW_ReplaceMakesDeletionsForObjectsOnlyInQueue` (the cases
/// upstream runs without the atomic gate): a key only in the queue gets exactly one deletion.
#[test]
fn replace_makes_deletions_for_objects_only_in_queue_cases() {
    type Ops = fn(&RealFifo<TObj>);
    let (obj, obj_v2) = (mk("foo", 2), mk("foo", 3));
    let cases: Vec<(&str, Ops, Vec<kcache_delta_fifo::Delta<TObj>>)> = vec![
        (
            "Added object should be deleted on Replace",
            |f| {
                f.add(mk("foo", 2)).unwrap();
                f.replace(vec![], "0").unwrap();
            },
            vec![d(Added, obj.clone()), tomb("foo", obj.clone())],
        ),
        (
            "Deleted object should have only a single Delete",
            |f| {
                f.add(mk("foo", 2)).unwrap();
                f.delete(mk("foo", 2)).unwrap();
                f.replace(vec![], "0").unwrap();
            },
            vec![d(Added, obj.clone()), d(Deleted, obj.clone())],
        ),
        (
            "Synced objects should have a single delete",
            |f| {
                f.add(mk("foo", 2)).unwrap();
                f.replace(vec![mk("foo", 2)], "0").unwrap();
                f.replace(vec![mk("foo", 2)], "0").unwrap();
                f.replace(vec![], "0").unwrap();
            },
            vec![
                d(Added, obj.clone()),
                d(Replaced, obj.clone()),
                d(Replaced, obj.clone()),
                tomb("foo", obj.clone()),
            ],
        ),
        (
            "Added objects should have a single delete on multiple Replaces",
            |f| {
                f.add(mk("foo", 2)).unwrap();
                f.replace(vec![], "0").unwrap();
                f.replace(vec![], "1").unwrap();
            },
            vec![d(Added, obj.clone()), tomb("foo", obj.clone())],
        ),
        (
            "Added and deleted and added object should be deleted",
            |f| {
                f.add(mk("foo", 2)).unwrap();
                f.delete(mk("foo", 2)).unwrap();
                f.add(mk("foo", 3)).unwrap();
                f.replace(vec![], "0").unwrap();
            },
            vec![
                d(Added, obj.clone()),
                d(Deleted, obj.clone()),
                d(Added, obj_v2.clone()),
                tomb("foo", obj_v2.clone()),
            ],
        ),
    ];
    for (name, ops, expected) in cases {
        let f = fifo();
        ops(&f);
        let got: Vec<_> = (0..f.len()).map(|_| pop1(&f)).collect();
        assert_eq!(got, expected, "{name}");
        assert!(f.is_empty(), "{name}");
    }
}

/// Mirrors `TestRealFIFOW_ReplaceMakesDeletionsForObjectsOnlyInQueue`.
#[test]
fn replace_makes_deletions_for_objects_only_in_queue() {
    let f = fifo();
    f.add(mk("foo", 1)).unwrap();
    f.update(mk("foo", 2)).unwrap();
    f.replace(vec![mk("bar", 3)], "0").unwrap();
    let got: Vec<_> = (0..4).map(|_| pop1(&f)).collect();
    assert_eq!(
        got,
        [
            d(Added, mk("foo", 1)),
            d(Updated, mk("foo", 2)),
            tomb("foo", mk("foo", 2)),
            d(Replaced, mk("bar", 3))
        ]
    );
}

/// Mirrors `TestRealFIFO_addUpdate`: every change is delivered, in order.
#[test]
fn add_update() {
    let f = fifo();
    f.add(mk("foo", 10)).unwrap();
    f.update(mk("foo", 12)).unwrap();
    f.delete(mk("foo", 15)).unwrap();
    assert_eq!(f.len(), 3);
    assert_eq!(f.list().len(), 3);
    assert_eq!(pop1(&f), d(Added, mk("foo", 10)));
    assert_eq!(pop1(&f), d(Updated, mk("foo", 12)));
    assert_eq!(pop1(&f), d(Deleted, mk("foo", 15)));
    assert!(f.is_empty());
}

/// Mirrors `TestRealFIFO_transformer`: no compression, tombstones carry the transformed objects
/// and are not transformed again.
#[test]
fn transformer() {
    let xfrm = Arc::new(|o: Arc<TObj>| -> Result<Arc<TObj>, BoxError> {
        Ok(Arc::new(TObj { xfrm: o.xfrm + 1, ..(*o).clone() }))
    });
    let f = RealFifo::new(options(&[]).transformer(xfrm));
    f.add(mk("foo", 10)).unwrap();
    f.add(mk("bar", 11)).unwrap();
    f.update(mk("foo", 12)).unwrap();
    f.delete(mk("foo", 15)).unwrap();
    f.replace(vec![], "").unwrap();
    f.add(mk("bar", 16)).unwrap();
    f.replace(vec![], "").unwrap();
    let x = |name: &str, val| Arc::new(TObj { name: name.into(), val, xfrm: 1 });
    let expected = [
        d(Added, x("foo", 10)),
        d(Added, x("bar", 11)),
        d(Updated, x("foo", 12)),
        d(Deleted, x("foo", 15)),
        tomb("bar", x("bar", 11)),
        d(Added, x("bar", 16)),
        tomb("bar", x("bar", 16)),
    ];
    let listed: Vec<_> = f.list().into_iter().map(|(_, d)| d).collect();
    assert_eq!(listed, expected);
    for e in expected {
        assert_eq!(pop1(&f), e);
    }
}

/// Mirrors `TestRealFIFO_enqueueingNoLister`: the in-order FIFO queues every delete.
#[test]
fn enqueueing_no_lister() {
    let f = fifo();
    f.add(mk("foo", 10)).unwrap();
    f.update(mk("bar", 15)).unwrap();
    f.add(mk("qux", 17)).unwrap();
    f.delete(mk("qux", 18)).unwrap();
    f.delete(mk("baz", 20)).unwrap();
    for expect in [10, 15, 17, 18, 20] {
        assert_eq!(pop_val(&f), expect);
    }
    assert!(f.is_empty());
}

/// Mirrors `TestRealFIFO_enqueueingWithLister`.
#[test]
fn enqueueing_with_lister() {
    let f = fifo_known(&[mk("foo", 5), mk("bar", 6), mk("baz", 7)]);
    f.add(mk("foo", 10)).unwrap();
    f.update(mk("bar", 15)).unwrap();
    f.delete(mk("baz", 20)).unwrap();
    for expect in [10, 15, 20] {
        assert_eq!(pop_val(&f), expect);
    }
    assert!(f.is_empty());
}

/// Mirrors `TestRealFIFO_addReplace`: both the add and the relist are delivered.
#[test]
fn add_replace() {
    let f = fifo();
    f.add(mk("foo", 10)).unwrap();
    f.replace(vec![mk("foo", 15)], "0").unwrap();
    assert_eq!(pop_val(&f), 10);
    assert_eq!(pop_val(&f), 15);
    assert!(f.is_empty());
}

/// Mirrors `TestRealFIFO_ResyncNonExisting`: a queued key gets no `Sync`.
#[test]
fn resync_non_existing() {
    let f = fifo_known(&[mk("foo", 5)]);
    f.delete(mk("foo", 10)).unwrap();
    f.resync().unwrap();
    let items = f.list();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].1.delta_type, Deleted);
}

/// Mirrors `TestRealFIFO_Resync`.
#[test]
fn resync() {
    let f = fifo_known(&[mk("foo", 5)]);
    f.resync().unwrap();
    assert_eq!(pop1(&f), d(Sync, mk("foo", 5)));
}

/// Mirrors `TestRealFIFO_DeleteExistingNonPropagated`.
#[test]
fn delete_existing_non_propagated() {
    let f = fifo();
    f.add(mk("foo", 5)).unwrap();
    f.delete(mk("foo", 6)).unwrap();
    let items = f.list();
    assert_eq!(items.len(), 2);
    assert_eq!(items[1].1.delta_type, Deleted);
}

/// Mirrors `TestRealFIFO_ReplaceMakesDeletions`: tombstones first (queued keys, then known keys),
/// then `Replaced`.
#[test]
fn replace_makes_deletions() {
    let known_objs = [mk("foo", 5), mk("bar", 6), mk("baz", 7)];

    let f = fifo_known(&known_objs);
    f.delete(mk("baz", 10)).unwrap();
    f.replace(vec![mk("foo", 5)], "0").unwrap();
    for e in [d(Deleted, mk("baz", 10)), tomb("bar", mk("bar", 6)), d(Replaced, mk("foo", 5))] {
        assert_eq!(pop1(&f), e);
    }

    let f = fifo_known(&known_objs);
    f.add(mk("baz", 10)).unwrap();
    f.replace(vec![mk("foo", 5)], "0").unwrap();
    for e in [
        d(Added, mk("baz", 10)),
        tomb("baz", mk("baz", 10)),
        tomb("bar", mk("bar", 6)),
        d(Replaced, mk("foo", 5)),
    ] {
        assert_eq!(pop1(&f), e);
    }

    let f = fifo_known(&known_objs);
    f.delete(mk("bar", 6)).unwrap();
    f.add(mk("bar", 100)).unwrap();
    f.replace(vec![mk("foo", 5)], "0").unwrap();
    for e in [
        d(Deleted, mk("bar", 6)),
        d(Added, mk("bar", 100)),
        tomb("bar", mk("bar", 100)),
        tomb("baz", mk("baz", 7)),
        d(Replaced, mk("foo", 5)),
    ] {
        assert_eq!(pop1(&f), e);
    }

    // Relisted first, then dropped by a second relist: the tombstone carries the listed version.
    let f = fifo_known(&known_objs);
    f.replace(vec![mk("bar", 100), mk("foo", 5)], "0").unwrap();
    f.replace(vec![mk("foo", 5)], "0").unwrap();
    for e in [
        tomb("baz", mk("baz", 7)),
        d(Replaced, mk("bar", 100)),
        d(Replaced, mk("foo", 5)),
        tomb("bar", mk("bar", 100)),
        d(Replaced, mk("foo", 5)),
    ] {
        assert_eq!(pop1(&f), e);
    }

    // No known objects.
    let f = fifo();
    f.add(mk("baz", 10)).unwrap();
    f.replace(vec![mk("foo", 5)], "0").unwrap();
    for e in [d(Added, mk("baz", 10)), tomb("baz", mk("baz", 10)), d(Replaced, mk("foo", 5))] {
        assert_eq!(pop1(&f), e);
    }
}

/// Mirrors `TestRealFIFO_ReplaceMakesDeletionsReplaced`.
#[test]
fn replace_makes_deletions_replaced() {
    let f = fifo_known(&[mk("foo", 5), mk("bar", 6), mk("baz", 7)]);
    f.delete(mk("baz", 10)).unwrap();
    f.replace(vec![mk("foo", 6)], "0").unwrap();
    for e in [d(Deleted, mk("baz", 10)), tomb("bar", mk("bar", 6)), d(Replaced, mk("foo", 6))] {
        assert_eq!(pop1(&f), e);
    }
}

/// Mirrors `TestRealFIFO_UpdateResyncRace`.
#[test]
fn update_resync_race() {
    let f = fifo_known(&[mk("foo", 5)]);
    f.update(mk("foo", 6)).unwrap();
    f.resync().unwrap();
    assert_eq!(pop1(&f), d(Updated, mk("foo", 6)));
    assert!(f.is_empty());
}

/// Mirrors `TestRealFIFO_HasSyncedCorrectOnDeletion`.
#[test]
fn has_synced_correct_on_deletion() {
    let f = fifo_known(&[mk("foo", 5), mk("bar", 6), mk("baz", 7)]);
    f.replace(vec![mk("foo", 5)], "0").unwrap();
    let mut got = Vec::new();
    for _ in 0..3 {
        assert!(!f.has_synced());
        let (deltas, initial) = pop(&f);
        assert!(initial);
        got.extend(deltas);
    }
    assert!(f.has_synced());
    // Known keys come from a hash map: the two tombstones in either order, Replaced last.
    let mut tombs: Vec<_> = got[..2].to_vec();
    tombs.sort_by_key(|d| d.obj().name.clone());
    assert_eq!(tombs, [tomb("bar", mk("bar", 6)), tomb("baz", mk("baz", 7))]);
    assert_eq!(got[2], d(Replaced, mk("foo", 5)));
}

/// Mirrors `TestRealFIFO_detectLineJumpers`: strict arrival order.
#[test]
fn detect_line_jumpers() {
    let f = fifo();
    f.add(mk("foo", 10)).unwrap();
    f.add(mk("bar", 1)).unwrap();
    f.add(mk("foo", 11)).unwrap();
    f.add(mk("foo", 13)).unwrap();
    f.add(mk("zab", 30)).unwrap();
    assert_eq!(pop_val(&f), 10);
    f.add(mk("foo", 14)).unwrap();
    for e in [1, 11, 13, 30, 14] {
        assert_eq!(pop_val(&f), e);
    }
}

/// Mirrors `TestRealFIFO_KeyOf`.
#[test]
fn key_of() {
    let f = fifo();
    assert_eq!(f.key_of(&mk("A", 0)).unwrap(), "A");
    f.add(mk("C", 0)).unwrap();
    assert_eq!(&*f.list()[0].0, "C");
}

/// Mirrors `TestRealFIFO_HasSynced`: the first relist's whole queue is the initial population.
#[test]
fn has_synced() {
    type Action = fn(&RealFifo<TObj>);
    let cases: Vec<(Vec<Action>, bool)> = vec![
        (vec![], false),
        (vec![|f| f.add(mk("a", 1)).unwrap()], true),
        (vec![|f| f.replace(vec![], "0").unwrap()], true),
        (vec![|f| f.replace(vec![mk("a", 1), mk("b", 2)], "0").unwrap()], false),
        (vec![|f| f.replace(vec![mk("a", 1), mk("b", 2)], "0").unwrap(), |f| drop(pop(f))], false),
        (
            vec![|f| f.replace(vec![mk("a", 1), mk("b", 2)], "0").unwrap(), |f| drop(pop(f)), |f| {
                drop(pop(f))
            }],
            true,
        ),
        (vec![|f| f.delete(mk("a", 1)).unwrap()], true),
        (
            // Duplicate keys in one list: every delta is queued, so both must be popped.
            vec![|f| f.replace(vec![mk("a", 1), mk("a", 2)], "0").unwrap(), |f| drop(pop(f))],
            false,
        ),
        (
            vec![|f| f.replace(vec![mk("a", 1), mk("a", 2)], "0").unwrap(), |f| drop(pop(f)), |f| {
                drop(pop(f))
            }],
            true,
        ),
    ];
    for (i, (actions, expected)) in cases.into_iter().enumerate() {
        let f = fifo();
        for a in actions {
            a(&f);
        }
        assert_eq!(f.has_synced(), expected, "case {i}");
    }
}

/// A queue that already holds items when the first relist arrives counts them all as initial.
#[test]
fn initial_population_includes_queued_items() {
    // Not via add (that would mark it populated): resync of a known object.
    let f2 = fifo_known(&[mk("k", 1)]);
    f2.resync().unwrap();
    f2.replace(vec![mk("a", 1)], "0").unwrap();
    // k: Sync, then tombstone (k is queued, not listed, last is Sync), then Replaced a.
    assert_eq!(f2.len(), 3);
    for _ in 0..3 {
        assert!(!f2.has_synced());
        assert!(pop(&f2).1);
    }
    assert!(f2.has_synced());
}

/// Mirrors `TestRealFIFO_PopShouldUnblockWhenClosed`.
#[test]
fn pop_should_unblock_when_closed() {
    let f = Arc::new(fifo());
    let waiters: Vec<_> = (0..5)
        .map(|_| {
            let f = f.clone();
            thread::spawn(move || f.pop_blocking(ok))
        })
        .collect();
    f.close();
    for w in waiters {
        assert!(matches!(w.join().unwrap(), Err(FifoError::Closed)));
    }
}

/// Mirrors client-go's `RealFIFO.Pop` (the_real_fifo.go), which decrements
/// `initialPopulationCount` in a `defer`, "only *after* processing is complete, so concurrent
/// calls to hasSynced will not incorrectly return true while processing is still happening":
/// `has_synced` stays false while the last delta of the initial list is being processed, and
/// turns true once `process` returns, even with an error.
#[test]
fn has_synced_turns_true_only_after_the_last_initial_delta_is_processed() {
    let f = fifo_known(&[mk("gone", 1)]);
    f.replace(vec![mk("a", 1), mk("b", 2)], "0").unwrap();
    let mut during = Vec::new();
    for _ in 0..3 {
        f.pop_blocking(|_: Deltas<TObj>, initial| {
            during.push((initial, f.has_synced()));
            Ok::<_, std::convert::Infallible>(())
        })
        .unwrap();
    }
    assert_eq!(during, [(true, false), (true, false), (true, false)]);
    assert!(f.has_synced());
    let f = fifo();
    f.replace(vec![mk("a", 1)], "0").unwrap();
    let err = f.pop_blocking(|_: Deltas<TObj>, _| {
        assert!(!f.has_synced());
        Err::<(), _>("nope")
    });
    assert!(matches!(err, Err(FifoError::Process(_))));
    assert!(f.has_synced());
}

/// Mirrors client-go's `RealFIFO.Add`/`Update`/`Delete` (the_real_fifo.go), which set
/// `populated` before `addToItems_locked` computes the key and runs the transformer: a change
/// that fails still counts as "an Add/Update/Delete came first" for `HasSynced`.
#[test]
fn failed_add_update_or_delete_still_marks_populated() {
    type Op = fn(&RealFifo<TObj>, Arc<TObj>) -> Result<(), kcache_store::StoreError>;
    let ops: [Op; 3] = [|f, o| f.add(o), |f, o| f.update(o), |f, o| f.delete(o)];
    for (i, op) in ops.into_iter().enumerate() {
        let xfrm = Arc::new(|_: Arc<TObj>| -> Result<Arc<TObj>, BoxError> { Err("nope".into()) });
        let f = RealFifo::new(options(&[]).transformer(xfrm));
        assert!(matches!(op(&f, mk("a", 1)), Err(kcache_store::StoreError::Transform(_))), "op {i}");
        assert!(f.is_empty());
        assert!(f.has_synced(), "transform error, op {i}");

        let no_key = kcache_store::key_func(|o: &TObj| {
            if o.name.is_empty() { Err(kcache_store::KeyError::MissingName) } else { Ok(o.name.clone()) }
        });
        let f = RealFifo::new(RealFifoOptions::new(no_key, Arc::new(known(&[]))));
        assert!(matches!(op(&f, mk("", 1)), Err(kcache_store::StoreError::Key(_))), "op {i}");
        assert!(f.is_empty());
        assert!(f.has_synced(), "key error, op {i}");
    }
    // A failed replace does not (client-go's `Replace` returns before setting `populated`).
    let xfrm = Arc::new(|_: Arc<TObj>| -> Result<Arc<TObj>, BoxError> { Err("nope".into()) });
    let f = RealFifo::new(options(&[]).transformer(xfrm));
    assert!(f.replace(vec![mk("a", 1)], "0").is_err());
    assert!(!f.has_synced());
}

/// The process error is returned and the delta is gone.
#[test]
fn process_error_is_returned() {
    let f = fifo();
    f.add(mk("a", 1)).unwrap();
    let err = f.pop_blocking(|_: Deltas<TObj>, _| Err::<(), _>("nope")).unwrap_err();
    assert!(matches!(err, FifoError::Process(_)));
    assert!(f.is_empty());
}
