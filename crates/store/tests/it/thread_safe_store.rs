//! The index-maintenance scenarios of client-go's `tools/cache/thread_safe_store_test.go`,
//! rewritten for `kcache_store::Store`, plus the fallible-index-function guarantees client-go does
//! not have (it panics).

use crate::common;

use std::collections::HashMap;

use common::*;
use kcache_store::{IndexError, Indexers, StoreError, index_func};

/// Mirrors `TestThreadSafeStoreDeleteRemovesEmptySetsFromIndex`: deleting the last object with a
/// value removes the value from the index.
#[test]
fn delete_removes_empty_sets_from_index() {
    let store = store_with(&[("by_ns", ns_index())]);
    store.add(obj("ns", "a", &[])).unwrap();
    store.delete_by_key("ns/a").unwrap();
    assert!(store.list_index_func_values("by_ns").is_empty());
    assert!(store.index_keys("by_ns", "ns").unwrap().is_empty());
}

/// Mirrors `TestThreadSafeStoreAddKeepsNonEmptySetPostDeleteFromIndex`: deleting one of several
/// objects keeps the value with the others.
#[test]
fn add_keeps_non_empty_set_post_delete_from_index() {
    let store = store_with(&[("by_ns", ns_index())]);
    store.add(obj("ns", "a", &[])).unwrap();
    store.add(obj("ns", "b", &[])).unwrap();
    store.add(obj("ns", "c", &[])).unwrap();
    store.delete_by_key("ns/b").unwrap();
    assert_eq!(store.list_index_func_values("by_ns"), ["ns"]);
    let keys: Vec<String> = store.index_keys("by_ns", "ns").unwrap().iter().map(|k| k.to_string()).collect();
    assert_eq!(sorted(keys), ["ns/a", "ns/c"]);
    // Down to one, then none.
    store.delete_by_key("ns/a").unwrap();
    assert_eq!(store.index_keys("by_ns", "ns").unwrap().len(), 1);
    store.delete_by_key("ns/c").unwrap();
    assert!(store.list_index_func_values("by_ns").is_empty());
}

/// Mirrors `TestThreadSafeStoreIndexingFunctionsWithMultipleValues`: updates move a key between
/// the sets of several values, and empty sets disappear.
#[test]
fn indexing_functions_with_multiple_values() {
    let store = store_with(&[("by_val", vals_index())]);
    let keys = |v: &str| {
        let mut k: Vec<String> =
            store.index_keys("by_val", v).unwrap().iter().map(|k| k.to_string()).collect();
        k.sort();
        k
    };
    store.add(obj("", "o1", &["foo"])).unwrap();
    store.add(obj("", "o2", &["foo", "bar"])).unwrap();
    store.add(obj("", "o3", &["foo", "bar"])).unwrap();
    assert_eq!(keys("foo"), ["o1", "o2", "o3"]);
    assert_eq!(keys("bar"), ["o2", "o3"]);

    store.update(obj("", "o2", &["foo"])).unwrap();
    assert_eq!(keys("foo"), ["o1", "o2", "o3"]);
    assert_eq!(keys("bar"), ["o3"]);

    store.update(obj("", "o3", &["foo"])).unwrap();
    assert_eq!(keys("foo"), ["o1", "o2", "o3"]);
    assert!(keys("bar").is_empty());
    assert_eq!(store.list_index_func_values("by_val"), ["foo"]);

    store.update(obj("", "o2", &["baz"])).unwrap();
    assert_eq!(keys("foo"), ["o1", "o3"]);
    assert_eq!(keys("baz"), ["o2"]);
}

/// Related to `TestThreadSafeStoreRV`, deliberately not the same: replace and bookmark move the
/// last sync resource version; add/update/delete do not. (Upstream, behind the `AtomicFIFO`
/// gate, `Add`/`Update`/`DeleteWithObject` also record the object's `metadata.resourceVersion`;
/// here objects are opaque, and the informer publishes the reflector's version to the store with
/// `update_resource_version` once its FIFO is drained.)
#[test]
fn resource_version_tracking() {
    let store = store_with(&[]);
    assert_eq!(store.last_sync_resource_version(), "");
    store.replace(vec![obj("", "a", &[])], "5").unwrap();
    store.add(obj("", "b", &[])).unwrap();
    assert_eq!(store.last_sync_resource_version(), "5");
    store.update_resource_version("9");
    assert_eq!(store.last_sync_resource_version(), "9");
    assert_eq!(store.len(), 2);
}

/// client-go's `AddIndexers` indexes the objects already stored.
#[test]
fn add_indexers_indexes_existing_items() {
    let store = store_with(&[]);
    store.add(obj("x", "a", &[])).unwrap();
    store.add(obj("y", "b", &[])).unwrap();
    store.add_indexers([("by_ns".to_string(), ns_index())].into()).unwrap();
    assert_eq!(sorted_names(store.by_index("by_ns", "x").unwrap()), ["a"]);
    assert_eq!(sorted(store.list_index_func_values("by_ns")), ["x", "y"]);
    assert_eq!(store.get_indexers().len(), 1);
    // Later writes keep the new index current.
    store.add(obj("x", "c", &[])).unwrap();
    assert_eq!(sorted_names(store.by_index("by_ns", "x").unwrap()), ["a", "c"]);
}

/// client-go's `AddIndexers` rejects a name that is already registered and adds nothing.
#[test]
fn add_indexers_conflict() {
    let store = store_with(&[("by_ns", ns_index())]);
    let mut more: Indexers<Obj> = HashMap::new();
    more.insert("by_ns".into(), vals_index());
    more.insert("other".into(), vals_index());
    let err = store.add_indexers(more).unwrap_err();
    assert!(matches!(&err, IndexError::Conflict { names } if names == &["by_ns".to_string()]));
    assert!(err.to_string().starts_with("indexer conflict"));
    assert_eq!(store.get_indexers().len(), 1);
}

/// A failing index function on add leaves the store unchanged and returns the error.
#[test]
fn failing_index_on_add_changes_nothing() {
    let store = store_with(&[("by_ns", ns_index()), ("failing", failing_index())]);
    store.add(obj("ns", "good", &[])).unwrap();
    let err = store.add(obj("ns", "bad", &[])).unwrap_err();
    match err {
        StoreError::Index(IndexError::IndexFunc { key, index, source }) => {
            assert_eq!(key, "ns/bad");
            assert_eq!(index, "failing");
            assert_eq!(source.to_string(), "bad object");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(sorted_keys(&store), ["ns/good"]);
    assert_eq!(store.index_keys("by_ns", "ns").unwrap().len(), 1);
}

/// A failing index function on the stored object makes update and delete fail without touching
/// the store.
#[test]
fn failing_index_on_update_and_delete_changes_nothing() {
    // Fails only for objects whose first value is "boom".
    let picky = index_func(|o: &Obj| {
        if o.vals.first().map(String::as_str) == Some("boom") {
            Err("boom".into())
        } else {
            Ok(o.vals.clone())
        }
    });
    let store = store_with(&[("picky", picky)]);
    store.add(obj("", "a", &["v1"])).unwrap();
    // New object fails: old stays.
    assert!(store.update(obj("", "a", &["boom"])).is_err());
    assert_eq!(store.get_by_key("a").unwrap().vals, ["v1"]);
    assert_eq!(store.index_keys("picky", "v1").unwrap().len(), 1);
    // Replace with a failing object keeps the old contents and resource version.
    store.update_resource_version("3");
    assert!(store.replace(vec![obj("", "z", &["ok"]), obj("", "y", &["boom"])], "4").is_err());
    assert_eq!(sorted_keys(&store), ["a"]);
    assert_eq!(store.last_sync_resource_version(), "3");
    assert!(store.index_keys("picky", "ok").unwrap().is_empty());
}

/// `add_indexers` whose function fails on a stored object adds no index.
#[test]
fn failing_add_indexers_adds_nothing() {
    let store = store_with(&[]);
    store.add(obj("ns", "bad", &[])).unwrap();
    assert!(matches!(
        store.add_indexers([("failing".to_string(), failing_index())].into()),
        Err(IndexError::IndexFunc { .. })
    ));
    assert!(store.get_indexers().is_empty());
}

/// Duplicate values from one index function are indexed once and removed cleanly.
#[test]
fn duplicate_index_values() {
    let store = store_with(&[("by_val", vals_index())]);
    store.add(obj("", "a", &["x", "x"])).unwrap();
    assert_eq!(store.by_index("by_val", "x").unwrap().len(), 1);
    store.update(obj("", "a", &["y"])).unwrap();
    assert!(store.list_index_func_values("by_val") == ["y"]);
    store.delete_by_key("a").unwrap();
    assert!(store.list_index_func_values("by_val").is_empty());
}

/// `replace` indexes outside the lock from a snapshot of the index functions; when
/// `add_indexers` lands in between, the new index must still cover the replaced contents.
#[test]
fn replace_racing_add_indexers_indexes_everything() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, OnceLock};

    let handle: Arc<OnceLock<kcache_store::Store<Obj>>> = Arc::new(OnceLock::new());
    let fired = Arc::new(AtomicBool::new(false));
    let (h, f) = (handle.clone(), fired.clone());
    // The first time it runs, this index function registers a second index on the same store,
    // which is exactly the race replace must survive.
    let sneaky = index_func(move |o: &Obj| {
        if !f.swap(true, Ordering::SeqCst) {
            h.get().unwrap().add_indexers([("by_val".to_string(), vals_index())].into()).unwrap();
        }
        Ok(vec![o.ns.clone()])
    });
    let store = store_with(&[("by_ns", sneaky)]);
    let _ = handle.set(store.clone());
    store.replace(vec![obj("x", "a", &["v"]), obj("y", "b", &["v", "w"])], "1").unwrap();
    assert!(fired.load(Ordering::SeqCst));
    assert_eq!(sorted_names(store.by_index("by_val", "v").unwrap()), ["a", "b"]);
    assert_eq!(sorted_names(store.by_index("by_ns", "y").unwrap()), ["b"]);
}

/// Mirrors client-go's `threadSafeMap.IndexKeys`, which returns `sets.List(set)`: the keys sorted,
/// whatever the order the objects were added in and however large the set.
#[test]
fn index_keys_are_sorted() {
    let store = store_with(&[("by_ns", ns_index())]);
    for i in (0..40).rev() {
        store.add(obj("ns", &format!("o{i:02}"), &[])).unwrap();
        let keys: Vec<String> =
            store.index_keys("by_ns", "ns").unwrap().iter().map(|k| k.to_string()).collect();
        assert_eq!(keys, sorted(keys.clone()), "after adding {} objects", 40 - i);
    }
    store.delete_by_key("ns/o05").unwrap();
    let keys: Vec<String> = store.index_keys("by_ns", "ns").unwrap().iter().map(|k| k.to_string()).collect();
    assert_eq!(keys.len(), 39);
    assert_eq!(keys, sorted(keys.clone()));
}

/// Mirrors `TestThreadSafeStoreIndexingFunctionsWithMultipleValues` step by step: an update that
/// adds a value, an add with three values, updates that drop values, and deletes of
/// multi-valued objects, checking each value's key set after every step.
#[test]
fn indexing_functions_with_multiple_values_upstream_sequence() {
    let store = store_with(&[("testIndexer", vals_index())]);
    let check = |expected: &[(&str, &[&str])]| {
        for (value, keys) in expected {
            let got: Vec<String> =
                store.index_keys("testIndexer", value).unwrap().iter().map(|k| k.to_string()).collect();
            assert_eq!(got, *keys, "value {value}");
        }
    };
    store.add(obj("", "key1", &["foo"])).unwrap();
    store.add(obj("", "key2", &["bar"])).unwrap();
    check(&[("foo", &["key1"]), ("bar", &["key2"])]);
    store.update(obj("", "key2", &["foo", "bar"])).unwrap();
    check(&[("foo", &["key1", "key2"]), ("bar", &["key2"])]);
    store.update(obj("", "key1", &["foo", "bar"])).unwrap();
    check(&[("foo", &["key1", "key2"]), ("bar", &["key1", "key2"])]);
    store.add(obj("", "key3", &["foo", "bar", "baz"])).unwrap();
    check(&[("foo", &["key1", "key2", "key3"]), ("bar", &["key1", "key2", "key3"]), ("baz", &["key3"])]);
    store.update(obj("", "key1", &["foo"])).unwrap();
    check(&[("foo", &["key1", "key2", "key3"]), ("bar", &["key2", "key3"]), ("baz", &["key3"])]);
    store.update(obj("", "key2", &["bar"])).unwrap();
    check(&[("foo", &["key1", "key3"]), ("bar", &["key2", "key3"]), ("baz", &["key3"])]);
    store.delete_by_key("key1").unwrap();
    check(&[("foo", &["key3"]), ("bar", &["key2", "key3"]), ("baz", &["key3"])]);
    store.delete_by_key("key3").unwrap();
    check(&[("foo", &[]), ("bar", &["key2"]), ("baz", &[])]);
    assert_eq!(store.list_index_func_values("testIndexer"), ["bar"]);
}

/// client-go's `updateSingleIndex` skips an update whose old and new objects have the same single
/// value (its sets hold keys, so nothing changes). Here sets hold the objects themselves, so the
/// same update must still swap the object: `by_index` and `index` hand out the new object, never
/// the replaced one, whatever the size of the set.
#[test]
fn update_with_unchanged_single_value_serves_the_new_object() {
    for n in [1, 2, 16, 17, 40] {
        let store = store_with(&[("by_ns", ns_index())]);
        for i in 0..n {
            store.add(obj("ns", &format!("o{i}"), &["old"])).unwrap();
        }
        store.update(obj("ns", "o0", &["new"])).unwrap();
        let current = store.get_by_key("ns/o0").unwrap();
        assert_eq!(current.vals, ["new"]);
        let found = store.by_index("by_ns", "ns").unwrap();
        assert_eq!(found.len(), n, "n={n}");
        assert!(found.iter().any(|o| std::sync::Arc::ptr_eq(o, &current)), "n={n}");
        assert!(found.iter().all(|o| o.name != "o0" || o.vals == ["new"]), "n={n}");
        let probe = obj("ns", "probe", &[]);
        assert!(store.index("by_ns", &probe).unwrap().iter().any(|o| std::sync::Arc::ptr_eq(o, &current)));
        assert_eq!(store.list_index_func_values("by_ns"), ["ns"]);
    }
}
