//! Relisting: 410 on a watch relists (missed deletes disappear), 410 on a list retries at once
//! from "" (so does "too large resource version"), an expired continue token leads to one full list,
//! watch InternalErrors are retried only within their window (client-go reflector_test.go
//! `TestReflectorExpiredRelist...`, `TestReflectorFullListIfExpired`, `TestReflectorFullListIfTooLarge`,
//! `TestReflectorExpiredExactResourceVersion`, `TestRetryInternalError`,
//! `TestReflectorReplacesStoreOnUnsafeDelete`, pager_test.go). A failed LIST never changes the
//! store, and a paginated list keeps its first page's resource version (client-go's pager).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_reflector::{
    ApiListerWatcher, ErrorKind, ListOptions, ListPage, ListerWatcher, WatchOptions, WatchStream,
};
use kcache_testserver::{Faults, RequestFault, TestServer, Verb, WatchFault};

use crate::common::{Harness, Op, create, delete, raw_frames};

/// A watch ended by 410 Expired is logged at debug (not passed to the watch error handler: a
/// watch that ends is no `ListAndWatch` error in client-go), and after the backoff the reflector
/// relists at its last resource version (not from "": reflector.go's "Don't set
/// LastSyncResourceVersionUnavailable"), unpaginated so the server may
/// answer from its watch cache. A delete missed in between is gone from the store. Mirrors
/// client-go reflector_test.go `TestReflectorResyncWithResourceVersion` (the relist is at the last
/// synced version, not "0") and `TestReflectorNotPaginatingNotConsistentReads` (a list at a
/// specific version is not paginated).
#[tokio::test]
async fn expired_watch_relists_and_drops_missed_deletes() {
    let server = TestServer::start().await;
    let api = kube::Api::namespaced(server.client(), "default");
    create(&api, "a", "1").await;
    create(&api, "b", "1").await;
    server.faults().next_watch(WatchFault::Error {
        after: 0,
        code: 410,
        reason: "Expired".into(),
        message: "too old resource version: 1 (2)".into(),
    });
    let h = Harness::start(server, |r| r.use_watch_list(false));
    h.ended.wait_for(ErrorKind::Expired).await;
    let list_rv = h.handle.last_sync_resource_version();
    delete(&h.api, "b").await;

    let sleeps = h.clock.wait_for_sleepers(1).await;
    assert!(sleeps[0].as_secs_f64() >= 0.8 && sleeps[0].as_secs_f64() < 1.6, "{sleeps:?}");
    assert!(h.errors.kinds().is_empty(), "{:?}", h.errors.kinds());
    h.clock.advance(sleeps[0]);
    h.store
        .wait_until("relist", |s| s.ops().iter().filter(|o| matches!(o, Op::Replace(..))).count() == 2)
        .await;
    assert_eq!(h.store.names(), ["a"]);
    let lists = h.requests(Verb::List);
    assert_eq!(lists[1].query_param("resourceVersion"), Some(list_rv));
    assert_eq!(lists[1].query_param("limit"), None, "relist at a known version is unpaginated");
    h.stop().await;
}

/// A LIST failing with 410 is retried at once (no backoff, no error reported) from "".
#[tokio::test]
async fn expired_list_is_retried_at_once_from_empty() {
    let server = TestServer::start().await;
    let api = kube::Api::namespaced(server.client(), "default");
    create(&api, "a", "1").await;
    server.faults().fail_requests(1, RequestFault::gone().verb(Verb::List));
    let h = Harness::start(server, |r| r.use_watch_list(false));
    h.store.wait_until("synced", |s| s.names() == ["a"]).await;
    let lists = h.requests(Verb::List);
    assert_eq!(lists.len(), 2);
    assert_eq!(lists[0].status, 410);
    assert_eq!(lists[0].query_param("resourceVersion").as_deref(), Some("0"));
    assert_eq!(lists[1].query_param("resourceVersion"), None, "retried from \"\"");
    assert_eq!(lists[1].query_param("limit").as_deref(), Some("500"));
    assert!(h.errors.kinds().is_empty(), "{:?}", h.errors.kinds());
    h.stop().await;
}

/// A relist answered `200 OK` with a 410 `Status` body (as some aggregated API servers and
/// proxies answer) is that 410, as client-go's `Result.Into` makes it: retried at once from "",
/// never applied as an empty list that would wipe the store.
#[tokio::test]
async fn a_status_body_with_a_success_code_is_its_error() {
    let h = synced_then_expired(&["a"]).await;
    h.server.faults().fail_requests(1, RequestFault::gone().verb(Verb::List).answered_with(200));
    let d = h.clock.wait_for_sleepers(1).await[0];
    h.clock.advance(d);
    h.store
        .wait_until("relisted", |s| s.ops().iter().filter(|o| matches!(o, Op::Replace(..))).count() == 2)
        .await;
    let lists = h.requests(Verb::List);
    assert_eq!(lists.len(), 3);
    assert_eq!(lists[1].status, 200, "the Status came with a success code");
    assert_eq!(lists[2].query_param("resourceVersion"), None, "retried at once from \"\"");
    assert!(
        h.store.ops().iter().all(|o| !matches!(o, Op::Replace(items, _) if items.is_empty())),
        "{:?}",
        h.store.ops()
    );
    assert_eq!(h.store.names(), ["a"]);
    h.stop().await;
}

/// Compacts the server's history right before the first continuation page is requested, so the
/// continue token is too old. Lists at "0" go to the server as consistent reads ("") so that it
/// paginates (it answers "0" from its cache, unpaginated, like kube-apiserver's watch cache).
struct CompactBeforeSecondPage {
    inner: ApiListerWatcher<ConfigMap>,
    faults: Faults,
    objects: kcache_testserver::Objects,
    done: Arc<AtomicBool>,
    /// What the reflector asked for, before "0" is rewritten.
    asked: Arc<Mutex<Vec<ListOptions>>>,
}

impl ListerWatcher<ConfigMap> for CompactBeforeSecondPage {
    fn list(
        &self,
        mut opts: ListOptions,
    ) -> BoxFuture<'static, kcache_reflector::Result<ListPage<ConfigMap>>> {
        self.asked.lock().unwrap().push(opts.clone());
        if opts.resource_version == "0" {
            opts.resource_version.clear();
        }
        if opts.continue_token.is_some() && !self.done.swap(true, Ordering::SeqCst) {
            // A write elsewhere moves the server past the token's version; compaction then drops
            // the history the token points into.
            let other = serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "elsewhere", "namespace": "other"},
            });
            self.objects.upsert("", "v1", "configmaps", other).expect("direct write");
            self.faults.compact();
        }
        self.inner.list(opts)
    }

    fn watch(
        &self,
        opts: WatchOptions,
    ) -> BoxFuture<'static, kcache_reflector::Result<WatchStream<ConfigMap>>> {
        self.inner.watch(opts).boxed()
    }
}

/// Mirrors client-go's pager `FullListIfExpired`: an expired continue token leads to one full,
/// unpaginated list at the original resource version.
#[tokio::test]
async fn expired_continue_token_leads_to_one_full_list() {
    let server = TestServer::start().await;
    let api = kube::Api::namespaced(server.client(), "default");
    for n in ["a", "b", "c", "d", "e"] {
        create(&api, n, "1").await;
    }
    // Updates after the creates, so compaction leaves the first page's version behind.
    crate::common::update(&api, "a", "2").await;
    let lw = CompactBeforeSecondPage {
        inner: ApiListerWatcher::new(api),
        faults: server.faults(),
        objects: server.objects(),
        done: Arc::default(),
        asked: Arc::default(),
    };
    let asked = Arc::clone(&lw.asked);
    let h = Harness::start_with(server, lw, |r| r.use_watch_list(false).page_size(2));
    h.store.wait_until("synced", |s| s.names().len() == 5).await;
    let lists = h.requests(Verb::List);
    assert_eq!(lists.len(), 3, "{lists:#?}");
    assert_eq!(lists[0].query_param("limit").as_deref(), Some("2"));
    assert!(lists[1].query_param("continue").is_some());
    assert_eq!(lists[1].status, 410);
    assert_eq!(lists[2].query_param("limit"), None, "the fallback is one full list");
    assert_eq!(lists[2].query_param("continue"), None);
    assert_eq!(lists[2].query_param("resourceVersion"), lists[0].query_param("resourceVersion"));
    // What the reflector asked for, before the wrapper's rewrite: the full list is at the
    // original "0", not at "" and not at the server's newer version.
    let asked = asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 3, "{asked:#?}");
    assert_eq!(
        asked[0],
        ListOptions {
            resource_version: "0".into(),
            limit: Some(2),
            continue_token: None,
            shard_selector: None
        }
    );
    assert_eq!(asked[1].resource_version, "0");
    assert!(asked[1].continue_token.is_some());
    assert_eq!(
        asked[2],
        ListOptions { resource_version: "0".into(), limit: None, continue_token: None, shard_selector: None }
    );
    h.stop().await;
}

/// Imitates a server without a watch cache: a list at "0" is served as a consistent read, and
/// every page holds at most 2 items (as a server may return fewer than `limit`).
struct NoWatchCache(ApiListerWatcher<ConfigMap>);

impl ListerWatcher<ConfigMap> for NoWatchCache {
    fn list(
        &self,
        mut opts: ListOptions,
    ) -> BoxFuture<'static, kcache_reflector::Result<ListPage<ConfigMap>>> {
        if opts.resource_version == "0" {
            opts.resource_version.clear();
        }
        opts.limit = opts.limit.map(|l| l.min(2));
        self.0.list(opts)
    }

    fn watch(
        &self,
        opts: WatchOptions,
    ) -> BoxFuture<'static, kcache_reflector::Result<WatchStream<ConfigMap>>> {
        self.0.watch(opts)
    }
}

/// The pager learns from a paginated answer to the list at "0" that the server has no watch
/// cache, and keeps paginating later relists, even at a specific resource version (where it would
/// otherwise switch paging off). Mirrors client-go reflector_test.go
/// `TestReflectorPaginatingNonConsistentReadsIfWatchCacheDisabled`.
#[tokio::test]
async fn paginated_answer_at_zero_keeps_paging() {
    let server = TestServer::start().await;
    let api = kube::Api::namespaced(server.client(), "default");
    for i in 0..5 {
        create(&api, &format!("o{i}"), "1").await;
    }
    server.faults().next_watch(WatchFault::Error {
        after: 0,
        code: 410,
        reason: "Expired".into(),
        message: "too old".into(),
    });
    let h =
        Harness::start_with(server, NoWatchCache(ApiListerWatcher::new(api)), |r| r.use_watch_list(false));
    h.ended.wait_for(ErrorKind::Expired).await;
    let first_pages = h.requests(Verb::List).len();
    assert_eq!(first_pages, 3, "5 objects in pages of 2");
    let d = h.clock.wait_for_sleepers(1).await[0];
    h.clock.advance(d);
    h.store
        .wait_until("relist", |s| s.ops().iter().filter(|o| matches!(o, Op::Replace(..))).count() == 2)
        .await;
    let lists = h.requests(Verb::List);
    let relist = &lists[first_pages];
    assert!(relist.query_param("resourceVersion").is_some_and(|rv| rv != "0" && !rv.is_empty()));
    assert!(relist.query_param("limit").is_some(), "still paginating after learning the server pages");
    assert_eq!(h.store.names().len(), 5);
    h.stop().await;
}

/// A 504 "too large resource version" in the shape one API server generation sends it.
fn too_large(variant: usize) -> kube::core::Status {
    use kube::core::response::{StatusCause, StatusDetails};
    let cause = |reason: &str, message: &str| StatusDetails {
        name: String::new(),
        group: String::new(),
        kind: String::new(),
        uid: String::new(),
        causes: vec![StatusCause { reason: reason.into(), message: message.into(), field: String::new() }],
        retry_after_seconds: 1,
    };
    let (message, details) = match variant {
        // 1.18.6 and later: the cause's type (JSON `reason`) says it.
        0 => ("Timeout: request did not complete", Some(cause("ResourceVersionTooLarge", ""))),
        // 1.17.0 to 1.18.5: only the cause's message says it.
        1 => ("Timeout: request did not complete", Some(cause("", "Too large resource version"))),
        // Before 1.17.0: only the Status message says it (the details hold only the retry
        // delay, as `NewTimeoutError` sets them; client-go requires details to be present).
        _ => (
            "Timeout: Too large resource version",
            Some(StatusDetails { causes: Vec::new(), ..cause("", "") }),
        ),
    };
    let mut status = kube::core::Status::failure(message, "Timeout");
    status.code = 504;
    status.details = details;
    status
}

/// Answers a LIST at a specific resource version with the next queued "too large resource
/// version" error (a lagging API server behind the one the reflector last synced from), and
/// records every LIST's resource version.
struct TooLargeOnRelist {
    inner: ApiListerWatcher<ConfigMap>,
    variants: std::sync::Mutex<std::collections::VecDeque<usize>>,
    list_rvs: Arc<std::sync::Mutex<Vec<String>>>,
}

impl ListerWatcher<ConfigMap> for TooLargeOnRelist {
    fn list(&self, opts: ListOptions) -> BoxFuture<'static, kcache_reflector::Result<ListPage<ConfigMap>>> {
        self.list_rvs.lock().unwrap().push(opts.resource_version.clone());
        let specific = !opts.resource_version.is_empty() && opts.resource_version != "0";
        if specific && let Some(variant) = self.variants.lock().unwrap().pop_front() {
            let err = kcache_reflector::ReflectorError::from_status(too_large(variant), Some(504), None);
            return futures::future::ready(Err(err)).boxed();
        }
        self.inner.list(opts)
    }

    fn watch(
        &self,
        opts: WatchOptions,
    ) -> BoxFuture<'static, kcache_reflector::Result<WatchStream<ConfigMap>>> {
        self.inner.watch(opts)
    }
}

/// Mirrors client-go's `TestReflectorFullListIfTooLarge`: a relist at the last synced version
/// that the server answers with "too large resource version" (in each of the three formats API
/// servers have used) is retried at once from "", without backoff and without reporting an error.
/// The LIST versions are "0", then for each relist the last version followed by "".
#[tokio::test]
async fn too_large_resource_version_on_relist_retries_from_empty() {
    let server = TestServer::start().await;
    let api = kube::Api::namespaced(server.client(), "default");
    create(&api, "a", "1").await;
    for _ in 0..3 {
        server.faults().next_watch(WatchFault::Error {
            after: 0,
            code: 410,
            reason: "Expired".into(),
            message: "too old".into(),
        });
    }
    let list_rvs = Arc::new(std::sync::Mutex::new(Vec::new()));
    let lw = TooLargeOnRelist {
        inner: ApiListerWatcher::new(api),
        variants: std::sync::Mutex::new([0, 1, 2].into()),
        list_rvs: Arc::clone(&list_rvs),
    };
    let h = Harness::start_with(server, lw, |r| r.use_watch_list(false));
    for n in 1..=3 {
        h.ended.wait_for_count(n).await;
        let d = h.clock.wait_for_sleepers(1).await[0];
        h.clock.advance(d);
        h.store
            .wait_until("relisted", |s| s.ops().iter().filter(|o| matches!(o, Op::Replace(..))).count() > n)
            .await;
    }
    let rv = h.requests(Verb::List)[0].query_param("resourceVersion");
    assert_eq!(rv.as_deref(), Some("0"));
    let synced = h.store.store.last_sync_resource_version();
    let got = list_rvs.lock().unwrap().clone();
    let want: Vec<String> = ["0", &synced, "", &synced, "", &synced, ""].map(String::from).into();
    assert_eq!(got, want);
    assert_eq!(h.store.names(), ["a"]);
    assert_eq!(h.ended.kinds(), [ErrorKind::Expired; 3]);
    assert!(
        h.errors.kinds().is_empty(),
        "neither the watches' 410 nor the too-large LISTs: {:?}",
        h.errors.kinds()
    );
    assert!(!h.handle.is_last_sync_resource_version_unavailable(), "cleared by the successful list");
    h.stop().await;
}

/// The watch side of `TestReflectorFullListIfTooLarge`: a watch refused with "too large resource
/// version" is reported and, after backoff, followed by a relist (as any non-retriable watch
/// error in client-go's `watch` loop).
#[tokio::test]
async fn too_large_resource_version_on_watch_relists() {
    let server = TestServer::start().await;
    let api = kube::Api::namespaced(server.client(), "default");
    create(&api, "a", "1").await;
    // Before 1.17.0's shape: only the message says it, and the details carry the retry delay.
    let mut fault =
        RequestFault::status(504, "Timeout", "Timeout: Too large resource version: 99, current: 1")
            .verb(Verb::Watch);
    fault.retry_after = Some(1);
    server.faults().fail_requests(1, fault);
    let h = Harness::start(server, |r| r.use_watch_list(false));
    h.errors.wait_for(ErrorKind::TooLargeResourceVersion).await;
    create(&h.api, "b", "1").await; // missed: no watch is open
    let d = h.clock.wait_for_sleepers(1).await[0];
    assert!(d.as_secs_f64() < 1.6, "backoff first: {d:?}");
    h.clock.advance(d);
    h.store.wait_until("relisted", |s| s.names() == ["a", "b"]).await;
    assert_eq!(h.requests(Verb::List).len(), 2);
    assert_eq!(h.errors.kinds(), [ErrorKind::TooLargeResourceVersion]);
    h.stop().await;
}

/// The other side of client-go's `isTooLargeResourceVersionError` (reflector.go): the words "Too
/// large resource version" make the error only in a timeout that has details (or in a cause of
/// type `ResourceVersionTooLarge`). A relist answered with a 500 InternalError saying them, or
/// with a 504 Timeout saying them but without details, is an ordinary failed LIST: reported to
/// the watch error handler (unlike the watch's 410 before it), retried after backoff at the same
/// resource version, never at once from "".
#[tokio::test]
async fn too_large_words_in_another_error_are_not_too_large_resource_version() {
    let cases = [
        (500, "InternalError", "Too large resource version", ErrorKind::InternalError),
        (504, "Timeout", "Timeout: Too large resource version", ErrorKind::Server),
    ];
    for (code, reason, message, kind) in cases {
        let server = TestServer::start().await;
        let api = kube::Api::namespaced(server.client(), "default");
        create(&api, "a", "1").await;
        server.faults().next_watch(WatchFault::Error {
            after: 0,
            code: 410,
            reason: "Expired".into(),
            message: "too old".into(),
        });
        let h = Harness::start(server, |r| r.use_watch_list(false));
        h.ended.wait_for(ErrorKind::Expired).await;
        let synced = h.handle.last_sync_resource_version();
        h.server.faults().fail_requests(1, RequestFault::status(code, reason, message).verb(Verb::List));
        let d = h.clock.wait_for_sleepers(1).await[0];
        h.clock.advance(d);
        h.errors.wait_for_count(1).await;
        assert_eq!(h.errors.kinds(), [kind], "{message}");
        assert!(!h.handle.is_last_sync_resource_version_unavailable(), "{message}");
        create(&h.api, "b", "1").await;
        let d = h.clock.wait_for_sleepers(1).await[0];
        h.clock.advance(d);
        h.store.wait_until("relisted", |s| s.names() == ["a", "b"]).await;
        let lists = h.requests(Verb::List);
        let rvs: Vec<_> = lists.iter().map(|r| r.query_param("resourceVersion")).collect();
        assert_eq!(rvs, [Some("0".to_owned()), Some(synced.clone()), Some(synced)], "{message}");
        assert_eq!(lists[1].status, code);
        h.stop().await;
    }
}

/// Mirrors client-go's `TestReflectorExpiredExactResourceVersion`: a server without a watch cache
/// (Kubernetes 1.16 and earlier) answers a relist at an exact, compacted resource version with
/// 410; the reflector retries at once from "", without reporting it (nor the watch's 410 that
/// led to the relist). LIST versions: "0", the last synced one, "".
#[tokio::test]
async fn expired_relist_at_exact_version_retries_from_empty() {
    let server = TestServer::start().await;
    let api = kube::Api::namespaced(server.client(), "default");
    create(&api, "a", "1").await;
    server.faults().next_watch(WatchFault::Error {
        after: 0,
        code: 410,
        reason: "Expired".into(),
        message: "too old".into(),
    });
    let h = Harness::start(server, |r| r.use_watch_list(false));
    h.ended.wait_for(ErrorKind::Expired).await;
    let synced = h.handle.last_sync_resource_version();
    h.server.faults().fail_requests(1, RequestFault::gone().verb(Verb::List));
    create(&h.api, "b", "1").await;
    let d = h.clock.wait_for_sleepers(1).await[0];
    h.clock.advance(d);
    h.store.wait_until("relisted from \"\"", |s| s.names() == ["a", "b"]).await;
    let lists = h.requests(Verb::List);
    let rvs: Vec<_> = lists.iter().map(|r| r.query_param("resourceVersion")).collect();
    assert_eq!(rvs, [Some("0".to_owned()), Some(synced), None]);
    assert_eq!(lists[1].status, 410);
    // client-go retries with the same pager, whose paging was switched off for the specific version.
    assert_eq!(lists[2].query_param("limit"), None);
    assert!(h.errors.kinds().is_empty(), "nothing is reported: {:?}", h.errors.kinds());
    h.stop().await;
}

/// Mirrors client-go's `TestReflectorWatchListPageSize`: an explicit page size paginates even a
/// relist at a specific resource version (where the default pager would list unpaginated), and
/// continuation pages carry only the token.
#[tokio::test]
async fn explicit_page_size_paginates_a_relist_at_a_specific_version() {
    let server = TestServer::start().await;
    let api = kube::Api::namespaced(server.client(), "default");
    for i in 0..5 {
        create(&api, &format!("o{i}"), "1").await;
    }
    server.faults().next_watch(WatchFault::Error {
        after: 0,
        code: 410,
        reason: "Expired".into(),
        message: "too old".into(),
    });
    let h = Harness::start(server, |r| r.use_watch_list(false).page_size(2));
    h.ended.wait_for(ErrorKind::Expired).await;
    let synced = h.handle.last_sync_resource_version();
    let first = h.requests(Verb::List).len();
    let d = h.clock.wait_for_sleepers(1).await[0];
    h.clock.advance(d);
    h.store
        .wait_until("relist", |s| s.ops().iter().filter(|o| matches!(o, Op::Replace(..))).count() == 2)
        .await;
    let lists = h.requests(Verb::List);
    let relist = &lists[first..];
    assert_eq!(relist.len(), 3, "5 objects in pages of 2: {relist:#?}");
    assert_eq!(relist[0].query_param("resourceVersion"), Some(synced));
    assert!(relist.iter().all(|r| r.query_param("limit").as_deref() == Some("2")));
    for page in &relist[1..] {
        assert!(page.query_param("continue").is_some());
        assert_eq!(page.query_param("resourceVersion"), None, "the token pins the version");
    }
    assert_eq!(h.store.names().len(), 5);
    h.stop().await;
}

/// Watches that each fail with one InternalError ERROR event; every `watch` call moves the fake
/// clock one second (and, at call `rewind_at`, one more minute first), as client-go's
/// `TestRetryInternalError` does from its `WatchFunc`.
struct InternalErrorWatches {
    clock: kcache_reflector::FakeClock,
    calls: Arc<std::sync::atomic::AtomicUsize>,
    rewind_at: usize,
}

impl ListerWatcher<ConfigMap> for InternalErrorWatches {
    fn list(&self, _: ListOptions) -> BoxFuture<'static, kcache_reflector::Result<ListPage<ConfigMap>>> {
        let page = ListPage {
            items: Vec::new(),
            resource_version: "1".into(),
            continue_token: None,
            shard_info: None,
        };
        futures::future::ready(Ok(page)).boxed()
    }

    fn watch(&self, _: WatchOptions) -> BoxFuture<'static, kcache_reflector::Result<WatchStream<ConfigMap>>> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if n == self.rewind_at {
            self.clock.advance(std::time::Duration::from_secs(60));
        }
        self.clock.advance(std::time::Duration::from_secs(1));
        let mut status =
            kube::core::Status::failure("Internal error occurred: etcdserver: no leader", "InternalError");
        status.code = 500;
        let events: Vec<kcache_reflector::Result<_>> =
            vec![Ok(kcache_reflector::WatchEvent::Error(Box::new(status)))];
        let stream: WatchStream<ConfigMap> = futures::StreamExt::boxed(futures::stream::iter(events));
        futures::future::ready(Ok(stream)).boxed()
    }
}

/// Mirrors client-go's `TestRetryInternalError`: with `max_internal_error_retry_duration` zero a
/// watch InternalError relists at once; with 30 s, watches failing a second apart are retried
/// without relisting for 30 s after the first failure (31 retries); a minute without failures
/// starts a new 30 s window (40 retries when the gap comes at the 10th watch).
#[tokio::test]
async fn internal_errors_are_retried_within_the_max_duration() {
    for (max_secs, rewind_at, want_retries) in [(0, 0, 0), (30, 0, 31), (30, 10, 40)] {
        let server = TestServer::start().await;
        let clock = kcache_reflector::FakeClock::new();
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let lw = InternalErrorWatches { clock: clock.clone(), calls: Arc::clone(&calls), rewind_at };
        let config = kcache_reflector::ReflectorConfig {
            use_watch_list: false,
            max_internal_error_retry_duration: std::time::Duration::from_secs(max_secs),
            ..Default::default()
        };
        let h = Harness::start_with_clock(server, lw, clock, move |r| r.config(config));
        // Retries re-watch at once; the first sleep is the backoff after the error given up on,
        // before the relist, so the count of watches is final.
        h.clock.wait_for_sleepers(1).await;
        let retries = calls.load(Ordering::SeqCst) - 1;
        assert_eq!(retries, want_retries, "max {max_secs}s, rewind at {rewind_at}");
        assert_eq!(h.ended.kinds(), vec![ErrorKind::InternalError; retries + 1]);
        assert!(h.errors.kinds().is_empty(), "a watch that ended is not reported: {:?}", h.errors.kinds());
        h.stop().await;
    }
}

/// Mirrors client-go's `TestReflectorReplacesStoreOnUnsafeDelete`: a corrupt object is deleted
/// unsafely on the server, whose watch then sends, instead of a DELETED event, an ERROR with code
/// 500 and reason `StoreReadError`. That is not an InternalError to retry in place (apimachinery
/// knows the reason), so even with internal-error retries on the reflector relists: the corrupt
/// object leaves the store, the objects that were there before stay, and the resource version is
/// the relist's.
#[tokio::test]
async fn store_read_error_relists_even_with_internal_error_retries() {
    let server = TestServer::start().await;
    let api = kube::Api::namespaced(server.client(), "default");
    for n in ["foo-1", "foo-2", "foo-3"] {
        create(&api, n, "1").await;
    }
    server.faults().next_watch(raw_frames(
        1,
        r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","code":500,"reason":"StoreReadError","message":"failed to prepare current and previous objects: corrupt object has been deleted"}}"#,
    ));
    let config = kcache_reflector::ReflectorConfig {
        use_watch_list: false,
        max_internal_error_retry_duration: std::time::Duration::from_secs(30),
        ..Default::default()
    };
    let h = Harness::start(server, move |r| r.config(config));
    h.store.wait_until("synced", |s| s.names().len() == 3).await;
    create(&h.api, "corrupt", "1").await;
    h.ended.wait_for(ErrorKind::InternalError).await;
    assert!(h.store.names().contains(&"corrupt".to_owned()));
    delete(&h.api, "corrupt").await; // the unsafe delete, never seen as an event
    let d = h.clock.wait_for_sleepers(1).await[0];
    h.clock.advance(d);
    h.store
        .wait_until("relisted", |s| s.ops().iter().filter(|o| matches!(o, Op::Replace(..))).count() == 2)
        .await;
    assert_eq!(h.store.names(), ["foo-1", "foo-2", "foo-3"]);
    assert_eq!(h.requests(Verb::List).len(), 2);
    assert_eq!(h.requests(Verb::Watch).len(), 1, "no re-watch in place");
    let relist_rv = h.store.ops().iter().rev().find_map(|o| match o {
        Op::Replace(_, rv) => Some(rv.clone()),
        _ => None,
    });
    assert_eq!(Some(h.handle.last_sync_resource_version()), relist_rv);
    h.stop().await;
}

/// A failed LIST leaves the store as it was, whatever the failure: a 404 on a relist (a custom
/// resource's definition being recreated, say) is reported and retried after backoff, never
/// applied as an empty list. client-go's `Reflector.list` returns the error without touching the
/// store.
#[tokio::test]
async fn a_failed_relist_leaves_the_store_as_it_was() {
    let h = synced_then_expired(&["a", "b"]).await;
    h.server.faults().fail_requests(
        1,
        RequestFault::status(404, "NotFound", "the server could not find the requested resource")
            .verb(Verb::List),
    );
    let d = h.clock.wait_for_sleepers(1).await[0];
    h.clock.advance(d);
    h.errors.wait_for(ErrorKind::NotFound).await;
    assert_eq!(h.store.names(), ["a", "b"]);
    let replaces = h.store.ops().iter().filter(|o| matches!(o, Op::Replace(..))).count();
    assert_eq!(replaces, 1, "only the first list was applied: {:?}", h.store.ops());
    // After the backoff the next relist succeeds.
    let d = h.clock.wait_for_sleepers(1).await[0];
    h.clock.advance(d);
    h.store
        .wait_until("relisted", |s| s.ops().iter().filter(|o| matches!(o, Op::Replace(..))).count() == 2)
        .await;
    assert_eq!(h.store.names(), ["a", "b"]);
    h.stop().await;
}

/// A first LIST answered 404 syncs nothing: no replace reaches the store (so nothing waiting for
/// the cache believes it synced), the error is reported, and the list is retried after backoff.
#[tokio::test]
async fn a_404_on_the_first_list_syncs_nothing() {
    let server = TestServer::start().await;
    let api = kube::Api::namespaced(server.client(), "default");
    create(&api, "a", "1").await;
    server.faults().fail_requests(
        1,
        RequestFault::status(404, "NotFound", "the server could not find the requested resource")
            .verb(Verb::List),
    );
    let h = Harness::start(server, |r| r.use_watch_list(false));
    h.errors.wait_for(ErrorKind::NotFound).await;
    let d = h.clock.wait_for_sleepers(1).await[0];
    assert!(h.store.ops().is_empty(), "{:?}", h.store.ops());
    assert_eq!(h.handle.last_sync_resource_version(), "");
    h.clock.advance(d);
    h.store.wait_until("synced", |s| s.names() == ["a"]).await;
    let lists = h.requests(Verb::List);
    assert_eq!(lists.len(), 2);
    assert_eq!(lists[1].query_param("resourceVersion").as_deref(), Some("0"), "still the first list");
    h.stop().await;
}

/// A lister-watcher whose LISTs the function answers and whose watches never end.
struct ListsOnly<F>(F);

impl<F> ListerWatcher<ConfigMap> for ListsOnly<F>
where
    F: Fn(ListOptions) -> kcache_reflector::Result<ListPage<ConfigMap>> + Send + Sync + 'static,
{
    fn list(&self, opts: ListOptions) -> BoxFuture<'static, kcache_reflector::Result<ListPage<ConfigMap>>> {
        let answer = (self.0)(opts);
        async move { answer }.boxed()
    }

    fn watch(
        &self,
        _opts: WatchOptions,
    ) -> BoxFuture<'static, kcache_reflector::Result<WatchStream<ConfigMap>>> {
        async { Ok(futures::StreamExt::boxed(futures::stream::pending())) }.boxed()
    }
}

/// Answers the first LIST page at resource version 10 with a continue token and the second at
/// 20 (as an aggregated server reading each page afresh might).
fn pages_at_two_versions(opts: ListOptions) -> kcache_reflector::Result<ListPage<ConfigMap>> {
    Ok(match opts.continue_token {
        None => ListPage {
            items: vec![Arc::new(crate::common::cm_at("a", "10"))],
            resource_version: "10".into(),
            continue_token: Some("next".into()),
            shard_info: None,
        },
        Some(_) => ListPage {
            items: vec![Arc::new(crate::common::cm_at("b", "11"))],
            resource_version: "20".into(),
            continue_token: None,
            shard_info: None,
        },
    })
}

/// A paginated list's resource version is its first page's, as client-go's pager (`ListPager.list`
/// sets it once, from the first page) has it: the watch that follows must not start after changes
/// the first page did not include.
#[tokio::test]
async fn a_paginated_list_takes_its_first_pages_resource_version() {
    let server = TestServer::start().await;
    let h = Harness::start_with(server, ListsOnly(pages_at_two_versions), |r| r.use_watch_list(false));
    h.store.wait_until("synced", |s| s.names() == ["a", "b"]).await;
    assert_eq!(h.store.ops()[0], Op::Replace(vec!["a".into(), "b".into()], "10".into()));
    assert_eq!(h.handle.last_sync_resource_version(), "10");
    h.stop().await;
}

/// A reflector (LIST + WATCH) synced to `names`, whose first watch then ended with 410 Expired:
/// it is backing off before its relist.
async fn synced_then_expired(names: &[&str]) -> Harness {
    let server = TestServer::start().await;
    let api = kube::Api::namespaced(server.client(), "default");
    for name in names {
        create(&api, name, "1").await;
    }
    server.faults().next_watch(WatchFault::Error {
        after: 0,
        code: 410,
        reason: "Expired".into(),
        message: "too old".into(),
    });
    let h = Harness::start(server, |r| r.use_watch_list(false));
    h.store.wait_until("synced", |s| s.names() == names).await;
    h.ended.wait_for(ErrorKind::Expired).await;
    h
}

/// Paginates the first LIST (at "0"), answers its continuation page with a 410 whose reason is
/// `reason`, and answers any other LIST with both objects at resource version 20, in one page.
/// Records in `asked` what the reflector asked for.
fn continuation_gone(
    reason: &'static str,
    asked: Arc<Mutex<Vec<ListOptions>>>,
) -> impl Fn(ListOptions) -> kcache_reflector::Result<ListPage<ConfigMap>> + Send + Sync + 'static {
    move |opts| {
        asked.lock().unwrap().push(opts.clone());
        if opts.continue_token.is_some() {
            let mut status = kube::core::Status::failure("continue token too old", reason);
            status.code = 410;
            Err(kcache_reflector::ReflectorError::from_status(status, Some(410), None))
        } else if opts.resource_version == "0" {
            Ok(ListPage {
                items: vec![Arc::new(crate::common::cm_at("a", "10"))],
                resource_version: "10".into(),
                continue_token: Some("next".into()),
                shard_info: None,
            })
        } else {
            Ok(ListPage {
                items: vec![
                    Arc::new(crate::common::cm_at("a", "10")),
                    Arc::new(crate::common::cm_at("b", "11")),
                ],
                resource_version: "20".into(),
                continue_token: None,
                shard_info: None,
            })
        }
    }
}

/// client-go's pager (`ListPager.list`) falls back to a full list only when a continuation page
/// fails with reason `Expired` (`errors.IsResourceExpired`). A 410 with reason `Gone` is returned
/// to the reflector instead, whose `list` sees an expired error (`isExpiredError`: Expired or
/// Gone) and retries at once from "", with the same page size. Mirrors the expired-continue
/// half of client-go reflector_test.go `TestReflectorFullListIfExpired`, with the other reason;
/// the `Expired` case is [`expired_continue_token_leads_to_one_full_list`].
#[tokio::test]
async fn a_gone_continue_token_relists_from_empty_not_a_full_list() {
    let server = TestServer::start().await;
    let asked = Arc::new(Mutex::new(Vec::new()));
    let lw = ListsOnly(continuation_gone("Gone", Arc::clone(&asked)));
    let h = Harness::start_with(server, lw, |r| r.use_watch_list(false).page_size(1));
    h.store.wait_until("synced", |s| s.names() == ["a", "b"]).await;
    let asked = asked.lock().unwrap().clone();
    let first = ListOptions {
        resource_version: "0".into(),
        limit: Some(1),
        continue_token: None,
        shard_selector: None,
    };
    assert_eq!(asked.len(), 3, "{asked:#?}");
    assert_eq!(asked[0], first);
    assert_eq!(asked[1].continue_token.as_deref(), Some("next"));
    assert_eq!(
        asked[2],
        ListOptions {
            resource_version: String::new(),
            limit: Some(1),
            continue_token: None,
            shard_selector: None
        }
    );
    assert_eq!(h.store.ops()[0], Op::Replace(vec!["a".into(), "b".into()], "20".into()));
    assert!(h.errors.kinds().is_empty(), "retried at once, not reported: {:?}", h.errors.kinds());
    assert!(!h.handle.is_last_sync_resource_version_unavailable(), "cleared by the successful list");
    h.stop().await;
}
