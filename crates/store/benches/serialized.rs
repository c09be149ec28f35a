//! What a serialized store (`CacheRepr::Serialized`) costs on reads and writes, beside the
//! default: `get_by_key` of every key, one `list` of the whole store, `by_index` on the app
//! label (N/1000 results each), and an update of every object, on N objects with the three
//! indexers of the store benches.
//!
//! Object: the `ConfigMap` of `kcache_test_support::objects` (metadata only, about 230 bytes of
//! JSON); a Pod's JSON is about 20 times that and its decode costs in proportion
//! (docs/benchmarks.md gives both). N = 100k (20k with `KCACHE_BENCH_QUICK=1`). IDs:
//! `serialized/<operation>_<objects|serialized>/<N>`.

mod common;

use std::hint::black_box;
use std::sync::Arc;

use common::*;
use criterion::{BatchSize, BenchmarkId, Criterion, Throughput};
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_store::{CacheRepr, Store};

const REPRS: [(&str, CacheRepr); 2] =
    [("objects", CacheRepr::Objects), ("serialized", CacheRepr::Serialized)];

fn filled(n: usize, repr: CacheRepr) -> (Store<ConfigMap>, Vec<Arc<str>>) {
    let store = store_with_three_indexers();
    store.set_representation(repr).unwrap();
    store.replace(list(n, 0), "1").unwrap();
    let keys = store.list_keys();
    (store, keys)
}

fn reads(c: &mut Criterion) {
    let n = n();
    let mut g = c.benchmark_group("serialized");
    g.sample_size(10);
    for (name, repr) in REPRS {
        let (store, keys) = filled(n, repr);
        g.throughput(Throughput::Elements(n as u64));
        g.bench_function(BenchmarkId::new(format!("get_by_key_{name}"), n), |b| {
            b.iter(|| {
                for k in &keys {
                    black_box(store.get_by_key(k));
                }
            })
        });
        g.bench_function(BenchmarkId::new(format!("list_{name}"), n), |b| b.iter(|| black_box(store.list())));
        let apps: Vec<String> = (0..1000).map(|i| format!("app-{i}")).collect();
        g.throughput(Throughput::Elements(1000));
        g.bench_function(BenchmarkId::new(format!("by_index_1000_queries_{name}"), n), |b| {
            b.iter(|| {
                for a in &apps {
                    black_box(store.by_index("app", a).unwrap());
                }
            })
        });
    }
    g.finish();
}

fn updates(c: &mut Criterion) {
    let n = n();
    let next = list(n, n);
    let mut g = c.benchmark_group("serialized");
    g.sample_size(10).throughput(Throughput::Elements(n as u64));
    for (name, repr) in REPRS {
        g.bench_function(BenchmarkId::new(format!("update_{name}"), n), |b| {
            b.iter_batched(
                || filled(n, repr).0,
                |store| {
                    for o in &next {
                        store.update(Arc::clone(o)).unwrap();
                    }
                    store
                },
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();
}

// Written out instead of `criterion_group!`, whose generated `pub fn` trips `missing_docs` here.
fn main() {
    let mut c = Criterion::default().configure_from_args();
    reads(&mut c);
    updates(&mut c);
    c.final_summary();
}
