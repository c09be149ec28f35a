//! Store scenarios on kcache-store, mirroring the store part of `xtask/bench-go/cache.go`
//! (client-go's side: `cache.NewIndexer(MetaNamespaceKeyFunc, 3 indexers)`).

use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kcache_store::{Indexers, NAMESPACE_INDEX, Store, index_func, meta_namespace_index_func};
use serde_json::json;

use super::Outcome;
use crate::measure::Timer;
use crate::workload::object;

/// An index function over the value of one label (no value when the label is absent).
fn label_index(label: &'static str) -> kcache_store::IndexFunc<ConfigMap> {
    index_func(move |cm: &ConfigMap| {
        Ok(cm
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(label))
            .map(|v| vec![v.clone()])
            .unwrap_or_default())
    })
}

/// The store of the store scenarios: `Store` keyed by `meta_namespace_key_func` with three
/// indexers: "namespace" (`meta_namespace_index_func`: 100 values), "app" (label app: 1000
/// values) and "shard" (label shard: 10000 values).
fn new_store() -> Store<ConfigMap> {
    let mut indexers = Indexers::new();
    indexers.insert(NAMESPACE_INDEX.to_owned(), meta_namespace_index_func::<ConfigMap>());
    indexers.insert("app".to_owned(), label_index("app"));
    indexers.insert("shard".to_owned(), label_index("shard"));
    Store::with_indexers(kcache_store::meta_namespace_key_func::<ConfigMap>(), indexers)
}

/// `object(i, base + i + 1)` for i in 0..N, as the `Vec<Arc<_>>` `replace` takes.
fn list(n: usize, base: usize) -> Vec<Arc<ConfigMap>> {
    (0..n).map(|i| Arc::new(object(i, base + i + 1))).collect()
}

fn must<T, E: std::fmt::Display>(r: Result<T, E>) -> T {
    r.unwrap_or_else(|e| panic!("store error: {e}"))
}

/// store_replace: with [`new_store`] (3 indexers) and two lists of the N objects built untimed
/// (version 1: resourceVersion i+1, version 2: N+i+1), timed: create the store,
/// `replace(version 1, "1")`, then `replace(version 2, "2")`. ops = 2N objects stored;
/// `extra.len` = items afterwards (N).
pub(super) fn replace(n: usize, t: &mut Timer) -> Outcome {
    let l1 = list(n, 0);
    let l2 = list(n, n);
    // `replace` takes its list by value: hand it copies of the `Arc`s (made untimed) and keep the
    // originals alive until after the timed section, so replacing version 1 frees no object inside
    // it (the Go side's objects are freed by its GC, whenever that runs).
    let (c1, c2) = (l1.clone(), l2.clone());
    t.start();
    let store = new_store();
    must(store.replace(c1, "1"));
    must(store.replace(c2, "2"));
    t.stop();
    drop((l1, l2));
    Outcome { ops: 2 * n as u64, extra: json!({"len": store.len()}).as_object().cloned().unwrap_or_default() }
}

/// Query `q` of store_by_index: the indexer namespace, app, shard for q mod 3 = 0, 1, 2 and the
/// value `ns-<(q/3) mod 100>`, `app-<(q/3) mod 1000>` or `shard-<(q/3) mod 10000>`.
fn by_index_query(q: usize) -> (&'static str, String) {
    let j = q / 3;
    match q % 3 {
        0 => (NAMESPACE_INDEX, format!("ns-{}", j % 100)),
        1 => ("app", format!("app-{}", j % 1000)),
        _ => ("shard", format!("shard-{}", j % 10000)),
    }
}

/// store_by_index: [`new_store`] filled untimed with `replace(version 1 of the N objects)`; the
/// queries [`by_index_query`]`(q)` for q in 0..N built untimed; timed: `by_index` for each query.
/// With N = 100k a query returns 1000 (namespace), 100 (app) or 10 (shard) objects. ops = N
/// queries; `extra.items` = total objects returned.
pub(super) fn by_index(n: usize, t: &mut Timer) -> Outcome {
    let store = new_store();
    must(store.replace(list(n, 0), "1"));
    let queries: Vec<_> = (0..n).map(by_index_query).collect();
    let mut items = 0usize;
    t.start();
    for (index, value) in &queries {
        items += must(store.by_index(index, value)).len();
    }
    t.stop();
    Outcome { ops: n as u64, extra: json!({"items": items}).as_object().cloned().unwrap_or_default() }
}
