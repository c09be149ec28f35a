//! `--replicas N`: N replicas of the controller on one Lease (kcache-leaderelection); only the
//! leader runs its workers. A third of the way through the churn the leader is killed (its tasks
//! aborted mid-flight, nothing released: a crash), the failover is shown live, the killed
//! replica comes back as a new process later, and at the end the run verifies that every object's
//! final state and every delete was reconciled, by one leader at a time.
//!
//! Each replica keeps its informer and its workqueue warm while it waits (as controller-runtime's
//! caches run on every replica): events that arrive during a failover are queued on every
//! replica, so the next leader reconciles them. Only the workers wait for leadership, and stop
//! when the token `on_started_leading` got is cancelled.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_informer::{InformerScope, ObjectOrTombstone, ResourceEventHandler, SharedInformerFactory};
use kcache_leaderelection::{LeaderCallbacks, LeaderElectionConfig, LeaderElector};
use kcache_store::meta_namespace_key;
use kcache_workqueue::{RateLimitingQueue, default_controller_rate_limiter};
use kube::{Api, ResourceExt};
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::args::Args;
use crate::churn::{self, ChurnStats};
use crate::verify::Versions;

/// The Lease the replicas contend for.
const LEASE: &str = "kcache-demo-controller";
/// Short durations, so a crash fails over in a few seconds: LeaseDuration, RenewDeadline,
/// RetryPeriod. LeaseDuration > RenewDeadline + RetryPeriod: a leader whose renewals fail stops
/// before anyone may take over.
const LEASE_DURATION: Duration = Duration::from_secs(3);
const RENEW_DEADLINE: Duration = Duration::from_secs(1);
const RETRY_PERIOD: Duration = Duration::from_millis(500);
/// How often the live display prints a status line.
const TICK: Duration = Duration::from_millis(500);

/// What every replica's reconciler recorded, shared so that the end of the run can check it.
#[derive(Debug, Default)]
struct Ledger {
    /// Reconciled resourceVersions per key.
    versions: Mutex<HashMap<String, HashSet<String>>>,
    /// Keys reconciled while absent from the cache (their deletes).
    absent: Mutex<HashSet<String>>,
    /// Reconciles per replica name.
    by_replica: Mutex<BTreeMap<String, u64>>,
    /// When each reconcile started, and by which replica: each must fall within a leadership of
    /// that replica.
    reconciles: Mutex<Vec<(String, Instant)>>,
    /// Leadership intervals `(replica, start, end)` on the run's clock.
    leaderships: Mutex<Vec<(String, Instant, Option<Instant>)>>,
    /// Printed lines, for the live display.
    events: Mutex<Vec<String>>,
}

/// The enqueue handler of a replica: every change, from the start, whether it leads or not.
#[derive(Debug)]
pub(crate) struct Enqueue {
    pub(crate) queue: RateLimitingQueue<String>,
}

pub(crate) fn key_of(cm: &ConfigMap) -> String {
    meta_namespace_key(&cm.namespace().unwrap_or_default(), &cm.name_any())
}

impl ResourceEventHandler<ConfigMap> for Enqueue {
    fn on_add(&self, obj: &Arc<ConfigMap>, _initial: bool) {
        self.queue.add(key_of(obj));
    }

    fn on_update(&self, _old: &Arc<ConfigMap>, new: &Arc<ConfigMap>) {
        self.queue.add(key_of(new));
    }

    fn on_delete(&self, obj: &ObjectOrTombstone<ConfigMap>) {
        let key = match obj.tombstone() {
            Some(t) => t.key.clone(),
            None => key_of(obj.object()),
        };
        self.queue.add(key);
    }
}

/// One running replica (a process, in a real deployment).
struct Replica {
    name: String,
    elector: LeaderElector,
    queue: RateLimitingQueue<String>,
    /// Stops the informer.
    stop_informer: CancellationToken,
    /// Stops the elector cleanly (the end of the run); a kill aborts it instead.
    stop_elector: CancellationToken,
    /// The elector's run: aborted when the replica is killed.
    elector_task: JoinHandle<()>,
    /// The informer's run.
    tasks: Vec<JoinHandle<()>>,
    informer_cache: kcache_store::Store<ConfigMap>,
}

struct Ctx {
    client: kube::Client,
    namespace: String,
    ledger: Arc<Ledger>,
    start: Instant,
    workers: usize,
    failure_rate: f64,
    seed: u64,
}

impl Ctx {
    fn say(&self, line: String) {
        let line = format!("[{:>6.2}s] {line}", self.start.elapsed().as_secs_f64());
        println!("{line}");
        self.ledger.events.lock().push(line);
    }
}

/// Starts replica `name`: informer, queue and enqueue handler now; workers once it leads.
async fn start_replica(ctx: &Arc<Ctx>, name: &str) -> Result<Replica> {
    let factory = SharedInformerFactory::new(ctx.client.clone(), Duration::ZERO);
    let informer = factory.informer::<ConfigMap>(&InformerScope::namespace(&ctx.namespace));
    let queue: RateLimitingQueue<String> = RateLimitingQueue::new(default_controller_rate_limiter());
    informer.add_event_handler(Enqueue { queue: queue.clone() })?;
    let (stop_informer, stop_elector) = (CancellationToken::new(), CancellationToken::new());
    let mut tasks = Vec::new();
    tasks.push(tokio::spawn({
        let (informer, stop) = (informer.clone(), stop_informer.clone());
        async move {
            let _ = informer.run(stop).await;
        }
    }));
    let lister = informer.lister();
    let cache = informer.indexer().clone();

    let config = LeaderElectionConfig::new(ctx.namespace.clone(), LEASE, name)
        .lease_duration(LEASE_DURATION)
        .renew_deadline(RENEW_DEADLINE)
        .retry_period(RETRY_PERIOD);
    let (c1, c2, c3) = (ctx.clone(), ctx.clone(), ctx.clone());
    let (n1, n2, n3) = (name.to_owned(), name.to_owned(), name.to_owned());
    let q1 = queue.clone();
    let callbacks = LeaderCallbacks::new(
        move |leading: CancellationToken| {
            let now = Instant::now();
            c1.ledger.leaderships.lock().push((n1.clone(), now, None));
            c1.say(format!(
                "{n1}: started leading, starting {} workers ({} keys queued)",
                c1.workers,
                q1.len()
            ));
            for w in 0..c1.workers {
                let worker = Worker {
                    replica: n1.clone(),
                    queue: q1.clone(),
                    lister: lister.clone(),
                    namespace: c1.namespace.clone(),
                    ledger: c1.ledger.clone(),
                    leading: leading.clone(),
                    failure_rate: c1.failure_rate,
                    rng: StdRng::seed_from_u64(c1.seed ^ ((w as u64) << 8)),
                };
                tokio::spawn(worker.run());
            }
            let (ctx, name) = (c1.clone(), n1.clone());
            tokio::spawn(async move {
                leading.cancelled().await;
                let now = Instant::now();
                if let Some(l) =
                    ctx.ledger.leaderships.lock().iter_mut().rev().find(|l| l.0 == name && l.2.is_none())
                {
                    l.2 = Some(now);
                }
            });
        },
        move || c2.say(format!("{n2}: elector stopped")),
    )
    .on_new_leader(move |leader| {
        if !leader.is_empty() && leader != n3 {
            c3.say(format!("{n3}: sees {leader} as the leader"));
        }
    });
    let elector = LeaderElector::new(ctx.client.clone(), config, callbacks)?;
    let elector_task = tokio::spawn({
        let (elector, stop) = (elector.clone(), stop_elector.clone());
        async move {
            let _ = elector.run(stop).await;
        }
    });
    Ok(Replica {
        name: name.to_owned(),
        elector,
        queue,
        stop_informer,
        stop_elector,
        elector_task,
        tasks,
        informer_cache: cache,
    })
}

/// One worker of a leading replica.
struct Worker {
    replica: String,
    queue: RateLimitingQueue<String>,
    lister: kcache_informer::Lister<ConfigMap>,
    namespace: String,
    ledger: Arc<Ledger>,
    leading: CancellationToken,
    failure_rate: f64,
    rng: StdRng,
}

impl Worker {
    async fn run(mut self) {
        loop {
            let key = tokio::select! {
                biased;
                () = self.leading.cancelled() => return,
                key = self.queue.get() => match key { Some(k) => k, None => return },
            };
            let started = Instant::now();
            if self.leading.is_cancelled() {
                // Leadership ended while this worker waited: leave the key for the next leader.
                self.queue.add(key.clone());
                self.queue.done(&key);
                return;
            }
            if self.failure_rate > 0.0 && self.rng.random_bool(self.failure_rate) {
                self.queue.add_rate_limited(key.clone());
                self.queue.done(&key);
                continue;
            }
            let name = key.rsplit_once('/').map_or(key.as_str(), |(_, n)| n);
            match self.lister.namespaced(&self.namespace).get(name) {
                Some(cm) => {
                    let rv = cm.resource_version().unwrap_or_default();
                    self.ledger.versions.lock().entry(key.clone()).or_default().insert(rv);
                }
                None => {
                    self.ledger.absent.lock().insert(key.clone());
                }
            }
            self.ledger.reconciles.lock().push((self.replica.clone(), started));
            *self.ledger.by_replica.lock().entry(self.replica.clone()).or_default() += 1;
            self.queue.forget(&key);
            self.queue.done(&key);
        }
    }
}

fn kill(r: Replica) {
    // A crash: the elector stops where it is (its leading token is cancelled as its run is
    // dropped, which stops the workers); the lease is not released. The informer is stopped too.
    r.elector_task.abort();
    r.stop_informer.cancel();
}

/// The holder and transitions of the Lease, as the server has it.
async fn lease_state(api: &Api<Lease>) -> (String, i32) {
    match api.get_opt(LEASE).await {
        Ok(Some(l)) => {
            let spec = l.spec.unwrap_or_default();
            (spec.holder_identity.unwrap_or_default(), spec.lease_transitions.unwrap_or_default())
        }
        _ => (String::new(), 0),
    }
}

/// Runs the replicated demo; returns whether the verification passed.
pub(crate) async fn run(args: &Args, client: kube::Client, namespace: &str) -> Result<bool> {
    let n = args.replicas;
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        namespace: namespace.to_owned(),
        ledger: Arc::default(),
        start: Instant::now(),
        workers: args.workers,
        failure_rate: args.failure_rate,
        seed: args.seed,
    });
    println!(
        "  {n} replicas on Lease {namespace}/{LEASE} (LeaseDuration {:?}, RenewDeadline {:?}, RetryPeriod {:?}); \
         churn: {} objects, {} ops/s for {:.1} s; the leader is killed at {:.1} s",
        LEASE_DURATION,
        RENEW_DEADLINE,
        RETRY_PERIOD,
        args.objects,
        args.rate,
        args.duration.as_secs_f64(),
        args.duration.as_secs_f64() / 3.0
    );
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let leases: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let existing = args.objects / 2;
    churn::precreate(&api, existing).await.context("creating the initial objects")?;

    let mut replicas: Vec<Replica> = Vec::new();
    for i in 0..n {
        replicas.push(start_replica(&ctx, &format!("replica-{i}")).await?);
        if i == 0 {
            // The first one leads: wait for it, so the others start as followers.
            let deadline = Instant::now() + Duration::from_secs(10);
            while !replicas[0].elector.is_leader() {
                if Instant::now() > deadline {
                    bail!("replica-0 did not lead within 10 s");
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }

    let stats = Arc::new(ChurnStats::default());
    let plan = churn::Plan::from_args(args, existing);
    let churn = tokio::spawn({
        let (api, namespace, stats) = (api.clone(), namespace.to_owned(), stats.clone());
        async move { churn::run(api, &namespace, plan, stats).await }
    });
    let kill_at = ctx.start + args.duration / 3;
    let restart_at = ctx.start + args.duration * 2 / 3;
    let mut killed: Option<(String, Instant)> = None;
    let mut restarted = false;
    let mut failover: Option<Duration> = None;
    let mut generation = 1;
    let mut ticker = tokio::time::interval(TICK);
    while !churn.is_finished() {
        ticker.tick().await;
        let now = Instant::now();
        if killed.is_none() && now >= kill_at {
            let i = replicas.iter().position(|r| r.elector.is_leader()).unwrap_or(0);
            let victim = replicas.remove(i);
            ctx.say(format!(
                "KILL {}: its tasks are aborted mid-flight, the lease is not released",
                victim.name
            ));
            killed = Some((victim.name.clone(), now));
            kill(victim);
        }
        if let Some((victim, at)) = &killed
            && failover.is_none()
        {
            let successor =
                ctx.ledger.leaderships.lock().iter().find(|l| l.1 > *at).map(|l| (l.0.clone(), l.1));
            if let Some((name, started)) = successor {
                let took = started.duration_since(*at);
                failover = Some(took);
                ctx.say(format!(
                    "failover: {name} started leading {:.2} s after {victim} was killed (bound: LeaseDuration + \
                     4.4 x RetryPeriod = {:.1} s)",
                    took.as_secs_f64(),
                    (LEASE_DURATION + RETRY_PERIOD.mul_f64(4.4)).as_secs_f64()
                ));
            }
        }
        if !restarted && now >= restart_at {
            restarted = true;
            let name = format!(
                "replica-{}-{generation}",
                killed.as_ref().map_or("x", |k| k.0.trim_start_matches("replica-"))
            );
            generation += 1;
            ctx.say(format!("{name}: started (the killed replica, restarted as a new process)"));
            replicas.push(start_replica(&ctx, &name).await?);
        }
        let (holder, transitions) = lease_state(&leases).await;
        let by = ctx.ledger.by_replica.lock().clone();
        let status: Vec<String> = replicas
            .iter()
            .map(|r| {
                format!(
                    "{}{} {} reconciles, {} queued",
                    r.name,
                    if r.elector.is_leader() { " LEADER" } else { "" },
                    by.get(&r.name).copied().unwrap_or(0),
                    r.queue.len()
                )
            })
            .collect();
        ctx.say(format!(
            "lease holder {} (transitions {transitions}) | {} | churn {} ops",
            if holder.is_empty() { "-".to_owned() } else { holder },
            status.join(" | "),
            stats.ops()
        ));
    }
    let _ = churn.await;

    // Settle: the leader's queue drained and its cache equal to the server, a few looks in a row.
    let settle_deadline = Instant::now() + args.settle_timeout;
    let mut quiet = 0;
    let mut server = Versions::new();
    while quiet < 3 {
        if Instant::now() > settle_deadline {
            println!("verification: FAILED: not quiet within {:.0} s", args.settle_timeout.as_secs_f64());
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let Some(leader) = replicas.iter().find(|r| r.elector.is_leader()) else {
            quiet = 0;
            continue;
        };
        server = api
            .list(&Default::default())
            .await?
            .items
            .iter()
            .map(|c| (key_of(c), c.resource_version().unwrap_or_default()))
            .collect();
        let cache: Versions = leader
            .informer_cache
            .list()
            .iter()
            .map(|c| (key_of(c), c.resource_version().unwrap_or_default()))
            .collect();
        let reconciled_all =
            server.iter().all(|(k, rv)| ctx.ledger.versions.lock().get(k).is_some_and(|v| v.contains(rv)));
        if leader.queue.is_empty() && cache == server && reconciled_all {
            quiet += 1;
        } else {
            quiet = 0;
        }
    }

    // Verify.
    let mut failures = Vec::new();
    let versions = ctx.ledger.versions.lock().clone();
    let missing: Vec<_> =
        server.iter().filter(|(k, rv)| !versions.get(*k).is_some_and(|v| v.contains(*rv))).collect();
    if !missing.is_empty() {
        failures.push(format!(
            "{} objects' final state not reconciled (e.g. {:?})",
            missing.len(),
            missing.first()
        ));
    }
    let absent = ctx.ledger.absent.lock().clone();
    let deleted: Vec<String> =
        stats.deletes_by_key().into_keys().filter(|k| !server.contains_key(k)).collect();
    let unreconciled_deletes: Vec<_> = deleted.iter().filter(|k| !absent.contains(*k)).collect();
    if !unreconciled_deletes.is_empty() {
        failures.push(format!(
            "{} deletes never reconciled (e.g. {:?})",
            unreconciled_deletes.len(),
            unreconciled_deletes.first()
        ));
    }
    let mut intervals = ctx.ledger.leaderships.lock().clone();
    intervals.sort_by_key(|l| l.1);
    let outside = ctx
        .ledger
        .reconciles
        .lock()
        .iter()
        .filter(|(r, t)| !intervals.iter().any(|(n, s, e)| n == r && s <= t && e.is_none_or(|e| *t <= e)))
        .count();
    if outside > 0 {
        failures.push(format!("{outside} reconciles started outside their replica's leadership"));
    }
    for pair in intervals.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if a.2.is_none_or(|end| end > b.1) {
            failures.push(format!("{} and {} led at the same time", a.0, b.0));
        }
    }
    match failover {
        // The bound, plus a second for scheduling on a loaded machine.
        Some(f) if f <= LEASE_DURATION + RETRY_PERIOD.mul_f64(4.4) + Duration::from_secs(1) => {}
        Some(f) => failures.push(format!("the failover took {f:?}")),
        None => failures.push("nobody took over after the kill".to_owned()),
    }

    for r in &replicas {
        r.stop_elector.cancel();
        r.stop_informer.cancel();
    }
    for r in replicas {
        for t in r.tasks.into_iter().chain([r.elector_task]) {
            let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
        }
    }

    println!();
    println!("summary");
    println!(
        "  {:<20} {}",
        "leaderships",
        intervals.iter().map(|l| l.0.as_str()).collect::<Vec<_>>().join(" -> ")
    );
    if let Some(f) = failover {
        println!("  {:<20} {:.1} s after the kill", "failover", f.as_secs_f64());
    }
    let by = ctx.ledger.by_replica.lock().clone();
    println!(
        "  {:<20} {}",
        "reconciles",
        by.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")
    );
    println!("  {:<20} {} ops, {} deletes", "churn", stats.ops(), stats.deletes.load(Ordering::Relaxed));
    if failures.is_empty() {
        println!(
            "verification: PASSED (one leader at a time; every final resourceVersion reconciled; every delete \
             reconciled; {} objects)",
            server.len()
        );
        Ok(true)
    } else {
        println!("verification: FAILED: {}", failures.join("; "));
        Ok(false)
    }
}
