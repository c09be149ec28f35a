//! Bad input on the watch stream: malformed frames, unknown event types and odd ERROR events are
//! classified, reported, and followed by a relist that leaves nothing stale in the store.

mod common;

use common::{Harness, Op, create, delete, update};
use kcache_reflector::ErrorKind;
use kcache_testserver::{TestServer, Verb, WatchFault};

/// Runs one bad-frame scenario: after one good event the stream misbehaves; while the reflector
/// backs off, another object is deleted on the server; after the relist the store equals the
/// server.
async fn relists_after(fault: WatchFault, expected: ErrorKind) {
    let server = TestServer::start().await;
    let api = kube::Api::namespaced(server.client(), "default");
    create(&api, "a", "1").await;
    create(&api, "b", "1").await;
    server.faults().next_watch(fault);
    let h = Harness::start(server, |r| r.use_watch_list(false));
    h.store.wait_until("synced", |s| s.names() == ["a", "b"]).await;
    update(&h.api, "a", "2").await; // the one good event
    h.errors.wait_for(expected).await;
    delete(&h.api, "b").await; // missed while broken
    let d = h.clock.wait_for_sleepers(1).await[0];
    assert!(d.as_secs_f64() < 1.6, "backoff, not a watch timer: {d:?}");
    h.clock.advance(d);
    h.store
        .wait_until("relisted", |s| s.ops().iter().filter(|o| matches!(o, Op::Replace(..))).count() == 2)
        .await;
    assert_eq!(h.store.names(), ["a"]);
    assert_eq!(h.store.values()["a"], "2");
    assert_eq!(h.requests(Verb::List).len(), 2);
    assert_eq!(h.errors.kinds(), [expected]);
    h.stop().await;
}

/// A line that is not JSON is a decode error, then a relist.
#[tokio::test]
async fn malformed_frame_is_a_decode_error_then_relist() {
    relists_after(WatchFault::MalformedFrame { after: 1 }, ErrorKind::Decode).await;
}

/// An event type other than the five known ones is classified as such, then a relist.
#[tokio::test]
async fn unknown_event_type_is_classified_then_relist() {
    relists_after(WatchFault::UnknownEventType { after: 1 }, ErrorKind::UnknownEventType).await;
}

/// An ERROR event with a 500 Status is an internal error (not retried in place by default), then
/// a relist.
#[tokio::test]
async fn error_event_with_internal_error_relists() {
    let fault =
        WatchFault::Error { after: 1, code: 500, reason: "InternalError".into(), message: "boom".into() };
    relists_after(fault, ErrorKind::InternalError).await;
}

/// An ERROR event whose Status has no code and no reason is still classified, not a panic.
#[tokio::test]
async fn error_event_with_empty_status_is_classified() {
    let fault = WatchFault::Error { after: 1, code: 0, reason: String::new(), message: String::new() };
    relists_after(fault, ErrorKind::ErrorEvent).await;
}
