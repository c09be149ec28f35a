//! Leader-election chaos: three kcache-leaderelection candidates on one Lease of kcache-testserver,
//! on one [`FakeClock`], while a seeded schedule kills them (and restarts them as new processes),
//! stops them cleanly, freezes them past their lease, cuts them off from the API server, slows
//! the server's answers to them, storms their updates with conflicts and takes the whole server
//! away; every candidate's clock runs at its own rate (clock skew) with its own wall-clock offset.
//!
//! Checked after each run:
//!
//! 1. **Safety**: at no instant do two candidates lead with a valid lease. A candidate leads from
//!    `on_started_leading` until its token is cancelled; a frozen process (a stopped process, a
//!    long pause) is not counted while frozen, since it can do nothing, and its lease is no longer
//!    valid when it wakes unless it renewed within RetryPeriod + RenewDeadline, in which case no
//!    one else can have taken it. Ends and starts at the same instant do not overlap.
//! 2. **Liveness**: after the last fault ends (every partition healed, every process thawed, every
//!    killed or stopped candidate restarted, the server reachable and fast again), some candidate
//!    leads within [`Durations::liveness_bound`]:
//!    `RetryPeriod + max restart delay + (LeaseDuration + 4.4 × RetryPeriod) / slowest clock rate`.
//!    Why: a leader still in office may fail the one renewal that was due during the faults and
//!    step down up to a RetryPeriod later; a candidate that stepped down is restarted within the
//!    restart delay; then every live candidate sees the lease's last change within one jittered
//!    retry period (2.2 × RetryPeriod of its own clock) and tries again within another once
//!    LeaseDuration has passed without a change; a clock slower than real time stretches those
//!    local durations by 1/rate.
//!
//! Time: the candidates and the server's slow answers run on one `FakeClock`; requests go over
//! the test server's in-memory connections; the runtime is tokio's current-thread runtime with a
//! paused clock, used only to know when every task waits for the fake clock (a paused-clock sleep
//! ends only when nothing else can run): then the driver advances the fake clock to the next
//! sleep or scheduled fault. A run of ten fake minutes takes a fraction of a second.
//!
//! Determinism: the schedule, the rates and the candidates' jitter are functions of the seed. A
//! failing seed is replayed with [`le_replay_command`].

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant as StdInstant, SystemTime};

use http::{Request, Response};
use kcache_leaderelection::{LeaderCallbacks, LeaderElectionConfig, LeaderElector, Outcome};
use kcache_reflector::{Clock, FakeClock, Sleep};
use kcache_test_support::rng::SplitMix64;
use kcache_testserver::{FaultId, RequestFault, RequestMatch, TestServer, Verb};
use kube::client::Body;
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Number of candidates.
const SLOTS: usize = 3;
/// Namespace and name of the Lease.
const NS: &str = "kube-system";
const LEASE: &str = "chaos";

/// The size and shape of a leader-election chaos run.
#[derive(Debug, Clone, PartialEq)]
pub struct LeConfig {
    /// Faults in the schedule.
    pub faults: usize,
    /// Faults start between one and this many lease durations from the start.
    pub horizon_leases: u32,
    /// Clock rates are drawn from `1 ± max_skew` (client-go tolerates rate ratios below
    /// `LeaseDuration / (RenewDeadline + RetryPeriod)`).
    pub max_skew: f64,
    /// Harness self-test: the slot whose candidate ignores its token's cancellation, i.e. keeps
    /// counting as leader after it stepped down; such runs must report overlaps.
    pub broken_slot: Option<usize>,
}

impl Default for LeConfig {
    fn default() -> Self {
        Self { faults: 10, horizon_leases: 20, max_skew: 0.05, broken_slot: None }
    }
}

/// The three durations of a run, chosen by the seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Durations {
    /// LeaseDuration.
    pub lease: Duration,
    /// RenewDeadline.
    pub renew: Duration,
    /// RetryPeriod.
    pub retry: Duration,
}

/// The durations a seed picks from: controller-runtime's defaults and a short set (the interop
/// tests' 3 s / 1 s / 0.5 s).
const DURATIONS: [Durations; 2] = [
    Durations {
        lease: Duration::from_secs(15),
        renew: Duration::from_secs(10),
        retry: Duration::from_secs(2),
    },
    Durations {
        lease: Duration::from_secs(3),
        renew: Duration::from_secs(1),
        retry: Duration::from_millis(500),
    },
];

impl Durations {
    /// A candidate whose run ended is started again (a new process, a new identity) within this:
    /// two thirds of a lease duration (10 s for controller-runtime's 15 s).
    pub fn max_restart_delay(&self) -> Duration {
        self.lease * 2 / 3
    }

    /// The liveness bound for the slowest clock rate `min_rate` (see the module docs):
    /// `RetryPeriod + max restart delay + (LeaseDuration + 4.4 × RetryPeriod) / min_rate`.
    pub fn liveness_bound(&self, min_rate: f64) -> Duration {
        self.retry + self.max_restart_delay() + (self.lease + self.retry.mul_f64(4.4)).div_f64(min_rate)
    }
}

/// Who a fault is aimed at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// Whoever leads when the fault starts (a random slot if nobody does).
    Leader,
    /// One slot.
    Slot(usize),
}

/// A scheduled fault.
#[derive(Debug, Clone, PartialEq)]
enum FaultKind {
    /// SIGKILL, then a new process after the delay.
    Kill { restart_after: Duration },
    /// A clean stop (cancel; releases if the candidate has ReleaseOnCancel), then a new process.
    Stop { restart_after: Duration },
    /// The process is frozen (no timer fires, no byte is read or sent) for this long.
    Freeze { duration: Duration },
    /// The API server is unreachable from the candidate for this long.
    Partition { duration: Duration },
    /// The API server is unreachable from everyone for this long.
    Outage { duration: Duration },
    /// The server answers the candidate this much later, for this long.
    Slow { delay: Duration, duration: Duration },
    /// The candidate's updates get 409 Conflict, at most this many, for this long.
    ConflictStorm { updates: usize, duration: Duration },
}

impl FaultKind {
    fn name(&self) -> &'static str {
        match self {
            FaultKind::Kill { .. } => "kill",
            FaultKind::Stop { .. } => "clean stop",
            FaultKind::Freeze { .. } => "freeze",
            FaultKind::Partition { .. } => "partition",
            FaultKind::Outage { .. } => "server outage",
            FaultKind::Slow { .. } => "slow responses",
            FaultKind::ConflictStorm { .. } => "conflict storm",
        }
    }
}

/// A seed's run: durations, the candidates' clocks and release policy, and the faults.
#[derive(Debug, Clone)]
struct Plan {
    durations: Durations,
    rates: [f64; SLOTS],
    wall_offsets: [i64; SLOTS],
    release_on_cancel: [bool; SLOTS],
    faults: Vec<(Duration, Target, FaultKind)>,
}

impl Plan {
    fn new(seed: u64, config: &LeConfig) -> Self {
        let mut rng = SplitMix64::new(seed);
        let durations = DURATIONS[rng.below(DURATIONS.len() as u64) as usize];
        let skew = |rng: &mut SplitMix64| 1.0 + config.max_skew * (rng.below(2001) as f64 / 1000.0 - 1.0);
        let rates = [skew(&mut rng), skew(&mut rng), skew(&mut rng)];
        let wall_offsets = [0; SLOTS].map(|_| rng.range(0, 7200) as i64 - 3600);
        let release_on_cancel = [0; SLOTS].map(|_| rng.chance(1, 2));
        // Fault lengths scale with the lease: up to about three lease durations.
        let lease_ms = durations.lease.as_millis() as u64;
        let span = |rng: &mut SplitMix64, lo: u64, hi: u64| {
            Duration::from_millis(rng.range(lease_ms * lo / 10, lease_ms * hi / 10))
        };
        let horizon_ms = lease_ms * u64::from(config.horizon_leases.max(2));
        let mut faults: Vec<(Duration, Target, FaultKind)> = (0..config.faults)
            .map(|_| {
                let at = Duration::from_millis(rng.range(durations.lease.as_millis() as u64, horizon_ms));
                let target = if rng.chance(1, 2) {
                    Target::Leader
                } else {
                    Target::Slot(rng.below(SLOTS as u64) as usize)
                };
                let restart = |rng: &mut SplitMix64| {
                    Duration::from_millis(rng.range(0, durations.max_restart_delay().as_millis() as u64))
                };
                let kind = match rng.below(7) {
                    0 => FaultKind::Kill { restart_after: restart(&mut rng) },
                    1 => FaultKind::Stop { restart_after: restart(&mut rng) },
                    2 => FaultKind::Freeze { duration: span(&mut rng, 3, 30) },
                    3 => FaultKind::Partition { duration: span(&mut rng, 3, 30) },
                    4 => FaultKind::Outage { duration: span(&mut rng, 3, 20) },
                    5 => FaultKind::Slow {
                        delay: Duration::from_millis(rng.range(lease_ms / 20, lease_ms / 2)),
                        duration: span(&mut rng, 3, 20),
                    },
                    _ => FaultKind::ConflictStorm {
                        updates: rng.range(1, 20) as usize,
                        duration: span(&mut rng, 3, 20),
                    },
                };
                (at, target, kind)
            })
            .collect();
        faults.sort_by_key(|(at, _, _)| *at);
        Self { durations, rates, wall_offsets, release_on_cancel, faults }
    }

    fn min_rate(&self) -> f64 {
        self.rates.iter().copied().fold(f64::INFINITY, f64::min)
    }
}

/// One candidate's clock: the shared fake clock at its own rate, its own wall-clock offset, and
/// frozen (no sleep ends) while its process is frozen.
#[derive(Debug, Clone)]
struct ChaosClock {
    base: FakeClock,
    origin: Instant,
    rate: f64,
    wall_offset: i64,
    frozen: watch::Receiver<bool>,
}

impl Clock for ChaosClock {
    fn now(&self) -> Instant {
        self.origin + (self.base.now() - self.origin).mul_f64(self.rate)
    }

    fn sleep(&self, d: Duration) -> Sleep {
        // Rounded up, so that the local clock has moved at least `d` when the sleep ends.
        let real = if d.is_zero() { d } else { d.div_f64(self.rate) + Duration::from_nanos(1) };
        let sleep = self.base.sleep(real);
        let mut frozen = self.frozen.clone();
        Box::pin(async move {
            sleep.await;
            let _ = frozen.wait_for(|f| !*f).await;
        })
    }

    fn wall_now(&self) -> SystemTime {
        let w = self.base.wall_now();
        let off = Duration::from_secs(self.wall_offset.unsigned_abs());
        if self.wall_offset >= 0 { w + off } else { w - off }
    }
}

/// One candidate's connection to the server: the test server's in-memory client, held while the
/// process is frozen (a frozen process sends and reads nothing).
#[derive(Clone)]
struct ChaosTransport {
    inner: kube::Client,
    frozen: watch::Receiver<bool>,
}

impl tower::Service<Request<Body>> for ChaosTransport {
    type Response = Response<Body>;
    type Error = kube::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, kube::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        let (inner, mut frozen) = (self.inner.clone(), self.frozen.clone());
        Box::pin(async move {
            let _ = frozen.wait_for(|f| !*f).await;
            let resp = inner.send(req).await;
            let _ = frozen.wait_for(|f| !*f).await;
            resp
        })
    }
}

/// What the harness records, on the global fake time (since the run's start).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Mark {
    /// An incarnation's leadership ended (token cancelled, or the process killed).
    End,
    /// Frozen.
    Freeze,
    /// Thawed.
    Thaw,
    /// Leadership started.
    Start,
}

/// The record of a run: `(time, incarnation, mark)`.
type Timeline = Arc<Mutex<Vec<(Duration, String, Mark)>>>;

/// A running incarnation of a slot.
struct Incarnation {
    id: String,
    run: JoinHandle<kcache_leaderelection::Result<Outcome>>,
    stop: CancellationToken,
    frozen: watch::Sender<bool>,
}

/// What a run did and found.
#[derive(Debug, Clone, Default)]
pub struct LeReport {
    /// The seed.
    pub seed: u64,
    /// Faults injected, by kind.
    pub faults: BTreeMap<&'static str, u64>,
    /// Leaderships (incarnations that led).
    pub leaderships: u64,
    /// Time from the end of the last fault to a leader.
    pub recovery: Duration,
    /// The liveness bound of this run.
    pub bound: Duration,
    /// Broken invariants.
    pub violations: Vec<String>,
    /// What happened, in order (faults applied, leaderships, freezes), for a failing seed.
    pub trace: Vec<String>,
    /// Real time the run took.
    pub elapsed: Duration,
    /// Requests the server answered.
    pub requests: usize,
    /// The run's durations.
    pub durations: Option<Durations>,
}

impl LeReport {
    /// Whether every check passed.
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }
}

/// The command that replays `seed`.
pub fn le_replay_command(seed: u64, config: &LeConfig) -> String {
    let mut cmd = format!("cargo xtask chaos leader-election --runs 1 --seed {seed}");
    let default = LeConfig::default();
    if config.faults != default.faults {
        cmd.push_str(&format!(" --faults {}", config.faults));
    }
    cmd
}

/// Runs one seed on a runtime of its own.
pub fn run_leader_election(seed: u64, config: &LeConfig) -> LeReport {
    let started = StdInstant::now();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a tokio runtime");
    let mut report = rt.block_on(run(seed, config));
    report.elapsed = started.elapsed();
    report
}

/// Runs seeds `first..first + runs`, one runtime per run, on as many threads as the machine has
/// cores; the reports come back in seed order.
pub fn run_many(first: u64, runs: u64, config: &LeConfig) -> Vec<LeReport> {
    let next = std::sync::atomic::AtomicU64::new(0);
    let reports = Mutex::new(Vec::new());
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(runs.max(1) as usize);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if i >= runs {
                        break;
                    }
                    let report = run_leader_election(first.wrapping_add(i), config);
                    reports.lock().push(report);
                }
            });
        }
    });
    let mut reports = reports.into_inner();
    reports.sort_by_key(|r| r.seed);
    reports
}

/// Lets every task run until all of them wait: on the paused runtime a sleep ends only when
/// nothing else can run.
async fn idle() {
    tokio::time::sleep(Duration::from_millis(1)).await;
}

struct Harness {
    server: TestServer,
    clock: FakeClock,
    t0: Instant,
    plan: Plan,
    seed: u64,
    broken_slot: Option<usize>,
    timeline: Timeline,
    slots: [Option<Incarnation>; SLOTS],
    generation: [u64; SLOTS],
}

impl Harness {
    fn now(&self) -> Duration {
        self.clock.now() - self.t0
    }

    fn mark(&self, id: &str, mark: Mark) {
        self.timeline.lock().push((self.now(), id.to_string(), mark));
    }

    /// Starts a new incarnation (a new process, a new identity) in `slot`.
    fn start(&mut self, slot: usize) {
        self.generation[slot] += 1;
        let id = format!("c{slot}-{}", self.generation[slot]);
        let (frozen_tx, frozen_rx) = watch::channel(false);
        let clock = ChaosClock {
            base: self.clock.clone(),
            origin: self.t0,
            rate: self.plan.rates[slot],
            wall_offset: self.plan.wall_offsets[slot],
            frozen: frozen_rx.clone(),
        };
        let transport =
            ChaosTransport { inner: self.server.in_memory_client_for_token(&user(slot)), frozen: frozen_rx };
        let client = kube::Client::new(transport, NS);
        let d = self.plan.durations;
        let config = LeaderElectionConfig::new(NS, LEASE, id.clone())
            .lease_duration(d.lease)
            .renew_deadline(d.renew)
            .retry_period(d.retry)
            .release_on_cancel(self.plan.release_on_cancel[slot]);
        let (timeline, base, t0) = (self.timeline.clone(), self.clock.clone(), self.t0);
        let (mark_id, broken) = (id.clone(), self.broken_slot == Some(slot));
        let callbacks = LeaderCallbacks::new(
            move |leading: CancellationToken| {
                timeline.lock().push((base.now() - t0, mark_id.clone(), Mark::Start));
                let (timeline, base, id) = (timeline.clone(), base.clone(), mark_id.clone());
                if broken {
                    return; // never records the end: keeps "leading"
                }
                tokio::spawn(async move {
                    leading.cancelled().await;
                    timeline.lock().push((base.now() - t0, id, Mark::End));
                });
            },
            || {},
        );
        let elector = LeaderElector::builder(client, config, callbacks)
            .clock(clock)
            .jitter_seed(self.seed ^ ((slot as u64) << 32) ^ self.generation[slot])
            .build()
            .expect("valid config");
        let stop = CancellationToken::new();
        let run = tokio::spawn({
            let stop = stop.clone();
            async move { elector.run(stop).await }
        });
        self.slots[slot] = Some(Incarnation { id, run, stop, frozen: frozen_tx });
    }

    /// The slot whose candidate leads now (per the timeline), if any.
    fn leader(&self) -> Option<usize> {
        let tl = self.timeline.lock();
        let mut leading: BTreeSet<&str> = BTreeSet::new();
        for (_, id, m) in tl.iter() {
            match m {
                Mark::Start => {
                    leading.insert(id);
                }
                Mark::End => {
                    leading.remove(id.as_str());
                }
                _ => {}
            }
        }
        (0..SLOTS).find(|s| self.slots[*s].as_ref().is_some_and(|i| leading.contains(i.id.as_str())))
    }
}

/// The bearer token (and user) of a slot: faults aimed at a slot match its user, whichever
/// incarnation runs.
fn user(slot: usize) -> String {
    format!("c{slot}")
}

/// A future action of the driver.
#[derive(Debug, Clone)]
enum Action {
    Fault(Target, FaultKind),
    Restart(usize),
    Thaw(usize, String),
    Heal(FaultId),
}

async fn run(seed: u64, config: &LeConfig) -> LeReport {
    let plan = Plan::new(seed, config);
    let clock = FakeClock::new();
    let mut builder = TestServer::builder().clock(clock.clone()).token("admin", "admin", &["system:masters"]);
    for slot in 0..SLOTS {
        builder = builder.token(user(slot), user(slot), &["system:masters"]);
    }
    let server = builder.start().await;
    let mut report = LeReport { seed, ..LeReport::default() };
    let mut rng = SplitMix64::new(seed ^ 0x5eed_0000_0000_0000);
    let mut h = Harness {
        server,
        t0: clock.now(),
        clock,
        plan: plan.clone(),
        seed,
        broken_slot: config.broken_slot,
        timeline: Arc::default(),
        slots: [None, None, None],
        generation: [0; SLOTS],
    };
    for slot in 0..SLOTS {
        h.start(slot);
    }
    let mut actions: Vec<(Duration, Action)> =
        plan.faults.iter().map(|(at, t, k)| (*at, Action::Fault(*t, k.clone()))).collect();
    let mut last_fault_end = Duration::ZERO;
    let bound = plan.durations.liveness_bound(plan.min_rate());
    report.bound = bound;
    loop {
        idle().await;
        let now = h.now();
        // Candidates whose run ended by itself (lost the lease, or stopped) come back later as
        // new processes, as a Deployment's pods do.
        let mut acted = false;
        for slot in 0..SLOTS {
            let ended = h.slots[slot].as_ref().is_some_and(|i| i.run.is_finished());
            if ended {
                h.slots[slot] = None;
                let delay = Duration::from_millis(
                    rng.range(0, plan.durations.max_restart_delay().as_millis() as u64),
                );
                actions.push((now + delay, Action::Restart(slot)));
                acted = true;
            }
        }
        actions.sort_by_key(|(at, _)| *at);
        while actions.first().is_some_and(|(at, _)| *at <= now) {
            let (_, action) = actions.remove(0);
            apply(&mut h, action, &mut actions, &mut report, &mut last_fault_end);
            acted = true;
        }
        if acted {
            // Whatever the actions woke (a thawed process, a new one) runs at this instant,
            // before time moves on.
            continue;
        }
        let faults_pending = actions.iter().any(|(_, a)| !matches!(a, Action::Restart(_)));
        let end = last_fault_end.max(plan.faults.last().map_or(Duration::ZERO, |f| f.0))
            + bound
            + plan.durations.lease;
        if !faults_pending && now >= end {
            break;
        }
        let next_action = actions.first().map(|(at, _)| at.saturating_sub(now));
        let next_sleep = h.clock.pending_sleeps().into_iter().next();
        let step = [next_action, next_sleep, Some(end.saturating_sub(now))]
            .into_iter()
            .flatten()
            .filter(|d| !d.is_zero())
            .min()
            .unwrap_or(Duration::from_millis(1));
        h.clock.advance(step);
    }
    let run_end = h.now();
    report.requests = h.server.request_log().entries().len();
    report.durations = Some(plan.durations);
    for slot in 0..SLOTS {
        if let Some(inc) = h.slots[slot].take() {
            inc.run.abort();
        }
    }
    idle().await;
    let timeline = h.timeline.lock().clone();
    check(&timeline, run_end, last_fault_end, bound, &mut report);
    if !report.passed() {
        let mut trace: Vec<(Duration, String)> =
            timeline.iter().map(|(t, id, m)| (*t, format!("{id} {m:?}"))).collect();
        trace.extend(report.trace.drain(..).map(|l| {
            let (t, rest) = l.split_once(' ').unwrap_or(("0", &l));
            (Duration::from_nanos(t.parse().unwrap_or(0)), rest.to_string())
        }));
        trace.sort_by_key(|(t, _)| *t);
        report.trace = trace.into_iter().map(|(t, l)| format!("{t:>12.3?} {l}")).collect();
    }
    report
}

fn apply(
    h: &mut Harness,
    action: Action,
    actions: &mut Vec<(Duration, Action)>,
    report: &mut LeReport,
    last_fault_end: &mut Duration,
) {
    let now = h.now();
    match action {
        Action::Restart(slot) => {
            report.trace.push(format!("{} restart slot c{slot}", now.as_nanos()));
            if h.slots[slot].is_none() {
                h.start(slot);
            }
        }
        Action::Thaw(slot, id) => {
            report.trace.push(format!("{} thaw {id}", now.as_nanos()));
            *last_fault_end = (*last_fault_end).max(now);
            if let Some(inc) = &h.slots[slot]
                && inc.id == id
            {
                inc.frozen.send_replace(false);
                h.mark(&id, Mark::Thaw);
            }
        }
        Action::Heal(id) => {
            report.trace.push(format!("{} heal {id:?}", now.as_nanos()));
            *last_fault_end = (*last_fault_end).max(now);
            h.server.faults().remove(id);
        }
        Action::Fault(target, kind) => {
            *report.faults.entry(kind.name()).or_default() += 1;
            let slot = match target {
                Target::Slot(s) => s,
                Target::Leader => h.leader().unwrap_or(now.subsec_nanos() as usize % SLOTS),
            };
            report.trace.push(format!("{} fault on slot c{slot} ({target:?}): {kind:?}", now.as_nanos()));
            let faults = h.server.faults();
            match kind {
                FaultKind::Kill { restart_after } | FaultKind::Stop { restart_after } => {
                    if let Some(inc) = h.slots[slot].take() {
                        if matches!(kind, FaultKind::Kill { .. }) {
                            // SIGKILL: the process is gone at once; nothing it has not sent is sent.
                            inc.run.abort();
                        } else {
                            inc.stop.cancel();
                            // A clean stop: the run ends (and releases) on its own; keep it
                            // running to the end, but it is no longer this slot's process.
                            tokio::spawn(async move {
                                let _ = inc.run.await;
                            });
                        }
                    }
                    *last_fault_end = (*last_fault_end).max(now + restart_after);
                    actions.push((now + restart_after, Action::Restart(slot)));
                }
                FaultKind::Freeze { duration } => {
                    if let Some(inc) = &h.slots[slot]
                        && !*inc.frozen.borrow()
                    {
                        inc.frozen.send_replace(true);
                        h.mark(&inc.id, Mark::Freeze);
                        actions.push((now + duration, Action::Thaw(slot, inc.id.clone())));
                    }
                }
                FaultKind::Partition { duration } => {
                    let id = faults.unreachable(RequestMatch::all().user(user(slot)));
                    actions.push((now + duration, Action::Heal(id)));
                }
                FaultKind::Outage { duration } => {
                    let id = faults.unreachable(RequestMatch::all());
                    actions.push((now + duration, Action::Heal(id)));
                }
                FaultKind::Slow { delay, duration } => {
                    let id = faults.slow_responses(RequestMatch::all().user(user(slot)), delay);
                    actions.push((now + duration, Action::Heal(id)));
                }
                FaultKind::ConflictStorm { updates, duration } => {
                    let id = faults.fail_requests_until_removed(
                        updates,
                        RequestFault::conflict("leases.coordination.k8s.io", LEASE)
                            .verb(Verb::Update)
                            .user(user(slot)),
                    );
                    actions.push((now + duration, Action::Heal(id)));
                }
            }
        }
    }
}

/// Checks the timeline: safety at every instant, liveness after the last fault.
fn check(
    timeline: &[(Duration, String, Mark)],
    run_end: Duration,
    last_fault_end: Duration,
    bound: Duration,
    report: &mut LeReport,
) {
    // The harness stops everyone at `run_end`: those ends are not part of the run.
    let mut events: Vec<_> = timeline.iter().filter(|(t, _, _)| *t < run_end).cloned().collect();
    // In time order; events of one instant keep the order they happened in (a candidate that
    // starts and ends at one instant ends), and the count is taken after all of them (a
    // hand-over at one instant is not an overlap).
    events.sort_by_key(|e| e.0);
    let mut leading: BTreeSet<String> = BTreeSet::new();
    let mut frozen: BTreeSet<String> = BTreeSet::new();
    let acting = |leading: &BTreeSet<String>, frozen: &BTreeSet<String>| -> Vec<String> {
        leading.iter().filter(|id| !frozen.contains(*id)).cloned().collect()
    };
    let mut recovered: Option<Duration> = None;
    let mut past_end_of_faults = false;
    let mut i = 0;
    while i < events.len() {
        let t = events[i].0;
        if !past_end_of_faults && t > last_fault_end {
            past_end_of_faults = true;
            // Someone leads at the moment the faults end.
            if !acting(&leading, &frozen).is_empty() {
                recovered = Some(Duration::ZERO);
            }
        }
        while i < events.len() && events[i].0 == t {
            let (_, id, m) = &events[i];
            match m {
                Mark::Start => {
                    leading.insert(id.clone());
                    report.leaderships += 1;
                }
                Mark::End => {
                    leading.remove(id);
                }
                Mark::Freeze => {
                    frozen.insert(id.clone());
                }
                Mark::Thaw => {
                    frozen.remove(id);
                }
            }
            i += 1;
        }
        let now_acting = acting(&leading, &frozen);
        if now_acting.len() > 1 {
            report
                .violations
                .push(format!("at {t:?} {} lead at once with valid leases", now_acting.join(" and ")));
        }
        if recovered.is_none() && t >= last_fault_end && !now_acting.is_empty() {
            recovered = Some(t - last_fault_end);
        }
    }
    let at_end = acting(&leading, &frozen);
    if recovered.is_none() && !past_end_of_faults && !at_end.is_empty() {
        recovered = Some(Duration::ZERO);
    }
    match recovered {
        Some(r) => {
            report.recovery = r;
            if r > bound {
                report.violations.push(format!(
                    "a leader only {r:?} after the last fault ended at {last_fault_end:?}, more than the bound {bound:?}"
                ));
            }
        }
        None => report.violations.push(format!("no leader after the last fault ended at {last_fault_end:?}")),
    }
    if at_end.is_empty() {
        report.violations.push("nobody leads at the end of the run".to_string());
    }
}
