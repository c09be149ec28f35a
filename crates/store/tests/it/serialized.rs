//! A store that keeps its objects serialized (`CacheRepr::Serialized`, kcache's own: client-go
//! has no such store): the scenarios of client-go's `thread_safe_store_test.go` and
//! `index_test.go` read back through decoding, and the conversion between representations.

use crate::common;

use std::sync::Arc;

use common::*;
use kcache_store::{CacheRepr, Store};

/// The serialized representations this build has (`Compressed` with the feature `zstd`).
fn serialized_reprs() -> Vec<CacheRepr> {
    let mut reprs = vec![CacheRepr::Serialized];
    if cfg!(feature = "zstd") {
        reprs.push(CacheRepr::Compressed);
    }
    reprs
}

fn serialized_store(repr: CacheRepr) -> Store<Obj> {
    let store = store_with(&[("by_val", vals_index()), ("ns", ns_index())]);
    store.set_representation(repr).unwrap();
    store
}

/// client-go's `TestThreadSafeStoreIndexingFunctionsWithMultipleValues` on a serialized store:
/// adds, updates that move an object between index values, deletes; every read (get, list,
/// by_index, index, index_keys) decodes an object equal to the one written, in a new
/// allocation, and writes return the object they replaced.
#[test]
fn serialized_store_reads_what_was_written() {
    for repr in serialized_reprs() {
        reads_what_was_written(repr);
    }
}

fn reads_what_was_written(repr: CacheRepr) {
    let store = serialized_store(repr);
    assert_eq!(store.representation(), repr);
    let a = obj("ns", "a", &["x", "y"]);
    store.add(Arc::clone(&a)).unwrap();
    store.add(obj("ns", "b", &["y"])).unwrap();
    store.add(obj("other", "c", &["z"])).unwrap();

    let got = store.get_by_key("ns/a").unwrap();
    assert_eq!(got, a);
    assert!(!Arc::ptr_eq(&got, &a), "a serialized store decodes a new object on each read");
    assert_eq!(store.get(&a).unwrap().as_deref(), Some(&*a));
    assert_eq!(sorted_names(store.list()), ["a", "b", "c"]);
    assert_eq!(sorted_names(store.by_index("by_val", "y").unwrap()), ["a", "b"]);
    assert_eq!(sorted_names(store.index("by_val", &obj("q", "q", &["x", "z"])).unwrap()), ["a", "c"]);
    assert_eq!(store.index_keys("by_val", "y").unwrap(), [Arc::from("ns/a"), Arc::from("ns/b")]);
    assert_eq!(sorted(store.list_index_func_values("ns")), ["ns", "other"]);

    // An update returns the old object and moves the index entries.
    let old = store.insert_with_key(Arc::from("ns/a"), obj("ns", "a", &["z"])).unwrap();
    assert_eq!(old, Some(a));
    assert_eq!(sorted_names(store.by_index("by_val", "y").unwrap()), ["b"]);
    assert_eq!(sorted_names(store.by_index("by_val", "z").unwrap()), ["a", "c"]);
    assert!(store.by_index("by_val", "x").unwrap().is_empty());

    let deleted = store.delete_by_key("ns/b").unwrap();
    assert_eq!(deleted, Some(obj("ns", "b", &["y"])));
    assert!(store.list_index_func_values("by_val").iter().all(|v| v != "y"), "empty index sets are dropped");
    assert_eq!(sorted_keys(&store), ["ns/a", "other/c"]);
}

/// client-go's `Replace` (`TestThreadSafeStoreReplace` shape) on a serialized store, through
/// `replace_with_keys`, which returns the objects the keys held before (decoded from the
/// contents swapped out), as an informer's atomic relist needs for its update notifications.
#[test]
fn serialized_replace_returns_previous_objects() {
    for repr in serialized_reprs() {
        replace_returns_previous_objects(repr);
    }
}

fn replace_returns_previous_objects(repr: CacheRepr) {
    let store = serialized_store(repr);
    store.add(obj("ns", "a", &["x"])).unwrap();
    store.add(obj("ns", "gone", &["x"])).unwrap();
    let list: Vec<(Arc<str>, Arc<Obj>)> =
        vec![(Arc::from("ns/a"), obj("ns", "a", &["y"])), (Arc::from("ns/b"), obj("ns", "b", &["x"]))];
    let previous = store.replace_with_keys(list.iter().map(|(k, o)| (k, o)), "7").unwrap();
    assert_eq!(previous, [Some(obj("ns", "a", &["x"])), None]);
    assert_eq!(sorted_keys(&store), ["ns/a", "ns/b"]);
    assert_eq!(sorted_names(store.by_index("by_val", "x").unwrap()), ["b"]);
    assert_eq!(store.last_sync_resource_version(), "7");

    store.replace(vec![obj("ns", "c", &["x"])], "8").unwrap();
    assert_eq!(sorted_keys(&store), ["ns/c"]);
    assert_eq!(store.by_index("by_val", "x").unwrap(), [obj("ns", "c", &["x"])]);
}

/// Changing the representation of a store that holds objects converts them: the contents,
/// the indices (also ones added later, client-go's `AddIndexers` after adds) and the resource
/// version read the same before and after, in both directions.
#[test]
fn set_representation_converts_the_contents() {
    let store = store_with(&[("by_val", vals_index())]);
    store.replace(vec![obj("ns", "a", &["x"]), obj("ns", "b", &["x", "y"])], "5").unwrap();
    let before = sorted_names(store.by_index("by_val", "x").unwrap());
    store.set_representation(CacheRepr::Serialized).unwrap();
    assert_eq!(store.representation(), CacheRepr::Serialized);
    if cfg!(feature = "zstd") {
        // Between the serialized forms too.
        store.set_representation(CacheRepr::Compressed).unwrap();
        assert_eq!(store.representation(), CacheRepr::Compressed);
        assert_eq!(sorted_names(store.by_index("by_val", "x").unwrap()), before);
    }
    assert_eq!(sorted_names(store.by_index("by_val", "x").unwrap()), before);
    assert_eq!(store.last_sync_resource_version(), "5");
    store.add_indexers([("ns".to_string(), ns_index())].into()).unwrap();
    assert_eq!(sorted_names(store.by_index("ns", "ns").unwrap()), ["a", "b"]);

    store.set_representation(CacheRepr::Objects).unwrap();
    assert_eq!(store.representation(), CacheRepr::Objects);
    let a = store.get_by_key("ns/a").unwrap();
    assert!(Arc::ptr_eq(&a, &store.get_by_key("ns/a").unwrap()), "objects are shared again");
    assert_eq!(sorted_names(store.by_index("by_val", "y").unwrap()), ["b"]);
    assert_eq!(sorted_names(store.by_index("ns", "ns").unwrap()), ["a", "b"]);
}

/// A failing index function leaves a serialized store unchanged, as client-go's store (which
/// panics instead) never half-applies a write.
#[test]
fn serialized_store_unchanged_when_an_index_function_fails() {
    let store = store_with(&[("failing", failing_index())]);
    store.set_representation(CacheRepr::Serialized).unwrap();
    store.add(obj("ns", "a", &[])).unwrap();
    assert!(store.add(obj("ns", "bad", &[])).is_err());
    assert!(store.replace(vec![obj("ns", "bad", &[])], "2").is_err());
    assert_eq!(sorted_keys(&store), ["ns/a"]);
    assert_eq!(store.by_index("failing", "ns").unwrap(), [obj("ns", "a", &[])]);
}

/// Without the feature `zstd`, asking for `CacheRepr::Compressed` is an error the caller can
/// match, and the store keeps its representation.
#[cfg(not(feature = "zstd"))]
#[test]
fn compressed_needs_the_zstd_feature() {
    let store = store_with(&[]);
    assert!(matches!(
        store.set_representation(CacheRepr::Compressed),
        Err(kcache_store::StoreError::Unsupported { representation: CacheRepr::Compressed })
    ));
    assert_eq!(store.representation(), CacheRepr::Objects);
}
