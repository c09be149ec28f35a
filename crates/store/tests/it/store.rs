//! The `Store` scenarios of client-go's `tools/cache/store_test.go` (`doTestStore`,
//! `doTestIndex`, `TestCache`), rewritten for `kcache_store::Store`.

use crate::common;

use std::sync::Arc;

use common::*;
use kcache_store::{IndexError, KeyError, ReflectorStore, Store, StoreError};

/// Mirrors `doTestStore` via `TestCache`: add, update, get, delete, list and replace.
#[test]
fn store_basic_operations() {
    let store = Store::new(key_fn());
    store.add(obj("", "foo", &["bar"])).unwrap();
    assert_eq!(store.get_by_key("foo").unwrap().vals, ["bar"]);

    store.update(obj("", "foo", &["baz"])).unwrap();
    assert_eq!(store.get_by_key("foo").unwrap().vals, ["baz"]);
    assert_eq!(store.get(&obj("", "foo", &[])).unwrap().unwrap().vals, ["baz"]);

    store.delete(&obj("", "foo", &[])).unwrap();
    assert!(store.get_by_key("foo").is_none());
    assert!(store.is_empty());

    // List returns every object.
    store.add(obj("", "a", &["b"])).unwrap();
    store.add(obj("", "c", &["d"])).unwrap();
    store.add(obj("", "e", &["e"])).unwrap();
    assert_eq!(sorted_names(store.list()), ["a", "c", "e"]);
    assert_eq!(sorted_keys(&store), ["a", "c", "e"]);

    // Replace drops what is not listed.
    store.replace(vec![obj("", "foo", &["foo"]), obj("", "bar", &["bar"])], "0").unwrap();
    assert_eq!(sorted_keys(&store), ["bar", "foo"]);
    assert_eq!(store.last_sync_resource_version(), "0");
}

/// Mirrors `doTestStore`'s "update on a missing key inserts it" behaviour of client-go's
/// `threadSafeMap.Update`.
#[test]
fn update_inserts_missing_key() {
    let store = Store::new(key_fn());
    store.update(obj("ns", "x", &[])).unwrap();
    assert!(store.contains_key("ns/x"));
}

/// Mirrors `doTestStore`: deleting a key that is not stored is not an error.
#[test]
fn delete_missing_is_noop() {
    let store = Store::new(key_fn());
    assert!(store.delete(&obj("", "nope", &[])).unwrap().is_none());
    assert!(store.delete_by_key("nope").unwrap().is_none());
}

/// Mirrors `doTestIndex` via `TestIndex`: an index with several values per object, then `Index`
/// by an object.
#[test]
fn index_by_object_with_multiple_values() {
    let store = store_with(&[("by_val", vals_index())]);
    let expected = [("b", vec!["a", "c", "e"]), ("f", vec!["e"]), ("h", vec!["g"])];
    store.add(obj("", "a", &["b"])).unwrap();
    store.add(obj("", "c", &["b"])).unwrap();
    store.add(obj("", "e", &["f", "b"])).unwrap();
    store.add(obj("", "g", &["h"])).unwrap();
    for (val, names) in expected {
        let found =
            store.index("by_val", &Obj { ns: String::new(), name: "q".into(), vals: vec![val.into()] });
        assert_eq!(sorted_names(found.unwrap()), names, "value {val}");
    }
    // An object with two values gets the union, each object once.
    let probe = Obj { ns: String::new(), name: "q".into(), vals: vec!["b".into(), "f".into()] };
    assert_eq!(sorted_names(store.index("by_val", &probe).unwrap()), ["a", "c", "e"]);
}

/// Mirrors `TestCache`'s key-error path: a failing key function is an error, not a panic, and
/// stores nothing.
#[test]
fn key_error_is_returned() {
    let store: Store<Obj> = Store::new(kcache_store::key_func(|_: &Obj| Err(KeyError::MissingName)));
    assert!(matches!(store.add(obj("", "a", &[])), Err(StoreError::Key(KeyError::MissingName))));
    assert!(store.get(&obj("", "a", &[])).is_err());
    assert!(store.is_empty());
}

/// Replace with the same key twice keeps the later object (Go's map assignment order).
#[test]
fn replace_duplicate_keys_later_wins() {
    let store = store_with(&[("by_val", vals_index())]);
    store.replace(vec![obj("", "a", &["1"]), obj("", "a", &["2"])], "7").unwrap();
    assert_eq!(store.len(), 1);
    assert_eq!(store.get_by_key("a").unwrap().vals, ["2"]);
    assert!(store.by_index("by_val", "1").unwrap().is_empty());
    assert_eq!(store.by_index("by_val", "2").unwrap().len(), 1);
}

/// Only the objects that win their key count: an index function failing on an object displaced
/// by a later one with the same key does not fail the replace.
#[test]
fn replace_ignores_index_errors_of_displaced_objects() {
    let picky =
        kcache_store::index_func(
            |o: &Obj| if o.vals == ["boom"] { Err("boom".into()) } else { Ok(o.vals.clone()) },
        );
    let store = store_with(&[("picky", picky)]);
    store.replace(vec![obj("", "a", &["boom"]), obj("", "b", &["1"]), obj("", "a", &["2"])], "7").unwrap();
    assert_eq!(sorted_keys(&store), ["a", "b"]);
    assert_eq!(sorted_names(store.by_index("picky", "2").unwrap()), ["a"]);
    assert_eq!(sorted_names(store.by_index("picky", "1").unwrap()), ["b"]);
    assert!(store.list_index_func_values("picky").iter().all(|v| v != "boom"));
}

/// A key error anywhere in the list is reported before an index error on an earlier object, and
/// either leaves the store as it was.
#[test]
fn replace_reports_key_errors_before_index_errors() {
    let kf = kcache_store::key_func(|o: &Obj| {
        if o.name.is_empty() {
            Err(KeyError::MissingName)
        } else {
            Ok(kcache_store::meta_namespace_key(&o.ns, &o.name))
        }
    });
    let store = Store::with_indexers(kf, [("failing".to_string(), failing_index())].into());
    store.add(obj("ns", "a", &[])).unwrap();
    let r = store.replace(vec![obj("ns", "bad", &[]), obj("ns", "", &[])], "3");
    assert!(matches!(r, Err(StoreError::Key(KeyError::MissingName))), "{r:?}");
    let r = store.replace(vec![obj("ns", "b", &[]), obj("ns", "bad", &[])], "3");
    assert!(matches!(r, Err(StoreError::Index(_))), "{r:?}");
    assert_eq!(sorted_keys(&store), ["ns/a"]);
    assert_eq!(store.last_sync_resource_version(), "");
}

/// The reflector-facing trait behaves like the inherent methods; `resync` is a no-op and
/// bookmarks move the resource version.
#[test]
fn reflector_store_trait() {
    let store = Store::new(key_fn());
    let w: Arc<dyn ReflectorStore<Obj>> = Arc::new(store.clone());
    w.add(obj("ns", "a", &[])).unwrap();
    w.update(obj("ns", "a", &["v"])).unwrap();
    w.add(obj("ns", "b", &[])).unwrap();
    w.delete(obj("ns", "b", &[])).unwrap();
    w.resync().unwrap();
    assert_eq!(sorted_keys(&store), ["ns/a"]);
    w.replace(vec![obj("ns", "c", &[])], "10").unwrap();
    assert_eq!(sorted_keys(&store), ["ns/c"]);
    assert_eq!(store.last_sync_resource_version(), "10");
    w.update_resource_version("12");
    assert_eq!(store.last_sync_resource_version(), "12");
}

/// `by_index` on an unknown index is an error naming the index.
#[test]
fn unknown_index_is_an_error() {
    let store = Store::new(key_fn());
    let err = store.by_index("nope", "x").unwrap_err();
    assert!(matches!(&err, IndexError::NoSuchIndex { name } if name == "nope"));
    assert_eq!(err.to_string(), "index with name nope does not exist");
    assert!(store.index_keys("nope", "x").is_err());
    assert!(store.list_index_func_values("nope").is_empty());
}

/// Clones of a store are handles to the same contents.
#[test]
fn clones_share_contents() {
    let a = Store::new(key_fn());
    let b = a.clone();
    a.add(obj("", "x", &[])).unwrap();
    assert!(b.contains_key("x"));
    // List hands out the same allocation, not a copy.
    let stored = a.get_by_key("x").unwrap();
    assert!(Arc::ptr_eq(&stored, &b.list()[0]));
}

/// `insert_with_key` (what an informer does with each popped delta, using the FIFO's key): it
/// inserts, then replaces and returns the old object, moves the object between index values, keeps
/// the caller's key allocation for a new entry, and leaves the store unchanged when an index
/// function fails. No client-go counterpart: `HandleDeltas` calls `Get` and then `Update`.
#[test]
fn insert_with_key_returns_the_replaced_object_and_keeps_the_key() {
    let store = store_with(&[("by_val", vals_index()), ("picky", failing_index())]);
    let key: Arc<str> = Arc::from("ns/a");
    assert!(store.insert_with_key(Arc::clone(&key), obj("ns", "a", &["1"])).unwrap().is_none());
    assert!(store.list_keys().iter().any(|k| Arc::ptr_eq(k, &key)), "a new entry keeps the given key");
    assert_eq!(store.get(&obj("ns", "a", &[])).unwrap().unwrap().vals, ["1"]);

    let old = store.insert_with_key(Arc::from("ns/a"), obj("ns", "a", &["2"])).unwrap();
    assert_eq!(old.unwrap().vals, ["1"]);
    assert_eq!(store.len(), 1);
    assert!(store.by_index("by_val", "1").unwrap().is_empty());
    assert_eq!(store.by_index("by_val", "2").unwrap()[0].vals, ["2"]);

    // An index function failing on the new object leaves everything as it was.
    assert!(matches!(
        store.insert_with_key(Arc::from("ns/bad"), obj("ns", "bad", &["3"])),
        Err(StoreError::Index(_))
    ));
    assert_eq!(sorted_keys(&store), ["ns/a"]);
    assert!(store.by_index("by_val", "3").unwrap().is_empty());
}

fn keyed(objs: &[Arc<Obj>]) -> Vec<(Arc<str>, Arc<Obj>)> {
    objs.iter().map(|o| (Arc::from(kcache_store::meta_namespace_key(&o.ns, &o.name)), o.clone())).collect()
}

/// `replace_with_keys`, what an informer does with a relist its FIFO popped as one unit; mirrors
/// client-go's `processReplacedAllInfo` (controller.go), which reads each listed object's old
/// version from the store and then `Replace`s the store's contents: the contents become the list
/// (objects missing from it are gone, indices follow), the resource version is recorded, each
/// item gets the object its key held before (both items of a duplicated key, the later one
/// stored), and the given keys are kept.
#[test]
fn replace_with_keys_returns_the_previous_objects() {
    let store = store_with(&[("by_val", vals_index())]);
    store.replace(vec![obj("ns", "a", &["1"]), obj("ns", "gone", &["1"])], "5").unwrap();
    let items = keyed(&[obj("ns", "a", &["2"]), obj("ns", "b", &["1"]), obj("ns", "b", &["3"])]);
    let b_key = Arc::clone(&items[1].0);
    let previous = store.replace_with_keys(items.iter().map(|(k, o)| (k, o)), "9").unwrap();
    let previous: Vec<_> = previous.iter().map(|p| p.as_ref().map(|o| o.vals.clone())).collect();
    assert_eq!(previous, [Some(vec!["1".to_string()]), None, None]);
    assert_eq!(sorted_keys(&store), ["ns/a", "ns/b"]);
    assert_eq!(store.get_by_key("ns/b").unwrap().vals, ["3"]);
    assert_eq!(sorted_names(store.by_index("by_val", "1").unwrap()), Vec::<String>::new());
    assert_eq!(sorted_names(store.by_index("by_val", "2").unwrap()), ["a"]);
    assert_eq!(sorted_names(store.by_index("by_val", "3").unwrap()), ["b"]);
    assert_eq!(store.last_sync_resource_version(), "9");
    assert!(store.list_keys().iter().any(|k| Arc::ptr_eq(k, &b_key)), "the given key is kept");
}

/// An index function failing on any object leaves the contents and resource version as they
/// were (as `replace`).
#[test]
fn replace_with_keys_is_all_or_nothing() {
    let store = store_with(&[("picky", failing_index())]);
    store.replace(vec![obj("ns", "a", &["1"])], "5").unwrap();
    let items = keyed(&[obj("ns", "b", &[]), obj("ns", "bad", &[])]);
    let r = store.replace_with_keys(items.iter().map(|(k, o)| (k, o)), "9");
    assert!(matches!(r, Err(StoreError::Index(_))), "{r:?}");
    assert_eq!(sorted_keys(&store), ["ns/a"]);
    assert_eq!(store.last_sync_resource_version(), "5");
}

/// A key that is not the key function's for the object is a caller's bug; debug builds catch it.
#[cfg(debug_assertions)]
#[test]
#[should_panic(expected = "not the key function's")]
fn insert_with_key_checks_the_key_in_debug_builds() {
    let store = Store::new(key_fn());
    let _ = store.insert_with_key(Arc::from("ns/other"), obj("ns", "a", &[]));
}
