//! Tests copied from client-go's `tools/cache/delta_fifo_test.go` and manually rewritten for
//! `DeltaFifo`; each test names the upstream test it mirrors.

use crate::common;

use std::sync::Arc;
use std::thread;

use common::*;
use kcache_delta_fifo::DeltaType::{Added, Deleted, Replaced, Sync, Updated};
use kcache_delta_fifo::{DeltaFifo, DeltaFifoOptions, Deltas, Fifo, FifoError};
use kcache_store::{KnownObjects, StoreError};

fn fifo() -> DeltaFifo<TObj> {
    DeltaFifo::new(DeltaFifoOptions::new(key_fn()))
}

fn fifo_known(objs: &[Arc<TObj>]) -> DeltaFifo<TObj> {
    DeltaFifo::new(DeltaFifoOptions::new(key_fn()).known_objects(Arc::new(known(objs))))
}

/// Mirrors `TestDeltaFIFO_basic`: two producers, one consumer; each producer's items come out in
/// order.
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
        let (deltas, _) = pop(&*f);
        let o = deltas.last().unwrap().obj();
        let last = if o.name.starts_with('a') { &mut last_a } else { &mut last_b };
        assert!(o.val > *last, "{} out of order after {}", o.val, last);
        *last = o.val;
    }
    for p in producers {
        p.join().unwrap();
    }
    assert!(f.is_empty());
}

/// Mirrors `TestDeltaFIFO_replaceWithDeleteDeltaIn`: a queued deletion and a relist that no longer
/// lists the object give one deletion, the watched one.
#[test]
fn replace_with_delete_delta_in() {
    let old = mk("foo", 5);
    let f = fifo_known(std::slice::from_ref(&old));
    f.delete(old.clone()).unwrap();
    f.replace(vec![], "0").unwrap();
    assert_eq!(pop(&f).0, [d(Deleted, old.clone())]);

    // Upstream's exact scenario: the object is listed again after its queued deletion, so the
    // relist's `Sync` is appended behind the deletion (kubernetes#83810).
    let f = fifo_known(std::slice::from_ref(&old));
    f.delete(old.clone()).unwrap();
    f.replace(vec![mk("foo", 6)], "").unwrap();
    assert_eq!(pop(&f).0, [d(Deleted, old), d(Sync, mk("foo", 6))]);
    assert!(f.is_empty());
}

/// Mirrors the table of `TestDeltaFIFOW_ReplaceMakesDeletionsForObjectsOnlyInQueue`, each case
/// with empty known objects and without known objects: a key only in the queue gets exactly one
/// deletion, and the pop leaves nothing queued.
#[test]
fn replace_makes_deletions_for_objects_only_in_queue_cases() {
    type Ops = fn(&DeltaFifo<TObj>);
    let (obj, obj_v2) = (mk("foo", 2), mk("foo", 3));
    let cases: Vec<(&str, bool, Ops, Vec<kcache_delta_fifo::Delta<TObj>>)> = vec![
        (
            "Added object should be deleted on Replace",
            false,
            |f| {
                f.add(mk("foo", 2)).unwrap();
                f.replace(vec![], "0").unwrap();
            },
            vec![d(Added, obj.clone()), tomb("foo", obj.clone())],
        ),
        (
            "Replaced object should have only a single Delete",
            true,
            |f| {
                f.add(mk("foo", 2)).unwrap();
                f.replace(vec![mk("foo", 2)], "0").unwrap();
                f.replace(vec![], "0").unwrap();
            },
            vec![d(Added, obj.clone()), d(Replaced, obj.clone()), tomb("foo", obj.clone())],
        ),
        (
            "Deleted object should have only a single Delete",
            false,
            |f| {
                f.add(mk("foo", 2)).unwrap();
                f.delete(mk("foo", 2)).unwrap();
                f.replace(vec![], "0").unwrap();
            },
            vec![d(Added, obj.clone()), d(Deleted, obj.clone())],
        ),
        (
            "Synced objects should have a single delete",
            false,
            |f| {
                f.add(mk("foo", 2)).unwrap();
                f.replace(vec![mk("foo", 2)], "0").unwrap();
                f.replace(vec![mk("foo", 2)], "0").unwrap();
                f.replace(vec![], "0").unwrap();
            },
            vec![d(Added, obj.clone()), d(Sync, obj.clone()), d(Sync, obj.clone()), tomb("foo", obj.clone())],
        ),
        (
            "Added objects should have a single delete on multiple Replaces",
            false,
            |f| {
                f.add(mk("foo", 2)).unwrap();
                f.replace(vec![], "0").unwrap();
                f.replace(vec![], "1").unwrap();
            },
            vec![d(Added, obj.clone()), tomb("foo", obj.clone())],
        ),
        (
            "Added and deleted and added object should be deleted",
            false,
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
    for (name, emit_replaced, ops, expected) in cases {
        for with_known in [true, false] {
            let mut opts = DeltaFifoOptions::new(key_fn()).emit_delta_type_replaced(emit_replaced);
            if with_known {
                opts = opts.known_objects(Arc::new(known(&[])));
            }
            let f = DeltaFifo::new(opts);
            ops(&f);
            assert_eq!(pop(&f).0, expected, "{name} (known objects: {with_known})");
            assert!(f.is_empty(), "{name} (known objects: {with_known})");
        }
    }
}

/// Mirrors `TestDeltaFIFOW_ReplaceMakesDeletionsForObjectsOnlyInQueue`: without known objects, a
/// relist still tombstones keys that are only queued, with the newest queued object.
#[test]
fn replace_makes_deletions_for_objects_only_in_queue() {
    let f = fifo();
    f.add(mk("foo", 1)).unwrap();
    f.update(mk("foo", 2)).unwrap();
    f.add(mk("bar", 3)).unwrap();
    f.replace(vec![mk("bar", 4)], "0").unwrap();
    assert_eq!(pop(&f).0, [d(Added, mk("foo", 1)), d(Updated, mk("foo", 2)), tomb("foo", mk("foo", 2))]);
    assert_eq!(pop(&f).0, [d(Added, mk("bar", 3)), d(Sync, mk("bar", 4))]);
    assert!(f.is_empty());
}

/// Mirrors `TestDeltaFIFO_addUpdate`: add, update and delete of one key are one item with three
/// deltas; the newest is the deletion, and after the pop the key is gone.
#[test]
fn add_update() {
    let f = fifo();
    f.add(mk("foo", 10)).unwrap();
    f.update(mk("foo", 12)).unwrap();
    f.delete(mk("foo", 15)).unwrap();
    assert_eq!(f.list(), [mk("foo", 15)]);
    assert_eq!(f.list_keys(), [Arc::<str>::from("foo")]);
    assert_eq!(pop_val(&f), 15);
    assert!(f.is_empty());
    assert!(f.get(&mk("foo", 0)).unwrap().is_none());
}

/// Mirrors `TestDeltaFIFO_transformer`: every object is transformed exactly once, tombstones and
/// objects inside them are not transformed again.
#[test]
fn transformer() {
    let xfrm = Arc::new(|o: Arc<TObj>| -> Result<Arc<TObj>, kcache_store::BoxError> {
        Ok(Arc::new(TObj { xfrm: o.xfrm + 1, ..(*o).clone() }))
    });
    let f = DeltaFifo::new(DeltaFifoOptions::new(key_fn()).transformer(xfrm));
    f.add(mk("foo", 10)).unwrap();
    f.add(mk("bar", 11)).unwrap();
    f.update(mk("foo", 12)).unwrap();
    f.delete(mk("foo", 15)).unwrap();
    f.replace(vec![], "").unwrap();
    f.add(mk("bar", 16)).unwrap();
    f.replace(vec![], "").unwrap();
    assert_eq!(f.list_keys(), [Arc::<str>::from("foo"), Arc::from("bar")]);
    for _ in 0..2 {
        let (deltas, _) = pop(&f);
        for delta in &deltas {
            assert_eq!(delta.obj().xfrm, 1, "{delta:?}");
        }
    }
}

/// A failing transformer queues nothing and reports a transform error. A failed replace does not
/// mark the FIFO populated (client-go's `Replace` returns before setting `populated`).
#[test]
fn transformer_error() {
    let xfrm = Arc::new(|_: Arc<TObj>| -> Result<Arc<TObj>, kcache_store::BoxError> { Err("nope".into()) });
    let f = DeltaFifo::new(DeltaFifoOptions::new(key_fn()).transformer(xfrm));
    assert!(matches!(f.replace(vec![mk("a", 1)], "1"), Err(StoreError::Transform(_))));
    assert!(f.is_empty());
    assert!(!f.has_synced());
    assert!(matches!(f.add(mk("a", 1)), Err(StoreError::Transform(_))));
    assert!(f.is_empty());
}

/// Mirrors client-go's `DeltaFIFO.Add`/`Update` (delta_fifo.go), which set `populated` before
/// `queueActionLocked` computes the key and runs the transformer: an add or update that fails
/// still counts as "an Add/Update came first" for `HasSynced`. A delete with a key error does
/// not (`Delete` computes the key before setting `populated`).
#[test]
fn failed_add_or_update_still_marks_populated() {
    let xfrm = Arc::new(|_: Arc<TObj>| -> Result<Arc<TObj>, kcache_store::BoxError> { Err("nope".into()) });
    let f = DeltaFifo::new(DeltaFifoOptions::new(key_fn()).transformer(xfrm));
    assert!(matches!(f.add(mk("a", 1)), Err(StoreError::Transform(_))));
    assert!(f.is_empty());
    assert!(f.has_synced());

    let f = DeltaFifo::new(DeltaFifoOptions::new(key_fn()).transformer(Arc::new(|_| Err("nope".into()))));
    assert!(matches!(f.update(mk("a", 1)), Err(StoreError::Transform(_))));
    assert!(f.has_synced());

    let no_key = kcache_store::key_func(|o: &TObj| {
        if o.name.is_empty() { Err(kcache_store::KeyError::MissingName) } else { Ok(o.name.clone()) }
    });
    let f = DeltaFifo::new(DeltaFifoOptions::new(no_key.clone()));
    assert!(matches!(f.delete(mk("", 1)), Err(StoreError::Key(_))));
    assert!(!f.has_synced());
    assert!(matches!(f.add(mk("", 1)), Err(StoreError::Key(_))));
    assert!(f.is_empty());
    assert!(f.has_synced());
}

/// Mirrors client-go's `DeltaFIFO.Delete` (delta_fifo.go): a delete of a key that is neither
/// queued nor known returns before `queueActionLocked`, so the transformer never sees it and a
/// failing transformer cannot turn the skipped delete into an error. It still marks the FIFO
/// populated. A delete that is queued reports the transform error.
#[test]
fn skipped_delete_is_not_transformed() {
    let xfrm = Arc::new(|o: Arc<TObj>| -> Result<Arc<TObj>, kcache_store::BoxError> {
        if o.val < 0 { Err("nope".into()) } else { Ok(o) }
    });
    let f = DeltaFifo::new(
        DeltaFifoOptions::new(key_fn()).known_objects(Arc::new(known(&[mk("known", 1)]))).transformer(xfrm),
    );
    f.delete(mk("gone", -1)).unwrap();
    assert!(f.is_empty());
    assert!(f.has_synced());
    assert!(matches!(f.delete(mk("known", -1)), Err(StoreError::Transform(_))));
    assert!(f.is_empty());
}

/// Mirrors client-go's `DeltaFIFO.HasSynced`, which takes the FIFO's lock that `Pop` holds while
/// it runs the process function: no caller can see `true` before the last item of the initial
/// list has been processed (stored in the informer's indexer). `has_synced` is lock-free, so it
/// must not turn true before `process` returns, even when asked from inside `process` (the
/// in-order FIFO's `Pop` defers the decrement for the same reason).
#[test]
fn has_synced_turns_true_only_after_the_last_initial_item_is_processed() {
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
    // A process error does not keep it unsynced.
    let f = fifo();
    f.replace(vec![mk("a", 1)], "0").unwrap();
    let err = f.pop_blocking(|_: Deltas<TObj>, _| {
        assert!(!f.has_synced());
        Err::<(), _>("nope")
    });
    assert!(matches!(err, Err(FifoError::Process(_))));
    assert!(f.has_synced());
}

/// Mirrors `TestDeltaFIFO_enqueueingNoLister`: without known objects, deleting a key that is not
/// queued is skipped.
#[test]
fn enqueueing_no_lister() {
    let f = fifo();
    f.add(mk("foo", 10)).unwrap();
    f.update(mk("bar", 15)).unwrap();
    f.add(mk("qux", 17)).unwrap();
    f.delete(mk("qux", 18)).unwrap();
    // baz is neither queued nor known: nothing is queued.
    f.delete(mk("baz", 20)).unwrap();
    for expect in [10, 15, 18] {
        assert_eq!(pop_val(&f), expect);
    }
    assert!(f.is_empty());
}

/// Mirrors `TestDeltaFIFO_enqueueingWithLister`: a delete of a known key is queued.
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

/// Mirrors `TestDeltaFIFO_addReplace`: a relist of a queued key appends to its deltas.
#[test]
fn add_replace() {
    let f = fifo();
    f.add(mk("foo", 10)).unwrap();
    f.replace(vec![mk("foo", 15)], "0").unwrap();
    assert_eq!(pop(&f).0, [d(Added, mk("foo", 10)), d(Sync, mk("foo", 15))]);
    assert!(f.is_empty());
    assert!(f.get_by_key("foo").is_none());
}

/// Mirrors `TestDeltaFIFO_ResyncNonExisting`: resync skips a key with a queued delta.
#[test]
fn resync_non_existing() {
    let f = fifo_known(&[mk("foo", 5)]);
    f.delete(mk("foo", 10)).unwrap();
    f.resync().unwrap();
    let deltas = f.get_by_key("foo").unwrap();
    assert_eq!(deltas.len(), 1);
    assert_eq!(deltas[0].delta_type, Deleted);
}

/// Mirrors `TestDeltaFIFO_Resync`: resync queues a `Sync` for every known key with nothing
/// queued, carrying the known object.
#[test]
fn resync() {
    let f = fifo_known(&[mk("foo", 5)]);
    f.resync().unwrap();
    assert_eq!(f.get_by_key("foo").unwrap().into_vec(), [d(Sync, mk("foo", 5))]);
    // Without known objects, resync does nothing.
    let g = fifo();
    g.resync().unwrap();
    assert!(g.is_empty());
}

/// Mirrors `TestDeltaFIFO_DeleteExistingNonPropagated`: a delete of a queued key that is not
/// known is still queued.
#[test]
fn delete_existing_non_propagated() {
    let f = fifo_known(&[]);
    f.add(mk("foo", 5)).unwrap();
    f.delete(mk("foo", 6)).unwrap();
    let deltas = f.get_by_key("foo").unwrap();
    assert_eq!(deltas.len(), 2);
    assert_eq!(deltas.newest().unwrap().delta_type, Deleted);
}

/// Mirrors `TestDeltaFIFO_ReplaceMakesDeletions`: tombstones for queued-but-unlisted keys carry
/// the newest queued object; for known, unlisted, unqueued keys the known object.
#[test]
fn replace_makes_deletions() {
    let known_objs = [mk("foo", 5), mk("bar", 6), mk("baz", 7)];

    // A queued Delete survives, the tombstone collapses into it.
    let f = fifo_known(&known_objs);
    f.delete(mk("baz", 10)).unwrap();
    f.replace(vec![mk("foo", 5)], "0").unwrap();
    assert_eq!(pop(&f).0, [d(Deleted, mk("baz", 10))]);
    assert_eq!(pop(&f).0, [d(Sync, mk("foo", 5))]);
    assert_eq!(pop(&f).0, [tomb("bar", mk("bar", 6))]);
    assert!(f.is_empty());

    // A queued Add gets a tombstone with the queued object.
    let f = fifo_known(&known_objs);
    f.add(mk("baz", 10)).unwrap();
    f.replace(vec![mk("foo", 5)], "0").unwrap();
    assert_eq!(pop(&f).0, [d(Added, mk("baz", 10)), tomb("baz", mk("baz", 10))]);
    assert_eq!(pop(&f).0, [d(Sync, mk("foo", 5))]);
    assert_eq!(pop(&f).0, [tomb("bar", mk("bar", 6))]);

    // Deleted and re-created in the queue, then dropped by the relist.
    let f = fifo_known(&known_objs);
    f.delete(mk("bar", 6)).unwrap();
    f.add(mk("bar", 100)).unwrap();
    f.replace(vec![mk("foo", 5)], "0").unwrap();
    assert_eq!(pop(&f).0, [d(Deleted, mk("bar", 6)), d(Added, mk("bar", 100)), tomb("bar", mk("bar", 100))]);
    assert_eq!(pop(&f).0, [d(Sync, mk("foo", 5))]);
    assert_eq!(pop(&f).0, [tomb("baz", mk("baz", 7))]);

    // Relisted first, then dropped by a second relist: the tombstone carries the listed version
    // (upstream's "syncing it first" case).
    let f = fifo_known(&known_objs);
    f.replace(vec![mk("bar", 100), mk("foo", 5)], "0").unwrap();
    f.replace(vec![mk("foo", 5)], "0").unwrap();
    assert_eq!(pop(&f).0, [d(Sync, mk("bar", 100)), tomb("bar", mk("bar", 100))]);
    assert_eq!(pop(&f).0, [d(Sync, mk("foo", 5)), d(Sync, mk("foo", 5))]);
    assert_eq!(pop(&f).0, [tomb("baz", mk("baz", 7))]);
    assert!(f.is_empty());

    // Without known objects.
    let f = fifo();
    f.add(mk("baz", 10)).unwrap();
    f.replace(vec![mk("foo", 5)], "0").unwrap();
    assert_eq!(pop(&f).0, [d(Added, mk("baz", 10)), tomb("baz", mk("baz", 10))]);
    assert_eq!(pop(&f).0, [d(Sync, mk("foo", 5))]);
    assert!(f.is_empty());

    // A queued tombstone's object is reused, not wrapped again, and the two collapse.
    let f = fifo_known(&known_objs);
    f.replace(vec![mk("foo", 5), mk("baz", 7)], "0").unwrap();
    f.replace(vec![mk("foo", 5), mk("baz", 7)], "1").unwrap();
    assert_eq!(f.get_by_key("bar").unwrap().into_vec(), [tomb("bar", mk("bar", 6))]);
}

/// Mirrors `TestDeltaFIFO_ReplaceMakesDeletionsReplaced`: the same with `Replaced` deltas.
#[test]
fn replace_makes_deletions_replaced() {
    let f = DeltaFifo::new(
        DeltaFifoOptions::new(key_fn())
            .known_objects(Arc::new(known(&[mk("foo", 5), mk("bar", 6), mk("baz", 7)])))
            .emit_delta_type_replaced(true),
    );
    f.delete(mk("baz", 10)).unwrap();
    f.replace(vec![mk("foo", 6)], "0").unwrap();
    assert_eq!(pop(&f).0, [d(Deleted, mk("baz", 10))]);
    assert_eq!(pop(&f).0, [d(Replaced, mk("foo", 6))]);
    assert_eq!(pop(&f).0, [tomb("bar", mk("bar", 6))]);
}

/// Mirrors `TestDeltaFIFO_ReplaceDeltaType`: with `emit_delta_type_replaced`, listed objects get
/// `Replaced`.
#[test]
fn replace_delta_type() {
    let f = DeltaFifo::new(
        DeltaFifoOptions::new(key_fn())
            .known_objects(Arc::new(known(&[mk("foo", 5)])))
            .emit_delta_type_replaced(true),
    );
    f.replace(vec![mk("foo", 5)], "0").unwrap();
    assert_eq!(pop(&f).0, [d(Replaced, mk("foo", 5))]);
}

/// Mirrors `TestDeltaFIFO_UpdateResyncRace`: a resync does not append a stale `Sync` behind a
/// queued update.
#[test]
fn update_resync_race() {
    let f = fifo_known(&[mk("foo", 5)]);
    f.update(mk("foo", 6)).unwrap();
    f.resync().unwrap();
    assert_eq!(pop(&f).0, [d(Updated, mk("foo", 6))]);
    assert!(f.is_empty());
}

/// Mirrors `TestDeltaFIFO_HasSyncedCorrectOnDeletion`: tombstones from the first relist count
/// toward the initial population.
#[test]
fn has_synced_correct_on_deletion() {
    let f = fifo_known(&[mk("foo", 5), mk("bar", 6), mk("baz", 7)]);
    f.replace(vec![mk("foo", 5)], "0").unwrap();
    let mut popped = Vec::new();
    for _ in 0..3 {
        assert!(!f.has_synced());
        let (deltas, initial) = pop(&f);
        assert!(initial);
        popped.push(deltas);
    }
    assert!(f.has_synced());
    assert_eq!(popped[0], [d(Sync, mk("foo", 5))]);
    // Known keys come from a hash map: bar and baz in either order.
    let mut rest: Vec<_> = popped[1..].iter().map(|d| d[0].clone()).collect();
    rest.sort_by_key(|d| d.obj().name.clone());
    assert_eq!(rest, [tomb("bar", mk("bar", 6)), tomb("baz", mk("baz", 7))]);
}

/// Mirrors `TestDeltaFIFO_detectLineJumpers`: an updated key keeps its place in the queue.
#[test]
fn detect_line_jumpers() {
    let f = fifo();
    f.add(mk("foo", 10)).unwrap();
    f.add(mk("bar", 1)).unwrap();
    f.add(mk("foo", 11)).unwrap();
    f.add(mk("foo", 13)).unwrap();
    f.add(mk("zab", 30)).unwrap();
    assert_eq!(pop_val(&f), 13);
    f.add(mk("foo", 14)).unwrap(); // foo must not jump back ahead
    assert_eq!(pop_val(&f), 1);
    assert_eq!(pop_val(&f), 30);
    assert_eq!(pop_val(&f), 14);
}

/// Mirrors `TestDeltaFIFO_KeyOf`: the FIFO's key function, and tombstones keyed by their key.
#[test]
fn key_of() {
    let f = fifo();
    assert_eq!(f.key_of(&mk("A", 0)).unwrap(), "A");
    let t = tomb("B", mk("other", 0));
    assert_eq!(kcache_store::deletion_handling_key(&key_fn(), &t.object).unwrap(), "B");
}

/// Mirrors `TestDeltaFIFO_HasSynced`: the table of action sequences and the expected result.
#[test]
fn has_synced() {
    type Action = fn(&DeltaFifo<TObj>);
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
        (
            // Delete before the first replace also counts as populated, even when skipped.
            vec![|f| f.delete(mk("a", 1)).unwrap()],
            true,
        ),
        (
            // Duplicate keys in one list are one key: one pop syncs (upstream's last case).
            vec![|f| f.replace(vec![mk("a", 1), mk("a", 2)], "0").unwrap(), |f| drop(pop(f))],
            true,
        ),
        (
            // A second replace does not reset the count.
            vec![|f| f.replace(vec![], "0").unwrap(), |f| f.replace(vec![mk("a", 1)], "1").unwrap()],
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

/// Mirrors `TestDeltaFIFO_PopShouldUnblockWhenClosed`: blocked pops return `Closed`.
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
    assert!(f.is_closed());
}

/// Close drains first: queued items still pop, then `Closed`.
#[test]
fn close_drains_then_errors() {
    let f = fifo();
    f.add(mk("a", 1)).unwrap();
    f.close();
    assert_eq!(pop_val(&f), 1);
    assert!(matches!(f.pop_blocking(ok), Err(FifoError::Closed)));
}

/// Mirrors the `isInInitialList` checks of `TestDeltaFIFO_HasSynced` in newer client-go: items
/// of the first list are flagged, later ones are not.
#[test]
fn is_in_initial_list() {
    let f = fifo();
    f.replace(vec![mk("a", 1), mk("b", 2)], "0").unwrap();
    f.add(mk("c", 3)).unwrap();
    assert!(pop(&f).1);
    assert!(pop(&f).1);
    assert!(!pop(&f).1);
}

/// The process error comes back to the caller and the item is not requeued (client-go 1.33
/// removed `ErrRequeue`; upstream `TestDeltaFIFO_requeueOnPop` is gone).
#[test]
fn process_error_is_returned_not_requeued() {
    let f = fifo();
    f.add(mk("foo", 10)).unwrap();
    let err = f.pop_blocking(|_: Deltas<TObj>, _| Err::<(), _>("test error")).unwrap_err();
    match err {
        FifoError::Process(e) => assert_eq!(e.to_string(), "test error"),
        other => panic!("unexpected {other:?}"),
    }
    assert!(f.get_by_key("foo").is_none());
    assert!(f.is_empty());
}

/// The dedup of the seed "The dedup that only collapses adjacent tombstones": only the newest two,
/// only two deletions, and the survivor is the non-tombstone (the older one when neither is).
#[test]
fn dedup_only_adjacent_deletions() {
    let store = known(&[mk("foo", 1)]);
    let f = DeltaFifo::new(DeltaFifoOptions::new(key_fn()).known_objects(Arc::new(store.clone())));
    // Two watch deletions: the older survives.
    f.delete(mk("foo", 2)).unwrap();
    f.delete(mk("foo", 3)).unwrap();
    assert_eq!(f.get_by_key("foo").unwrap().into_vec(), [d(Deleted, mk("foo", 2))]);
    drop(pop(&f));

    // Tombstone then watch deletion: the watch deletion survives.
    f.replace(vec![], "1").unwrap();
    f.delete(mk("foo", 4)).unwrap();
    assert_eq!(f.get_by_key("foo").unwrap().into_vec(), [d(Deleted, mk("foo", 4))]);
    drop(pop(&f));

    // Updates are never collapsed, and a deletion after an update is kept.
    f.update(mk("foo", 5)).unwrap();
    f.update(mk("foo", 6)).unwrap();
    f.update(mk("foo", 7)).unwrap();
    f.delete(mk("foo", 8)).unwrap();
    assert_eq!(f.get_by_key("foo").unwrap().len(), 4);
    // Deleted, Updated, Deleted: not adjacent, both kept.
    drop(pop(&f));
    f.delete(mk("foo", 9)).unwrap();
    f.update(mk("foo", 10)).unwrap();
    f.delete(mk("foo", 11)).unwrap();
    assert_eq!(f.get_by_key("foo").unwrap().len(), 3);
}

/// `DeltaFifo` is usable as the reflector's sink and the informer's source through the traits.
#[test]
fn through_traits() {
    use kcache_delta_fifo::Fifo;
    use kcache_store::ReflectorStore;
    let store = known(&[mk("k", 1)]);
    let f: Arc<dyn Fifo<TObj>> =
        Arc::new(DeltaFifo::new(DeltaFifoOptions::new(key_fn()).known_objects(Arc::new(store.clone()))));
    let w: &dyn ReflectorStore<TObj> = &*f;
    w.add(mk("a", 1)).unwrap();
    w.resync().unwrap();
    assert_eq!(f.len(), 2);
    assert_eq!(pop(&*f).0, [d(Added, mk("a", 1))]);
    assert_eq!(pop(&*f).0, [d(Sync, mk("k", 1))]);
    assert!(f.is_empty());
    assert_eq!(store.list_keys().len(), 1);
    assert!(KnownObjects::contains_key(&store, "k"));
}
