//! Which errors reach the watch error handler: exactly those client-go v0.37.2's reflector passes
//! to its `watchErrorHandler`, that is the errors `ListAndWatchWithContext` returns to
//! `RunWithContext` (reflector.go). One test per case, each naming the upstream path.
//!
//! Reported: a failed LIST (`list` returns "failed to list"), a LIST the store refused (`list`
//! returns "unable to sync list result" from `syncWith`), a watch that could not be opened
//! (`watch` returns the `WatchWithContext` error unless `isWatchErrorRetriable`).
//!
//! Not reported, because `watch` returns nil after logging them (or retries them itself): a 410
//! ending the watch, a decode error, a very short watch, any other ERROR event, a normal close,
//! and a failed watch-list (`ListAndWatchWithContext` falls back to LIST). Elsewhere in this
//! suite: a refused or 429 watch open (`isWatchErrorRetriable`: `backoff.rs`,
//! `refused_watch_connections_back_off_without_relisting`, `repeated_429_on_watch_never_relists`),
//! a 429 ERROR event (`bad_input.rs`), a resync error (`resync.rs`, `resync_error_ends_the_watch`,
//! client-go's `TestReflectorResync`), kcache's hung watch (`hung.rs`).

use std::sync::atomic::Ordering;
use std::time::Duration;

use kcache_reflector::ErrorKind;
use kcache_testserver::{RequestFault, TestServer, Verb, WatchFault};

use crate::common::{Captured, Harness, Op, create};

fn replaces(h: &Harness) -> usize {
    h.store.ops().iter().filter(|o| matches!(o, Op::Replace(..))).count()
}

/// A LIST + WATCH reflector on a server holding `a`, synced.
async fn synced(server: TestServer) -> Harness {
    let api = kube::Api::namespaced(server.client(), "default");
    create(&api, "a", "1").await;
    let h = Harness::start(server, |r| r.use_watch_list(false));
    h.store.wait_until("synced", |s| s.names() == ["a"]).await;
    h
}

/// Waits for the backoff after an attempt ended, then lets it run out and waits for the relist.
async fn backs_off_then_relists(h: &Harness) {
    let before = replaces(h);
    let d = h.clock.wait_for_sleep(|d| d < Duration::from_secs(2)).await;
    h.clock.advance(d);
    h.store
        .wait_until("relisted", |s| s.ops().iter().filter(|o| matches!(o, Op::Replace(..))).count() > before)
        .await;
}

/// A watch that ended with `kind`: the reflector backs off (the handler, had it been called,
/// would have been before that) and relists; the handler heard nothing.
async fn ended_unreported(h: &Harness, kind: ErrorKind) {
    h.ended.wait_for(kind).await;
    h.clock.wait_for_sleep(|d| d < Duration::from_secs(2)).await;
    assert!(h.errors.kinds().is_empty(), "{kind:?} must not be reported: {:?}", h.errors.kinds());
    backs_off_then_relists(h).await;
    assert!(h.errors.kinds().is_empty(), "{:?}", h.errors.kinds());
}

/// Reported: `RunWithContext` → `ListAndWatchWithContext` → `list`, whose LIST failed ("failed to
/// list %v: %w"). Mirrors shared_informer_test.go `TestSharedInformerErrorHandling` (a LIST
/// error reaches the handler set with `SetWatchErrorHandler`) and the list-error row of
/// reflector_test.go `TestReflectorListAndWatchWithErrors`.
#[tokio::test]
async fn a_failed_list_is_reported() {
    let server = TestServer::start().await;
    server.faults().fail_requests(1, RequestFault::forbidden().verb(Verb::List));
    let h = Harness::start(server, |r| r.use_watch_list(false));
    h.errors.wait_for(ErrorKind::Forbidden).await;
    assert_eq!(h.errors.kinds(), [ErrorKind::Forbidden]);
    backs_off_then_relists(&h).await;
    assert_eq!(h.errors.kinds(), [ErrorKind::Forbidden], "once");
    h.stop().await;
}

/// Reported: `list` → `syncWith` → `store.Replace` failed ("unable to sync list result").
#[tokio::test]
async fn a_list_the_store_refuses_is_reported() {
    let server = TestServer::start().await;
    let h = Harness::start(server, |r| r.use_watch_list(false));
    h.store.fail_replace.store(true, Ordering::SeqCst);
    h.errors.wait_for(ErrorKind::Store).await;
    assert_eq!(h.errors.kinds(), [ErrorKind::Store]);
    h.store.fail_replace.store(false, Ordering::SeqCst);
    backs_off_then_relists(&h).await;
    h.stop().await;
}

/// Reported: `watchWithResync` → `watch` → `WatchWithContext` failed with an error that is not
/// `isWatchErrorRetriable` (a refused connection or a 429): `watch` returns it, and so does
/// `ListAndWatchWithContext`. A 403, a 410 (the watch's resource version already compacted when
/// the request arrives) and a 500, each once; the reflector then backs off and relists. Mirrors
/// the watch-error row of reflector_test.go `TestReflectorListAndWatchWithErrors`.
#[tokio::test]
async fn a_watch_that_cannot_be_opened_is_reported() {
    let faults = [
        (RequestFault::forbidden(), ErrorKind::Forbidden),
        (RequestFault::gone(), ErrorKind::Expired),
        (RequestFault::internal_error(), ErrorKind::InternalError),
    ];
    for (fault, kind) in faults {
        let server = TestServer::start().await;
        server.faults().fail_requests(1, fault.verb(Verb::Watch));
        let api = kube::Api::namespaced(server.client(), "default");
        create(&api, "a", "1").await;
        let h = Harness::start(server, |r| r.use_watch_list(false));
        h.errors.wait_for(kind).await;
        assert_eq!(h.errors.kinds(), [kind]);
        backs_off_then_relists(&h).await;
        assert_eq!(h.errors.kinds(), [kind], "once");
        assert_eq!(h.requests(Verb::List).len(), 2);
        h.stop().await;
    }
}

/// Not reported: `watch` → `handleWatch` returned the ERROR event's 410 (`isExpiredError`: the
/// watch cache was compacted past the watch's resource version): logged ("Watch closed") and
/// `return nil`. `ListAndWatchWithContext` succeeds; `Run` backs off and relists, at the last
/// synced resource version.
#[tokio::test]
async fn a_410_ending_the_watch_is_not_reported() {
    let server = TestServer::start().await;
    server.faults().next_watch(WatchFault::Error {
        after: 0,
        code: 410,
        reason: "Expired".into(),
        message: "too old resource version: 1 (2)".into(),
    });
    let h = synced(server).await;
    let synced_rv = h.handle.last_sync_resource_version();
    ended_unreported(&h, ErrorKind::Expired).await;
    let lists = h.requests(Verb::List);
    assert_eq!(lists[1].query_param("resourceVersion"), Some(synced_rv), "not from \"\"");
    h.stop().await;
}

/// Not reported: a frame that does not decode. client-go's `StreamWatcher.receive` turns the
/// decode failure into an ERROR event (an InternalError, "unable to decode an event from the
/// watch stream"), `handleWatch` returns it, and `watch` logs "watch ended with error" and
/// returns nil.
#[tokio::test]
async fn a_decode_error_ending_the_watch_is_not_reported() {
    let server = TestServer::start().await;
    server.faults().next_watch(WatchFault::MalformedFrame { after: 0 });
    let h = synced(server).await;
    ended_unreported(&h, ErrorKind::Decode).await;
    h.stop().await;
}

/// Not reported: a watch that closed within a second without any event. `handleAnyWatch`
/// returns a `VeryShortWatchError`, `watch` logs it and returns nil.
#[tokio::test]
async fn a_very_short_watch_is_not_reported() {
    let server = TestServer::start().await;
    server.faults().next_watch(WatchFault::CloseAfter(0));
    let h = synced(server).await;
    ended_unreported(&h, ErrorKind::VeryShortWatch).await;
    h.stop().await;
}

/// Not reported: any other ERROR event (a 403 after the stream started, a 500 that
/// `MaxInternalErrorRetryDuration` does not retry): `handleWatch` returns it, `watch` logs
/// "watch ended with error" and returns nil.
#[tokio::test]
async fn any_other_error_event_ending_the_watch_is_not_reported() {
    for (code, reason, kind) in
        [(403, "Forbidden", ErrorKind::Forbidden), (500, "InternalError", ErrorKind::InternalError)]
    {
        let server = TestServer::start().await;
        server.faults().next_watch(WatchFault::Error {
            after: 0,
            code,
            reason: reason.into(),
            message: "ended".into(),
        });
        let h = synced(server).await;
        ended_unreported(&h, kind).await;
        h.stop().await;
    }
}

/// Not reported, and not backed off: a watch that closed normally after an event. `handleWatch`
/// returns nil and `watch` loops: a new watch at once from the last resource version.
#[tokio::test]
async fn a_normal_close_is_not_reported() {
    let server = TestServer::start().await;
    server.faults().next_watch(WatchFault::CloseAfter(1));
    let h = synced(server).await;
    create(&h.api, "b", "1").await; // the one event of the first watch, which then closes
    create(&h.api, "c", "1").await; // through the next watch
    h.store.wait_until("re-watched", |s| s.names() == ["a", "b", "c"]).await;
    assert_eq!(h.requests(Verb::Watch).len(), 2);
    assert_eq!(h.requests(Verb::List).len(), 1);
    assert!(h.ended.kinds().is_empty());
    assert!(h.errors.kinds().is_empty(), "{:?}", h.errors.kinds());
    h.stop().await;
}

/// Not reported: a watch-list that failed. `ListAndWatchWithContext` logs the `watchList` error
/// at V(4) ("falling back to regular list") and lists instead; only the LIST's outcome counts.
#[tokio::test]
async fn a_failed_watch_list_is_not_reported() {
    let server = TestServer::start().await;
    server.faults().fail_requests(1, RequestFault::forbidden().verb(Verb::Watch));
    let api = kube::Api::namespaced(server.client(), "default");
    create(&api, "a", "1").await;
    let h = Harness::start(server, |r| r);
    h.store.wait_until("synced by the fallback LIST", |s| s.names() == ["a"]).await;
    create(&h.api, "b", "1").await;
    h.store.wait_until("watching", |s| s.names() == ["a", "b"]).await;
    let watches = h.requests(Verb::Watch);
    assert_eq!(watches[0].query_param("sendInitialEvents").as_deref(), Some("true"));
    assert_eq!(watches[0].status, 403);
    assert_eq!(h.ended.kinds(), [ErrorKind::Forbidden]);
    assert!(h.errors.kinds().is_empty(), "{:?}", h.errors.kinds());
    h.stop().await;
}

/// What `default_watch_error_handler` logs for `err`, one line.
fn logged_by_default_handler(err: &kcache_reflector::ReflectorError) -> String {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, || kcache_reflector::default_watch_error_handler("r", err));
    captured.text()
}

/// Mirrors client-go's `DefaultWatchErrorHandler`: an expired resource version is routine
/// (`V(4).Info`, debug here); anything else reaching the handler goes to
/// `utilruntime.HandleErrorWithContext` ("Failed to watch"), logged at error level.
#[test]
fn the_default_handler_logs_like_client_go() {
    let status = |code: u16, reason: &str| {
        let mut s = kube::core::Status::failure("refused", reason);
        s.code = code;
        kcache_reflector::ReflectorError::from_status(s, None, None)
    };
    let expired = logged_by_default_handler(&status(410, "Expired"));
    assert!(expired.contains("DEBUG"), "{expired}");
    for err in [status(403, "Forbidden"), status(500, "InternalError")] {
        let line = logged_by_default_handler(&err);
        assert!(line.contains("ERROR") && line.contains("failed to list and watch"), "{line}");
    }
}
