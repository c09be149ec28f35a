//! Test fixtures shared by the store's integration tests: a small object type and its key and
//! index functions.
#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;

use kcache_store::{IndexFunc, KeyFunc, Store, index_func, key_func, meta_namespace_key};

/// A stand-in for a Kubernetes object: namespace, name, and some values to index on.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Obj {
    pub ns: String,
    pub name: String,
    pub vals: Vec<String>,
}

pub fn obj(ns: &str, name: &str, vals: &[&str]) -> Arc<Obj> {
    Arc::new(Obj { ns: ns.into(), name: name.into(), vals: vals.iter().map(|s| s.to_string()).collect() })
}

pub fn key_fn() -> KeyFunc<Obj> {
    key_func(|o: &Obj| Ok(meta_namespace_key(&o.ns, &o.name)))
}

pub fn vals_index() -> IndexFunc<Obj> {
    index_func(|o: &Obj| Ok(o.vals.clone()))
}

pub fn ns_index() -> IndexFunc<Obj> {
    index_func(|o: &Obj| Ok(vec![o.ns.clone()]))
}

/// An index function that fails on objects named "bad".
pub fn failing_index() -> IndexFunc<Obj> {
    index_func(|o: &Obj| if o.name == "bad" { Err("bad object".into()) } else { Ok(vec![o.ns.clone()]) })
}

pub fn store_with(indexers: &[(&str, IndexFunc<Obj>)]) -> Store<Obj> {
    Store::with_indexers(key_fn(), indexers.iter().map(|(n, f)| (n.to_string(), f.clone())).collect())
}

pub fn sorted_keys(store: &Store<Obj>) -> Vec<String> {
    let mut keys: Vec<String> = store.list_keys().iter().map(|k| k.to_string()).collect();
    keys.sort();
    keys
}

pub fn sorted_names(objs: Vec<Arc<Obj>>) -> Vec<String> {
    let mut names: Vec<String> = objs.iter().map(|o| o.name.clone()).collect();
    names.sort();
    names
}

pub fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}
