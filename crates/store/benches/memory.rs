//! Store memory per object, counted with a counting global allocator and printed (not timed):
//! the bytes the store allocates for N objects, minus the key bytes, divided by N. The objects
//! (the `ConfigMap`s of `kcache_test_support::objects`) are built before counting, so they are excluded, as
//! "overhead beyond the object and its key" asks.
//!
//! Run: `cargo bench -p kcache-store --bench memory`.
mod common;

use std::sync::atomic::Ordering;

use common::*;
use kcache_store::Store;
use kcache_test_support::alloc::{Counting, LIVE};

#[global_allocator]
static ALLOC: Counting = Counting;

fn measure(label: &str, n: usize, make: impl Fn() -> Store<k8s_openapi::api::core::v1::ConfigMap>) {
    let objects = list(n, 0);
    let key_bytes: usize = objects
        .iter()
        .map(|o| o.metadata.namespace.as_ref().unwrap().len() + 1 + o.metadata.name.as_ref().unwrap().len())
        .sum();
    let store = make();
    let start = LIVE.load(Ordering::Relaxed);
    for o in &objects {
        store.add(o.clone()).unwrap();
    }
    let added = LIVE.load(Ordering::Relaxed) - start;
    println!(
        "memory/{label}/{n}: {:.1} bytes/object beyond object and key (add)",
        (added as f64 - key_bytes as f64) / n as f64
    );
    drop(store);
    let store = make();
    let l = objects.clone();
    let list_bytes = (l.capacity() * size_of::<usize>()) as isize;
    let start = LIVE.load(Ordering::Relaxed);
    store.replace(l, "1").unwrap();
    let replaced = LIVE.load(Ordering::Relaxed) - start + list_bytes;
    println!(
        "memory/{label}/{n}: {:.1} bytes/object beyond object and key (replace)",
        (replaced as f64 - key_bytes as f64) / n as f64
    );
}

fn main() {
    let n = n();
    measure("namespace_index", n, Store::for_resource);
    measure("no_index", n, || Store::new(kcache_store::meta_namespace_key_func()));
    measure("3_indexers", n, store_with_three_indexers);
}
