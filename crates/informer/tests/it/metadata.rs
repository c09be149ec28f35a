//! Metadata-only informers: `SharedInformerFactory::metadata_informer`, whose cache holds kube's
//! `PartialObjectMeta` (client-go's `metadata/metadatainformer` and `metadatalister`,
//! `informer_test.go`), against kcache-testserver: handlers, listers and indexes, watch-list and
//! LIST, built-in and custom resources, and the factory's sharing rules.

use std::sync::Arc;
use std::time::Duration;

use crate::common::EventLog;
use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kcache_informer::{EventHandlerFuncs, InformerScope, SharedIndexInformer, SharedInformerFactory};
use kcache_reflector::ReflectorConfig;
use kcache_store::{
    CONTROLLER_UID_INDEX, Indexers, OWNER_UID_INDEX, controller_uid_index_func, label_index_func,
    owner_uid_index_func,
};
use kcache_testserver::{ResourceDef, TestServer, Verb};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{GroupVersionKind, PartialObjectMeta, TypeMeta};

/// A handler of a metadata informer that logs what it sees: `add name`, `update name app=<label>`,
/// `delete name`.
fn handler(seen: &EventLog) -> EventHandlerFuncs<PartialObjectMeta> {
    let (a, u, d) = (seen.clone(), seen.clone(), seen.clone());
    let name = |o: &PartialObjectMeta| o.metadata.name.clone().unwrap_or_default();
    EventHandlerFuncs::new()
        .on_add(move |o: &Arc<PartialObjectMeta>, _| a.push(format!("add {}", name(o))))
        .on_update(move |_, o: &Arc<PartialObjectMeta>| {
            let app = o.metadata.labels.as_ref().and_then(|l| l.get("app")).cloned().unwrap_or_default();
            u.push(format!("update {} app={app}", name(o)));
        })
        .on_delete(move |gone| d.push(format!("delete {}", name(gone.object()))))
}

fn owner(uid: &str, controller: bool) -> OwnerReference {
    OwnerReference {
        api_version: "apps/v1".into(),
        kind: "ReplicaSet".into(),
        name: format!("rs-{uid}"),
        uid: uid.into(),
        controller: Some(controller),
        ..OwnerReference::default()
    }
}

/// A Pod with a label `app`, an owner and a container.
fn pod(name: &str, app: &str, owner_uid: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            labels: Some([("app".to_owned(), app.to_owned())].into()),
            annotations: Some([("note".to_owned(), "kept".to_owned())].into()),
            owner_references: Some(vec![owner(owner_uid, true)]),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "c".into(),
                image: Some("nginx:1.27".into()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        ..Pod::default()
    }
}

/// A server with no garbage collector (the owners above do not exist).
async fn server() -> TestServer {
    TestServer::builder().garbage_collection(false).start().await
}

async fn synced(factory: &SharedInformerFactory) {
    let ok = tokio::time::timeout(Duration::from_secs(20), factory.wait_for_cache_sync()).await;
    assert!(ok.expect("caches sync in time"), "caches synced");
}

/// The partial object the server sends for an object: `PartialObjectMetadata` of meta.k8s.io/v1.
fn partial_types() -> Option<TypeMeta> {
    Some(TypeMeta { api_version: "meta.k8s.io/v1".into(), kind: "PartialObjectMetadata".into() })
}

/// client-go metadatainformer `TestMetadataSharedInformerFactory` (scenario 1: an add triggers
/// `AddFunc`; 2: an update `UpdateFunc`; 3: a delete `DeleteFunc`) and
/// `TestWatchListSemanticsSimple` (the informer syncs from one watch-list request), on a
/// multi-threaded runtime so the decoding threads run: the cache holds each Pod's metadata
/// (labels, annotations, owner references; `managedFields` stripped as for whole objects) as
/// `PartialObjectMetadata`, never a spec.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_informer_follows_adds_updates_and_deletes() {
    let server = server().await;
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    pods.create(&PostParams::default(), &pod("p1", "web", "u1")).await.unwrap();
    let factory = SharedInformerFactory::new(server.client(), Duration::ZERO);
    let informer =
        factory.metadata_informer(&ApiResource::erase::<Pod>(&()), &InformerScope::namespace("default"));
    assert_eq!(informer.name(), "metadata:pods/default");
    let seen = EventLog::default();
    informer.add_event_handler(handler(&seen)).unwrap();
    factory.start();
    synced(&factory).await;

    let cached = informer.lister().namespaced("default").get("p1").expect("p1 cached");
    assert_eq!(cached.types, partial_types(), "the server sent PartialObjectMetadata");
    let meta = &cached.metadata;
    assert_eq!(meta.labels.as_ref().unwrap()["app"], "web");
    assert_eq!(meta.annotations.as_ref().unwrap()["note"], "kept");
    assert_eq!(meta.owner_references.as_deref(), Some(&[owner("u1", true)][..]));
    assert!(meta.uid.is_some() && meta.resource_version.is_some() && meta.creation_timestamp.is_some());
    assert!(meta.managed_fields.is_none(), "stripped while decoding, as for whole objects");
    let log = server.request_log();
    assert!(log.filter(|r| r.verb == Verb::List).is_empty(), "synced by watch-list alone");
    let watch = &log.filter(|r| r.verb == Verb::Watch)[0];
    assert_eq!(watch.query_param("sendInitialEvents").as_deref(), Some("true"));

    let patch = serde_json::json!({"metadata": {"labels": {"app": "api"}}});
    pods.patch("p1", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    pods.create(&PostParams::default(), &pod("p2", "web", "u1")).await.unwrap();
    pods.delete("p1", &DeleteParams::default()).await.unwrap();
    let events = seen.wait_for(4).await;
    assert_eq!(events, ["add p1", "update p1 app=api", "add p2", "delete p1"]);
    let names: Vec<_> = informer.lister().list().iter().map(|o| o.metadata.name.clone().unwrap()).collect();
    assert_eq!(names, ["p2"]);
    factory.shutdown().await;
}

/// client-go's metadata informer without watch-list (`TestUnSupportWatchListSemantics`: a client
/// that cannot watch-list syncs by LIST): a `PartialObjectMetadataList` fills the cache, and the
/// watch goes on from the list's version. (Continue pages of it: the reflector's
/// `metadata_lists_page_through_continue_tokens`.)
#[tokio::test]
async fn metadata_informer_syncs_from_a_partial_object_metadata_list() {
    let server = server().await;
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    for i in 0..5 {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(format!("cm-{i}"));
        cm.data = Some([("big".to_owned(), "x".repeat(1000))].into());
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    let factory = SharedInformerFactory::new(server.client(), Duration::ZERO);
    let informer = factory.metadata_informer(&ApiResource::erase::<ConfigMap>(&()), &InformerScope::all());
    informer
        .set_reflector_config(ReflectorConfig {
            use_watch_list: false,
            page_size: Some(2),
            ..ReflectorConfig::default()
        })
        .unwrap();
    let seen = EventLog::default();
    informer.add_event_handler(handler(&seen)).unwrap();
    factory.start();
    synced(&factory).await;
    let lists = server.request_log().filter(|r| r.verb == Verb::List);
    // At "0" the server answers from its cache, whole, whatever the limit.
    assert_eq!(lists.len(), 1, "{lists:#?}");
    assert_eq!(lists[0].status, 200);
    let cached = informer.lister().list();
    assert_eq!(cached.len(), 5);
    assert!(cached.iter().all(|o| o.types == partial_types()));
    cms.delete("cm-0", &DeleteParams::default()).await.unwrap();
    assert_eq!(seen.wait_for(6).await[5], "delete cm-0", "the watch goes on after the list");
    factory.shutdown().await;
}

/// The factory's sharing rules (client-go metadatainformer's `ForResource` keeps one informer per
/// resource; kcache's key adds namespace and selectors): the same metadata informer twice is one
/// informer, and a metadata informer and a full one of the same resource (typed or dynamic) are
/// different informers, with different names, each with its own watch.
#[tokio::test]
async fn metadata_and_full_informers_of_a_type_are_different_informers() {
    let server = server().await;
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    pods.create(&PostParams::default(), &pod("p1", "web", "u1")).await.unwrap();
    let factory = SharedInformerFactory::new(server.client(), Duration::ZERO);
    let ar = ApiResource::erase::<Pod>(&());
    let meta = factory.metadata_informer(&ar, &InformerScope::all());
    let meta_again = factory.metadata_informer(&ar, &InformerScope::namespace(""));
    let typed: SharedIndexInformer<Pod> = factory.informer::<Pod>(&InformerScope::all());
    let dynamic = factory.dynamic_informer(&ar, &InformerScope::all());
    let labelled = factory.metadata_informer(&ar, &InformerScope::all().labels("app=web"));
    assert_eq!(factory.len(), 4, "metadata, typed, dynamic, and metadata with a selector");
    assert_eq!(
        [meta.name(), meta_again.name(), typed.name(), dynamic.name(), labelled.name()],
        ["metadata:pods", "metadata:pods", "Pod", "pods", "metadata:pods;labels=app=web"]
    );
    factory.start();
    synced(&factory).await;
    assert_eq!(server.request_log().filter(|r| r.verb == Verb::Watch).len(), 4, "one watch each");
    // The same informer: one cache.
    let a = meta.lister().get("default/p1").unwrap();
    let b = meta_again.lister().get("default/p1").unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    assert_eq!(a.types, partial_types());
    // The full informers hold the whole Pod.
    assert!(typed.lister().get("default/p1").unwrap().spec.is_some());
    let d = dynamic.lister().get("default/p1").unwrap();
    assert_eq!(d.types.as_ref().map(|t| t.kind.as_str()), Some("Pod"));
    assert!(d.data.get("spec").is_some());
    assert_eq!(labelled.lister().list().len(), 1);
    factory.shutdown().await;
}

/// A metadata informer of a custom resource, with the indexes controllers add (client-go's
/// `metadatalister` `ByIndex` through the informer's indexer; the owner and controller indexes
/// as kube-controller-manager's `controllerUIDIndex`, the label index by `app`): each finds its
/// objects, and follows an update that moves an object from one value to another.
#[tokio::test]
async fn metadata_informer_of_a_custom_resource_with_label_and_owner_indexes() {
    let server = server().await;
    server.register(ResourceDef::new("example.com", "v1", "widgets", "Widget", true));
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget"));
    let widgets: Api<DynamicObject> = Api::namespaced_with(server.client(), "default", &ar);
    let widget = |name: &str, app: &str, owners: Vec<OwnerReference>| {
        let mut w = DynamicObject::new(name, &ar).data(serde_json::json!({"spec": {"size": 3}}));
        w.metadata.labels = Some([("app".to_owned(), app.to_owned())].into());
        w.metadata.owner_references = Some(owners);
        w
    };
    widgets.create(&PostParams::default(), &widget("w1", "web", vec![owner("u1", true)])).await.unwrap();
    widgets
        .create(&PostParams::default(), &widget("w2", "web", vec![owner("u1", false), owner("u2", true)]))
        .await
        .unwrap();
    widgets.create(&PostParams::default(), &widget("w3", "db", vec![])).await.unwrap();

    let factory = SharedInformerFactory::new(server.client(), Duration::ZERO);
    let informer = factory.metadata_informer(&ar, &InformerScope::namespace("default"));
    assert_eq!(informer.name(), "metadata:widgets.example.com/default");
    informer
        .add_indexers(Indexers::from([
            ("app".to_owned(), label_index_func::<PartialObjectMeta>("app")),
            (OWNER_UID_INDEX.to_owned(), owner_uid_index_func()),
            (CONTROLLER_UID_INDEX.to_owned(), controller_uid_index_func()),
        ]))
        .unwrap();
    let seen = EventLog::default();
    informer.add_event_handler(handler(&seen)).unwrap();
    factory.start();
    synced(&factory).await;
    let lister = informer.lister();
    let names = |index: &str, value: &str| {
        let mut n: Vec<String> =
            lister.by_index(index, value).unwrap().iter().map(|o| o.metadata.name.clone().unwrap()).collect();
        n.sort();
        n
    };
    assert_eq!(names("app", "web"), ["w1", "w2"]);
    assert_eq!(names("app", "db"), ["w3"]);
    assert_eq!(names(OWNER_UID_INDEX, "u1"), ["w1", "w2"]);
    assert_eq!(names(CONTROLLER_UID_INDEX, "u1"), ["w1"]);
    assert_eq!(names(CONTROLLER_UID_INDEX, "u2"), ["w2"]);
    assert!(lister.list().iter().all(|o| o.types == partial_types()));

    let patch = serde_json::json!({"metadata": {"labels": {"app": "db"}}});
    widgets.patch("w1", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    assert_eq!(seen.wait_for(4).await[3], "update w1 app=db");
    assert_eq!(names("app", "web"), ["w2"]);
    assert_eq!(names("app", "db"), ["w1", "w3"]);
    factory.shutdown().await;
}
