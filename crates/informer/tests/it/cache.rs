//! The cache: transform before the cache (once per object, never again on resync; a panicking
//! one stops the informer with an error), listers and indexes (also added after start), and the
//! factory's sharing (one watch connection per informer, asserted from the server's request log;
//! `""` as every namespace; cluster-scoped types ignore the namespace; waiting after shutdown).
//! Ported scenarios name their client-go test (shared_informer_test.go, controller_test.go).

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{Harness, Recorder, create};
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_informer::{InformerScope, SharedInformerFactory};
use kcache_store::index_func;
use kcache_testserver::{TestServer, Verb};

/// The transform runs before objects reach the cache and the handlers. Mirrors client-go
/// shared_informer_test.go `TestSharedInformerTransformer` (the initial list reaches the handler
/// transformed).
#[tokio::test]
async fn transform_applies_before_the_cache() {
    let mut h = Harness::new(Duration::ZERO).await;
    create(&h.api, "a", "secret-ish").await;
    h.informer
        .set_transform(|mut cm: ConfigMap| {
            cm.metadata.managed_fields = None;
            cm.data = Some([("v".to_string(), "redacted".to_string())].into());
            cm
        })
        .unwrap();
    let rec = h.start_recording("add", 1).await;
    assert_eq!(rec.events()[0], common::Ev::Add("a".into(), "redacted".into(), true));
    let cached = h.informer.lister().get("default/a").unwrap();
    assert_eq!(common::value(&cached), "redacted");
    h.stop().await;
}

/// Listers read through indexes without copying objects.
#[tokio::test]
async fn lister_and_custom_index() {
    let mut h = Harness::new(Duration::ZERO).await;
    for (n, v) in [("a", "x"), ("b", "y"), ("c", "x")] {
        create(&h.api, n, v).await;
    }
    h.informer
        .add_indexers(
            [("by-value".to_string(), index_func(|cm: &ConfigMap| Ok(vec![common::value(cm)])))].into(),
        )
        .unwrap();
    h.start();
    h.synced().await;
    let lister = h.informer.lister();
    let mut xs: Vec<_> = lister.by_index("by-value", "x").unwrap().iter().map(|o| common::name(o)).collect();
    xs.sort();
    assert_eq!(xs, ["a", "c"]);
    assert_eq!(lister.namespaced("default").list().len(), 3);
    let a1 = lister.get("default/a").unwrap();
    let a2 = lister.namespaced("default").get("a").unwrap();
    assert!(Arc::ptr_eq(&a1, &a2), "same Arc, no copy");
    assert!(lister.by_index("nope", "x").is_err());
    h.stop().await;
}

/// A server holding ConfigMap `default/a`, and a factory (no resync) on it.
async fn factory_over_one_configmap() -> (TestServer, SharedInformerFactory) {
    let server = TestServer::start().await;
    let api: kube::Api<ConfigMap> = kube::Api::namespaced(server.client(), "default");
    create(&api, "a", "1").await;
    let factory = SharedInformerFactory::new(server.client(), Duration::ZERO);
    (server, factory)
}

/// The factory hands out one informer per (type, namespace, selectors), each with one watch
/// connection and a name of its own (type, namespace, selectors: so its logs, metrics, health
/// and failures tell it from the others); start, sync and shutdown cover them all.
#[tokio::test]
async fn factory_shares_informers() {
    let (server, factory) = factory_over_one_configmap().await;
    let one = factory.informer::<ConfigMap>(&InformerScope::namespace("default"));
    let two = factory.informer::<ConfigMap>(&InformerScope::namespace("default"));
    let other = factory.informer::<ConfigMap>(&InformerScope::namespace("other"));
    assert_eq!(factory.len(), 2);
    // Selectors are part of the key: the same selector shares, another one does not.
    let labelled = factory.informer::<ConfigMap>(&InformerScope::namespace("default").labels("app=x"));
    let labelled_again = factory.informer::<ConfigMap>(&InformerScope::namespace("default").labels("app=x"));
    assert_eq!(factory.len(), 3);
    let names = [one.name(), two.name(), other.name(), labelled.name()];
    assert_eq!(
        names,
        ["ConfigMap/default", "ConfigMap/default", "ConfigMap/other", "ConfigMap/default;labels=app=x"]
    );
    let r1 = Recorder::new();
    let r2 = Recorder::new();
    one.add_event_handler(r1.clone()).unwrap();
    two.add_event_handler(r2.clone()).unwrap();
    factory.start();
    assert!(tokio::time::timeout(Duration::from_secs(20), factory.wait_for_cache_sync()).await.unwrap());
    r1.wait_until("a", |ev| ev.len() == 1).await;
    r2.wait_until("a", |ev| ev.len() == 1).await;
    assert!(one.has_synced() && two.has_synced() && other.has_synced() && labelled_again.has_synced());
    assert!(labelled.lister().list().is_empty(), "the label selector reached the server");
    let watches = server.request_log().filter(|r| r.verb == Verb::Watch);
    assert_eq!(watches.len(), 3, "one watch per informer: {watches:#?}");
    let selected: Vec<_> = watches.iter().filter_map(|w| w.query_param("labelSelector")).collect();
    assert_eq!(selected, ["app=x"], "exactly one watch carries the selector");
    factory.shutdown().await;
    assert!(one.is_stopped() && other.is_stopped() && labelled.is_stopped());
}

/// A namespace of `""` is every namespace, as client-go's `metav1.NamespaceAll`: the factory hands
/// out the `all()` informer for it (one informer, one watch), and a lister's `namespaced("")`
/// lists every object (client-go's `ListAllByNamespace`).
#[tokio::test]
async fn the_empty_namespace_is_every_namespace() {
    let server = TestServer::start().await;
    for ns in ["default", "other"] {
        let api: kube::Api<ConfigMap> = kube::Api::namespaced(server.client(), ns);
        let mut cm = common::cm("a", "1");
        cm.metadata.namespace = Some(ns.into());
        api.create(&kube::api::PostParams::default(), &cm).await.unwrap();
    }
    let factory = SharedInformerFactory::new(server.client(), Duration::ZERO);
    let all = factory.informer::<ConfigMap>(&InformerScope::all());
    let empty = factory.informer::<ConfigMap>(&InformerScope::namespace(""));
    assert_eq!(factory.len(), 1, "one informer for all() and namespace(\"\")");
    factory.start();
    assert!(tokio::time::timeout(Duration::from_secs(20), factory.wait_for_cache_sync()).await.unwrap());
    assert_eq!(empty.lister().list().len(), 2);
    assert_eq!(all.lister().namespaced("").list().len(), 2);
    assert_eq!(all.lister().namespaced("other").list().len(), 1);
    assert_eq!(server.request_log().filter(|r| r.verb == Verb::Watch).len(), 1);
    factory.shutdown().await;
}

/// A cluster-scoped type ignores the scope's namespace, as client-go's generated informers
/// ignore `WithNamespace`: Namespaces asked for "in" `default` are listed cluster-wide.
#[tokio::test]
async fn a_cluster_scoped_type_ignores_the_namespace() {
    use k8s_openapi::api::core::v1::Namespace;
    let server = TestServer::builder().strict_namespaces(true).start().await;
    let factory = SharedInformerFactory::new(server.client(), Duration::ZERO);
    let scoped = factory.informer::<Namespace>(&InformerScope::namespace("default"));
    let all = factory.informer::<Namespace>(&InformerScope::all());
    assert_eq!(factory.len(), 1);
    factory.start();
    assert!(tokio::time::timeout(Duration::from_secs(20), factory.wait_for_cache_sync()).await.unwrap());
    assert!(scoped.lister().get("default").is_some());
    assert_eq!(scoped.lister().list().len(), all.lister().list().len());
    let lists = server.request_log().filter(|r| matches!(r.verb, Verb::List | Verb::Watch));
    assert!(lists.iter().all(|r| r.path == "/api/v1/namespaces"), "{lists:#?}");
    factory.shutdown().await;
}

/// After `shutdown`, `wait_for_cache_sync` still reports the informers `start` ran, so one that
/// never synced makes it return false (client-go's `WaitForCacheSync` goes over
/// `startedInformers`, which `Shutdown` keeps).
#[tokio::test]
async fn waiting_after_shutdown_reports_an_informer_that_never_synced() {
    use kcache_testserver::RequestFault;
    let server = TestServer::start().await;
    server.faults().fail_requests(usize::MAX, RequestFault::forbidden());
    let factory = SharedInformerFactory::new(server.client(), Duration::ZERO);
    let informer = factory.informer::<ConfigMap>(&InformerScope::namespace("default"));
    factory.start();
    factory.shutdown().await;
    assert!(!informer.has_synced());
    assert!(!factory.wait_for_cache_sync().await);
    factory.start(); // no restart after a shutdown
    assert!(!factory.wait_for_cache_sync().await);
    // Nor a first start for an informer asked for after it (client-go's `Start` returns when
    // `shuttingDown`): no request reaches the server.
    let requests = server.request_log().entries().len();
    let late = factory.informer::<ConfigMap>(&InformerScope::namespace("other"));
    factory.start();
    assert!(!factory.wait_for_cache_sync().await);
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    assert!(!late.is_stopped() && !late.has_synced());
    assert_eq!(server.request_log().entries().len(), requests, "the late informer never ran");
}

/// Reflector metrics set on the informer reach the provider.
#[tokio::test]
async fn reflector_metrics_pass_through() {
    #[derive(Debug, Default)]
    struct Lists(std::sync::atomic::AtomicUsize, std::sync::atomic::AtomicUsize);
    impl kcache_reflector::ReflectorMetrics for Lists {
        fn watch_started(&self, _: &str, _: bool) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        fn last_sync_resource_version(&self, _: &str, _: &str) {
            self.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }
    let mut h = Harness::new(Duration::ZERO).await;
    let metrics = Arc::new(Lists::default());
    h.informer.set_reflector_metrics(metrics.clone()).unwrap();
    h.start();
    h.synced().await;
    assert!(metrics.0.load(std::sync::atomic::Ordering::SeqCst) >= 1, "a watch(-list) was opened");
    assert!(metrics.1.load(std::sync::atomic::Ordering::SeqCst) >= 1, "a resource version was published");
    assert!(h.informer.set_reflector_metrics(metrics).is_err(), "only before start");
    h.stop().await;
}

/// `SharedInformerFactory::strip_managed_fields`: by default (and with `true`) every informer of
/// the factory caches objects without `metadata.managedFields`; with `false` it keeps them.
#[tokio::test]
async fn factory_strips_managed_fields() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
    let server = TestServer::start().await;
    let api: kube::Api<ConfigMap> = kube::Api::namespaced(server.client(), "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("a".into());
    cm.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
        manager: Some("creator".into()),
        operation: Some("Update".into()),
        fields_type: Some("FieldsV1".into()),
        fields_v1: Some(FieldsV1(serde_json::json!({"f:data": {}}))),
        ..Default::default()
    }]);
    api.create(&kube::api::PostParams::default(), &cm).await.unwrap();
    for strip in [Some(false), Some(true), None] {
        let factory = SharedInformerFactory::new(server.client(), Duration::ZERO);
        let factory = match strip {
            Some(strip) => factory.strip_managed_fields(strip),
            None => factory,
        };
        let informer = factory.informer::<ConfigMap>(&InformerScope::namespace("default"));
        factory.start();
        assert!(tokio::time::timeout(Duration::from_secs(20), factory.wait_for_cache_sync()).await.unwrap());
        let cached = informer.lister().get("default/a").unwrap();
        assert_eq!(cached.metadata.managed_fields.is_none(), strip != Some(false), "strip = {strip:?}");
        factory.shutdown().await;
    }
}

/// `SharedInformerFactory::protobuf`: off by default (JSON, as client-go's default
/// `rest.Config`); with `true` its typed informers list and watch in protobuf (client-go with
/// `ContentType: application/vnd.kubernetes.protobuf`, as kube-controller-manager), and cache
/// the same objects; dynamic informers stay on JSON.
#[tokio::test]
async fn factory_speaks_protobuf_on_request() {
    use kcache_testserver::Verb;
    let server = TestServer::start().await;
    let api: kube::Api<ConfigMap> = kube::Api::namespaced(server.client(), "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("a".into());
    cm.data = Some([("k".to_owned(), "v".to_owned())].into());
    api.create(&kube::api::PostParams::default(), &cm).await.unwrap();
    let mut cached = Vec::new();
    for protobuf in [false, true] {
        let log = server.request_log();
        let before = log.filter(|r| r.verb == Verb::List || r.verb == Verb::Watch).len();
        let factory = SharedInformerFactory::new(server.client(), Duration::ZERO).protobuf(protobuf);
        let informer = factory.informer::<ConfigMap>(&InformerScope::namespace("default"));
        factory.start();
        assert!(tokio::time::timeout(Duration::from_secs(20), factory.wait_for_cache_sync()).await.unwrap());
        cached.push(informer.lister().get("default/a").unwrap());
        factory.shutdown().await;
        let reads = log.filter(|r| r.verb == Verb::List || r.verb == Verb::Watch);
        assert!(reads.len() > before);
        for r in &reads[before..] {
            assert_eq!(
                r.content_type.starts_with("application/vnd.kubernetes.protobuf"),
                protobuf,
                "{} {}",
                r.path,
                r.content_type
            );
        }
    }
    assert_eq!(cached[0], cached[1]);
}

/// `SharedInformerFactory::dynamic_informer` checks the type of every watched object: a
/// ConfigMap sent on the widgets watch (as a broken proxy could) never enters the widgets cache.
#[tokio::test]
async fn factory_dynamic_informer_rejects_a_foreign_kind() {
    use kcache_testserver::{ResourceDef, WatchFault};
    use kube::api::{DynamicObject, PostParams};
    use kube::core::{ApiResource, GroupVersionKind};
    let server = TestServer::start().await;
    server.register(ResourceDef::new("example.com", "v1", "widgets", "Widget", true));
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget"));
    let api: kube::Api<DynamicObject> = kube::Api::namespaced_with(server.client(), "default", &ar);
    api.create(&PostParams::default(), &DynamicObject::new("w1", &ar)).await.unwrap();
    let foreign = r#"{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"intruder","namespace":"default","resourceVersion":"2"}}}"#;
    server.faults().next_watch(WatchFault::RawFrame { after: 0, bytes: format!("{foreign}\n").into_bytes() });

    #[derive(Debug, Default)]
    struct Names(std::sync::Mutex<Vec<String>>);
    impl kcache_reflector::ReflectorMetrics for Names {
        fn watch_started(&self, reflector: &str, _: bool) {
            self.0.lock().unwrap().push(reflector.to_owned());
        }
    }
    let factory = SharedInformerFactory::new(server.client(), Duration::ZERO);
    let informer = factory.dynamic_informer(&ar, &InformerScope::namespace("default"));
    let names = Arc::new(Names::default());
    informer.set_reflector_metrics(names.clone()).unwrap();
    factory.start();
    assert!(tokio::time::timeout(Duration::from_secs(20), factory.wait_for_cache_sync()).await.unwrap());
    // Named after its resource (and its scope), not after `DynamicObject`.
    let seen = names.0.lock().unwrap().clone();
    assert!(!seen.is_empty() && seen.iter().all(|n| n == "widgets.example.com/default"), "{seen:?}");
    assert_eq!(informer.name(), "widgets.example.com/default", "the informer's own logs carry it too");
    let mut keys: Vec<String> =
        informer.lister().list().iter().map(|o| o.metadata.name.clone().unwrap()).collect();
    keys.sort();
    assert_eq!(keys, ["w1"]);
    // The rejected stream was dropped: the cache came from a fallback LIST.
    assert!(!server.request_log().filter(|r| r.verb == Verb::List).is_empty());
    factory.shutdown().await;
}

/// A ConfigMap with `labels` (keys only, value "x") and `data.v`.
fn labelled(name: &str, labels: &[&str]) -> ConfigMap {
    let mut cm = common::cm(name, "1");
    cm.metadata.labels = Some(labels.iter().map(|l| ((*l).to_string(), "x".to_string())).collect());
    cm
}

fn label_keys() -> kcache_store::Indexers<ConfigMap> {
    let f = index_func(|cm: &ConfigMap| {
        Ok(cm.metadata.labels.iter().flatten().map(|(k, _)| k.clone()).collect())
    });
    [("labels".to_string(), f)].into()
}

fn sorted_names(objs: &[Arc<ConfigMap>]) -> Vec<String> {
    let mut names: Vec<_> = objs.iter().map(|o| common::name(o)).collect();
    names.sort();
    names
}

/// Mirrors client-go shared_informer_test.go `TestIndexer`: an index added before start answers
/// once synced; an object created later joins it; an index added after start is built from the
/// cache at once; both list the same index values; adding one after stop is refused.
#[tokio::test]
async fn indexes_before_and_after_start() {
    let mut h = Harness::new(Duration::ZERO).await;
    let pp = kube::api::PostParams::default();
    h.api.create(&pp, &labelled("pod1", &["a", "b"])).await.unwrap();
    h.api.create(&pp, &labelled("pod2", &["b"])).await.unwrap();
    h.informer.add_indexers(label_keys()).unwrap();
    let rec = Recorder::new();
    h.informer.add_event_handler(rec.clone()).unwrap();
    h.start();
    h.synced().await;
    let indexer = h.informer.indexer();
    assert_eq!(sorted_names(&indexer.by_index("labels", "a").unwrap()), ["pod1"]);

    h.api.create(&pp, &labelled("pod3", &["a"])).await.unwrap();
    // The handler is told after the cache changed.
    rec.wait_until("pod3", |ev| ev.iter().any(|e| e.name() == "pod3")).await;
    assert_eq!(sorted_names(&indexer.by_index("labels", "a").unwrap()), ["pod1", "pod3"]);

    let again = label_keys().into_values().map(|f| ("labels-again".to_string(), f)).collect();
    h.informer.add_indexers(again).unwrap();
    assert_eq!(sorted_names(&indexer.by_index("labels-again", "a").unwrap()), ["pod1", "pod3"]);
    for index in ["labels", "labels-again"] {
        let mut values = indexer.list_index_func_values(index);
        values.sort();
        assert_eq!(values, ["a", "b"], "{index}");
    }
    // Once stopped, as client-go's `AddIndexers`: refused.
    let informer = h.informer.clone();
    h.stop().await;
    let late = label_keys().into_values().map(|f| ("labels-late".to_string(), f)).collect();
    assert!(matches!(informer.add_indexers(late), Err(kcache_informer::InformerError::Stopped)));
}

/// Prefixes `data.v` with "t:".
fn mark(mut cm: ConfigMap) -> ConfigMap {
    let v = common::value(&cm);
    cm.data = Some([("v".to_string(), format!("t:{v}"))].into());
    cm
}

/// Mirrors client-go controller_test.go `TestTransformingInformer`: adds, updates (old and new)
/// and deletes reach the handler transformed, and the cache holds transformed objects; an object
/// changed before start is listed in its latest state.
#[tokio::test]
async fn transform_applies_to_every_notification() {
    let mut h = Harness::new(Duration::ZERO).await;
    create(&h.api, "pod1", "1").await;
    common::update(&h.api, "pod1", "2").await;
    h.informer.set_transform(mark).unwrap();
    let rec = Recorder::new();
    h.informer.add_event_handler(rec.clone()).unwrap();
    h.start();
    h.synced().await;
    create(&h.api, "pod2", "1").await;
    create(&h.api, "pod3", "1").await;
    common::update(&h.api, "pod2", "2").await;
    common::delete(&h.api, "pod1").await;
    rec.wait_until("five notifications", |ev| ev.len() == 5).await;
    use common::Ev;
    assert_eq!(
        rec.events(),
        [
            Ev::Add("pod1".into(), "t:2".into(), true),
            Ev::Add("pod2".into(), "t:1".into(), false),
            Ev::Add("pod3".into(), "t:1".into(), false),
            Ev::Update("pod2".into(), "t:1".into(), "t:2".into(), false),
            Ev::Delete("pod1".into(), "t:2".into(), false),
        ]
    );
    let mut cached: Vec<_> =
        h.informer.lister().list().iter().map(|o| (common::name(o), common::value(o))).collect();
    cached.sort();
    assert_eq!(cached, [("pod2".to_string(), "t:2".to_string()), ("pod3".to_string(), "t:1".to_string())]);
    h.stop().await;
}

/// Mirrors client-go controller_test.go `TestTransformingInformerRace`: with resyncs every second
/// the transform still runs once per object (a resync re-delivers the cached, already transformed
/// object, it does not transform it again), and readers of the cache on another thread only ever
/// see transformed objects. For both FIFOs. The initial list arrives by watch-list (the default),
/// so this also mirrors client-go reflector_test.go `TestReflectorRespectStoreTransformer` (objects
/// of a watch-list reach the store transformed, each transformed once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resyncs_never_transform_twice() {
    use std::sync::atomic::{AtomicBool, Ordering};

    use common::Ev;
    use kcache_informer::FifoKind;

    for kind in [FifoKind::InOrder, FifoKind::DeltaFifo] {
        let mut h = Harness::new(Duration::from_secs(1)).await;
        h.informer.set_fifo(kind).unwrap();
        for i in 0..5 {
            create(&h.api, &format!("pod-{i}"), "1").await;
        }
        let twice = Arc::new(AtomicBool::new(false));
        h.informer
            .set_transform({
                let twice = twice.clone();
                move |cm| {
                    if common::value(&cm).starts_with("t:") {
                        twice.store(true, Ordering::SeqCst);
                    }
                    mark(cm)
                }
            })
            .unwrap();
        let rec = h.start_recording("initial adds", 5).await;

        let reading = Arc::new(AtomicBool::new(true));
        let reader = std::thread::spawn({
            let (informer, reading) = (h.informer.clone(), reading.clone());
            move || {
                let mut reads = 0u64;
                while reading.load(Ordering::SeqCst) || reads == 0 {
                    for i in 0..5 {
                        let cm = informer.indexer().get_by_key(&format!("default/pod-{i}")).expect("cached");
                        assert_eq!(common::value(&cm), "t:1", "only transformed objects are cached");
                        reads += 1;
                    }
                }
                reads
            }
        });
        for round in 1..=5usize {
            let resync = h.clock.wait_for_sleep(|d| d <= Duration::from_secs(1)).await;
            h.clock.advance(resync);
            rec.wait_until("a resync of every object", |ev| {
                ev.iter().filter(|e| matches!(e, Ev::Update(_, _, _, true))).count() == 5 * round
            })
            .await;
        }
        reading.store(false, Ordering::SeqCst);
        assert!(tokio::task::spawn_blocking(move || reader.join().unwrap()).await.unwrap() > 0);
        assert!(!twice.load(Ordering::SeqCst), "{kind:?}: an object was transformed twice");
        assert!(
            rec.events().iter().all(|e| matches!(e, Ev::Add(_, v, _) | Ev::Update(_, _, v, _) if v == "t:1")),
            "{kind:?}: {:?}",
            rec.events()
        );
        h.stop().await;
    }
}

/// A transform that panics (a bug in user code) stops the informer and its handlers, and `run`
/// says why, instead of the reflector's task dying unseen while the cache silently stops
/// changing.
#[tokio::test]
async fn a_panicking_transform_stops_the_informer_with_an_error() {
    let h = Harness::new(Duration::ZERO).await;
    create(&h.api, "a", "1").await;
    h.informer
        .set_transform(|cm: ConfigMap| {
            assert!(common::name(&cm) != "boom", "transform cannot handle this object");
            cm
        })
        .unwrap();
    let rec = Recorder::new();
    h.informer.add_event_handler(rec.clone()).unwrap();
    let (informer, cancel) = (h.informer.clone(), h.cancel.clone());
    let run = tokio::spawn(async move { informer.run(cancel).await });
    h.synced().await;
    rec.wait_until("initial add", |ev| ev.len() == 1).await;

    create(&h.api, "boom", "1").await;
    let result = tokio::time::timeout(Duration::from_secs(20), run).await.expect("run returns").unwrap();
    match result {
        Err(kcache_informer::InformerError::Failed(f)) => {
            // The message is in the cause, but not in what a log line would print: a
            // transform's message can quote the object.
            assert_eq!(f.to_string(), r#"informer "ConfigMap" failed: the reflector task panicked"#);
            let kcache_informer::FailureCause::ReflectorPanicked(msg) = f.cause() else { panic!("{f:?}") };
            assert!(msg.contains("transform cannot handle this object"), "{msg}");
        }
        other => panic!("expected a ReflectorPanicked failure, got {other:?}"),
    }
    assert!(h.informer.is_stopped());
    assert!(matches!(
        h.informer.add_event_handler(Recorder::new()),
        Err(kcache_informer::InformerError::Stopped)
    ));
    assert_eq!(rec.events().len(), 1, "nothing after the panic");
}

/// A factory informer whose transform panics before it synced has stopped for good: the
/// factory's `wait_for_cache_sync` returns false at once instead of waiting for a sync that
/// cannot come (until `shutdown`), and so does waiting on the informer itself with a token that
/// was never cancelled.
#[tokio::test]
async fn waiting_for_an_informer_that_stopped_before_syncing_returns_false() {
    let (_server, factory) = factory_over_one_configmap().await;
    let informer = factory.informer::<ConfigMap>(&InformerScope::namespace("default"));
    informer.set_transform(|_: ConfigMap| panic!("cannot transform")).unwrap();
    let reg = informer.add_event_handler(Recorder::new()).unwrap();
    factory.start();
    let waited = tokio::time::timeout(Duration::from_secs(20), factory.wait_for_cache_sync()).await;
    assert_eq!(waited, Ok(false), "the factory's wait ends, unsynced");
    assert!(informer.is_stopped());
    let never_cancelled = tokio_util::sync::CancellationToken::new();
    let waited = tokio::time::timeout(
        Duration::from_secs(20),
        kcache_informer::wait_for_cache_sync(&never_cancelled, &[&informer, &reg]),
    )
    .await;
    assert_eq!(waited, Ok(false));
    factory.shutdown().await;
}

/// `set_reflector_config` leaves the reflector's name to the informer, as its docs say: a config
/// built from `ReflectorConfig::default()` does not make every informer report as "reflector",
/// and `SharedIndexInformer::named` names both.
#[tokio::test]
async fn the_informer_names_its_reflector() {
    #[derive(Debug, Default)]
    struct Names(std::sync::Mutex<Vec<String>>);
    impl kcache_reflector::ReflectorMetrics for Names {
        fn list_completed(&self, reflector: &str, _: usize, _: Duration) {
            self.0.lock().unwrap().push(reflector.to_owned());
        }
    }
    let server = TestServer::start().await;
    let api: kube::Api<ConfigMap> = kube::Api::namespaced(server.client(), "default");
    for named in [None, Some("default configmaps")] {
        let lw = kcache_reflector::ApiListerWatcher::new(api.clone());
        let informer = match named {
            None => kcache_informer::SharedIndexInformer::new(lw, Duration::ZERO),
            Some(name) => kcache_informer::SharedIndexInformer::named(lw, Duration::ZERO, name),
        };
        informer
            .set_reflector_config(kcache_reflector::ReflectorConfig {
                use_watch_list: false,
                ..kcache_reflector::ReflectorConfig::default()
            })
            .unwrap();
        let names = Arc::new(Names::default());
        informer.set_reflector_metrics(names.clone()).unwrap();
        let cancel = tokio_util::sync::CancellationToken::new();
        let run = tokio::spawn({
            let (i, c) = (informer.clone(), cancel.clone());
            async move { i.run(c).await }
        });
        let synced = tokio::time::timeout(
            Duration::from_secs(20),
            kcache_informer::wait_for_cache_sync(&cancel, &[&informer]),
        )
        .await;
        assert_eq!(synced, Ok(true));
        cancel.cancel();
        run.await.unwrap().unwrap();
        let expected = named.unwrap_or("ConfigMap");
        assert_eq!(informer.name(), expected);
        assert_eq!(*names.0.lock().unwrap(), [expected]);
    }
}

/// Mirrors client-go listers.go `ListAll` and `ListAllByNamespace` with a label selector (as
/// every generated lister's `List(selector)` calls them): an empty selector selects everything,
/// equality, set and existence expressions filter by labels, an object without labels matches
/// only a selector that requires no label, and the namespaced view filters within its
/// namespace (`""` meaning every namespace).
#[test]
fn listers_select_by_labels() {
    use kcache_informer::Lister;
    use kcache_store::{Store, meta_namespace_key_func, namespace_indexers};
    use kube::core::{Expression, Selector};

    let store =
        Store::with_indexers(meta_namespace_key_func::<ConfigMap>(), namespace_indexers::<ConfigMap>());
    let put = |ns: &str, name: &str, labels: &[(&str, &str)]| {
        let mut cm = common::cm(name, "1");
        cm.metadata.namespace = Some(ns.to_string());
        cm.metadata.labels = (!labels.is_empty())
            .then(|| labels.iter().map(|(k, v)| ((*k).to_string(), (*v).to_string())).collect());
        store.add(Arc::new(cm)).unwrap();
    };
    put("prod", "web", &[("app", "shop"), ("tier", "front")]);
    put("prod", "db", &[("app", "shop"), ("tier", "back")]);
    put("prod", "bare", &[]);
    put("dev", "web", &[("app", "shop"), ("tier", "front")]);
    let lister = Lister::new(store);

    assert_eq!(lister.list_selected(&Selector::default()).len(), 4);
    let shop: Selector = Expression::Equal("app".into(), "shop".into()).into();
    assert_eq!(sorted_names(&lister.list_selected(&shop)), ["db", "web", "web"]);
    let front: Selector = [("app", "shop"), ("tier", "front")].into_iter().collect();
    assert_eq!(sorted_names(&lister.namespaced("prod").list_selected(&front)), ["web"]);
    assert_eq!(lister.namespaced("").list_selected(&front).len(), 2);
    let unlabelled: Selector = Expression::DoesNotExist("app".into()).into();
    assert_eq!(sorted_names(&lister.list_selected(&unlabelled)), ["bare"]);
    let not_back: Selector = Expression::NotIn("tier".into(), ["back".into()].into()).into();
    assert_eq!(sorted_names(&lister.namespaced("prod").list_selected(&not_back)), ["bare", "web"]);
    let in_set: Selector = Expression::In("tier".into(), ["back".into(), "middle".into()].into()).into();
    assert_eq!(sorted_names(&lister.list_selected(&in_set)), ["db"]);
    assert!(lister.namespaced("staging").list_selected(&Selector::default()).is_empty());
}
