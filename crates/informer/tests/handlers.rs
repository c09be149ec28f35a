//! Handlers: fan-out in per-key order, late handlers' replay, removal, per-handler sync, panics
//! (client-go shared_informer_test.go `TestListenerResyncPeriods`-era fan-out tests,
//! `TestSharedInformerMultipleRegistration`, `TestRemoveWhileActive`, `TestAddWhileActive`,
//! `TestSharedInformerHandlerAbuse`).

mod common;

use std::time::Duration;

use common::{Ev, Harness, Recorder, create, delete, update};
use kcache_informer::{HasSynced, InformerError};

/// Several handlers see the same events, in the same per-key order, ending in the final state.
#[tokio::test]
async fn handlers_see_the_same_ordered_events() {
    let mut h = Harness::new(Duration::ZERO).await;
    create(&h.api, "pre", "0").await;
    let recs: Vec<Recorder> = (0..3).map(|_| Recorder::new()).collect();
    let regs: Vec<_> = recs.iter().map(|r| h.informer.add_event_handler(r.clone()).unwrap()).collect();
    h.start();
    h.synced().await;
    for i in 0..5 {
        create(&h.api, &format!("k{i}"), "1").await;
    }
    for round in 2..5 {
        for i in 0..5 {
            update(&h.api, &format!("k{i}"), &round.to_string()).await;
        }
    }
    delete(&h.api, "k0").await;
    delete(&h.api, "pre").await;
    for r in &recs {
        r.wait_until("final states", |ev| {
            ev.iter().filter(|e| matches!(e, Ev::Delete(..))).count() == 2
                && ev.iter().filter(|e| matches!(e, Ev::Update(_, _, n, _) if n == "4")).count() == 5
        })
        .await;
    }
    let first = recs[0].events();
    assert_eq!(first[0], Ev::Add("pre".into(), "0".into(), true));
    assert_eq!(recs[0].of("k1").len(), 4, "add + 3 updates");
    for r in &recs[1..] {
        for k in ["k0", "k1", "k2", "k3", "k4", "pre"] {
            assert_eq!(r.of(k), recs[0].of(k), "per-key sequence of {k}");
        }
    }
    for reg in &regs {
        assert!(reg.has_synced());
        assert_eq!(reg.panics(), 0);
    }
    h.stop().await;
}

/// A handler added after start gets the cache replayed as initial-list adds, to it alone; its
/// own has_synced waits for that replay.
#[tokio::test]
async fn late_handler_gets_a_replay_alone() {
    let mut h = Harness::new(Duration::ZERO).await;
    create(&h.api, "a", "1").await;
    create(&h.api, "b", "1").await;
    let early = Recorder::new();
    h.informer.add_event_handler(early.clone()).unwrap();
    h.start();
    h.synced().await;
    early.wait_until("initial adds", |ev| ev.len() == 2).await;

    let gate = common::Gate::closed();
    let late = Recorder::gated(gate.clone());
    let reg = h.informer.add_event_handler(late.clone()).unwrap();
    assert!(!reg.has_synced(), "replay not delivered yet");
    gate.open();
    tokio::time::timeout(Duration::from_secs(20), reg.wait_synced()).await.unwrap();
    let mut got = late.events();
    got.sort_by(|a, b| a.name().cmp(b.name()));
    assert_eq!(got, [Ev::Add("a".into(), "1".into(), true), Ev::Add("b".into(), "1".into(), true)]);
    assert_eq!(early.events().len(), 2, "the replay went to the late handler only");

    create(&h.api, "c", "1").await;
    late.wait_until("live add", |ev| ev.contains(&Ev::Add("c".into(), "1".into(), false))).await;
    early.wait_until("live add", |ev| ev.len() == 3).await;
    h.stop().await;
}

/// A removed handler receives nothing more; the others go on.
#[tokio::test]
async fn removed_handler_stops_receiving() {
    let mut h = Harness::new(Duration::ZERO).await;
    let keep = Recorder::new();
    let gone = Recorder::new();
    h.informer.add_event_handler(keep.clone()).unwrap();
    let reg = h.informer.add_event_handler(gone.clone()).unwrap();
    h.start();
    h.synced().await;
    create(&h.api, "a", "1").await;
    gone.wait_until("a", |ev| ev.len() == 1).await;
    assert!(h.informer.remove_event_handler(&reg));
    assert!(!h.informer.remove_event_handler(&reg), "second removal is a no-op");
    create(&h.api, "b", "1").await;
    keep.wait_until("b", |ev| ev.len() == 2).await;
    assert_eq!(gone.events().len(), 1);
    h.stop().await;
}

/// A handler that panics is isolated: its listener goes on with the next notification, and the
/// other handlers are unaffected.
#[tokio::test]
async fn handler_panic_is_isolated() {
    let mut h = Harness::new(Duration::ZERO).await;
    let bad = Recorder { panic_on: Some("boom".into()), ..Recorder::new() };
    let good = Recorder::new();
    let bad_reg = h.informer.add_event_handler(bad.clone()).unwrap();
    h.informer.add_event_handler(good.clone()).unwrap();
    h.start();
    h.synced().await;
    create(&h.api, "boom", "1").await;
    create(&h.api, "after", "1").await;
    bad.wait_until("the event after the panic", |ev| ev.iter().any(|e| e.name() == "after")).await;
    good.wait_until("both", |ev| ev.len() == 2).await;
    assert_eq!(bad_reg.panics(), 1);
    h.stop().await;
}

/// Adding a handler to a stopped informer is an error; settings are fixed once started; an
/// informer runs once.
#[tokio::test]
async fn misuse_is_reported() {
    let mut h = Harness::new(Duration::ZERO).await;
    h.start();
    h.synced().await;
    assert!(matches!(h.informer.set_transform(|o| o), Err(InformerError::AlreadyStarted)));
    assert!(matches!(h.informer.set_watch_error_handler(|_, _| {}), Err(InformerError::AlreadyStarted)));
    let again = h.informer.run(tokio_util::sync::CancellationToken::new()).await;
    assert!(matches!(again, Err(InformerError::AlreadyStarted)));
    let informer = h.informer.clone();
    h.stop().await;
    assert!(informer.is_stopped());
    assert!(matches!(informer.add_event_handler(Recorder::new()), Err(InformerError::Stopped)));
}
