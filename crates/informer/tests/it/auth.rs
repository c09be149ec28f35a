//! Auth and throttling seen from an informer: 401 and 403 on LIST and on WATCH reach the watch
//! error handler classified, `has_synced` stays false while nothing could be listed, the delays
//! follow client-go's backoff (800 ms doubling to 30 s, jittered, back to 800 ms every two
//! minutes since the last reset), 429's Retry-After is honoured, and access granted
//! later recovers without a restart (client-go's `sharedIndexInformer.SetWatchErrorHandler` and
//! the reflector's `BackoffUntil` loop, `reflector_test.go` `TestReflectorListAndWatchWithErrors`
//! and the 429 handling in `watch()`). The reflector-level arithmetic of the backoff is in
//! `kcache-reflector`'s `tests/backoff.rs`; these tests check it through the informer, on a fake
//! clock.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Harness, Recorder, create};
use kcache_informer::HasSynced;
use kcache_reflector::{ErrorKind, ReflectorConfig};
use kcache_testserver::{RequestFault, TestServer, Verb};
use tokio::sync::Notify;

/// The kinds the informer's watch error handler received.
#[derive(Clone, Default)]
struct Reported {
    kinds: Arc<Mutex<Vec<ErrorKind>>>,
    changed: Arc<Notify>,
}

impl Reported {
    fn kinds(&self) -> Vec<ErrorKind> {
        self.kinds.lock().unwrap().clone()
    }

    async fn wait_for(&self, kind: ErrorKind) {
        let fut = async {
            loop {
                let notified = self.changed.notified();
                if self.kinds().contains(&kind) {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(Duration::from_secs(20), fut).await.expect("error reported");
    }
}

/// An informer with a recording handler and a watch error handler, not started.
async fn informer(server: TestServer, watch_list: bool) -> (Harness, Recorder, Reported) {
    let h = Harness::on(server, Duration::ZERO);
    h.informer
        .set_reflector_config(ReflectorConfig { use_watch_list: watch_list, ..ReflectorConfig::default() })
        .unwrap();
    let reported = Reported::default();
    h.informer
        .set_watch_error_handler({
            let reported = reported.clone();
            move |_, e| {
                reported.kinds.lock().unwrap().push(e.kind());
                reported.changed.notify_waiters();
            }
        })
        .unwrap();
    let rec = Recorder::new();
    (h, rec, reported)
}

/// The next backoff sleep of the reflector (never a watch timer, which is at least 5 minutes),
/// under a timeout that fails the test instead of hanging it.
async fn backoff(h: &Harness) -> Duration {
    let wait = h.clock.wait_for_sleep(|d| d < Duration::from_secs(100));
    tokio::time::timeout(Duration::from_secs(20), wait).await.expect("the reflector backs off")
}

/// Lets the informer retry (advancing through each backoff: the attempt in flight when access was
/// granted may succeed or fail) until `done` completes.
async fn until_recovered(h: &Harness, done: impl std::future::Future<Output = ()>) {
    let fut = async {
        tokio::pin!(done);
        loop {
            tokio::select! {
                () = &mut done => return,
                d = h.clock.wait_for_sleep(|d| d < Duration::from_secs(100)) => h.clock.advance(d),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(20), fut).await.expect("recovered without a restart");
}

/// The nominal delay of each backoff step taken at `times` (since the reflector started), by
/// client-go's rule (`backoffManager.Step` over the reflector's `wait.Backoff`): 800 ms doubling
/// to 30 s, restarting at 800 ms at the first step more than two minutes after the last restart.
fn nominal_delays(times: &[Duration]) -> Vec<Duration> {
    let (mut last_start, mut next) = (Duration::ZERO, Duration::from_millis(800));
    let mut out = Vec::new();
    for &t in times {
        if t - last_start > Duration::from_secs(120) {
            (last_start, next) = (t, Duration::from_millis(800));
        }
        out.push(next);
        next = (next * 2).min(Duration::from_secs(30));
    }
    out
}

/// Asserts that cycles which each failed at once after the previous delay (the first at the
/// start) waited within `[d, 2d)` of their nominal delays `d`.
fn assert_back_to_back_delays(delays: &[Duration], what: &str) {
    let times: Vec<_> =
        delays.iter().scan(Duration::ZERO, |t, d| Some(std::mem::replace(t, *t + *d))).collect();
    for (i, (d, n)) in delays.iter().zip(nominal_delays(&times)).enumerate() {
        assert!(*d >= n && *d < 2 * n, "{what} cycle {i}: {d:?} not in [{n:?}, {:?}): {delays:?}", 2 * n);
    }
}

/// Steps through `n` backoff cycles: waits for the reflector's sleep (never a watch timer),
/// records its length and the requests made since the previous one, advances past it.
async fn cycles(h: &Harness, n: usize) -> Vec<(Duration, usize)> {
    let mut out = Vec::new();
    let mut seen = h.server.request_log().entries().len();
    for _ in 0..n {
        let d = backoff(h).await;
        let now = h.server.request_log().entries().len();
        out.push((d, now - seen));
        seen = now;
        assert!(!h.informer.has_synced(), "nothing was listed: not synced");
        h.clock.advance(d);
    }
    out
}

/// 401 and then 403 on every request (watch-list attempt and fallback LIST): each cycle reports
/// the classified error; the informer and the handler's registration never sync; the delays grow
/// 0.8, 1.6, ... 25.6 s, 30 s, and start again at 0.8 s once two minutes have passed since the
/// start (client-go's reset rule), with two requests per cycle; once access is
/// granted the next cycle lists, syncs and delivers, with no restart. Mirrors client-go
/// shared_informer_test.go `TestSharedInformerErrorHandling` (a failing LIST reaches the informer's
/// watch error handler).
#[tokio::test]
async fn unauthorized_and_forbidden_everywhere_back_off_and_recover_without_restart() {
    for (fault, kind) in [
        (RequestFault::unauthorized(), ErrorKind::Unauthorized),
        (RequestFault::forbidden(), ErrorKind::Forbidden),
    ] {
        let server = TestServer::start().await;
        let api = kube::Api::namespaced(server.client(), "default");
        create(&api, "a", "1").await;
        server.faults().fail_requests(usize::MAX / 2, fault.path_contains("configmaps"));
        let (mut h, rec, reported) = informer(server, true).await;
        let reg = h.informer.add_event_handler(rec.clone()).unwrap();
        h.start();
        reported.wait_for(kind).await;
        let got = cycles(&h, 10).await;
        let delays: Vec<_> = got.iter().map(|(d, _)| *d).collect();
        assert_back_to_back_delays(&delays, &format!("{kind:?}"));
        for (i, (_, requests)) in got.iter().enumerate() {
            if i > 0 {
                assert_eq!(*requests, 2, "{kind:?} cycle {i}: the watch-list attempt and the LIST");
            }
        }
        assert!(reported.kinds().iter().all(|k| *k == kind), "{:?}", reported.kinds());
        assert!(reported.kinds().len() >= 10, "every cycle reported");
        assert!(!h.informer.has_synced() && !reg.has_synced());
        assert!(rec.events().is_empty());

        // Access granted: the next cycle succeeds.
        h.server.faults().clear();
        until_recovered(&h, reg.wait_synced()).await;
        assert!(h.informer.has_synced());
        rec.wait_until("the object", |ev| ev.len() == 1).await;
        create(&h.api, "b", "1").await; // and the watch is live
        rec.wait_until("a live event", |ev| ev.len() == 2).await;
        h.stop().await;
    }
}

/// 401 and 403 on WATCH only (LIST + WATCH mode): the LIST works, so the informer syncs and its
/// cache serves; each watch is refused, reported classified, and relisted after backoff (delays
/// by client-go's rule), one LIST and one WATCH per cycle; once the watch is allowed, changes
/// flow again without a restart.
#[tokio::test]
async fn refused_watches_keep_the_listed_cache_and_recover() {
    for (fault, kind) in [
        (RequestFault::unauthorized(), ErrorKind::Unauthorized),
        (RequestFault::forbidden(), ErrorKind::Forbidden),
    ] {
        let server = TestServer::start().await;
        let api = kube::Api::namespaced(server.client(), "default");
        create(&api, "a", "1").await;
        server.faults().fail_requests(usize::MAX / 2, fault.verb(Verb::Watch));
        let (mut h, rec, reported) = informer(server, false).await;
        h.informer.add_event_handler(rec.clone()).unwrap();
        h.start();
        h.synced().await;
        reported.wait_for(kind).await;
        let mut delays = Vec::new();
        for i in 0..10 {
            let before = h.server.request_log().entries().len();
            let d = backoff(&h).await;
            let requests = h.server.request_log().entries().len() - before;
            if i > 0 {
                assert!(requests <= 2, "{kind:?}: one LIST and one WATCH per cycle, got {requests}");
            }
            delays.push(d);
            h.clock.advance(d);
        }
        assert_back_to_back_delays(&delays, &format!("{kind:?}"));
        assert!(reported.kinds().iter().all(|k| *k == kind));
        assert_eq!(h.informer.lister().namespaced("default").list().len(), 1, "the listed cache serves");

        h.server.faults().clear();
        create(&h.api, "b", "1").await;
        let live = rec.wait_until("a live event after recovery", |ev| ev.iter().any(|e| e.name() == "b"));
        until_recovered(&h, live).await;
        h.stop().await;
    }
}

/// 429 with Retry-After on the LIST: reported as TooManyRequests, and the informer waits at least
/// what the server asked (45 s, beyond the 0.8 s backoff) before it tries again; then it syncs.
#[tokio::test]
async fn too_many_requests_on_list_waits_for_retry_after() {
    let server = TestServer::start().await;
    let api = kube::Api::namespaced(server.client(), "default");
    create(&api, "a", "1").await;
    server.faults().fail_requests(2, RequestFault::too_many_requests(45).verb(Verb::List));
    let (mut h, rec, reported) = informer(server, false).await;
    h.informer.add_event_handler(rec.clone()).unwrap();
    h.start();
    for _ in 0..2 {
        let d = backoff(&h).await;
        assert!(d >= Duration::from_secs(45), "Retry-After honoured: {d:?}");
        assert!(!h.informer.has_synced());
        h.clock.advance(d);
    }
    h.synced().await;
    assert_eq!(reported.kinds(), [ErrorKind::TooManyRequests, ErrorKind::TooManyRequests]);
    rec.wait_until("the object", |ev| ev.len() == 1).await;
    h.stop().await;
}

/// 429 with Retry-After when opening the WATCH: client-go backs off and re-watches from the same
/// resource version without relisting and without calling the error handler; so does kcache,
/// waiting at least the Retry-After.
#[tokio::test]
async fn too_many_requests_on_watch_rewatches_after_retry_after_without_relisting() {
    let server = TestServer::start().await;
    let api = kube::Api::namespaced(server.client(), "default");
    create(&api, "a", "1").await;
    server.faults().fail_requests(1, RequestFault::too_many_requests(20).verb(Verb::Watch));
    let (mut h, rec, reported) = informer(server, false).await;
    h.informer.add_event_handler(rec.clone()).unwrap();
    h.start();
    h.synced().await;
    let d = backoff(&h).await;
    assert!(d >= Duration::from_secs(20), "Retry-After honoured: {d:?}");
    create(&h.api, "b", "1").await;
    h.clock.advance(d);
    rec.wait_until("the watch resumed", |ev| ev.iter().any(|e| e.name() == "b")).await;
    assert_eq!(h.server.request_log().count(Verb::List), 1, "no relist");
    assert!(reported.kinds().is_empty(), "handled inside the watch loop: {:?}", reported.kinds());
    h.stop().await;
}
