//! Shard assignment across processes (issue 34): three `shard-replica` processes, each a
//! `ShardCoordinator` on member Leases plus a `ShardedInformer` over one namespace's ConfigMaps,
//! against the cluster under test. Durations: LeaseDuration 4 s, RenewDeadline 2 s, RetryPeriod
//! 0.5 s. Checked from the replicas' timestamped lines (wall clock, one machine):
//!
//! - the replicas' serving sets never overlap (each line's set holds from that line until the
//!   replica's next line, or its SIGKILL's reap);
//! - once settled, the union of their caches is the server's list and no object is cached twice;
//! - after a SIGKILL, the two others cover the whole hash space within the liveness bound of
//!   kcache-sharding's README, `(LeaseDuration + 4 × RetryPeriod) + 1 s` = 7 s, and their caches
//!   partition the collection again.
//!
//! Once on a server that filters (`ShardedListAndWatch` on: the main server of `local`, an
//! embedded server with the gate), once on one that does not (the coordinated server of `local`,
//! an embedded server without the gate), where each informer filters client-side.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_e2e::{Cluster, ClusterKind, skip, write_kubeconfig};
use kcache_sharding::RangeSet;
use kcache_testserver::TestServer;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use parking_lot::Mutex;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::Notify;

use crate::configmap;

const LEASE_MS: u64 = 4000;
const RETRY_MS: u64 = 500;
/// kcache-sharding's bound after a crash: LeaseDuration + 4 × RetryPeriod + 1 s.
const BOUND: Duration = Duration::from_millis(LEASE_MS + 4 * RETRY_MS + 1000);
/// A new informer's list and sync on a loaded machine (two shared cores).
const SYNC_SLACK: Duration = Duration::from_secs(3);
const WAIT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone)]
struct State {
    t: u128,
    id: String,
    event: String,
    serving: RangeSet,
    synced: bool,
    keys: BTreeSet<String>,
}

#[derive(Default)]
struct Log {
    lines: Mutex<Vec<State>>,
    changed: Notify,
}

impl Log {
    /// The latest state line of each of `ids`.
    fn latest(&self, ids: &[String]) -> Vec<State> {
        let lines = self.lines.lock();
        ids.iter()
            .filter_map(|id| lines.iter().rev().find(|l| &l.id == id && l.event == "state").cloned())
            .collect()
    }

    /// Waits until the latest states of `ids` partition `objects` and the hash space; returns
    /// the time of the line that completed it.
    async fn wait_partition(&self, ids: &[String], objects: &BTreeSet<String>) -> Result<u128> {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let notified = self.changed.notified();
            let latest = self.latest(ids);
            if latest.len() == ids.len() && partitions(&latest, objects) {
                return Ok(latest.iter().map(|s| s.t).max().unwrap_or_default());
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                bail!(
                    "timed out waiting for {ids:?} to partition {} objects; latest: {latest:#?}",
                    objects.len()
                );
            }
        }
    }

    /// When the serving sets of `ids` first covered the hash space at or after `since`.
    fn covered_at(&self, ids: &[String], since: u128) -> Option<u128> {
        let lines = self.lines.lock();
        let mut current: BTreeMap<&str, &RangeSet> = BTreeMap::new();
        for l in lines.iter().filter(|l| l.event == "state" && ids.contains(&l.id)) {
            current.insert(&l.id, &l.serving);
            let all = current.values().fold(RangeSet::empty(), |acc, s| acc.union(s));
            if l.t >= since && all.is_full() {
                return Some(l.t);
            }
        }
        None
    }
}

fn partitions(latest: &[State], objects: &BTreeSet<String>) -> bool {
    let mut keys = BTreeSet::new();
    let mut serving = RangeSet::empty();
    for s in latest {
        if !s.synced || !s.keys.is_disjoint(&keys) || serving.overlaps(&s.serving) {
            return false;
        }
        keys.extend(s.keys.iter().cloned());
        serving = serving.union(&s.serving);
    }
    serving.is_full() && &keys == objects
}

/// No two replicas' serving sets overlap at any instant: each state holds from its line to the
/// same replica's next line (or `ends[id]`, its reap after a SIGKILL, or the end of the run).
fn check_never_two_owners(lines: &[State], ends: &BTreeMap<String, u128>) -> Result<()> {
    let mut intervals: Vec<(&str, u128, u128, &RangeSet)> = Vec::new();
    let states: Vec<&State> = lines.iter().filter(|l| l.event == "state").collect();
    for (i, s) in states.iter().enumerate() {
        let next = states[i + 1..].iter().find(|n| n.id == s.id).map(|n| n.t);
        let end = next.or_else(|| ends.get(&s.id).copied()).unwrap_or(u128::MAX);
        intervals.push((&s.id, s.t, end, &s.serving));
    }
    for (i, a) in intervals.iter().enumerate() {
        for b in &intervals[i + 1..] {
            if a.0 != b.0 && a.1 < b.2 && b.1 < a.2 && a.3.overlaps(b.3) {
                bail!(
                    "{} and {} served {:?} at once ({}..{} and {}..{})",
                    a.0,
                    b.0,
                    a.3.intersection(b.3),
                    a.1,
                    a.2,
                    b.1,
                    b.2
                );
            }
        }
    }
    Ok(())
}

fn now_ns() -> u128 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos())
}

fn spawn(kubeconfig: &Path, ns: &str, id: &str, log: &Arc<Log>, logs: &Path) -> Result<Child> {
    let stderr = std::fs::File::create(logs.join(format!("{id}.stderr")))?;
    let mut child = Command::new(env!("CARGO_BIN_EXE_shard-replica"))
        .arg("-kubeconfig")
        .arg(kubeconfig)
        .args(["-namespace", ns, "-group", "e2e-shard", "-identity", id])
        .args(["-lease-ms", &LEASE_MS.to_string(), "-renew-ms", "2000", "-retry-ms", &RETRY_MS.to_string()])
        .env("RUST_LOG", "kcache_sharding=debug,kcache_reflector=info")
        .stdout(Stdio::piped())
        .stderr(stderr)
        .kill_on_drop(true)
        .spawn()
        .context("starting shard-replica")?;
    let stdout = child.stdout.take().context("stdout")?;
    let log = log.clone();
    tokio::spawn(async move {
        let mut lines = BufReader::new(stdout).lines();
        while let Ok(Some(text)) = lines.next_line().await {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else { continue };
            let keys = v["keys"]
                .as_array()
                .map(|a| a.iter().filter_map(|k| k.as_str().map(str::to_string)).collect());
            log.lines.lock().push(State {
                t: v["t"].as_u64().unwrap_or_default().into(),
                id: v["id"].as_str().unwrap_or_default().to_string(),
                event: v["event"].as_str().unwrap_or_default().to_string(),
                serving: RangeSet::parse_annotation(v["serving"].as_str().unwrap_or_default())
                    .unwrap_or_default(),
                synced: v["synced"].as_bool().unwrap_or_default(),
                keys: keys.unwrap_or_default(),
            });
            log.changed.notify_waiters();
        }
    });
    Ok(child)
}

/// The 30 ConfigMaps the replicas share; created before the probe, which needs objects to judge.
async fn create_objects(api: &Api<ConfigMap>) -> Result<()> {
    for i in 0..30 {
        api.create(&PostParams::default(), &configmap(&format!("cm-{i}"), "0")).await?;
    }
    Ok(())
}

async fn three_replicas(kubeconfig: &Path, api: &Api<ConfigMap>, ns: &str, label: &str) -> Result<()> {
    let objects: BTreeSet<String> =
        api.list(&Default::default()).await?.items.iter().map(|o| o.name_any()).collect();
    let logs = std::env::temp_dir().join(format!("kcache-e2e-shards-{label}-{}", std::process::id()));
    std::fs::create_dir_all(&logs)?;
    let log = Arc::new(Log::default());
    let ids: Vec<String> = (0..3).map(|i| format!("replica-{i}")).collect();
    let mut children = Vec::new();
    for id in &ids {
        children.push(spawn(kubeconfig, ns, id, &log, &logs)?);
    }
    let result = async {
        let settled = log.wait_partition(&ids, &objects).await?;
        eprintln!("{label}: three replicas partition {} objects", objects.len());
        // SIGKILL replica-0: its Lease stays until it expires.
        let pid = children[0].id().context("running")?;
        let killed_at = now_ns();
        let status = std::process::Command::new("kill").args(["-KILL", &pid.to_string()]).status()?;
        ensure!(status.success(), "kill -KILL {pid}");
        children[0].wait().await?;
        let reaped = now_ns();
        let rest = ids[1..].to_vec();
        let partitioned = log.wait_partition(&rest, &objects).await?;
        let covered = log.covered_at(&rest, reaped).context("covered after the kill")?;
        let took = Duration::from_nanos((covered.saturating_sub(killed_at)) as u64);
        let synced = Duration::from_nanos((partitioned.saturating_sub(killed_at)) as u64);
        eprintln!("{label}: after SIGKILL the others served everything in {took:.2?} (bound {BOUND:?}); caches partitioned again in {synced:.2?}");
        ensure!(took <= BOUND, "takeover took {took:?}, over the bound {BOUND:?}");
        ensure!(synced <= BOUND + SYNC_SLACK, "caches partitioned again after {synced:?}");
        let ends = BTreeMap::from([(ids[0].clone(), reaped)]);
        check_never_two_owners(&log.lines.lock(), &ends)?;
        let _ = settled;
        Ok(())
    }
    .await;
    for c in children.iter_mut().skip(1) {
        if let Some(pid) = c.id() {
            let _ = std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status();
        }
        let _ = tokio::time::timeout(WAIT, c.wait()).await;
    }
    if result.is_ok() {
        let _ = std::fs::remove_dir_all(&logs);
    } else {
        eprintln!("{label}: replica stderr in {}", logs.display());
    }
    result
}

/// What must live as long as the test: the namespace's guard (deleted on drop on kind and
/// kubeconfig clusters) or the embedded server.
#[allow(dead_code)]
enum Keep {
    Namespace(Box<kcache_e2e::Namespace>),
    Server(TestServer),
}

/// The kubeconfig of a fresh embedded server (anonymous: the processes read it) with or without
/// the gate, and the server.
async fn embedded(gate: bool, name: &str) -> Result<(PathBuf, TestServer)> {
    let server = TestServer::builder().sharded_list_and_watch(gate).start().await;
    Ok((write_kubeconfig(&server.url(), name)?, server))
}

/// The reflector's verdict on `target`: whether it filters by `shardSelector` (an informer of
/// half the hash space stays in `ShardMode::ServerSide` once synced). The namespace must hold
/// objects: a watch-list's end bookmark carries no `shardInfo`, so only an object outside the
/// range shows that a server did not filter (the chance that 30 all fall in one half is 2^-30).
async fn server_filters(target: &kcache_e2e::Target, ns: &str) -> Result<bool> {
    let half =
        RangeSet::from_range(0, 1 << 63).to_selector(kcache_shard_selector::ShardKey::Uid).context("half")?;
    let factory = kcache_informer::SharedInformerFactory::new(target.client(), Duration::ZERO);
    let informer = factory.informer::<ConfigMap>(&kcache_informer::InformerScope::namespace(ns).shard(half));
    factory.start();
    ensure!(factory.wait_for_cache_sync().await, "probe informer synced");
    let mode = informer.shard_mode();
    factory.shutdown().await;
    Ok(mode == kcache_reflector::ShardMode::ServerSide)
}

/// Three replica processes on a server that filters by `shardSelector` (on `local`, the main
/// server once it runs with `ShardedListAndWatch=true`; SKIPPED while it does not).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replica_processes_share_and_take_over_on_a_sharding_server() -> Result<()> {
    const TEST: &str = "three_replica_processes_share_and_take_over_on_a_sharding_server";
    let c = Cluster::connect().await?;
    let (kubeconfig, api, ns, _keep) = match (c.kind, c.kubeconfig_file()) {
        (ClusterKind::Local | ClusterKind::Kind | ClusterKind::Kubeconfig, Some(path)) => {
            let ns = c.namespace(&c.main, "shard-procs").await?;
            create_objects(&Api::namespaced(c.main.client(), &ns.name)).await?;
            if !server_filters(&c.main, &ns.name).await? {
                skip(TEST, "the main server does not filter by shardSelector (ShardedListAndWatch off)");
                return Ok(());
            }
            (path, Api::namespaced(c.main.client(), &ns.name), ns.name.clone(), Keep::Namespace(Box::new(ns)))
        }
        (ClusterKind::Embedded, _) => {
            let (path, server) = embedded(true, &c.unique("shard-procs")).await?;
            create_objects(&Api::namespaced(server.client(), "default")).await?;
            (path, Api::namespaced(server.client(), "default"), "default".to_string(), Keep::Server(server))
        }
        _ => {
            skip(TEST, "no kubeconfig for the replica processes");
            return Ok(());
        }
    };
    three_replicas(&kubeconfig, &api, &ns, "gate on").await
}

/// The same on a server without the gate: every informer filters client-side.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replica_processes_share_and_take_over_with_client_side_filtering() -> Result<()> {
    let c = Cluster::connect().await?;
    // On `local` the coordinated server runs without ShardedListAndWatch.
    let coordinated = std::env::var_os("KCACHE_E2E_COORDINATED_KUBECONFIG").map(PathBuf::from);
    let (kubeconfig, api, ns, _keep) = match (c.kind, coordinated, c.coordinated.as_ref()) {
        (ClusterKind::Local, Some(path), Some(target)) => {
            let ns = c.namespace(target, "shard-procs-off").await?;
            create_objects(&Api::namespaced(target.client(), &ns.name)).await?;
            ensure!(
                !server_filters(target, &ns.name).await?,
                "the coordinated server filters by shardSelector"
            );
            (path, Api::namespaced(target.client(), &ns.name), ns.name.clone(), Keep::Namespace(Box::new(ns)))
        }
        (ClusterKind::Embedded, _, _) => {
            let (path, server) = embedded(false, &c.unique("shard-procs-off")).await?;
            create_objects(&Api::namespaced(server.client(), "default")).await?;
            (path, Api::namespaced(server.client(), "default"), "default".to_string(), Keep::Server(server))
        }
        _ => {
            skip(
                "three_replica_processes_share_and_take_over_with_client_side_filtering",
                "no server without the gate",
            );
            return Ok(());
        }
    };
    three_replicas(&kubeconfig, &api, &ns, "gate off").await
}
