//! The in-order FIFO with atomic events (client-go's `AtomicFIFO` feature, `RealFIFOOptions
//! .AtomicEvents`; kcache's default): a replace or a resync is one item, popped as one
//! [`AtomicEvent`] carrying all of its deltas. Tests copied from client-go's
//! `tools/cache/the_real_fifo_test.go` (`TestRealFIFO_ReplaceAtomic`,
//! `TestRealFIFO_ReplaceAtomicPop`, `TestRealFIFO_ResyncAtomic`) and manually rewritten; the
//! rest check the deltas of an atomic pop against what client-go's informer derives from a
//! `ReplacedAll` or `SyncAll` (controller.go `processDeltas`, `processReplacedAllInfo`), since
//! kcache computes them in the pop rather than in the consumer.

use crate::common;

use std::sync::{Arc, mpsc};
use std::thread;

use common::*;
use kcache_delta_fifo::DeltaType::{Added, Deleted, Replaced, Sync, Updated};
use kcache_delta_fifo::{AtomicEvent, Delta, Deltas, Fifo, FifoError, RealFifo, RealFifoOptions};
use kcache_store::ReflectorStore;

/// One popped item: its atomic event, if any, its deltas and the initial-list flag.
type Popped = (Option<AtomicEvent>, Vec<Delta<TObj>>, bool);

/// One popped item without the initial-list flag.
type Item = (Option<AtomicEvent>, Vec<Delta<TObj>>);

/// An atomic FIFO whose known objects stay as given (upstream's `literalListerGetter`): pops do
/// not apply anything to them.
fn fifo_known(objs: &[Arc<TObj>]) -> RealFifo<TObj> {
    RealFifo::new(RealFifoOptions::new(key_fn(), Arc::new(known(objs))))
}

/// An atomic FIFO over `known`, which each pop updates as an informer updates its indexer.
fn fifo_applying(known: &Arc<OrderedKnown>) -> RealFifo<TObj> {
    RealFifo::new(RealFifoOptions::new(key_fn(), known.clone()))
}

fn pop_item(f: &RealFifo<TObj>, apply_to: Option<&OrderedKnown>) -> Popped {
    let mut out = None;
    f.pop_blocking(|d: Deltas<TObj>, initial| {
        if let Some(k) = apply_to {
            k.apply(&d);
        }
        out = Some((d.atomic_event().cloned(), d.into_vec(), initial));
        Ok::<_, FifoError>(())
    })
    .unwrap();
    out.unwrap()
}

/// Pops everything queued (as upstream's `popN(f, len(f.getItems()))`), applying nothing.
fn pop_all(f: &RealFifo<TObj>) -> Vec<Item> {
    let n = f.len();
    let got = (0..n).map(|_| pop_item(f, None)).map(|(e, d, _)| (e, d)).collect();
    assert!(f.is_empty(), "expected no extra deltas");
    got
}

fn replaced_all(rv: &str) -> Option<AtomicEvent> {
    Some(AtomicEvent::ReplacedAll { resource_version: rv.to_string() })
}

/// Mirrors `TestRealFIFO_ReplaceAtomic`: each replace is one item carrying its list and
/// resource version, queued after what came before it.
#[test]
fn replace_atomic() {
    type Ops = fn(&RealFifo<TObj>);
    let obj = mk("foo", 2);
    let cases: Vec<(&str, Ops, Vec<Item>)> = vec![
        ("Base replace", |f| f.replace(vec![], "123").unwrap(), vec![(replaced_all("123"), vec![])]),
        (
            "Added object exists in deltas on Atomic Replace",
            |f| {
                f.add(mk("foo", 2)).unwrap();
                f.replace(vec![], "123").unwrap();
            },
            // The known objects stay empty (nothing applies the add): no tombstone for foo.
            vec![(None, vec![d(Added, obj.clone())]), (replaced_all("123"), vec![])],
        ),
        (
            "Multiple replaces run in order",
            |f| {
                f.add(mk("foo", 2)).unwrap();
                f.replace(vec![mk("foo", 2)], "10").unwrap();
                f.replace(vec![mk("foo", 2)], "20").unwrap();
                f.replace(vec![], "56").unwrap();
            },
            vec![
                (None, vec![d(Added, obj.clone())]),
                (replaced_all("10"), vec![d(Replaced, obj.clone())]),
                (replaced_all("20"), vec![d(Replaced, obj.clone())]),
                (replaced_all("56"), vec![]),
            ],
        ),
        (
            // Upstream queues a `Bookmark` delta (`EmitDeltaTypeBookmark`) before the
            // `ReplacedAll`; kcache has no bookmark delta (the informer publishes resource
            // versions outside the FIFO), so the bookmark queues nothing, and the replace is
            // still a single item.
            "Bookmark object should not be included in Replace",
            |f| {
                ReflectorStore::update_resource_version(f, "123");
                f.replace(vec![], "1234").unwrap();
            },
            vec![(replaced_all("1234"), vec![])],
        ),
    ];
    for (name, ops, expected) in cases {
        let f = fifo_known(&[]);
        ops(&f);
        assert_eq!(pop_all(&f), expected, "{name}");
    }
}

/// Mirrors `TestRealFIFO_ReplaceAtomicPop`: a consumer popping until the FIFO closes gets the
/// add, then the relist as one item, and nothing else. (Upstream waits 50 ms for a third value;
/// here the consumer is stopped by `close` and everything it popped is counted.)
#[test]
fn replace_atomic_pop() {
    let f = Arc::new(fifo_known(&[]));
    f.add(mk("foo", 10)).unwrap();
    f.replace(vec![mk("foo", 15)], "20").unwrap();
    let (tx, rx) = mpsc::channel();
    let consumer = {
        let f = f.clone();
        thread::spawn(move || {
            loop {
                let r = f.pop_blocking(|d: Deltas<TObj>, _| {
                    tx.send((d.atomic_event().cloned(), d.into_vec())).unwrap();
                    Ok::<_, FifoError>(())
                });
                if let Err(FifoError::Closed) = r {
                    return;
                }
            }
        })
    };
    assert_eq!(rx.recv().unwrap(), (None, vec![d(Added, mk("foo", 10))]));
    assert_eq!(rx.recv().unwrap(), (replaced_all("20"), vec![d(Replaced, mk("foo", 15))]));
    assert!(f.is_empty(), "item did not get removed");
    f.close();
    consumer.join().unwrap();
    assert!(rx.try_recv().is_err(), "no third value");
}

/// Mirrors `TestRealFIFO_ResyncAtomic`: a resync is one `SyncAll` item, after what came before.
#[test]
fn resync_atomic() {
    let f = fifo_known(&[]);
    f.resync().unwrap();
    assert_eq!(pop_all(&f), [(Some(AtomicEvent::SyncAll), vec![])], "Base resync");

    let f = fifo_known(&[]);
    f.add(mk("foo", 2)).unwrap();
    f.resync().unwrap();
    assert_eq!(
        pop_all(&f),
        [(None, vec![d(Added, mk("foo", 2))]), (Some(AtomicEvent::SyncAll), vec![])],
        "Added object exists in deltas on Atomic Resync"
    );
}

/// Mirrors controller.go `processReplacedAllInfo`, which reconciles a `ReplacedAll` against the
/// informer's store (no queued items): a tombstone with the stored object for every stored key
/// the list lacks, then the listed objects in list order. kcache computes them when the relist
/// is popped, after every earlier pop was applied, so the handlers hear what they would hear
/// from the same changes without atomic events (`TestRealFIFO_ReplaceMakesDeletions`).
#[test]
fn an_atomic_relist_is_reconciled_against_the_store_when_popped() {
    let known = Arc::new(OrderedKnown::default());
    for o in [mk("foo", 5), mk("bar", 6), mk("baz", 7)] {
        known.0.lock().insert(o.name.clone(), o);
    }
    let f = fifo_applying(&known);
    f.delete(mk("baz", 10)).unwrap();
    f.replace(vec![mk("foo", 5)], "0").unwrap();
    assert_eq!(pop_item(&f, Some(&known)).1, [d(Deleted, mk("baz", 10))]);
    let (event, deltas, _) = pop_item(&f, Some(&known));
    assert_eq!(event, replaced_all("0"));
    assert_eq!(deltas, [tomb("bar", mk("bar", 6)), d(Replaced, mk("foo", 5))]);

    // A key added and not listed: its tombstone carries the applied add (the queue's newest
    // state, as the per-delta tombstone would).
    let known = Arc::new(OrderedKnown::default());
    known.0.lock().insert("bar".into(), mk("bar", 6));
    let f = fifo_applying(&known);
    f.add(mk("baz", 10)).unwrap();
    f.replace(vec![mk("zed", 1), mk("foo", 5)], "0").unwrap();
    assert_eq!(pop_item(&f, Some(&known)).1, [d(Added, mk("baz", 10))]);
    assert_eq!(
        pop_item(&f, Some(&known)).1,
        [
            tomb("bar", mk("bar", 6)),
            tomb("baz", mk("baz", 10)),
            d(Replaced, mk("zed", 1)),
            d(Replaced, mk("foo", 5))
        ]
    );
    let mut left: Vec<_> = known.0.lock().keys().cloned().collect();
    left.sort();
    assert_eq!(left, ["foo", "zed"], "applying the relist leaves exactly the list");
}

/// Mirrors controller.go `processDeltas`'s `SyncAll` case (`OnUpdate(obj, obj)` for every object
/// of the store): the pop carries a `Sync` for every known object, as known when popped, so a
/// change queued before the resync is synced in its new state. Without atomic events the FIFO
/// skips such a key instead, lest the `Sync` carry the state before the change
/// (`TestRealFIFO_UpdateResyncRace`).
#[test]
fn an_atomic_resync_syncs_every_object_as_stored_when_popped() {
    let known = Arc::new(OrderedKnown::default());
    for o in [mk("foo", 5), mk("bar", 6)] {
        known.0.lock().insert(o.name.clone(), o);
    }
    let f = fifo_applying(&known);
    f.update(mk("foo", 6)).unwrap();
    f.resync().unwrap();
    assert_eq!(f.len(), 2);
    assert_eq!(pop_item(&f, Some(&known)).1, [d(Updated, mk("foo", 6))]);
    let (event, deltas, _) = pop_item(&f, Some(&known));
    assert_eq!(event, Some(AtomicEvent::SyncAll));
    assert_eq!(deltas, [d(Sync, mk("bar", 6)), d(Sync, mk("foo", 6))]);
    assert!(f.is_empty());
}

/// Mirrors `TestRealFIFO_HasSynced` with atomic events: the first relist is one item of the
/// initial population (client-go counts `len(f.items)`), its pop is flagged initial, and the FIFO
/// is synced only once that pop's process function has returned.
#[test]
fn has_synced_with_an_atomic_relist() {
    let f = fifo_known(&[]);
    assert!(!f.has_synced());
    f.replace(vec![mk("a", 1), mk("b", 2)], "0").unwrap();
    assert_eq!(f.len(), 1);
    assert!(!f.has_synced());
    let mut during = None;
    f.pop_blocking(|d: Deltas<TObj>, initial| {
        during = Some((d.len(), initial, f.has_synced()));
        Ok::<_, FifoError>(())
    })
    .unwrap();
    assert_eq!(during, Some((2, true, false)));
    assert!(f.has_synced());

    // An empty first relist is still an item to pop (without atomic events it queues nothing
    // and is synced at once).
    let f = fifo_known(&[]);
    f.replace(vec![], "0").unwrap();
    assert!(!f.has_synced());
    assert_eq!(pop_item(&f, None), (replaced_all("0"), vec![], true));
    assert!(f.has_synced());

    // What was queued before the first relist is initial too; a resync does not populate.
    let f = fifo_known(&[mk("k", 1)]);
    f.resync().unwrap();
    assert!(!f.has_synced());
    f.replace(vec![mk("a", 1)], "0").unwrap();
    assert_eq!(f.len(), 2);
    for _ in 0..2 {
        assert!(!f.has_synced());
        assert!(pop_item(&f, None).2);
    }
    assert!(f.has_synced());

    // Later relists are not initial.
    f.replace(vec![mk("a", 2)], "1").unwrap();
    assert!(!pop_item(&f, None).2);
}

/// A transformer runs on every listed object when the relist is queued (client-go's
/// `addReplaceToItemsLocked`), never on the tombstones or syncs computed at the pop.
#[test]
fn an_atomic_relist_is_transformed_once() {
    let xfrm = Arc::new(|o: Arc<TObj>| -> Result<Arc<TObj>, kcache_store::BoxError> {
        Ok(Arc::new(TObj { xfrm: o.xfrm + 1, ..(*o).clone() }))
    });
    let known = Arc::new(OrderedKnown::default());
    known.0.lock().insert("gone".into(), mk("gone", 1));
    let f = RealFifo::new(RealFifoOptions::new(key_fn(), known.clone()).transformer(xfrm));
    f.replace(vec![mk("a", 1)], "1").unwrap();
    let x = |name: &str, val| Arc::new(TObj { name: name.into(), val, xfrm: 1 });
    assert_eq!(pop_item(&f, Some(&known)).1, [tomb("gone", mk("gone", 1)), d(Replaced, x("a", 1))]);
    f.resync().unwrap();
    assert_eq!(pop_item(&f, Some(&known)).1, [d(Sync, x("a", 1))]);
}

/// A replace that fails on a key or a transform queues nothing (upstream returns the
/// transformer's error before appending the `ReplacedAll`).
#[test]
fn a_failed_atomic_replace_queues_nothing() {
    let xfrm = Arc::new(|o: Arc<TObj>| -> Result<Arc<TObj>, kcache_store::BoxError> {
        if o.name == "bad" { Err("nope".into()) } else { Ok(o) }
    });
    let f = RealFifo::new(RealFifoOptions::new(key_fn(), Arc::new(known(&[]))).transformer(xfrm));
    assert!(f.replace(vec![mk("a", 1), mk("bad", 2)], "1").is_err());
    assert!(f.is_empty());
    assert!(!f.has_synced());
}

/// `replace_keyed` (what a reflector's watch-list calls, `ReflectorStore::replace_keyed`): with
/// the FIFO's own key function (the same `Arc`) the objects are queued under the keys given and
/// the key function is not called; with any other key function the keys are ignored and every
/// key is computed, as `replace` does. Mirrors the list `Replace` receives in client-go
/// reflector.go `watchList` (`r.store.Replace(temporaryStore.List(), ..)`), whose objects the
/// FIFO keys with its own `keyOf`; kcache only skips computing the same keys twice.
#[test]
fn replace_keyed_uses_the_given_keys_only_under_its_own_key_function() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let kf = kcache_store::key_func(move |s: &String| {
        counted.fetch_add(1, Ordering::SeqCst);
        Ok(s.clone())
    });
    let list =
        || vec![(Arc::from("b"), Arc::new("b".to_owned())), (Arc::from("a"), Arc::new("a".to_owned()))];
    let popped_keys = |f: &RealFifo<String>| {
        let mut keys = Vec::new();
        f.pop_blocking(|d: Deltas<String>, _| {
            keys = (0..d.len()).map(|i| d.key_at(i).map(|k| k.to_string())).collect();
            Ok::<_, FifoError>(())
        })
        .unwrap();
        keys
    };

    let fifo =
        RealFifo::new(RealFifoOptions::new(kf.clone(), Arc::new(kcache_store::Store::new(kf.clone()))));
    ReflectorStore::replace_keyed(&fifo, list(), &kf, "1").unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 0, "its own key function: the keys given are used");
    assert_eq!(popped_keys(&fifo), [Some("b".to_owned()), Some("a".to_owned())], "in the order given");

    // The same closure, but another `Arc`: not provably the FIFO's key function.
    let other = kcache_store::key_func(|s: &String| Ok(s.clone()));
    ReflectorStore::replace_keyed(&fifo, list(), &other, "2").unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 2, "another key function: every key computed");
    assert_eq!(popped_keys(&fifo), [Some("b".to_owned()), Some("a".to_owned())]);
}
