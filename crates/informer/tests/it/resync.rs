//! Resync: per-handler periods with client-go's rules, Sync deltas delivered only to the
//! handlers due (shared_informer_test.go `TestListenerResyncPeriods`,
//! `TestResyncCheckPeriod`), on a fake clock.

use crate::common;

use std::time::Duration;

use common::{Ev, Harness, Recorder, create};
use kcache_informer::HandlerOptions;

/// An informer created without resync never resyncs, whatever its handlers ask for (client-go:
/// "this shared informer doesn't support resyncing").
#[tokio::test]
async fn informer_without_resync_ignores_handler_periods() {
    let h = Harness::new(Duration::ZERO).await;
    let reg =
        h.informer.add_event_handler_with_resync_period(Recorder::new(), Duration::from_secs(10)).unwrap();
    assert_eq!(reg.resync_period(), Duration::ZERO);
}

/// Mirrors `TestResyncCheckPeriod`: a handler period below the check period lowers it before
/// start; after start it is raised to the check period; below 1 s it becomes 1 s; zero stays.
#[tokio::test]
async fn resync_period_rules() {
    let h = Harness::new(Duration::from_secs(60)).await;
    let a = h.informer.add_event_handler(Recorder::new()).unwrap();
    assert_eq!(a.resync_period(), Duration::from_secs(60));
    let b =
        h.informer.add_event_handler_with_resync_period(Recorder::new(), Duration::from_secs(10)).unwrap();
    assert_eq!(b.resync_period(), Duration::from_secs(10));
    let tiny =
        h.informer.add_event_handler_with_resync_period(Recorder::new(), Duration::from_millis(100)).unwrap();
    assert_eq!(tiny.resync_period(), Duration::from_secs(1), "raised to the 1 s minimum");
    let none = h.informer.add_event_handler_with_resync_period(Recorder::new(), Duration::ZERO).unwrap();
    assert_eq!(none.resync_period(), Duration::ZERO);
    assert_eq!(a.resync_period(), Duration::from_secs(60), "requested periods above the check are kept");
    let mut h = h;
    h.start();
    h.synced().await;
    let late = h
        .informer
        .add_event_handler_with_options(
            Recorder::new(),
            HandlerOptions { resync_period: Some(Duration::from_millis(500)), ..HandlerOptions::default() },
        )
        .unwrap();
    assert_eq!(late.resync_period(), Duration::from_secs(1), "after start: raised to the check period (1 s)");
    h.stop().await;
}

/// Resyncs of object `a` a recorder saw.
fn resyncs_of_a(r: &Recorder) -> usize {
    r.of("a").iter().filter(|e| matches!(e, Ev::Update(_, _, _, true))).count()
}

/// Mirrors `TestListenerResyncPeriods`: on an informer resyncing every 10 s, handlers with 10 s
/// and 30 s periods (and one with none) receive resyncs as `on_update(o, o)` only when each is due.
/// After every step a new object is created as a barrier: each handler sees its events in order,
/// so once a handler has seen the barrier it has seen any resync of that step too.
#[tokio::test]
async fn resyncs_reach_only_the_handlers_due() {
    let mut h = Harness::new(Duration::from_secs(10)).await;
    create(&h.api, "a", "1").await;
    let ten = Recorder::new();
    let thirty = Recorder::new();
    let never = Recorder::new();
    h.informer.add_event_handler_with_resync_period(ten.clone(), Duration::from_secs(10)).unwrap();
    h.informer.add_event_handler_with_resync_period(thirty.clone(), Duration::from_secs(30)).unwrap();
    h.informer.add_event_handler_with_resync_period(never.clone(), Duration::ZERO).unwrap();
    h.start();
    h.synced().await;
    for r in [&ten, &thirty, &never] {
        r.wait_until("initial add", |ev| ev.len() == 1).await;
    }
    for step in 1..=3usize {
        // The reflector's resync timer runs every 10 s (the check period).
        let resync = h.clock.wait_for_sleep(|d| d <= Duration::from_secs(10)).await;
        h.clock.advance(resync);
        ten.wait_until("10 s resync", |_| resyncs_of_a(&ten) == step).await;
        let barrier = format!("barrier-{step}");
        create(&h.api, &barrier, "1").await;
        for r in [&ten, &thirty, &never] {
            r.wait_until("the barrier", |ev| ev.iter().any(|e| e.name() == barrier)).await;
        }
        assert_eq!(resyncs_of_a(&ten), step, "step {step}");
        let want_thirty = usize::from(step == 3);
        assert_eq!(resyncs_of_a(&thirty), want_thirty, "step {step}: {:?}", thirty.events());
        assert_eq!(resyncs_of_a(&never), 0, "step {step}");
    }
    assert!(
        never.events().iter().all(|e| matches!(e, Ev::Add(..))),
        "no resync at all for the handler without a period: {:?}",
        never.events()
    );
    h.stop().await;
}

/// Mirrors the after-start half of `TestResyncCheckPeriod`: once the informer runs, its check
/// period is fixed, so a handler asking for less than it gets the check period, and its resyncs
/// come at that period.
#[tokio::test]
async fn a_shorter_period_after_start_is_raised_to_the_check_period() {
    let mut h = Harness::new(Duration::from_secs(60)).await;
    create(&h.api, "a", "1").await;
    h.start();
    h.synced().await;
    let late = Recorder::new();
    let reg = h.informer.add_event_handler_with_resync_period(late.clone(), Duration::from_secs(10)).unwrap();
    assert_eq!(reg.resync_period(), Duration::from_secs(60), "raised to the 60 s check period");
    late.wait_until("replayed add", |ev| ev.len() == 1).await;
    // The reflector's only resync timer still runs every 60 s, not 10 s.
    let resync = h.clock.wait_for_sleep(|d| d <= Duration::from_secs(60)).await;
    assert_eq!(resync, Duration::from_secs(60));
    h.clock.advance(resync);
    late.wait_until("60 s resync", |_| resyncs_of_a(&late) == 1).await;
    h.stop().await;
}

/// `Duration::MAX` is a natural way to say "never" (the reflector accepts it for its timeouts):
/// as an informer's default resync or a handler's own period it used to overflow the handler's
/// first resync deadline and panic in `add_event_handler`. It is lowered to about 30 years.
#[tokio::test]
async fn a_resync_period_of_duration_max_does_not_overflow() {
    let thirty_years = Duration::from_secs(30 * 365 * 24 * 60 * 60);
    let mut h = Harness::new(Duration::MAX).await;
    let by_default = h.informer.add_event_handler(Recorder::new()).unwrap();
    assert_eq!(by_default.resync_period(), thirty_years);
    let mut other = Harness::new(Duration::from_secs(600)).await;
    let own = other
        .informer
        .add_event_handler_with_options(
            Recorder::new(),
            HandlerOptions { resync_period: Some(Duration::MAX), ..HandlerOptions::default() },
        )
        .unwrap();
    assert_eq!(own.resync_period(), thirty_years);
    for h in [&mut h, &mut other] {
        h.start();
        h.synced().await;
        h.clock.advance(Duration::from_secs(3600));
    }
    let late = h.informer.add_event_handler_with_resync_period(Recorder::new(), Duration::MAX).unwrap();
    assert_eq!(late.resync_period(), thirty_years);
    h.stop().await;
    other.stop().await;
}
