//! The factory's memory switches: `cache_representation(CacheRepr::Serialized)` (kcache's own:
//! the cache keeps each object as compact JSON and decodes it on read) and `compact_objects`
//! (each decoded object copied once at its exact size), against kcache-testserver, with
//! client-go's informer scenarios run through them.

use std::sync::Arc;
use std::time::Duration;

use crate::common::EventLog;
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kcache_informer::{CacheRepr, EventHandlerFuncs, InformerScope, SharedInformerFactory};
use kcache_store::{Indexers, OWNER_UID_INDEX, owner_uid_index_func};
use kcache_testserver::TestServer;
use kube::api::{Api, ApiResource, DeleteParams, Patch, PatchParams, PostParams};

fn app(p: &Pod) -> String {
    p.metadata.labels.as_ref().and_then(|l| l.get("app")).cloned().unwrap_or_default()
}

/// A handler that logs every event, as `add name`, `update name old-app->new-app`, `delete name`.
fn handler(seen: &EventLog) -> EventHandlerFuncs<Pod> {
    let (a, u, d) = (seen.clone(), seen.clone(), seen.clone());
    let name = |p: &Pod| p.metadata.name.clone().unwrap_or_default();
    EventHandlerFuncs::new()
        .on_add(move |p: &Arc<Pod>, _| a.push(format!("add {}", name(p))))
        .on_update(move |old: &Arc<Pod>, new: &Arc<Pod>| {
            u.push(format!("update {} {}->{}", name(new), app(old), app(new)));
        })
        .on_delete(move |gone| d.push(format!("delete {}", name(gone.object()))))
}

/// A Pod with a label `app`, a controller owner and three containers (so a decoded `Vec` of
/// them has capacity 4: serde_json gives no length hint and `Vec` doubles).
fn pod(name: &str, app: &str, owner_uid: &str) -> Pod {
    let container =
        |n: &str| Container { name: n.into(), image: Some("nginx:1.27".into()), ..Container::default() };
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            labels: Some([("app".to_owned(), app.to_owned())].into()),
            owner_references: Some(vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: "ReplicaSet".into(),
                name: format!("rs-{owner_uid}"),
                uid: owner_uid.into(),
                controller: Some(true),
                ..OwnerReference::default()
            }]),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![container("a"), container("b"), container("c")],
            ..PodSpec::default()
        }),
        ..Pod::default()
    }
}

async fn synced(factory: &SharedInformerFactory) {
    let ok = tokio::time::timeout(Duration::from_secs(20), factory.wait_for_cache_sync()).await;
    assert!(ok.expect("caches sync in time"), "caches synced");
}

/// client-go's `TestSharedInformerFactory`-style add, update and delete (and metadatainformer's
/// `TestMetadataSharedInformerFactory`) through a factory with
/// `cache_representation(CacheRepr::Serialized)`, typed and metadata-only: handlers see every
/// change with the old object of an update decoded from the cache, listers and the owner index
/// read objects equal to what the server holds (each read a new allocation), and the cache
/// follows the deletes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serialized_caches_follow_adds_updates_and_deletes() {
    let server = TestServer::builder().garbage_collection(false).start().await;
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    pods.create(&PostParams::default(), &pod("p1", "web", "u1")).await.unwrap();
    let factory = SharedInformerFactory::new(server.client(), Duration::ZERO)
        .cache_representation(CacheRepr::Serialized);
    let typed = factory.informer::<Pod>(&InformerScope::namespace("default"));
    let meta =
        factory.metadata_informer(&ApiResource::erase::<Pod>(&()), &InformerScope::namespace("default"));
    assert_eq!(typed.indexer().representation(), CacheRepr::Serialized);
    assert_eq!(meta.indexer().representation(), CacheRepr::Serialized);
    typed.add_indexers(Indexers::from([(OWNER_UID_INDEX.to_owned(), owner_uid_index_func())])).unwrap();
    meta.add_indexers(Indexers::from([(OWNER_UID_INDEX.to_owned(), owner_uid_index_func())])).unwrap();
    let seen = EventLog::default();
    typed.add_event_handler(handler(&seen)).unwrap();
    factory.start();
    synced(&factory).await;

    let server_p1 = pods.get("p1").await.unwrap();
    let cached = typed.lister().namespaced("default").get("p1").expect("p1 cached");
    assert_eq!(cached.spec, server_p1.spec);
    assert_eq!(cached.metadata.uid, server_p1.metadata.uid);
    let again = typed.lister().get("default/p1").unwrap();
    assert!(!Arc::ptr_eq(&cached, &again), "every read decodes");
    assert_eq!(cached, again);
    assert_eq!(typed.lister().by_index(OWNER_UID_INDEX, "u1").unwrap().len(), 1);
    let m = meta.lister().get("default/p1").expect("metadata cached");
    assert_eq!(m.metadata.labels.as_ref().unwrap()["app"], "web");
    assert_eq!(meta.lister().by_index(OWNER_UID_INDEX, "u1").unwrap().len(), 1);

    let patch = serde_json::json!({"metadata": {"labels": {"app": "api"}}});
    pods.patch("p1", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    pods.create(&PostParams::default(), &pod("p2", "web", "u2")).await.unwrap();
    pods.delete("p1", &DeleteParams::default()).await.unwrap();
    let events = seen.wait_for(4).await;
    assert_eq!(events, ["add p1", "update p1 web->api", "add p2", "delete p1"]);
    let names: Vec<_> = typed.lister().list().iter().map(|p| p.metadata.name.clone().unwrap()).collect();
    assert_eq!(names, ["p2"]);
    assert!(typed.lister().by_index(OWNER_UID_INDEX, "u1").unwrap().is_empty());
    assert_eq!(typed.lister().by_index(OWNER_UID_INDEX, "u2").unwrap().len(), 1);
    factory.shutdown().await;
}

/// The factory's `compact_objects(true)` reaches every informer it builds (client-go has no
/// counterpart: Go's decoder allocates slices at their length): a cached Pod's three containers
/// sit in a `Vec` of capacity 3, where the default cache keeps the decoder's capacity 4.
#[tokio::test]
async fn factory_compact_objects_reaches_its_informers() {
    let server = TestServer::builder().garbage_collection(false).start().await;
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    pods.create(&PostParams::default(), &pod("p1", "web", "u1")).await.unwrap();
    let capacity = |factory: SharedInformerFactory| async move {
        let informer = factory.informer::<Pod>(&InformerScope::all());
        factory.start();
        synced(&factory).await;
        let p = informer.lister().get("default/p1").unwrap();
        factory.shutdown().await;
        p.spec.as_ref().unwrap().containers.capacity()
    };
    assert_eq!(capacity(SharedInformerFactory::new(server.client(), Duration::ZERO)).await, 4);
    assert_eq!(
        capacity(SharedInformerFactory::new(server.client(), Duration::ZERO).compact_objects(true)).await,
        3
    );
}

/// `set_cache_representation` is a setting like the others (client-go's `SetTransform` after
/// start fails): refused once the informer has started, and the cache keeps its representation.
#[tokio::test]
async fn cache_representation_cannot_change_after_start() {
    let server = TestServer::builder().start().await;
    let factory = SharedInformerFactory::new(server.client(), Duration::ZERO);
    let informer = factory.informer::<Pod>(&InformerScope::all());
    factory.start();
    synced(&factory).await;
    assert!(matches!(
        informer.set_cache_representation(CacheRepr::Serialized),
        Err(kcache_informer::InformerError::AlreadyStarted)
    ));
    assert_eq!(informer.indexer().representation(), CacheRepr::Objects);
    factory.shutdown().await;
}
