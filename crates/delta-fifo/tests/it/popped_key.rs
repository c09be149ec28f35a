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

/// Adds, updates, a replace (with a tombstone for a known object it leaves out) and a delete:
/// each pop's key is the key of what it carries.
fn keys_match_objects<F: Fifo<TObj> + ?Sized>(f: &F) {
    f.add(mk("a", 1)).unwrap();
    f.update(mk("b", 2)).unwrap();
    f.update(mk("a", 3)).unwrap();
    f.delete(mk("b", 4)).unwrap();
    f.replace(vec![mk("c", 5)], "7").unwrap();
    let mut popped = Vec::new();
    while !f.is_empty() {
        popped.push(pop_key(f));
    }
    assert!(!popped.is_empty());
    for (key, name) in popped {
        assert_eq!(key.as_deref(), Some(name.as_str()), "a pop's key is its object's key");
    }
}

#[test]
fn real_fifo_pops_hand_over_their_keys() {
    let f = RealFifo::new(RealFifoOptions::new(key_fn(), Arc::new(known(&[mk("gone", 0)]))));
    keys_match_objects(&f);
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
    let keyed = Deltas::with_key(Arc::from("a"), vec![Delta::new(DeltaType::Added, mk("a", 1))]);
    assert_eq!(keyed.key().map(|k| &**k), Some("a"));
    assert_eq!(plain, keyed);
    assert_eq!(keyed.clone().key().map(|k| &**k), Some("a"));
}
