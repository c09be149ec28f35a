//! LIST then WATCH: the basic loop of client-go's `ListAndWatch` (reflector_test.go
//! `TestReflectorListAndWatch`, `TestReflectorWatchHandler`, `TestReflectorListAndWatchWithErrors`),
//! over real HTTP.

use kcache_reflector::ErrorKind;
use kcache_testserver::{RequestFault, TestServer, Verb, WatchFault};

use crate::common::{Harness, Op, create, delete, update};

/// Mirrors `TestReflectorListAndWatch`: the first LIST is at "0" with the default page size, the
/// watch starts at the list's resource version with bookmarks, and every event reaches the store.
#[tokio::test]
async fn lists_at_zero_then_watches_from_the_list_resource_version() {
    let server = TestServer::start().await;
    let api = kube::Api::namespaced(server.client(), "default");
    create(&api, "a", "1").await;
    create(&api, "b", "1").await;
    let h = Harness::start(server, |r| r.use_watch_list(false));
    h.store.wait_until("initial list", |s| s.ops().iter().any(|o| matches!(o, Op::Replace(..)))).await;
    assert_eq!(h.store.names(), ["a", "b"]);

    let list = &h.requests(Verb::List)[0];
    assert_eq!(list.query_param("resourceVersion").as_deref(), Some("0"));
    assert_eq!(list.query_param("limit").as_deref(), Some("500"));
    let list_rv = h.handle.last_sync_resource_version();
    assert!(!list_rv.is_empty());

    create(&h.api, "c", "1").await;
    let updated_rv = update(&h.api, "a", "2").await;
    delete(&h.api, "b").await;
    h.store.wait_until("watch events", |s| s.names() == ["a", "c"] && s.values()["a"] == "2").await;

    let watch = &h.requests(Verb::Watch)[0];
    assert_eq!(watch.query_param("resourceVersion"), Some(list_rv));
    assert_eq!(watch.query_param("allowWatchBookmarks").as_deref(), Some("true"));
    assert_eq!(watch.query_param("sendInitialEvents"), None);
    let timeout: u64 = watch.query_param("timeoutSeconds").unwrap().parse().unwrap();
    assert!((300..600).contains(&timeout), "watch timeout {timeout} not in [5min, 10min)");
    // From a known resource version every event's version is published at once.
    let last: u64 = h.handle.last_sync_resource_version().parse().unwrap();
    assert!(last > updated_rv.parse::<u64>().unwrap());
    assert!(h.store.ops().contains(&Op::ResourceVersion(updated_rv)));
    assert!(h.errors.kinds().is_empty(), "{:?}", h.errors.kinds());
    h.stop().await;
}

/// Mirrors the "watch closed normally" branch of client-go's `watch` loop: a clean close re-watches
/// at once from the last resource version, with no relist and no backoff.
#[tokio::test]
async fn clean_close_rewatches_from_the_last_resource_version() {
    let server = TestServer::start().await;
    server.faults().next_watch(WatchFault::CloseAfter(1));
    let h = Harness::start(server, |r| r.use_watch_list(false));
    h.store.wait_until("initial list", |s| !s.ops().is_empty()).await;

    let x_rv = create(&h.api, "x", "1").await;
    h.store.wait_until("x", |s| s.names() == ["x"]).await;
    // The first watch closed after delivering x; the next one starts right after x.
    create(&h.api, "y", "1").await;
    h.store.wait_until("y through the second watch", |s| s.names() == ["x", "y"]).await;

    let watches = h.requests(Verb::Watch);
    assert_eq!(watches.len(), 2);
    assert_eq!(watches[1].query_param("resourceVersion"), Some(x_rv));
    assert_eq!(h.requests(Verb::List).len(), 1, "a clean close must not relist");
    assert!(h.errors.kinds().is_empty());
    assert!(h.clock.pending_sleeps().iter().all(|d| d.as_secs() >= 330), "no backoff sleep expected");
    h.stop().await;
}

/// Mirrors `TestReflectorListAndWatchWithErrors`: a run of list-and-watch cycles broken by list
/// and watch errors, checking after each step that the store holds what the last successful list
/// and the events since say, and that the resource version moved only with them.
///
/// 1. list (empty), watch: foo and bar are added; the watch then ends with 410 (not reported:
///    `ListAndWatch` returns nil when a watch ends, whatever the error).
/// 2. the relist fails (500): reported (`list` returns "failed to list"); store and resource
///    version untouched, while foo is deleted and qux added on the server, unseen.
/// 3. the next list succeeds (bar, qux); the watch request then fails (500): reported (`watch`
///    returns a `WatchWithContext` error that is not retriable).
/// 4. list, watch: baz is added through the watch.
#[tokio::test]
async fn list_and_watch_errors_leave_the_store_at_the_last_success() {
    let server = TestServer::start().await;
    server.faults().next_watch(WatchFault::Error {
        after: 2,
        code: 410,
        reason: "Expired".into(),
        message: "too old".into(),
    });
    let h = Harness::start(server, |r| r.use_watch_list(false));
    let faults = h.server.faults();
    h.store.wait_until("initial list", |s| !s.ops().is_empty()).await;
    assert!(h.store.names().is_empty());

    // 1.
    create(&h.api, "foo", "1").await;
    let bar_rv = create(&h.api, "bar", "1").await;
    h.ended.wait_for(ErrorKind::Expired).await;
    assert_eq!(h.store.names(), ["bar", "foo"]);
    assert_eq!(h.handle.last_sync_resource_version(), bar_rv);

    // 2.
    faults.fail_requests(1, RequestFault::internal_error().verb(Verb::List));
    delete(&h.api, "foo").await;
    create(&h.api, "qux", "1").await;
    let d = h.clock.wait_for_sleepers(1).await[0];
    h.clock.advance(d);
    h.errors.wait_for(ErrorKind::InternalError).await;
    assert_eq!(h.store.names(), ["bar", "foo"], "a failed list changes nothing");
    assert_eq!(h.handle.last_sync_resource_version(), bar_rv);

    // 3.
    faults.fail_requests(1, RequestFault::internal_error().verb(Verb::Watch));
    let d = h.clock.wait_for_sleepers(1).await[0];
    h.clock.advance(d);
    h.errors.wait_for_count(2).await;
    assert_eq!(h.store.names(), ["bar", "qux"], "the list replaced the store");
    let list_rv = h.handle.last_sync_resource_version();
    assert!(list_rv.parse::<u64>().unwrap() > bar_rv.parse::<u64>().unwrap());

    // 4.
    let d = h.clock.wait_for_sleepers(1).await[0];
    h.clock.advance(d);
    h.store
        .wait_until("relisted", |s| s.ops().iter().filter(|o| matches!(o, Op::Replace(..))).count() == 3)
        .await;
    let baz_rv = create(&h.api, "baz", "1").await;
    h.store.wait_until("baz", |s| s.names() == ["bar", "baz", "qux"]).await;
    assert_eq!(h.handle.last_sync_resource_version(), baz_rv);

    assert_eq!(h.errors.kinds(), [ErrorKind::InternalError, ErrorKind::InternalError]);
    assert_eq!(h.ended.kinds(), [ErrorKind::Expired, ErrorKind::InternalError], "the 410, the refused watch");
    let lists: Vec<_> = h.requests(Verb::List).iter().map(|r| r.status).collect();
    assert_eq!(lists, [200, 500, 200, 200]);
    let watches: Vec<_> = h.requests(Verb::Watch).iter().map(|r| r.status).collect();
    assert_eq!(watches, [200, 500, 200]);
    h.stop().await;
}
