//! The election under the test server's faults: an API server unreachable for longer than
//! RenewDeadline, a conflict storm, slow responses. In each, no two candidates lead at once.

use std::sync::Arc;
use std::time::Duration;

use kcache_leaderelection::Outcome;
use kcache_testserver::{RequestFault, RequestMatch, Verb};
use parking_lot::Mutex;

use crate::common::{self, Candidate, config, holder, pass};
use crate::metrics::Recorded;

/// Warnings and errors logged while `f` runs (on this thread: the tests' runtime is
/// current-thread).
async fn warnings_during<F: std::future::Future>(f: F) -> (F::Output, String) {
    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buf = Buf::default();
    let writer = buf.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let out = f.await;
    let text = String::from_utf8_lossy(&buf.0.lock()).into_owned();
    (out, text)
}

/// The API server unreachable from the leader for longer than RenewDeadline: the leader steps
/// down RenewDeadline after its renewal was due (client-go's `renew`), which is before its lease
/// can be taken elsewhere: the follower must first see no change for LeaseDuration, and
/// LeaseDuration (15 s) > RetryPeriod + RenewDeadline (12 s). Then the follower takes over
/// within LeaseDuration + 2 jittered retry periods (2 × 2.2 × RetryPeriod) of the last renewal.
#[tokio::test(start_paused = true)]
async fn an_unreachable_server_makes_the_leader_step_down_before_its_lease_can_be_taken() {
    let server = common::server().await;
    let mut a = Candidate::start(&server, config("a"));
    pass(Duration::from_millis(500)).await;
    let b = Candidate::start(&server, config("b"));
    pass(Duration::from_secs(5)).await; // renewals at 0, 2, 4 s
    let last_renewal = a.started_at().unwrap() + Duration::from_secs(4);
    let partition = server.faults().unreachable(RequestMatch::all().user("a"));

    assert_eq!(a.join().await, Outcome::LeaseLost { released: false });
    let stepped_down = a.token_cancelled_at().unwrap();
    assert_eq!(stepped_down - last_renewal, Duration::from_secs(12), "RetryPeriod + RenewDeadline");
    pass(Duration::from_secs(20)).await;
    let took_over = b.started_at().expect("b took over");
    assert!(took_over > stepped_down, "never two leaders");
    assert!(took_over - last_renewal > Duration::from_secs(15), "not before LeaseDuration without change");
    assert!(took_over - last_renewal < Duration::from_secs(15) + Duration::from_millis(8800));
    assert_eq!(holder(&server), "b");
    server.faults().remove(partition);
}

/// The whole API server unreachable for 30 s: the leader steps down, nobody can take over while
/// it lasts, and once it is reachable again a candidate leads within LeaseDuration plus two
/// jittered retry periods.
#[tokio::test(start_paused = true)]
async fn a_leader_elected_again_after_the_server_comes_back() {
    let server = common::server().await;
    let mut a = Candidate::start(&server, config("a"));
    pass(Duration::from_millis(500)).await;
    let b = Candidate::start(&server, config("b"));
    pass(Duration::from_secs(5)).await;
    let outage = server.faults().unreachable(RequestMatch::all());
    assert_eq!(a.join().await, Outcome::LeaseLost { released: false });
    pass(Duration::from_secs(25)).await;
    assert!(b.started_at().is_none(), "nobody leads while the server is unreachable");
    server.faults().remove(outage);
    let back = tokio::time::Instant::now();
    pass(Duration::from_secs(30)).await;
    let took_over = b.started_at().expect("b leads");
    assert!(
        took_over - back < Duration::from_secs(15) + Duration::from_millis(8800),
        "{:?}",
        took_over - back
    );
}

/// A conflict storm (`RequestFault::conflict` on the leader's updates) shorter than the renew
/// deadline: each conflict is a lost race, counted (`LeaderMetric::conflict`) and logged at
/// debug level, never as a warning; the leader keeps the lease (its next try succeeds) and the
/// other candidate never leads.
#[tokio::test(start_paused = true)]
async fn a_conflict_storm_is_a_lost_race_not_an_error() {
    let server = common::server().await;
    let recorded = Recorded::default();
    let (_, warnings) = warnings_during(async {
        let a =
            Candidate::start_with(&server, config("a"), |b| b.metrics_provider(Arc::new(recorded.clone())));
        let b = Candidate::start(&server, config("b"));
        pass(Duration::from_millis(500)).await;
        server.faults().fail_requests(
            5,
            RequestFault::conflict("leases.coordination.k8s.io", common::LEASE).verb(Verb::Update).user("a"),
        );
        pass(Duration::from_secs(30)).await;
        assert!(a.elector.is_leader());
        assert!(b.started_at().is_none());
    })
    .await;
    assert_eq!(recorded.conflicts(), 5);
    assert!(warnings.is_empty(), "{warnings}");
}

/// Three candidates start at once on a fresh lease: all three try to create it, one wins, the
/// others get 409 AlreadyExists (a lost race like any other) and follow.
#[tokio::test(start_paused = true)]
async fn candidates_that_start_together_elect_one() {
    let server = common::server().await;
    let recorded = Recorded::default();
    let cs: Vec<Candidate> = ["a", "b", "c"]
        .into_iter()
        .map(|id| {
            Candidate::start_with(&server, config(id), |b| b.metrics_provider(Arc::new(recorded.clone())))
        })
        .collect();
    pass(Duration::from_secs(60)).await;
    let leaders: Vec<_> = cs.iter().filter(|c| c.started_at().is_some()).collect();
    assert_eq!(leaders.len(), 1);
    assert_eq!(holder(&server), leaders[0].elector.config().identity);
    assert_eq!(recorded.conflicts(), 2, "two creates lost");
}

/// Slow responses within the request timeout (5 s by default with a 10 s renew deadline): every
/// renewal takes 3 s, and the leader keeps the lease.
#[tokio::test(start_paused = true)]
async fn slow_responses_within_the_request_timeout_keep_the_leader() {
    let server = common::server().await;
    let a = Candidate::start(&server, config("a"));
    pass(Duration::from_millis(500)).await;
    let b = Candidate::start(&server, config("b"));
    server.faults().slow_responses(RequestMatch::all(), Duration::from_secs(3));
    pass(Duration::from_secs(60)).await;
    assert!(a.elector.is_leader());
    assert!(b.started_at().is_none());
}

/// Slow responses past the request timeout: the leader's updates are stored but answered too
/// late, so every renewal fails for the leader, which steps down at its deadline. The writes it
/// did not see succeed still renewed the lease for the others, so the follower takes over only
/// LeaseDuration after the last of them: after the leader stepped down.
#[tokio::test(start_paused = true)]
async fn slow_responses_past_the_request_timeout_make_the_leader_step_down_first() {
    let server = common::server().await;
    let mut a = Candidate::start(&server, config("a"));
    pass(Duration::from_millis(500)).await;
    let b = Candidate::start(&server, config("b"));
    pass(Duration::from_secs(5)).await;
    server.faults().slow_responses(RequestMatch::all().user("a"), Duration::from_secs(6));
    assert_eq!(a.join().await, Outcome::LeaseLost { released: false });
    pass(Duration::from_secs(30)).await;
    let (stepped_down, took_over) = (a.token_cancelled_at().unwrap(), b.started_at().expect("b leads"));
    assert!(took_over - stepped_down > Duration::from_secs(3), "{:?}", took_over - stepped_down);
}

/// Deliberately stricter than client-go: a renewal counts from when it was sent, not from when
/// its (late) answer came. The others count LeaseDuration from when they saw the renewal, which
/// the server stored no later than it answered and no earlier than it was sent; so a leader that
/// stops RetryPeriod + RenewDeadline (12 s) after sending its last renewal stops before anyone
/// may take over, however slow the answers. client-go counts from the answer: with answers 4.5 s
/// late it would believe it leads until 16.5 s after the renewal was stored, past the 15 s lease.
#[tokio::test(start_paused = true)]
async fn slow_answers_do_not_stretch_the_leaders_belief_past_its_lease() {
    let server = common::server().await;
    let mut a = Candidate::start(&server, config("a"));
    pass(Duration::from_millis(500)).await;
    let b = Candidate::start(&server, config("b"));
    server.faults().slow_responses(RequestMatch::all().user("a"), Duration::from_millis(4500));
    pass(Duration::from_secs(20)).await;
    assert!(a.elector.is_leader(), "answers within the request timeout: renewals succeed, late");
    server.faults().unreachable(RequestMatch::all().user("a"));
    assert_eq!(a.join().await, Outcome::LeaseLost { released: false });
    let last_renewal_stored = server
        .request_log()
        .filter(|r| r.user.as_deref() == Some("a") && r.verb == Verb::Update && r.status == 200)
        .last()
        .map(|r| r.at)
        .unwrap();
    let stepped_down = a.token_cancelled_at().unwrap();
    assert_eq!(
        stepped_down - last_renewal_stored,
        Duration::from_secs(12),
        "RetryPeriod + RenewDeadline after it was sent"
    );
    pass(Duration::from_secs(30)).await;
    let took_over = b.started_at().expect("b took over");
    assert!(took_over - last_renewal_stored > Duration::from_secs(15));
    assert!(took_over > stepped_down);
}
