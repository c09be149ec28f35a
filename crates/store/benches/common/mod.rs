//! The store benches' indexers over the benchmark objects of `kcache_test_support::objects`
//! (the side-by-side driver's `object(i, rv)`), whose `list` and `bench_n` it re-exports.
#![allow(dead_code, unreachable_pub)]

use k8s_openapi::api::core::v1::ConfigMap;
use kcache_store::{IndexFunc, Indexers, NAMESPACE_INDEX, Store, index_func, meta_namespace_index_func};
pub use kcache_test_support::objects::{bench_n as n, list};

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
