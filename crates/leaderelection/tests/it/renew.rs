//! Renewing: the fast path (an optimistic update from the record the leader wrote) and the slow
//! path after it fails (read, then update), as client-go's `TestFastPathLeaderElection`; the
//! renew deadline that ends leadership; a conflict counted as a lost race.

use std::time::Duration;

use kcache_leaderelection::Outcome;
use kcache_testserver::{RequestFault, Verb};

use crate::common::{self, Candidate, Event, config, holder, lease_ops, lease_verbs, pass};

/// client-go's `TestFastPathLeaderElection`, "Exercise fast path after lock acquired": get
/// (404), create, then every renewal is one update.
#[tokio::test(start_paused = true)]
async fn fast_path_after_the_lock_is_acquired() {
    let server = common::server().await;
    let _a = Candidate::start(&server, config("a"));
    pass(Duration::from_secs(3)).await;
    assert_eq!(lease_verbs(&server, "a"), ["get", "create", "update", "update"]);
}

/// client-go's `TestFastPathLeaderElection`, "Fallback to slow path after fast path fails": a
/// fast-path update that gets a 409 Conflict falls back to get + update in the same try, and the
/// next renewal is fast again. The conflict is a lost race, not an error: leadership continues.
#[tokio::test(start_paused = true)]
async fn slow_path_after_the_fast_path_fails() {
    let server = common::server().await;
    let a = Candidate::start(&server, config("a"));
    pass(Duration::from_millis(100)).await;
    server.faults().fail_requests(
        1,
        RequestFault::conflict("leases.coordination.k8s.io", common::LEASE).verb(Verb::Update).user("a"),
    );
    pass(Duration::from_secs(4)).await;
    assert_eq!(
        lease_ops(&server, "a"),
        [
            (Verb::Get, 404),
            (Verb::Create, 201),
            (Verb::Update, 200),
            (Verb::Update, 409),
            (Verb::Get, 200),
            (Verb::Update, 200),
            (Verb::Update, 200),
        ]
    );
    assert!(a.elector.is_leader());
}

/// The renew loop steps down when `RenewDeadline` passes without a successful renewal (client-go
/// `renew`: `PollUntilContextTimeout(RetryPeriod, RenewDeadline)` fails, the leader cancels its
/// context): here every update loses its race to a writer that keeps changing the lease, so
/// every try fails. Tries come at the poll's start and on each RetryPeriod tick; the token is
/// cancelled exactly RenewDeadline after the failing poll began (the renewal due 2 s after the
/// last success).
#[tokio::test(start_paused = true)]
async fn the_leader_steps_down_when_the_renew_deadline_passes() {
    let server = common::server().await;
    let mut a = Candidate::start(&server, config("a"));
    pass(Duration::from_millis(100)).await;
    let acquired = a.started_at().unwrap();
    // From now on every update of `a` conflicts (more than fit in 10 s).
    server.faults().fail_requests(
        1000,
        RequestFault::conflict("leases.coordination.k8s.io", common::LEASE).verb(Verb::Update).user("a"),
    );
    assert_eq!(a.join().await, Outcome::LeaseLost { released: false });
    // Last success: the immediate renewal at `acquired`; the next poll at +2 s; its deadline +10 s.
    assert_eq!(a.token_cancelled_at().unwrap() - acquired, Duration::from_secs(12));
    assert!(!a.elector.is_leader());
    let stopped = a.events.lock().iter().find(|(_, e)| *e == Event::Stopped).map(|(t, _)| *t);
    assert_eq!(stopped, a.token_cancelled_at(), "the token is cancelled when leadership ends");
    assert!(a.event_kinds().contains(&Event::TokenCancelled { holder: "a".into() }));
    // Each failing try: fast path (409), then get + update (409); one try at the poll's start and
    // one per 2 s tick before the deadline: at +2, +4, +6, +8, +10 s (the tick at +12 s is the
    // deadline, which wins).
    let updates_after = lease_ops(&server, "a").iter().skip(3).filter(|(v, _)| *v == Verb::Update).count();
    assert_eq!(updates_after, 5 * 2);
    assert_eq!(holder(&server), "a", "nobody else wrote; the record still names a");
}

/// A clock whose sleeps do not end while it is frozen (a stopped process: time goes on, the
/// process does not run); they end at the thaw if due by then.
#[derive(Debug, Clone)]
struct FreezableClock(std::sync::Arc<tokio::sync::watch::Sender<bool>>);

impl kcache_utils::Clock for FreezableClock {
    fn now(&self) -> tokio::time::Instant {
        tokio::time::Instant::now()
    }

    fn sleep(&self, d: Duration) -> kcache_utils::Sleep {
        let mut frozen = self.0.subscribe();
        Box::pin(async move {
            tokio::time::sleep(d).await;
            let _ = frozen.wait_for(|f| !*f).await;
        })
    }
}

/// Deliberately stricter than client-go: a leader frozen past `RetryPeriod + RenewDeadline`
/// after its last renewal steps down the moment it wakes, without a request. client-go starts
/// a fresh `RenewDeadline` poll then (its timers only count from the poll's start), and keeps
/// believing it leads for up to another RenewDeadline while the others, having seen no change
/// for LeaseDuration, may already lead.
#[tokio::test(start_paused = true)]
async fn a_leader_frozen_past_its_deadline_steps_down_when_it_wakes() {
    let server = common::server().await;
    let freeze = FreezableClock(std::sync::Arc::new(tokio::sync::watch::channel(false).0));
    let mut a = Candidate::start_with(&server, config("a"), |b| b.clock(freeze.clone()));
    pass(Duration::from_millis(500)).await;
    let b = Candidate::start(&server, config("b"));
    pass(Duration::from_secs(5)).await; // renewals at 0, 2, 4 s; waiting for the one at 6 s
    freeze.0.send_replace(true);
    pass(Duration::from_secs(30)).await;
    assert!(b.started_at().is_some(), "b took over while a was frozen");
    let requests_before = lease_ops(&server, "a").len();
    let thaw = tokio::time::Instant::now();
    freeze.0.send_replace(false);
    assert_eq!(a.join().await, Outcome::LeaseLost { released: false });
    assert_eq!(a.token_cancelled_at(), Some(thaw), "at once");
    assert_eq!(lease_ops(&server, "a").len(), requests_before, "without a request");
}
