//! Resync: the store is resynced every period while watching, one live timer at a time (even
//! under repeatedly failing watches), `should_resync` can skip it, and a resync error ends the
//! watch without reaching the watch error handler (client-go reflector_test.go
//! `TestReflectorResync`, `TestReflectorResyncChan`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kcache_reflector::ErrorKind;
use kcache_testserver::{RequestFault, TestServer, Verb, WatchFault};

use crate::common::{Harness, Op};

const HOUR: Duration = Duration::from_secs(3600);
/// Keeps hung-watch timers out of the way: real watches here never reach their server timeout.
const GRACE: Duration = Duration::from_secs(100_000);

fn resync_timers(sleeps: &[Duration]) -> usize {
    // Hung-watch timers are pushed past 100 000 s by the tests' grace; backoffs stay under 60 s.
    sleeps.iter().filter(|d| (1000..=3600).contains(&d.as_secs())).count()
}

#[tokio::test]
async fn resyncs_every_period_while_watching() {
    let server = TestServer::start().await;
    let h = Harness::start(server, |r| r.use_watch_list(false).resync_period(HOUR).hung_watch_grace(GRACE));
    h.store.wait_until("synced", |s| s.ops().iter().any(|o| matches!(o, Op::Replace(..)))).await;
    let sleeps = h.clock.wait_for_sleepers(2).await;
    assert_eq!(resync_timers(&sleeps), 1);
    for n in 1..=3 {
        // Move past the resync only (watch timers are re-armed as watches restart; advance in
        // steps shorter than any watch timeout so none of them fires).
        for _ in 0..12 {
            h.clock.advance(Duration::from_secs(300));
        }
        h.store.wait_until("resync", |s| s.ops().iter().filter(|o| **o == Op::Resync).count() >= n).await;
        let sleeps = h.clock.wait_for_sleepers(2).await;
        assert_eq!(resync_timers(&sleeps), 1, "exactly one live resync timer: {sleeps:?}");
    }
    h.stop().await;
}

/// Watches that keep failing make the reflector relist again and again; at no point is more than
/// one resync timer alive (client-go had to add a cleanup function for exactly this).
#[tokio::test]
async fn one_resync_timer_under_failing_watches() {
    let server = TestServer::start().await;
    server.faults().all_watches(WatchFault::Error {
        after: 0,
        code: 500,
        reason: "InternalError".into(),
        message: "watch broken".into(),
    });
    let h = Harness::start(server, |r| r.use_watch_list(false).resync_period(HOUR).hung_watch_grace(GRACE));
    for cycle in 0..8 {
        h.ended.wait_for_count(cycle + 1).await;
        let sleeps = h.clock.wait_for_sleepers(1).await;
        assert!(resync_timers(&sleeps) <= 1, "cycle {cycle}: {sleeps:?}");
        h.clock.advance(sleeps[0]);
    }
    assert!(h.ended.kinds().iter().all(|k| *k == ErrorKind::InternalError));
    assert!(h.errors.kinds().is_empty(), "watches that ended are not reported: {:?}", h.errors.kinds());
    h.stop().await;
}

/// Watches refused with 429 again and again back off inside the watch loop, where the resync
/// timer lives on across attempts: through every backoff exactly one resync timer is pending
/// (no watch is open, so the only other timer is the backoff), and it still fires and is
/// re-armed. Mirrors the leak client-go fixed by stopping the old timer before making a new one.
#[tokio::test]
async fn one_resync_timer_while_watches_back_off() {
    let server = TestServer::start().await;
    server.faults().fail_requests(10_000, RequestFault::too_many_requests(1).verb(Verb::Watch));
    let h = Harness::start(server, |r| r.use_watch_list(false).resync_period(HOUR).hung_watch_grace(GRACE));
    h.store.wait_until("synced", |s| s.ops().iter().any(|o| matches!(o, Op::Replace(..)))).await;
    let mut elapsed = Duration::ZERO;
    let mut cycles = 0;
    while elapsed < 2 * HOUR + Duration::from_secs(60) {
        let sleeps = h.clock.wait_for_sleepers(2).await;
        assert_eq!(sleeps.len(), 2, "after {elapsed:?}: one backoff and one resync timer, got {sleeps:?}");
        // The earlier of the two: the backoff, or the resync timer when it is due first.
        h.clock.advance(sleeps[0]);
        elapsed += sleeps[0];
        cycles += 1;
    }
    assert!(cycles > 100, "{cycles} backoffs");
    let resyncs = h.store.ops().iter().filter(|o| **o == Op::Resync).count();
    assert_eq!(resyncs, 2, "the timer kept firing through the backoffs");
    assert_eq!(h.requests(Verb::List).len(), 1, "a 429 on watch never relists");
    assert!(h.requests(Verb::Watch).iter().all(|w| w.status == 429));
    assert!(h.errors.kinds().is_empty(), "handled inside the watch loop");
    h.stop().await;
}

/// `should_resync` returning false skips the resync but keeps the timer going.
#[tokio::test]
async fn should_resync_false_skips() {
    static ALLOW: AtomicBool = AtomicBool::new(false);
    let server = TestServer::start().await;
    let h = Harness::start(server, |r| {
        r.use_watch_list(false)
            .resync_period(HOUR)
            .hung_watch_grace(GRACE)
            .should_resync(|| ALLOW.load(Ordering::SeqCst))
    });
    h.store.wait_until("synced", |s| s.ops().iter().any(|o| matches!(o, Op::Replace(..)))).await;
    h.clock.wait_for_sleepers(2).await;
    for _ in 0..12 {
        h.clock.advance(Duration::from_secs(300));
    }
    // The timer fired and was re-armed: wait for the new one.
    h.clock.wait_for_sleepers(2).await;
    assert!(!h.store.ops().contains(&Op::Resync));
    ALLOW.store(true, Ordering::SeqCst);
    for _ in 0..12 {
        h.clock.advance(Duration::from_secs(300));
    }
    h.store.wait_until("allowed resync", |s| s.ops().contains(&Op::Resync)).await;
    h.stop().await;
}

/// Mirrors client-go's `TestReflectorResync` ("error from Resync is not propagated up to here"):
/// a resync error ends the watch, `ListAndWatch` still returns no error, so the watch error
/// handler is not called; the reflector backs off and relists.
#[tokio::test]
async fn resync_error_ends_the_watch() {
    let server = TestServer::start().await;
    let h = Harness::start(server, |r| r.use_watch_list(false).resync_period(HOUR).hung_watch_grace(GRACE));
    h.store.fail_resync.store(true, Ordering::SeqCst);
    h.store.wait_until("synced", |s| s.ops().iter().any(|o| matches!(o, Op::Replace(..)))).await;
    h.clock.wait_for_sleepers(2).await;
    for _ in 0..12 {
        h.clock.advance(Duration::from_secs(300));
    }
    h.ended.wait_for(ErrorKind::Store).await;
    h.store.fail_resync.store(false, Ordering::SeqCst);
    let d = h.clock.wait_for_sleepers(1).await[0];
    assert!(d < Duration::from_secs(2), "the first backoff: {d:?}");
    assert!(h.errors.kinds().is_empty(), "not reported: {:?}", h.errors.kinds());
    h.clock.advance(d);
    h.store
        .wait_until("relist", |s| s.ops().iter().filter(|o| matches!(o, Op::Replace(..))).count() == 2)
        .await;
    h.stop().await;
}
