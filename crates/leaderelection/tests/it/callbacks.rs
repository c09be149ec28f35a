//! Callbacks and the run's life: `on_started_leading`'s token, `on_stopped_leading` even without
//! leading (client-go's documented behaviour), `on_new_leader`, a second concurrent run, and a
//! run dropped mid-leadership.

use std::time::Duration;

use kcache_leaderelection::{Error, Outcome};
use tokio_util::sync::CancellationToken;

use crate::common::{self, Candidate, Event, config, pass};

/// client-go's `LeaderCallbacks.OnStoppedLeading`: "always called when the LeaderElector exits,
/// even if it did not start leading".
#[tokio::test(start_paused = true)]
async fn on_stopped_leading_runs_even_without_leading() {
    let server = common::server().await;
    let _a = Candidate::start(&server, config("a"));
    pass(Duration::from_millis(500)).await;
    let mut b = Candidate::start(&server, config("b"));
    pass(Duration::from_secs(5)).await;
    assert_eq!(b.stop().await, Outcome::CancelledBeforeLeading);
    assert_eq!(b.event_kinds(), [Event::NewLeader("a".into()), Event::Stopped]);
}

/// `on_new_leader` (client-go's `maybeReportTransition`) reports each holder this candidate
/// sees, the first one included, and itself once it leads.
#[tokio::test(start_paused = true)]
async fn on_new_leader_reports_every_holder_seen() {
    let server = common::server().await;
    let mut a = Candidate::start(&server, config("a").release_on_cancel(true));
    pass(Duration::from_millis(500)).await;
    let b = Candidate::start(&server, config("b"));
    pass(Duration::from_secs(5)).await;
    a.stop().await;
    pass(Duration::from_secs(5)).await;
    assert_eq!(b.event_kinds(), [Event::NewLeader("a".into()), Event::NewLeader("b".into()), Event::Started]);
}

/// A second `run` of the same elector (or a clone) while one is running is refused.
#[tokio::test(start_paused = true)]
async fn a_second_concurrent_run_is_refused() {
    let server = common::server().await;
    let a = Candidate::start(&server, config("a"));
    pass(Duration::from_millis(500)).await;
    let again = a.elector.clone().run(CancellationToken::new()).await;
    assert_eq!(again.unwrap_err(), Error::AlreadyRunning);
    assert!(a.elector.is_leader(), "the first run goes on");
}

/// A run whose future is dropped while leading ends leadership at once: the token is cancelled
/// and the elector stops reporting itself as leader (see `run`'s cancel safety).
#[tokio::test(start_paused = true)]
async fn a_dropped_run_ends_leadership() {
    let server = common::server().await;
    let mut a = Candidate::start(&server, config("a"));
    pass(Duration::from_millis(500)).await;
    assert!(a.elector.is_leader());
    a.run.take().unwrap().abort();
    pass(Duration::from_millis(1)).await;
    assert!(!a.elector.is_leader());
    assert!(a.token_cancelled_at().is_some());
    assert!(!a.event_kinds().contains(&Event::Stopped), "no on_stopped_leading from a dropped run");
}

/// A run can be started again after one ended; a candidate that lost the lease starts over.
#[tokio::test(start_paused = true)]
async fn run_again_after_a_run_ended() {
    let server = common::server().await;
    let mut a = Candidate::start(&server, config("a").release_on_cancel(true));
    pass(Duration::from_millis(500)).await;
    a.stop().await;
    let a = Candidate { stop: CancellationToken::new(), ..a }.spawn();
    pass(Duration::from_secs(1)).await;
    assert!(a.elector.is_leader());
    assert_eq!(a.event_kinds().iter().filter(|e| **e == Event::Started).count(), 2);
}
