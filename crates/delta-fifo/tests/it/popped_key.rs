//! Every pop hands over the key its deltas were queued under ([`Deltas::key`]), so that an
//! informer files the object in its indexer without computing the key again. No client-go
//! counterpart: client-go's `Pop` hands over the deltas alone and `HandleDeltas` keys each object
//! once more.

use crate::common;

use std::sync::Arc;

use common::*;
use kcache_delta_fifo::{
    Delta, DeltaFifo, DeltaFifoOptions, DeltaType, Deltas, Fifo, RealFifo, RealFifoOptions,
};

/// Pops once and returns the key handed over with the deltas and the newest object's name.
fn pop_key<F: Fifo<TObj> + ?Sized>(f: &F) -> (Option<String>, String) {
    let mut out = None;
    f.pop_blocking(&mut |deltas: Deltas<TObj>, _| {
        out = Some((deltas.key().map(|k| k.to_string()), deltas.newest().unwrap().obj().name.clone()));
        Ok(())
    })
    .unwrap();
    out.unwrap()
}

/// Pops once and returns, for each delta, the key handed over with it and its object's key (a
/// tombstone's key, or the name), plus `Deltas::key` (the one key of a pop that is not atomic).
fn pop_keys<F: Fifo<TObj> + ?Sized>(f: &F) -> (Vec<(Option<String>, String)>, Option<String>) {
    let mut out = None;
    f.pop_blocking(&mut |deltas: Deltas<TObj>, _| {
        let per_delta = (0..deltas.len())
            .map(|i| {
                let d = &deltas[i];
                let own = d.object.tombstone().map_or_else(|| d.obj().name.clone(), |t| t.key.clone());
                (deltas.key_at(i).map(|k| k.to_string()), own)
            })
            .collect();
        out = Some((per_delta, deltas.key().map(|k| k.to_string())));
        Ok(())
    })
    .unwrap();
    out.unwrap()
}

/// Adds, updates, a replace (with a tombstone for a known object it leaves out) and a delete:
/// each delta's key is the key of what it carries, and a pop of one object's changes has that
/// key as its `key`.
fn keys_match_objects<F: Fifo<TObj> + ?Sized>(f: &F) {
    f.add(mk("a", 1)).unwrap();
    f.update(mk("b", 2)).unwrap();
    f.update(mk("a", 3)).unwrap();
    f.delete(mk("b", 4)).unwrap();
    f.replace(vec![mk("c", 5)], "7").unwrap();
    let mut deltas = 0;
    while !f.is_empty() {
        let (per_delta, key) = pop_keys(f);
        for (i, (key_at, own)) in per_delta.iter().enumerate() {
            assert_eq!(key_at.as_deref(), Some(own.as_str()), "delta {i}'s key is its object's key");
        }
        if per_delta.len() == 1 {
            assert_eq!(key, per_delta[0].0, "one object's changes: the pop's key");
        }
        deltas += per_delta.len();
    }
    assert!(deltas >= 4);
}

#[test]
fn real_fifo_pops_hand_over_their_keys() {
    for atomic in [true, false] {
        let f = RealFifo::new(
            RealFifoOptions::new(key_fn(), Arc::new(known(&[mk("gone", 0)]))).atomic_events(atomic),
        );
        keys_match_objects(&f);
    }
}

/// An atomic relist is one pop with a key per delta and none for the pop as a whole.
#[test]
fn an_atomic_relist_hands_over_a_key_per_delta() {
    let f = RealFifo::new(RealFifoOptions::new(key_fn(), Arc::new(known(&[mk("gone", 0)]))));
    f.replace(vec![mk("c", 5), mk("d", 6)], "7").unwrap();
    let (per_delta, key) = pop_keys(&f);
    let keys: Vec<_> = per_delta.iter().map(|(k, _)| k.as_deref()).collect();
    assert_eq!(keys, [Some("gone"), Some("c"), Some("d")]);
    assert_eq!(key, None);
}

#[test]
fn delta_fifo_pops_hand_over_their_keys() {
    let f = DeltaFifo::new(DeltaFifoOptions::new(key_fn()).known_objects(Arc::new(known(&[mk("gone", 0)]))));
    keys_match_objects(&f);
}

/// The key is the one the object arrived with, before the FIFO's transform: a transform that
/// renamed objects would not move them to another key.
#[test]
fn the_key_is_taken_before_the_transform() {
    let o = RealFifoOptions::new(key_fn(), Arc::new(known(&[]))).transformer(Arc::new(|obj: Arc<TObj>| {
        Ok(Arc::new(TObj { name: format!("{}-renamed", obj.name), val: obj.val, xfrm: obj.xfrm + 1 }))
    }));
    let f = RealFifo::new(o);
    f.add(mk("a", 1)).unwrap();
    assert_eq!(pop_key(&f), (Some("a".to_string()), "a-renamed".to_string()));
}

/// Deltas made outside a FIFO carry no key unless given one, and equality ignores it.
#[test]
fn deltas_made_by_hand() {
    let plain = Deltas::from_vec(vec![Delta::new(DeltaType::Added, mk("a", 1))]);
    assert!(plain.key().is_none());
    assert!(plain.key_at(0).is_none());
    assert!(plain.atomic_event().is_none());
    let keyed = Deltas::with_key(Arc::from("a"), vec![Delta::new(DeltaType::Added, mk("a", 1))]);
    assert_eq!(keyed.key().map(|k| &**k), Some("a"));
    assert_eq!(plain, keyed);
    assert_eq!(keyed.clone().key().map(|k| &**k), Some("a"));
}
