//! The cache: transform before the cache, listers and indexes, and the factory's sharing
//! (one watch connection per informer, asserted from the server's request log).

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Harness, Recorder, create};
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_informer::{InformerScope, SharedInformerFactory};
use kcache_store::index_func;
use kcache_testserver::{TestServer, Verb};

/// The transform runs before objects reach the cache and the handlers.
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
    let rec = Recorder::new();
    h.informer.add_event_handler(rec.clone()).unwrap();
    h.start();
    h.synced().await;
    rec.wait_until("add", |ev| ev.len() == 1).await;
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

/// The factory hands out one informer per (type, namespace, selectors), each with one watch
/// connection; start, sync and shutdown cover them all.
#[tokio::test]
async fn factory_shares_informers() {
    let server = TestServer::start().await;
    let api: kube::Api<ConfigMap> = kube::Api::namespaced(server.client(), "default");
    create(&api, "a", "1").await;
    let factory = SharedInformerFactory::new(server.client(), Duration::ZERO);
    let one = factory.informer::<ConfigMap>(&InformerScope::namespace("default"));
    let two = factory.informer::<ConfigMap>(&InformerScope::namespace("default"));
    let other = factory.informer::<ConfigMap>(&InformerScope::namespace("other"));
    assert_eq!(factory.len(), 2);
    let r1 = Recorder::new();
    let r2 = Recorder::new();
    one.add_event_handler(r1.clone()).unwrap();
    two.add_event_handler(r2.clone()).unwrap();
    factory.start();
    assert!(tokio::time::timeout(Duration::from_secs(20), factory.wait_for_cache_sync()).await.unwrap());
    r1.wait_until("a", |ev| ev.len() == 1).await;
    r2.wait_until("a", |ev| ev.len() == 1).await;
    assert!(one.has_synced() && two.has_synced() && other.has_synced());
    let watches = server.request_log().filter(|r| r.verb == Verb::Watch);
    assert_eq!(watches.len(), 2, "one watch per informer: {watches:#?}");
    factory.shutdown().await;
    assert!(one.is_stopped() && other.is_stopped());
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
