//! A hung watch (still open past its timeout plus grace) is detected, logged and counted (not
//! passed to the watch error handler, which in client-go hears of no watch that ended), and
//! replaced by a watch from the last synced resource version, without a relist.

use std::time::Duration;

use kcache_reflector::ErrorKind;
use kcache_testserver::{TestServer, Verb, WatchFault};

use crate::common::{Harness, Op, create};

fn replaces(ops: &[Op]) -> usize {
    ops.iter().filter(|o| matches!(o, Op::Replace(..))).count()
}

/// The deadline of the watch request in `timeoutSeconds` (plus the default 30 s grace).
fn deadline_of(w: &kcache_testserver::RequestRecord) -> Duration {
    let secs: u64 = w.query_param("timeoutSeconds").expect("timeoutSeconds sent").parse().unwrap();
    Duration::from_secs(secs) + Duration::from_secs(30)
}

#[tokio::test]
async fn hung_stream_is_replaced_by_a_watch_from_the_last_resource_version() {
    let server = TestServer::start().await;
    server.faults().next_watch(WatchFault::Hang);
    let h = Harness::start(server, |r| r.use_watch_list(false));
    h.store.wait_until("synced", |s| replaces(&s.ops()) == 1).await;
    // The only timer is the hung-watch detector, at the request's own timeout + 30 s grace.
    let d = h.clock.wait_for_sleepers(1).await[0];
    let watches = h.requests(Verb::Watch);
    assert_eq!(watches.len(), 1);
    assert_eq!(d, deadline_of(&watches[0]));
    assert!((330..630).contains(&d.as_secs()), "{d:?}");
    let synced_rv = h.handle.last_sync_resource_version();

    h.clock.advance(d);
    h.ended.wait_for(ErrorKind::WatchHung).await;
    // Re-watched at once from the resource version it holds: no backoff, no relist.
    create(&h.api, "x", "1").await;
    h.store.wait_until("the replacement watch works", |s| s.names() == ["x"]).await;
    let watches = h.requests(Verb::Watch);
    assert_eq!(watches.len(), 2);
    assert_eq!(watches[1].query_param("resourceVersion").as_deref(), Some(synced_rv.as_str()));
    assert_eq!(h.requests(Verb::List).len(), 1, "a hung watch costs no relist");
    assert_eq!(replaces(&h.store.ops()), 1);
    assert!(h.errors.kinds().is_empty(), "not reported: {:?}", h.errors.kinds());
    h.stop().await;
}

/// After a watch-list sync the same stream goes on as the live watch, so it keeps the deadline
/// of the request that opened it: a fresh timeout drawn for it could call a healthy stream hung
/// before the server's own timeout closes it.
#[tokio::test]
async fn the_live_watch_after_watch_list_keeps_its_requests_deadline() {
    let server = TestServer::start().await;
    let api = kube::Api::namespaced(server.client(), "default");
    create(&api, "a", "1").await;
    let h = Harness::start(server, |r| r);
    h.store.wait_until("synced", |s| replaces(&s.ops()) == 1).await;
    let d = h.clock.wait_for_sleepers(1).await[0];
    let watches = h.requests(Verb::Watch);
    assert_eq!(watches.len(), 1, "the watch-list stream continues");
    assert_eq!(watches[0].query_param("sendInitialEvents").as_deref(), Some("true"));
    assert_eq!(d, deadline_of(&watches[0]));
    h.stop().await;
}

/// `Duration::MAX` as the hung-watch grace or the minimum watch timeout (a natural way to say
/// "never") is lowered to about 30 years, not left to overflow the deadline arithmetic and kill
/// the reflector's task: the watch is requested with a timeout that fits, and the reflector
/// keeps working.
#[tokio::test]
async fn the_longest_grace_and_watch_timeout_do_not_overflow() {
    const THIRTY_YEARS: u64 = 30 * 365 * 24 * 60 * 60;
    let server = TestServer::start().await;
    let api = kube::Api::namespaced(server.client(), "default");
    create(&api, "a", "1").await;
    let config = kcache_reflector::ReflectorConfig {
        use_watch_list: false,
        min_watch_timeout: Duration::MAX,
        hung_watch_grace: Duration::MAX,
        ..Default::default()
    };
    let h = Harness::start(server, |r| r.config(config));
    h.store.wait_until("synced", |s| replaces(&s.ops()) == 1).await;
    // A guard, not a wait: the reflector's task panicked if its timer never comes.
    let d = tokio::time::timeout(Duration::from_secs(10), h.clock.wait_for_sleepers(1))
        .await
        .expect("the reflector is still running")[0];
    let watches = h.requests(Verb::Watch);
    assert_eq!(watches.len(), 1);
    let secs: u64 = watches[0].query_param("timeoutSeconds").expect("timeoutSeconds sent").parse().unwrap();
    assert!((THIRTY_YEARS..2 * THIRTY_YEARS).contains(&secs), "{secs}");
    assert_eq!(d, Duration::from_secs(secs + THIRTY_YEARS), "the hung deadline, grace capped too");
    create(&h.api, "b", "1").await;
    h.store.wait_until("the watch works", |s| s.names() == ["a", "b"]).await;
    assert!(!h.task.is_finished());
    h.stop().await;
}
