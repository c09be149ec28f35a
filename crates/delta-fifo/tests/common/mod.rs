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

/// Known objects in key order, so tests can predict the order of known-key tombstones and syncs
/// (a `Store` lists in hash order). The pop process writes into it, as an informer's indexer.
#[derive(Debug, Default)]
pub struct OrderedKnown(pub parking_lot::Mutex<std::collections::BTreeMap<String, Arc<TObj>>>);

impl kcache_store::KnownObjects<TObj> for OrderedKnown {
    fn list_keys(&self) -> Vec<Arc<str>> {
        self.0.lock().keys().map(|k| Arc::from(k.as_str())).collect()
    }
    fn get_by_key(&self, key: &str) -> Option<Arc<TObj>> {
        self.0.lock().get(key).cloned()
    }
}

impl OrderedKnown {
    /// Applies popped deltas the way an informer applies them to its indexer.
    pub fn apply(&self, deltas: &[Delta<TObj>]) {
        let mut m = self.0.lock();
        for d in deltas {
            let key = match d.object.tombstone() {
                Some(t) => t.key.clone(),
                None => d.obj().name.clone(),
            };
            if d.delta_type == DeltaType::Deleted {
                m.remove(&key);
            } else {
                m.insert(key, d.obj().clone());
            }
        }
    }
}

/// A delta flattened for comparison with a model: type, tombstone key (if a tombstone), object
/// name and value.
pub type Flat = (DeltaType, Option<String>, String, i64);

pub fn flatten(d: &Delta<TObj>) -> Flat {
    (d.delta_type, d.object.tombstone().map(|t| t.key.clone()), d.obj().name.clone(), d.obj().val)
}

/// One step of a random FIFO workload.
#[derive(Debug, Clone)]
pub enum Op {
    Add(usize, i64),
    Update(usize, i64),
    Delete(usize, i64),
    Replace(Vec<(usize, i64)>),
    Resync,
    Pop,
}

pub const KEYS: [&str; 4] = ["a", "b", "c", "d"];

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
