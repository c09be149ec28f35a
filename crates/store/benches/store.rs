//! Store benches: `replace` of N objects into a store with three indexers (twice, as a relist
//! does), `by_index` queries over N objects with three indexers, and `add` of N objects.
//!
//! Object: the `ConfigMap` of `kcache_test_support::objects` (the side-by-side driver's `object(i, rv)`).
//! N = 100k (20k with `KCACHE_BENCH_QUICK=1`). IDs: `store/<scenario>/<N>`.

mod common;

use std::hint::black_box;

use common::*;
use criterion::{BatchSize, BenchmarkId, Criterion, Throughput};
use kcache_store::NAMESPACE_INDEX;

/// Create a store with 3 indexers, `replace(version 1)`, then `replace(version 2)`: 2N objects
/// stored (client-go side: `storeReplace` in `xtask/bench-go/cache.go`).
fn replace(c: &mut Criterion) {
    let n = n();
    let l1 = list(n, 0);
    let l2 = list(n, n);
    let mut g = c.benchmark_group("store");
    g.sample_size(10).throughput(Throughput::Elements(2 * n as u64));
    g.bench_function(BenchmarkId::new("replace_3_indexers", n), |b| {
        b.iter_batched(
            || (l1.clone(), l2.clone()),
            |(l1, l2)| {
                let store = store_with_three_indexers();
                store.replace(l1, "1").unwrap();
                store.replace(l2, "2").unwrap();
                store
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

/// N `by_index` queries over N objects, cycling namespace/app/shard (1000/100/10 results each at
/// N = 100k); client-go side: `storeByIndex`.
fn by_index(c: &mut Criterion) {
    let n = n();
    let store = store_with_three_indexers();
    store.replace(list(n, 0), "1").unwrap();
    let queries: Vec<(&str, String)> = (0..n)
        .map(|q| {
            let j = q / 3;
            match q % 3 {
                0 => (NAMESPACE_INDEX, format!("ns-{}", j % 100)),
                1 => ("app", format!("app-{}", j % 1000)),
                _ => ("shard", format!("shard-{}", j % 10000)),
            }
        })
        .collect();
    let mut g = c.benchmark_group("store");
    g.sample_size(10).throughput(Throughput::Elements(n as u64));
    g.bench_function(BenchmarkId::new("by_index_3_indexers", n), |b| {
        b.iter(|| {
            let mut items = 0;
            for (index, value) in &queries {
                items += store.by_index(index, value).unwrap().len();
            }
            black_box(items)
        })
    });
    g.finish();
}

/// N `add`s into an empty store with 3 indexers.
fn add(c: &mut Criterion) {
    let n = n();
    let l1 = list(n, 0);
    let mut g = c.benchmark_group("store");
    g.sample_size(10).throughput(Throughput::Elements(n as u64));
    g.bench_function(BenchmarkId::new("add_3_indexers", n), |b| {
        b.iter_batched(
            || l1.clone(),
            |l| {
                let store = store_with_three_indexers();
                for o in l {
                    store.add(o).unwrap();
                }
                store
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

// Written out instead of `criterion_group!`, whose generated `pub fn` trips `missing_docs` here.
fn main() {
    let mut c = Criterion::default().configure_from_args();
    replace(&mut c);
    by_index(&mut c);
    add(&mut c);
    c.final_summary();
}
