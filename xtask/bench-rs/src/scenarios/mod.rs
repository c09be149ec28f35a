//! The scenario registry: every scenario of issue 9 by its name shared with the client-go side, with
//! its sizes and the implementation on each side of this binary (or why there is none yet).
//!
//! A new scenario plugs in by writing its `fn(n: usize, t: &mut Timer) -> Outcome` in a module
//! here and putting it in the matching [`Slot`] of its entry in [`SCENARIOS`] (replacing a
//! [`Slot::Pending`]). The function builds its inputs, calls `t.start()` right before the measured
//! section and `t.stop()` right after it, and returns the ops in the section. Its doc comment
//! defines the workload; it must match the Go function of the same scenario.

mod fifo;
mod informer;
mod reflector;
mod ring;
#[cfg(feature = "scale")]
mod scale;
mod sharding;
mod store;
mod workqueue;

use serde_json::{Map, Value};

use crate::measure::Timer;

/// What a scenario reports besides the measurement.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// Operations in the timed section (the unit of `ns_per_op`).
    pub(crate) ops: u64,
    /// Scenario-specific fields, e.g. a checksum the Go side computes identically.
    pub(crate) extra: Map<String, Value>,
}

/// A scenario implementation on one side.
pub(crate) type RunFn = fn(n: usize, t: &mut Timer) -> Outcome;

/// The sides this binary runs (client-go is `xtask/bench-go`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    /// kcache's own crates.
    Kcache,
    /// `std::collections::VecDeque`, the floor for the ring buffer.
    VecDeque,
    /// kube-runtime (watcher + reflector store, scheduler).
    KubeRuntime,
}

impl Side {
    /// Every side, in the order `--list` prints them.
    pub(crate) const ALL: [Side; 3] = [Side::Kcache, Side::VecDeque, Side::KubeRuntime];

    /// The name used on the command line and in the JSON lines.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Side::Kcache => "kcache",
            Side::VecDeque => "vecdeque",
            Side::KubeRuntime => "kube-runtime",
        }
    }

    /// Parses a side name.
    pub(crate) fn parse(s: &str) -> Option<Side> {
        Side::ALL.into_iter().find(|side| side.name() == s)
    }
}

/// One side's slot in a scenario.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Slot {
    /// Implemented.
    Run(RunFn),
    /// To come: the reason, e.g. which crate has no usable API yet.
    #[allow(dead_code, reason = "every scenario is implemented now; kept for the next one")]
    Pending(&'static str),
    /// The side has no counterpart of this scenario.
    NotApplicable,
}

/// A scenario and its implementation on each side.
#[derive(Debug)]
pub(crate) struct Scenario {
    /// Name shared with the client-go side and `cargo xtask bench`.
    pub(crate) name: &'static str,
    /// N when neither `-n` nor `--quick` is given (the same as the Go side's).
    pub(crate) default_n: usize,
    /// N with `--quick` (the same as the Go side's).
    pub(crate) quick_n: usize,
    /// kcache side.
    pub(crate) kcache: Slot,
    /// std `VecDeque` side.
    pub(crate) vecdeque: Slot,
    /// kube-runtime side.
    pub(crate) kube_runtime: Slot,
}

impl Scenario {
    /// The implementation on `side`, or the error line's text.
    pub(crate) fn runner(&self, side: Side) -> Result<RunFn, String> {
        let slot = match side {
            Side::Kcache => self.kcache,
            Side::VecDeque => self.vecdeque,
            Side::KubeRuntime => self.kube_runtime,
        };
        match slot {
            Slot::Run(f) => Ok(f),
            Slot::Pending(why) => Err(format!("not yet implemented on this side: {why}")),
            Slot::NotApplicable => {
                Err(format!("not applicable: {} has no counterpart of this scenario", side.name()))
            }
        }
    }
}

const NA: Slot = Slot::NotApplicable;

/// kube-runtime's slot of a scenario: its function in a build with the `kube-runtime` feature
/// (the default), not applicable in the kcache-only build (`--no-default-features`), which
/// `cargo xtask bench` runs the kcache side in.
#[cfg(feature = "kube-runtime")]
macro_rules! kube_runtime {
    ($f:path) => {
        Slot::Run($f)
    };
}
#[cfg(not(feature = "kube-runtime"))]
macro_rules! kube_runtime {
    ($f:path) => {
        Slot::NotApplicable
    };
}

/// A slot of the scale scenarios: its function in a build with the `scale` feature (the
/// default), not applicable otherwise.
#[cfg(feature = "scale")]
macro_rules! scale {
    ($f:path) => {
        Slot::Run($f)
    };
}
#[cfg(not(feature = "scale"))]
macro_rules! scale {
    ($f:path) => {
        Slot::NotApplicable
    };
}

/// kube-runtime's slot of a scale scenario: with both features only.
#[cfg(all(feature = "scale", feature = "kube-runtime"))]
macro_rules! scale_kube_runtime {
    ($f:path) => {
        Slot::Run($f)
    };
}
#[cfg(not(all(feature = "scale", feature = "kube-runtime")))]
macro_rules! scale_kube_runtime {
    ($f:path) => {
        Slot::NotApplicable
    };
}

const fn scenario(name: &'static str, default_n: usize, quick_n: usize, kcache: Slot) -> Scenario {
    Scenario { name, default_n, quick_n, kcache, vecdeque: NA, kube_runtime: NA }
}

/// Every scenario, in the order of issue 9. Sizes equal the Go side's (`bench-go -list`).
pub(crate) const SCENARIOS: &[Scenario] = &[
    Scenario {
        vecdeque: Slot::Run(ring::vecdeque_write_read),
        ..scenario("ring_write_read", 1_000_000, 1_000_000, Slot::Run(ring::kcache_write_read))
    },
    Scenario {
        vecdeque: Slot::Run(ring::vecdeque_interleaved),
        ..scenario("ring_interleaved", 10_000_000, 10_000_000, Slot::Run(ring::kcache_interleaved))
    },
    scenario("workqueue_single", 1_000_000, 200_000, Slot::Run(workqueue::single)),
    scenario("workqueue_contended", 1_000_000, 200_000, Slot::Run(workqueue::workqueue_contended)),
    scenario("workqueue_coalesce", 1_000, 1_000, Slot::Run(workqueue::coalesce)),
    Scenario {
        kube_runtime: kube_runtime!(workqueue::kube_runtime_add_after),
        ..scenario("workqueue_add_after", 1_000_000, 200_000, Slot::Run(workqueue::add_after))
    },
    scenario("rate_limiter_when", 1_000_000, 200_000, Slot::Run(workqueue::rate_limiter_when)),
    scenario("priorityqueue_single", 1_000_000, 200_000, Slot::Run(workqueue::priorityqueue_single)),
    scenario("priorityqueue_contended", 1_000_000, 200_000, Slot::Run(workqueue::priorityqueue_contended)),
    scenario("delta_fifo", 100_000, 20_000, Slot::Run(fifo::delta_fifo)),
    scenario("real_fifo", 100_000, 20_000, Slot::Run(fifo::real_fifo)),
    scenario("store_replace", 100_000, 20_000, Slot::Run(store::replace)),
    scenario("store_by_index", 100_000, 20_000, Slot::Run(store::by_index)),
    // Against one shared `kcache-bench serve` process (`--server URL`); N = ConfigMaps loaded.
    Scenario {
        kube_runtime: kube_runtime!(informer::kube_runtime_synced_list),
        ..scenario("informer_synced_list_10k", 10_000, 10_000, Slot::Run(informer::kcache_synced_list))
    },
    Scenario {
        kube_runtime: kube_runtime!(informer::kube_runtime_synced_list),
        ..scenario("informer_synced_list_50k", 50_000, 50_000, Slot::Run(informer::kcache_synced_list))
    },
    Scenario {
        kube_runtime: kube_runtime!(informer::kube_runtime_synced_watchlist),
        ..scenario(
            "informer_synced_watchlist_10k",
            10_000,
            10_000,
            Slot::Run(informer::kcache_synced_watchlist),
        )
    },
    Scenario {
        kube_runtime: kube_runtime!(informer::kube_runtime_synced_watchlist),
        ..scenario(
            "informer_synced_watchlist_50k",
            50_000,
            50_000,
            Slot::Run(informer::kcache_synced_watchlist),
        )
    },
    scenario("event_fanout_3_handlers", 100_000, 20_000, Slot::Run(informer::kcache_event_fanout)),
    Scenario {
        kube_runtime: kube_runtime!(informer::kube_runtime_memory),
        ..scenario("informer_memory_kube_rs", 10_000, 10_000, Slot::Run(informer::kcache_memory))
    },
    // Reflectors into a plain store; kube-runtime's reflector is its informer (watcher + store).
    Scenario {
        kube_runtime: kube_runtime!(informer::kube_runtime_synced_list),
        ..scenario("reflector_synced_list_50k", 50_000, 50_000, Slot::Run(reflector::kcache_synced_list))
    },
    Scenario {
        kube_runtime: kube_runtime!(informer::kube_runtime_synced_watchlist),
        ..scenario(
            "reflector_synced_watchlist_50k",
            50_000,
            50_000,
            Slot::Run(reflector::kcache_synced_watchlist),
        )
    },
    Scenario {
        kube_runtime: kube_runtime!(reflector::kube_runtime_event_throughput),
        ..scenario(
            "reflector_event_throughput",
            200_000,
            50_000,
            Slot::Run(reflector::kcache_event_throughput),
        )
    },
    // Issue 34: one replica's shard of N ConfigMaps on a real kube-apiserver (KCACHE_BENCH_SHARDS,
    // and a server with or without ShardedListAndWatch); kcache only.
    scenario("sharding_sync_50k", 50_000, 50_000, Slot::Run(sharding::kcache_sharded_sync)),
    // Issue #37: against `kcache-bench serve --pods N`; N = Pods (with N/5 Secrets, N/10
    // ConfigMaps).
    Scenario {
        kube_runtime: scale_kube_runtime!(scale::kube_runtime_full),
        ..scenario("scale_full", 100_000, 20_000, scale!(scale::kcache_full))
    },
    Scenario {
        kube_runtime: scale_kube_runtime!(scale::kube_runtime_metadata),
        ..scenario("scale_metadata", 100_000, 20_000, scale!(scale::kcache_metadata))
    },
];
