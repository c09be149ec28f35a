//! FIFO scenarios on kcache-delta-fifo, mirroring the FIFO part of `xtask/bench-go/cache.go`
//! (client-go's side: `cache.DeltaFIFO` and `cache.RealFIFO`).

use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kcache_delta_fifo::{DeltaFifo, DeltaFifoOptions, Deltas, FifoError, RealFifo, RealFifoOptions};
use kcache_store::{KnownObjects, Store, StoreError, meta_namespace_key_func};
use serde_json::json;

use super::Outcome;
use crate::measure::Timer;
use crate::workload::object;

/// Versions of every object pushed through the FIFO scenarios: one add and four updates.
const FIFO_UPDATES: usize = 5;

/// `objs[r][i] = object(i, r*N + i + 1)` for r in 0..5 (r = 0: the version added, 1..4: the
/// updates).
fn fifo_objects(n: usize) -> Vec<Vec<Arc<ConfigMap>>> {
    (0..FIFO_UPDATES).map(|r| (0..n).map(|i| Arc::new(object(i, r * n + i + 1))).collect()).collect()
}

/// An empty store with no indexers as the FIFO's known objects (as an informer passes its
/// indexer).
fn known() -> Arc<dyn KnownObjects<ConfigMap>> {
    Arc::new(Store::new(meta_namespace_key_func::<ConfigMap>()))
}

/// What the scenarios need from both FIFOs.
trait BenchFifo {
    fn add(&self, obj: Arc<ConfigMap>) -> Result<(), StoreError>;
    fn update(&self, obj: Arc<ConfigMap>) -> Result<(), StoreError>;
    fn pop(
        &self,
        process: impl FnMut(Deltas<ConfigMap>, bool) -> Result<(), StoreError>,
    ) -> Result<(), FifoError>;
}

impl BenchFifo for DeltaFifo<ConfigMap> {
    fn add(&self, obj: Arc<ConfigMap>) -> Result<(), StoreError> {
        DeltaFifo::add(self, obj)
    }
    fn update(&self, obj: Arc<ConfigMap>) -> Result<(), StoreError> {
        DeltaFifo::update(self, obj)
    }
    fn pop(
        &self,
        process: impl FnMut(Deltas<ConfigMap>, bool) -> Result<(), StoreError>,
    ) -> Result<(), FifoError> {
        self.pop_blocking(process)
    }
}

impl BenchFifo for RealFifo<ConfigMap> {
    fn add(&self, obj: Arc<ConfigMap>) -> Result<(), StoreError> {
        RealFifo::add(self, obj)
    }
    fn update(&self, obj: Arc<ConfigMap>) -> Result<(), StoreError> {
        RealFifo::update(self, obj)
    }
    fn pop(
        &self,
        process: impl FnMut(Deltas<ConfigMap>, bool) -> Result<(), StoreError>,
    ) -> Result<(), FifoError> {
        self.pop_blocking(process)
    }
}

/// Adds `objs[0]` and applies `objs[1..5]` as updates, round by round (every key once per round,
/// keys in index order). The FIFO gets clones of the `Arc`s: the caller keeps the objects alive
/// until after the timed section, as the Go side's slices do, so no object is freed inside it.
fn push_all(f: &impl BenchFifo, objs: &[Vec<Arc<ConfigMap>>]) {
    for (r, round) in objs.iter().enumerate() {
        for o in round {
            let o = Arc::clone(o);
            let res = if r == 0 { f.add(o) } else { f.update(o) };
            res.unwrap_or_else(|e| panic!("fifo push: {e}"));
        }
    }
}

fn rv(obj: &ConfigMap) -> u64 {
    obj.metadata.resource_version.as_deref().and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// Pushes all events, then pops until `done(deltas, pops)`; returns (deltas, pops, checksum) where
/// the checksum sums the resourceVersion of the newest delta of each pop (for the in-order FIFO,
/// where every pop holds one delta, that is every delta).
fn run(
    f: &impl BenchFifo,
    objs: &[Vec<Arc<ConfigMap>>],
    done: impl Fn(usize, usize) -> bool,
) -> (usize, usize, u64) {
    push_all(f, objs);
    let (mut deltas, mut pops, mut checksum) = (0usize, 0usize, 0u64);
    while !done(deltas, pops) {
        f.pop(|ds, _| {
            deltas += ds.len();
            checksum += ds.newest().map_or(0, |d| rv(d.obj()));
            Ok(())
        })
        .unwrap_or_else(|e| panic!("fifo pop: {e}"));
        pops += 1;
    }
    (deltas, pops, checksum)
}

/// delta_fifo: N keys (default 100k) x 5 versions (built untimed) through a `DeltaFifo` made with
/// `DeltaFifoOptions::new(meta_namespace_key_func).known_objects(empty Store)
/// .emit_delta_type_replaced(true)`. Timed: create it, push all 5N events (add, then 4 rounds of
/// updates), then `pop_blocking` until every key has been popped, the process function counting
/// deltas and summing the newest delta's resourceVersion. ops = 5N events; `extra.deltas` = 5N,
/// `extra.pops` = N, `extra.checksum` as the Go side's.
pub(super) fn delta_fifo(n: usize, t: &mut Timer) -> Outcome {
    let objs = fifo_objects(n);
    let known = known();
    t.start();
    let f = DeltaFifo::new(
        DeltaFifoOptions::new(meta_namespace_key_func::<ConfigMap>())
            .known_objects(known)
            .emit_delta_type_replaced(true),
    );
    let (deltas, pops, checksum) = run(&f, &objs, |_, pops| pops >= n);
    t.stop();
    drop(objs);
    Outcome {
        ops: (FIFO_UPDATES * n) as u64,
        extra: json!({"deltas": deltas, "pops": pops, "checksum": checksum})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    }
}

/// real_fifo: the delta_fifo workload through the in-order `RealFifo` made with
/// `RealFifoOptions::new(meta_namespace_key_func, empty Store)`: every event stays a separate
/// entry, so it takes 5N pops. ops = 5N events; `extra.deltas` = `extra.pops` = 5N,
/// `extra.checksum` = sum of every popped resourceVersion.
pub(super) fn real_fifo(n: usize, t: &mut Timer) -> Outcome {
    let objs = fifo_objects(n);
    let known = known();
    t.start();
    let f = RealFifo::new(RealFifoOptions::new(meta_namespace_key_func::<ConfigMap>(), known));
    let (deltas, pops, checksum) = run(&f, &objs, |deltas, _| deltas >= FIFO_UPDATES * n);
    t.stop();
    drop(objs);
    Outcome {
        ops: (FIFO_UPDATES * n) as u64,
        extra: json!({"deltas": deltas, "pops": pops, "checksum": checksum})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    }
}
