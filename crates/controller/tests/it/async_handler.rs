//! `AsyncHandler`: an async fn as an informer event handler, run on the application's runtime,
//! with the backpressure its docs promise. Without it, `tokio::spawn` in a handler panics: a
//! listener thread has no Tokio context.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kcache_controller::{AsyncHandler, Notification};
use kcache_informer::{EventHandlerFuncs, HandlerRegistration, SharedIndexInformer, wait_for_cache_sync};
use kcache_testserver::TestServer;
use kube::api::Api;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::common::{Signal, TIMEOUT, cm, create};

struct Setup {
    _server: TestServer,
    cms: Api<ConfigMap>,
    informer: SharedIndexInformer<ConfigMap>,
    cancel: CancellationToken,
}

async fn setup() -> Setup {
    let server = TestServer::start().await;
    let cms = Api::<ConfigMap>::namespaced(server.client(), "default");
    let informer = SharedIndexInformer::from_api(cms.clone(), Duration::ZERO);
    Setup { _server: server, cms, informer, cancel: CancellationToken::new() }
}

impl Setup {
    async fn start(&self, registrations: &[&HandlerRegistration<ConfigMap>]) {
        tokio::spawn({
            let (informer, cancel) = (self.informer.clone(), self.cancel.clone());
            async move { informer.run(cancel).await }
        });
        let mut all: Vec<&dyn kcache_informer::HasSynced> = vec![&self.informer];
        all.extend(registrations.iter().map(|r| *r as &dyn kcache_informer::HasSynced));
        let synced = tokio::time::timeout(TIMEOUT, wait_for_cache_sync(&self.cancel, &all)).await;
        assert!(matches!(synced, Ok(true)));
    }
}

fn name(n: &Notification<ConfigMap>) -> String {
    match n {
        Notification::Add { object, .. } => object.metadata.name.clone().unwrap_or_default(),
        Notification::Update { new, .. } => new.metadata.name.clone().unwrap_or_default(),
        Notification::Delete(gone) => gone.object().metadata.name.clone().unwrap_or_default(),
    }
}

/// A plain handler that calls `tokio::spawn` panics (no reactor on a listener thread: the
/// panic is caught and counted), while an `AsyncHandler`'s future runs on the runtime, where
/// `tokio::spawn` and timers work. (client-go's `processorListener.run` calls a handler on a
/// goroutine of its own, where anything can run; the Rust counterpart needs the runtime's
/// handle.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_spawn_panics_in_a_plain_handler_and_works_in_an_async_handler() {
    let s = setup().await;
    let plain_seen = Signal::default();
    let seen = plain_seen.clone();
    let plain = s
        .informer
        .add_event_handler(EventHandlerFuncs::new().on_add(move |cm: &Arc<ConfigMap>, _| {
            seen.record(cm.metadata.name.clone().unwrap_or_default());
            tokio::spawn(async {});
        }))
        .unwrap();
    let async_seen = Signal::default();
    let seen = async_seen.clone();
    let handler = AsyncHandler::new(move |n: Notification<ConfigMap>| {
        let seen = seen.clone();
        async move {
            let spawned = tokio::spawn(async move { name(&n) }).await.unwrap();
            tokio::time::sleep(Duration::from_millis(1)).await; // a timer works here
            seen.record(spawned);
        }
    });
    let reg = s.informer.add_event_handler(handler).unwrap();
    s.start(&[&plain, &reg]).await;
    create(&s.cms, &cm("a", &[], &[])).await;
    create(&s.cms, &cm("b", &[], &[])).await;
    async_seen.wait_for("both through the async handler", |e| e.len() == 2).await;
    plain_seen.wait_for("both through the plain handler", |e| e.len() == 2).await;
    // The plain handler's first call had panicked (and was counted) before its second began.
    assert!(plain.panics() >= 1);
    assert_eq!(reg.panics(), 0);
    assert_eq!(async_seen.events(), ["a", "b"]);
    s.cancel.cancel();
}

/// One call at a time, in the informer's order; while a call waits, the notifications that
/// follow wait in this handler's own buffer (its backlog) and another handler keeps up
/// (client-go's `processorListener`: `add` never blocks the distributor, `pop` and `run`
/// deliver in order, each listener behind its own buffer).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_run_in_order_and_a_slow_one_backs_up_only_its_own_handler() {
    let s = setup().await;
    let release = Arc::new(Notify::new());
    let async_seen = Signal::default();
    let (seen, gate) = (async_seen.clone(), Arc::clone(&release));
    let handler = AsyncHandler::new(move |n: Notification<ConfigMap>| {
        let (seen, gate) = (seen.clone(), Arc::clone(&gate));
        async move {
            let name = name(&n);
            seen.record(format!("start {name}"));
            if name == "a" {
                gate.notified().await;
            }
            seen.record(format!("end {name}"));
        }
    });
    // Registered first, so each notification reaches it before the fast handler.
    let slow = s.informer.add_event_handler(handler).unwrap();
    let fast_seen = Signal::default();
    let seen = fast_seen.clone();
    let fast = s
        .informer
        .add_event_handler(
            EventHandlerFuncs::new()
                .on_add(move |cm: &Arc<ConfigMap>, _| seen.record(cm.metadata.name.clone().unwrap())),
        )
        .unwrap();
    s.start(&[&slow, &fast]).await;
    for name in ["a", "b", "c"] {
        create(&s.cms, &cm(name, &[], &[])).await;
    }
    fast_seen.wait_for("the fast handler saw all three", |e| e.len() == 3).await;
    async_seen.wait_for("a started", |e| !e.is_empty()).await;
    assert_eq!(async_seen.events(), ["start a"]);
    assert_eq!(slow.pending(), 2, "b and c wait in the slow handler's buffer");
    assert_eq!(fast.pending(), 0);
    release.notify_one();
    async_seen.wait_for("all three, in order", |e| e.len() == 6).await;
    assert_eq!(async_seen.events(), ["start a", "end a", "start b", "end b", "start c", "end c"]);
    s.cancel.cancel();
}

/// A panic in an in-order call is the handler's panic: re-raised on its listener thread, caught
/// and counted by the informer, which goes on with the next notification (client-go's
/// `processorListener.run` under `HandleCrash`, shared_informer_test.go `TestEventPanics` with
/// `ReallyCrash = false`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_in_a_call_is_the_handlers_panic() {
    let s = setup().await;
    let seen = Signal::default();
    let record = seen.clone();
    let handler = AsyncHandler::new(move |n: Notification<ConfigMap>| {
        let record = record.clone();
        async move {
            let name = name(&n);
            assert_ne!(name, "a", "a panics");
            record.record(name);
        }
    });
    let reg = s.informer.add_event_handler(handler).unwrap();
    s.start(&[&reg]).await;
    create(&s.cms, &cm("a", &[], &[])).await;
    create(&s.cms, &cm("b", &[], &[])).await;
    seen.wait_for("b", |e| e.len() == 1).await;
    assert_eq!(reg.panics(), 1);
    s.cancel.cancel();
}

/// With `max_in_flight(2)` two calls run at once: each of the first two waits for the other
/// (a barrier of two), which one call at a time could never pass. No upstream counterpart:
/// client-go's handlers are synchronous.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_in_flight_lets_calls_overlap() {
    let s = setup().await;
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let seen = Signal::default();
    let (record, b) = (seen.clone(), Arc::clone(&barrier));
    let handler = AsyncHandler::new(move |n: Notification<ConfigMap>| {
        let (record, b) = (record.clone(), Arc::clone(&b));
        async move {
            b.wait().await;
            record.record(name(&n));
        }
    })
    .max_in_flight(2);
    let reg = s.informer.add_event_handler(handler).unwrap();
    s.start(&[&reg]).await;
    create(&s.cms, &cm("a", &[], &[])).await;
    create(&s.cms, &cm("b", &[], &[])).await;
    seen.wait_for("both past the barrier", |e| e.len() == 2).await;
    s.cancel.cancel();
}
