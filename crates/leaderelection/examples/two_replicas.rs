//! Two replicas of a controller on one Lease; only the leader runs its workers.
//!
//! Each replica is a candidate for the Lease `default/example-controller`. The leader starts a
//! work queue, a producer that enqueues every ConfigMap, and two workers that annotate each one
//! with the leader's identity; when leadership ends (the token `on_started_leading` got is
//! cancelled) it shuts them down. Halfway, replica-a is stopped as in a rolling update: with
//! `release_on_cancel` it releases the lease and replica-b takes over within a retry period.
//!
//! ```sh
//! cargo run -p kcache-leaderelection --example two_replicas
//! ```
//!
//! It runs against an embedded kcache-testserver; point `kube::Client::try_default()` at a
//! cluster to run the same code there.
//!
//! `release_on_cancel` hands the lease over as soon as the run is cancelled, so a real
//! controller stops (or drains) its workers before it cancels the run; here the workers stop
//! when the leading token fires, a moment before the release, and their last writes are
//! idempotent.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kcache_leaderelection::{LeaderCallbacks, LeaderElectionConfig, LeaderElector};
use kcache_workqueue::{RateLimitingQueue, Requeue, default_controller_rate_limiter, run_workers};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const ANNOTATION: &str = "example.kcache.dev/reconciled-by";

/// The controller: runs until `leading` is cancelled.
async fn controller(
    identity: String,
    cms: Api<ConfigMap>,
    leading: CancellationToken,
    reconciled: Arc<AtomicUsize>,
) {
    let queue: RateLimitingQueue<String> = RateLimitingQueue::new(default_controller_rate_limiter());
    let workers = tokio::spawn(run_workers(queue.clone(), 2, {
        let (cms, identity) = (cms.clone(), identity.clone());
        move |name: String| {
            let (cms, identity, reconciled) = (cms.clone(), identity.clone(), reconciled.clone());
            async move {
                let patch = json!({"metadata": {"annotations": {ANNOTATION: identity}}});
                cms.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
                reconciled.fetch_add(1, Ordering::SeqCst);
                Ok::<_, kube::Error>(Requeue::Never)
            }
        }
    }));
    // The producer: a real controller would take its keys from an informer's handlers.
    loop {
        tokio::select! {
            () = leading.cancelled() => break,
            () = tokio::time::sleep(Duration::from_millis(200)) => {}
        }
        if let Ok(list) = cms.list(&ListParams::default()).await {
            for cm in list.items {
                let mine = cm.metadata.annotations.and_then(|a| a.get(ANNOTATION).cloned())
                    == Some(identity.clone());
                if !mine {
                    queue.add(cm.metadata.name.unwrap_or_default());
                }
            }
        }
    }
    queue.shut_down_with_drain().await;
    let _ = workers.await;
}

struct Replica {
    elector: LeaderElector,
    stop: CancellationToken,
    run: tokio::task::JoinHandle<kcache_leaderelection::Result<kcache_leaderelection::Outcome>>,
    reconciled: Arc<AtomicUsize>,
}

fn replica(
    client: kube::Client,
    identity: &str,
    leaders: Arc<AtomicUsize>,
    start: Instant,
) -> anyhow::Result<Replica> {
    let config = LeaderElectionConfig::new("default", "example-controller", identity)
        .lease_duration(Duration::from_secs(2))
        .renew_deadline(Duration::from_secs(1))
        .retry_period(Duration::from_millis(250))
        .release_on_cancel(true);
    let reconciled = Arc::new(AtomicUsize::new(0));
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let (id1, id2, id3) = (identity.to_string(), identity.to_string(), identity.to_string());
    let (l1, r1) = (leaders.clone(), reconciled.clone());
    let callbacks = LeaderCallbacks::new(
        move |leading: CancellationToken| {
            let n = l1.fetch_add(1, Ordering::SeqCst) + 1;
            assert_eq!(n, 1, "two leaders at once");
            println!("{:>6.2}s {id1}: started leading, starting the workers", start.elapsed().as_secs_f64());
            let (id, cms, leaders, reconciled) = (id1.clone(), cms.clone(), l1.clone(), r1.clone());
            tokio::spawn(async move {
                controller(id.clone(), cms, leading.clone(), reconciled).await;
                leaders.fetch_sub(1, Ordering::SeqCst);
                println!("{:>6.2}s {id}: workers stopped", start.elapsed().as_secs_f64());
            });
        },
        move || println!("{:>6.2}s {id2}: stopped leading", start.elapsed().as_secs_f64()),
    )
    .on_new_leader(move |leader| {
        if leader.is_empty() {
            println!("{:>6.2}s {id3}: the lease was released", start.elapsed().as_secs_f64());
        } else {
            println!("{:>6.2}s {id3}: the leader is {leader}", start.elapsed().as_secs_f64());
        }
    });
    let elector = LeaderElector::new(client, config, callbacks)?;
    let stop = CancellationToken::new();
    let run = tokio::spawn({
        let (elector, stop) = (elector.clone(), stop.clone());
        async move { elector.run(stop).await }
    });
    Ok(Replica { elector, stop, run, reconciled })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let server = kcache_testserver::TestServer::start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let start = Instant::now();
    let leaders = Arc::new(AtomicUsize::new(0));

    let a = replica(server.client(), "replica-a", leaders.clone(), start)?;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let b = replica(server.client(), "replica-b", leaders.clone(), start)?;
    for i in 0..10 {
        let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": format!("cm-{i}")}}))?;
        cms.create(&PostParams::default(), &cm).await?;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    println!(
        "{:>6.2}s is_leader: replica-a {}, replica-b {}",
        start.elapsed().as_secs_f64(),
        a.elector.is_leader(),
        b.elector.is_leader()
    );

    println!("{:>6.2}s stopping replica-a (a rolling update)", start.elapsed().as_secs_f64());
    a.stop.cancel();
    println!("{:>6.2}s replica-a: {:?}", start.elapsed().as_secs_f64(), a.run.await??);
    for i in 10..20 {
        let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": format!("cm-{i}")}}))?;
        cms.create(&PostParams::default(), &cm).await?;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    b.stop.cancel();
    println!("{:>6.2}s replica-b: {:?}", start.elapsed().as_secs_f64(), b.run.await??);

    let annotated = cms.list(&ListParams::default()).await?.items;
    let by_b = annotated
        .iter()
        .filter(|c| {
            c.metadata.annotations.as_ref().and_then(|a| a.get(ANNOTATION)).is_some_and(|v| v == "replica-b")
        })
        .count();
    println!(
        "reconciles: replica-a {}, replica-b {}; {by_b} of {} ConfigMaps last reconciled by replica-b",
        a.reconciled.load(Ordering::SeqCst),
        b.reconciled.load(Ordering::SeqCst),
        annotated.len()
    );
    anyhow::ensure!(by_b == annotated.len(), "every ConfigMap reconciled by the last leader");
    Ok(())
}
