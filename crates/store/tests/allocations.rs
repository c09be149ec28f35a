//! Allocations on the store's hot paths, counted per thread with a counting global allocator
//! (a binary of its own: `memory.rs` counts the whole process, which this test would skew).
#[path = "it/common.rs"]
mod common;

use common::*;
use kcache_test_support::alloc::{Counting, thread_allocations};

#[global_allocator]
static ALLOC: Counting = Counting;

/// client-go's `cache.Store.Update` (`threadSafeMap.Update`, which files the object under the key
/// already in its map): updating a stored object keeps the stored key. The only allocation is the
/// key function's `String`, which the store looks the entry up with; before, the store also
/// turned that `String` into a new `Arc<str>` that the map then dropped, an allocation and a
/// free per watch `MODIFIED` event. Counted on this thread only.
#[test]
fn an_update_allocates_only_the_key_functions_string() {
    let store = store_with(&[]);
    store.add(obj("ns", "a", &[])).unwrap();
    let stored_key = store.list_keys().pop().unwrap();
    let newer = obj("ns", "a", &["v"]);

    let before = thread_allocations();
    store.update(newer.clone()).unwrap();
    let allocations = thread_allocations() - before;

    assert_eq!(allocations, 1, "allocations made by one update of a stored object");
    assert!(std::sync::Arc::ptr_eq(&store.list_keys()[0], &stored_key), "the stored key is kept");
    assert!(std::sync::Arc::ptr_eq(&store.get_by_key("ns/a").unwrap(), &newer));
}
