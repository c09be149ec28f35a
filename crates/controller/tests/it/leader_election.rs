//! `Controller::leader_election` (feature `leaderelection`): controller-runtime's manager with
//! `LeaderElection: true` — informers warm and keys queued on every replica, workers only on the
//! leader; a clean stop drains, then releases the lease (`LeaderElectionReleaseOnCancel`) so a
//! standby takes over at its next try; a lost lease stops the controller with an error
//! (controller-runtime: "leader election lost").
//!
//! Short durations (lease 2 s, renew deadline 1 s, retry 200 ms) on the real clock: every wait
//! is for a recorded event, never for time to pass.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kcache_controller::{Action, Context, Controller, ControllerError, Reconciler, Watch};
use kcache_informer::{InformerScope, SharedInformerFactory, wait_for_cache_sync};
use kcache_leaderelection::LeaderElectionConfig;
use kcache_testserver::{RequestFault, TestServer, Verb};
use kube::api::Api;

use crate::common::{Running, Signal, cm, create};

const LEASE: &str = "my-controller";

fn config(identity: &str) -> LeaderElectionConfig {
    LeaderElectionConfig::new("default", LEASE, identity)
        .lease_duration(Duration::from_secs(2))
        .renew_deadline(Duration::from_secs(1))
        .retry_period(Duration::from_millis(200))
        .release_on_cancel(true)
}

/// A replica `identity` of a ConfigMap controller that records `<identity> <name>` per reconcile.
fn replica(
    controller: Controller<ConfigMap>,
    identity: &'static str,
    signal: &Signal,
) -> Controller<ConfigMap, Signal, Reconciler<ConfigMap, Signal, Infallible>> {
    controller.leader_election(config(identity)).context(signal.clone()).reconcile(
        move |cm: Arc<ConfigMap>, ctx: Context<Signal>| async move {
            ctx.record(format!("{identity} {}", cm.metadata.name.as_deref().unwrap_or_default()));
            Ok::<_, Infallible>(Action::await_change())
        },
    )
}

/// Mirrors controller-runtime's leader-elected manager (`cm.startLeaderElection`,
/// `LeaderElectionReleaseOnCancel`) with client-go's `ReleaseOnCancel`: the first replica leads
/// and reconciles; the standby syncs and queues the key but does not reconcile it; stopping the
/// leader releases the lease and the standby reconciles its queued key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_reconciles_and_a_clean_stop_hands_over() {
    let server = TestServer::start().await;
    let cms = Api::<ConfigMap>::namespaced(server.client(), "default");
    let signal = Signal::default();
    create(&cms, &cm("x", &[], &[])).await;

    let a = replica(Controller::new(server.client(), Watch::namespace("default")), "a", &signal);
    let a_health = a.health_check();
    let a = Running::spawn(move |cancel| a.run(cancel));
    signal.wait_for("a leads and reconciles x", |e| e.contains(&"a x".to_owned())).await;
    assert!(a_health.check().gate.unwrap().open);

    // b shares a factory with the test, so the test can wait for b's cache without polling.
    let factory = Arc::new(SharedInformerFactory::new(server.client(), Duration::ZERO));
    let b =
        replica(Controller::with_factory(Arc::clone(&factory), Watch::namespace("default")), "b", &signal);
    let b_health = b.health_check();
    let b = Running::spawn(move |cancel| b.run(cancel));
    let informer = factory.informer::<ConfigMap>(&InformerScope::namespace("default"));
    let never = tokio_util::sync::CancellationToken::new();
    let synced =
        tokio::time::timeout(crate::common::TIMEOUT, wait_for_cache_sync(&never, &[&informer])).await;
    assert_eq!(synced.ok(), Some(true), "b's cache syncs");
    // The gate is in place before the informers start: b is a standby with a warm cache.
    let report = b_health.check();
    assert!(!report.gate.as_ref().unwrap().open, "b does not lead: {report}");

    a.stop().await.expect("a clean stop");
    signal.wait_for("b takes over and reconciles x", |e| e.contains(&"b x".to_owned())).await;
    assert!(b_health.check().gate.unwrap().open);
    assert_eq!(signal.events().iter().filter(|e| e.starts_with("a ")).count(), 1, "{:?}", signal.events());
    let lease = Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(server.client(), "default")
        .get(LEASE)
        .await
        .unwrap();
    assert_eq!(lease.spec.unwrap().holder_identity.as_deref(), Some("b"));
    b.stop().await.expect("b stops");
    factory.shutdown().await;
}

/// Mirrors client-go's renew loop stepping down (`LeaderElector.renew`: no renewal within
/// RenewDeadline) as controller-runtime's manager reports it: the leader whose renewals all
/// fail (a conflict storm on its lease) stops with `LeaderElectionLost`, not silently.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_lease_stops_the_controller_with_an_error() {
    let server = TestServer::start().await;
    let cms = Api::<ConfigMap>::namespaced(server.client(), "default");
    let signal = Signal::default();
    create(&cms, &cm("x", &[], &[])).await;
    let a = replica(Controller::new(server.client(), Watch::namespace("default")), "a", &signal);
    let a = Running::spawn(move |cancel| a.run(cancel));
    signal.wait_for("a leads", |e| e.contains(&"a x".to_owned())).await;

    server.faults().fail_requests_until_removed(
        usize::MAX,
        RequestFault::conflict("leases.coordination.k8s.io", LEASE).verb(Verb::Update),
    );
    let result = a.join().await;
    assert!(matches!(result, Err(ControllerError::LeaderElectionLost)), "{result:?}");
}

/// An invalid election config is refused when `run` starts (client-go's `NewLeaderElector`
/// validation), as a typed error.
#[tokio::test]
async fn an_invalid_election_config_is_a_typed_error() {
    let server = TestServer::start().await;
    let controller = Controller::<ConfigMap>::new(server.client(), Watch::namespace("default"))
        .leader_election(LeaderElectionConfig::new("default", LEASE, ""))
        .reconcile(|_: Arc<ConfigMap>, _: Context<()>| async { Ok::<_, Infallible>(Action::await_change()) });
    let result = controller.run(tokio_util::sync::CancellationToken::new()).await;
    assert!(
        matches!(result, Err(ControllerError::LeaderElection(kcache_leaderelection::Error::EmptyIdentity))),
        "{result:?}"
    );
}

/// Coordinated leader election (KEP-4355) through the builder: the controller publishes its
/// LeaseCandidate (client-go's `NewCandidate(..).Run`), the server's coordinator (kcache-testserver
/// with the `CoordinatedLeaderElection` gate) writes it into the Lease, and its workers run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinated_controller_leads_once_the_coordinator_picks_it() {
    let server = TestServer::builder().coordinated_leader_election(true).start().await;
    let cms = Api::<ConfigMap>::namespaced(server.client(), "default");
    let signal = Signal::default();
    create(&cms, &cm("x", &[], &[])).await;
    let election = config("a").coordinated(true);
    let candidate = kcache_leaderelection::LeaseCandidateConfig::for_election(&election, "1.36.0", "1.36.0");
    let a = replica(Controller::new(server.client(), Watch::namespace("default")), "a", &signal)
        .lease_candidate(candidate);
    let a = Running::spawn(move |cancel| a.run(cancel));
    signal.wait_for("the coordinator elects a, which reconciles x", |e| e.contains(&"a x".to_owned())).await;
    let candidates = Api::<k8s_openapi::api::coordination::v1beta1::LeaseCandidate>::namespaced(
        server.client(),
        "default",
    );
    assert_eq!(candidates.get("a").await.unwrap().spec.lease_name, LEASE);
    a.stop().await.expect("a stops");
}
