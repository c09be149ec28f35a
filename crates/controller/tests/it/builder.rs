//! The builder's steps, each against kcache-testserver: what `owns`, `watches` and the `Watch`
//! filters enqueue (controller-runtime's `EnqueueRequestForOwner`, `EnqueueRequestsFromMapFunc`
//! and predicates), how a reconcile ends (kube-runtime's `Action`, the error policy, panics),
//! gone objects, sync before work, draining shutdown, the gate and shard hooks, a shared factory
//! and an informer failure.
//!
//! "Not enqueued" is checked without waiting for nothing to happen: the event that must be
//! dropped is caused *before* an event that must be reconciled, on the same informer (so the
//! same handler thread sees them in that order), and with one worker the queue hands keys out
//! in order; when the second reconcile is seen, a wrongly enqueued first key would have been
//! reconciled already.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, PodSpec, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kcache_controller::{
    Action, Context, Controller, ControllerError, ControllerMetrics, ControllerState, ObjectKey,
    ReconcileOutcome, Retry, Watch, WorkGate,
};
use kcache_informer::{InformerScope, SharedInformerFactory};
use kcache_reflector::FakeClock;
use kcache_store::{Indexers, index_func};
use kcache_testserver::{TestServer, Verb};
use kcache_workqueue::{
    CounterMetric, GaugeMetric, HistogramMetric, MetricsProvider, NoopMetric, SettableGaugeMetric,
};
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use kube::core::Selector;

use crate::common::{Running, Signal, cm, create};

fn name_of(cm: &ConfigMap) -> String {
    cm.metadata.name.clone().unwrap_or_default()
}

/// A reconcile that records `reconcile <name>`, and an on_gone that records `gone <key>`.
fn recording(
    controller: Controller<ConfigMap>,
    signal: &Signal,
) -> Controller<ConfigMap, Signal, kcache_controller::Reconciler<ConfigMap, Signal, Infallible>> {
    controller
        .context(signal.clone())
        .reconcile(|cm: Arc<ConfigMap>, ctx: Context<Signal>| async move {
            ctx.record(format!("reconcile {}", name_of(&cm)));
            Ok::<_, Infallible>(Action::await_change())
        })
        .on_gone(|key: ObjectKey<ConfigMap>, ctx: Context<Signal>| async move {
            ctx.record(format!("gone {key}"));
            Ok::<_, Infallible>(Action::await_change())
        })
}

fn count(events: &[String], event: &str) -> usize {
    events.iter().filter(|e| *e == event).count()
}

fn owner_ref(kind: &str, name: &str, controller: Option<bool>) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: kind.into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        controller,
        ..OwnerReference::default()
    }
}

fn secret(name: &str, owners: Vec<OwnerReference>, annotations: &[(&str, &str)]) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            owner_references: Some(owners),
            annotations: Some(annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            ..ObjectMeta::default()
        },
        ..Secret::default()
    }
}

/// `owns::<Secret>()` enqueues the controller owner of a Secret when it is a ConfigMap, and
/// nothing for an owner reference that is not the controller's or names another kind
/// (controller-runtime's enqueue_owner_test.go cases for `OnlyControllerOwner`: "should enqueue
/// a Request with the Owner of the object", "should not enqueue if there are no owners matching
/// Group and Kind", "should not enqueue ... if the OwnerReference is not the controller"). The
/// reconcile reads what it owns through the owner index.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owns_enqueues_only_the_controller_owner_of_the_primary_kind() {
    // Without a garbage collector, as controller-runtime's envtest: the owner references name
    // made-up uids (and a Pod that does not exist), which a collector would delete the Secrets for.
    let server = TestServer::builder().garbage_collection(false).start().await;
    let cms = Api::<ConfigMap>::namespaced(server.client(), "default");
    let secrets = Api::<Secret>::namespaced(server.client(), "default");
    let signal = Signal::default();
    let controller = Controller::<ConfigMap>::new(server.client(), Watch::namespace("default"))
        .owns::<Secret>(Watch::namespace("default"))
        .context(signal.clone())
        .reconcile(|cm: Arc<ConfigMap>, ctx: Context<Signal>| async move {
            let mut owned: Vec<String> =
                ctx.owned::<Secret>().iter().map(|s| s.metadata.name.clone().unwrap_or_default()).collect();
            owned.sort();
            ctx.record(format!("reconcile {} owns {owned:?}", name_of(&cm)));
            Ok::<_, Infallible>(Action::await_change())
        });
    let running = Running::spawn(move |cancel| controller.run(cancel));
    create(&cms, &cm("a", &[], &[])).await;
    create(&cms, &cm("b", &[], &[])).await;
    signal.wait_for("both initial reconciles", |e| e.len() >= 2).await;

    create(&secrets, &secret("not-controller", vec![owner_ref("ConfigMap", "a", None)], &[])).await;
    create(&secrets, &secret("other-kind", vec![owner_ref("Pod", "a", Some(true))], &[])).await;
    create(&secrets, &secret("owned", vec![owner_ref("ConfigMap", "b", Some(true))], &[])).await;
    signal.wait_for("b reconciled for its Secret", |e| e.len() >= 3).await;
    assert_eq!(signal.events()[2], r#"reconcile b owns ["owned"]"#);
    running.stop().await.unwrap();
}

/// `watches::<Secret>(mapper)` enqueues the keys the mapper returns, for the old and the new
/// object of an update (controller-runtime's `EnqueueRequestsFromMapFunc`: "should enqueue
/// mapped objects on update for both old and new").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_enqueue_the_mapped_keys_of_old_and_new() {
    let server = TestServer::start().await;
    let cms = Api::<ConfigMap>::namespaced(server.client(), "default");
    let secrets = Api::<Secret>::namespaced(server.client(), "default");
    let signal = Signal::default();
    let controller = Controller::<ConfigMap>::new(server.client(), Watch::namespace("default"))
        .watches::<Secret, _>(Watch::namespace("default"), |s: &Secret| {
            let target = s.metadata.annotations.as_ref().and_then(|a| a.get("config"));
            target.map(|name| ObjectKey::new(s.metadata.namespace.as_deref(), name))
        });
    let controller = recording(controller, &signal);
    let running = Running::spawn(move |cancel| controller.run(cancel));
    create(&cms, &cm("a", &[], &[])).await;
    create(&cms, &cm("b", &[], &[])).await;
    signal.wait_for("both initial reconciles", |e| e.len() >= 2).await;

    create(&secrets, &secret("pointer", vec![], &[("config", "a")])).await;
    signal.wait_for("a reconciled for the Secret", |e| count(e, "reconcile a") >= 2).await;
    let mut pointer = secrets.get("pointer").await.unwrap();
    pointer.metadata.annotations = Some(BTreeMap::from([("config".to_string(), "b".to_string())]));
    secrets.replace("pointer", &PostParams::default(), &pointer).await.unwrap();
    signal
        .wait_for("a and b reconciled for the update", |e| {
            count(e, "reconcile a") >= 3 && count(e, "reconcile b") >= 2
        })
        .await;
    running.stop().await.unwrap();
}

/// A client-side label filter on the primary type: an object outside it is not reconciled, one
/// that enters it is, and one that leaves it is *gone* (`on_gone`), though it still exists.
/// Deliberately unlike controller-runtime's `LabelSelectorPredicate` (which looks only at the
/// new object of an update and so drops the departure).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_label_filter_treats_an_object_leaving_it_as_gone() {
    let server = TestServer::start().await;
    let cms = Api::<ConfigMap>::namespaced(server.client(), "default");
    let signal = Signal::default();
    let watch = Watch::namespace("default").filter_labels(Selector::from_iter([("app", "x")]));
    let controller = recording(Controller::<ConfigMap>::new(server.client(), watch), &signal);
    let running = Running::spawn(move |cancel| controller.run(cancel));
    create(&cms, &cm("a-plain", &[], &[])).await;
    create(&cms, &cm("b-labelled", &[("app", "x")], &[])).await;
    signal.wait_for("the labelled one", |e| !e.is_empty()).await;
    assert_eq!(signal.events(), ["reconcile b-labelled"]);

    let mut b = cms.get("b-labelled").await.unwrap();
    b.metadata.labels = None;
    cms.replace("b-labelled", &PostParams::default(), &b).await.unwrap();
    signal.wait_for("b gone", |e| e.len() >= 2).await;
    let mut a = cms.get("a-plain").await.unwrap();
    a.metadata.labels = Some(BTreeMap::from([("app".to_string(), "x".to_string())]));
    cms.replace("a-plain", &PostParams::default(), &a).await.unwrap();
    signal.wait_for("a entered", |e| e.len() >= 3).await;
    assert_eq!(signal.events(), ["reconcile b-labelled", "gone default/b-labelled", "reconcile a-plain"]);
    running.stop().await.unwrap();
}

fn pod(name: &str, image: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "c".into(),
                image: Some(image.into()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        ..Pod::default()
    }
}

/// `generation_changed()` drops updates that leave `metadata.generation` alone (a label
/// change) and keeps those that change it (a spec change) (controller-runtime's
/// predicate_test.go, `GenerationChangedPredicate`: "should return false when the generation
/// is unchanged", "should return true when the generation changed").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generation_changed_drops_updates_of_the_same_generation() {
    let server = TestServer::start().await;
    let pods = Api::<Pod>::namespaced(server.client(), "default");
    let signal = Signal::default();
    let controller =
        Controller::<Pod>::new(server.client(), Watch::namespace("default").generation_changed())
            .context(signal.clone())
            .reconcile(|p: Arc<Pod>, ctx: Context<Signal>| async move {
                let generation = p.metadata.generation.unwrap_or_default();
                ctx.record(format!("{} {generation}", p.metadata.name.clone().unwrap_or_default()));
                Ok::<_, Infallible>(Action::await_change())
            });
    let running = Running::spawn(move |cancel| controller.run(cancel));
    create(&pods, &pod("a", "one")).await;
    create(&pods, &pod("b", "one")).await;
    signal.wait_for("both pods", |e| e.len() >= 2).await;

    let mut a = pods.get("a").await.unwrap();
    a.metadata.labels = Some(BTreeMap::from([("new".to_string(), "label".to_string())]));
    pods.replace("a", &PostParams::default(), &a).await.unwrap();
    let mut b = pods.get("b").await.unwrap();
    b.spec.as_mut().unwrap().containers[0].image = Some("two".into());
    pods.replace("b", &PostParams::default(), &b).await.unwrap();
    signal.wait_for("b's new generation", |e| e.len() >= 3).await;
    assert_eq!(signal.events()[2], "b 2");
    running.stop().await.unwrap();
}

/// Counts the workqueue's effective adds.
#[derive(Debug, Default)]
struct Adds(Arc<AtomicUsize>);

impl CounterMetric for Adds {
    fn inc(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[derive(Default)]
struct CountingProvider {
    adds: Arc<AtomicUsize>,
    retries: Arc<AtomicUsize>,
}

impl MetricsProvider for CountingProvider {
    fn new_depth_metric(&self, _: &str) -> Arc<dyn GaugeMetric> {
        Arc::new(NoopMetric)
    }
    fn new_adds_metric(&self, _: &str) -> Arc<dyn CounterMetric> {
        Arc::new(Adds(Arc::clone(&self.adds)))
    }
    fn new_latency_metric(&self, _: &str) -> Arc<dyn HistogramMetric> {
        Arc::new(NoopMetric)
    }
    fn new_work_duration_metric(&self, _: &str) -> Arc<dyn HistogramMetric> {
        Arc::new(NoopMetric)
    }
    fn new_unfinished_work_seconds_metric(&self, _: &str) -> Arc<dyn SettableGaugeMetric> {
        Arc::new(NoopMetric)
    }
    fn new_longest_running_processor_seconds_metric(&self, _: &str) -> Arc<dyn SettableGaugeMetric> {
        Arc::new(NoopMetric)
    }
    fn new_retries_metric(&self, _: &str) -> Arc<dyn CounterMetric> {
        Arc::new(Adds(Arc::clone(&self.retries)))
    }
}

/// `resource_version_changed()` drops the unchanged updates of a periodic resync, which a
/// controller without it reconciles (controller-runtime's `ResourceVersionChangedPredicate`:
/// "should return false when the resource version is unchanged"). Two controllers share one
/// informer with a 1 s resync on a fake clock; the filtered one's queue gets no add from the
/// resync: when it reconciles a later real change, its queue has had exactly the adds of the
/// initial list and of that change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_version_changed_drops_resyncs() {
    let server = TestServer::start().await;
    let cms = Api::<ConfigMap>::namespaced(server.client(), "default");
    create(&cms, &cm("a", &[], &[])).await;
    create(&cms, &cm("b", &[], &[])).await;
    let factory = Arc::new(SharedInformerFactory::new(server.client(), Duration::from_secs(1)));
    let clock = FakeClock::new();
    factory.informer::<ConfigMap>(&InformerScope::namespace("default")).set_clock(clock.clone()).unwrap();

    let (plain, filtered) = (Signal::default(), Signal::default());
    let plain_controller = recording(
        Controller::<ConfigMap>::with_factory(Arc::clone(&factory), Watch::namespace("default"))
            .name("plain"),
        &plain,
    );
    let provider = CountingProvider::default();
    let adds = Arc::clone(&provider.adds);
    let filtered_controller = recording(
        Controller::<ConfigMap>::with_factory(
            Arc::clone(&factory),
            Watch::namespace("default").resource_version_changed(),
        )
        .name("filtered")
        .queue_metrics(Arc::new(provider)),
        &filtered,
    );
    let plain_running = Running::spawn(move |cancel| plain_controller.run(cancel));
    let filtered_running = Running::spawn(move |cancel| filtered_controller.run(cancel));
    plain.wait_for("plain's initial reconciles", |e| e.len() >= 2).await;
    filtered.wait_for("filtered's initial reconciles", |e| e.len() >= 2).await;

    let resync = clock.wait_for_sleep(|d| d == Duration::from_secs(1)).await;
    clock.advance(resync);
    plain.wait_for("plain reconciles the resync", |e| e.len() >= 4).await;
    let mut b = cms.get("b").await.unwrap();
    b.data = Some(BTreeMap::from([("v".to_string(), "2".to_string())]));
    cms.replace("b", &PostParams::default(), &b).await.unwrap();
    filtered.wait_for("filtered reconciles the real change", |e| e.len() >= 3).await;
    assert_eq!(filtered.events()[2], "reconcile b");
    assert_eq!(adds.load(Ordering::SeqCst), 3, "two initial adds and the change; none from the resync");
    plain_running.stop().await.unwrap();
    filtered_running.stop().await.unwrap();
    factory.shutdown().await;
}

/// A deleted object's key reaches `on_gone`; without `on_gone` it is not reconciled at all
/// (kube-runtime's `Controller` reports `ObjectNotFound` and calls nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_object_goes_to_on_gone_or_nowhere() {
    let server = TestServer::start().await;
    let cms = Api::<ConfigMap>::namespaced(server.client(), "default");
    let signal = Signal::default();
    let with_gone =
        recording(Controller::<ConfigMap>::new(server.client(), Watch::namespace("default")), &signal);
    let running = Running::spawn(move |cancel| with_gone.run(cancel));
    create(&cms, &cm("a", &[], &[])).await;
    signal.wait_for("a", |e| !e.is_empty()).await;
    cms.delete("a", &DeleteParams::default()).await.unwrap();
    signal.wait_for("a gone", |e| e.len() >= 2).await;
    assert_eq!(signal.events(), ["reconcile a", "gone default/a"]);
    running.stop().await.unwrap();

    let quiet = Signal::default();
    let without = Controller::<ConfigMap>::new(server.client(), Watch::namespace("default"))
        .context(quiet.clone())
        .reconcile(|cm: Arc<ConfigMap>, ctx: Context<Signal>| async move {
            ctx.record(format!("reconcile {}", name_of(&cm)));
            Ok::<_, Infallible>(Action::await_change())
        });
    let running = Running::spawn(move |cancel| without.run(cancel));
    create(&cms, &cm("b", &[], &[])).await;
    quiet.wait_for("b", |e| !e.is_empty()).await;
    cms.delete("b", &DeleteParams::default()).await.unwrap();
    create(&cms, &cm("c", &[], &[])).await;
    quiet.wait_for("c", |e| e.len() >= 2).await;
    assert_eq!(quiet.events(), ["reconcile b", "reconcile c"]);
    running.stop().await.unwrap();
}

/// Records every reconcile's outcome; signals each.
#[derive(Debug, Default)]
struct Outcomes {
    seen: std::sync::Mutex<Vec<ReconcileOutcome>>,
    signal: Signal,
}

impl ControllerMetrics for Outcomes {
    fn reconcile_finished(&self, _controller: &str, outcome: ReconcileOutcome, _duration: Duration) {
        self.seen.lock().unwrap().push(outcome);
        self.signal.record(outcome.label());
    }
}

/// The error policy decides the retry: `Retry::Never` requeues nothing (controller-runtime's
/// `TerminalError`), the default requeues with the rate limiter (client-go's
/// `AddRateLimited`, counted in `workqueue_retries_total`), `Retry::After` with its delay; a
/// failure is retried until it succeeds, and success forgets the backoff (`ctx.requeues()`
/// back to 0). The outcome reaches the metrics after the queue has been told.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_error_policy_decides_the_retry() {
    let server = TestServer::start().await;
    let cms = Api::<ConfigMap>::namespaced(server.client(), "default");
    for (name, _) in [("never", ()), ("limited", ()), ("after", ())] {
        create(&cms, &cm(name, &[], &[])).await;
    }
    let provider = CountingProvider::default();
    let retries = Arc::clone(&provider.retries);
    let outcomes = Arc::new(Outcomes::default());
    let signal = Signal::default();
    let controller = Controller::<ConfigMap>::new(server.client(), Watch::namespace("default"))
        .queue_metrics(Arc::new(provider))
        .controller_metrics(outcomes.clone())
        .context(signal.clone())
        .reconcile(|cm: Arc<ConfigMap>, ctx: Context<Signal>| async move {
            let name = name_of(&cm);
            ctx.record(format!("{name} {}", ctx.requeues()));
            if ctx.requeues() < 2 { Err(format!("{name} failed")) } else { Ok(Action::await_change()) }
        })
        .error_policy(|key: &ObjectKey<ConfigMap>, _error: &String, _ctx| match key.name() {
            "never" => Retry::Never,
            "after" => Retry::After(Duration::from_millis(1)),
            _ => Retry::RateLimited,
        });
    let running = Running::spawn(move |cancel| controller.run(cancel));
    signal.wait_for("limited succeeds on its third attempt", |e| e.iter().any(|e| e == "limited 2")).await;
    // `After` keeps the backoff history without adding to it: its requeues stay 0.
    let events = signal.events();
    assert_eq!(count(&events, "never 0"), 1, "never is not retried: {events:?}");
    assert!(count(&events, "after 0") >= 2, "after is retried: {events:?}");
    assert!(!events.iter().any(|e| e.starts_with("never 1") || e.starts_with("after 1")), "{events:?}");
    outcomes.signal.wait_for("limited's success measured", |e| e.contains(&"success".to_string())).await;
    assert!(retries.load(Ordering::SeqCst) >= 2, "the rate-limited and delayed adds are retries");
    running.stop().await.unwrap();
}

/// A reconcile that panics is retried with the rate limiter, and the worker carries on
/// (client-go's `HandleCrash` in `processNextWorkItem` would crash; controller-runtime recovers
/// with `RecoverPanic`, its default).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_reconcile_is_retried() {
    let server = TestServer::start().await;
    let cms = Api::<ConfigMap>::namespaced(server.client(), "default");
    let signal = Signal::default();
    let controller = Controller::<ConfigMap>::new(server.client(), Watch::namespace("default"))
        .context(signal.clone())
        .reconcile(|cm: Arc<ConfigMap>, ctx: Context<Signal>| async move {
            ctx.record(format!("{} {}", name_of(&cm), ctx.requeues()));
            assert!(ctx.requeues() > 0, "the first attempt panics");
            Ok::<_, Infallible>(Action::await_change())
        });
    let running = Running::spawn(move |cancel| controller.run(cancel));
    create(&cms, &cm("a", &[], &[])).await;
    signal.wait_for("the retry", |e| e.len() >= 2).await;
    assert_eq!(signal.events(), ["a 0", "a 1"]);
    running.stop().await.unwrap();
}

/// A failed reconcile is logged with its key and its error, as the issue asks (client-go's
/// `utilruntime.HandleErrorWithContext(..., "objectReference", key)`; controller-runtime's
/// "Reconciler error" with the request).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_reconcile_is_logged_with_its_key_and_error() {
    let logs = crate::common::capture();
    let server = TestServer::start().await;
    let cms = Api::<ConfigMap>::namespaced(server.client(), "default");
    let signal = Signal::default();
    let controller = Controller::<ConfigMap>::new(server.client(), Watch::namespace("default"))
        .name("logging-test")
        .context(signal.clone())
        .reconcile(|cm: Arc<ConfigMap>, ctx: Context<Signal>| async move {
            ctx.record(format!("{}", ctx.requeues()));
            if ctx.requeues() == 0 {
                Err(format!("{} is broken", name_of(&cm)))
            } else {
                Ok(Action::await_change())
            }
        });
    let running = Running::spawn(move |cancel| controller.run(cancel));
    create(&cms, &cm("web", &[], &[])).await;
    signal.wait_for("the retry", |e| e.len() >= 2).await;
    running.stop().await.unwrap();
    let line = logs
        .text()
        .lines()
        .find(|l| l.contains("logging-test") && l.contains("reconcile failed"))
        .map(str::to_owned);
    let line = line.expect("a log line for the failure");
    assert!(line.contains("key=default/web"), "{line}");
    assert!(line.contains("error=web is broken"), "{line}");
}

/// Workers start only once the caches are synced: the first reconcile already sees every
/// object of the initial list (client-go's sample-controller `WaitForCacheSync` before
/// `runWorker`; controller-runtime's `WaitForSync`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconciles_start_after_the_caches_synced() {
    let server = TestServer::start().await;
    let cms = Api::<ConfigMap>::namespaced(server.client(), "default");
    for i in 0..20 {
        create(&cms, &cm(&format!("cm-{i:02}"), &[], &[])).await;
    }
    let signal = Signal::default();
    let controller = Controller::<ConfigMap>::new(server.client(), Watch::namespace("default"))
        .context(signal.clone())
        .reconcile(|_cm: Arc<ConfigMap>, ctx: Context<Signal>| async move {
            ctx.record(format!("{}", ctx.lister::<ConfigMap>().list().len()));
            Ok::<_, Infallible>(Action::await_change())
        });
    let running = Running::spawn(move |cancel| controller.run(cancel));
    signal.wait_for("every object", |e| e.len() >= 20).await;
    assert!(signal.events().iter().all(|seen| seen == "20"), "{:?}", signal.events());
    running.stop().await.unwrap();
}

/// Cancelling drains: the running reconcile finishes (its context's shutdown token fires) before
/// `run` returns `Ok`, and no new key is taken (client-go's `ShutDownWithDrain`; controller-runtime
/// waits for its workers on stop).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_drains_the_running_reconciles() {
    let server = TestServer::start().await;
    let cms = Api::<ConfigMap>::namespaced(server.client(), "default");
    let signal = Signal::default();
    let controller = Controller::<ConfigMap>::new(server.client(), Watch::namespace("default"))
        .context(signal.clone())
        .reconcile(|cm: Arc<ConfigMap>, ctx: Context<Signal>| async move {
            ctx.record(format!("start {}", name_of(&cm)));
            ctx.shutdown().cancelled().await;
            ctx.record(format!("end {}", name_of(&cm)));
            Ok::<_, Infallible>(Action::await_change())
        });
    let health = controller.health_check();
    let running = Running::spawn(move |cancel| controller.run(cancel));
    create(&cms, &cm("a", &[], &[])).await;
    signal.wait_for("a started", |e| !e.is_empty()).await;
    create(&cms, &cm("b", &[], &[])).await;
    running.stop().await.unwrap();
    assert_eq!(signal.events(), ["start a", "end a"], "a finished; b never started");
    assert_eq!(health.check().state, ControllerState::Stopped);
}

/// The gate: closed, the informers sync and keys are queued but no reconcile runs; open, the
/// workers take every queued key; closed again, nothing new runs (leader election: workers only
/// on the leader, caches warm everywhere).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gate_runs_workers_only_while_open() {
    let server = TestServer::start().await;
    let cms = Api::<ConfigMap>::namespaced(server.client(), "default");
    let (leading, gate) = tokio::sync::watch::channel(false);
    let signal = Signal::default();
    let observed_gate = gate.clone();
    let controller = Controller::<ConfigMap>::new(server.client(), Watch::namespace("default"))
        .gate(gate)
        .context(signal.clone())
        .reconcile(move |cm: Arc<ConfigMap>, ctx: Context<Signal>| {
            let open = observed_gate.is_open();
            async move {
                ctx.record(format!("{} open={open}", name_of(&cm)));
                Ok::<_, Infallible>(Action::await_change())
            }
        });
    let health = controller.health_check();
    let running = Running::spawn(move |cancel| controller.run(cancel));
    create(&cms, &cm("a", &[], &[])).await;
    create(&cms, &cm("b", &[], &[])).await;
    let report = health.check();
    assert!(!report.gate.as_ref().unwrap().open);
    assert!(signal.events().is_empty());

    leading.send_replace(true);
    signal.wait_for("both reconciled once the gate opened", |e| e.len() >= 2).await;
    assert!(signal.events().iter().all(|e| e.ends_with("open=true")), "{:?}", signal.events());
    leading.send_replace(false);
    running.stop().await.unwrap();
}

/// The shard hook keeps other shards' keys out of the queue, from every source: they are
/// neither reconciled nor taken for gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shard_filter_keeps_other_shards_keys_out() {
    let server = TestServer::start().await;
    let cms = Api::<ConfigMap>::namespaced(server.client(), "default");
    let signal = Signal::default();
    let controller = recording(
        Controller::<ConfigMap>::new(server.client(), Watch::namespace("default"))
            .shard(|key: &ObjectKey<ConfigMap>| key.name().starts_with("mine")),
        &signal,
    );
    let running = Running::spawn(move |cancel| controller.run(cancel));
    create(&cms, &cm("theirs-1", &[], &[])).await;
    cms.delete("theirs-1", &DeleteParams::default()).await.unwrap();
    create(&cms, &cm("mine-1", &[], &[])).await;
    signal.wait_for("mine-1", |e| !e.is_empty()).await;
    assert_eq!(signal.events(), ["reconcile mine-1"]);
    running.stop().await.unwrap();
}

/// Two controllers of one type on one factory share its informer: one LIST/WATCH for both
/// (client-go's `SharedInformerFactory`), each with its own handler, queue and name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controllers_on_one_factory_share_one_watch() {
    let server = TestServer::start().await;
    let cms = Api::<ConfigMap>::namespaced(server.client(), "default");
    let factory = Arc::new(SharedInformerFactory::new(server.client(), Duration::ZERO));
    let (one, two) = (Signal::default(), Signal::default());
    let first = recording(
        Controller::with_factory(Arc::clone(&factory), Watch::namespace("default")).name("one"),
        &one,
    );
    let second = recording(
        Controller::with_factory(Arc::clone(&factory), Watch::namespace("default")).name("two"),
        &two,
    );
    let running_one = Running::spawn(move |cancel| first.run(cancel));
    let running_two = Running::spawn(move |cancel| second.run(cancel));
    create(&cms, &cm("a", &[], &[])).await;
    one.wait_for("one", |e| !e.is_empty()).await;
    two.wait_for("two", |e| !e.is_empty()).await;
    assert_eq!(factory.len(), 1);
    let informer = factory.informer::<ConfigMap>(&InformerScope::namespace("default"));
    let mut handlers: Vec<String> = informer.handler_stats().into_iter().map(|h| h.name).collect();
    handlers.sort();
    assert_eq!(handlers, ["one/for/ConfigMap/default", "two/for/ConfigMap/default"]);
    let watches =
        server.request_log().filter(|r| r.verb == Verb::Watch && r.path.contains("configmaps")).len();
    assert_eq!(watches, 1);
    running_one.stop().await.unwrap();
    running_two.stop().await.unwrap();
    // The shared informer goes on for its owner; a stopped controller's handler is gone.
    assert!(informer.health().is_ready());
    assert!(informer.handler_stats().is_empty());
    factory.shutdown().await;
}

/// An informer the controller reads fails (an index function fails for an object: client-go
/// would crash): `run` stops and returns the failure, and the health check says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_informer_failure_stops_the_controller_with_the_failure() {
    let server = TestServer::start().await;
    let cms = Api::<ConfigMap>::namespaced(server.client(), "default");
    let factory = Arc::new(SharedInformerFactory::new(server.client(), Duration::ZERO));
    let informer = factory.informer::<ConfigMap>(&InformerScope::namespace("default"));
    let picky = index_func(|cm: &ConfigMap| {
        if cm.metadata.name.as_deref() == Some("poison") { Err("cannot index".into()) } else { Ok(vec![]) }
    });
    informer.add_indexers(Indexers::from([("picky".to_owned(), picky)])).unwrap();
    let signal = Signal::default();
    let controller =
        recording(Controller::with_factory(Arc::clone(&factory), Watch::namespace("default")), &signal);
    let health = controller.health_check();
    let running = Running::spawn(move |cancel| controller.run(cancel));
    create(&cms, &cm("a", &[], &[])).await;
    signal.wait_for("a", |e| !e.is_empty()).await;
    create(&cms, &cm("poison", &[], &[])).await;
    match running.join().await {
        Err(ControllerError::InformerFailed(failure)) => assert_eq!(failure.informer(), "ConfigMap/default"),
        other => panic!("expected the informer's failure, got {other:?}"),
    }
    let report = health.check();
    assert!(!report.is_alive() && !report.is_ready(), "{report}");
    assert!(matches!(report.state, ControllerState::Failed(_)));
    factory.shutdown().await;
}
