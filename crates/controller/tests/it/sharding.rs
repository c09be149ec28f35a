//! `Controller::shard_coordinator` and `Controller::static_shard` (feature `sharding`, issue
//! #34): a replica reconciles only the primary objects of its share of the hash space. client-go
//! and controller-runtime have no counterpart (client-go passes KEP-5866's `shardSelector`
//! through); the shape is that of `leader_election.rs`: replicas over one test server, short
//! Lease durations (lease 2 s, renew deadline 1 s, retry 200 ms) on the real clock, every wait for
//! a recorded event.

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kcache_controller::{Action, Backlog, Context, Controller, HealthCheck, Watch};
use kcache_shard_selector::ShardKey;
use kcache_sharding::{Assignment, ShardCoordinator, ShardingConfig, StaticShard};
use kcache_testserver::TestServer;
use kube::api::{Api, Patch, PatchParams};
use tokio::sync::watch;

use crate::common::{Running, Signal, TIMEOUT, cm, create, value};

const GROUP: &str = "cm-controller";
const NAMES: [&str; 12] = ["a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8", "a9", "b0", "b1"];

fn coordinator(server: &TestServer, identity: &str) -> ShardCoordinator {
    let config = ShardingConfig::new("default", GROUP, identity).durations(
        Duration::from_secs(2),
        Duration::from_secs(1),
        Duration::from_millis(200),
    );
    ShardCoordinator::new(server.client(), config).expect("a valid config")
}

/// A controller `identity` recording `<identity> <name> <value>` per reconcile.
fn replica(
    server: &TestServer,
    identity: &'static str,
    signal: &Signal,
    shard: impl FnOnce(Controller<ConfigMap>) -> Controller<ConfigMap>,
) -> Running {
    let controller = shard(Controller::new(server.client(), Watch::namespace("default")))
        .context(signal.clone())
        .reconcile(move |cm: Arc<ConfigMap>, ctx: Context<Signal>| async move {
            ctx.record(format!(
                "{identity} {} {}",
                cm.metadata.name.as_deref().unwrap_or_default(),
                value(&cm)
            ));
            Ok::<_, Infallible>(Action::await_change())
        });
    Running::spawn(move |cancel| controller.run(cancel))
}

async fn create_all(server: &TestServer) -> Api<ConfigMap> {
    let cms = Api::<ConfigMap>::namespaced(server.client(), "default");
    for name in NAMES {
        create(&cms, &cm(name, &[], &[("v", "1")])).await;
    }
    cms
}

/// Waits until `rx`'s assignment satisfies `cond`.
async fn assignment_where(
    rx: &mut watch::Receiver<Assignment>,
    what: &str,
    cond: impl Fn(&Assignment) -> bool,
) {
    let waited = tokio::time::timeout(TIMEOUT, rx.wait_for(|a| cond(a))).await;
    assert!(matches!(waited, Ok(Ok(_))), "timed out waiting for: {what}");
}

/// Waits until the two coordinators serve disjoint, non-empty shares covering the hash space.
async fn split(a: &ShardCoordinator, b: &ShardCoordinator) {
    let (mut ra, mut rb) = (a.assignments(), b.assignments());
    let wait = async {
        loop {
            let (sa, sb) = (ra.borrow_and_update().serving.clone(), rb.borrow_and_update().serving.clone());
            if !sa.is_empty() && !sb.is_empty() && !sa.overlaps(&sb) && sa.union(&sb).is_full() {
                return;
            }
            tokio::select! {
                _ = ra.changed() => {}
                _ = rb.changed() => {}
            }
        }
    };
    tokio::time::timeout(TIMEOUT, wait).await.expect("the two replicas split the hash space");
}

/// The `<name>`s of the events of `identity` with `value`.
fn reconciled(events: &[String], identity: &str, value: &str) -> BTreeSet<String> {
    events
        .iter()
        .filter_map(|e| {
            let mut parts = e.split(' ');
            let (id, name, v) = (parts.next()?, parts.next()?, parts.next()?);
            (id == identity && v == value).then(|| name.to_owned())
        })
        .collect()
}

/// Which replica owns each ConfigMap now, by its uid.
async fn owners(cms: &Api<ConfigMap>, replicas: &[(&str, &ShardCoordinator)]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for name in NAMES {
        let obj = cms.get(name).await.unwrap();
        let owner = replicas.iter().find(|(_, c)| c.owns(&obj.metadata)).map(|(id, _)| (*id).to_owned());
        out.insert(name.to_owned(), owner.expect("every object has an owner once split"));
    }
    out
}

async fn bump_all(cms: &Api<ConfigMap>) {
    for name in NAMES {
        let patch = serde_json::json!({ "data": { "v": "2" } });
        cms.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    }
}

/// Issue #34's "two replicas split the work": two controllers whose coordinators are members of
/// one group each reconcile only the ConfigMaps of their own share (checked on an update every
/// ConfigMap gets once the hash space is split); then one leaves gracefully (its Lease deleted
/// when its `run` returns) and the other, serving everything, reconciles the rest at once,
/// without a new event (the objects of gained ranges are enqueued).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_coordinated_replicas_split_the_keys_and_one_takes_over_after_a_leave() {
    let server = TestServer::start().await;
    let cms = create_all(&server).await;
    let signal = Signal::default();
    let (ca, cb) = (coordinator(&server, "a"), coordinator(&server, "b"));
    let a = replica(&server, "a", &signal, {
        let c = ca.clone();
        move |ctl| ctl.shard_coordinator(c)
    });
    let b = replica(&server, "b", &signal, {
        let c = cb.clone();
        move |ctl| ctl.shard_coordinator(c)
    });
    split(&ca, &cb).await;
    let owner = owners(&cms, &[("a", &ca), ("b", &cb)]).await;
    bump_all(&cms).await;
    signal
        .wait_for("each owner reconciles its ConfigMaps at v=2", |e| {
            owner.iter().all(|(name, id)| reconciled(e, id, "2").contains(name))
        })
        .await;
    let events = signal.events();
    for (id, other) in [("a", "b"), ("b", "a")] {
        let theirs: BTreeSet<String> =
            owner.iter().filter(|(_, o)| o.as_str() == other).map(|(n, _)| n.clone()).collect();
        let trespass: Vec<_> = reconciled(&events, id, "2").intersection(&theirs).cloned().collect();
        assert!(trespass.is_empty(), "{id} reconciled {other}'s {trespass:?}: {events:?}");
    }
    assert!(owner.values().any(|o| o == "a") && owner.values().any(|o| o == "b"), "{owner:?}");

    // a leaves: b gets its ranges and reconciles a's ConfigMaps without any new event.
    a.stop().await.expect("a clean stop");
    let mut rb = cb.assignments();
    assignment_where(&mut rb, "b serves everything", |x| x.serving.is_full()).await;
    signal
        .wait_for("b reconciles a's ConfigMaps", |e| {
            let by_b = reconciled(e, "b", "2");
            NAMES.iter().all(|n| by_b.contains(*n))
        })
        .await;
    b.stop().await.expect("b stops");
}

/// Issue #34's "a workqueue drops keys its replica no longer owns": a replica whose single worker
/// is busy has the other keys queued; another replica joins and takes part of the hash space;
/// the first replica's worker then reconciles the queued keys it still owns and drops the others
/// (the check at dequeue), which it never reconciles. The reconcile running when the range moved
/// finishes (the documented choice).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_queued_when_its_range_is_lost_is_not_reconciled() {
    let server = TestServer::start().await;
    let cms = create_all(&server).await;
    let signal = Signal::default();
    let release = Arc::new(tokio::sync::Notify::new());
    let first = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let ca = coordinator(&server, "a");
    let controller = Controller::<ConfigMap>::new(server.client(), Watch::namespace("default"))
        .shard_coordinator(ca.clone())
        .context((signal.clone(), Arc::clone(&release), first))
        .reconcile(
            |cm: Arc<ConfigMap>,
             ctx: Context<(Signal, Arc<tokio::sync::Notify>, Arc<std::sync::atomic::AtomicBool>)>| async move {
                let name = cm.metadata.name.clone().unwrap_or_default();
                if ctx.2.swap(false, std::sync::atomic::Ordering::SeqCst) {
                    ctx.0.record(format!("first {name}"));
                    ctx.1.notified().await;
                }
                ctx.0.record(format!("a {name} 1"));
                Ok::<_, Infallible>(Action::await_change())
            },
        );
    let health = controller.health_check();
    let a = Running::spawn(move |cancel| controller.run(cancel));
    signal.wait_for("a's first reconcile started", |e| !e.is_empty()).await;
    let blocked = signal.events()[0].trim_start_matches("first ").to_owned();
    assert!(ca.assignment().serving.is_full(), "alone, a serves everything");
    assert_eq!(health.backlog().ready, NAMES.len() - 1, "every other key is queued");

    // b joins (a coordinator alone is enough): a hands part of the space over.
    let cb = coordinator(&server, "b");
    let stop_b = tokio_util::sync::CancellationToken::new();
    let b = tokio::spawn({
        let (cb, stop) = (cb.clone(), stop_b.clone());
        async move { cb.run(stop).await }
    });
    split(&ca, &cb).await;
    let owner = owners(&cms, &[("a", &ca), ("b", &cb)]).await;
    let lost: BTreeSet<String> =
        owner.iter().filter(|(n, o)| o.as_str() == "b" && **n != blocked).map(|(n, _)| n.clone()).collect();
    assert!(!lost.is_empty(), "b took some of a's queued keys: {owner:?}");

    release.notify_one();
    wait_idle(&health).await;
    let by_a = reconciled(&signal.events(), "a", "1");
    let kept: BTreeSet<String> =
        owner.iter().filter(|(_, o)| o.as_str() == "a").map(|(n, _)| n.clone()).collect();
    assert!(by_a.contains(&blocked), "the running reconcile finished");
    assert!(kept.is_subset(&by_a), "a reconciles the keys it kept: {by_a:?} {kept:?}");
    let trespass: Vec<_> = by_a.intersection(&lost).collect();
    assert!(trespass.is_empty(), "a reconciled keys of b's range: {trespass:?}");
    a.stop().await.expect("a stops");
    stop_b.cancel();
    b.await.unwrap().unwrap();
}

/// Waits until the controller has nothing queued and nothing running. The backlog has no
/// notification, so this yields between reads (no sleep; only reached after the last reconcile
/// was released).
async fn wait_idle(health: &HealthCheck) {
    let wait = async {
        while health.backlog() != Backlog::default() {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(TIMEOUT, wait).await.expect("the queue drains");
}

/// Static sharding (a StatefulSet's ordinals): replicas 0/2 and 1/2 partition the ConfigMaps by
/// the hash of their uid, each reconciling exactly the objects `StaticShard::assignment` gives it,
/// through the API server's sharded list and watch (KEP-5866).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_shards_partition_the_keys() {
    let server = TestServer::builder().sharded_list_and_watch(true).start().await;
    let cms = create_all(&server).await;
    let signal = Signal::default();
    let shard = |i| StaticShard::new(i, 2).unwrap();
    let r0 = replica(&server, "0", &signal, move |ctl| ctl.static_shard(shard(0)));
    let r1 = replica(&server, "1", &signal, move |ctl| ctl.static_shard(shard(1)));
    let mut owner = BTreeMap::new();
    for name in NAMES {
        let obj = cms.get(name).await.unwrap();
        let i = usize::from(!shard(0).assignment(ShardKey::Uid).owns(&obj.metadata));
        assert!(shard(i).assignment(ShardKey::Uid).owns(&obj.metadata));
        owner.insert(name.to_owned(), i.to_string());
    }
    signal
        .wait_for("each ConfigMap reconciled by its shard", |e| {
            owner.iter().all(|(name, id)| reconciled(e, id, "1").contains(name))
        })
        .await;
    r0.stop().await.unwrap();
    r1.stop().await.unwrap();
    let events = signal.events();
    assert_eq!(events.len(), NAMES.len(), "each ConfigMap reconciled once, by one replica: {events:?}");
}
