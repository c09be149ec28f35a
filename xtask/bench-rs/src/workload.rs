//! Workload definitions shared by the scenarios, mirroring `xtask/bench-go/common.go` exactly:
//! change both together.
//!
//! * keys: `key(i) = "ns-<i mod 100>/cm-<i>"` (namespace `ns-<i mod 100>`, name `cm-<i>`), built
//!   before the timed section;
//! * random choices: [`SplitMix64`] (`kcache_test_support::rng`, the Go side's `splitMix64`) with the seed
//!   given by each scenario;
//! * objects (FIFO and store scenarios): object `i` at resourceVersion `rv` has only metadata:
//!   namespace `ns-<i mod 100>`, name `cm-<i>`, resourceVersion `rv` (decimal) and three labels
//!   `app=app-<i mod 1000>`, `shard=shard-<i mod 10000>`, `tier=tier-<i mod 3>`; on the Go side a
//!   `*v1.ConfigMap` with only `ObjectMeta` set, on this side a `k8s_openapi` `ConfigMap` with only
//!   `metadata` set ([`object`]).

// The queue, FIFO and store scenarios that use these land with their kcache crates.
#![allow(dead_code)]

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kcache_test_support::rng::SplitMix64;

/// Namespace of object `i`: `ns-<i mod 100>`.
pub(crate) fn object_namespace(i: usize) -> String {
    format!("ns-{}", i % 100)
}

/// Name of object `i`: `cm-<i>`.
pub(crate) fn object_name(i: usize) -> String {
    format!("cm-{i}")
}

/// Queue / store key of item `i`: `ns-<i mod 100>/cm-<i>`.
pub(crate) fn key(i: usize) -> String {
    format!("{}/{}", object_namespace(i), object_name(i))
}

/// `key(0) .. key(n-1)`.
pub(crate) fn keys(n: usize) -> Vec<String> {
    (0..n).map(key).collect()
}

/// Object `i` at resourceVersion `rv`: a `ConfigMap` with only metadata set (namespace, name,
/// resourceVersion, labels app, shard and tier), the Go side's `object(i, rv)`.
pub(crate) fn object(i: usize, rv: usize) -> ConfigMap {
    let labels: BTreeMap<String, String> = [
        ("app".to_owned(), format!("app-{}", i % 1000)),
        ("shard".to_owned(), format!("shard-{}", i % 10000)),
        ("tier".to_owned(), format!("tier-{}", i % 3)),
    ]
    .into();
    ConfigMap {
        metadata: ObjectMeta {
            namespace: Some(object_namespace(i)),
            name: Some(object_name(i)),
            resource_version: Some(rv.to_string()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }
}

/// Delay `i` of the add_after scenario in milliseconds: `1 + (splitmix64(seed 9) mod 1000)`.
pub(crate) fn add_after_delays_ms(n: usize) -> Vec<u64> {
    let mut rng = SplitMix64::new(9);
    (0..n).map(|_| 1 + rng.next_u64() % 1000).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_match_the_go_side() {
        assert_eq!(key(0), "ns-0/cm-0");
        assert_eq!(key(1234), "ns-34/cm-1234");
    }

    #[test]
    fn add_after_delays_match_the_go_side() {
        assert_eq!(add_after_delays_ms(3), [229, 107, 639]);
    }
}
