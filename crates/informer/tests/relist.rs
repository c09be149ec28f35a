//! Deletes missed during a disconnection arrive after the relist as tombstones carrying the last
//! known state; missed updates arrive as updates (controller_test.go `TestHammerController`'s
//! convergence and shared_informer_test.go relist scenarios), for both FIFOs.

mod common;

use std::time::Duration;

use common::{Ev, Harness, Recorder, create, delete, update};
use kcache_informer::FifoKind;
use kcache_testserver::{RequestFault, Verb};

async fn missed_changes_after_relist(kind: FifoKind) {
    let mut h = Harness::new(Duration::ZERO).await;
    h.informer.set_fifo(kind).unwrap();
    create(&h.api, "a", "1").await;
    create(&h.api, "b", "1").await;
    let rec = Recorder::new();
    h.informer.add_event_handler(rec.clone()).unwrap();
    h.start();
    h.synced().await;
    rec.wait_until("initial", |ev| ev.len() == 2).await;

    // Disconnect; the re-watch is refused with 410, so the reflector backs off on the fake clock.
    let faults = h.server.faults();
    faults.fail_requests(1, RequestFault::gone().verb(Verb::Watch));
    faults.restart();
    let backoff = h.clock.wait_for_sleep(|d| d.as_secs() < 60).await;
    // Changes while disconnected.
    update(&h.api, "a", "2").await;
    delete(&h.api, "b").await;
    create(&h.api, "c", "1").await;
    h.clock.advance(backoff);

    rec.wait_until("relist deliveries", |ev| ev.len() == 5).await;
    let ev = rec.events();
    assert!(
        ev.contains(&Ev::Delete("b".into(), "1".into(), true)),
        "tombstone with the last known state: {ev:#?}"
    );
    assert!(ev.contains(&Ev::Update("a".into(), "1".into(), "2".into(), false)), "{ev:#?}");
    assert!(
        ev.contains(&Ev::Add("c".into(), "1".into(), false))
            || ev.contains(&Ev::Add("c".into(), "1".into(), true))
    );
    let mut cached: Vec<_> = h.informer.lister().list().iter().map(|o| common::name(o)).collect();
    cached.sort();
    assert_eq!(cached, ["a", "c"]);
    h.stop().await;
}

#[tokio::test]
async fn in_order_fifo_delivers_missed_deletes_as_tombstones() {
    missed_changes_after_relist(FifoKind::InOrder).await;
}

#[tokio::test]
async fn delta_fifo_delivers_missed_deletes_as_tombstones() {
    missed_changes_after_relist(FifoKind::DeltaFifo).await;
}
