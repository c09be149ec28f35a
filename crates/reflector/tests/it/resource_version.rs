//! Earned resource versions: the reflector publishes a resource version only once it knows it is
//! past the synthetic ADDED events of a watch from "" or "0" (the seed's a@10, b@20, c@30 example;
//! client-go reflector_test.go `TestReflectorSetLastSyncResourceVersion...` family,
//! `TestReflectorResourceVersionUpdate`).

use futures::FutureExt;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_reflector::{ApiListerWatcher, ListOptions, ListPage, ListerWatcher, WatchOptions, WatchStream};
use kcache_testserver::{TestServer, Verb, WatchFault};

use crate::common::{Harness, Op, create};

/// Lists normally but reports an empty list resource version, so the following watch starts from
/// "" and begins with synthetic ADDED events (what a watch without a resume point gets).
struct NoListResourceVersion(ApiListerWatcher<ConfigMap>);

impl ListerWatcher<ConfigMap> for NoListResourceVersion {
    fn list(&self, opts: ListOptions) -> BoxFuture<'static, kcache_reflector::Result<ListPage<ConfigMap>>> {
        let inner = self.0.list(opts);
        async move {
            let mut page = inner.await?;
            page.resource_version.clear();
            Ok(page)
        }
        .boxed()
    }

    fn watch(
        &self,
        opts: WatchOptions,
    ) -> BoxFuture<'static, kcache_reflector::Result<WatchStream<ConfigMap>>> {
        self.0.watch(opts)
    }
}

/// The seed's example: objects a, b, c at increasing resource versions arrive as synthetic ADDED
/// events (not in resource-version order) on a watch from "". The watch drops right after them.
/// The next watch must not resume from c's version: nothing was earned, so it starts from "" again.
/// Once a BOOKMARK arrives, its version is published. Mirrors client-go reflector_watchlist_test.go
/// `TestWatchListResourceVersion` (ADDED events alone earn no version; the bookmark's is earned).
#[tokio::test]
async fn synthetic_adds_do_not_earn_a_resource_version() {
    let server = TestServer::start().await;
    let api = kube::Api::namespaced(server.client(), "default");
    create(&api, "a", "1").await;
    create(&api, "b", "1").await;
    let c_rv = create(&api, "c", "1").await;
    server.faults().next_watch(WatchFault::CloseAfter(3));
    let lw = NoListResourceVersion(ApiListerWatcher::new(api));
    let h = Harness::start_with(server, lw, |r| r.use_watch_list(false));

    // First watch: three synthetic ADDs, then the drop. Second watch: three ADDs and the bookmark.
    h.store
        .wait_until("two rounds of synthetic adds", |s| {
            s.ops().iter().filter(|o| matches!(o, Op::Add(_))).count() >= 6
                && s.ops().iter().any(|o| matches!(o, Op::ResourceVersion(_)))
        })
        .await;
    let watches = h.requests(Verb::Watch);
    assert_eq!(watches[0].query_param("resourceVersion"), None, "first watch from \"\"");
    assert_eq!(
        watches[1].query_param("resourceVersion"),
        None,
        "the second watch must not resume from an unearned version (c@{c_rv})"
    );
    // No resource version was published before the bookmark of the second watch.
    let ops = h.store.ops();
    let first_rv = ops.iter().position(|o| matches!(o, Op::ResourceVersion(_))).unwrap();
    assert_eq!(ops[..first_rv].iter().filter(|o| matches!(o, Op::Add(_))).count(), 6);
    let published: u64 = h.handle.last_sync_resource_version().parse().unwrap();
    assert!(published >= c_rv.parse::<u64>().unwrap());
    h.stop().await;
}

/// From a known resource version, every event's version is published at once, ADDED included.
#[tokio::test]
async fn known_start_publishes_every_event_at_once() {
    let server = TestServer::start().await;
    let h = Harness::start(server, |r| r.use_watch_list(false));
    h.store.wait_until("initial list", |s| !s.ops().is_empty()).await;
    let d_rv = create(&h.api, "d", "1").await;
    h.store.wait_until("d", |s| s.ops().contains(&Op::ResourceVersion(d_rv.clone()))).await;
    let ops = h.store.ops();
    let add = ops.iter().position(|o| *o == Op::Add("d".into())).unwrap();
    assert_eq!(ops[add + 1], Op::ResourceVersion(d_rv.clone()));
    assert_eq!(h.handle.last_sync_resource_version(), d_rv);
    assert_eq!(h.store.store.last_sync_resource_version(), d_rv, "the store's version moves with it");
    h.stop().await;
}

/// Mirrors `TestReflectorResourceVersionUpdate`: from a known version every event kind (ADDED,
/// MODIFIED, BOOKMARK, DELETED) hands its resource version to the store, right after applying the
/// event, in increasing order.
#[tokio::test]
async fn every_event_kind_updates_the_store_resource_version() {
    let server = TestServer::builder().bookmark_interval(std::time::Duration::from_millis(20)).start().await;
    let h = Harness::start(server, |r| r.use_watch_list(false));
    h.store.wait_until("initial list", |s| !s.ops().is_empty()).await;
    let added = create(&h.api, "a", "1").await;
    let modified = crate::common::update(&h.api, "a", "2").await;
    h.store.wait_until("modified", |s| s.ops().contains(&Op::ResourceVersion(modified.clone()))).await;
    let is_bookmark = |w: &[Op]| matches!(w, [Op::ResourceVersion(_), Op::ResourceVersion(_)]);
    h.store.wait_until("a bookmark while idle", |s| s.ops().windows(2).any(is_bookmark)).await;
    crate::common::delete(&h.api, "a").await;
    h.store
        .wait_until("deleted", |s| {
            s.ops().windows(2).any(|w| matches!(w, [Op::Delete(_), Op::ResourceVersion(_)]))
        })
        .await;

    let ops = h.store.ops();
    let add = ops.iter().position(|o| *o == Op::Add("a".into())).unwrap();
    assert_eq!(ops[add + 1], Op::ResourceVersion(added));
    let upd = ops.iter().position(|o| *o == Op::Update("a".into())).unwrap();
    assert_eq!(ops[upd + 1], Op::ResourceVersion(modified.clone()));
    let del = ops.iter().position(|o| *o == Op::Delete("a".into())).unwrap();
    let Op::ResourceVersion(deleted) = &ops[del + 1] else { unreachable!() };
    assert!(deleted.parse::<u64>().unwrap() > modified.parse::<u64>().unwrap());
    let rvs: Vec<u64> = ops
        .iter()
        .filter_map(|o| match o {
            Op::ResourceVersion(rv) => Some(rv.parse().unwrap()),
            _ => None,
        })
        .collect();
    assert!(rvs.windows(2).all(|w| w[0] <= w[1]), "never backwards: {rvs:?}");
    // Later bookmarks, if any, carry the same version: nothing was written after the delete.
    assert_eq!(h.handle.last_sync_resource_version(), *deleted);
    h.stop().await;
}
