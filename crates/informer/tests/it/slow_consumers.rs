//! Slow consumers: a blocked handler delays neither the cache nor the other handlers; its backlog
//! is visible from the first pending notification; in coalescing mode its backlog is bounded by
//! distinct keys (the seed's "The Informer Will OOM If You Are Too Slow", done better). The
//! event-volume tests that count bytes are in `tests/slow_consumers_memory.rs`, a binary of their
//! own for its counting allocator.

use std::time::Duration;

use crate::common::{self, Ev, Gate, Harness, Recorder, create, update};
use kcache_informer::{HandlerOptions, ListenerMode};

/// A handler blocked inside its first notification: the other handler and the cache get every
/// later change; the blocked one's backlog gauge counts each pending notification from the
/// first; once released it catches up in order.
#[tokio::test]
async fn blocked_handler_delays_nobody_and_its_backlog_is_visible() {
    let mut h = Harness::new(Duration::ZERO).await;
    let gate = Gate::closed();
    let slow = Recorder::gated(gate.clone());
    let fast = Recorder::new();
    let slow_reg = h.informer.add_event_handler(slow.clone()).unwrap();
    h.informer.add_event_handler(fast.clone()).unwrap();
    h.start();
    h.synced().await;

    create(&h.api, "a", "0").await;
    for v in 1..=20 {
        update(&h.api, "a", &v.to_string()).await;
    }
    fast.wait_until("fast saw all", |ev| ev.len() == 21).await;
    gate.wait_entered(1).await;
    // The cache is current although one handler is stuck.
    assert_eq!(common::value(&h.informer.lister().namespaced("default").get("a").unwrap()), "20");
    // The slow handler holds the add; the 20 updates wait in its buffer.
    assert_eq!(slow_reg.pending(), 20);
    assert!(slow.events().is_empty());

    gate.open();
    slow.wait_until("caught up", |ev| ev.len() == 21).await;
    assert_eq!(slow.events(), fast.events(), "same notifications, same order");
    assert_eq!(slow_reg.pending(), 0);
    assert_eq!(slow_reg.pending_high_water(), 20);
    h.stop().await;
}

/// Coalescing mode: while the handler is stalled, many updates over few keys keep at most one
/// pending notification per key; after release the handler sees each key's final state, with the
/// old object it last saw; an add followed by a delete vanishes.
#[tokio::test]
async fn coalescing_mode_bounds_the_backlog_by_keys() {
    let mut h = Harness::new(Duration::ZERO).await;
    for k in 0..3 {
        create(&h.api, &format!("k{k}"), "0").await;
    }
    let gate = Gate::closed();
    let slow = Recorder::gated(gate.clone());
    let reg = h
        .informer
        .add_event_handler_with_options(
            slow.clone(),
            HandlerOptions { mode: ListenerMode::Coalescing, ..HandlerOptions::default() },
        )
        .unwrap();
    let fast = Recorder::new();
    h.informer.add_event_handler(fast.clone()).unwrap();
    h.start();
    h.synced().await;
    // The slow handler is stuck in its first initial add; the other two adds are pending.
    for round in 1..=10 {
        for k in 0..3 {
            update(&h.api, &format!("k{k}"), &round.to_string()).await;
        }
    }
    create(&h.api, "ephemeral", "x").await;
    common::delete(&h.api, "ephemeral").await;
    fast.wait_until("fast saw everything", |ev| ev.len() == 3 + 30 + 2).await;
    assert!(reg.pending() <= 3, "bounded by distinct keys, got {}", reg.pending());

    gate.open();
    slow.wait_until("final states", |ev| {
        (0..3).all(|k| {
            ev.iter().any(|e| {
                e.name() == format!("k{k}")
                    && matches!(e, Ev::Update(_, _, n, _) | Ev::Add(_, n, _) if n == "10")
            })
        })
    })
    .await;
    let ev = slow.events();
    assert!(ev.len() <= 6, "at most an add and an update per key: {ev:#?}");
    assert!(!ev.iter().any(|e| e.name() == "ephemeral"), "add + delete vanished");
    // The first delivered notification (in flight when the stall began) was an initial add; the
    // other keys' pending adds absorbed their updates and kept the initial-list flag.
    assert!(ev.iter().filter(|e| matches!(e, Ev::Add(_, _, true))).count() == 3);
    assert!(reg.has_synced());
    h.stop().await;
}
