//! Watch-list: one stream, synced by the initial-events-end bookmark, continuing as the live
//! watch; fallback to LIST + WATCH when the server does not do watch-list (client-go
//! reflector_watchlist_test.go scenarios).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_reflector::{ApiListerWatcher, ListOptions, ListPage, ListerWatcher, WatchOptions, WatchStream};
use kcache_testserver::{TestServer, Verb, WatchListSupport};

use crate::common::{Harness, Op, create, raw_frames};

/// Happy path: one watch request with sendInitialEvents, no LIST at all, the objects swapped in
/// by one replace at the bookmark's version, and later changes on the same connection. Mirrors
/// the synced-after-bookmark cases of client-go reflector_watchlist_test.go `TestWatchList`.
#[tokio::test]
async fn syncs_on_one_connection_without_list() {
    let server = TestServer::start().await;
    let api = kube::Api::namespaced(server.client(), "default");
    for n in ["a", "b", "c"] {
        create(&api, n, "1").await;
    }
    let h = Harness::start(server, |r| r);
    h.store.wait_until("synced", |s| s.names() == ["a", "b", "c"]).await;
    let replace_rv = match &h.store.ops()[0] {
        Op::Replace(names, rv) => {
            assert_eq!(names, &["a", "b", "c"]);
            rv.clone()
        }
        other => panic!("first op must be the atomic replace, got {other:?}"),
    };
    assert_eq!(h.handle.last_sync_resource_version(), replace_rv);

    create(&h.api, "d", "1").await;
    h.store.wait_until("live event", |s| s.names().len() == 4).await;
    let watches = h.requests(Verb::Watch);
    assert_eq!(watches.len(), 1, "the same stream continues as the live watch");
    assert_eq!(h.requests(Verb::List).len(), 0, "no LIST on the watch-list path");
    let w = &watches[0];
    assert_eq!(w.query_param("sendInitialEvents").as_deref(), Some("true"));
    assert_eq!(w.query_param("resourceVersionMatch").as_deref(), Some("NotOlderThan"));
    assert_eq!(w.query_param("allowWatchBookmarks").as_deref(), Some("true"));
    assert_eq!(w.query_param("resourceVersion"), None, "first watch-list is a consistent read");
    assert!(h.errors.kinds().is_empty());
    h.stop().await;
}

/// `Reflector::key_func` keys the watch-list's temporary store: with one key for every object,
/// the initial events of a, b and c overwrite one another there, and the replace at the bookmark
/// carries one object (with the default namespace/name key it carries all three, as above).
#[tokio::test]
async fn key_func_keys_the_temporary_store() {
    let server = TestServer::start().await;
    let api = kube::Api::namespaced(server.client(), "default");
    for n in ["a", "b", "c"] {
        create(&api, n, "1").await;
    }
    let one_key = kcache_store::key_func(|_: &ConfigMap| Ok("one key".to_owned()));
    let h = Harness::start(server, |r| r.key_func(one_key));
    h.store.wait_until("synced", |s| s.ops().iter().any(|o| matches!(o, Op::Replace(..)))).await;
    match &h.store.ops()[0] {
        Op::Replace(names, _) => assert_eq!(names.len(), 1, "{names:?}"),
        other => panic!("first op must be the atomic replace, got {other:?}"),
    }
    assert_eq!(h.requests(Verb::List).len(), 0, "synced by the watch-list");
    assert!(h.errors.kinds().is_empty());
    h.stop().await;
}

/// A server with the WatchList gate off rejects sendInitialEvents (422): the reflector falls back
/// to LIST + WATCH without reporting an error. Mirrors the fallback cases of client-go
/// reflector_watchlist_test.go `TestWatchList`.
#[tokio::test]
async fn falls_back_when_the_gate_is_off() {
    let server = TestServer::start().await;
    server.faults().set_watch_list_support(WatchListSupport::GateDisabled);
    let api = kube::Api::namespaced(server.client(), "default");
    create(&api, "a", "1").await;
    let h = Harness::start(server, |r| r);
    h.store.wait_until("synced", |s| s.names() == ["a"]).await;
    create(&h.api, "b", "1").await;
    h.store.wait_until("live", |s| s.names() == ["a", "b"]).await;
    let watches = h.requests(Verb::Watch);
    assert_eq!(watches[0].status, 422);
    assert_eq!(h.requests(Verb::List).len(), 1);
    assert_eq!(watches[1].query_param("sendInitialEvents"), None);
    assert!(h.errors.kinds().is_empty(), "fallback is not an error: {:?}", h.errors.kinds());
    h.stop().await;
}

/// A server that ignores sendInitialEvents serves a plain watch: a bookmark without the end
/// annotation shows it; the half-read stream is dropped (never reused) and LIST + WATCH follows.
#[tokio::test]
async fn falls_back_when_the_server_ignores_send_initial_events() {
    let server = TestServer::builder().bookmark_interval(Duration::from_millis(20)).start().await;
    server.faults().set_watch_list_support(WatchListSupport::Ignored);
    let api = kube::Api::namespaced(server.client(), "default");
    create(&api, "a", "1").await;
    let h = Harness::start(server, |r| r);
    h.store.wait_until("synced via list", |s| s.ops().iter().any(|o| matches!(o, Op::Replace(..)))).await;
    assert_eq!(h.store.names(), ["a"]);
    create(&h.api, "b", "1").await;
    h.store.wait_until("live", |s| s.names() == ["a", "b"]).await;
    let watches = h.requests(Verb::Watch);
    assert_eq!(watches.len(), 2, "the half-read watch-list stream is replaced by a new watch");
    assert_eq!(h.requests(Verb::List).len(), 1);
    // No object of the abandoned stream reached the real store before the list.
    assert!(matches!(h.store.ops()[0], Op::Replace(..)));
    h.stop().await;
}

/// Changes that arrive between the initial events and the end bookmark are applied to the
/// temporary store: the sync still takes one watch request and no LIST, and the swapped-in
/// contents include them. Mirrors client-go reflector_watchlist_test.go `TestWatchList`, "check
/// if Updates and Deletes events are propagated during streaming (until the bookmark is
/// received)".
#[tokio::test]
async fn changes_before_the_end_bookmark_reach_the_temporary_store() {
    let server = TestServer::start().await;
    let api = kube::Api::namespaced(server.client(), "default");
    create(&api, "a", "1").await;
    create(&api, "b", "1").await;
    let frame = |ty: &str, name: &str, value: &str| {
        format!(
            r#"{{"type":"{ty}","object":{{"kind":"ConfigMap","apiVersion":"v1","metadata":{{"namespace":"default","name":"{name}","resourceVersion":"900"}},"data":{{"v":"{value}"}}}}}}"#
        )
    };
    // After the two initial ADDED events, before the end bookmark.
    let frames = frame("MODIFIED", "a", "2") + "\n" + &frame("DELETED", "b", "1");
    server.faults().next_watch(raw_frames(2, &frames));
    let h = Harness::start(server, |r| r);
    h.store.wait_until("synced", |s| s.ops().iter().any(|o| matches!(o, Op::Replace(..)))).await;
    match &h.store.ops()[0] {
        Op::Replace(names, _) => assert_eq!(names, &["a"], "b's delete applied before the swap"),
        other => panic!("first op must be the atomic replace, got {other:?}"),
    }
    assert_eq!(
        h.store.values().get("a").map(String::as_str),
        Some("2"),
        "a's update applied before the swap"
    );
    assert_eq!(h.requests(Verb::Watch).len(), 1, "no fallback: one watch request");
    assert_eq!(h.requests(Verb::List).len(), 0, "no LIST");
    assert!(h.errors.kinds().is_empty(), "{:?}", h.errors.kinds());
    h.stop().await;
}

/// Asks the first watch-list for `future` instead of the reflector's resource version, as if the
/// reflector had last synced from an API server ahead of this one.
struct FirstWatchListFromTheFuture {
    inner: ApiListerWatcher<ConfigMap>,
    future: String,
    used: AtomicBool,
}

impl ListerWatcher<ConfigMap> for FirstWatchListFromTheFuture {
    fn list(&self, opts: ListOptions) -> BoxFuture<'static, kcache_reflector::Result<ListPage<ConfigMap>>> {
        self.inner.list(opts)
    }

    fn watch(
        &self,
        mut opts: WatchOptions,
    ) -> BoxFuture<'static, kcache_reflector::Result<WatchStream<ConfigMap>>> {
        if opts.send_initial_events && !self.used.swap(true, Ordering::SeqCst) {
            opts.resource_version = self.future.clone();
        }
        self.inner.watch(opts)
    }
}

/// A watch-list from a resource version the server has not reached gets 200 and one ERROR event
/// with the 504 "Too large resource version" Status (kube-apiserver's cacher.go `Watch` wraps
/// `waitUntilFreshAndBlock`'s error in `newErrWatcher`): the reflector retries the watch-list at
/// once from "" (client-go reflector.go `watchList`, whose `isErrorRetriableWithSideEffectsFn`
/// marks the resource version unavailable on `isTooLargeResourceVersionError`), syncs on that
/// stream, and never LISTs.
#[tokio::test]
async fn too_large_resource_version_in_the_stream_retries_the_watch_list_from_empty() {
    let server = TestServer::start().await;
    let api = kube::Api::namespaced(server.client(), "default");
    for n in ["a", "b"] {
        create(&api, n, "1").await;
    }
    let future = (server.resource_version() + 1000).to_string();
    let lw = FirstWatchListFromTheFuture {
        inner: ApiListerWatcher::new(api),
        future: future.clone(),
        used: AtomicBool::new(false),
    };
    let h = Harness::start_with(server, lw, |r| r);
    // The fake clock never moves here: a sync proves the retry did not wait for a backoff.
    h.store.wait_until("synced", |s| s.names() == ["a", "b"]).await;
    match &h.store.ops()[0] {
        Op::Replace(names, _) => assert_eq!(names, &["a", "b"]),
        other => panic!("first op must be the atomic replace, got {other:?}"),
    }
    let watches = h.requests(Verb::Watch);
    assert_eq!(watches.len(), 2, "{watches:?}");
    assert_eq!(watches[0].query_param("resourceVersion"), Some(future));
    assert_eq!(watches[0].status, 200, "the error comes inside the stream");
    assert!(watches[1].query_param("resourceVersion").is_none_or(|rv| rv.is_empty()), "{:?}", watches[1]);
    assert_eq!(watches[1].query_param("sendInitialEvents").as_deref(), Some("true"));
    assert_eq!(watches[1].query_param("resourceVersionMatch").as_deref(), Some("NotOlderThan"));
    assert_eq!(h.requests(Verb::List).len(), 0, "no LIST");
    assert!(h.errors.kinds().is_empty(), "{:?}", h.errors.kinds());
    h.stop().await;
}

/// A watch-list stream that the server closes cleanly after some initial events but before the
/// end bookmark: the half-filled temporary store is dropped (never applied), and the cycle falls
/// back to one LIST and a WATCH from the list's version. client-go
/// reflector_watchlist_test.go `TestWatchList` ("check if stopping a watcher before sync results
/// in creating a new watch-list request") opens another watch-list instead, at once and without
/// backoff; kcache deliberately falls back, so a server or proxy that keeps cutting the stream
/// cannot make it re-stream the whole initial state in a loop.
#[tokio::test]
async fn a_stream_closed_before_the_end_bookmark_falls_back_to_list_and_watch() {
    let server = TestServer::start().await;
    let api = kube::Api::namespaced(server.client(), "default");
    for n in ["a", "b"] {
        create(&api, n, "1").await;
    }
    // One initial ADDED event, then a clean close: not a very short watch.
    server.faults().next_watch(kcache_testserver::WatchFault::CloseAfter(1));
    let h = Harness::start(server, |r| r);
    // The fake clock never moves here: the fallback does not wait for a backoff.
    h.store.wait_until("synced", |s| s.names() == ["a", "b"]).await;
    match &h.store.ops()[..] {
        [Op::Replace(names, _), ..] => assert_eq!(names, &["a", "b"], "the half-read stream was applied"),
        other => panic!("the first op must be the list's replace, got {other:?}"),
    }
    create(&h.api, "c", "1").await;
    h.store.wait_until("live event on the fallback watch", |s| s.names() == ["a", "b", "c"]).await;
    assert_eq!(h.requests(Verb::List).len(), 1, "one fallback LIST");
    let watches = h.requests(Verb::Watch);
    assert_eq!(watches.len(), 2, "{watches:?}");
    assert_eq!(watches[0].query_param("sendInitialEvents").as_deref(), Some("true"), "{:?}", watches[0]);
    assert!(watches[1].query_param("sendInitialEvents").is_none(), "{:?}", watches[1]);
    h.stop().await;
}

/// A watch-list computes each object's key once: the reflector keys its temporary store and
/// hands the keys on at the bookmark (`ReflectorStore::replace_keyed`) to an in-order FIFO with
/// the same key function, which queues the objects under them, in the order the initial events
/// arrived. Mirrors client-go reflector.go `watchList` (`temporaryStore.Add` per initial event,
/// then `syncWith(temporaryStore.List())` into the FIFO); client-go's FIFO keys every object a
/// second time, and its temporary store lists them in map order.
#[tokio::test]
async fn keys_are_computed_once_and_handed_on_in_arrival_order() {
    use std::sync::{Arc, Mutex};

    use kcache_delta_fifo::{Deltas, FifoError, FifoExt, RealFifo, RealFifoOptions};

    let server = TestServer::start().await;
    let api = kube::Api::namespaced(server.client(), "default");
    // Created out of name order; 40 objects, so that a map's order is not arrival order.
    let names: Vec<String> = (0..40).map(|i| format!("cm-{:02}", (i * 17) % 40)).collect();
    for n in &names {
        create(&api, n, "1").await;
    }
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let record = Arc::clone(&seen);
    let kf = kcache_store::key_func(move |o: &ConfigMap| {
        let key = format!("default/{}", o.metadata.name.as_deref().unwrap_or_default());
        record.lock().unwrap().push(key.clone());
        Ok(key)
    });
    let known = Arc::new(kcache_store::Store::new(kf.clone()));
    let fifo = Arc::new(RealFifo::new(RealFifoOptions::new(kf.clone(), known)));
    let lw = ApiListerWatcher::new(api.clone());
    let cancel = tokio_util::sync::CancellationToken::new();
    let reflector = kcache_reflector::Reflector::new(lw, Arc::clone(&fifo)).key_func(kf);
    let task = tokio::spawn(reflector.run(cancel.clone()));

    let mut queued = Vec::new();
    let pop = fifo.pop(|d: Deltas<ConfigMap>, _| {
        queued = (0..d.len()).map(|i| d.key_at(i).map(|k| k.to_string()).unwrap_or_default()).collect();
        Ok::<_, FifoError>(())
    });
    tokio::time::timeout(Duration::from_secs(10), pop).await.expect("synced").unwrap();
    cancel.cancel();
    task.await.unwrap();

    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), names.len(), "one key function call per object: {seen:?}");
    assert_eq!(queued, seen, "queued under the keys computed, in arrival order");
}
