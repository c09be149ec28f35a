//! The scenarios of client-go's `tools/cache/index_test.go` (`TestGetIndexFuncValues`,
//! `TestMultiIndexKeys`), rewritten for `kcache_store::Store`.

mod common;

use common::*;

/// Mirrors `TestGetIndexFuncValues`: the values of an index are exactly the values in use.
#[test]
fn get_index_func_values() {
    let store = store_with(&[("testmodes", vals_index())]);
    store.add(obj("", "one", &["foo", "bar"])).unwrap();
    store.add(obj("", "tre", &["biz", "foo"])).unwrap();
    store.add(obj("", "two", &["foo"])).unwrap();
    assert_eq!(sorted(store.list_index_func_values("testmodes")), ["bar", "biz", "foo"]);
}

/// Mirrors `TestMultiIndexKeys`: `index_keys` and `by_index` across multi-valued objects, through
/// updates and deletes.
#[test]
fn multi_index_keys() {
    let store = store_with(&[("by_user", vals_index())]);
    store.add(obj("", "one", &["ernie", "bert"])).unwrap();
    store.add(obj("", "two", &["bert", "oscar"])).unwrap();
    store.add(obj("", "tre", &["ernie", "elmo"])).unwrap();

    let keys =
        |v: &str| sorted(store.index_keys("by_user", v).unwrap().iter().map(|k| k.to_string()).collect());
    assert_eq!(keys("ernie"), ["one", "tre"]);
    assert_eq!(keys("bert"), ["one", "two"]);
    assert_eq!(keys("elmo"), ["tre"]);
    assert_eq!(keys("oscar"), ["two"]);
    assert_eq!(sorted_names(store.by_index("by_user", "ernie").unwrap()), ["one", "tre"]);

    // "tre" loses "ernie".
    store.update(obj("", "tre", &["elmo"])).unwrap();
    assert_eq!(keys("ernie"), ["one"]);
    assert_eq!(keys("elmo"), ["tre"]);

    // Deleting "one" leaves only "two" under "bert", and nobody under "ernie".
    store.delete(&obj("", "one", &[])).unwrap();
    assert_eq!(keys("bert"), ["two"]);
    assert!(keys("ernie").is_empty());
    assert_eq!(sorted(store.list_index_func_values("by_user")), ["bert", "elmo", "oscar"]);
}

/// Three indices over the same objects stay consistent after a replace.
#[test]
fn replace_rebuilds_every_index() {
    let store = store_with(&[("by_ns", ns_index()), ("by_val", vals_index())]);
    store.add(obj("old", "x", &["gone"])).unwrap();
    store.replace(vec![obj("a", "1", &["v"]), obj("b", "2", &["v", "w"])], "1").unwrap();
    assert_eq!(sorted(store.list_index_func_values("by_ns")), ["a", "b"]);
    assert_eq!(sorted(store.list_index_func_values("by_val")), ["v", "w"]);
    assert_eq!(sorted_names(store.by_index("by_val", "v").unwrap()), ["1", "2"]);
}
