//! Chaos convergence for kcache: seeded runs of random churn against kcache-testserver while a
//! seeded schedule injects every fault the server offers, followed by a check that everything
//! converged to the server's state.
//!
//! One run ([`run_blocking`]) starts an in-process API server and this pipeline:
//!
//! * informer **a**: in-order FIFO (client-go's RealFIFO), watch-list, all namespaces, with an
//!   enqueueing handler, a handler with a resync period, a coalescing handler, and one handler
//!   added while the run is under way;
//! * informer **b**: DeltaFIFO, LIST + WATCH with pages of 100 (so continue tokens exist), all
//!   namespaces, a plain handler and a coalescing handler with a resync period;
//! * informer **c**: from a `SharedInformerFactory`, one namespace, FIFO chosen by the seed, a
//!   plain handler and one with a resync period;
//! * a controller: a `RateLimitingQueue` fed by informer a's first handler and drained by
//!   `run_workers`, reconciling each key by reading informer a's lister (the first attempt of
//!   about one key in sixteen fails on purpose, so retries happen).
//!
//! It then plays the [`Schedule`] of the seed: creates, updates and deletes of ConfigMaps over
//! the key universe (default 1000 keys in 4 namespaces), interleaved with faults
//! ([`Fault`]: watch drops, very short watches, 410 on watch, on list and on a continue page,
//! compaction, 500 and 429, hung streams, each watch-list support mode, malformed frames,
//! unknown event types, server restarts and jumps of the informers' fake clock). Afterwards it
//! clears the faults, restarts the server once more (dropping any hung stream), waits for
//! quiescence and checks:
//!
//! 1. every informer's cache equals the server's state exactly (keys and resourceVersions);
//! 2. every handler's per-key log is consistent with the server's history of that key and ends
//!    at its final state or its deletion (see [`checker`] for exactly what "consistent" allows);
//! 3. the controller's last reconcile of every key read that key's final state.
//!
//! With [`Config::final_restart`] off, the final restart is left out: the watches open when the
//! faults are cleared must deliver the final state themselves (with [`Config::hung_watches`] also
//! off, a run whose live watches have not done so within 3 s fails), which is the check for a
//! watch event lost by the server or the client.
//!
//! # Time
//!
//! The informers run on one [`FakeClock`](kcache_reflector::FakeClock). A driver task completes
//! every pending sleep of at most 61 s at once (all reflector backoffs and Retry-After waits), so
//! faults never make a run slow; resync timers (300 s) and watch timeouts (5 to 10 min) move only
//! as the advanced time adds up, or when the schedule jumps the clock. Quiescence is awaited on
//! notifications from the handlers and the reconciler, with an overall timeout that fails the
//! run; nothing sleeps waiting for something to happen.
//!
//! # Determinism
//!
//! The schedule (which write or fault at which step, the history size, the first watch-list
//! mode) is a pure function of the seed and the [`Config`]. Thread timing is not: where a fault
//! lands relative to a watch, which informer's next watch takes a one-shot watch fault, and how
//! far behind each informer is all vary between replays of a seed. A failing seed is replayed
//! with `cargo xtask chaos --runs 1 --seed S`; it reproduces the same schedule, and usually the
//! failure, but an interleaving-dependent bug may need a few replays.

use std::collections::BTreeMap;
use std::time::Duration;

pub mod checker;
pub mod leader;
mod lister_watcher;
mod recorder;
mod run;
mod schedule;

pub use kcache_test_support::rng::SplitMix64;
pub use run::{run, run_blocking};
pub use schedule::{Fault, Schedule, Step, Write, key_name, key_namespace};

/// The size of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Keys in the universe (about half exist at any time once the churn is under way).
    pub keys: usize,
    /// Namespaces the keys are spread over (at least 2: informer c watches the second).
    pub namespaces: usize,
    /// Writes in the schedule.
    pub steps: usize,
    /// On average one fault every this many writes.
    pub fault_every: usize,
    /// Longest wait for the initial sync and for quiescence before the run fails.
    pub converge_timeout: Duration,
    /// Restart the server once more after clearing the faults, dropping every stream (hung ones
    /// included). Without it the fake clock jumps past every watch's timeout instead, so hung
    /// streams are detected as such, and every other live watch must deliver the final events
    /// by itself: a watch event that a stream failed to deliver then shows up as a failed (or,
    /// healed by a later bookmark, a slow) quiescence.
    pub final_restart: bool,
    /// Inject hung streams. Without them and without the final restart, a run that does not
    /// converge on its live watches within 3 s fails: nothing can excuse a missing event.
    pub hung_watches: bool,
    /// Harness self-test: informer a's first handler leaves the first add notification from its
    /// Nth notification on out of its log, as a pipeline that lost it would; such a run must fail.
    pub lose_notification: Option<u64>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            keys: 1000,
            namespaces: 4,
            steps: 3000,
            fault_every: 60,
            converge_timeout: Duration::from_secs(30),
            final_restart: true,
            hung_watches: true,
            lose_notification: None,
        }
    }
}

impl Config {
    /// The default run with `keys` keys (and three writes per key).
    pub fn with_keys(keys: usize) -> Self {
        Self { keys: keys.max(2), steps: keys.max(2) * 3, ..Self::default() }
    }
}

/// What one run did and found.
#[derive(Debug, Clone, Default)]
pub struct RunReport {
    /// The seed.
    pub seed: u64,
    /// Faults the schedule injected, by kind.
    pub faults: BTreeMap<&'static str, u64>,
    /// Effects seen: requests, status codes, watch errors by kind, resyncs, tombstones, ...
    pub observed: BTreeMap<String, u64>,
    /// Writes made by the churn.
    pub writes: u64,
    /// Notifications delivered to handlers.
    pub events: u64,
    /// Reconcile attempts.
    pub reconciles: u64,
    /// Consistency violations found by the checker (only the first few are in `failures`).
    pub violations: usize,
    /// Why the run failed; empty when it passed.
    pub failures: Vec<String>,
    /// Remarks that are not failures (e.g. quiescence needed a clock jump).
    pub notes: Vec<String>,
    /// Wall time of the run.
    pub elapsed: Duration,
    /// Wall time from the end of the churn (faults cleared) to convergence.
    pub quiescence: Duration,
}

impl RunReport {
    /// Whether every check passed.
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

/// The command that replays `seed` with `config`.
pub fn replay_command(seed: u64, config: &Config) -> String {
    let mut cmd = format!("cargo xtask chaos --runs 1 --seed {seed}");
    let default = Config::default();
    if config.keys != default.keys {
        cmd.push_str(&format!(" --keys {}", config.keys));
    }
    if config.fault_every != default.fault_every {
        cmd.push_str(&format!(" --fault-every {}", config.fault_every));
    }
    if !config.final_restart {
        cmd.push_str(" --no-final-restart");
    }
    if !config.hung_watches {
        cmd.push_str(" --no-hung-watches");
    }
    cmd
}
