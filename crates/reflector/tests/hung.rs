//! A hung watch (headers sent, then no bytes and no close) is detected once it outlives its
//! timeout plus grace, reported, and replaced.

mod common;

use common::{Harness, Op, create};
use kcache_reflector::ErrorKind;
use kcache_testserver::{TestServer, WatchFault};

#[tokio::test]
async fn hung_stream_is_detected_and_replaced() {
    let server = TestServer::start().await;
    server.faults().next_watch(WatchFault::Hang);
    let h = Harness::start(server, |r| r.use_watch_list(false));
    h.store.wait_until("synced", |s| s.ops().iter().any(|o| matches!(o, Op::Replace(..)))).await;
    // The only timer is the hung-watch detector: the watch's timeout (5 to 10 min) + 30 s grace.
    let d = h.clock.wait_for_sleepers(1).await[0];
    assert!((330..630).contains(&d.as_secs()), "{d:?}");
    h.clock.advance(d);
    h.errors.wait_for(ErrorKind::WatchHung).await;
    let backoff = h.clock.wait_for_sleepers(1).await[0];
    h.clock.advance(backoff);
    h.store
        .wait_until("relisted", |s| s.ops().iter().filter(|o| matches!(o, Op::Replace(..))).count() == 2)
        .await;
    create(&h.api, "x", "1").await;
    h.store.wait_until("the replacement watch works", |s| s.names() == ["x"]).await;
    h.stop().await;
}
