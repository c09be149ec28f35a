//! The benchmark object: a k8s-openapi `ConfigMap` with only metadata set, identical to
//! `object(i, rv)` of the side-by-side driver (`xtask/bench-go`, `xtask/bench-rs`): namespace
//! `ns-<i mod 100>`, name `cm-<i>`, resourceVersion `rv`, labels app=`app-<i mod 1000>`,
//! shard=`shard-<i mod 10000>`, tier=`tier-<i mod 3>`. Shared by the store and FIFO benches.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

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

/// N for a bench: 100k, or 20k with `KCACHE_BENCH_QUICK` set, or 1000 when
/// `cargo test --all-targets` runs the bench binary as a smoke test (without `--bench`).
pub fn bench_n() -> usize {
    if !std::env::args().any(|a| a == "--bench") {
        1_000
    } else if std::env::var_os("KCACHE_BENCH_QUICK").is_some() {
        20_000
    } else {
        100_000
    }
}
