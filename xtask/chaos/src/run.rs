//! One chaos run: start the server and the pipeline, play the schedule, clear the faults, wait
//! for quiescence, then check convergence and every handler's log.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kcache_informer::{
    FifoKind, HandlerOptions, HandlerRegistration, HasSynced, InformerScope, ListenerMode,
    SharedIndexInformer, SharedInformerFactory, wait_for_cache_sync,
};
use kcache_reflector::{ApiListerWatcher, ErrorKind, FakeClock, ReflectorConfig, ReflectorMetrics};
use kcache_testserver::{Faults, RequestFault, TestServer, Verb, WatchFault};
use kcache_workqueue::{ItemExponentialFailureRateLimiter, RateLimitingQueue, run_workers};
use parking_lot::Mutex;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::checker::{Allow, KeyHistory, LogStats, ServerEvent, check_handler};
use crate::lister_watcher::ContinueExpiringLw;
use crate::recorder::{HandlerLog, KeyQueue, Progress, Reconciler, RecordingHandler, diff, rv_of};
use crate::schedule::{Fault, Schedule, Step, Write, key_name, key_namespace};
use crate::{Config, RunReport};

/// Resync period of the handlers that have one. It is longer than any backoff the clock driver
/// advances through on its own, so resyncs fire only as often as backoffs and clock jumps move
/// the fake clock, instead of in a hot loop.
const RESYNC: Duration = Duration::from_secs(300);
/// The clock driver completes any pending sleep this short at once: every backoff (at most
/// 2 x 30 s) and Retry-After, but not resync timers or watch timeouts.
const AUTO_ADVANCE: Duration = Duration::from_secs(61);
/// A clock jump: past the longest watch timeout (10 min) plus the hung-watch grace.
const CLOCK_JUMP: Duration = Duration::from_secs(660);
/// How long past its timeout a silent watch is kept (the default is 30 s).
const HUNG_GRACE: Duration = Duration::from_secs(5);
/// Page size of the paginated informer (so continue tokens exist).
const PAGE_SIZE: u32 = 100;
/// Longest a `Settle` step waits for the handlers to catch up.
const SETTLE_AT_MOST: Duration = Duration::from_millis(5);
/// Without the final restart: how long the live watches get to deliver the final state before
/// the fake clock jumps past their timeouts (bookmarks come every second, so a stream that missed
/// a wake-up but recovers on its next bookmark still converges in time).
const LIVE_WAIT: Duration = Duration::from_secs(3);
/// Violations reported per run (the count is always reported).
const MAX_REPORTED: usize = 10;

/// Runs `seed` on a fresh multi-threaded Tokio runtime (two workers) and returns its report.
///
/// # Panics
///
/// If the runtime cannot be built.
pub fn run_blocking(seed: u64, config: &Config) -> RunReport {
    let rt = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(rt) => rt,
        Err(e) => panic!("kcache-chaos: cannot build a tokio runtime: {e}"),
    };
    let report = rt.block_on(run(seed, config));
    rt.shutdown_timeout(Duration::from_secs(5));
    report
}

/// The writes made so far and the server history they produced.
struct Model {
    namespaces: usize,
    histories: HashMap<String, KeyHistory>,
    keys: Vec<String>,
    writes: u64,
}

impl Model {
    fn new(config: &Config) -> Self {
        let keys = (0..config.keys)
            .map(|k| format!("{}/{}", key_namespace(k, config.namespaces), key_name(k)))
            .collect();
        Self { namespaces: config.namespaces, histories: HashMap::new(), keys, writes: 0 }
    }

    fn apply(&mut self, server: &TestServer, write: Write, step: usize) -> Result<(), String> {
        let objects = server.objects();
        let (k, event) = match write {
            Write::Create(k) => (k, ServerEvent::Added),
            Write::Update(k) => (k, ServerEvent::Modified),
            Write::Delete(k) => (k, ServerEvent::Deleted),
        };
        let (ns, name) = (key_namespace(k, self.namespaces), key_name(k));
        let rv = if event == ServerEvent::Deleted {
            if !objects.delete("", "v1", "configmaps", &ns, &name) {
                return Err(format!("model error: {write} found nothing to delete"));
            }
            // The churn is the only writer, so the server's resourceVersion is the delete's.
            server.resource_version()
        } else {
            let cm = json!({"metadata": {"name": name, "namespace": ns}, "data": {"step": step.to_string()}});
            objects.upsert("", "v1", "configmaps", cm).map_err(|e| format!("{write}: {e}"))?
        };
        self.histories.entry(self.keys[k].clone()).or_default().push(rv, event);
        self.writes += 1;
        Ok(())
    }

    /// Present keys and their resourceVersions, optionally in one namespace.
    fn expected(&self, namespace: Option<&str>) -> HashMap<String, u64> {
        self.histories
            .iter()
            .filter(|(k, _)| in_namespace(k, namespace))
            .filter_map(|(k, h)| Some((k.clone(), h.final_state()?)))
            .collect()
    }
}

fn in_namespace(key: &str, namespace: Option<&str>) -> bool {
    namespace.is_none_or(|ns| key.split_once('/').is_some_and(|(n, _)| n == ns))
}

/// An informer under test, with what it needs for the checks.
struct UnderTest {
    name: &'static str,
    informer: SharedIndexInformer<ConfigMap>,
    namespace: Option<String>,
}

impl UnderTest {
    fn mismatch(&self, expected: &HashMap<String, u64>) -> Option<String> {
        let cache: HashMap<String, u64> =
            self.informer.lister().list().iter().map(|cm| (crate::recorder::key_of(cm), rv_of(cm))).collect();
        diff(&cache, expected).map(|d| format!("informer {} cache: {d}", self.name))
    }
}

fn reflector_config(name: &str, seed: u64, use_watch_list: bool, page_size: Option<u32>) -> ReflectorConfig {
    ReflectorConfig {
        name: name.to_owned(),
        use_watch_list,
        page_size,
        hung_watch_grace: HUNG_GRACE,
        seed: Some(seed),
        ..ReflectorConfig::default()
    }
}

/// Counts the errors watches ended with, as `watch-ended <kind>`: the watch error handler hears
/// only what ends a list-and-watch attempt (a failed LIST, a watch that could not be opened),
/// counted as `watch-error <kind>`, as client-go's.
#[derive(Debug)]
struct WatchEnds(Arc<Mutex<BTreeMap<String, u64>>>);

impl ReflectorMetrics for WatchEnds {
    fn watch_ended(&self, _: &str, error: Option<ErrorKind>) {
        if let Some(kind) = error {
            *self.0.lock().entry(format!("watch-ended {kind:?}")).or_default() += 1;
        }
    }
}

/// Everything the pipeline records while it runs.
struct Pipeline {
    informers: Vec<UnderTest>,
    logs: Vec<Arc<HandlerLog>>,
    registrations: Vec<HandlerRegistration<ConfigMap>>,
    reconciler: Arc<Reconciler>,
    queue: KeyQueue,
    progress: Arc<Progress>,
    /// `watch-error <kind>` (the watch error handler) and `watch-ended <kind>` counts.
    watch_errors: Arc<Mutex<BTreeMap<String, u64>>>,
    /// Continue tokens still to expire (see [`ContinueExpiringLw`]).
    armed: Arc<AtomicU64>,
    /// [`Config::lose_notification`], for the first handler.
    lose_notification: Option<u64>,
}

impl Pipeline {
    fn add_handler(
        &mut self,
        informer: usize,
        handler: &str,
        resync: bool,
        mode: ListenerMode,
        enqueue: bool,
    ) -> Result<(), String> {
        let t = &self.informers[informer];
        let allow = Allow { resync, coalesced_deletes: mode == ListenerMode::Coalescing };
        let log = HandlerLog::new(format!("{}/{handler}", t.name), allow, t.namespace.clone());
        let h = RecordingHandler {
            log: log.clone(),
            progress: self.progress.clone(),
            queue: enqueue.then(|| self.queue.clone()),
            lose: if self.logs.is_empty() { self.lose_notification } else { None },
            lost: std::sync::atomic::AtomicBool::new(false),
            received: AtomicU64::new(0),
        };
        let options = HandlerOptions {
            name: Some(log.name.clone()),
            resync_period: Some(if resync { RESYNC } else { Duration::ZERO }),
            mode,
            // A handler without a resync period skips unchanged updates, so that the checker's
            // rule "`new == old` only for a handler with a resync period" holds for it; by
            // default (client-go's) it would also get them on every relist until the first
            // resync check. The handlers with a resync period run with the default.
            skip_unchanged_updates: !resync,
            ..HandlerOptions::default()
        };
        let reg = t.informer.add_event_handler_with_options(h, options).map_err(|e| e.to_string())?;
        self.logs.push(log);
        self.registrations.push(reg);
        Ok(())
    }

    fn prepare(&self, informer: &SharedIndexInformer<ConfigMap>, clock: &FakeClock) -> Result<(), String> {
        informer.set_clock(clock.clone()).map_err(|e| e.to_string())?;
        informer
            .set_reflector_metrics(Arc::new(WatchEnds(self.watch_errors.clone())))
            .map_err(|e| e.to_string())?;
        let errors = self.watch_errors.clone();
        informer
            .set_watch_error_handler(move |_, e| {
                *errors.lock().entry(format!("watch-error {:?}", e.kind())).or_default() += 1
            })
            .map_err(|e| e.to_string())
    }

    /// The first difference between what the pipeline holds and the server's final state.
    fn mismatch(&self, model: &Model) -> Option<String> {
        // The expected state per scope (all namespaces, and informer c's namespace), built once.
        let mut expected: HashMap<Option<String>, HashMap<String, u64>> = HashMap::new();
        let scopes =
            self.informers.iter().map(|t| &t.namespace).chain(self.logs.iter().map(|l| &l.namespace));
        for ns in scopes.chain([&None]) {
            expected.entry(ns.clone()).or_insert_with(|| model.expected(ns.as_deref()));
        }
        let empty = HashMap::new();
        let of = |ns: &Option<String>| expected.get(ns).unwrap_or(&empty);
        for t in &self.informers {
            if let Some(m) = t.mismatch(of(&t.namespace)) {
                return Some(m);
            }
        }
        for log in &self.logs {
            if let Some(m) = log.mismatch(of(&log.namespace)) {
                return Some(format!("handler {}: {m}", log.name));
            }
        }
        self.reconciler.mismatch(of(&None))
    }
}

/// Runs `seed` on the current Tokio runtime (which needs the time driver and, for realistic
/// interleaving, several worker threads; see [`run_blocking`]).
pub async fn run(seed: u64, config: &Config) -> RunReport {
    let started = Instant::now();
    let schedule = Schedule::generate(seed, config);
    let mut report = RunReport { seed, ..RunReport::default() };
    for f in schedule.faults().filter(|f| config.hung_watches || **f != Fault::HungWatch) {
        *report.faults.entry(f.kind()).or_default() += 1;
    }
    if let Err(e) = run_schedule(&schedule, config, &mut report).await {
        report.failures.push(e);
    }
    report.elapsed = started.elapsed();
    report
}

async fn run_schedule(schedule: &Schedule, config: &Config, report: &mut RunReport) -> Result<(), String> {
    let seed = schedule.seed;
    let server = TestServer::builder().history_size(schedule.history_size).start().await;
    let faults = server.faults();
    faults.set_watch_list_support(schedule.initial_watch_list);
    let mut model = Model::new(config);
    for &k in &schedule.initial {
        model.apply(&server, Write::Create(k), 0)?;
    }

    let clock = FakeClock::new();
    let progress = Arc::new(Progress::default());
    let queue: KeyQueue = RateLimitingQueue::new(ItemExponentialFailureRateLimiter::new(
        Duration::from_millis(1),
        Duration::from_millis(20),
    ));
    let client = server.client();
    let armed = Arc::new(AtomicU64::new(0));
    let fired = Arc::new(AtomicU64::new(0));

    // A: in-order FIFO, watch-list (the defaults), all namespaces; feeds the controller.
    // Informers resync every RESYNC by default (client-go ignores handler resync periods on an
    // informer created without one); handlers without a resync period ask for zero.
    let a =
        SharedIndexInformer::new(ApiListerWatcher::new(kube::Api::<ConfigMap>::all(client.clone())), RESYNC);
    // B: DeltaFIFO, LIST + WATCH with pages of 100, all namespaces.
    let b = SharedIndexInformer::new(
        ContinueExpiringLw {
            inner: ApiListerWatcher::new(kube::Api::<ConfigMap>::all(client.clone())),
            faults: faults.clone(),
            armed: armed.clone(),
            fired: fired.clone(),
        },
        RESYNC,
    );
    // C: from a factory, one namespace, FIFO chosen by the seed.
    let factory = SharedInformerFactory::new(client, RESYNC);
    let c_ns = key_namespace(1, config.namespaces);
    let c = factory.informer::<ConfigMap>(&InformerScope::namespace(&c_ns));

    let mut p = Pipeline {
        informers: vec![
            UnderTest { name: "a", informer: a.clone(), namespace: None },
            UnderTest { name: "b", informer: b.clone(), namespace: None },
            UnderTest { name: "c", informer: c.clone(), namespace: Some(c_ns) },
        ],
        logs: Vec::new(),
        registrations: Vec::new(),
        reconciler: Reconciler::new(a.lister(), progress.clone(), seed),
        queue: queue.clone(),
        progress: progress.clone(),
        watch_errors: Arc::new(Mutex::new(BTreeMap::new())),
        armed: armed.clone(),
        lose_notification: config.lose_notification,
    };
    for i in [&a, &b, &c] {
        p.prepare(i, &clock)?;
    }
    let err = |e: kcache_informer::InformerError| e.to_string();
    a.set_reflector_config(reflector_config("a", seed, true, None)).map_err(err)?;
    b.set_fifo(FifoKind::DeltaFifo).map_err(err)?;
    b.set_reflector_config(reflector_config("b", seed ^ 1, false, Some(PAGE_SIZE))).map_err(err)?;
    c.set_fifo(if schedule.factory_delta_fifo { FifoKind::DeltaFifo } else { FifoKind::InOrder })
        .map_err(err)?;
    c.set_reflector_config(reflector_config("c", seed ^ 2, true, None)).map_err(err)?;
    p.add_handler(0, "enqueue", false, ListenerMode::Unbounded, true)?;
    p.add_handler(0, "resync", true, ListenerMode::Unbounded, false)?;
    p.add_handler(0, "coalescing", false, ListenerMode::Coalescing, false)?;
    p.add_handler(1, "plain", false, ListenerMode::Unbounded, false)?;
    p.add_handler(1, "resync-coalescing", true, ListenerMode::Coalescing, false)?;
    p.add_handler(2, "plain", false, ListenerMode::Unbounded, false)?;
    p.add_handler(2, "resync", true, ListenerMode::Unbounded, false)?;

    // Backoffs and Retry-After waits complete at once on the fake clock; longer timers (resync,
    // watch timeouts) move only with the time those advances add up to, or a clock jump.
    let driver = tokio::spawn({
        let clock = clock.clone();
        async move {
            loop {
                let d = clock.wait_for_sleep(|d| d <= AUTO_ADVANCE).await;
                clock.advance(d);
            }
        }
    });
    let cancel = CancellationToken::new();
    let run_a = tokio::spawn({
        let (a, cancel) = (a.clone(), cancel.child_token());
        async move { a.run(cancel).await }
    });
    let run_b = tokio::spawn({
        let (b, cancel) = (b.clone(), cancel.child_token());
        async move { b.run(cancel).await }
    });
    factory.start();
    let runner = tokio::spawn(run_workers(queue.clone(), 4, {
        let reconciler = p.reconciler.clone();
        move |key: String| {
            let reconciler = reconciler.clone();
            async move { reconciler.reconcile(&key) }
        }
    }));

    let outcome = async {
        {
            let refs: Vec<&dyn HasSynced> = vec![&a, &b, &c];
            let regs: Vec<&dyn HasSynced> = p.registrations.iter().map(|r| r as &dyn HasSynced).collect();
            let all: Vec<&dyn HasSynced> = refs.into_iter().chain(regs).collect();
            let synced =
                tokio::time::timeout(config.converge_timeout, wait_for_cache_sync(&cancel, &all)).await;
            if !matches!(synced, Ok(true)) {
                return Err(format!("initial sync not reached within {:?}", config.converge_timeout));
            }
        }
        play(schedule, &server, &faults, &clock, &mut model, &mut p, config.hung_watches).await?;
        // Quiescence: no more faults.
        faults.clear();
        armed.store(0, Ordering::Release);
        let quiet = Instant::now();
        let r = if config.final_restart {
            // Every stream dropped, hung ones included: each informer relists or resumes.
            faults.restart();
            wait_converged(&p, &model, config.converge_timeout, &clock).await
        } else {
            // The live watches must deliver the final events by themselves. Only a stream left
            // hung by the last faults may need the fake clock to pass its timeout (which replaces
            // every watch); how often that was needed, and why, is reported.
            match wait_converged(&p, &model, LIVE_WAIT, &clock).await {
                Ok(()) => Ok(()),
                Err(why) if !config.hung_watches => {
                    // No stream can be hung: a live watch failed to deliver the final events.
                    Err(format!("live watches did not deliver the final state: {why}"))
                }
                Err(why) => {
                    report.notes.push(format!("converged only after a clock jump: {why}"));
                    clock.advance(CLOCK_JUMP);
                    wait_converged(&p, &model, config.converge_timeout, &clock).await
                }
            }
        };
        report.quiescence = quiet.elapsed();
        r
    }
    .await;

    cancel.cancel();
    factory.shutdown().await;
    let _ = run_a.await;
    let _ = run_b.await;
    queue.shut_down();
    let _ = runner.await;
    driver.abort();

    report.writes = model.writes;
    report.events = progress.events.load(Ordering::Relaxed);
    report.reconciles = p.reconciler.attempts.load(Ordering::Relaxed);
    report
        .observed
        .insert("reconcile-failures (injected)".into(), p.reconciler.failures.load(Ordering::Relaxed));
    report.observed.insert("continue-compactions".into(), fired.load(Ordering::Relaxed));
    observe_requests(&server, report);
    for (what, n) in p.watch_errors.lock().iter() {
        report.observed.insert(what.clone(), *n);
    }
    outcome?;

    check_logs(&p, &model, report);
    check_server(&server, &model, report);
    Ok(())
}

/// Plays the schedule's steps.
async fn play(
    schedule: &Schedule,
    server: &TestServer,
    faults: &Faults,
    clock: &FakeClock,
    model: &mut Model,
    p: &mut Pipeline,
    hung_watches: bool,
) -> Result<(), String> {
    for (i, step) in schedule.steps.iter().enumerate() {
        match step {
            Step::Write(w) => model.apply(server, *w, i + 1)?,
            Step::Fault(Fault::HungWatch) if !hung_watches => {}
            Step::Fault(f) => inject(f, faults, clock, &p.armed),
            Step::Settle => settle(&p.progress, server.resource_version()).await,
            Step::AddLateHandler => p.add_handler(0, "late", false, ListenerMode::Unbounded, false)?,
        }
        tokio::task::yield_now().await;
    }
    Ok(())
}

fn inject(fault: &Fault, faults: &Faults, clock: &FakeClock, armed: &AtomicU64) {
    let error = |after: usize, code: u16, reason: &str, message: &str| WatchFault::Error {
        after,
        code,
        reason: reason.into(),
        message: message.into(),
    };
    match *fault {
        Fault::WatchClose { after } => faults.next_watch(WatchFault::CloseAfter(after)),
        Fault::ShortWatch => faults.next_watch(WatchFault::CloseAfter(0)),
        Fault::WatchExpired { after } => {
            faults.next_watch(error(after, 410, "Expired", "too old resource version: 1 (2)"));
        }
        Fault::WatchInternalError { after } => {
            faults.next_watch(error(after, 500, "InternalError", "Internal error occurred: injected"));
        }
        Fault::ListExpired => faults.fail_requests(1, RequestFault::gone().verb(Verb::List)),
        Fault::ContinueExpired => {
            armed.fetch_add(1, Ordering::AcqRel);
        }
        Fault::Compact => faults.compact(),
        Fault::Http500 { count, verb } => {
            faults.fail_requests(count, RequestFault::internal_error().verb(verb))
        }
        Fault::Http429 { count, verb, retry_after } => {
            faults.fail_requests(count, RequestFault::too_many_requests(retry_after).verb(verb));
        }
        Fault::HungWatch => faults.next_watch(WatchFault::Hang),
        Fault::MalformedFrame { after } => faults.next_watch(WatchFault::MalformedFrame { after }),
        Fault::UnknownEventType { after } => faults.next_watch(WatchFault::UnknownEventType { after }),
        Fault::WatchList(mode) => faults.set_watch_list_support(mode),
        Fault::Restart => faults.restart(),
        Fault::ClockJump => clock.advance(CLOCK_JUMP),
    }
}

/// Waits (on handler notifications, at most [`SETTLE_AT_MOST`]) until some handler has seen
/// resourceVersion `target`.
async fn settle(progress: &Progress, target: u64) {
    let deadline = tokio::time::Instant::now() + SETTLE_AT_MOST;
    loop {
        let notified = progress.notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if progress.max_rv.load(Ordering::Acquire) >= target {
            return;
        }
        if tokio::time::timeout_at(deadline, notified).await.is_err() {
            return;
        }
    }
}

/// Waits, woken by every handler notification and reconcile, until the caches, the handlers'
/// believed states and the controller all equal the server's final state.
async fn wait_converged(
    p: &Pipeline,
    model: &Model,
    timeout: Duration,
    clock: &FakeClock,
) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let notified = p.progress.notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let Some(mismatch) = p.mismatch(model) else { return Ok(()) };
        if tokio::time::timeout_at(deadline, notified).await.is_err() {
            let mut why = format!("no convergence within {timeout:?}: {mismatch}");
            for t in &p.informers {
                let _ = write!(
                    why,
                    "; informer {} synced {} at rv {:?}, fifo {}",
                    t.name,
                    t.informer.has_synced(),
                    t.informer.last_sync_resource_version(),
                    t.informer.fifo_len()
                );
            }
            let _ = write!(
                why,
                "; pending fake-clock sleeps {:?}; queue {}",
                clock.pending_sleeps(),
                p.queue.len()
            );
            return Err(why);
        }
    }
}

/// Runs the consistency checker over every handler's full log.
fn check_logs(p: &Pipeline, model: &Model, report: &mut RunReport) {
    let mut stats = LogStats::default();
    let mut violations = Vec::new();
    for log in &p.logs {
        let ns = log.namespace.clone();
        let (s, errors) =
            check_handler(&log.logs(), &model.histories, |k| in_namespace(k, ns.as_deref()), log.allow);
        stats.merge(s);
        violations.extend(errors.into_iter().map(|e| format!("handler {}: {e}", log.name)));
    }
    let observed = p.reconciler.observed();
    for (k, h) in &model.histories {
        let fin = h.final_state();
        match (observed.get(k), fin) {
            (Some(Some(o)), Some(f)) if *o == f => {}
            (Some(None) | None, None) => {}
            (got, _) => violations.push(format!("controller: {k} last reconciled at {got:?}, final {fin:?}")),
        }
    }
    report.observed.insert("handler resyncs".into(), stats.resyncs);
    report.observed.insert("handler tombstones".into(), stats.tombstones);
    report.observed.insert("skipped intermediate versions".into(), stats.skipped);
    report.violations = violations.len();
    report.failures.extend(violations.into_iter().take(MAX_REPORTED));
}

/// Checks the model of the server against the server itself (a bug here would be the harness's).
fn check_server(server: &TestServer, model: &Model, report: &mut RunReport) {
    let objects = server.objects();
    let expected = model.expected(None);
    if objects.count("", "v1", "configmaps") != expected.len() {
        report.failures.push(format!(
            "harness: the server has {} configmaps, the model {}",
            objects.count("", "v1", "configmaps"),
            expected.len()
        ));
    }
    for (k, rv) in &expected {
        let Some((ns, name)) = k.split_once('/') else { continue };
        let got = objects
            .get("", "v1", "configmaps", ns, name)
            .and_then(|v| v["metadata"]["resourceVersion"].as_str().and_then(|s| s.parse::<u64>().ok()));
        if got != Some(*rv) {
            report.failures.push(format!("harness: {k} is at {got:?} on the server, {rv} in the model"));
            return;
        }
    }
}

/// Effects of the faults as the server saw them.
fn observe_requests(server: &TestServer, report: &mut RunReport) {
    let log = server.request_log().entries();
    let mut add = |name: &str, n: usize| {
        report.observed.insert(name.to_owned(), n as u64);
    };
    add("requests list", log.iter().filter(|r| r.verb == Verb::List).count());
    add(
        "requests list continue",
        log.iter().filter(|r| r.verb == Verb::List && r.query_param("continue").is_some()).count(),
    );
    add("requests watch", log.iter().filter(|r| r.verb == Verb::Watch).count());
    add(
        "list continue 410",
        log.iter()
            .filter(|r| r.verb == Verb::List && r.status == 410 && r.query_param("continue").is_some())
            .count(),
    );
    add("list 410", log.iter().filter(|r| r.verb == Verb::List && r.status == 410).count());
    add("http 429", log.iter().filter(|r| r.status == 429).count());
    add("http 500", log.iter().filter(|r| r.status == 500).count());
    add("http 422 (watch-list refused)", log.iter().filter(|r| r.status == 422).count());
}
