//! Relisting: 410 on a watch relists (missed deletes disappear), 410 on a list retries at once
//! from "", an expired continue token leads to one full list (client-go reflector_test.go
//! `TestReflectorExpiredRelist...`, `TestReflectorFullListIfExpired`, pager_test.go).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::{Harness, Op, create, delete};
use futures::FutureExt;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_reflector::{
    ApiListerWatcher, ErrorKind, ListOptions, ListPage, ListerWatcher, WatchOptions, WatchStream,
};
use kcache_testserver::{Faults, RequestFault, TestServer, Verb, WatchFault};

/// A watch ended by 410 Expired is reported (at debug by the default handler), and after the
/// backoff the reflector relists at its last resource version, unpaginated so the server may
/// answer from its watch cache. A delete missed in between is gone from the store.
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
    h.errors.wait_for(ErrorKind::Expired).await;
    let list_rv = h.handle.last_sync_resource_version();
    delete(&h.api, "b").await;

    let sleeps = h.clock.wait_for_sleepers(1).await;
    assert!(sleeps[0].as_secs_f64() >= 0.8 && sleeps[0].as_secs_f64() < 1.6, "{sleeps:?}");
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

/// Compacts the server's history right before the first continuation page is requested, so the
/// continue token is too old. Lists at "0" go to the server as consistent reads ("") so that it
/// paginates (it answers "0" from its cache, unpaginated, like kube-apiserver's watch cache).
struct CompactBeforeSecondPage {
    inner: ApiListerWatcher<ConfigMap>,
    faults: Faults,
    objects: kcache_testserver::Objects,
    done: Arc<AtomicBool>,
}

impl ListerWatcher<ConfigMap> for CompactBeforeSecondPage {
    fn list(
        &self,
        mut opts: ListOptions,
    ) -> BoxFuture<'static, kcache_reflector::Result<ListPage<ConfigMap>>> {
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
    common::update(&api, "a", "2").await;
    let lw = CompactBeforeSecondPage {
        inner: ApiListerWatcher::new(api),
        faults: server.faults(),
        objects: server.objects(),
        done: Arc::default(),
    };
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
/// otherwise switch paging off).
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
    h.errors.wait_for(ErrorKind::Expired).await;
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
