//! The store's own memory per object, counted with a counting global allocator: at most 100
//! bytes beyond the object and its key (issue 4's target; client-go's `threadSafeMap` needs a
//! map entry, the key string and one set entry per index value).
//!
//! One test per binary on purpose: the allocator counts every thread, so a concurrently running
//! test would skew the figure.
#[path = "it/common.rs"]
mod common;

use std::sync::atomic::Ordering;

use common::*;
use kcache_store::NAMESPACE_INDEX;
use kcache_test_support::alloc::{Counting, LIVE};

#[global_allocator]
static ALLOC: Counting = Counting;

const N: usize = 100_000;

/// Fills a store with the namespace index (client-go's default informer indexer) and checks the
/// bytes it allocated, minus the key bytes, per object.
#[test]
fn store_overhead_per_object_is_at_most_100_bytes() {
    let objects: Vec<_> =
        (0..N).map(|i| obj(&format!("ns-{}", i % 10), &format!("object-{i:06}"), &[])).collect();
    let key_bytes: usize = objects.iter().map(|o| o.ns.len() + 1 + o.name.len()).sum();
    let store = store_with(&[(NAMESPACE_INDEX, ns_index())]);

    let start = LIVE.load(Ordering::Relaxed);
    for o in &objects {
        store.add(o.clone()).unwrap();
    }
    let store_bytes = LIVE.load(Ordering::Relaxed) - start;
    let per_object = (store_bytes as f64 - key_bytes as f64) / N as f64;
    println!("store overhead: {per_object:.1} bytes/object beyond the object and its key ({N} objects)");
    assert!(per_object <= 100.0, "store overhead {per_object:.1} bytes/object");

    // The same after a relist: replace builds fresh maps sized for the list and frees the old.
    let list = objects.clone();
    let before_replace = LIVE.load(Ordering::Relaxed);
    let list_bytes = (list.capacity() * size_of::<usize>()) as isize;
    store.replace(list, "1").unwrap();
    // The list's own buffer was freed by replace; do not count that as the store shrinking.
    let store_bytes = store_bytes + (LIVE.load(Ordering::Relaxed) - before_replace) + list_bytes;
    let per_object = (store_bytes as f64 - key_bytes as f64) / N as f64;
    println!("after replace: {per_object:.1} bytes/object");
    assert!(per_object <= 100.0, "store overhead after replace {per_object:.1} bytes/object");
    assert_eq!(store.len(), N);
}
