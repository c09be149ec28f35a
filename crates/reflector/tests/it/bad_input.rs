//! Bad input on the watch stream: malformed frames, unknown event types and odd ERROR events are
//! classified, end the watch (logged and counted, not passed to the watch error handler: in
//! client-go they end `watch` with nil) and are followed by a relist after backoff that leaves
//! nothing stale in the store; frames
//! client-go tolerates (duplicate ADDED, DELETED for unknown keys, nameless objects) keep the
//! watch. Each corpus row says what client-go's reflector (`watchHandler` / `handleAnyWatch`,
//! `StreamWatcher`, the watch decoder) does with the same frame.

use std::time::Duration;

use kcache_reflector::ErrorKind;
use kcache_testserver::{TestServer, Verb, WatchFault};

use crate::common::{Harness, Op, create, delete, object_json, raw_frames, update};

/// Runs one bad-frame scenario: after one good event the stream misbehaves and the watch ends
/// with `expected` (never reported to the watch error handler); while the reflector backs off,
/// another object is deleted on the server; after the relist the store equals the server.
async fn relists_after(fault: WatchFault, expected: ErrorKind) {
    let server = TestServer::start().await;
    let api = kube::Api::namespaced(server.client(), "default");
    create(&api, "a", "1").await;
    create(&api, "b", "1").await;
    server.faults().next_watch(fault);
    let h = Harness::start(server, |r| r.use_watch_list(false));
    h.store.wait_until("synced", |s| s.names() == ["a", "b"]).await;
    update(&h.api, "a", "2").await; // the one good event
    h.ended.wait_for(expected).await;
    delete(&h.api, "b").await; // missed while broken
    let d = h.clock.wait_for_sleepers(1).await[0];
    assert!(d.as_secs_f64() < 1.6, "backoff, not a watch timer: {d:?}");
    assert!(h.errors.kinds().is_empty(), "a watch that ended is not reported: {:?}", h.errors.kinds());
    h.clock.advance(d);
    h.store
        .wait_until("relisted", |s| s.ops().iter().filter(|o| matches!(o, Op::Replace(..))).count() == 2)
        .await;
    assert_eq!(h.store.names(), ["a"]);
    assert_eq!(h.store.values()["a"], "2");
    assert_eq!(h.requests(Verb::List).len(), 2);
    assert_eq!(h.ended.kinds(), [expected]);
    assert!(h.errors.kinds().is_empty(), "{:?}", h.errors.kinds());
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

// ---------------------------------------------------------------------------------------------
// The bad-input corpus: raw frames injected on the watch stream (`WatchFault::RawFrame`).
// ---------------------------------------------------------------------------------------------

/// Frames that end the watch with a classified error and a relist (after backoff), built from
/// the resource version `rv` the server will give the one good event before them. Each row says
/// what client-go does with the same frame.
fn relist_corpus(rv: u64) -> Vec<(&'static str, String, ErrorKind)> {
    let cm = |meta: &str| object_json("ConfigMap", "v1", meta);
    vec![
        // client-go: the JSON decoder fails; StreamWatcher turns it into an ERROR event
        // ("unable to decode an event from the watch stream"); the watch ends; relist.
        (
            "truncated JSON mid-stream",
            r#"{"type":"MODIFIED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a""#.into(),
            ErrorKind::Decode,
        ),
        // client-go: the same decode failure (no `type`).
        ("frame without a type", format!(r#"{{"object":{}}}"#, cm(r#""name":"t""#)), ErrorKind::Decode),
        // client-go: the codec cannot map kind ConfigMap in v2: decode error, relist.
        (
            "wrong apiVersion",
            format!(
                r#"{{"type":"ADDED","object":{}}}"#,
                object_json("ConfigMap", "v2", &format!(r#""name":"w","namespace":"default","resourceVersion":"{rv}""#))
            ),
            ErrorKind::Decode,
        ),
        // client-go: decodes the Pod, then skips it ("expected type *v1.ConfigMap, but watch
        // event object had type *v1.Pod") and goes on. kcache's typed decode rejects the kind:
        // a relist, stricter but never stale.
        (
            "wrong kind",
            format!(
                r#"{{"type":"ADDED","object":{}}}"#,
                object_json("Pod", "v1", &format!(r#""name":"p","namespace":"default","resourceVersion":"{rv}""#))
            ),
            ErrorKind::Decode,
        ),
        // client-go: stores the object and sets its last resource version to "" (no check), so
        // its next re-watch starts over from "". kcache refuses the event and relists.
        (
            "object without resourceVersion",
            format!(r#"{{"type":"ADDED","object":{}}}"#, cm(r#""name":"norv","namespace":"default""#)),
            ErrorKind::MissingResourceVersion,
        ),
        // client-go: as above, a bookmark moves its last resource version to "".
        (
            "bookmark without resourceVersion",
            r#"{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{}}}"#.into(),
            ErrorKind::MissingResourceVersion,
        ),
        // client-go: "got invalid watch event type" from the decoder: relist.
        ("empty event type", format!(r#"{{"type":"","object":{}}}"#, cm(r#""name":"e""#)), ErrorKind::UnknownEventType),
        (
            "lower-case event type",
            format!(r#"{{"type":"added","object":{}}}"#, cm(r#""name":"e""#)),
            ErrorKind::UnknownEventType,
        ),
        // client-go: `errors.FromObject` of a non-Status object is a generic error: relist.
        ("ERROR without an object", r#"{"type":"ERROR"}"#.into(), ErrorKind::ErrorEvent),
        ("ERROR with a null object", r#"{"type":"ERROR","object":null}"#.into(), ErrorKind::ErrorEvent),
        ("ERROR carrying a ConfigMap", format!(r#"{{"type":"ERROR","object":{}}}"#, cm(r#""name":"s""#)), ErrorKind::ErrorEvent),
        (
            "ERROR with a string code",
            r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","code":"410"}}"#.into(),
            ErrorKind::ErrorEvent,
        ),
        // client-go: isExpiredError matches reason Gone too: relist.
        (
            "ERROR 410 with reason Gone",
            r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","code":410,"reason":"Gone"}}"#.into(),
            ErrorKind::Expired,
        ),
        // client-go: any other Status ends the watch ("watch ended with error"): relist.
        (
            "ERROR 403",
            r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","code":403,"reason":"Forbidden"}}"#.into(),
            ErrorKind::Forbidden,
        ),
        (
            "ERROR with an unknown code",
            r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","code":299,"reason":"Odd"}}"#.into(),
            ErrorKind::ErrorEvent,
        ),
    ]
}

/// Every row of [`relist_corpus`]: after one good event the frame arrives; the watch ends with
/// the error's kind (not reported to the watch error handler); while the reflector backs off another object is deleted on the server; after
/// the relist the store equals the server (the injected object never stays).
#[tokio::test]
async fn corpus_of_bad_frames_is_classified_then_relisted() {
    // The resource version of the one good event, as `relists_after` produces it: two creates,
    // then an update.
    for (name, frame, expected) in relist_corpus(3) {
        eprintln!("case: {name}");
        relists_after(raw_frames(1, &frame), expected).await;
    }
}

/// Frames client-go applies (or skips) without ending the watch; kcache does the same: no error
/// reported, no relist, the next real event arrives on the same watch, and the store equals the
/// server.
fn continue_corpus(rv: u64) -> Vec<(&'static str, String)> {
    vec![
        // client-go: `store.Add` of an existing key is an update (an upsert): nothing to report.
        (
            "duplicate ADDED",
            format!(
                r#"{{"type":"ADDED","object":{{"kind":"ConfigMap","apiVersion":"v1","metadata":{{"name":"a","namespace":"default","resourceVersion":"{rv}"}},"data":{{"v":"2"}}}}}}"#
            ),
        ),
        // client-go: `store.Delete` of an unknown key is a no-op (DeltaFIFO skips it).
        (
            "DELETED for an unknown key",
            format!(
                r#"{{"type":"DELETED","object":{}}}"#,
                object_json(
                    "ConfigMap",
                    "v1",
                    &format!(r#""name":"ghost","namespace":"default","resourceVersion":"{rv}""#)
                )
            ),
        ),
        // client-go: the key function fails, `HandleError("unable to add watch event object to
        // store")`, the watch goes on. kcache logs it the same way.
        (
            "object without metadata.name",
            format!(
                r#"{{"type":"ADDED","object":{}}}"#,
                object_json("ConfigMap", "v1", &format!(r#""namespace":"default","resourceVersion":"{rv}""#))
            ),
        ),
        // client-go: a bookmark with a resource version is only a position.
        (
            "bookmark of another kind",
            format!(
                r#"{{"type":"BOOKMARK","object":{{"kind":"Pod","apiVersion":"v1","metadata":{{"resourceVersion":"{rv}"}}}}}}"#
            ),
        ),
    ]
}

/// Every row of [`continue_corpus`]: the frame follows one good event; a later real event still
/// arrives on the same watch; nothing is reported, nothing relisted, nothing stale.
#[tokio::test]
async fn corpus_of_tolerated_frames_keeps_the_watch() {
    for (name, frame) in continue_corpus(3) {
        eprintln!("case: {name}");
        let server = TestServer::start().await;
        let api = kube::Api::namespaced(server.client(), "default");
        create(&api, "a", "1").await;
        create(&api, "b", "1").await;
        server.faults().next_watch(raw_frames(1, &frame));
        let h = Harness::start(server, |r| r.use_watch_list(false));
        h.store.wait_until("synced", |s| s.names() == ["a", "b"]).await;
        update(&h.api, "a", "2").await; // the one good event, rv 3
        update(&h.api, "b", "2").await; // after the bad frame, on the same watch
        h.store.wait_until("the later event", |s| s.values().get("b").map(String::as_str) == Some("2")).await;
        assert!(h.errors.kinds().is_empty(), "{name}: {:?}", h.errors.kinds());
        assert_eq!(h.requests(Verb::List).len(), 1, "{name}: no relist");
        assert_eq!(h.requests(Verb::Watch).len(), 1, "{name}: same watch");
        assert_eq!(h.store.names(), crate::common::server_names(&h.api).await, "{name}");
        assert_eq!(h.store.values()["a"], "2", "{name}");
        h.stop().await;
    }
}

/// An ERROR event with code 429: client-go backs off and re-watches from the last resource
/// version without relisting; so does kcache.
#[tokio::test]
async fn error_event_429_backs_off_and_rewatches_without_relisting() {
    let server = TestServer::start().await;
    let api = kube::Api::namespaced(server.client(), "default");
    create(&api, "a", "1").await;
    server.faults().next_watch(raw_frames(
        1,
        r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","code":429,"reason":"TooManyRequests","details":{"retryAfterSeconds":7}}}"#,
    ));
    let h = Harness::start(server, |r| r.use_watch_list(false));
    h.store.wait_until("synced", |s| s.names() == ["a"]).await;
    update(&h.api, "a", "2").await;
    let d = h.clock.wait_for_sleep(|d| d < Duration::from_secs(100)).await;
    assert!(d >= Duration::from_secs(7), "Retry-After from the Status details: {d:?}");
    create(&h.api, "b", "1").await;
    h.clock.advance(d);
    h.store.wait_until("re-watched", |s| s.names() == ["a", "b"]).await;
    assert_eq!(h.requests(Verb::List).len(), 1, "no relist");
    assert_eq!(h.requests(Verb::Watch).len(), 2);
    assert!(h.errors.kinds().is_empty(), "handled inside the watch loop: {:?}", h.errors.kinds());
    h.stop().await;
}

/// JSON truncated by the end of the stream (the connection closes cleanly mid-frame). client-go's
/// decoder sees an unexpected EOF and ends the watch quietly, then re-watches; kcache decodes
/// the partial last frame, ends the watch with a decode error (not reported to the watch error
/// handler, as no stream ending is in client-go) and relists. Either way nothing is stale.
#[tokio::test]
async fn json_truncated_by_the_end_of_the_stream() {
    let server = TestServer::start().await;
    let api = kube::Api::namespaced(server.client(), "default");
    create(&api, "a", "1").await;
    create(&api, "b", "1").await;
    let faults = server.faults();
    faults.next_watch(WatchFault::RawFrame {
        after: 1,
        bytes: br#"{"type":"MODIFIED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a""#
            .to_vec(),
    });
    faults.all_watches(WatchFault::CloseAfter(1));
    let h = Harness::start(server, |r| r.use_watch_list(false));
    h.store.wait_until("synced", |s| s.names() == ["a", "b"]).await;
    update(&h.api, "a", "2").await;
    h.ended.wait_for(ErrorKind::Decode).await;
    h.server.faults().clear();
    delete(&h.api, "b").await;
    let d = h.clock.wait_for_sleep(|d| d < Duration::from_secs(100)).await;
    h.clock.advance(d);
    h.store.wait_until("relisted", |s| s.names() == ["a"]).await;
    assert_eq!(h.store.values()["a"], "2");
    h.stop().await;
}

/// A non-numeric resourceVersion on an event. client-go treats resource versions as opaque:
/// it stores it as its position, re-watches from it (400 from the server), then LISTs at it and
/// gets 400 again, for ever. kcache reports the 400 (`Rejected`), and a LIST rejected at a
/// specific resource version is retried at once from "": it recovers and nothing is stale.
#[tokio::test]
async fn non_numeric_resource_version_does_not_wedge_the_reflector() {
    let server = TestServer::start().await;
    let api = kube::Api::namespaced(server.client(), "default");
    create(&api, "a", "1").await;
    create(&api, "b", "1").await;
    let faults = server.faults();
    // After the one good event (a -> 2), the same state of `a` with a resource version the server
    // cannot parse, then the stream ends: the re-watch starts from "abc".
    faults.next_watch(raw_frames(
        1,
        r#"{"type":"MODIFIED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"default","resourceVersion":"abc"},"data":{"v":"2"}}}"#,
    ));
    let h = Harness::start(server, |r| r.use_watch_list(false));
    h.store.wait_until("synced", |s| s.names() == ["a", "b"]).await;
    update(&h.api, "a", "2").await;
    h.store.wait_until("took the odd version", |_| h.handle.last_sync_resource_version() == "abc").await;
    h.server.faults().restart(); // the watch ends; the next one starts from "abc"
    h.errors.wait_for(ErrorKind::Rejected).await;
    delete(&h.api, "b").await;
    let d = h.clock.wait_for_sleep(|d| d < Duration::from_secs(100)).await;
    h.clock.advance(d);
    h.store.wait_until("relisted from scratch", |s| s.names() == ["a"]).await;
    let lists = h.requests(Verb::List);
    let rvs: Vec<_> = lists.iter().map(|r| r.query_param("resourceVersion").unwrap_or_default()).collect();
    assert_eq!(rvs[rvs.len() - 2..], ["abc".to_owned(), String::new()], "rejected at abc, then from \"\"");
    assert!(h.handle.last_sync_resource_version().parse::<u64>().is_ok());
    h.stop().await;
}

/// A 10 MiB object (far beyond etcd's 1.5 MiB, within kcache's 64 MiB frame limit) is decoded and
/// stored like any other, split across many chunks; nothing is reported.
#[tokio::test]
async fn ten_mib_object_is_decoded() {
    let server = TestServer::start().await;
    let h = Harness::start(server, |r| r.use_watch_list(false));
    h.store.wait_until("synced", |s| s.ops().iter().any(|o| matches!(o, Op::Replace(..)))).await;
    let big = "x".repeat(10 * 1024 * 1024);
    create(&h.api, "big", &big).await;
    create(&h.api, "after", "1").await;
    h.store.wait_until("both", |s| s.names() == ["after", "big"]).await;
    assert_eq!(h.store.values()["big"].len(), big.len());
    assert!(h.errors.kinds().is_empty(), "{:?}", h.errors.kinds());
    assert_eq!(h.requests(Verb::List).len(), 1);
    h.stop().await;
}
