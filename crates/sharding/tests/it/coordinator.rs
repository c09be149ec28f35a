//! `ShardCoordinator` over the test server's Leases on tokio's paused clock: members split the
//! hash space, a crashed member's share is taken over after its Lease expires, a graceful leave
//! hands over at the next round, and a member cut off from the API stops serving at its renew
//! deadline. There is no client-go counterpart (client-go has no shard assignment); the shape is
//! the leader elector's tests (`crates/leaderelection/tests/it`), whose timing rules these reuse.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kcache_sharding::{Error, GROUP_LABEL, RangeSet, SERVING_ANNOTATION, ShardCoordinator, ShardingConfig};
use kcache_testserver::RequestMatch;
use kube::api::{Api, ListParams};

use crate::common::{self, GROUP, Member, NS, pass_checking};

/// Three members started one after the other end up serving disjoint shares that cover the hash
/// space, each publishing exactly what it serves in its labelled member Lease.
#[tokio::test(start_paused = true)]
async fn three_members_split_the_hash_space() {
    let server = common::server().await;
    let a = Member::start(&server, "a");
    pass_checking(&[&a], Duration::from_secs(3)).await;
    assert!(a.serving().is_full(), "alone, a serves everything");
    let b = Member::start(&server, "b");
    let c = Member::start(&server, "c");
    let covered = pass_checking(&[&a, &b, &c], Duration::from_secs(20)).await;
    assert!(covered.is_some(), "covered again once the hand-offs completed");
    for m in [&a, &b, &c] {
        assert!(!m.serving().is_empty());
        assert_eq!(m.coordinator.assignment().members, ["a", "b", "c"]);
    }
    let leases: Api<Lease> = Api::namespaced(server.in_memory_client(), NS);
    let list = leases.list(&ListParams::default().labels(&format!("{GROUP_LABEL}={GROUP}"))).await.unwrap();
    assert_eq!(list.items.len(), 3);
    for (lease, m) in list.items.iter().zip([&a, &b, &c]) {
        assert_eq!(lease.metadata.name.as_deref(), Some(m.coordinator.config().lease_name().as_str()));
        let published = &lease.metadata.annotations.as_ref().unwrap()[SERVING_ANNOTATION];
        assert_eq!(RangeSet::parse_annotation(published).unwrap(), m.serving());
    }
}

/// A crashed member (its Lease left behind) loses its share to the others once its Lease has
/// not changed for the lease duration: within the README's bound `(LeaseDuration + 4 ×
/// RetryPeriod) / r + 1 s` (24 s here, r = 1), and never while it could still be serving.
#[tokio::test(start_paused = true)]
async fn a_crashed_members_share_is_taken_over_after_its_lease_expires() {
    let server = common::server().await;
    let mut a = Member::start(&server, "a");
    let b = Member::start(&server, "b");
    let c = Member::start(&server, "c");
    assert!(pass_checking(&[&a, &b, &c], Duration::from_secs(20)).await.is_some());
    let lost = a.serving();
    a.crash();
    // Not before the lease duration: b and c still see a's Lease as live.
    assert!(pass_checking(&[&b, &c], Duration::from_secs(14)).await.is_none());
    assert!(!b.serving().union(&c.serving()).overlaps(&lost), "a's share waits for its lease to expire");
    let covered = pass_checking(&[&b, &c], Duration::from_secs(10)).await;
    assert!(covered.is_some(), "b and c cover everything within 24 s of the crash");
    assert_eq!(b.coordinator.assignment().members, ["b", "c"]);
}

/// A graceful leave stops serving, deletes the member Lease, and the others take its share over
/// at their next rounds, long before a lease duration.
#[tokio::test(start_paused = true)]
async fn a_graceful_leave_hands_over_within_two_rounds() {
    let server = common::server().await;
    let mut a = Member::start(&server, "a");
    let b = Member::start(&server, "b");
    assert!(pass_checking(&[&a, &b], Duration::from_secs(10)).await.is_some());
    a.leave().await;
    assert!(a.serving().is_empty(), "a serves nothing once it has left");
    let covered = pass_checking(&[&b], Duration::from_secs(5)).await;
    assert!(covered.is_some_and(|t| t <= Duration::from_secs(5)), "b took over a's share at its next rounds");
    let leases: Api<Lease> = Api::namespaced(server.in_memory_client(), NS);
    assert!(leases.get_opt("ctl-a").await.unwrap().is_none(), "a's Lease is deleted");
}

/// A member cut off from the API server stops serving when its renew deadline passes (10 s
/// after its last acknowledged renewal was sent), before the others may take over its share
/// (15 s after they last saw its Lease change); the others then cover everything, and when the
/// partition heals the member rejoins without overlap.
#[tokio::test(start_paused = true)]
async fn a_partitioned_member_stops_serving_before_its_share_moves() {
    let server = common::server().await;
    let a = Member::start(&server, "a");
    let b = Member::start(&server, "b");
    assert!(pass_checking(&[&a, &b], Duration::from_secs(10)).await.is_some());
    let partition = server.faults().unreachable(RequestMatch::all().user("a"));
    pass_checking(&[&a, &b], Duration::from_secs(12)).await;
    assert!(a.serving().is_empty(), "a stopped at its renew deadline");
    assert!(pass_checking(&[&a, &b], Duration::from_secs(15)).await.is_some());
    assert!(b.serving().is_full(), "b took a's share over after a's lease expired");
    server.faults().remove(partition);
    let covered = pass_checking(&[&a, &b], Duration::from_secs(30)).await;
    assert!(covered.is_some());
    assert!(!a.serving().is_empty(), "a rejoined");
}

/// The coordinator refuses a second concurrent run, and a configuration the leader election
/// would refuse.
#[tokio::test(start_paused = true)]
async fn configuration_and_double_runs_are_refused() {
    let server = common::server().await;
    let bad = ShardingConfig::new(NS, GROUP, "a").durations(
        Duration::from_secs(5),
        Duration::from_secs(10),
        Duration::from_secs(2),
    );
    assert!(matches!(ShardCoordinator::new(server.in_memory_client(), bad), Err(Error::Config(_))));
    let bad = ShardingConfig::new(NS, "Not_A_Name", "a");
    assert!(matches!(ShardCoordinator::new(server.in_memory_client(), bad), Err(Error::InvalidGroup { .. })));
    let a = Member::start(&server, "a");
    tokio::time::sleep(Duration::from_millis(10)).await;
    let again = a.coordinator.run(Default::default()).await;
    assert_eq!(again, Err(Error::AlreadyRunning));
}
