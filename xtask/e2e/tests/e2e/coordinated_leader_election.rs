//! Coordinated leader election (KEP-4355) against the cluster's coordinator: two kcache
//! candidates publish LeaseCandidates (kcache-leaderelection's `LeaseCandidate`) and run
//! coordinated electors (`LeaderElectionConfig::coordinated`) on one Lease; the API server's
//! `leader-election-controller` (kube-apiserver v1.36.3 with `CoordinatedLeaderElection=true` and
//! `coordination.k8s.io/v1beta1=true`; kcache-testserver's coordinator on `embedded`) elects the
//! candidate with the oldest emulation version, and only that one leads.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::coordination::v1beta1::LeaseCandidate as LeaseCandidateObject;
use kcache_e2e::{Cluster, skip};
use kcache_leaderelection::{
    LeaderCallbacks, LeaderElectionConfig, LeaderElector, LeaseCandidate, LeaseCandidateConfig,
};
use kube::api::Api;
use parking_lot::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// When each candidate started and stopped leading.
type Spans = Arc<Mutex<Vec<(&'static str, Instant, Option<Instant>)>>>;

/// `kcache-a` (emulation version 1.36.0) starts alone and the coordinator elects it; then
/// `kcache-b` (1.35.0, so the coordinator's choice) joins: the coordinator marks the end of
/// `kcache-a`'s term (`preferredHolder`), `kcache-a` stops renewing and steps down, and the
/// coordinator hands the expired Lease to `kcache-b`. The two never lead at once, and the Lease
/// carries the coordinator's strategy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coordinated_candidates_follow_the_servers_coordinator() -> Result<()> {
    const TEST: &str = "coordinated_candidates_follow_the_servers_coordinator";
    let cluster = Cluster::connect().await?;
    let Some(target) = &cluster.coordinated else {
        skip(
            TEST,
            "the cluster has no kube-apiserver with CoordinatedLeaderElection and coordination.k8s.io/v1beta1",
        );
        return Ok(());
    };
    let ns = cluster.namespace(target, "cle").await?;
    let lease_name = "coordinated";
    let stop = CancellationToken::new();
    let spans: Spans = Arc::default();
    let start = Instant::now();
    let start_candidate = |id: &'static str, emulation: &'static str| -> Result<LeaderElector> {
        let config = LeaderElectionConfig::new(&ns.name, lease_name, id)
            .lease_duration(Duration::from_secs(4))
            .renew_deadline(Duration::from_secs(2))
            .retry_period(Duration::from_millis(500))
            .coordinated(true);
        let candidate = LeaseCandidate::new(
            target.client(),
            LeaseCandidateConfig::for_election(&config, "1.36.3", emulation),
        );
        tokio::spawn({
            let stop = stop.clone();
            async move { candidate.run(stop).await }
        });
        let (s1, s2) = (spans.clone(), spans.clone());
        let callbacks = LeaderCallbacks::new(
            move |_leading| s1.lock().push((id, Instant::now(), None)),
            move || {
                if let Some(span) = s2.lock().iter_mut().rev().find(|s| s.0 == id && s.2.is_none()) {
                    span.2 = Some(Instant::now());
                }
            },
        );
        let elector = LeaderElector::new(target.client(), config, callbacks)?;
        tokio::spawn({
            let (e, stop) = (elector.clone(), stop.clone());
            async move { e.run(stop).await }
        });
        Ok(elector)
    };
    // The coordinator runs under its own leader election in kube-apiserver and requeues every 5 s.
    let wait_for = |e: LeaderElector, what: &'static str| {
        let spans = spans.clone();
        async move {
            let deadline = Instant::now() + Duration::from_secs(90);
            while !e.is_leader() {
                ensure!(
                    Instant::now() < deadline,
                    "{what} did not lead within 90 s; spans {:?}",
                    spans.lock()
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            anyhow::Ok(())
        }
    };

    // 1. kcache-a alone: the coordinator elects the only candidate.
    let a = start_candidate("kcache-a", "1.36.0")?;
    wait_for(a.clone(), "kcache-a").await?;
    let a_leads_after = start.elapsed();
    // 2. kcache-b, with an older emulation version, joins: the coordinator pings both, marks the
    //    end of kcache-a's term (preferredHolder), kcache-a stops renewing and steps down, the
    //    Lease expires and the coordinator hands it to kcache-b.
    let joined = Instant::now();
    let b = start_candidate("kcache-b", "1.35.0")?;
    wait_for(b.clone(), "kcache-b").await?;
    let b_leads_after = joined.elapsed();
    // Hold: the choice is stable.
    tokio::time::sleep(Duration::from_secs(6)).await;
    ensure!(b.is_leader() && !a.is_leader(), "kcache-b leads, kcache-a does not");

    let lease = Api::<Lease>::namespaced(target.client(), &ns.name).get(lease_name).await?;
    let spec = lease.spec.unwrap_or_default();
    ensure!(spec.holder_identity.as_deref() == Some("kcache-b"), "holder {:?}", spec.holder_identity);
    ensure!(spec.strategy.as_deref() == Some("OldestEmulationVersion"), "strategy {:?}", spec.strategy);
    ensure!(spec.preferred_holder.is_none(), "preferredHolder {:?}", spec.preferred_holder);
    let candidates = Api::<LeaseCandidateObject>::namespaced(target.client(), &ns.name);
    for id in ["kcache-a", "kcache-b"] {
        let c = candidates.get(id).await?;
        ensure!(c.spec.lease_name == lease_name && c.spec.renew_time.is_some(), "{id}: {:?}", c.spec);
    }
    ensure!(candidates.get("kcache-a").await?.spec.ping_time.is_some(), "the coordinator pinged kcache-a");

    // Never two leaders: every span of one candidate ends before the other's next one starts.
    let spans = spans.lock().clone();
    for (i, x) in spans.iter().enumerate() {
        for y in &spans[i + 1..] {
            if x.0 != y.0 {
                let x_end = x.2.unwrap_or(Instant::now());
                ensure!(x_end <= y.1, "{} led until {x_end:?}, {} from {:?}", x.0, y.0, y.1);
            }
        }
    }
    let a_span = spans.iter().find(|s| s.0 == "kcache-a").context("kcache-a led")?;
    let a_end = a_span.2.context("kcache-a stepped down")?;
    eprintln!(
        "{TEST}: kcache-a led {:.1}s after starting; kcache-b joined and led {:.1}s later; kcache-a \
         stepped down {:.1}s after kcache-b joined, {:.1}s before kcache-b started leading",
        a_leads_after.as_secs_f64(),
        b_leads_after.as_secs_f64(),
        (a_end - joined).as_secs_f64(),
        (spans.iter().find(|s| s.0 == "kcache-b").map_or(a_end, |s| s.1) - a_end).as_secs_f64(),
    );
    stop.cancel();
    Ok(())
}
