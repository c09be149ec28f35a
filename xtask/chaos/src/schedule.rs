//! The seeded schedule of a chaos run: which write or fault happens at which step, derived
//! from the seed alone.
//!
//! The generator keeps its own model of which keys exist, so every write in the schedule is
//! valid when it is applied (writes go through the test server's direct API, which never fails),
//! and the schedule is a pure function of `(seed, Config)`: the same seed gives the same steps
//! on every machine and every build. The random numbers come from [`SplitMix64`]
//! (`kcache_test_support::rng`, shared with the benchmark workloads) rather than from `rand`, whose `StdRng`
//! algorithm may change between releases.

use std::fmt;

use kcache_test_support::rng::SplitMix64;
use kcache_testserver::{Verb, WatchListSupport};

use crate::Config;

/// A write the churn makes. Keys are indices into the key universe (see [`key_name`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    /// Create an absent key.
    Create(usize),
    /// Replace an existing key's data.
    Update(usize),
    /// Delete an existing key.
    Delete(usize),
}

/// A fault the schedule injects. Every fault kcache-testserver offers is here, plus two that
/// need help from the client side: expiring a continue token mid-list and moving the informers'
/// fake clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// The next watch ends cleanly after `after` events.
    WatchClose {
        /// Events before the close.
        after: usize,
    },
    /// The next watch ends at once, without events (a very short watch).
    ShortWatch,
    /// The next watch gets an ERROR 410 Expired event after `after` events.
    WatchExpired {
        /// Events before the error.
        after: usize,
    },
    /// The next watch gets an ERROR 500 event after `after` events.
    WatchInternalError {
        /// Events before the error.
        after: usize,
    },
    /// The next LIST gets 410 Expired.
    ListExpired,
    /// The next continuation page of the paginated informer's LIST finds its token expired: the
    /// history is compacted just before that request is sent.
    ContinueExpired,
    /// Compact the history now (watches behind it get 410).
    Compact,
    /// The next `count` requests with `verb` get 500.
    Http500 {
        /// How many requests fail.
        count: usize,
        /// Which requests (LIST or WATCH).
        verb: Verb,
    },
    /// The next `count` requests with `verb` get 429 with `Retry-After`.
    Http429 {
        /// How many requests fail.
        count: usize,
        /// Which requests (LIST or WATCH).
        verb: Verb,
        /// `Retry-After` seconds.
        retry_after: u64,
    },
    /// The next watch sends headers, then nothing.
    HungWatch,
    /// After `after` events, the next watch sends a line that is not JSON.
    MalformedFrame {
        /// Events before the bad line.
        after: usize,
    },
    /// After `after` events, the next watch sends an event of an unknown type.
    UnknownEventType {
        /// Events before the odd frame.
        after: usize,
    },
    /// The server imitates another Kubernetes version's watch-list support until changed.
    WatchList(WatchListSupport),
    /// The server drops every connection (state kept).
    Restart,
    /// The informers' fake clock jumps 11 minutes: every pending backoff and resync timer fires,
    /// and every open watch (hung or not) passes its timeout plus grace and is replaced.
    ClockJump,
}

impl Fault {
    /// The kind, for counting (`watch-list-legacy`, `http-429`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Fault::WatchClose { .. } => "watch-drop",
            Fault::ShortWatch => "very-short-watch",
            Fault::WatchExpired { .. } => "watch-410",
            Fault::WatchInternalError { .. } => "watch-error-500",
            Fault::ListExpired => "list-410",
            Fault::ContinueExpired => "continue-410",
            Fault::Compact => "compaction",
            Fault::Http500 { .. } => "http-500",
            Fault::Http429 { .. } => "http-429",
            Fault::HungWatch => "hung-watch",
            Fault::MalformedFrame { .. } => "malformed-frame",
            Fault::UnknownEventType { .. } => "unknown-event-type",
            Fault::WatchList(WatchListSupport::Enabled) => "watch-list-enabled",
            Fault::WatchList(WatchListSupport::GateDisabled) => "watch-list-gate-disabled",
            Fault::WatchList(WatchListSupport::Legacy) => "watch-list-legacy",
            Fault::WatchList(WatchListSupport::Ignored) => "watch-list-ignored",
            Fault::Restart => "restart",
            Fault::ClockJump => "clock-jump",
        }
    }
}

/// One step of the schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A write.
    Write(Write),
    /// A fault.
    Fault(Fault),
    /// Let the informers catch up a little (bounded wait on handler progress) before going on,
    /// so faults hit watches at different distances behind the server.
    Settle,
    /// Add a handler to the running watch-list informer (it first receives the cache as
    /// initial-list adds).
    AddLateHandler,
}

/// Everything a run does, derived from the seed.
#[derive(Debug, Clone)]
pub struct Schedule {
    /// The seed.
    pub seed: u64,
    /// The server's history size: small ones make live watches fall behind and get 410.
    pub history_size: usize,
    /// The server's watch-list support when the informers start.
    pub initial_watch_list: WatchListSupport,
    /// Whether the factory informer uses the DeltaFIFO (else the in-order FIFO).
    pub factory_delta_fifo: bool,
    /// Keys created before the informers start (their initial list is not empty).
    pub initial: Vec<usize>,
    /// The steps, in order.
    pub steps: Vec<Step>,
}

impl Schedule {
    /// The schedule of `seed` for `config`.
    pub fn generate(seed: u64, config: &Config) -> Schedule {
        let mut rng = SplitMix64::new(seed);
        let keys = config.keys.max(1);
        let history_size = match rng.below(3) {
            0 => rng.range(200, 1000) as usize,
            1 => rng.range(1000, 4000) as usize,
            _ => kcache_testserver::DEFAULT_HISTORY_SIZE,
        };
        let modes = [
            WatchListSupport::Enabled,
            WatchListSupport::GateDisabled,
            WatchListSupport::Legacy,
            WatchListSupport::Ignored,
        ];
        let initial_watch_list = if rng.chance(1, 2) { WatchListSupport::Enabled } else { *rng.pick(&modes) };
        let factory_delta_fifo = rng.chance(1, 2);

        // `present` and `absent` partition 0..keys; swap_remove keeps both O(1).
        let mut absent: Vec<usize> = (0..keys).collect();
        let mut present: Vec<usize> = Vec::new();
        let take = |from: &mut Vec<usize>, to: &mut Vec<usize>, rng: &mut SplitMix64| {
            let i = rng.below(from.len() as u64) as usize;
            let k = from.swap_remove(i);
            to.push(k);
            k
        };
        let mut initial = Vec::new();
        for _ in 0..keys / 4 {
            initial.push(take(&mut absent, &mut present, &mut rng));
        }

        let late_handler_at = rng.below(config.steps.max(1) as u64) as usize;
        let mut steps = Vec::with_capacity(config.steps + config.steps / 20);
        for i in 0..config.steps {
            if i == late_handler_at {
                steps.push(Step::AddLateHandler);
            }
            if rng.chance(1, config.fault_every.max(1) as u64) {
                steps.push(Step::Fault(random_fault(&mut rng, &modes)));
            }
            if rng.chance(1, 150) {
                steps.push(Step::Settle);
            }
            // Grow towards half the universe, then churn around it.
            let (create, update) = if present.len() < keys / 2 { (60, 30) } else { (30, 45) };
            let roll = rng.below(100);
            let write = if present.is_empty() || (roll < create && !absent.is_empty()) {
                Write::Create(take(&mut absent, &mut present, &mut rng))
            } else if roll < create + update {
                Write::Update(*rng.pick(&present))
            } else {
                Write::Delete(take(&mut present, &mut absent, &mut rng))
            };
            steps.push(Step::Write(write));
        }
        Schedule { seed, history_size, initial_watch_list, factory_delta_fifo, initial, steps }
    }

    /// Faults in the schedule, by kind.
    pub fn faults(&self) -> impl Iterator<Item = &Fault> {
        self.steps.iter().filter_map(|s| match s {
            Step::Fault(f) => Some(f),
            _ => None,
        })
    }
}

fn random_fault(rng: &mut SplitMix64, modes: &[WatchListSupport]) -> Fault {
    let verb = if rng.chance(1, 2) { Verb::List } else { Verb::Watch };
    match rng.below(17) {
        0 => Fault::WatchClose { after: rng.range(1, 40) as usize },
        1 => Fault::ShortWatch,
        2 => Fault::WatchExpired { after: rng.below(20) as usize },
        3 => Fault::WatchInternalError { after: rng.below(20) as usize },
        4 => Fault::ListExpired,
        5 => Fault::ContinueExpired,
        6 => Fault::Compact,
        7 => Fault::Http500 { count: rng.range(1, 3) as usize, verb },
        8 => Fault::Http429 { count: rng.range(1, 3) as usize, verb, retry_after: rng.range(1, 2) },
        9 => Fault::HungWatch,
        10 => Fault::MalformedFrame { after: rng.below(20) as usize },
        11 => Fault::UnknownEventType { after: rng.below(20) as usize },
        12 | 13 => Fault::WatchList(*rng.pick(modes)),
        14 => Fault::Restart,
        15 => Fault::ClockJump,
        _ => Fault::WatchClose { after: rng.range(40, 400) as usize },
    }
}

/// The namespace of key `k`: keys are spread round-robin over `namespaces` namespaces.
pub fn key_namespace(k: usize, namespaces: usize) -> String {
    format!("chaos-{}", k % namespaces.max(1))
}

/// The object name of key `k`.
pub fn key_name(k: usize) -> String {
    format!("cm-{k:05}")
}

impl fmt::Display for Write {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Write::Create(k) => write!(f, "create {k}"),
            Write::Update(k) => write!(f, "update {k}"),
            Write::Delete(k) => write!(f, "delete {k}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_schedule() {
        let config = Config::default();
        let a = Schedule::generate(42, &config);
        let b = Schedule::generate(42, &config);
        assert_eq!(a.steps, b.steps);
        assert_eq!(a.initial, b.initial);
        assert_eq!(a.history_size, b.history_size);
        let c = Schedule::generate(43, &config);
        assert_ne!(a.steps, c.steps);
    }

    #[test]
    fn every_write_is_valid_against_the_generators_model() {
        let config = Config { keys: 100, steps: 2000, ..Config::default() };
        let s = Schedule::generate(7, &config);
        let mut present = vec![false; config.keys];
        for &k in &s.initial {
            present[k] = true;
        }
        for step in &s.steps {
            if let Step::Write(w) = step {
                match *w {
                    Write::Create(k) => assert!(!std::mem::replace(&mut present[k], true)),
                    Write::Update(k) => assert!(present[k]),
                    Write::Delete(k) => assert!(std::mem::replace(&mut present[k], false)),
                }
            }
        }
        assert!(s.faults().count() > 10);
    }
}
