//! `cargo xtask bench`: the side-by-side benchmarks of issue 9.
//!
//! ```text
//! cargo xtask bench [--quick] [--filter NAME] [--json PATH] [--runs R] [--n N] [--no-write] [--cluster local] [--managed-fields defaults|keep|strip]
//! ```
//!
//! Builds the client-go side (`xtask/bench-go`, `go mod download` + `go build`) and the Rust sides
//! (`xtask/bench-rs`, `kcache-bench`, release; the kcache side runs in a build of it without
//! kube-runtime and the test server), then runs every scenario R times (default 5, quick
//! 3) with its sides interleaved (A B C A B C ...), one process per run, so drift hits all sides
//! alike and `ru_maxrss` is the scenario's own peak. Per side it takes the median and the spread
//! ((max - min) / median) of the runs, computes the ratios kcache / client-go and
//! kcache / kube-runtime (or kcache / VecDeque for the ring) and checks them against the targets of
//! the issues. It prints one line per scenario ending with the ratio, rewrites the table between
//! the markers in docs/benchmarks.md (unless `--no-write`) and writes every raw result as JSON with
//! `--json PATH`.
//!
//! A side that cannot run a scenario yet answers with an error line; it is reported as such,
//! never as a number.
//!
//! `--cluster local --filter sharding` runs issue 34's sharding benchmark instead (kcache alone,
//! unsharded against server-side and client-side sharding with 1, 2 and 4 shards; see
//! `bench_sharding.rs`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use xshell::{Shell, cmd};

// Issue 34's sharding benchmark (`--filter sharding`): kcache alone, per mode and shard count.
#[path = "bench_sharding.rs"]
mod sharding;

const MARK_BEGIN: &str = "<!-- bench:begin -->";
const MARK_END: &str = "<!-- bench:end -->";

/// Which measurement a scenario is judged by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Metric {
    /// Operations per wall-clock second (higher is better).
    Throughput,
    /// Operations per CPU second (higher is better): for workloads whose wall time is set by timers.
    CpuEfficiency,
    /// Peak RSS in bytes (lower is better).
    PeakRss,
    /// Resident set once synced, idle and with freed memory returned to the OS
    /// (`extra.steady_rss_bytes`; lower is better): the scale scenarios.
    SteadyRss,
}

/// The target a scenario's ratio is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// kcache time at most 1.2x VecDeque's, i.e. ratio kcache / VecDeque of ops per second
    /// (of CPU time, for the ring scenarios) >= 1 / 1.2.
    RingFloor,
    /// At least 2x client-go (queues, FIFOs, store, fan-out); on a row that also runs client-go
    /// with protobuf (fan-out), 2x the better of the two configurations (issue 38).
    TwiceClientGo,
    /// Peak RSS at most 0.6x client-go's and no more than kube-runtime's (metric: peak RSS); of
    /// the smaller of the two client-go configurations' peaks on a row that runs both (issue 38).
    Memory,
    /// Reflectors: time to synced and peak RSS no worse than client-go's.
    Reflector,
    /// Issue #37's scale scenarios: steady RSS at most 0.5x client-go's and 0.8x kube-runtime's.
    Scale,
    /// Issue 38, ahead of the strongest peers: at least 2x the best client-go configuration
    /// (JSON or protobuf, whichever did better in the same run) and at least 1.2x kube-runtime,
    /// on the scenario's metric (time to synced, or events per CPU second).
    Peers,
    /// [`Target::Peers`], and peak RSS no worse than the JSON client-go's (the reflector rows).
    PeersRss,
}

impl Target {
    fn describe(self, metric: Metric) -> &'static str {
        match (self, metric) {
            (Target::RingFloor, _) => "CPU time <= 1.2x VecDeque",
            (Target::TwiceClientGo, Metric::Throughput) => ">= 2x client-go throughput",
            (Target::TwiceClientGo, Metric::CpuEfficiency) => ">= 2x client-go ops per CPU second",
            (Target::TwiceClientGo, Metric::PeakRss | Metric::SteadyRss) => "peak RSS <= 0.5x client-go",
            (Target::Memory, _) => "peak RSS <= 0.6x best client-go and <= kube-runtime",
            (Target::Reflector, _) => "time to synced <= client-go; peak RSS <= client-go",
            (Target::Peers, _) => ">= 2x best client-go, >= 1.2x kube-runtime",
            (Target::PeersRss, _) => ">= 2x best client-go, >= 1.2x kube-runtime; peak RSS <= client-go",
            (Target::Scale, _) => "steady RSS <= 0.5x client-go and <= 0.8x kube-runtime",
        }
    }

    /// The side the target compares kcache with.
    fn baseline(self) -> &'static str {
        match self {
            Target::RingFloor => "vecdeque",
            Target::Reflector | Target::Scale => "client-go",
            // The better client-go configuration where the row runs both, else JSON's: a row
            // without the protobuf side has only that one.
            Target::TwiceClientGo | Target::Memory | Target::Peers | Target::PeersRss => BEST_CLIENT_GO,
        }
    }

    /// Smallest acceptable ratio kcache / baseline of the metric (higher is better).
    fn threshold(self) -> f64 {
        match self {
            Target::RingFloor => 1.0 / 1.2,
            Target::TwiceClientGo | Target::Peers | Target::PeersRss => 2.0,
            Target::Reflector => 1.0,
            Target::Memory => 0.6,
            Target::Scale => 0.5,
        }
    }
}

/// One scenario: its name (shared by both binaries), sizes, sides and target.
#[derive(Debug)]
struct ScenarioDef {
    name: &'static str,
    /// N of a full run and of `--quick` (both binaries take `-n`, so this table is the one truth).
    n: usize,
    quick_n: usize,
    sides: &'static [&'static str],
    metric: Metric,
    target: Target,
    /// Informer scenarios: run against one `kcache-bench serve` process loaded with N ConfigMaps.
    server: bool,
    /// Part of `--quick`.
    in_quick: bool,
    /// A fresh `kcache-bench serve --mutate` for every run (it changes its objects once watched).
    fresh_server: bool,
    /// The server is `kcache-bench serve --pods N` (N Pods, N/5 Secrets, N/10 ConfigMaps).
    pods: bool,
    /// With `fresh_server`: the server holds [`EVENT_OBJECTS`] ConfigMaps and, once watched, makes
    /// N updates (`serve --updates N`) instead of the memory scenario's changes.
    events: bool,
}

/// ConfigMaps in the server of the event-throughput scenario.
const EVENT_OBJECTS: usize = 10_000;

const RING_SIDES: &[&str] = &["kcache", "vecdeque", "client-go"];
const KC_GO: &[&str] = &["kcache", "client-go"];
const KC_GO_KR: &[&str] = &["kcache", "client-go", "kube-runtime"];
/// The scenarios against an API server (issue 38): client-go twice, with JSON and with protobuf.
/// kcache too runs twice there: with JSON (its default) and with protobuf (`ApiListerWatcher::
/// protobuf(true)`, [`KCACHE_PROTOBUF`]).
const KC_GO_PB_KR: &[&str] = &["kcache", KCACHE_PROTOBUF, "client-go", CLIENT_GO_PROTOBUF, "kube-runtime"];
const KC_GO_PB: &[&str] = &["kcache", KCACHE_PROTOBUF, "client-go", CLIENT_GO_PROTOBUF];

/// The side name of kcache configured for protobuf (`ApiListerWatcher::protobuf(true)`): the
/// kcache binary run with `KCACHE_BENCH_PROTOBUF=1`.
const KCACHE_PROTOBUF: &str = "kcache-protobuf";

/// The scale scenarios' sides: kcache with its defaults, with `compact_objects(true)`
/// ([`KCACHE_COMPACT`]), with `CacheRepr::Serialized` ([`KCACHE_SERIALIZED`]) and with
/// `CacheRepr::Compressed` ([`KCACHE_COMPRESSED`]), then the peers.
/// The ratios of the row are kcache's defaults'; docs/benchmarks.md gives the variants' too.
const SCALE_SIDES: &[&str] =
    &["kcache", KCACHE_COMPACT, KCACHE_SERIALIZED, KCACHE_COMPRESSED, "client-go", "kube-runtime"];

/// The side name of kcache with `compact_objects(true)` (the scale scenarios): the kcache binary
/// run with `KCACHE_BENCH_COMPACT=1`.
const KCACHE_COMPACT: &str = "kcache-compact";

/// The side name of kcache with `CacheRepr::Serialized` (the scale scenarios): the kcache binary
/// run with `KCACHE_BENCH_CACHE=serialized`.
const KCACHE_SERIALIZED: &str = "kcache-serialized";

/// The side name of kcache with `CacheRepr::Compressed` (the scale scenarios): the kcache binary
/// run with `KCACHE_BENCH_CACHE=compressed`.
const KCACHE_COMPRESSED: &str = "kcache-compressed";

/// Not a side: the numerator of every ratio on a row that runs [`KCACHE_PROTOBUF`], whichever
/// of `kcache` and [`KCACHE_PROTOBUF`] did better in the run (as [`BEST_CLIENT_GO`] is for
/// client-go: each library in its best configuration).
const BEST_KCACHE: &str = "best kcache";

/// The side name of client-go configured for protobuf (`rest.Config.ContentType =
/// "application/vnd.kubernetes.protobuf"`): the Go binary run with `KCACHE_BENCH_PROTOBUF=1`.
const CLIENT_GO_PROTOBUF: &str = "client-go-protobuf";

/// Not a side: the baseline name of [`Target::Peers`], whichever of `client-go` and
/// [`CLIENT_GO_PROTOBUF`] did better in the run.
const BEST_CLIENT_GO: &str = "best client-go";

/// The minimum ratio to kube-runtime of [`Target::Peers`].
const PEERS_KUBE_RUNTIME: f64 = 1.2;

const fn def(name: &'static str, n: usize, quick_n: usize, target: Target) -> ScenarioDef {
    ScenarioDef {
        name,
        n,
        quick_n,
        sides: KC_GO,
        metric: Metric::Throughput,
        target,
        server: false,
        in_quick: true,
        fresh_server: false,
        pods: false,
        events: false,
    }
}

const fn cpu(d: ScenarioDef) -> ScenarioDef {
    ScenarioDef { metric: Metric::CpuEfficiency, ..d }
}

const fn informer(name: &'static str, n: usize, in_quick: bool) -> ScenarioDef {
    ScenarioDef { sides: KC_GO_PB_KR, server: true, in_quick, ..def(name, n, n, Target::Peers) }
}

const fn informer_def(name: &'static str, n: usize, target: Target) -> ScenarioDef {
    ScenarioDef { sides: KC_GO_PB_KR, server: true, ..def(name, n, n, target) }
}

/// The scenarios of issue 9.
const SCENARIOS: &[ScenarioDef] = &[
    // Single-threaded and tens of milliseconds long: judged by CPU time, which other load on a
    // shared machine leaves alone (wall time of such short runs measures the scheduler).
    ScenarioDef { sides: RING_SIDES, ..cpu(def("ring_write_read", 1_000_000, 1_000_000, Target::RingFloor)) },
    ScenarioDef {
        sides: RING_SIDES,
        ..cpu(def("ring_interleaved", 10_000_000, 10_000_000, Target::RingFloor))
    },
    def("workqueue_single", 1_000_000, 200_000, Target::TwiceClientGo),
    def("workqueue_contended", 1_000_000, 200_000, Target::TwiceClientGo),
    def("workqueue_coalesce", 1_000, 1_000, Target::TwiceClientGo),
    // kube-runtime's counterpart is its scheduler (the Controller's delay queue).
    ScenarioDef {
        metric: Metric::CpuEfficiency,
        sides: KC_GO_KR,
        ..def("workqueue_add_after", 1_000_000, 200_000, Target::TwiceClientGo)
    },
    def("rate_limiter_when", 1_000_000, 200_000, Target::TwiceClientGo),
    def("priorityqueue_single", 1_000_000, 200_000, Target::TwiceClientGo),
    def("priorityqueue_contended", 1_000_000, 200_000, Target::TwiceClientGo),
    def("delta_fifo", 100_000, 20_000, Target::TwiceClientGo),
    def("real_fifo", 100_000, 20_000, Target::TwiceClientGo),
    def("store_replace", 100_000, 20_000, Target::TwiceClientGo),
    def("store_by_index", 100_000, 20_000, Target::TwiceClientGo),
    informer("informer_synced_list_10k", 10_000, true),
    informer("informer_synced_list_50k", 50_000, false),
    informer("informer_synced_watchlist_10k", 10_000, true),
    informer("informer_synced_watchlist_50k", 50_000, false),
    // kube-rs's memory scenario: N ConfigMaps, then N/2 updates and N/10 deletes. Not in --quick.
    // Once about one kube-runtime run in six never saw the final event and waited out its 60 s
    // limit; since the server writes a heartbeat every 50 ms after the sentinel, 0 of 16 runs did.
    ScenarioDef {
        metric: Metric::PeakRss,
        fresh_server: true,
        in_quick: false,
        ..informer_def("informer_memory_kube_rs", 10_000, Target::Memory)
    },
    // Reflectors into a plain store (issue 6): initial sync of 50k by LIST and by watch-list,
    // and the rate at which watch events reach the store.
    ScenarioDef {
        sides: KC_GO_PB_KR,
        server: true,
        in_quick: false,
        ..def("reflector_synced_list_50k", 50_000, 50_000, Target::PeersRss)
    },
    ScenarioDef {
        sides: KC_GO_PB_KR,
        server: true,
        in_quick: false,
        ..def("reflector_synced_watchlist_50k", 50_000, 50_000, Target::PeersRss)
    },
    // Judged by events per CPU second of the client process: the server (another process on
    // the same cores) writes the events while they stream, so on a busy machine its write rate,
    // not the client, can set the wall-clock rate; CPU per event is the client's own cost.
    ScenarioDef {
        sides: KC_GO_PB_KR,
        fresh_server: true,
        events: true,
        ..cpu(def("reflector_event_throughput", 200_000, 50_000, Target::Peers))
    },
    // Issue #37: N Pods shaped like a real cluster's, N/5 Secrets and N/10 ConfigMaps, one
    // informer of each, whole objects or metadata only; judged by the resident set once synced.
    // Not in --quick (a 100k-Pod server takes about 1.5 GB and its load a few seconds).
    ScenarioDef {
        metric: Metric::SteadyRss,
        pods: true,
        in_quick: false,
        sides: SCALE_SIDES,
        ..informer_def("scale_full", 100_000, Target::Scale)
    },
    ScenarioDef {
        metric: Metric::SteadyRss,
        pods: true,
        in_quick: false,
        sides: SCALE_SIDES,
        ..informer_def("scale_metadata", 100_000, Target::Scale)
    },
    // N objects listed by an informer with 3 handlers: 3N Add notifications delivered.
    ScenarioDef {
        server: true,
        sides: KC_GO_PB,
        ..def("event_fanout_3_handlers", 100_000, 20_000, Target::TwiceClientGo)
    },
];

#[derive(Debug)]
struct Options {
    quick: bool,
    filter: Option<String>,
    json: Option<PathBuf>,
    runs: usize,
    /// `--n N`: every selected scenario's N instead of its default (for a reduced scale run).
    n: Option<usize>,
    write: bool,
    /// `--cluster local`: the informer and reflector scenarios list and watch a real
    /// kube-apiserver (etcd + kube-apiserver of `cargo xtask e2e --cluster local`) instead of
    /// `kcache-bench serve`.
    cluster_local: bool,
    /// `--managed-fields`: what the informer and reflector sync scenarios do with
    /// `metadata.managedFields`. Only a real kube-apiserver writes them, so it matters with
    /// `--cluster local`.
    managed_fields: ManagedFields,
}

const USAGE: &str = "usage: cargo xtask bench [--quick] [--filter NAME] [--json PATH] [--runs R] [--n N] [--no-write] \
                     [--cluster local|embedded] [--managed-fields defaults|keep|strip]";

/// What every side of the sync scenarios does with `metadata.managedFields` (`--managed-fields`),
/// told to the scenario binaries by the environment variable `KCACHE_BENCH_STRIP_MANAGED_FIELDS`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum ManagedFields {
    /// Each library's default (the variable unset): kcache skips them while decoding,
    /// client-go and kube-runtime keep them.
    Defaults,
    /// Every side keeps them (`0`; kcache with `strip_managed_fields(false)`).
    Keep,
    /// Every side drops them (`1`): kcache while decoding, client-go with an informer transform
    /// as controller-runtime's `TransformStripManagedFields`, kube-runtime with `.modify`.
    Strip,
}

impl ManagedFields {
    /// The value of `KCACHE_BENCH_STRIP_MANAGED_FIELDS`, if it is set.
    fn env(self) -> Option<&'static str> {
        match self {
            Self::Defaults => None,
            Self::Keep => Some("0"),
            Self::Strip => Some("1"),
        }
    }
}

fn parse(args: &[String]) -> Result<Options> {
    let mut o = Options {
        quick: false,
        filter: None,
        json: None,
        runs: 0,
        n: None,
        write: true,
        cluster_local: false,
        managed_fields: ManagedFields::Defaults,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--quick" => o.quick = true,
            "--filter" => o.filter = Some(it.next().context("--filter needs a NAME")?.clone()),
            "--json" => o.json = Some(PathBuf::from(it.next().context("--json needs a PATH")?)),
            "--runs" => {
                let r = it.next().context("--runs needs a number")?;
                o.runs = r.parse().with_context(|| format!("--runs {r}"))?;
                if o.runs == 0 {
                    bail!("--runs must be at least 1");
                }
            }
            "--no-write" => o.write = false,
            "--n" => {
                let v = it.next().context("--n needs a number")?;
                o.n = Some(v.replace('_', "").parse().with_context(|| format!("--n {v}"))?);
            }
            "--strip-managed-fields" => o.managed_fields = ManagedFields::Strip,
            "--managed-fields" => {
                o.managed_fields = match it.next().map(String::as_str) {
                    Some("defaults") => ManagedFields::Defaults,
                    Some("keep") => ManagedFields::Keep,
                    Some("strip") => ManagedFields::Strip,
                    other => bail!("--managed-fields {other:?}: expected defaults, keep or strip"),
                }
            }
            "--cluster" => match it.next().map(String::as_str) {
                Some("local") => o.cluster_local = true,
                Some("embedded") => o.cluster_local = false,
                other => bail!("--cluster {other:?}: expected local or embedded"),
            },
            other => bail!("unknown argument `{other}`\n{USAGE}"),
        }
    }
    if o.runs == 0 {
        o.runs = if o.quick { 3 } else { 5 };
    }
    Ok(o)
}

/// The results of one side of one scenario.
#[derive(Debug, Default)]
struct SideResults {
    side: &'static str,
    lines: Vec<Value>,
    /// Why the side cannot run the scenario (its error line), or the first failure of a run.
    error: Option<String>,
    /// Runs that crashed or printed no result (the other runs still count).
    failed_runs: usize,
}

impl SideResults {
    fn values(&self, f: impl Fn(&Value) -> Option<f64>) -> Vec<f64> {
        self.lines.iter().filter_map(f).collect()
    }

    /// Per-run values of the scenario's metric.
    fn metric(&self, metric: Metric) -> Vec<f64> {
        self.values(|l| match metric {
            Metric::Throughput => l["ops_per_sec"].as_f64(),
            Metric::CpuEfficiency => {
                let cpu = l["cpu_seconds"].as_f64()?;
                Some(l["ops"].as_f64()? / cpu.max(1e-6))
            }
            Metric::PeakRss => l["peak_rss_bytes"].as_f64(),
            Metric::SteadyRss => l["extra"]["steady_rss_bytes"].as_f64(),
        })
    }
}

/// Median and relative spread ((max - min) / median) of some runs.
fn stats(v: &[f64]) -> Option<(f64, f64)> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let mid = s.len() / 2;
    let median = if s.len() % 2 == 1 { s[mid] } else { (s[mid - 1] + s[mid]) / 2.0 };
    let spread = if median > 0.0 { (s[s.len() - 1] - s[0]) / median } else { 0.0 };
    Some((median, spread))
}

/// A scenario's outcome.
#[derive(Debug)]
struct Report {
    def: &'static ScenarioDef,
    n: usize,
    sides: Vec<SideResults>,
}

impl Report {
    fn side(&self, name: &str) -> Option<&SideResults> {
        self.sides.iter().find(|s| s.side == name)
    }

    fn median(&self, side: &str) -> Option<f64> {
        self.median_of(side, self.def.metric)
    }

    /// Median of `metric` on `side`; for [`BEST_CLIENT_GO`], the better of the two client-go
    /// configurations' medians (higher, or lower for peak RSS).
    fn median_of(&self, side: &str, metric: Metric) -> Option<f64> {
        let pair = match side {
            BEST_CLIENT_GO => Some(("client-go", CLIENT_GO_PROTOBUF)),
            BEST_KCACHE => Some(("kcache", KCACHE_PROTOBUF)),
            _ => None,
        };
        if let Some((json, protobuf)) = pair {
            let json = self.median_of(json, metric);
            let protobuf = self.median_of(protobuf, metric);
            return match (json, protobuf) {
                (Some(a), Some(b)) if metric == Metric::PeakRss => Some(a.min(b)),
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
        }
        stats(&self.side(side)?.metric(metric)).map(|(m, _)| m)
    }

    /// Which client-go configuration [`BEST_CLIENT_GO`] stands for in this run.
    fn best_client_go(&self) -> Option<&'static str> {
        let best = self.median(BEST_CLIENT_GO)?;
        if self.median(CLIENT_GO_PROTOBUF) == Some(best) {
            Some(CLIENT_GO_PROTOBUF)
        } else {
            Some("client-go")
        }
    }

    /// The kcache side ratios are taken from: [`BEST_KCACHE`] on rows that also run kcache with
    /// protobuf, else `kcache`.
    fn kcache(&self) -> &'static str {
        if self.def.sides.contains(&KCACHE_PROTOBUF) { BEST_KCACHE } else { "kcache" }
    }

    /// Which kcache configuration [`BEST_KCACHE`] stands for in this run.
    fn best_kcache(&self) -> Option<&'static str> {
        let best = self.median(BEST_KCACHE)?;
        Some(if self.median(KCACHE_PROTOBUF) == Some(best) { KCACHE_PROTOBUF } else { "kcache" })
    }

    /// kcache / `other` of the metric's medians (higher is better).
    fn ratio(&self, other: &str) -> Option<f64> {
        Some(self.median(self.kcache())? / self.median(other)?)
    }

    /// kcache / `other` of the median ops per CPU second: less sensitive than wall time to other
    /// load on the machine (a descheduled process burns no CPU), shown beside the target ratio.
    fn cpu_ratio(&self, other: &str) -> Option<f64> {
        let eff = |side: &str| self.median_of(side, Metric::CpuEfficiency);
        Some(eff(self.kcache())? / eff(other)?)
    }

    /// The ratio the target is about.
    fn target_ratio(&self) -> Option<f64> {
        self.ratio(self.def.target.baseline())
    }

    /// Median peak RSS of a side.
    fn rss(&self, side: &str) -> Option<f64> {
        if side == BEST_KCACHE {
            // The peak RSS of the configuration the ratios were taken from.
            return self.rss(self.best_kcache()?);
        }
        stats(&self.side(side)?.values(|l| l["peak_rss_bytes"].as_f64())).map(|(m, _)| m)
    }

    fn met(&self) -> &'static str {
        if matches!(self.def.target, Target::Peers | Target::PeersRss) {
            let Some(best) = self.target_ratio() else {
                return "not yet measured";
            };
            let mut met = best >= self.def.target.threshold();
            if self.def.sides.contains(&"kube-runtime") {
                match self.ratio("kube-runtime") {
                    Some(kr) => met &= kr >= PEERS_KUBE_RUNTIME,
                    None => return "not yet measured",
                }
            }
            if self.def.target == Target::PeersRss {
                match (self.rss(self.kcache()), self.rss("client-go")) {
                    (Some(rss), Some(cg)) => met &= rss <= cg,
                    _ => return "not yet measured",
                }
            }
            return if met { "yes" } else { "no" };
        }
        if self.def.target == Target::Reflector {
            let (Some(time), Some(rss), Some(cg)) =
                (self.target_ratio(), self.rss("kcache"), self.rss("client-go"))
            else {
                return "not yet measured";
            };
            return if time >= 1.0 && rss <= cg { "yes" } else { "no" };
        }
        if self.def.target == Target::Scale {
            let (Some(cg), Some(kr)) = (self.ratio("client-go"), self.ratio("kube-runtime")) else {
                return "not yet measured";
            };
            return if cg <= 0.5 && kr <= 0.8 { "yes" } else { "no" };
        }
        if self.def.target == Target::Memory {
            let (Some(cg), Some(kr)) = (self.ratio(BEST_CLIENT_GO), self.ratio("kube-runtime")) else {
                return "not yet measured";
            };
            return if cg <= 0.6 && kr <= 1.0 { "yes" } else { "no" };
        }
        match self.target_ratio() {
            Some(r) if r >= self.def.target.threshold() => "yes",
            Some(_) => "no",
            None => "not yet measured",
        }
    }

    fn json(&self) -> Value {
        let sides: serde_json::Map<String, Value> = self
            .sides
            .iter()
            .map(|s| {
                let (median, spread) = stats(&s.metric(self.def.metric)).unzip();
                let v = json!({
                    "runs": s.lines,
                    "error": s.error,
                    "failed_runs": s.failed_runs,
                    "median": median,
                    "spread": spread,
                    "median_cpu_seconds": stats(&s.values(|l| l["cpu_seconds"].as_f64())).map(|x| x.0),
                    "median_peak_rss_bytes": stats(&s.values(|l| l["peak_rss_bytes"].as_f64())).map(|x| x.0),
                });
                (s.side.to_owned(), v)
            })
            .collect();
        json!({
            "scenario": self.def.name,
            "n": self.n,
            "metric": match self.def.metric {
                Metric::Throughput => "ops_per_sec",
                Metric::CpuEfficiency => "ops_per_cpu_second",
                Metric::PeakRss => "peak_rss_bytes",
                Metric::SteadyRss => "steady_rss_bytes",
            },
            "sides": sides,
            "ratio_kcache_client_go": self.ratio("client-go"),
            "ratio_kcache_client_go_protobuf": self.ratio(CLIENT_GO_PROTOBUF),
            "ratio_kcache_best_client_go": self.ratio(BEST_CLIENT_GO),
            "best_kcache": self.best_kcache(),
            "best_client_go": self.best_client_go(),
            "cpu_ratio_kcache_client_go": self.cpu_ratio("client-go"),
            "ratio_kcache_kube_runtime": self.ratio("kube-runtime"),
            "ratio_kcache_vecdeque": self.ratio("vecdeque"),
            "target": self.def.target.describe(self.def.metric),
            "met": self.met(),
        })
    }
}

/// `--filter` matches scenario names by substring.
fn selected(o: &Options) -> Vec<&'static ScenarioDef> {
    SCENARIOS
        .iter()
        .filter(|d| o.filter.as_deref().is_none_or(|f| d.name.contains(f)))
        .filter(|d| !o.quick || d.in_quick)
        .collect()
}

pub(crate) fn run(args: &[String]) -> Result<()> {
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return Ok(());
    }
    let opts = parse(args)?;
    if opts.filter.as_deref() == Some("sharding") {
        return sharding::run(&opts, args);
    }
    let root = crate::project_root();
    let sh = Shell::new()?;
    sh.change_dir(&root);

    let mut scenarios = selected(&opts);
    if scenarios.is_empty() {
        bail!("--filter {:?} matches no scenario", opts.filter.as_deref().unwrap_or(""));
    }

    let go_bin = build_go(&sh, &root)?;
    let rs_bin = build_rust(&sh, &root, opts.cluster_local)?;

    // On a real kube-apiserver the ConfigMaps are created through the API, so the server
    // scenarios run in increasing N and each tops the objects up; the scenarios whose server
    // changes its objects once watched (`serve --mutate`) need the embedded server.
    let mut plane = None;
    let mut loaded = 0usize;
    if opts.cluster_local {
        let (server, other): (Vec<_>, Vec<_>) = scenarios.into_iter().partition(|d| d.server);
        let (mut real, mutate): (Vec<_>, Vec<_>) = server.into_iter().partition(|d| !d.fresh_server);
        for d in &mutate {
            eprintln!(
                "bench: {} skipped on --cluster local (its server changes objects once watched)",
                d.name
            );
        }
        // The scale scenarios last, on a control plane of their own (see `scale_plane` below).
        real.sort_by_key(|d| (d.pods, if opts.quick { d.quick_n } else { d.n }));
        scenarios = other.into_iter().chain(real).collect();
        plane = Some(start_plane(&root, "")?);
    }
    if (opts.cluster_local || opts.managed_fields != ManagedFields::Defaults) && opts.write {
        eprintln!(
            "bench: --cluster local and --managed-fields keep|strip do not rewrite docs/benchmarks.md (use --json)"
        );
    }
    let mut kubeconfig = match &plane {
        Some(p) => Some(p.instance().server("kube-apiserver")?.kubeconfig.clone()),
        None => None,
    };
    // The Pods, Secrets and ConfigMaps of the scale scenarios loaded so far (they share them).
    let mut pods_loaded = 0usize;

    let started = Instant::now();
    let mut reports = Vec::new();
    for def in scenarios {
        let n = opts.n.unwrap_or(if opts.quick { def.quick_n } else { def.n });
        let mut sides: Vec<SideResults> =
            def.sides.iter().map(|s| SideResults { side: s, ..SideResults::default() }).collect();
        if kubeconfig.is_some() && def.pods && pods_loaded != n {
            // The scale scenarios' objects on a fresh kube-apiserver and etcd: the ConfigMaps of
            // the other scenarios would be in their informers' lists, and the earlier plane's
            // memory in the machine's. Started only once the earlier plane has stopped.
            drop(plane.take());
            let p = start_plane(&root, "-scale")?;
            let kc = p.instance().server("kube-apiserver")?.kubeconfig.clone();
            plane = Some(p);
            let t = Instant::now();
            let status = std::process::Command::new(&rs_bin)
                .arg("load")
                .arg("--kubeconfig")
                .arg(&kc)
                .args(["--pods", &n.to_string()])
                .status()?;
            if !status.success() {
                bail!(
                    "loading {n} Pods, {} Secrets and {} ConfigMaps into the local kube-apiserver failed",
                    n / 5,
                    n / 10
                );
            }
            eprintln!(
                "bench: loaded {n} Pods (with status), {} Secrets and {} ConfigMaps into kube-apiserver in {:.1?}",
                n / 5,
                n / 10,
                t.elapsed()
            );
            if let Some(p) = &plane {
                eprintln!("bench: what the loaded control plane holds: {}", plane_memory(&p.instance().dir));
            }
            kubeconfig = Some(kc);
            pods_loaded = n;
        }
        if let Some(kc) = &kubeconfig
            && def.server
            && !def.pods
            && loaded < n
        {
            let t = Instant::now();
            let status = std::process::Command::new(&rs_bin)
                .arg("load")
                .arg("--kubeconfig")
                .arg(kc)
                .args(["--from", &loaded.to_string(), "--configmaps", &n.to_string()])
                .status()?;
            if !status.success() {
                bail!("loading {n} ConfigMaps into the local kube-apiserver failed");
            }
            eprintln!("bench: loaded ConfigMaps {loaded}..{n} into kube-apiserver in {:.1?}", t.elapsed());
            loaded = n;
        }
        let shared = if def.server && !def.fresh_server && kubeconfig.is_none() {
            Some(if def.pods {
                Server::start_pods(&rs_bin, n)?
            } else {
                Server::start(&rs_bin, n, false, 0)?
            })
        } else {
            None
        };
        if let (Some(kc), true) = (&kubeconfig, def.server) {
            // One untimed run first, so no side pays for warming the apiserver's watch cache.
            let _ =
                run_one(&go_bin, &rs_bin, &def_run(def, "kcache", n, &opts), Some(Endpoint::Kubeconfig(kc)));
        }
        for _ in 0..opts.runs {
            // A side whose runs all fail is given up after the first two.
            for res in
                sides.iter_mut().filter(|s| s.error.is_none() && (s.failed_runs < 2 || !s.lines.is_empty()))
            {
                let fresh = match (def.fresh_server, def.events) {
                    (true, true) => Some(Server::start(&rs_bin, EVENT_OBJECTS, true, n)?),
                    (true, false) => Some(Server::start(&rs_bin, n, true, 0)?),
                    (false, _) => None,
                };
                let endpoint = match (&kubeconfig, shared.as_ref().or(fresh.as_ref())) {
                    (Some(kc), _) if def.server => Some(Endpoint::Kubeconfig(kc)),
                    (_, Some(s)) => Some(Endpoint::Url(&s.url)),
                    _ => None,
                };
                let outcome = run_one(&go_bin, &rs_bin, &def_run(def, res.side, n, &opts), endpoint);
                if let Some(server) = fresh {
                    server.stop();
                }
                match outcome {
                    Ok(line) => match line["error"].as_str() {
                        Some(e) => res.error = Some(e.to_owned()),
                        None if res.side == CLIENT_GO_PROTOBUF && !spoke_protobuf(&line) => {
                            // A server without protobuf answers JSON: that is the JSON side again,
                            // not a result of this one.
                            res.error = Some("not applicable: the server answered no protobuf".to_owned());
                        }
                        None => res.lines.push(line),
                    },
                    Err(e) => {
                        eprintln!("bench: {} {} run failed: {e:#}", def.name, res.side);
                        res.failed_runs += 1;
                    }
                }
            }
        }
        if let Some(server) = shared {
            server.stop();
        }
        let report = Report { def, n, sides };
        println!("{}", summary_line(&report));
        reports.push(report);
    }
    eprintln!("bench: {} scenario(s) in {:.0?}", reports.len(), started.elapsed());

    let command = command_line(args);
    let machine = machine(&sh, &root);
    if let Some(path) = &opts.json {
        let doc = json!({
            "command": command,
            "runs": opts.runs,
            "quick": opts.quick,
            "machine": machine,
            "scenarios": reports.iter().map(Report::json).collect::<Vec<_>>(),
        });
        std::fs::write(path, serde_json::to_string_pretty(&doc)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("bench: wrote {}", path.display());
    }
    drop(plane);
    if opts.write && !opts.cluster_local && opts.managed_fields == ManagedFields::Defaults {
        let path = root.join("docs/benchmarks.md");
        write_markdown(&path, &markdown(&reports, &machine, &command, &opts))?;
        eprintln!("bench: updated {}", path.display());
    }
    Ok(())
}

/// Starts the local control plane of `--cluster local`: one kube-apiserver with default
/// features and its etcd, in a state directory of this run's own (`suffix` tells two apart).
fn start_plane(root: &Path, suffix: &str) -> Result<crate::control_plane::ControlPlane> {
    let bins = crate::control_plane::ensure_binaries()?;
    let spec = crate::control_plane::Spec {
        servers: vec![crate::control_plane::ServerSpec::new("kube-apiserver")],
        detach: false,
        logs_on_failure: root.join("target/bench-logs"),
    };
    let dir = std::env::temp_dir().join(format!("kcache-bench-{}{suffix}", std::process::id()));
    crate::control_plane::ControlPlane::start(&bins, &dir, &spec)
}

/// The resident set of each process of a control plane (from the pid files in its state
/// directory, `/proc/PID/status`) and the size of etcd's data directory: what a scale run on
/// `--cluster local` needs of the machine besides the clients.
fn plane_memory(dir: &Path) -> String {
    let mut parts = Vec::new();
    for name in ["kube-apiserver", "etcd"] {
        let rss = std::fs::read_to_string(dir.join(format!("{name}.pid")))
            .ok()
            .and_then(|pid| std::fs::read_to_string(format!("/proc/{}/status", pid.trim())).ok())
            .and_then(|status| {
                let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
                line.split_whitespace().nth(1)?.parse::<u64>().ok()
            });
        match rss {
            Some(kib) => parts.push(format!("{name} RSS {} MiB", kib / 1024)),
            None => parts.push(format!("{name} RSS unknown")),
        }
    }
    let etcd_bytes: u64 = walk_size(&dir.join("etcd"));
    parts.push(format!("etcd data {} MiB", etcd_bytes >> 20));
    parts.join(", ")
}

/// The bytes of the files under `dir`, recursively.
fn walk_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => walk_size(&e.path()),
            _ => e.metadata().map(|m| m.len()).unwrap_or(0),
        })
        .sum()
}

/// Downloads the Go modules and builds `xtask/bench-go/bin/bench-go`.
fn build_go(sh: &Shell, root: &Path) -> Result<PathBuf> {
    let dir = root.join("xtask/bench-go");
    let _d = sh.push_dir(&dir);
    cmd!(sh, "go version").quiet().ignore_stdout().run().context(
        "the client-go side needs Go (see xtask/bench-go/go.mod for the version); install it and retry",
    )?;
    cmd!(sh, "go mod download").run()?;
    cmd!(sh, "go build -o bin/bench-go .").run()?;
    // The scale scenarios in a binary of their own (see bench-go/scale.go).
    cmd!(sh, "go build -tags scale -o bin/bench-go-scale .").run()?;
    Ok(dir.join("bin/bench-go"))
}

/// The binary the kcache side runs in: `kcache-bench` built without its default features, so the
/// process holds kcache's code and the harness but not kube-runtime or the test server, as the
/// client-go side's binary holds client-go alone. (Linking them in cost the kcache side 1.5 to
/// 1.8 MiB of file-backed RSS in `informer_memory_kube_rs`.)
const KCACHE_ONLY_BIN: &str = "kcache-bench-kcache";

/// The kcache side's binary for the scale scenarios: [`KCACHE_ONLY_BIN`] with the `scale`
/// feature. Kept apart because the scale scenarios' code (informers of Pods, Secrets and their
/// metadata) cost the other scenarios' kcache side about 3 MiB of RSS when linked in
/// (`informer_memory_kube_rs`: 27 MiB without, 30 MiB with, 2026-12-07); the client-go side
/// builds them with `-tags scale` into `bench-go-scale` for the same reason.
const KCACHE_SCALE_BIN: &str = "kcache-bench-kcache-scale";

/// Builds `kcache-bench` (release) three times: without default features, kept as
/// [`KCACHE_ONLY_BIN`] for the kcache side, then with them (server, vecdeque and kube-runtime
/// sides). Returns the second one's path. Both have the `tls` feature (kube's rustls) only when
/// `tls` asks for it (a real kube-apiserver): the embedded server speaks plain HTTP.
fn build_rust(sh: &Shell, root: &Path, tls: bool) -> Result<PathBuf> {
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    let target = if target.is_absolute() { target } else { root.join(target) };
    let bin = target.join("release/kcache-bench");
    let features: &[&str] = if tls { &["--features", "tls"] } else { &[] };
    cmd!(sh, "cargo build --release -p kcache-bench --no-default-features {features...}").run()?;
    std::fs::copy(&bin, bin.with_file_name(KCACHE_ONLY_BIN))
        .with_context(|| format!("copying {} to {KCACHE_ONLY_BIN}", bin.display()))?;
    cmd!(sh, "cargo build --release -p kcache-bench --no-default-features --features scale {features...}")
        .run()?;
    std::fs::copy(&bin, bin.with_file_name(KCACHE_SCALE_BIN))
        .with_context(|| format!("copying {} to {KCACHE_SCALE_BIN}", bin.display()))?;
    cmd!(sh, "cargo build --release -p kcache-bench {features...}").run()?;
    Ok(bin)
}

/// A `kcache-bench serve` process: the API server every side of an informer scenario talks to.
#[derive(Debug)]
struct Server {
    child: std::process::Child,
    url: String,
}

impl Server {
    /// Starts it loaded with `configmaps` ConfigMaps (changing them once watched with `mutate`:
    /// `updates` updates when non-zero, else the memory scenario's changes) and reads its URL.
    fn start(rs_bin: &Path, configmaps: usize, mutate: bool, updates: usize) -> Result<Server> {
        let mut command = std::process::Command::new(rs_bin);
        command.args(["serve", "--configmaps", &configmaps.to_string()]);
        if mutate {
            command.arg("--mutate");
        }
        if updates > 0 {
            command.args(["--updates", &updates.to_string()]);
        }
        Self::spawn(&mut command)
    }

    /// Spawns `command` and reads the URL it prints.
    fn spawn(command: &mut std::process::Command) -> Result<Server> {
        use std::io::BufRead as _;
        use std::process::Stdio;
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("starting `kcache-bench serve`")?;
        let mut line = String::new();
        let stdout = child.stdout.take().context("serve stdout")?;
        std::io::BufReader::new(stdout).read_line(&mut line)?;
        let v: Value = serde_json::from_str(&line).with_context(|| format!("serve said: {line:?}"))?;
        let url = v["url"].as_str().context("serve printed no url")?.to_owned();
        Ok(Server { child, url })
    }

    /// Starts it loaded with `pods` Pods, `pods / 5` Secrets and `pods / 10` ConfigMaps
    /// (`serve --pods`).
    fn start_pods(rs_bin: &Path, pods: usize) -> Result<Server> {
        Self::spawn(std::process::Command::new(rs_bin).args(["serve", "--pods", &pods.to_string()]))
    }

    /// Closes its standard input (which stops it; it reports the requests it served on stderr).
    fn stop(mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// The API server a scenario's sides talk to.
#[derive(Debug, Clone, Copy)]
enum Endpoint<'a> {
    /// A `kcache-bench serve` process.
    Url(&'a str),
    /// A real kube-apiserver, through its kubeconfig.
    Kubeconfig(&'a Path),
}

/// One side's run of one scenario.
struct SideRun<'a> {
    scenario: &'a str,
    side: &'a str,
    n: usize,
    managed_fields: ManagedFields,
}

fn def_run<'a>(def: &'a ScenarioDef, side: &'a str, n: usize, opts: &Options) -> SideRun<'a> {
    SideRun { scenario: def.name, side, n, managed_fields: opts.managed_fields }
}

/// The longest one side's run of one scenario may take before it is killed and counted as a
/// failed run (the longest healthy run, a 50k sync on a real server, takes under 20 s; a side that
/// hangs, as kube-runtime's memory scenario once did spinning past its own 60 s limit, must not
/// stall the whole comparison).
const RUN_TIMEOUT: Duration = Duration::from_secs(300);

/// Runs `command` to completion like `Command::output`, but kills it after `limit`.
fn output_within(command: &mut std::process::Command, limit: Duration) -> Result<std::process::Output> {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("running {command:?}"))?;
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut buf);
            }
            buf
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("{command:?} did not finish within {} s; killed", limit.as_secs());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    Ok(std::process::Output { status, stdout, stderr })
}

/// Runs one side of one scenario in its own process and returns its JSON line.
fn run_one(go_bin: &Path, rs_bin: &Path, run: &SideRun<'_>, server: Option<Endpoint<'_>>) -> Result<Value> {
    let SideRun { scenario, side, n, managed_fields } = *run;
    let n = n.to_string();
    // The protobuf configurations (xtask/bench-go/protobuf.go, kcache's
    // `ApiListerWatcher::protobuf(true)`); never inherited.
    let protobuf = side == CLIENT_GO_PROTOBUF || side == KCACHE_PROTOBUF;
    // The scale scenarios' kcache variants (`KCACHE_BENCH_COMPACT`, `KCACHE_BENCH_CACHE`);
    // never inherited either.
    let compact = side == KCACHE_COMPACT;
    let cache = match side {
        KCACHE_SERIALIZED => Some("serialized"),
        KCACHE_COMPRESSED => Some("compressed"),
        _ => None,
    };
    let side = if side == KCACHE_PROTOBUF || compact || cache.is_some() { "kcache" } else { side };
    let scale = scenario.starts_with("scale_");
    let mut command = if side == "client-go" || side == CLIENT_GO_PROTOBUF {
        // The scale scenarios run in binaries of their own (see KCACHE_SCALE_BIN).
        let mut c = if scale {
            std::process::Command::new(go_bin.with_file_name("bench-go-scale"))
        } else {
            std::process::Command::new(go_bin)
        };
        c.args(["-scenario", scenario, "-n", &n]);
        match server {
            Some(Endpoint::Url(url)) => {
                c.args(["-server", url]);
            }
            Some(Endpoint::Kubeconfig(kc)) => {
                c.arg("-kubeconfig").arg(kc);
            }
            None => {}
        }
        c
    } else {
        let bin = match (side, scale) {
            ("kcache", false) => rs_bin.with_file_name(KCACHE_ONLY_BIN),
            ("kcache", true) => rs_bin.with_file_name(KCACHE_SCALE_BIN),
            _ => rs_bin.to_path_buf(),
        };
        let mut c = std::process::Command::new(bin);
        c.args(["--scenario", scenario, "--side", side, "-n", &n]);
        match server {
            Some(Endpoint::Url(url)) => {
                c.args(["--server", url]);
            }
            Some(Endpoint::Kubeconfig(kc)) => {
                c.arg("--kubeconfig").arg(kc);
            }
            None => {}
        }
        c
    };
    // Read by the sync scenarios of both scenario binaries; unset, each side keeps its library's
    // default. Never inherited from the caller's environment.
    command.env_remove("KCACHE_BENCH_PROTOBUF");
    if protobuf {
        command.env("KCACHE_BENCH_PROTOBUF", "1");
    }
    command.env_remove("KCACHE_BENCH_COMPACT");
    command.env_remove("KCACHE_BENCH_CACHE");
    if compact {
        command.env("KCACHE_BENCH_COMPACT", "1");
    }
    if let Some(cache) = cache {
        command.env("KCACHE_BENCH_CACHE", cache);
    }
    command.env_remove("KCACHE_BENCH_STRIP_MANAGED_FIELDS");
    if let Some(v) = managed_fields.env() {
        command.env("KCACHE_BENCH_STRIP_MANAGED_FIELDS", v);
    }
    let out = output_within(&mut command, RUN_TIMEOUT)?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().rev().find(|l| l.trim_start().starts_with('{')).with_context(|| {
        format!("{command:?} printed no JSON line ({}): {}", out.status, String::from_utf8_lossy(&out.stderr))
    })?;
    serde_json::from_str(line).with_context(|| format!("bad JSON line from {command:?}: {line}"))
}

/// Whether a client-go result line's responses (`extra.response_types`, counted by media type)
/// include protobuf ones.
fn spoke_protobuf(line: &Value) -> bool {
    line["extra"]["response_types"].as_object().is_some_and(|t| {
        t.get("application/vnd.kubernetes.protobuf").and_then(Value::as_u64).unwrap_or(0) > 0
    })
}

fn fmt_metric(v: f64, metric: Metric) -> String {
    let unit = match metric {
        Metric::Throughput => "/s",
        Metric::CpuEfficiency => "/cpu-s",
        Metric::PeakRss => return format!("{:.1} MiB peak RSS", v / (1024.0 * 1024.0)),
        Metric::SteadyRss => return format!("{:.1} MiB steady RSS", v / (1024.0 * 1024.0)),
    };
    if v >= 1e9 {
        format!("{:.2} G{unit}", v / 1e9)
    } else if v >= 1e6 {
        format!("{:.2} M{unit}", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1} k{unit}", v / 1e3)
    } else {
        format!("{v:.1} {unit}")
    }
}

fn fmt_ratio(r: Option<f64>) -> String {
    r.map_or_else(|| "n/a".to_owned(), |r| format!("{r:.2}x"))
}

/// A side's median and spread, or why there is none.
fn side_cell(s: &SideResults, metric: Metric) -> String {
    let failed = if s.failed_runs > 0 { format!(", {} failed run(s)", s.failed_runs) } else { String::new() };
    match (stats(&s.metric(metric)), &s.error) {
        (Some((m, _)), _) if s.lines.len() == 1 => format!("{} (1 run){failed}", fmt_metric(m, metric)),
        (Some((m, spread)), _) => {
            format!("{} (spread {:.0}%){failed}", fmt_metric(m, metric), spread * 100.0)
        }
        (None, Some(e)) if e.starts_with("not yet implemented") => "not yet implemented".to_owned(),
        (None, Some(e)) if e.starts_with("not applicable") => {
            format!("n/a ({})", e.trim_start_matches("not applicable: "))
        }
        (None, Some(e)) => format!("error: {e}"),
        (None, None) => format!("no result{failed}"),
    }
}

/// The terminal line of a scenario, ending with the target ratio.
fn summary_line(r: &Report) -> String {
    let mut line = format!("{:<24}", r.def.name);
    for s in &r.sides {
        let _ = write!(line, " {}: {:<24}", s.side, side_cell(s, r.def.metric));
    }
    let base = r.def.target.baseline();
    for other in r.def.sides.iter().filter(|s| **s != "kcache" && **s != KCACHE_PROTOBUF && **s != base) {
        let _ = write!(line, " kcache/{other} {}", fmt_ratio(r.ratio(other)));
    }
    let _ = write!(
        line,
        " target {} (met: {}) kcache/{base} {}",
        r.def.target.describe(r.def.metric),
        r.met(),
        fmt_ratio(r.target_ratio())
    );
    line
}

fn command_line(args: &[String]) -> String {
    let mut c = "cargo xtask bench".to_owned();
    for a in args {
        c.push(' ');
        c.push_str(a);
    }
    c
}

/// nproc, CPU model, memory, toolchain and pinned Go module versions.
fn machine(sh: &Shell, root: &Path) -> Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, v)| v.trim()))
        .unwrap_or("unknown")
        .to_owned();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_kib: Option<u64> = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|v| v.parse().ok());
    let nproc = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    // Other work on the machine widens the spread: record how busy it was when the run started.
    let loadavg = std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ");
    let rustc = cmd!(sh, "rustc -V").quiet().read().unwrap_or_else(|_| "unknown".into());
    let go = cmd!(sh, "go version").quiet().read().unwrap_or_else(|_| "unknown".into());
    let gomod = std::fs::read_to_string(root.join("xtask/bench-go/go.mod")).unwrap_or_default();
    let module = |name: &str| {
        gomod
            .lines()
            .find_map(|l| l.trim().strip_prefix(name).and_then(|v| v.split_whitespace().next()))
            .unwrap_or("unknown")
            .to_owned()
    };
    json!({
        "nproc": nproc,
        "loadavg": loadavg,
        "cpu": cpu,
        "memory_gib": mem_kib.map(|k| (k as f64 / 1024.0 / 1024.0 * 10.0).round() / 10.0),
        "rustc": rustc,
        "go": go,
        "client_go": module("k8s.io/client-go "),
        "k8s_utils": module("k8s.io/utils "),
        "controller_runtime": module("sigs.k8s.io/controller-runtime "),
    })
}

fn mib(v: f64) -> String {
    format!("{:.0}", v / (1024.0 * 1024.0))
}

/// The generated section of docs/benchmarks.md.
fn markdown(reports: &[Report], machine: &Value, command: &str, o: &Options) -> String {
    let mut md = String::new();
    let m = |k: &str| machine[k].as_str().map_or_else(|| machine[k].to_string(), str::to_owned);
    let _ = writeln!(md, "Generated by `{command}` ({} runs per side, interleaved).\n", o.runs);
    let _ = writeln!(
        md,
        "Machine: {} CPUs ({}), {} GiB memory, load average {} at the start; {}; {}; client-go {}, \
         k8s.io/utils {}, controller-runtime {}.\n",
        m("nproc"),
        m("cpu"),
        m("memory_gib"),
        m("loadavg"),
        m("rustc"),
        m("go"),
        m("client_go"),
        m("k8s_utils"),
        m("controller_runtime"),
    );
    md.push_str(
        "Each cell is the median of the runs and their spread, (max - min) / median. Ratios \
         are kcache over the other side, higher is better; \"by CPU time\" compares ops per CPU \
         second of the whole process (all threads, Go's GC included), which other load on the \
         machine disturbs less than wall time. \"not yet implemented\" means the side \
         has no implementation of the scenario yet: no number is shown for it. Every workload is \
         defined in the doc comment of its Go function (`xtask/bench-go/*.go`) and of its Rust \
         counterpart (`xtask/bench-rs/src/scenarios/`).\n\n",
    );
    md.push_str(
        "| scenario | N | kcache | kcache protobuf | VecDeque | client-go | client-go protobuf | kube-runtime \
         | kcache / client-go | kcache / client-go by CPU time | kcache / best client-go | kcache / other \
         | target | met? |\n",
    );
    md.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for r in reports {
        let cell = |side: &str| r.side(side).map_or_else(|| "—".to_owned(), |s| side_cell(s, r.def.metric));
        let other = if r.def.sides.contains(&"vecdeque") {
            format!("{} (VecDeque)", fmt_ratio(r.ratio("vecdeque")))
        } else if r.def.sides.contains(&"kube-runtime") {
            format!("{} (kube-runtime)", fmt_ratio(r.ratio("kube-runtime")))
        } else {
            "—".to_owned()
        };
        let best = if r.def.sides.contains(&CLIENT_GO_PROTOBUF) {
            let name = |side: Option<&str>| match side {
                Some(CLIENT_GO_PROTOBUF | KCACHE_PROTOBUF) => "protobuf",
                Some(_) => "JSON",
                None => "?",
            };
            let kcache = if r.def.sides.contains(&KCACHE_PROTOBUF) {
                format!("kcache {} vs ", name(r.best_kcache()))
            } else {
                String::new()
            };
            format!("{} ({kcache}client-go {})", fmt_ratio(r.ratio(BEST_CLIENT_GO)), name(r.best_client_go()))
        } else {
            "—".to_owned()
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.def.name,
            r.n,
            cell("kcache"),
            cell(KCACHE_PROTOBUF),
            cell("vecdeque"),
            cell("client-go"),
            cell(CLIENT_GO_PROTOBUF),
            cell("kube-runtime"),
            fmt_ratio(r.ratio("client-go")),
            fmt_ratio(r.cpu_ratio("client-go")),
            best,
            other,
            r.def.target.describe(r.def.metric),
            r.met(),
        );
    }
    md.push_str("\nCPU seconds and peak RSS (MiB), medians, per side:\n\n");
    md.push_str(
        "| scenario | side | ns/op | CPU s | peak RSS MiB | RSS growth B/op |\n|---|---|---|---|---|---|\n",
    );
    for r in reports {
        for s in &r.sides {
            let med = |f: &dyn Fn(&Value) -> Option<f64>| stats(&s.values(f)).map(|x| x.0);
            let (Some(ns), Some(cpu), Some(rss)) = (
                med(&|l| l["ns_per_op"].as_f64()),
                med(&|l| l["cpu_seconds"].as_f64()),
                med(&|l| l["peak_rss_bytes"].as_f64()),
            ) else {
                continue;
            };
            let growth =
                med(&|l| l["bytes_per_item"].as_f64()).map_or_else(|| "—".into(), |b| format!("{b:.1}"));
            let _ = writeln!(
                md,
                "| {} | {} | {ns:.1} | {cpu:.3} | {} | {growth} |",
                r.def.name,
                s.side,
                mib(rss)
            );
        }
    }
    md
}

/// Replaces the text between the markers of docs/benchmarks.md, leaving the rest alone.
fn write_markdown(path: &Path, generated: &str) -> Result<()> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let (Some(b), Some(e)) = (text.find(MARK_BEGIN), text.find(MARK_END)) else {
        bail!("{} lacks the markers {MARK_BEGIN} ... {MARK_END}", path.display());
    };
    if e < b {
        bail!("{}: {MARK_END} comes before {MARK_BEGIN}", path.display());
    }
    let out = format!("{}{MARK_BEGIN}\n{}{MARK_END}{}", &text[..b], generated, &text[e + MARK_END.len()..]);
    std::fs::write(path, out).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--managed-fields` picks what every side does; `--strip-managed-fields` is `strip`; each
    /// mode tells the scenario binaries through the variable, `defaults` by leaving it unset.
    #[test]
    fn managed_fields_option() {
        let parsed = |args: &[&str]| {
            parse(&args.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>()).map(|o| o.managed_fields)
        };
        assert_eq!(parsed(&[]).unwrap(), ManagedFields::Defaults);
        assert_eq!(parsed(&["--managed-fields", "keep"]).unwrap(), ManagedFields::Keep);
        assert_eq!(parsed(&["--managed-fields", "strip"]).unwrap(), ManagedFields::Strip);
        assert_eq!(parsed(&["--managed-fields", "defaults"]).unwrap(), ManagedFields::Defaults);
        assert_eq!(parsed(&["--strip-managed-fields"]).unwrap(), ManagedFields::Strip);
        assert!(parsed(&["--managed-fields"]).is_err());
        assert!(parsed(&["--managed-fields", "drop"]).is_err());
        assert_eq!(ManagedFields::Defaults.env(), None);
        assert_eq!(ManagedFields::Keep.env(), Some("0"));
        assert_eq!(ManagedFields::Strip.env(), Some("1"));
    }

    fn side_with(side: &'static str, ops_per_sec: &[f64], rss: f64) -> SideResults {
        let lines = ops_per_sec
            .iter()
            .map(|v| json!({"ops_per_sec": v, "ops": 1, "cpu_seconds": 1.0 / v, "peak_rss_bytes": rss}))
            .collect();
        SideResults { side, lines, ..SideResults::default() }
    }

    fn reflector_list() -> &'static ScenarioDef {
        SCENARIOS.iter().find(|d| d.name == "reflector_synced_list_50k").unwrap()
    }

    /// Issue 38: the baseline is the better client-go configuration of the run, and kcache must
    /// also be 1.2x kube-runtime (and, on the reflector rows, no larger than JSON client-go).
    #[test]
    fn peers_target_takes_the_best_client_go() {
        let report = |kcache: f64, json: f64, pb: f64, kr: f64, rss: f64| Report {
            def: reflector_list(),
            n: 1,
            sides: vec![
                side_with("kcache", &[kcache], rss),
                side_with("client-go", &[json], 100.0),
                side_with(CLIENT_GO_PROTOBUF, &[pb], 100.0),
                side_with("kube-runtime", &[kr], 100.0),
            ],
        };
        let r = report(400.0, 100.0, 190.0, 300.0, 90.0);
        assert_eq!(r.best_client_go(), Some(CLIENT_GO_PROTOBUF));
        assert!((r.target_ratio().unwrap() - 400.0 / 190.0).abs() < 1e-9);
        assert_eq!(r.met(), "yes");
        // Twice JSON client-go is not enough when protobuf client-go is faster.
        assert_eq!(report(300.0, 100.0, 190.0, 200.0, 90.0).met(), "no");
        // Nor is twice client-go while behind 1.2x kube-runtime.
        assert_eq!(report(400.0, 100.0, 190.0, 350.0, 90.0).met(), "no");
        // Nor a larger peak RSS than client-go's on the reflector rows.
        assert_eq!(report(400.0, 100.0, 190.0, 300.0, 110.0).met(), "no");
        // A protobuf side with no result (a server without protobuf) leaves JSON as the best.
        let mut r = report(400.0, 100.0, 190.0, 300.0, 90.0);
        r.sides[2].lines.clear();
        r.sides[2].error = Some("not applicable: the server answered no protobuf".into());
        assert_eq!(r.best_client_go(), Some("client-go"));
        assert!((r.target_ratio().unwrap() - 4.0).abs() < 1e-9);
        assert_eq!(side_cell(&r.sides[2], Metric::Throughput), "n/a (the server answered no protobuf)");
    }

    /// Issue 38: on rows that also run kcache with protobuf, every ratio is taken from kcache's
    /// better configuration, as from client-go's, and the RSS target reads that configuration's.
    #[test]
    fn ratios_take_each_librarys_best_configuration() {
        let report = |kcache: f64, kcache_pb: f64, pb_rss: f64| Report {
            def: reflector_list(),
            n: 1,
            sides: vec![
                side_with("kcache", &[kcache], 90.0),
                side_with(KCACHE_PROTOBUF, &[kcache_pb], pb_rss),
                side_with("client-go", &[100.0], 100.0),
                side_with(CLIENT_GO_PROTOBUF, &[190.0], 100.0),
                side_with("kube-runtime", &[300.0], 100.0),
            ],
        };
        let r = report(300.0, 400.0, 90.0);
        assert_eq!(r.best_kcache(), Some(KCACHE_PROTOBUF));
        assert!((r.ratio(BEST_CLIENT_GO).unwrap() - 400.0 / 190.0).abs() < 1e-9);
        assert_eq!(r.met(), "yes");
        // The JSON configuration when it is the faster one.
        let r = report(400.0, 300.0, 90.0);
        assert_eq!(r.best_kcache(), Some("kcache"));
        assert!((r.ratio("kube-runtime").unwrap() - 400.0 / 300.0).abs() < 1e-9);
        // The better configuration's peak RSS is the one held against client-go's.
        assert_eq!(report(300.0, 400.0, 110.0).met(), "no");
    }

    /// Issue 38: the memory row holds kcache's peak against the smaller of the two client-go
    /// configurations' peaks, and the fan-out row its throughput against the faster one.
    #[test]
    fn memory_and_fan_out_rows_take_the_best_client_go() {
        let def = |name: &str| SCENARIOS.iter().find(|d| d.name == name).unwrap();
        let rss_side = |side: &'static str, rss: f64| SideResults {
            side,
            lines: vec![json!({"ops": 1, "ops_per_sec": 1.0, "cpu_seconds": 1.0, "peak_rss_bytes": rss})],
            ..SideResults::default()
        };
        let memory = |pb_rss: f64| Report {
            def: def("informer_memory_kube_rs"),
            n: 1,
            sides: vec![
                rss_side("kcache", 27.0),
                rss_side(KCACHE_PROTOBUF, 28.0),
                rss_side("client-go", 50.0),
                rss_side(CLIENT_GO_PROTOBUF, pb_rss),
                rss_side("kube-runtime", 28.0),
            ],
        };
        assert_eq!(memory(50.0).met(), "yes");
        // 0.6x JSON client-go's peak is not enough when protobuf client-go's is smaller.
        assert_eq!(memory(40.0).met(), "no");
        let fan_out = |pb: f64| Report {
            def: def("event_fanout_3_handlers"),
            n: 1,
            sides: vec![
                side_with("kcache", &[400.0], 1.0),
                side_with(KCACHE_PROTOBUF, &[300.0], 1.0),
                side_with("client-go", &[100.0], 1.0),
                side_with(CLIENT_GO_PROTOBUF, &[pb], 1.0),
            ],
        };
        assert_eq!(fan_out(150.0).met(), "yes");
        assert_eq!(fan_out(250.0).met(), "no");
    }

    #[test]
    fn protobuf_is_told_by_the_response_types() {
        let line = |types: Value| json!({"extra": {"response_types": types}});
        assert!(spoke_protobuf(&line(
            json!({"application/vnd.kubernetes.protobuf": 3, "application/json": 1})
        )));
        assert!(!spoke_protobuf(&line(json!({"application/json": 4}))));
        assert!(!spoke_protobuf(&json!({"extra": {}})));
    }

    #[test]
    fn median_and_spread() {
        assert_eq!(stats(&[]), None);
        assert_eq!(stats(&[3.0, 1.0, 2.0]), Some((2.0, 1.0)));
        assert_eq!(stats(&[1.0, 2.0, 3.0, 4.0]), Some((2.5, 1.2)));
    }

    #[test]
    fn ring_target_is_time_within_1_2x_of_vecdeque() {
        assert!((Target::RingFloor.threshold() - 1.0 / 1.2).abs() < 1e-12);
    }

    #[test]
    fn scenario_names_are_unique() {
        let mut names: Vec<_> = SCENARIOS.iter().map(|d| d.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), SCENARIOS.len());
    }
}
