//! Acquiring the lease: client-go's `testTryAcquireOrRenew` cases (leaderelection_test.go,
//! `TestTryAcquireOrRenewLeases`), here driven through `run` against stored leases, plus the
//! rules behind them: expiry judged by this process's clock from when it saw the record change,
//! never by the record's `renewTime`; jittered retries.

use std::time::Duration;

use kcache_testserver::TestServer;
use kube::api::PostParams;
use serde_json::json;
use tokio::time::Instant;

use crate::common::{
    self, Candidate, Event, config, create_lease, holder, lease_verbs, leases, pass, stored,
};

/// A MicroTime as kube-apiserver stores it: RFC 3339, UTC, exactly six fractional digits.
fn is_micro_time(v: &serde_json::Value) -> bool {
    let s = v.as_str().unwrap_or_default();
    s.len() == "2026-12-07T10:11:12.123456Z".len() && s.ends_with('Z') && s.as_bytes()[19] == b'.'
}

/// Keeps renewing the lease as holder `who` (a client-go leader elsewhere) with a `renewTime`
/// from a clock a day behind, every two seconds, until aborted.
fn renew_as(server: &TestServer, who: &'static str) -> tokio::task::JoinHandle<()> {
    let api = leases(server);
    tokio::spawn(async move {
        let mut n = 0u64;
        loop {
            let mut l = api.get(common::LEASE).await.unwrap();
            let spec = l.spec.as_mut().unwrap();
            spec.holder_identity = Some(who.into());
            spec.renew_time = Some(
                serde_json::from_value(json!(format!("2020-01-01T00:00:{:02}.000000Z", n % 60))).unwrap(),
            );
            api.replace(common::LEASE, &PostParams::default(), &l).await.unwrap();
            n += 1;
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    })
}

/// "acquire from no object": a 404 on get, then a create that names this candidate, with zero
/// transitions and MicroTime timestamps; then the immediate renewal (client-go's renew loop runs
/// its first poll at once), an optimistic update.
#[tokio::test(start_paused = true)]
async fn acquire_from_no_object_creates_the_lease() {
    let server = common::server().await;
    let start = Instant::now();
    let a = Candidate::start(&server, config("a"));
    pass(Duration::from_millis(100)).await;
    assert_eq!(a.started_at(), Some(start));
    let lease = stored(&server);
    let spec = &lease["spec"];
    assert_eq!(spec["holderIdentity"], "a");
    assert_eq!(spec["leaseDurationSeconds"], 15);
    assert_eq!(spec["leaseTransitions"], 0);
    assert!(is_micro_time(&spec["acquireTime"]) && is_micro_time(&spec["renewTime"]), "{spec}");
    assert_eq!(lease_verbs(&server, "a"), ["get", "create", "update"]);
    // As client-go's `acquire`: the new leader is reported (`maybeReportTransition`) before
    // leadership starts.
    assert_eq!(a.event_kinds(), [Event::NewLeader("a".into()), Event::Started]);
}

/// "acquire from object without annotations" and "acquire from unled object": a lease nobody
/// holds (no spec, or an empty holder) is taken at the first try, one more transition.
#[tokio::test(start_paused = true)]
async fn acquire_from_an_unheld_lease_at_the_first_try() {
    for spec in [json!({}), json!({"holderIdentity": "", "leaseDurationSeconds": 15, "leaseTransitions": 4})]
    {
        let server = common::server().await;
        create_lease(&server, spec.clone()).await;
        let start = Instant::now();
        let a = Candidate::start(&server, config("a"));
        pass(Duration::from_millis(100)).await;
        assert_eq!(a.started_at(), Some(start), "{spec}");
        let want = spec["leaseTransitions"].as_i64().unwrap_or(0) + 1;
        assert_eq!(stored(&server)["spec"]["leaseTransitions"], want);
        assert_eq!(lease_verbs(&server, "a")[..2], ["get", "update"]);
    }
}

/// "acquire from led object with the lease duration seconds": a lease held by someone who no
/// longer renews it is taken once `leaseDurationSeconds` (the record's 3 s, not this candidate's
/// 15 s) have passed since this candidate first saw it, at the first jittered retry after that.
#[tokio::test(start_paused = true)]
async fn acquire_from_an_expired_lease_after_its_duration() {
    let server = common::server().await;
    create_lease(&server, json!({"holderIdentity": "bing", "leaseDurationSeconds": 3})).await;
    let start = Instant::now();
    let a = Candidate::start(&server, config("a"));
    pass(Duration::from_secs(10)).await;
    let took = a.started_at().expect("acquired") - start;
    // Retries come every RetryPeriod * (1 + 1.2 r): the first one after 3 s is before 3 s + 4.4 s.
    assert!(took > Duration::from_secs(3) && took < Duration::from_millis(7400), "{took:?}");
    assert_eq!(stored(&server)["spec"]["leaseTransitions"], 1);
    assert_eq!(
        a.event_kinds()[..3],
        [Event::NewLeader("bing".into()), Event::NewLeader("a".into()), Event::Started]
    );
}

/// "acquire from led, unacked object", with clock skew: the record's `renewTime` is a day in
/// this machine's future, which must not matter. Expiry is `leaseDurationSeconds` after this
/// process saw the record change, on its own clock.
#[tokio::test(start_paused = true)]
async fn a_renew_time_from_a_skewed_clock_does_not_delay_expiry() {
    let server = common::server().await;
    let tomorrow = "2099-01-01T00:00:00.000000Z";
    create_lease(
        &server,
        json!({"holderIdentity": "bing", "leaseDurationSeconds": 15, "renewTime": tomorrow}),
    )
    .await;
    let start = Instant::now();
    let a = Candidate::start(&server, config("a"));
    pass(Duration::from_secs(30)).await;
    let took = a.started_at().expect("acquired") - start;
    assert!(took > Duration::from_secs(15) && took < Duration::from_millis(19_400), "{took:?}");
}

/// "don't acquire from led, acked object": while the holder keeps renewing (every change to the
/// record restarts this candidate's expiry clock) the lease is never taken, even though every
/// `renewTime` it writes is years in this machine's past.
#[tokio::test(start_paused = true)]
async fn a_lease_that_keeps_being_renewed_is_never_taken() {
    let server = common::server().await;
    create_lease(&server, json!({"holderIdentity": "bing", "leaseDurationSeconds": 15})).await;
    let renewer = renew_as(&server, "bing");
    let a = Candidate::start(&server, config("a"));
    pass(Duration::from_secs(120)).await;
    assert_eq!(a.started_at(), None);
    assert_eq!(holder(&server), "bing");
    assert_eq!(a.elector.leader().as_deref(), Some("bing"));
    assert!(!a.elector.is_leader());
    assert!(
        lease_verbs(&server, "a").iter().all(|v| *v == "get"),
        "a candidate that sees a valid lease only reads"
    );
    renewer.abort();
    // Once the renewals stop, the lease expires 15 s after the last change this candidate saw.
    pass(Duration::from_secs(25)).await;
    assert!(a.elector.is_leader());
}

/// "renew already acquired object": the leader renews every RetryPeriod through the fast path
/// (updates only, from the record it wrote), keeping `acquireTime` and the transitions, moving
/// `renewTime`.
#[tokio::test(start_paused = true)]
async fn the_leader_renews_through_the_fast_path_keeping_acquire_time() {
    let server = common::server().await;
    let a = Candidate::start(&server, config("a"));
    pass(Duration::from_millis(100)).await;
    let first = stored(&server)["spec"].clone();
    pass(Duration::from_secs(30)).await;
    let now = stored(&server)["spec"].clone();
    assert_eq!(now["acquireTime"], first["acquireTime"]);
    assert_eq!(now["leaseTransitions"], 0);
    assert_ne!(now["renewTime"], first["renewTime"]);
    let verbs = lease_verbs(&server, "a");
    assert_eq!(verbs[..2], ["get", "create"]);
    // One renewal right after acquiring, then one every 2 s: 15 in 30 s, with the first.
    assert_eq!(verbs[2..], ["update"; 16]);
    assert!(a.elector.is_leader());
}
