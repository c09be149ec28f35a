//! Property test: the store's indices against a model that recomputes every index from the item
//! map after each step (the definition of an index in client-go's `index.go`), under random
//! add/update/delete/replace sequences, including objects whose index function fails.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};

use common::*;
use kcache_store::CacheRepr;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Add(usize, Vec<usize>),
    Delete(usize),
    Replace(Vec<(usize, Vec<usize>)>),
}

const NAMES: [&str; 5] = ["a", "b", "c", "d", "bad"];
const VALS: [&str; 4] = ["v0", "v1", "v2", "v3"];

fn op() -> impl Strategy<Value = Op> {
    let vals = proptest::collection::vec(0..VALS.len(), 0..3);
    prop_oneof![
        4 => (0..NAMES.len(), vals.clone()).prop_map(|(n, v)| Op::Add(n, v)),
        2 => (0..NAMES.len()).prop_map(Op::Delete),
        1 => proptest::collection::vec((0..NAMES.len(), vals), 0..5).prop_map(Op::Replace),
    ]
}

fn object(n: usize, vals: &[usize]) -> std::sync::Arc<Obj> {
    let vals: Vec<&str> = vals.iter().map(|v| VALS[*v]).collect();
    obj("ns", NAMES[n], &vals)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// After every step, `by_index`, `index_keys` and `list_index_func_values` equal what the
    /// model derives from its items; a failing index function ("bad" objects) changes nothing.
    #[test]
    fn indices_match_model(ops in proptest::collection::vec(op(), 0..40)) {
        check_model(ops, CacheRepr::Objects)?;
    }

    /// The same on a store that keeps its objects serialized (`CacheRepr::Serialized`): every
    /// read decodes, and each object read equals the one the model holds.
    #[test]
    fn serialized_indices_match_model(ops in proptest::collection::vec(op(), 0..40)) {
        check_model(ops, CacheRepr::Serialized)?;
    }

    /// And compressed (`CacheRepr::Compressed`, feature `zstd`).
    #[cfg(feature = "zstd")]
    #[test]
    fn compressed_indices_match_model(ops in proptest::collection::vec(op(), 0..40)) {
        check_model(ops, CacheRepr::Compressed)?;
    }
}

fn check_model(ops: Vec<Op>, repr: CacheRepr) -> Result<(), TestCaseError> {
    let store = store_with(&[("by_val", vals_index()), ("failing", failing_index())]);
    store.set_representation(repr).unwrap();
    let mut model: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for op in ops {
        match &op {
            Op::Add(n, v) => {
                let o = object(*n, v);
                let r = store.add(o.clone());
                if NAMES[*n] == "bad" {
                    prop_assert!(r.is_err());
                } else {
                    r.unwrap();
                    model.insert(format!("ns/{}", NAMES[*n]), o.vals.clone());
                }
            }
            Op::Delete(n) => {
                store.delete_by_key(&format!("ns/{}", NAMES[*n])).unwrap();
                model.remove(&format!("ns/{}", NAMES[*n]));
            }
            Op::Replace(list) => {
                let objs: Vec<_> = list.iter().map(|(n, v)| object(*n, v)).collect();
                let r = store.replace(objs.clone(), "1");
                if list.iter().any(|(n, _)| NAMES[*n] == "bad") {
                    prop_assert!(r.is_err());
                } else {
                    r.unwrap();
                    model = objs.iter().map(|o| (format!("ns/{}", o.name), o.vals.clone())).collect();
                }
            }
        }
        prop_assert_eq!(sorted_keys(&store), model.keys().cloned().collect::<Vec<_>>());
        let values: BTreeSet<String> = model.values().flatten().cloned().collect();
        prop_assert_eq!(
            sorted(store.list_index_func_values("by_val")),
            values.iter().cloned().collect::<Vec<_>>()
        );
        for v in VALS {
            let expected: Vec<String> = model
                .iter()
                .filter(|(_, vals)| vals.iter().any(|x| x == v))
                .map(|(k, _)| k.clone())
                .collect();
            let by_index: Vec<String> = sorted(
                store.by_index("by_val", v).unwrap().iter().map(|o| format!("ns/{}", o.name)).collect(),
            );
            prop_assert_eq!(&by_index, &expected, "by_index {} after {:?}", v, op);
            let keys: Vec<String> =
                sorted(store.index_keys("by_val", v).unwrap().iter().map(|k| k.to_string()).collect());
            prop_assert_eq!(&keys, &expected, "index_keys {} after {:?}", v, op);
        }
        prop_assert_eq!(store.by_index("failing", "ns").unwrap().len(), model.len());
        for (key, vals) in &model {
            let got = store.get_by_key(key);
            let got = got.map(|o| o.vals.clone());
            prop_assert_eq!(got.as_ref(), Some(vals), "get_by_key {}", key);
        }
    }
    Ok(())
}
