//! Reflector metrics: lists, watches, events received, relists by reason and the last synced
//! resource version reach a `ReflectorMetrics` provider; the watch timeout rules.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kcache_reflector::{ErrorKind, ReflectorConfig, ReflectorMetrics, RelistReason};
use kcache_testserver::{RequestFault, TestServer, Verb, WatchFault};

use crate::common::{Harness, Op, create};

#[derive(Debug, Default)]
struct Counting {
    lists: Mutex<usize>,
    watches: Mutex<Vec<bool>>,
    events: Mutex<Vec<&'static str>>,
    relists: Mutex<Vec<RelistReason>>,
    rvs: Mutex<Vec<String>>,
    list_failures: Mutex<Vec<ErrorKind>>,
    watch_ends: Mutex<Vec<Option<ErrorKind>>>,
}

impl ReflectorMetrics for Counting {
    fn list_completed(&self, _: &str, _: usize, _: Duration) {
        *self.lists.lock().unwrap() += 1;
    }
    fn watch_started(&self, _: &str, watch_list: bool) {
        self.watches.lock().unwrap().push(watch_list);
    }
    fn event_received(&self, _: &str, t: &'static str) {
        self.events.lock().unwrap().push(t);
    }
    fn relist(&self, _: &str, reason: RelistReason) {
        self.relists.lock().unwrap().push(reason);
    }
    fn last_sync_resource_version(&self, _: &str, rv: &str) {
        self.rvs.lock().unwrap().push(rv.to_owned());
    }
    fn list_failed(&self, _: &str, kind: ErrorKind) {
        self.list_failures.lock().unwrap().push(kind);
    }
    fn watch_ended(&self, _: &str, error: Option<ErrorKind>) {
        self.watch_ends.lock().unwrap().push(error);
    }
}

#[tokio::test]
async fn metrics_follow_what_the_reflector_does() {
    let server = TestServer::start().await;
    server.faults().set_watch_list_support(kcache_testserver::WatchListSupport::GateDisabled);
    server.faults().all_watches(WatchFault::Error {
        after: 1,
        code: 410,
        reason: "Expired".into(),
        message: "too old".into(),
    });
    let metrics = Arc::new(Counting::default());
    let m = Arc::clone(&metrics);
    let h = Harness::start(server, move |r| r.metrics(m));
    h.store.wait_until("synced", |s| s.ops().iter().any(|o| matches!(o, Op::Replace(..)))).await;
    create(&h.api, "a", "1").await;
    // The backoff after the watch's 410.
    let d = h.clock.wait_for_sleep(|d| d.as_secs() < 60).await;
    h.clock.advance(d);
    h.store
        .wait_until("relisted", |s| s.ops().iter().filter(|o| matches!(o, Op::Replace(..))).count() >= 2)
        .await;

    assert!(*metrics.lists.lock().unwrap() >= 2);
    let watches = metrics.watches.lock().unwrap().clone();
    assert!(watches[0], "a watch-list attempt first");
    assert!(watches.iter().skip(1).any(|w| !w));
    assert!(metrics.events.lock().unwrap().contains(&"ADDED"));
    let relists = metrics.relists.lock().unwrap().clone();
    assert!(relists.contains(&RelistReason::WatchListFallback));
    assert!(relists.contains(&RelistReason::Expired));
    assert!(!metrics.rvs.lock().unwrap().is_empty());
    h.stop().await;
}

/// Every failed LIST is counted: one whose retry from "" fails too, and one the store refused.
#[tokio::test]
async fn every_failed_list_is_counted() {
    let server = TestServer::start().await;
    let faults = server.faults();
    faults.fail_requests(1, RequestFault::gone().verb(Verb::List));
    faults.fail_requests(1, RequestFault::internal_error().verb(Verb::List));
    let metrics = Arc::new(Counting::default());
    let m = Arc::clone(&metrics);
    let h = Harness::start(server, move |r| r.use_watch_list(false).metrics(m));
    h.errors.wait_for(ErrorKind::InternalError).await;
    assert_eq!(*metrics.relists.lock().unwrap(), [RelistReason::ResourceVersionUnavailable]);
    assert_eq!(*metrics.list_failures.lock().unwrap(), [ErrorKind::InternalError]);

    h.store.fail_replace.store(true, std::sync::atomic::Ordering::SeqCst);
    let d = h.clock.wait_for_sleepers(1).await[0];
    h.clock.advance(d);
    h.errors.wait_for(ErrorKind::Store).await;
    assert_eq!(*metrics.list_failures.lock().unwrap(), [ErrorKind::InternalError, ErrorKind::Store]);
    assert_eq!(*metrics.lists.lock().unwrap(), 0);
    h.stop().await;
}

/// A watch the server refuses outright (403) ends with that error and counts a relist.
#[tokio::test]
async fn a_watch_refused_at_open_counts_a_relist() {
    let server = TestServer::start().await;
    server.faults().fail_requests(1, RequestFault::forbidden().verb(Verb::Watch));
    let metrics = Arc::new(Counting::default());
    let m = Arc::clone(&metrics);
    let h = Harness::start(server, move |r| r.use_watch_list(false).metrics(m));
    h.errors.wait_for(ErrorKind::Forbidden).await;
    assert_eq!(*metrics.watches.lock().unwrap(), [false]);
    assert_eq!(*metrics.watch_ends.lock().unwrap(), [Some(ErrorKind::Forbidden)]);
    assert_eq!(*metrics.relists.lock().unwrap(), [RelistReason::WatchError]);
    h.stop().await;
}

/// Every watch counted as started is counted as ended, so a provider can keep an open-watches
/// gauge as started minus ended: a watch-list answered 429 (retried after backoff), the
/// watch-list then refused by a server that does not serve it (a 422 from Kubernetes 1.27 to
/// 1.33), and the plain watch after the fallback LIST, which is still open at the end.
#[tokio::test]
async fn every_watch_started_is_ended() {
    let server = TestServer::start().await;
    server.faults().set_watch_list_support(kcache_testserver::WatchListSupport::GateDisabled);
    server.faults().fail_requests(1, RequestFault::too_many_requests(7).verb(Verb::Watch));
    let metrics = Arc::new(Counting::default());
    let m = Arc::clone(&metrics);
    let h = Harness::start(server, move |r| r.metrics(m));
    let d = h.clock.wait_for_sleep(|d| d.as_secs() < 60).await;
    h.clock.advance(d);
    h.store.wait_until("synced", |s| s.ops().iter().any(|o| matches!(o, Op::Replace(..)))).await;
    create(&h.api, "a", "1").await;
    h.store.wait_until("watching", |s| s.names() == ["a"]).await;
    assert_eq!(*metrics.watches.lock().unwrap(), [true, true, false]);
    let ended = metrics.watch_ends.lock().unwrap().clone();
    assert_eq!(ended.len(), 2, "all but the open watch: {ended:?}");
    assert_eq!(ended[0], Some(ErrorKind::TooManyRequests));
    assert!(ended[1].is_some());
    h.stop().await;
}

/// A 429 on a live watch backs off and re-watches from the same version, without a relist.
#[tokio::test]
async fn too_many_requests_on_watch_rewatches_without_relist() {
    let server = TestServer::start().await;
    server.faults().fail_requests(1, RequestFault::too_many_requests(7).verb(Verb::Watch));
    let h = Harness::start(server, |r| r.use_watch_list(false));
    h.store.wait_until("synced", |s| s.ops().iter().any(|o| matches!(o, Op::Replace(..)))).await;
    let d = h.clock.wait_for_sleep(|d| d.as_secs() < 60).await;
    assert_eq!(d, Duration::from_secs(7), "Retry-After honoured");
    h.clock.advance(d);
    create(&h.api, "a", "1").await;
    h.store.wait_until("watching again", |s| s.names() == ["a"]).await;
    assert_eq!(h.requests(Verb::List).len(), 1, "no relist after a 429 on watch");
    let watches = h.requests(Verb::Watch);
    assert_eq!(watches[0].status, 429);
    assert_eq!(watches[1].query_param("resourceVersion"), watches[0].query_param("resourceVersion"));
    assert!(h.errors.kinds().is_empty(), "handled inside the watch loop");
    h.stop().await;
}

/// Watch timeouts are uniform in [min, 2*min) with min at least 5 minutes: a caller's smaller
/// minimum is not honoured, a larger one is. Mirrors client-go reflector_test.go
/// `TestWatchTimeout` (its "no timeout" case, the 5-minute default, is in `list_watch.rs`).
#[tokio::test]
async fn watch_timeouts_follow_the_minimum() {
    for (min, lo, hi) in [(60, 300, 600), (900, 900, 1800)] {
        let server = TestServer::start().await;
        let config = ReflectorConfig {
            min_watch_timeout: Duration::from_secs(min),
            use_watch_list: false,
            ..ReflectorConfig::default()
        };
        let h = Harness::start(server, move |r| r.config(config));
        h.store.wait_until("synced", |s| s.ops().iter().any(|o| matches!(o, Op::Replace(..)))).await;
        let d = h.clock.wait_for_sleep(|d| d.as_secs() >= 300).await;
        let timeout: u64 = h.requests(Verb::Watch)[0].query_param("timeoutSeconds").unwrap().parse().unwrap();
        assert!((lo..hi).contains(&timeout), "min {min}: timeout {timeout} not in [{lo}, {hi})");
        assert_eq!(d.as_secs(), timeout + 30, "hung detection at timeout + grace");
        h.stop().await;
    }
}
