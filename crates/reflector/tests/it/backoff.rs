//! Backoff: very short watches, persistent 403s, errors every 30 s, 429 Retry-After, refused
//! watch connections, and the reset every two minutes since the last one (client-go
//! reflector_test.go `TestReflectorListAndWatchInitConnBackoff`, `TestNewReflectorWithCustomBackoff`,
//! `TestNoRelistOnTooManyRequests`, `TestBackoffOnTooManyRequests`; apimachinery's
//! `backoffManager.Step`, which the reflector gets from `Backoff.DelayWithReset`), all on a fake
//! clock.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_reflector::{
    ApiListerWatcher, Clock, ErrorKind, FakeClock, ListOptions, ListPage, ListerWatcher, WatchEvent,
    WatchOptions, WatchStream,
};
use kcache_testserver::{RequestFault, TestServer, Verb, WatchFault};

use crate::common::{Harness, Op, create};

/// client-go's reflector backoff as a model: `backoffManager.Step` over `wait.Backoff{800ms,
/// factor 2, cap 30s}` with a two-minute reset interval. Given when each delay was asked for
/// (time since the reflector started), the nominal delay of each: the sequence restarts at 800 ms
/// at the first step more than two minutes after the window's start, and the window starts
/// again there.
fn nominal_delays(step_times: &[Duration]) -> Vec<Duration> {
    let (initial, cap, interval) =
        (Duration::from_millis(800), Duration::from_secs(30), Duration::from_secs(120));
    let mut last_start = Duration::ZERO;
    let mut next = initial;
    step_times
        .iter()
        .map(|&t| {
            if t - last_start > interval {
                last_start = t;
                next = initial;
            }
            let nominal = next;
            next = (next * 2).min(cap);
            nominal
        })
        .collect()
}

/// Asserts each delay is within its nominal value's jitter range `[d, 2d)`.
fn assert_jittered(delays: &[Duration], nominal: &[Duration]) {
    for (i, (d, n)) in delays.iter().zip(nominal).enumerate() {
        assert!(*d >= *n && *d < 2 * *n, "delay {i}: {d:?} not in [{n:?}, {:?}); all: {delays:?}", 2 * *n);
    }
}

/// The times of the steps of a reflector that fails at once after every backoff: the first at
/// 0, each next one when the previous delay ran out.
fn back_to_back(delays: &[Duration]) -> Vec<Duration> {
    delays.iter().scan(Duration::ZERO, |t, d| Some(std::mem::replace(t, *t + *d))).collect()
}

/// A watch that closes within 1 s without any event is an error, and goes through backoff.
/// Mirrors client-go reflector_test.go `TestReflectorHandleWatchResultChanClosedBefore` and
/// `TestReflectorHandleWatchResultChanClosedAfter` (a result stream closed by the producer, before
/// or after watching began, without events: a very short watch error).
#[tokio::test]
async fn very_short_watch_goes_through_backoff() {
    let server = TestServer::start().await;
    server.faults().all_watches(WatchFault::CloseAfter(0));
    let h = Harness::start(server, |r| r.use_watch_list(false));
    h.ended.wait_for(ErrorKind::VeryShortWatch).await;
    let sleeps = h.clock.wait_for_sleepers(1).await;
    let d = sleeps[0].as_secs_f64();
    assert!((0.8..1.6).contains(&d), "first backoff {d}");
    assert!(h.errors.kinds().is_empty(), "a watch that ended is not reported: {:?}", h.errors.kinds());
    // Nothing else happens until the clock moves: no hot loop.
    assert_eq!(h.requests(Verb::Watch).len(), 1);
    h.stop().await;
}

/// Steps a reflector that fails every request through `cycles` backoff cycles and returns the
/// delays and the number of requests each cycle made.
async fn cycles(h: &Harness, cycles: usize) -> Vec<(Duration, usize)> {
    let mut out = Vec::new();
    for _ in 0..cycles {
        let before = h.server.request_log().entries().len();
        let d = h.clock.wait_for_sleepers(1).await[0];
        let requests = h.server.request_log().entries().len() - before;
        out.push((d, requests));
        h.clock.advance(d);
    }
    out
}

/// 403 on every request (LIST + WATCH mode: each cycle is one failed LIST): each delay is drawn
/// from `[d, 2d)` for d = 0.8, 1.6, ... 25.6 s, then 30 s, until the first delay asked for more
/// than two minutes after the reflector started, which is 800 ms again, and so on every two
/// minutes since the last reset (client-go's `backoffManager.Step`); each cycle makes exactly one
/// request. Before client-go's reset rule was matched, the delays stayed in [30 s, 60 s) for
/// ever.
#[tokio::test]
async fn forbidden_backs_off_and_restarts_every_two_minutes() {
    let server = TestServer::start().await;
    server.faults().fail_requests(usize::MAX / 2, RequestFault::forbidden());
    let h = Harness::start(server, |r| r.use_watch_list(false));
    h.errors.wait_for(ErrorKind::Forbidden).await;
    let got = cycles(&h, 20).await;
    let delays: Vec<_> = got.iter().map(|(d, _)| *d).collect();
    let nominal = nominal_delays(&back_to_back(&delays));
    assert_jittered(&delays, &nominal);
    let resets = nominal.iter().skip(1).filter(|n| n.as_millis() == 800).count();
    assert!(resets >= 2, "20 cycles last over four minutes: {nominal:?}");
    assert!(nominal.contains(&Duration::from_secs(30)), "the cap is reached between resets: {nominal:?}");
    // After the first cycle (whose request happened before we started counting), one request per
    // cycle.
    for (i, (_, requests)) in got.iter().enumerate().skip(1) {
        assert_eq!(*requests, 1, "cycle {i}");
    }
    assert!(h.store.ops().is_empty(), "never synced");
    assert!(h.errors.kinds().iter().all(|k| *k == ErrorKind::Forbidden));
    h.stop().await;
}

/// With watch-list on, each cycle is a watch-list attempt and the fallback LIST (only the LIST's
/// 403 is reported): two requests per cycle, one backoff step per cycle, as client-go.
#[tokio::test]
async fn forbidden_with_watch_list_makes_two_requests_per_cycle() {
    let server = TestServer::start().await;
    server.faults().fail_requests(usize::MAX / 2, RequestFault::forbidden());
    let h = Harness::start(server, |r| r);
    h.errors.wait_for(ErrorKind::Forbidden).await;
    let got = cycles(&h, 12).await;
    let delays: Vec<_> = got.iter().map(|(d, _)| *d).collect();
    assert_jittered(&delays, &nominal_delays(&back_to_back(&delays)));
    for (i, (_, requests)) in got.iter().enumerate().skip(1) {
        assert_eq!(*requests, 2, "cycle {i}");
    }
    assert!(h.errors.kinds().iter().all(|k| *k == ErrorKind::Forbidden));
    h.stop().await;
}

/// A 429's Retry-After is honoured: the wait is at least what the server asked for.
#[tokio::test]
async fn too_many_requests_honours_retry_after() {
    let server = TestServer::start().await;
    server.faults().fail_requests(1, RequestFault::too_many_requests(45).verb(Verb::List));
    let h = Harness::start(server, |r| r.use_watch_list(false));
    h.errors.wait_for(ErrorKind::TooManyRequests).await;
    let d = h.clock.wait_for_sleepers(1).await[0];
    assert_eq!(d, Duration::from_secs(45));
    h.clock.advance(d);
    h.store
        .wait_until("synced after the wait", |s| s.ops().iter().any(|o| matches!(o, Op::Replace(..))))
        .await;
    h.stop().await;
}

/// After a quiet spell longer than two minutes the backoff starts again from 800 ms, wherever it
/// stood (the window began at the last reset, more than two minutes ago).
#[tokio::test]
async fn backoff_restarts_after_two_quiet_minutes() {
    let server = TestServer::start().await;
    let faults = server.faults();
    faults.fail_requests(8, RequestFault::forbidden());
    let h = Harness::start(server, |r| r.use_watch_list(false));
    let warm = cycles(&h, 8).await;
    let delays: Vec<_> = warm.iter().map(|(d, _)| *d).collect();
    assert_jittered(&delays, &nominal_delays(&back_to_back(&delays)));
    // Healthy now: the list and the watch succeed and the watch stays open.
    h.store.wait_until("synced", |s| s.ops().iter().any(|o| matches!(o, Op::Replace(..)))).await;
    create(&h.api, "a", "1").await;
    h.store.wait_until("watching", |s| s.names() == ["a"]).await;
    // Three quiet minutes pass (less than the watch timeout), then the server breaks again.
    h.clock.advance(Duration::from_secs(180));
    let errors_before = h.errors.kinds().len();
    faults.fail_requests(usize::MAX / 2, RequestFault::forbidden());
    faults.restart();
    h.errors.wait_for_count(errors_before + 1).await;
    assert_eq!(h.errors.kinds().last(), Some(&ErrorKind::Forbidden));
    let d = h.clock.wait_for_sleepers(1).await[0].as_secs_f64();
    assert!((0.8..1.6).contains(&d), "reset to the initial delay, got {d}");
    h.stop().await;
}

/// Lists succeed (empty, at resource version 1); every watch delivers nothing for 30 s on the
/// reflector's clock, then ends with an ERROR event carrying a 500 (a watch that ended with an
/// error: back off, then relist).
struct WatchesFailAfter30s {
    clock: FakeClock,
}

const WATCH_LIFE: Duration = Duration::from_secs(30);

impl ListerWatcher<ConfigMap> for WatchesFailAfter30s {
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
        let life = self.clock.sleep(WATCH_LIFE);
        let ended = async move {
            life.await;
            let mut status = kube::core::Status::failure("etcdserver: request timed out", "InternalError");
            status.code = 500;
            Ok(WatchEvent::Error(Box::new(status)))
        };
        let stream: WatchStream<ConfigMap> =
            futures::stream::once(ended).chain(futures::stream::pending()).boxed();
        futures::future::ready(Ok(stream)).boxed()
    }
}

/// The sequence, against client-go v0.37's `backoffManager.Step` (`DelayWithReset(clock,
/// 2 min)`, stepped by `RunWithContext`'s `delayHandler.Until` after every `ListAndWatch`): a
/// watch fails 30 s after each relist, so the reflector backs off about every 30 s. The window
/// starts when the reflector does, and resets only when a delay is asked for more than two
/// minutes after its start, so the nominal delays are 0.8, 1.6, 3.2 s, then 0.8 s (the 4th
/// failure comes after 120 s + the three delays), 1.6, 3.2, 6.4 s, then 0.8 s again (more than
/// two minutes after the 4th), and so on: twelve failures, six minutes, and the delay never
/// climbs past 6.4 s. Each is asserted within `[d, 2d)`. A backoff that resets only after two
/// minutes *without* a failure never resets here, and climbs to 30 s (its 4th delay is 6.4 s).
#[tokio::test]
async fn errors_every_30_seconds_fall_back_to_800ms_every_two_minutes() {
    let server = TestServer::start().await;
    let clock = FakeClock::new();
    let lw = WatchesFailAfter30s { clock: clock.clone() };
    let h = Harness::start_with_clock(server, lw, clock, |r| r.use_watch_list(false));
    let ms = Duration::from_millis;
    let want = [800, 1600, 3200, 800, 1600, 3200, 6400, 800, 1600, 3200, 6400, 800].map(ms);
    let start = h.clock.now();
    let mut step_times = Vec::new();
    for (i, nominal) in want.into_iter().enumerate() {
        // The watch is open: let it live its 30 s, until it fails.
        h.clock.wait_for_sleep(|d| d == WATCH_LIFE).await;
        h.clock.advance(WATCH_LIFE);
        step_times.push(h.clock.now() - start);
        // The backoff (never a 30 s watch life nor a watch's hung timer, at least 330 s).
        let d = h.clock.wait_for_sleep(|d| d < Duration::from_secs(20)).await;
        assert!(
            d >= nominal && d < 2 * nominal,
            "failure {i} at {:?}: {d:?} not in [{nominal:?}, {:?})",
            step_times[i],
            2 * nominal
        );
        h.clock.advance(d);
    }
    assert_eq!(nominal_delays(&step_times), want, "the model agrees");
    assert_eq!(h.ended.kinds(), [ErrorKind::InternalError; 12]);
    assert!(h.errors.kinds().is_empty(), "watches that ended are not reported: {:?}", h.errors.kinds());
    h.stop().await;
}

/// Refuses the first `refusals` watch connections (a refused TCP connect, which the API server
/// cannot produce while it is up), then watches through the test server.
struct RefusingWatches {
    inner: ApiListerWatcher<ConfigMap>,
    refusals: AtomicUsize,
}

impl RefusingWatches {
    /// A test server holding ConfigMap `a`, and a lister-watcher on it refusing `refusals`
    /// watch connections.
    async fn start(refusals: usize) -> (TestServer, Self) {
        let server = TestServer::start().await;
        let api = kube::Api::namespaced(server.client(), "default");
        create(&api, "a", "1").await;
        (server, Self { inner: ApiListerWatcher::new(api), refusals: AtomicUsize::new(refusals) })
    }
}

impl ListerWatcher<ConfigMap> for RefusingWatches {
    fn list(&self, opts: ListOptions) -> BoxFuture<'static, kcache_reflector::Result<ListPage<ConfigMap>>> {
        self.inner.list(opts)
    }

    fn watch(
        &self,
        opts: WatchOptions,
    ) -> BoxFuture<'static, kcache_reflector::Result<WatchStream<ConfigMap>>> {
        if self.refusals.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok() {
            let err = kcache_reflector::ReflectorError::Transport {
                message: "dial tcp: connect: connection refused".into(),
                connection_refused: true,
                source: None,
            };
            return futures::future::ready(Err(err)).boxed();
        }
        self.inner.watch(opts)
    }
}

/// Mirrors client-go's `TestReflectorListAndWatchInitConnBackoff`: refused watch connections are
/// retried from the same resource version with exponentially growing backoff (each delay in
/// [d, 2d) for d = 0.8, 1.6, 3.2, 6.4, 12.8 s), without relisting and without reporting an error;
/// the first connection that succeeds carries on as the watch.
#[tokio::test]
async fn refused_watch_connections_back_off_without_relisting() {
    let (server, lw) = RefusingWatches::start(5).await;
    let h = Harness::start_with(server, lw, |r| r.use_watch_list(false));
    h.store.wait_until("synced", |s| s.names() == ["a"]).await;
    let mut total = Duration::ZERO;
    for (i, nominal) in [0.8, 1.6, 3.2, 6.4, 12.8].into_iter().enumerate() {
        let d = h.clock.wait_for_sleepers(1).await[0];
        let s = d.as_secs_f64();
        assert!(s >= nominal && s < 2.0 * nominal, "refusal {i}: {s} not in [{nominal}, {})", 2.0 * nominal);
        total += d;
        h.clock.advance(d);
    }
    assert!((24.8..49.6).contains(&total.as_secs_f64()), "{total:?}");
    create(&h.api, "b", "1").await;
    h.store.wait_until("watching", |s| s.names() == ["a", "b"]).await;
    assert_eq!(h.requests(Verb::List).len(), 1, "refused watches never relist");
    let watches = h.requests(Verb::Watch);
    assert_eq!(watches.len(), 1, "only the sixth attempt reached the server");
    let list_rv = h.store.ops().iter().find_map(|o| match o {
        Op::Replace(_, rv) => Some(rv.clone()),
        _ => None,
    });
    assert_eq!(watches[0].query_param("resourceVersion"), list_rv, "from the list's resource version");
    assert!(h.errors.kinds().is_empty(), "{:?}", h.errors.kinds());
    h.stop().await;
}

/// Mirrors client-go reflector_test.go `TestNewReflectorWithCustomBackoff`: a backoff given in
/// the reflector's configuration replaces the default. Without jitter, starting at 10 ms, doubling
/// and capped at 100 ms, five refused watch connections wait exactly 10, 20, 40, 80 and 100 ms
/// (250 ms in all), then the watch carries on.
#[tokio::test]
async fn custom_backoff_replaces_the_default() {
    let (server, lw) = RefusingWatches::start(5).await;
    let config = kcache_reflector::ReflectorConfig {
        backoff: kcache_reflector::BackoffConfig {
            initial: Duration::from_millis(10),
            factor: 2.0,
            jitter: 0.0,
            cap: Duration::from_millis(100),
            ..kcache_reflector::BackoffConfig::default()
        },
        use_watch_list: false,
        ..kcache_reflector::ReflectorConfig::default()
    };
    let h = Harness::start_with(server, lw, move |r| r.config(config));
    h.store.wait_until("synced", |s| s.names() == ["a"]).await;
    let mut delays = Vec::new();
    for _ in 0..5 {
        let d = h.clock.wait_for_sleepers(1).await[0];
        delays.push(d.as_millis());
        h.clock.advance(d);
    }
    assert_eq!(delays, [10, 20, 40, 80, 100]);
    create(&h.api, "b", "1").await;
    h.store.wait_until("watching", |s| s.names() == ["a", "b"]).await;
    h.stop().await;
}

/// Mirrors client-go's `TestNoRelistOnTooManyRequests` (and the open half of
/// `TestBackoffOnTooManyRequests`): four watches in a row answered 429 each wait for the backoff
/// or the Retry-After, whichever is longer, and re-watch from the same resource version; the
/// fifth succeeds. One LIST, five watches, nothing reported.
#[tokio::test]
async fn repeated_429_on_watch_never_relists() {
    let server = TestServer::start().await;
    server.faults().fail_requests(4, RequestFault::too_many_requests(1).verb(Verb::Watch));
    let h = Harness::start(server, |r| r.use_watch_list(false));
    h.store.wait_until("synced", |s| s.ops().iter().any(|o| matches!(o, Op::Replace(..)))).await;
    for i in 0..4 {
        let d = h.clock.wait_for_sleepers(1).await[0];
        assert!(d >= Duration::from_secs(1), "429 {i}: at least the Retry-After, got {d:?}");
        h.clock.advance(d);
    }
    create(&h.api, "a", "1").await;
    h.store.wait_until("watching", |s| s.names() == ["a"]).await;
    assert_eq!(h.requests(Verb::List).len(), 1);
    let watches = h.requests(Verb::Watch);
    let statuses: Vec<_> = watches.iter().map(|w| w.status).collect();
    assert_eq!(statuses, [429, 429, 429, 429, 200]);
    let rv = watches[0].query_param("resourceVersion");
    assert!(watches.iter().all(|w| w.query_param("resourceVersion") == rv), "same resource version");
    assert!(h.errors.kinds().is_empty(), "{:?}", h.errors.kinds());
    h.stop().await;
}
