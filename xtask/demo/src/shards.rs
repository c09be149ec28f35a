//! `--shards N`: N replicas of the controller splitting the ConfigMaps by hash through
//! kcache-sharding: each runs a `ShardCoordinator` (its own member Lease), a `ShardedInformer`
//! (restarted with each new selector) and its workers. The display shows each replica's share
//! and object count live. A third of the way through the churn replica-0 is killed (a crash: its
//! Lease stays until it expires); the display shows its range taken over. At the end a ledger of
//! every reconcile (key, replica, start, end) is checked: every object's final state was
//! reconciled, and no key was ever reconciled by two replicas at overlapping times.
//!
//! Workers reconcile a key only while their replica owns its object (`ShardCoordinator::owns`,
//! judged on the replica's clock at that instant); a key whose range was lost is dropped from
//! the queue when a worker reaches it (and the new owner's informer announces the object anew).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_informer::{InformerScope, SharedInformerFactory};
use kcache_sharding::{RangeSet, ShardCoordinator, ShardedEventHandler, ShardedInformer, ShardingConfig};
use kcache_workqueue::{RateLimitingQueue, default_controller_rate_limiter};
use kube::{Api, ResourceExt};
use parking_lot::Mutex;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::args::Args;
use crate::churn::{self, ChurnStats};
use crate::replicas::{Enqueue, key_of};

/// The sharding group (member Leases `kcache-demo-replica-<i>`).
const GROUP: &str = "kcache-demo";
/// Short durations, so a crash is taken over in a few seconds: LeaseDuration 3 s, RenewDeadline
/// 1 s, RetryPeriod 0.5 s. The bound after a crash (kcache-sharding's README) is then
/// LeaseDuration + 4 × RetryPeriod + 1 s = 6 s.
const LEASE_DURATION: Duration = Duration::from_secs(3);
const RENEW_DEADLINE: Duration = Duration::from_secs(1);
const RETRY_PERIOD: Duration = Duration::from_millis(500);
const TAKEOVER_BOUND: Duration = Duration::from_secs(6);
const TICK: Duration = Duration::from_millis(500);

/// One reconcile: key, replica, start, end, resourceVersion.
type Reconcile = (String, String, Instant, Instant, String);

/// Every reconcile.
#[derive(Debug, Default)]
struct Ledger {
    reconciles: Mutex<Vec<Reconcile>>,
}

/// A lost range's keys may still be queued: the workers drop them (no longer owned).
impl ShardedEventHandler<ConfigMap> for Enqueue {}

struct Replica {
    name: String,
    coordinator: ShardCoordinator,
    informer: ShardedInformer<ConfigMap>,
    queue: RateLimitingQueue<String>,
    stop: CancellationToken,
    coordinator_task: JoinHandle<()>,
    tasks: Vec<JoinHandle<()>>,
    alive: bool,
}

fn start(
    client: &kube::Client,
    namespace: &str,
    i: usize,
    workers: usize,
    ledger: &Arc<Ledger>,
) -> Result<Replica> {
    let name = format!("replica-{i}");
    let config =
        ShardingConfig::new(namespace, GROUP, &name).durations(LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD);
    let coordinator = ShardCoordinator::new(client.clone(), config.clone())?;
    let informer = ShardedInformer::new(config.key, {
        let (client, ns) = (client.clone(), namespace.to_owned());
        move |selector| {
            SharedInformerFactory::new(client.clone(), Duration::ZERO)
                .informer::<ConfigMap>(&InformerScope::namespace(&ns).shard(selector))
        }
    });
    let queue: RateLimitingQueue<String> = RateLimitingQueue::new(default_controller_rate_limiter());
    informer.add_event_handler(Enqueue { queue: queue.clone() });
    let stop = CancellationToken::new();
    let coordinator_task = tokio::spawn({
        let (c, stop) = (coordinator.clone(), stop.clone());
        async move {
            let _ = c.run(stop).await;
        }
    });
    let mut tasks = vec![tokio::spawn({
        let (i, rx, stop) = (informer.clone(), coordinator.assignments(), stop.clone());
        async move { i.run(rx, stop).await }
    })];
    for _ in 0..workers {
        let (queue, informer, coordinator, ledger, name) =
            (queue.clone(), informer.clone(), coordinator.clone(), ledger.clone(), name.clone());
        tasks.push(tokio::spawn(async move {
            while let Some(key) = queue.get().await {
                let cached = informer.current().and_then(|i| i.indexer().get_by_key(&key));
                if let Some(cm) = cached.filter(|cm| coordinator.owns(&cm.metadata)) {
                    let started = Instant::now();
                    // The reconcile's work.
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    let rv = cm.resource_version().unwrap_or_default();
                    ledger.reconciles.lock().push((key.clone(), name.clone(), started, Instant::now(), rv));
                }
                queue.forget(&key);
                queue.done(&key);
            }
        }));
    }
    Ok(Replica { name, coordinator, informer, queue, stop, coordinator_task, tasks, alive: true })
}

/// A crash: the coordinator stops where it is (its Lease is not deleted); the informer and the
/// workers stop with the process.
fn kill(r: &mut Replica) {
    r.coordinator_task.abort();
    r.stop.cancel();
    r.queue.shut_down();
    r.alive = false;
}

fn status(replicas: &[Replica]) -> String {
    replicas
        .iter()
        .filter(|r| r.alive)
        .map(|r| {
            let serving = r.coordinator.assignment().serving;
            let objects = r.informer.current().map_or(0, |i| i.indexer().len());
            format!(
                "{} {:>5.1}% ({} ranges) {:>4} objects",
                r.name,
                serving.fraction() * 100.0,
                serving.ranges().len(),
                objects
            )
        })
        .collect::<Vec<_>>()
        .join(" | ")
}

fn coverage(replicas: &[Replica]) -> RangeSet {
    replicas
        .iter()
        .filter(|r| r.alive)
        .fold(RangeSet::empty(), |acc, r| acc.union(&r.coordinator.assignment().serving))
}

/// Runs the sharded demo; returns whether the verification passed.
pub(crate) async fn run(args: &Args, client: kube::Client, namespace: &str) -> Result<bool> {
    let start_time = Instant::now();
    let say = |line: String| println!("[{:>6.2}s] {line}", start_time.elapsed().as_secs_f64());
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let existing = churn::precreate(&api, args.objects / 2).await?;
    let ledger = Arc::new(Ledger::default());
    let mut replicas = Vec::new();
    for i in 0..args.shards {
        replicas.push(start(&client, namespace, i, args.workers, &ledger)?);
    }
    say(format!(
        "{} replicas in group {GROUP} (LeaseDuration 3 s, RenewDeadline 1 s, RetryPeriod 0.5 s)",
        args.shards
    ));
    let stats = Arc::new(ChurnStats::default());
    let plan = churn::Plan::from_args(args, existing);
    let churn_task = tokio::spawn({
        let (api, ns, stats) = (api.clone(), namespace.to_owned(), stats.clone());
        async move { churn::run(api, &ns, plan, stats).await }
    });
    let kill_at = start_time + args.duration / 3;
    let mut killed: Option<(Instant, RangeSet)> = None;
    let mut took_over: Option<Duration> = None;
    let end = start_time + args.duration;
    while Instant::now() < end || !churn_task.is_finished() {
        tokio::time::sleep(TICK).await;
        say(status(&replicas));
        if killed.is_none() && Instant::now() >= kill_at {
            let lost = replicas[0].coordinator.assignment().serving;
            kill(&mut replicas[0]);
            say(format!(
                "KILL replica-0 (it served {:.1}% of the hash space; its Lease stays until it expires)",
                lost.fraction() * 100.0
            ));
            killed = Some((Instant::now(), lost));
        }
        if let (Some((at, lost)), None) = (&killed, took_over)
            && coverage(&replicas).is_full()
        {
            {
                let took = at.elapsed();
                let by: Vec<String> = replicas
                    .iter()
                    .filter(|r| r.alive && r.coordinator.assignment().serving.overlaps(lost))
                    .map(|r| r.name.clone())
                    .collect();
                say(format!("takeover: replica-0's range is served by {} after {took:.2?}", by.join(", ")));
                took_over = Some(took);
            }
        }
    }
    churn_task.await.context("churn")?;

    // Settle: every object's current version reconciled by its owner.
    let deadline = Instant::now() + args.settle_timeout;
    let mut missing: Vec<String>;
    loop {
        let items = api.list(&Default::default()).await?.items;
        let done: HashSet<(String, String)> =
            ledger.reconciles.lock().iter().map(|(k, _, _, _, rv)| (k.clone(), rv.clone())).collect();
        missing = items
            .iter()
            .filter(|o| !done.contains(&(key_of(o), o.resource_version().unwrap_or_default())))
            .map(key_of)
            .collect();
        if (missing.is_empty() && coverage(&replicas).is_full()) || Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(TICK).await;
    }
    say(format!("settled: {}", status(&replicas)));

    // The ledger: no key reconciled by two replicas at overlapping times.
    let mut by_key: HashMap<&str, Vec<(&str, Instant, Instant)>> = HashMap::new();
    let reconciles = ledger.reconciles.lock().clone();
    for (k, r, s, e, _) in reconciles.iter() {
        by_key.entry(k).or_default().push((r, *s, *e));
    }
    let mut overlaps = Vec::new();
    for (k, mut v) in by_key {
        v.sort_by_key(|x| x.1);
        for w in v.windows(2) {
            if w[0].0 != w[1].0 && w[1].1 < w[0].2 {
                overlaps.push(format!("{k}: {} and {}", w[0].0, w[1].0));
            }
        }
    }
    let mut per_replica: BTreeMap<&str, u64> = BTreeMap::new();
    for (_, r, _, _, _) in reconciles.iter() {
        *per_replica.entry(r).or_default() += 1;
    }
    println!();
    println!("summary");
    println!("  {:<20} {per_replica:?}", "reconciles");
    println!("  {:<20} {}", "churn operations", stats.ops());
    if let Some(t) = took_over {
        println!("  {:<20} {:.1} s after the kill", "takeover", t.as_secs_f64());
    }
    let took_ok = took_over.is_some_and(|t| t <= TAKEOVER_BOUND + Duration::from_secs(2));
    let checks = [
        (missing.is_empty(), format!("every object's final state reconciled ({} missing)", missing.len())),
        (
            overlaps.is_empty(),
            format!("each object reconciled by exactly one owner at a time ({} overlaps)", overlaps.len()),
        ),
        (
            took_ok,
            format!(
                "replica-0's range taken over within {TAKEOVER_BOUND:?} + 2 s ({})",
                took_over.map_or("never".into(), |t| format!("{t:.2?}"))
            ),
        ),
    ];
    let mut passed = true;
    for (ok, what) in &checks {
        say(format!("{} {what}", if *ok { "PASS" } else { "FAIL" }));
        passed &= ok;
    }
    for o in overlaps.iter().take(5) {
        say(format!("  overlap: {o}"));
    }
    for r in replicas.iter_mut().filter(|r| r.alive) {
        r.stop.cancel();
        r.queue.shut_down();
    }
    for r in replicas {
        let _ = r.coordinator_task.await;
        for t in r.tasks {
            let _ = t.await;
        }
    }
    say(format!("verification: {}", if passed { "PASSED" } else { "FAILED" }));
    Ok(passed)
}
