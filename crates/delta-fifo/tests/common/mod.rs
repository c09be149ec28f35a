//! Fixtures shared by the FIFO tests: client-go's `testFifoObject` (a name and a value, keyed by
//! name) and helpers to build deltas and pop synchronously.
#![allow(dead_code, unreachable_pub)]

use std::convert::Infallible;
use std::sync::Arc;

use kcache_delta_fifo::{Delta, DeltaType, Deltas, Fifo};
use kcache_store::{KeyFunc, Store, key_func};

/// Client-go's `testFifoObject`: `name` is the key, `val` tells versions apart, `xfrm` counts
/// how often a transformer touched it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TObj {
    pub name: String,
    pub val: i64,
    pub xfrm: u32,
}

/// Client-go's `mkFifoObj`.
pub fn mk(name: &str, val: i64) -> Arc<TObj> {
    Arc::new(TObj { name: name.into(), val, xfrm: 0 })
}

/// Client-go's `testFifoObjectKeyFunc`.
pub fn key_fn() -> KeyFunc<TObj> {
    key_func(|o: &TObj| Ok(o.name.clone()))
}

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
