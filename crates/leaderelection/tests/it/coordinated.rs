//! Coordinated leader election (KEP-4355): client-go's `LeaseCandidate` (leasecandidate_test.go)
//! and the `Coordinated` elector (`TestTryCoordinatedRenew` in leaderelection_test.go), against
//! kcache-testserver with the `CoordinatedLeaderElection` gate on and its coordinator (kube-apiserver's
//! `leader-election-controller`), on tokio's paused clock with a wall clock that moves with it.

use std::time::Duration;

use k8s_openapi::api::coordination::v1beta1::LeaseCandidate;
use kcache_leaderelection::Outcome;
use kube::api::{Api, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::common::{
    self, Candidate, Event, PausedClock, config, coordinated_server, create_lease, holder, lease_verbs, pass,
    start_lease_candidate, stored, stored_candidate,
};

/// A coordinated candidate's config on `clock`.
fn coordinated(server: &kcache_testserver::TestServer, clock: PausedClock, identity: &str) -> Candidate {
    Candidate::start_with(server, config(identity).coordinated(true), move |b| b.clock(clock))
}

/// client-go's `TestLeaseCandidateCreation`: a candidate creates its LeaseCandidate with the
/// lease name, its versions, the strategy and a `renewTime`.
#[tokio::test(start_paused = true)]
async fn a_lease_candidate_publishes_itself() {
    let clock = PausedClock::new();
    let server = coordinated_server(clock).await;
    let stop = CancellationToken::new();
    let run = start_lease_candidate(&server, clock, "a", "1.36.3", "1.36.0", &stop);
    pass(Duration::from_millis(10)).await;
    let c = stored_candidate(&server, "a");
    let spec = &c["spec"];
    assert_eq!(spec["leaseName"], common::LEASE);
    assert_eq!(
        (spec["binaryVersion"].as_str(), spec["emulationVersion"].as_str()),
        (Some("1.36.3"), Some("1.36.0"))
    );
    assert_eq!(spec["strategy"], "OldestEmulationVersion");
    assert!(spec["renewTime"].is_string(), "{spec}");
    stop.cancel();
    run.await.unwrap();
}

/// client-go's `TestLeaseCandidateAck`: when `pingTime` is set after `renewTime`, the candidate
/// renews at once (not at its five-minute interval), so `renewTime` is no earlier than the ping.
#[tokio::test(start_paused = true)]
async fn a_lease_candidate_renews_when_pinged() {
    let clock = PausedClock::new();
    let server = coordinated_server(clock).await;
    let stop = CancellationToken::new();
    let run = start_lease_candidate(&server, clock, "a", "1.36.3", "1.36.0", &stop);
    pass(Duration::from_millis(10)).await;
    let first = stored_candidate(&server, "a")["spec"]["renewTime"].clone();

    // Ping at 3 s: before the coordinator's own lease (5 s) could expire and make it ping.
    pass(Duration::from_secs(3)).await;
    let api: Api<LeaseCandidate> = Api::namespaced(server.in_memory_client(), common::NS);
    let mut c = api.get("a").await.unwrap();
    let ping = k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
        serde_json::from_value(json!(kcache_utils_wall(&clock))).unwrap(),
    );
    c.spec.ping_time = Some(ping.clone());
    api.replace("a", &PostParams::default(), &c).await.unwrap();
    pass(Duration::from_millis(10)).await;

    let spec = stored_candidate(&server, "a")["spec"].clone();
    assert_eq!(spec["pingTime"], serde_json::to_value(&ping).unwrap(), "our ping, not the coordinator's");
    assert_ne!(spec["renewTime"], first, "renewed");
    assert_eq!(spec["renewTime"], spec["pingTime"], "at the ping's instant: the renewal answered the ping");
    stop.cancel();
    run.await.unwrap();
}

/// The wall time of `clock` as a MicroTime string.
fn kcache_utils_wall(clock: &PausedClock) -> String {
    use kcache_utils::Clock;
    let d = clock.wall_now().duration_since(std::time::SystemTime::UNIX_EPOCH).unwrap();
    let t = k8s_openapi::jiff::Timestamp::from_microsecond(d.as_micros() as i64).unwrap();
    serde_json::to_value(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(t))
        .unwrap()
        .as_str()
        .unwrap()
        .to_string()
}

/// `TestTryCoordinatedRenew`, "don't acquire from led, acked object" and "renew already acquired
/// object", through the coordinator: it elects the candidate with the oldest emulation version
/// and writes it as the holder; that candidate renews the Lease (keeping the coordinator's
/// `strategy`), the other never writes it.
#[tokio::test(start_paused = true)]
async fn the_coordinator_elects_and_candidates_follow() {
    let clock = PausedClock::new();
    let server = coordinated_server(clock).await;
    let stop = CancellationToken::new();
    // b emulates the older version: the coordinator's choice.
    let lc_b = start_lease_candidate(&server, clock, "b", "1.36.3", "1.35.0", &stop);
    pass(Duration::from_millis(10)).await;
    assert_eq!(holder(&server), "b", "elected as soon as it published itself");
    let mut a = coordinated(&server, clock, "a");
    let mut b = coordinated(&server, clock, "b");
    let lc_a = start_lease_candidate(&server, clock, "a", "1.36.3", "1.36.0", &stop);
    pass(Duration::from_secs(60)).await;

    assert!(b.elector.is_leader() && !a.elector.is_leader());
    assert_eq!(a.elector.leader().as_deref(), Some("b"));
    let lease = stored(&server);
    assert_eq!(lease["spec"]["holderIdentity"], "b");
    assert_eq!(lease["spec"]["strategy"], "OldestEmulationVersion", "kept by the holder's renewals");
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 15, "the holder's, after the coordinator's 5");
    assert!(
        lease_verbs(&server, "a").iter().all(|v| *v == "get"),
        "a coordinated candidate never takes the lease"
    );
    assert!(lease_verbs(&server, "b").contains(&"update"));
    assert_eq!(a.event_kinds(), [Event::NewLeader("b".into())]);

    a.stop().await;
    assert_eq!(b.stop().await, Outcome::Cancelled { released: false });
    stop.cancel();
    lc_a.await.unwrap();
    lc_b.await.unwrap();
}

/// The end of term: a better candidate joins while another leads; the coordinator pings both,
/// then sets `preferredHolder`; the holder stops renewing (client-go's "Lease is marked as 'end of
/// term'") and its leadership ends at the renew deadline; once the Lease expires the coordinator
/// writes the preferred candidate as holder, which then leads. Never both at once.
#[tokio::test(start_paused = true)]
async fn a_holder_steps_down_for_the_preferred_holder() {
    let clock = PausedClock::new();
    let server = coordinated_server(clock).await;
    let stop = CancellationToken::new();
    let lc_a = start_lease_candidate(&server, clock, "a", "1.36.3", "1.36.0", &stop);
    let mut a = coordinated(&server, clock, "a");
    pass(Duration::from_secs(5)).await;
    assert!(a.elector.is_leader());
    let mut b = coordinated(&server, clock, "b");
    let lc_b = start_lease_candidate(&server, clock, "b", "1.36.3", "1.35.0", &stop);
    pass(Duration::from_secs(3)).await;
    assert_eq!(stored(&server)["spec"]["preferredHolder"], "b", "the coordinator marked the end of a's term");
    assert!(stored_candidate(&server, "a")["spec"]["pingTime"].is_string(), "a was pinged before the vote");

    pass(Duration::from_secs(60)).await;
    let outcome = tokio::time::timeout(Duration::from_secs(60), a.join()).await;
    assert_eq!(outcome.ok(), Some(Outcome::LeaseLost { released: false }), "a stepped down by itself");
    assert!(b.elector.is_leader());
    assert_eq!(holder(&server), "b");
    let (stopped, started) = (a.token_cancelled_at().unwrap(), b.started_at().unwrap());
    assert!(stopped < started, "a stopped ({stopped:?}) before b started ({started:?})");
    let events = a.event_kinds();
    assert_eq!(events[..2], [Event::NewLeader("a".into()), Event::Started]);
    assert!(
        events.contains(&Event::TokenCancelled { holder: "a".into() }) && events.contains(&Event::Stopped)
    );

    b.stop().await;
    stop.cancel();
    lc_a.await.unwrap();
    lc_b.await.unwrap();
}

/// `tryCoordinatedRenew`'s first branch: without a Lease (no coordinator has elected anyone) a
/// coordinated candidate waits; it never creates the Lease.
#[tokio::test(start_paused = true)]
async fn a_coordinated_candidate_never_creates_the_lease() {
    let clock = PausedClock::new();
    let server = coordinated_server(clock).await;
    let mut a = coordinated(&server, clock, "a");
    pass(Duration::from_secs(30)).await;
    assert!(!a.elector.is_leader());
    assert_eq!(stored(&server), serde_json::Value::Null);
    assert!(lease_verbs(&server, "a").iter().all(|v| *v == "get"));
    assert_eq!(a.stop().await, Outcome::CancelledBeforeLeading);
}

/// `tryCoordinatedRenew` on a Lease written by hand (no candidates, so the coordinator stays
/// out): a Lease naming this candidate with a `preferredHolder` is not taken ("end of term");
/// once the mark is gone it is renewed, keeping `strategy`, `acquireTime` and the transitions.
#[tokio::test(start_paused = true)]
async fn a_lease_marked_end_of_term_is_not_renewed() {
    let clock = PausedClock::new();
    let server = coordinated_server(clock).await;
    create_lease(
        &server,
        json!({"holderIdentity": "a", "leaseDurationSeconds": 5, "leaseTransitions": 2,
               "strategy": "OldestEmulationVersion", "preferredHolder": "b"}),
    )
    .await;
    let mut a = coordinated(&server, clock, "a");
    pass(Duration::from_secs(4)).await;
    assert!(!a.elector.is_leader());
    assert!(lease_verbs(&server, "a").iter().all(|v| *v == "get"));

    let leases = common::leases(&server);
    let mut lease = leases.get(common::LEASE).await.unwrap();
    lease.spec.as_mut().unwrap().preferred_holder = None;
    leases.replace(common::LEASE, &PostParams::default(), &lease).await.unwrap();
    // The next try (at most 2.2 retry periods later) sees the change.
    pass(Duration::from_secs(5)).await;
    assert!(a.elector.is_leader());
    let spec = stored(&server)["spec"].clone();
    assert_eq!(spec["holderIdentity"], "a");
    assert_eq!(spec["strategy"], "OldestEmulationVersion");
    assert_eq!(spec["leaseTransitions"], 2, "the coordinator's election is not a transition");
    assert_eq!(spec["leaseDurationSeconds"], 15);
    a.stop().await;
}

/// kube-apiserver's `TestReconcileElectionStep`, "candidates exist, should only elect leader from
/// acked candidates" and "should ping on election": a candidate whose process is gone (its
/// LeaseCandidate left behind, as client-go leaves it) is pinged once its lease expired, does not
/// answer, and is passed over although its emulation version is older.
#[tokio::test(start_paused = true)]
async fn a_candidate_that_does_not_answer_the_ping_is_not_elected() {
    let clock = PausedClock::new();
    let server = coordinated_server(clock).await;
    let gone = CancellationToken::new();
    let lc_a = start_lease_candidate(&server, clock, "a", "1.36.3", "1.34.0", &gone);
    pass(Duration::from_millis(10)).await;
    assert_eq!(holder(&server), "a", "the only candidate");
    // a's process ends before it ever renews the lease: its LeaseCandidate stays, the lease
    // expires, and the coordinator pings a for a new election.
    gone.cancel();
    lc_a.await.unwrap();
    pass(Duration::from_secs(10)).await;
    let a_spec = stored_candidate(&server, "a")["spec"].clone();
    assert!(a_spec["pingTime"].as_str() > a_spec["renewTime"].as_str(), "pinged, unanswered: {a_spec}");
    assert_eq!(holder(&server), "a", "nobody else to elect");

    let stop = CancellationToken::new();
    let lc_b = start_lease_candidate(&server, clock, "b", "1.36.3", "1.36.0", &stop);
    let mut b = coordinated(&server, clock, "b");
    pass(Duration::from_secs(10)).await;
    assert_eq!(holder(&server), "b", "elected among the candidates that answered");
    assert!(b.elector.is_leader());
    b.stop().await;
    stop.cancel();
    lc_b.await.unwrap();
}
