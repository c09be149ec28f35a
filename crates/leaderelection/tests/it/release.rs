//! ReleaseOnCancel: client-go's `release` (`TestReleaseLeaseLeases`, `TestReleaseMethodCallsGet`,
//! `TestReleaseRetriesOnConflict`, `TestReleaseOnCancellation_Leases`).

use std::time::Duration;

use kcache_leaderelection::Outcome;
use kcache_testserver::{RequestFault, Verb};
use kube::api::PostParams;
use tokio::time::Instant;

use crate::common::{self, Candidate, Event, config, holder, lease_ops, leases, pass, stored};

/// client-go's `TestReleaseOnCancellation_Leases` and `TestReleaseLeaseLeases`: cancelling a
/// leader with `release_on_cancel` ends leadership (its token is cancelled while the lease still
/// names it), then writes an empty holder, `leaseDurationSeconds: 1`, `renewTime` =
/// `acquireTime` = now and the transitions unchanged. The waiting candidate sees a lease nobody
/// holds and takes it at its next try: within one jittered retry period (2.2 × RetryPeriod)
/// instead of a whole LeaseDuration.
#[tokio::test(start_paused = true)]
async fn release_on_cancel_hands_the_lease_over_at_the_next_try() {
    let server = common::server().await;
    let mut a = Candidate::start(&server, config("a").release_on_cancel(true));
    pass(Duration::from_millis(500)).await;
    let b = Candidate::start(&server, config("b"));
    pass(Duration::from_secs(10)).await;

    let stopped = Instant::now();
    assert_eq!(a.stop().await, Outcome::Cancelled { released: true });
    let spec = stored(&server)["spec"].clone();
    assert_eq!(spec["holderIdentity"], "");
    assert_eq!(spec["leaseDurationSeconds"], 1);
    assert_eq!(spec["leaseTransitions"], 0);
    assert_eq!(spec["renewTime"], spec["acquireTime"]);
    assert!(a.event_kinds().contains(&Event::TokenCancelled { holder: "a".into() }), "{:?}", a.event_kinds());
    assert_eq!(a.elector.leader(), None, "the released record names nobody");
    let ops = lease_ops(&server, "a");
    assert_eq!(ops[ops.len() - 2..], [(Verb::Get, 200), (Verb::Update, 200)], "release reads first");

    pass(Duration::from_secs(5)).await;
    let took_over = b.started_at().expect("b leads") - stopped;
    assert!(took_over < Duration::from_millis(4400), "{took_over:?}");
    assert_eq!(stored(&server)["spec"]["leaseTransitions"], 1);
}

/// client-go's `TestReleaseRetriesOnConflict`: a release whose update loses a race (an
/// in-flight renewal) reads again and retries within the renew deadline.
#[tokio::test(start_paused = true)]
async fn a_release_that_conflicts_reads_again_and_retries() {
    let server = common::server().await;
    let mut a = Candidate::start(&server, config("a").release_on_cancel(true));
    pass(Duration::from_millis(500)).await;
    server.faults().fail_requests(
        1,
        RequestFault::conflict("leases.coordination.k8s.io", common::LEASE).verb(Verb::Update).user("a"),
    );
    assert_eq!(a.stop().await, Outcome::Cancelled { released: true });
    let ops = lease_ops(&server, "a");
    assert_eq!(
        ops[ops.len() - 4..],
        [(Verb::Get, 200), (Verb::Update, 409), (Verb::Get, 200), (Verb::Update, 200)]
    );
    assert_eq!(holder(&server), "");
}

/// Deliberately stricter than client-go: its `tryRelease` writes the empty holder over whatever
/// it reads as long as the record it last saw named itself, so a leader stopped just after
/// another candidate took the lease (it was frozen, say) would empty its successor's lease. Here
/// the lease as read must name this candidate too; otherwise nothing is written.
#[tokio::test(start_paused = true)]
async fn a_release_never_empties_a_successors_lease() {
    let server = common::server().await;
    let mut a = Candidate::start(&server, config("a").release_on_cancel(true));
    pass(Duration::from_millis(500)).await;
    // Another candidate's write, which `a` has not read yet.
    let api = leases(&server);
    let mut l = api.get(common::LEASE).await.unwrap();
    l.spec.as_mut().unwrap().holder_identity = Some("b".into());
    api.replace(common::LEASE, &PostParams::default(), &l).await.unwrap();

    assert_eq!(a.stop().await, Outcome::Cancelled { released: true });
    assert_eq!(holder(&server), "b", "the successor's lease is untouched");
    let ops = lease_ops(&server, "a");
    assert_eq!(ops.last(), Some(&(Verb::Get, 200)), "read, and nothing written");
}

/// Without `release_on_cancel` a cancelled leader leaves the lease as it is: the others wait out
/// the lease duration.
#[tokio::test(start_paused = true)]
async fn without_release_on_cancel_the_lease_is_left_to_expire() {
    let server = common::server().await;
    let mut a = Candidate::start(&server, config("a"));
    pass(Duration::from_millis(500)).await;
    let b = Candidate::start(&server, config("b"));
    pass(Duration::from_secs(4)).await;
    let stopped = Instant::now();
    assert_eq!(a.stop().await, Outcome::Cancelled { released: false });
    assert_eq!(holder(&server), "a");
    pass(Duration::from_secs(30)).await;
    assert!(b.started_at().unwrap() - stopped > Duration::from_secs(13));
}
