//! The benchmark object, shared by the store and FIFO benches: a k8s-openapi `ConfigMap` with only
//! metadata set, identical to `object(i, rv)` of the side-by-side driver (`xtask/bench-go`,
//! `xtask/bench-rs`): namespace `ns-<i mod 100>`, name `cm-<i>`, resourceVersion `rv`, labels
//! app=`app-<i mod 1000>`, shard=`shard-<i mod 10000>`, tier=`tier-<i mod 3>`.
#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kcache_store::{IndexFunc, Indexers, NAMESPACE_INDEX, Store, index_func, meta_namespace_index_func};

/// Object `i` at resource version `rv`.
pub fn object(i: usize, rv: usize) -> Arc<ConfigMap> {
    let labels: BTreeMap<String, String> = [
        ("app".to_owned(), format!("app-{}", i % 1000)),
        ("shard".to_owned(), format!("shard-{}", i % 10000)),
        ("tier".to_owned(), format!("tier-{}", i % 3)),
    ]
    .into();
    Arc::new(ConfigMap {
        metadata: ObjectMeta {
            namespace: Some(format!("ns-{}", i % 100)),
            name: Some(format!("cm-{i}")),
            resource_version: Some(rv.to_string()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    })
}

/// `object(i, base + i + 1)` for i in 0..n.
pub fn list(n: usize, base: usize) -> Vec<Arc<ConfigMap>> {
    (0..n).map(|i| object(i, base + i + 1)).collect()
}

/// An index over the value of one label.
pub fn label_index(label: &'static str) -> IndexFunc<ConfigMap> {
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

/// The three indexers of the store benches: namespace (100 values), app (1000), shard (10000).
pub fn three_indexers() -> Indexers<ConfigMap> {
    [
        (NAMESPACE_INDEX.to_owned(), meta_namespace_index_func::<ConfigMap>()),
        ("app".to_owned(), label_index("app")),
        ("shard".to_owned(), label_index("shard")),
    ]
    .into()
}

/// A store keyed like client-go's `MetaNamespaceKeyFunc` with [`three_indexers`].
pub fn store_with_three_indexers() -> Store<ConfigMap> {
    Store::with_indexers(kcache_store::meta_namespace_key_func::<ConfigMap>(), three_indexers())
}

/// N: 100k, or 20k with `KCACHE_BENCH_QUICK` set, or 1000 when `cargo test --all-targets` runs
/// the bench binary as a smoke test (without `--bench`).
pub fn n() -> usize {
    if !std::env::args().any(|a| a == "--bench") {
        1_000
    } else if std::env::var_os("KCACHE_BENCH_QUICK").is_some() {
        20_000
    } else {
        100_000
    }
}
