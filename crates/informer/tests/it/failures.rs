//! Fatal failures never hide behind a healthy face: an index function that fails for an object,
//! a transform that panics after sync, and a panic in a handler whose policy makes it fatal each
//! stop the informer, and the failure reaches `run`'s caller, the factory's `wait_for_failure`,
//! the health checks, `has_synced` (false) and the `failure()` of registrations and listers; it
//! is logged at error level without the object and counted through `InformerMetrics`; under
//! `FailurePolicy::Abort` the process aborts, as client-go's does. Panics of handlers with the
//! default policy are counted and logged too. client-go crashes in each case
//! (`storeIndex.updateSingleIndex` panics; `utilruntime.HandleCrash` re-panics with `ReallyCrash`
//! true); each test names the function it mirrors.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Harness, Recorder, create, update};
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_informer::{
    FailureCause, FailurePolicy, HandlerOptions, HealthState, InformerError, InformerFailure,
    InformerMetrics, InformerScope, PanicPolicy, SharedInformerFactory,
};
use kcache_store::{IndexError, StoreError, index_func};
use kcache_testserver::TestServer;
use kube::api::PostParams;

/// What the informer reported through [`InformerMetrics`].
#[derive(Debug, Default)]
struct Counted {
    /// `informer:cause` per failure.
    failures: Mutex<Vec<String>>,
    /// `informer:handler` per panic.
    panics: Mutex<Vec<String>>,
}

impl InformerMetrics for Counted {
    fn informer_failed(&self, failure: &InformerFailure) {
        self.failures.lock().unwrap().push(format!("{}:{}", failure.informer(), failure.cause().label()));
    }
    fn handler_panicked(&self, informer: &str, handler: &str) {
        self.panics.lock().unwrap().push(format!("{informer}:{handler}"));
    }
}

impl Counted {
    fn failures(&self) -> Vec<String> {
        self.failures.lock().unwrap().clone()
    }
    fn panics(&self) -> Vec<String> {
        self.panics.lock().unwrap().clone()
    }
}

/// A value only an index function's error quotes: it must never be logged.
const QUOTED: &str = "index-error-quotes-this-Wm3q";

/// An index `by-v` over `data.v` that fails for the value "bad", quoting [`QUOTED`].
fn failing_index() -> kcache_store::Indexers<ConfigMap> {
    [(
        "by-v".to_string(),
        index_func(|cm: &ConfigMap| match common::value(cm).as_str() {
            "bad" => Err(format!("cannot index {QUOTED}").into()),
            v => Ok(vec![v.to_owned()]),
        }),
    )]
    .into()
}

/// Starts `h`'s informer in a task that returns what `run` returned.
fn spawn_run(h: &Harness) -> tokio::task::JoinHandle<Result<(), InformerError>> {
    let (informer, cancel) = (h.informer.clone(), h.cancel.clone());
    tokio::spawn(async move { informer.run(cancel).await })
}

/// Waits for `run` to return its failure.
async fn failure_of(run: tokio::task::JoinHandle<Result<(), InformerError>>) -> InformerFailure {
    let result = tokio::time::timeout(Duration::from_secs(20), run).await.expect("run returns").unwrap();
    match result {
        Err(InformerError::Failed(f)) => f,
        other => panic!("expected a failure, got {other:?}"),
    }
}

/// The capture's lines that mention `needle`.
fn log_lines(needle: &str) -> Vec<String> {
    common::capture().text().lines().filter(|l| l.contains(needle)).map(str::to_owned).collect()
}

/// The capture's error lines that mention `needle`.
fn error_lines(needle: &str) -> Vec<String> {
    log_lines(needle).into_iter().filter(|l| l.contains("ERROR")).collect()
}

/// Mirrors client-go thread_safe_store.go `storeIndex.updateSingleIndex`, which panics when an
/// index function fails (and, unrecovered, the process dies): an update whose new state the
/// index function cannot index fails the informer, for both FIFOs. `run` returns the failure
/// (the store's error names the key and the index); the informer and the registration stop
/// reporting synced and report the failure, as do its lister and health; the cache keeps the
/// object's last applied state and the handler never hears of the change; the failure is
/// logged once at error level with the key and index but without the index function's error
/// (which quotes the object), and counted.
///
/// Regression: the failure was logged and skipped; `has_synced` stayed true while the cache
/// lagged the server for good.
#[tokio::test]
async fn an_index_function_failing_after_sync_fails_the_informer() {
    let _capture = common::capture();
    for (kind, name) in [
        (kcache_informer::FifoKind::InOrder, "idx-in-order"),
        (kcache_informer::FifoKind::DeltaFifo, "idx-delta"),
    ] {
        let h = Harness::new(Duration::ZERO).await;
        h.informer.set_fifo(kind).unwrap();
        let metrics = Arc::new(Counted::default());
        h.informer.set_metrics(metrics.clone()).unwrap();
        h.informer.add_indexers(failing_index()).unwrap();
        create(&h.api, name, "1").await;
        let rec = Recorder::new();
        let reg = h.informer.add_event_handler(rec.clone()).unwrap();
        let run = spawn_run(&h);
        h.synced().await;
        rec.wait_until("the initial add", |ev| ev.len() == 1).await;
        assert!(h.informer.health().is_ready());

        update(&h.api, name, "bad").await;
        let failure = failure_of(run).await;
        assert_eq!(failure.informer(), "ConfigMap");
        assert_eq!(failure.to_string(), r#"informer "ConfigMap" failed: the cache could not apply a change"#);
        let FailureCause::Cache(e) = failure.cause() else { panic!("{failure:?}") };
        let StoreError::Index(IndexError::IndexFunc { key, index, .. }) = &**e else { panic!("{e:?}") };
        assert_eq!((key.as_str(), index.as_str()), (format!("default/{name}").as_str(), "by-v"));

        assert!(!h.informer.has_synced(), "{kind:?}: a failed informer is not synced");
        assert!(h.informer.is_stopped());
        assert!(h.informer.failure().is_some());
        assert!(matches!(h.informer.health().state, HealthState::Failed(_)));
        assert!(!h.informer.health().is_ready());
        assert!(!reg.has_synced(), "nor is its registration");
        assert!(reg.failure().is_some());
        let lister = h.informer.lister();
        assert!(lister.failure().is_some() && lister.namespaced("default").failure().is_some());
        let cached = lister.get(&format!("default/{name}")).expect("the last applied state");
        assert_eq!(common::value(&cached), "1", "the cache kept the state before the failed change");
        assert_eq!(rec.events().len(), 1, "the handler never heard of the change: {:?}", rec.events());
        assert_eq!(metrics.failures(), ["ConfigMap:cache"]);

        let logged = error_lines(&format!("default/{name}"));
        assert_eq!(logged.len(), 1, "logged once: {logged:#?}");
        assert!(logged[0].contains("informer failed"), "{}", logged[0]);
        assert!(logged[0].contains("by-v"), "the index is named: {}", logged[0]);
        assert!(log_lines(QUOTED).is_empty(), "the index function's error is never logged");
    }
}

/// Mirrors client-go thread_safe_store.go `storeIndex.updateSingleIndex` during the initial
/// list, with shared_informer.go `WaitForCacheSync`: an object of the initial list that cannot be
/// indexed fails the informer before it syncs, so waiting for the cache ends, unsynced, and the
/// health check says why.
///
/// Regression: the failed item counted as delivered and the informer reported synced with an
/// object missing from its cache.
#[tokio::test]
async fn an_index_failure_in_the_initial_list_leaves_the_informer_unsynced() {
    let h = Harness::new(Duration::ZERO).await;
    for n in ["initial-a", "initial-b"] {
        create(&h.api, n, "bad").await;
    }
    h.informer.add_indexers(failing_index()).unwrap();
    let reg = h.informer.add_event_handler(Recorder::new()).unwrap();
    let run = spawn_run(&h);
    let waited = tokio::time::timeout(
        Duration::from_secs(20),
        kcache_informer::wait_for_cache_sync(&h.cancel, &[&h.informer, &reg]),
    )
    .await;
    assert_eq!(waited, Ok(false), "the wait ends, unsynced");
    let failure = failure_of(run).await;
    assert!(matches!(failure.cause(), FailureCause::Cache(_)), "{failure:?}");
    assert!(!h.informer.has_synced() && !reg.has_synced());
    let health = h.informer.health();
    assert_eq!(health.to_string(), "ConfigMap: failed: the cache could not apply a change");
}

/// Mirrors client-go reflector.go `Reflector.Run` (`wait.BackoffUntil`, whose
/// `utilruntime.HandleCrash` re-raises a panic in the transform the DeltaFIFO calls) with
/// informers/factory.go `sharedInformerFactory.WaitForCacheSync`: a transform that panics after
/// the factory's informer synced fails it. The factory hands the failure to `wait_for_failure`
/// at once, and still after `shutdown`; its health names the informer and the cause; the
/// informer, its registration and its lister report it, and none reports synced.
///
/// Regression: the factory dropped the error; registrations kept reporting `has_synced` and
/// listers served the frozen cache with no way to tell.
#[tokio::test]
async fn a_transform_panic_after_sync_reaches_the_factory() {
    let server = TestServer::start().await;
    let api: kube::Api<ConfigMap> = kube::Api::namespaced(server.client(), "default");
    create(&api, "a", "1").await;
    let metrics = Arc::new(Counted::default());
    let factory = SharedInformerFactory::new(server.client(), Duration::ZERO).metrics(metrics.clone());
    let informer = factory.informer::<ConfigMap>(&InformerScope::namespace("default"));
    informer
        .set_transform(|cm: ConfigMap| {
            assert!(common::name(&cm) != "boom", "transform cannot handle this object");
            cm
        })
        .unwrap();
    let reg = informer.add_event_handler(Recorder::new()).unwrap();
    factory.start();
    assert!(factory.wait_for_cache_sync().await);
    assert!(factory.health().is_ready(), "{}", factory.health());
    // The factory waits for its informers; a registration is synced once its handler has also
    // been handed every object of the initial list, which may come a moment later.
    let never = tokio_util::sync::CancellationToken::new();
    assert!(kcache_informer::wait_for_cache_sync(&never, &[&reg]).await);

    create(&api, "boom", "1").await;
    let failure = tokio::time::timeout(Duration::from_secs(20), factory.wait_for_failure())
        .await
        .expect("the factory hears of the failure")
        .expect("a failure, not a shutdown");
    let name = informer.name().to_owned();
    assert_eq!(failure.informer(), name);
    let FailureCause::ReflectorPanicked(message) = failure.cause() else { panic!("{failure:?}") };
    assert!(message.contains("transform cannot handle this object"), "{message}");
    assert_eq!(failure.to_string(), format!("informer {name:?} failed: the reflector task panicked"));

    assert!(!informer.has_synced() && !reg.has_synced());
    assert!(reg.failure().is_some() && informer.lister().failure().is_some());
    let health = factory.health();
    assert!(!health.is_ready());
    assert_eq!(health.failures().map(InformerFailure::informer).collect::<Vec<_>>(), [name.as_str()]);
    assert_eq!(health.to_string(), format!("{name}: failed: the reflector task panicked"));
    assert_eq!(metrics.failures(), [format!("{name}:reflector_panic")]);
    assert!(!factory.wait_for_cache_sync().await, "a failed informer is not synced");

    factory.shutdown().await;
    let after = factory.wait_for_failure().await.expect("the failure is kept");
    assert_eq!(after.informer(), name);
}

/// The other half of `SharedInformerFactory::wait_for_failure`'s contract (client-go has no
/// counterpart: there a failure is a crash): a factory shut down without a failure ends the wait
/// with `None`, and its informers report stopped, not failed.
#[tokio::test]
async fn a_clean_shutdown_ends_the_wait_for_failure_with_none() {
    let server = TestServer::start().await;
    let factory = Arc::new(SharedInformerFactory::new(server.client(), Duration::ZERO));
    let informer = factory.informer::<ConfigMap>(&InformerScope::namespace("default"));
    factory.start();
    assert!(factory.wait_for_cache_sync().await);
    let waiting = tokio::spawn({
        let factory = Arc::clone(&factory);
        async move { factory.wait_for_failure().await }
    });
    factory.shutdown().await;
    let waited =
        tokio::time::timeout(Duration::from_secs(20), waiting).await.expect("the wait ends").unwrap();
    assert!(waited.is_none(), "{waited:?}");
    assert!(matches!(informer.health().state, HealthState::Stopped));
    assert!(informer.has_synced(), "a cancelled informer keeps its last state and stays synced");
}

/// Mirrors client-go shared_informer.go `processorListener.run`, whose
/// `utilruntime.HandleCrash` re-raises a handler's panic (`ReallyCrash` is true by default):
/// a handler registered with `PanicPolicy::FailInformer` that panics fails the informer
/// (`FailureCause::HandlerPanicked`, naming the handler; its message kept out of `Display`);
/// the informer stops with every handler. The panic is counted twice over: the registration's
/// `panics()` and the metric.
#[tokio::test]
async fn a_handler_panic_under_fail_informer_fails_the_informer() {
    let h = Harness::new(Duration::ZERO).await;
    let metrics = Arc::new(Counted::default());
    h.informer.set_metrics(metrics.clone()).unwrap();
    let strict = Recorder { panic_on: Some("boom".into()), ..Recorder::new() };
    let strict_reg = h
        .informer
        .add_event_handler_with_options(
            strict.clone(),
            HandlerOptions {
                name: Some("strict".into()),
                on_panic: PanicPolicy::FailInformer,
                ..HandlerOptions::default()
            },
        )
        .unwrap();
    let other = Recorder::new();
    let other_reg = h.informer.add_event_handler(other.clone()).unwrap();
    let run = spawn_run(&h);
    h.synced().await;

    create(&h.api, "boom", "1").await;
    let failure = failure_of(run).await;
    let FailureCause::HandlerPanicked { handler, message } = failure.cause() else { panic!("{failure:?}") };
    assert_eq!(handler, "strict");
    assert!(message.contains("handler asked to panic"), "{message}");
    assert_eq!(failure.to_string(), r#"informer "ConfigMap" failed: event handler "strict" panicked"#);
    assert_eq!(strict_reg.panics(), 1);
    assert_eq!(strict_reg.delivered(), 0, "the notification that panicked was not delivered");
    assert_eq!(metrics.panics(), ["ConfigMap:strict"]);
    assert_eq!(metrics.failures(), ["ConfigMap:handler_panic"]);
    assert!(h.informer.is_stopped() && !other_reg.has_synced() && other_reg.failure().is_some());
    assert!(matches!(h.informer.health().state, HealthState::Failed(_)));

    // Nothing reaches any handler any more.
    h.api.create(&PostParams::default(), &common::cm("after", "1")).await.unwrap();
    assert!(other.of("after").is_empty());
}

/// Mirrors client-go shared_informer.go `processorListener.run` with `utilruntime.ReallyCrash`
/// false (`HandleCrash` logs the panic, the notification is skipped, the listener goes on):
/// under the default `PanicPolicy::Continue` every panic is logged at error level (naming the
/// informer and the handler, never the panic's message) and counted, and the informer stays
/// healthy.
///
/// Regression: panics were counted only in the registration, with no metric.
#[tokio::test]
async fn every_handler_panic_is_counted_and_logged() {
    let _capture = common::capture();
    let mut h = Harness::new(Duration::ZERO).await;
    let metrics = Arc::new(Counted::default());
    h.informer.set_metrics(metrics.clone()).unwrap();
    let lenient = Recorder { panic_on: Some("boom".into()), ..Recorder::new() };
    let reg = h
        .informer
        .add_event_handler_with_options(
            lenient.clone(),
            HandlerOptions { name: Some("lenient-handler-7Qx".into()), ..HandlerOptions::default() },
        )
        .unwrap();
    h.start();
    h.synced().await;
    create(&h.api, "boom", "1").await;
    create(&h.api, "after", "1").await;
    lenient.wait_until("the event after the panic", |ev| ev.iter().any(|e| e.name() == "after")).await;

    assert_eq!(reg.panics(), 1);
    assert_eq!(metrics.panics(), ["ConfigMap:lenient-handler-7Qx"]);
    assert!(metrics.failures().is_empty());
    assert!(h.informer.health().is_ready() && reg.has_synced());
    let logged = error_lines("lenient-handler-7Qx");
    assert_eq!(logged.len(), 1, "{logged:#?}");
    assert!(logged[0].contains("panicked"), "{}", logged[0]);
    assert!(!logged[0].contains("handler asked to panic"), "no panic message: {}", logged[0]);
    h.stop().await;
}

/// The environment variable that turns [`abort_policy_child`] into the child process of
/// [`the_abort_policy_aborts_the_process`], naming the failure to cause.
const ABORT_CHILD: &str = "KCACHE_INFORMER_ABORT_CHILD";

/// Mirrors apimachinery runtime.go `HandleCrash` with `ReallyCrash = true` (client-go's
/// default), which is what kills a client-go process on an index failure
/// (`storeIndex.updateSingleIndex`'s panic) or a handler's panic (`processorListener.run`):
/// under `FailurePolicy::Abort` each aborts the process (SIGABRT), right after the error line.
/// Each case runs in a child process: this test binary, running only [`abort_policy_child`].
#[cfg(unix)]
#[test]
fn the_abort_policy_aborts_the_process() {
    use std::os::unix::process::ExitStatusExt;

    for case in ["index", "handler"] {
        // Through `sh` only to forbid a core dump (`ulimit -c 0`), which would otherwise land in
        // the crate's directory wherever core dumps are enabled; `exec` keeps the child's signal.
        let out = std::process::Command::new("sh")
            .args(["-c", r#"ulimit -c 0; exec "$0" "$@""#])
            .arg(std::env::current_exe().unwrap())
            .args(["--exact", "failures::abort_policy_child", "--nocapture", "--test-threads=1"])
            .env(ABORT_CHILD, case)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        // SIGABRT is 6 on every unix Rust supports.
        assert_eq!(
            out.status.signal(),
            Some(6),
            "{case}: {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
            out.status
        );
        assert!(stdout.contains("child: synced, failing now"), "{case}: the child got that far\n{stdout}");
        assert!(stderr.contains("informer failed"), "{case}: the failure is logged first\n{stderr}");
        assert!(stderr.contains("aborting the process (FailurePolicy::Abort)"), "{case}\n{stderr}");
    }
}

/// Not a test on its own: the child process of [`the_abort_policy_aborts_the_process`]; without
/// its environment variable it returns at once. With it, it runs an informer under
/// `FailurePolicy::Abort` into an index failure or a `FailInformer` handler's panic, and must
/// never return.
#[tokio::test]
async fn abort_policy_child() {
    let Ok(case) = std::env::var(ABORT_CHILD) else { return };
    // This process runs no other test, so this is the only subscriber; stderr is written at once.
    tracing_subscriber::fmt().with_writer(std::io::stderr).with_ansi(false).init();
    let mut h = Harness::new(Duration::ZERO).await;
    h.informer.set_failure_policy(FailurePolicy::Abort).unwrap();
    h.informer.add_indexers(failing_index()).unwrap();
    let panicking = Recorder { panic_on: Some("boom".into()), ..Recorder::new() };
    h.informer
        .add_event_handler_with_options(
            panicking,
            HandlerOptions { on_panic: PanicPolicy::FailInformer, ..HandlerOptions::default() },
        )
        .unwrap();
    h.start();
    h.synced().await;
    println!("child: synced, failing now");
    match case.as_str() {
        "index" => create(&h.api, "unindexable", "bad").await,
        _ => create(&h.api, "boom", "1").await,
    }
    let task = h.task.take().unwrap();
    let _ = tokio::time::timeout(Duration::from_secs(20), task).await;
    panic!("the process should have aborted");
}

/// `SharedIndexInformer::wait_for_failure` completes with the failure of an informer that
/// something else runs (a factory, say), and at once when it has failed already: the
/// per-informer counterpart of the factory's `wait_for_failure`, for a controller that reads one
/// informer of a shared factory.
///
/// Regression: nothing but the factory's first failure (of any informer) could be awaited.
#[tokio::test]
async fn an_informer_can_be_waited_on_for_its_failure() {
    let h = Harness::new(Duration::ZERO).await;
    h.informer.add_indexers(failing_index()).unwrap();
    create(&h.api, "waited", "1").await;
    let waiter = tokio::spawn({
        let informer = h.informer.clone();
        async move { informer.wait_for_failure().await }
    });
    let run = spawn_run(&h);
    h.synced().await;
    update(&h.api, "waited", "bad").await;
    let failure = tokio::time::timeout(Duration::from_secs(20), waiter).await.expect("completes").unwrap();
    assert_eq!(failure.informer(), "ConfigMap");
    assert!(matches!(failure.cause(), FailureCause::Cache(_)));
    assert_eq!(failure_of(run).await.to_string(), failure.to_string());
    let again = tokio::time::timeout(Duration::from_secs(20), h.informer.wait_for_failure()).await;
    assert_eq!(again.expect("at once").to_string(), failure.to_string());
}
