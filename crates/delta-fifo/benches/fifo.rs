//! FIFO benches.
//!
//! * `add_pop`: N keys x 5 versions (one add, four updates, round by round) pushed through the
//!   FIFO, then popped until empty; the process function counts the deltas and sums the newest
//!   resourceVersion (client-go side: `deltaFIFO` / `realFIFO` in `xtask/bench-go/cache.go`).
//!   Throughput = 5N events.
//! * `replace`: a relist of N objects against a known store (the informer's indexer) of N
//!   objects: all listed (`replace_all_listed`), or half of them gone, so N/2 tombstones
//!   (`replace_half_deleted`). Timed: build the FIFO and `replace`; dropping it is not timed.
//!   The in-order FIFO here is without atomic events (`real_fifo_*`: one delta per object
//!   queued, tombstones computed by `replace`); `real_fifo_atomic_*` is the default, which
//!   queues the list as one item and computes the tombstones when it is popped.
//! * `relist`: the same relists, replaced and then popped until empty with a process function
//!   that counts the deltas, so the atomic FIFO's deferred work is timed too:
//!   `real_fifo_<scenario>` pops N (+ N/2 tombstones) deltas one at a time, `real_fifo_atomic_`
//!   `<scenario>` pops them all at once.
//!
//! Object: the `ConfigMap` of `kcache_test_support::objects` (the side-by-side driver's
//! `object(i, rv)`). N = 100k (20k with `KCACHE_BENCH_QUICK=1`). IDs: `<fifo>/<scenario>/<N>`.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput};
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_delta_fifo::{DeltaFifo, DeltaFifoOptions, Deltas, Fifo, RealFifo, RealFifoOptions};
use kcache_store::{KnownObjects, Store, meta_namespace_key_func};
use kcache_test_support::objects::{bench_n as n, list};

const VERSIONS: usize = 5;

fn rv(o: &ConfigMap) -> u64 {
    o.metadata.resource_version.as_deref().unwrap_or("0").parse().unwrap_or(0)
}

fn versions(n: usize) -> Vec<Vec<Arc<ConfigMap>>> {
    (0..VERSIONS).map(|r| list(n, r * n)).collect()
}

fn delta_fifo(known: Arc<dyn KnownObjects<ConfigMap>>) -> DeltaFifo<ConfigMap> {
    DeltaFifo::new(
        DeltaFifoOptions::new(meta_namespace_key_func()).known_objects(known).emit_delta_type_replaced(true),
    )
}

/// The in-order FIFO as informers use it (atomic events on).
fn real_fifo(known: Arc<dyn KnownObjects<ConfigMap>>) -> RealFifo<ConfigMap> {
    RealFifo::new(RealFifoOptions::new(meta_namespace_key_func(), known))
}

/// The in-order FIFO without atomic events (client-go 1.33).
fn real_fifo_per_delta(known: Arc<dyn KnownObjects<ConfigMap>>) -> RealFifo<ConfigMap> {
    RealFifo::new(RealFifoOptions::new(meta_namespace_key_func(), known).atomic_events(false))
}

/// Builds an in-order FIFO over known objects.
type MakeFifo = fn(Arc<dyn KnownObjects<ConfigMap>>) -> RealFifo<ConfigMap>;

/// Pops until empty; returns the number of deltas popped.
fn drain(f: &RealFifo<ConfigMap>) -> usize {
    let mut deltas = 0;
    while !f.is_empty() {
        f.pop_blocking(|d: Deltas<ConfigMap>, _| {
            deltas += d.len();
            Ok::<_, std::convert::Infallible>(())
        })
        .unwrap();
    }
    deltas
}

fn push_pop<F: Fifo<ConfigMap>>(f: &F, objs: Vec<Vec<Arc<ConfigMap>>>) -> (usize, u64) {
    for (r, round) in objs.into_iter().enumerate() {
        for o in round {
            if r == 0 { f.add(o) } else { f.update(o) }.unwrap();
        }
    }
    let (mut deltas, mut sum) = (0usize, 0u64);
    while !f.is_empty() {
        f.pop_blocking(&mut |d: Deltas<ConfigMap>, _| {
            deltas += d.len();
            sum += d.newest().map_or(0, |d| rv(d.obj()));
            Ok(())
        })
        .unwrap();
    }
    (deltas, sum)
}

fn add_pop(c: &mut Criterion) {
    let n = n();
    let objs = versions(n);
    let mut g = c.benchmark_group("add_pop");
    g.sample_size(10).throughput(Throughput::Elements((VERSIONS * n) as u64));
    g.bench_function(BenchmarkId::new("delta_fifo", n), |b| {
        b.iter_batched(
            || objs.clone(),
            |objs| {
                let known: Arc<dyn KnownObjects<ConfigMap>> = Arc::new(Store::<ConfigMap>::for_resource());
                let f = delta_fifo(known);
                let r = push_pop(&f, objs);
                assert_eq!(r.0, VERSIONS * n);
                black_box(r)
            },
            BatchSize::PerIteration,
        )
    });
    g.bench_function(BenchmarkId::new("real_fifo", n), |b| {
        b.iter_batched(
            || objs.clone(),
            |objs| {
                let known: Arc<dyn KnownObjects<ConfigMap>> = Arc::new(Store::<ConfigMap>::for_resource());
                let f = real_fifo(known);
                let r = push_pop(&f, objs);
                assert_eq!(r.0, VERSIONS * n);
                black_box(r)
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

fn replace(c: &mut Criterion) {
    let n = n();
    let known_store = Store::<ConfigMap>::for_resource();
    known_store.replace(list(n, 0), "1").unwrap();
    let known: Arc<dyn KnownObjects<ConfigMap>> = Arc::new(known_store);
    let all = list(n, n);
    let half: Vec<_> = all.iter().step_by(2).cloned().collect();
    let mut g = c.benchmark_group("replace");
    g.sample_size(10).throughput(Throughput::Elements(n as u64));
    for (name, l) in [("all_listed", &all), ("half_deleted", &half)] {
        g.bench_function(BenchmarkId::new(format!("delta_fifo_{name}"), n), |b| {
            b.iter_batched(
                || l.clone(),
                |l| {
                    let f = delta_fifo(known.clone());
                    f.replace(l, "2").unwrap();
                    assert_eq!(f.len(), n);
                    f
                },
                BatchSize::PerIteration,
            )
        });
        g.bench_function(BenchmarkId::new(format!("real_fifo_{name}"), n), |b| {
            b.iter_batched(
                || l.clone(),
                |l| {
                    let f = real_fifo_per_delta(known.clone());
                    f.replace(l, "2").unwrap();
                    assert_eq!(f.len(), n);
                    f
                },
                BatchSize::PerIteration,
            )
        });
        g.bench_function(BenchmarkId::new(format!("real_fifo_atomic_{name}"), n), |b| {
            b.iter_batched(
                || l.clone(),
                |l| {
                    let f = real_fifo(known.clone());
                    f.replace(l, "2").unwrap();
                    assert_eq!(f.len(), 1);
                    f
                },
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();
}

fn relist(c: &mut Criterion) {
    let n = n();
    let known_store = Store::<ConfigMap>::for_resource();
    known_store.replace(list(n, 0), "1").unwrap();
    let known: Arc<dyn KnownObjects<ConfigMap>> = Arc::new(known_store);
    let all = list(n, n);
    let half: Vec<_> = all.iter().step_by(2).cloned().collect();
    let mut g = c.benchmark_group("relist");
    g.sample_size(10).throughput(Throughput::Elements(n as u64));
    for (name, l) in [("all_listed", &all), ("half_deleted", &half)] {
        let fifos: [(&str, MakeFifo); 2] =
            [("real_fifo", real_fifo_per_delta), ("real_fifo_atomic", real_fifo)];
        for (fifo, make) in fifos {
            g.bench_function(BenchmarkId::new(format!("{fifo}_{name}"), n), |b| {
                b.iter_batched(
                    || l.clone(),
                    |l| {
                        let f = make(known.clone());
                        f.replace(l, "2").unwrap();
                        assert_eq!(drain(&f), n);
                        f
                    },
                    BatchSize::PerIteration,
                )
            });
        }
    }
    g.finish();
}

// Written out instead of `criterion_group!`, whose generated `pub fn` trips `missing_docs` here.
fn main() {
    let mut c = Criterion::default().configure_from_args();
    add_pop(&mut c);
    replace(&mut c);
    relist(&mut c);
    c.final_summary();
}
