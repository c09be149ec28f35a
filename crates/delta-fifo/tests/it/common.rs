//! Fixtures shared by the FIFO tests: client-go's `testFifoObject` (a name and a value, keyed by
//! name), helpers to build deltas and pop synchronously, and (re-exported from
//! `kcache_test_support::fifo_model`, shared with the fuzz targets) the reference models of both
//! FIFOs.
#![allow(dead_code, unreachable_pub)]

use std::convert::Infallible;
use std::sync::Arc;

use kcache_delta_fifo::{Delta, DeltaType, Deltas, Fifo};
use kcache_store::Store;

pub use kcache_test_support::fifo_model::*;

/// Client-go's `literalListerGetter`: known objects fixed up front.
pub fn known(objs: &[Arc<TObj>]) -> Store<TObj> {
    let store = Store::new(key_fn());
    for o in objs {
        store.add(o.clone()).unwrap();
    }
    store
}

pub fn d(t: DeltaType, o: Arc<TObj>) -> Delta<TObj> {
    Delta::new(t, o)
}

pub fn tomb(key: &str, o: Arc<TObj>) -> Delta<TObj> {
    Delta::tombstone(key.into(), o)
}

/// Pops one item synchronously (the FIFO must not be empty, or this blocks).
pub fn pop<F: Fifo<TObj> + ?Sized>(f: &F) -> (Vec<Delta<TObj>>, bool) {
    let mut out = None;
    f.pop_blocking(&mut |deltas: Deltas<TObj>, initial| {
        out = Some((deltas.into_vec(), initial));
        Ok(())
    })
    .unwrap();
    out.unwrap()
}

/// Pops one item and returns its newest object's value (client-go's `testPop`).
pub fn pop_val<F: Fifo<TObj> + ?Sized>(f: &F) -> i64 {
    pop(f).0.last().unwrap().obj().val
}

/// A process function that accepts everything.
pub fn ok(_: Deltas<TObj>, _: bool) -> Result<(), Infallible> {
    Ok(())
}

/// Random FIFO operations for the proptests (the fuzz targets build [`Op`]s from raw bytes).
pub fn op_strategy() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    let key = 0..KEYS.len();
    let val = 0i64..100;
    prop_oneof![
        3 => (key.clone(), val.clone()).prop_map(|(k, v)| Op::Add(k, v)),
        3 => (key.clone(), val.clone()).prop_map(|(k, v)| Op::Update(k, v)),
        2 => (key.clone(), val.clone()).prop_map(|(k, v)| Op::Delete(k, v)),
        1 => proptest::collection::vec((key, val), 0..4).prop_map(Op::Replace),
        1 => Just(Op::Resync),
        4 => Just(Op::Pop),
    ]
}
