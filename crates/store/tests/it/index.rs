//! The scenarios of client-go's `tools/cache/index_test.go` (`TestGetIndexFuncValues`,
//! `TestMultiIndexKeys`), rewritten for `kcache_store::Store`.

use crate::common;

use common::*;
use kcache_store::{KeyError, Store, StoreError, index_func, index_func_to_key_func};

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
    // A value no object has: an empty answer, not an error.
    assert!(keys("elmo1").is_empty());
    assert!(store.by_index("by_user", "elmo1").unwrap().is_empty());
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

/// Index sets change representation with their size (one object, a short list, a hash set):
/// every size around the bounds answers the same, whether the set was built by `replace`,
/// `add_indexers` or one `add` at a time, and shrinks back through `update` and `delete`.
#[test]
fn sets_of_every_size_across_representations() {
    let name = |i: usize| format!("o{i:03}");
    let expected = |range: std::ops::Range<usize>| sorted(range.map(name).collect());
    for n in [1, 2, 3, 15, 16, 17, 18, 33, 100] {
        // Objects 0..n share "v" (twice over: duplicate values count once); object i also has
        // a value of its own.
        let objs: Vec<_> = (0..n).map(|i| obj("", &name(i), &["v", &name(i), "v"])).collect();
        let replaced = store_with(&[("by_val", vals_index())]);
        replaced.replace(objs.clone(), "1").unwrap();
        let added = store_with(&[("by_val", vals_index())]);
        let late = store_with(&[]);
        for o in &objs {
            added.add(o.clone()).unwrap();
            late.add(o.clone()).unwrap();
        }
        late.add_indexers([("by_val".to_string(), vals_index())].into()).unwrap();
        for store in [&replaced, &added, &late] {
            assert_eq!(sorted_names(store.by_index("by_val", "v").unwrap()), expected(0..n), "n={n}");
            assert_eq!(store.index_keys("by_val", "v").unwrap().len(), n);
            assert_eq!(sorted_names(store.by_index("by_val", &name(n - 1)).unwrap()), [name(n - 1)]);
            // Grow by two, re-adding (a no-op for the set) along the way.
            store.add(obj("", &name(n), &["v"])).unwrap();
            store.add(obj("", &name(n + 1), &["v"])).unwrap();
            store.update(obj("", &name(n + 1), &["v"])).unwrap();
            assert_eq!(sorted_names(store.by_index("by_val", "v").unwrap()), expected(0..n + 2), "n={n}");
            // Shrink to nothing, from both ends, checking the set at each step.
            let mut left: Vec<usize> = (0..n + 2).collect();
            while !left.is_empty() {
                let i = if left.len().is_multiple_of(2) { left.remove(0) } else { left.pop().unwrap() };
                if i.is_multiple_of(3) {
                    store.update(obj("", &name(i), &["w"])).unwrap();
                } else {
                    store.delete_by_key(&name(i)).unwrap();
                }
                let want = sorted(left.iter().map(|&i| name(i)).collect());
                assert_eq!(sorted_names(store.by_index("by_val", "v").unwrap()), want, "n={n}");
            }
            assert!(store.by_index("by_val", "v").unwrap().is_empty());
            assert!(!store.list_index_func_values("by_val").contains(&"v".to_string()));
        }
    }
}

/// Mirrors client-go's `IndexFuncToKeyFuncAdapter` (`index.go`): the single value of an index
/// function becomes the key; several values ("too many keys"), none ("unexpected empty
/// indexKeys") and the index function's own error are key errors.
#[test]
fn index_func_to_key_func_adapter() {
    let kf = index_func_to_key_func(index_func(|o: &Obj| {
        if o.name == "bad" { Err("bad object".into()) } else { Ok(o.vals.clone()) }
    }));
    assert_eq!(kf(&obj("ns", "a", &["only"])).unwrap(), "only");
    let err = kf(&obj("ns", "a", &["x", "y"])).unwrap_err();
    assert!(matches!(&err, KeyError::TooManyKeys { keys } if keys == &["x", "y"]), "{err:?}");
    assert_eq!(err.to_string(), r#"too many keys: ["x", "y"]"#);
    let err = kf(&obj("ns", "a", &[])).unwrap_err();
    assert!(matches!(err, KeyError::EmptyIndexKeys), "{err:?}");
    assert_eq!(err.to_string(), "unexpected empty indexKeys");
    let err = kf(&obj("ns", "bad", &["x"])).unwrap_err();
    assert!(matches!(&err, KeyError::Custom(source) if source.to_string() == "bad object"), "{err:?}");

    // As a store's key function.
    let store = Store::new(kf);
    store.add(obj("ns", "a", &["k1"])).unwrap();
    assert_eq!(store.get_by_key("k1").unwrap().name, "a");
    assert!(matches!(
        store.add(obj("ns", "b", &["k1", "k2"])),
        Err(StoreError::Key(KeyError::TooManyKeys { .. }))
    ));
    assert_eq!(store.len(), 1);
}
