//! Resources registered at run time: discovery finds them and `DynamicObject` works for every
//! verb, with custom-resource semantics (generation, required resourceVersion on update).

use futures::StreamExt;
use kcache_testserver::{DirectError, ResourceDef, TestServer};
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::{self, Discovery, Scope};
use serde_json::json;

use crate::common::{describe, status_of};

fn widget_server_def() -> ResourceDef {
    ResourceDef::new("example.com", "v1", "widgets", "Widget", true)
}

fn widget(name: &str, size: i64) -> DynamicObject {
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget"));
    DynamicObject::new(name, &ar).data(json!({"spec": {"size": size}}))
}

#[tokio::test]
async fn discovery_finds_registered_resources() {
    let server = TestServer::start().await;
    server.register(widget_server_def());
    server.register(ResourceDef::new("example.com", "v1", "gadgets", "Gadget", false));
    let client = server.client();

    let gvk = GroupVersionKind::gvk("example.com", "v1", "Widget");
    let (ar, caps) = discovery::pinned_kind(&client, &gvk).await.unwrap();
    assert_eq!((ar.plural.as_str(), caps.scope), ("widgets", Scope::Namespaced));

    let d = Discovery::new(client.clone()).run().await.unwrap();
    let (gadget, caps) = d.resolve_gvk(&GroupVersionKind::gvk("example.com", "v1", "Gadget")).unwrap();
    assert_eq!((gadget.plural.as_str(), caps.scope), ("gadgets", Scope::Cluster));
    assert!(d.resolve_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap")).is_some());

    let v = client.apiserver_version().await.unwrap();
    assert_eq!(v.major, "1");
}

#[tokio::test]
async fn dynamic_objects_support_every_verb() {
    let server = TestServer::start().await;
    server.register(widget_server_def());
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget"));
    let api: Api<DynamicObject> = Api::namespaced_with(server.client(), "default", &ar);

    let created = api.create(&PostParams::default(), &widget("w1", 1)).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(created.data["spec"]["size"], 1);

    let mut s = api
        .watch(&WatchParams::default().disable_bookmarks(), &server.resource_version().to_string())
        .await
        .unwrap()
        .boxed();

    // Metadata-only changes keep the generation; spec changes bump it.
    let labelled = api
        .patch("w1", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})))
        .await
        .unwrap();
    assert_eq!(labelled.metadata.generation, Some(1));
    let resized =
        api.patch("w1", &PatchParams::default(), &Patch::Merge(json!({"spec": {"size": 2}}))).await.unwrap();
    assert_eq!(resized.metadata.generation, Some(2));

    // Custom resources need a resourceVersion on update.
    let mut no_rv = resized.clone();
    no_rv.metadata.resource_version = None;
    let s422 = status_of(api.replace("w1", &PostParams::default(), &no_rv).await.unwrap_err());
    assert_eq!(s422.code, 422);
    let replaced = api.replace("w1", &PostParams::default(), &resized).await.unwrap();
    assert_eq!(replaced.metadata.resource_version, resized.metadata.resource_version, "no-op update");

    assert_eq!(api.list(&ListParams::default().labels("a=b")).await.unwrap().items.len(), 1);
    assert_eq!(api.get("w1").await.unwrap().data["spec"]["size"], 2);

    let deleted = api.delete("w1", &DeleteParams::default()).await.unwrap();
    // apiextensions-apiserver's custom resource registry does not set ReturnDeletedObject
    // (kube-apiserver v1.36.3, the e2e differential step "a custom resource deleted as
    // PartialObjectMetadata: a Status").
    assert!(deleted.is_right(), "custom resources answer a finished DELETE with a Status");

    let mut types = Vec::new();
    while types.len() < 3 {
        match s.next().await.unwrap().unwrap() {
            WatchEvent::Modified(o) => types.push(format!("MODIFIED {}", o.data["spec"]["size"])),
            WatchEvent::Deleted(o) => types.push(format!("DELETED {}", o.metadata.name.unwrap())),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(types, ["MODIFIED 1", "MODIFIED 2", "DELETED w1"]);
}

#[tokio::test]
async fn a_body_of_another_kind_is_422_for_custom_resources() {
    let server = TestServer::start().await;
    server.register(widget_server_def());
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget"));
    let api: Api<DynamicObject> = Api::namespaced_with(server.client(), "default", &ar);
    let mut w = widget("w1", 1);
    w.types.as_mut().unwrap().kind = "SomethingElse".into();
    let s = status_of(api.create(&PostParams::default(), &w).await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        s.message,
        "SomethingElse.example.com \"w1\" is invalid: kind: Invalid value: \"SomethingElse\": must be Widget"
    );
}

#[tokio::test]
async fn cluster_scoped_custom_resources_live_outside_namespaces() {
    let server = TestServer::start().await;
    server.register(ResourceDef::new("example.com", "v1", "gadgets", "Gadget", false));
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Gadget"));
    let api: Api<DynamicObject> = Api::all_with(server.client(), &ar);
    let g = DynamicObject::new("g1", &ar);
    let created = api.create(&PostParams::default(), &g).await.unwrap();
    assert_eq!(created.metadata.namespace, None);
    assert_eq!(api.list(&ListParams::default()).await.unwrap().items.len(), 1);
    let namespaced: Api<DynamicObject> = Api::namespaced_with(server.client(), "default", &ar);
    assert_eq!(status_of(namespaced.list(&ListParams::default()).await.unwrap_err()).code, 404);
}

#[tokio::test]
async fn bulk_inserted_objects_are_served_and_watched() {
    let server = TestServer::start().await;
    let n = server.objects().bulk_insert(
        "",
        "v1",
        "configmaps",
        (0..1000).map(|i| json!({"metadata": {"name": format!("cm-{i:04}"), "namespace": "default"}, "data": {"i": i.to_string()}})),
    );
    assert_eq!(n, 1000);
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::default_namespaced(server.client());
    let list = cms.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 1000);
    assert_eq!(list.items[0].metadata.name.as_deref(), Some("cm-0000"));
    assert_eq!(server.objects().count("", "v1", "configmaps"), 1000);

    let mut s = cms
        .watch(&WatchParams::default().disable_bookmarks(), &server.resource_version().to_string())
        .await
        .unwrap()
        .boxed();
    let rv = server
        .objects()
        .upsert("", "v1", "configmaps", json!({"metadata": {"name": "cm-0000"}, "data": {"i": "x"}}))
        .unwrap();
    let ev = describe(&s.next().await.unwrap().unwrap());
    assert_eq!(ev, ("MODIFIED".into(), "cm-0000".into(), rv.to_string()));
    assert!(server.objects().delete("", "v1", "configmaps", "default", "cm-0000"));
    assert_eq!(describe(&s.next().await.unwrap().unwrap()).0, "DELETED");
    assert!(server.objects().get("", "v1", "configmaps", "default", "cm-0001").is_some());
}

#[tokio::test]
async fn direct_writes_refuse_what_cannot_be_stored_and_keep_identity_on_replace() {
    let server = TestServer::start().await;
    let objects = server.objects();
    let named = json!({"metadata": {"name": "a"}, "data": {"v": "1"}});
    let unknown = objects.upsert("", "v1", "gizmos", named.clone()).unwrap_err();
    assert_eq!(unknown, DirectError::UnknownResource("/v1/gizmos".into()));
    assert_eq!(unknown.to_string(), "resource /v1/gizmos is not served");
    let upsert = |o| objects.upsert("", "v1", "configmaps", o);
    assert_eq!(upsert(json!({"metadata": {}})), Err(DirectError::MissingName));
    assert_eq!(upsert(json!({"metadata": {"name": ""}})), Err(DirectError::MissingName));
    assert_eq!(upsert(json!({"metadata": "a"})), Err(DirectError::MissingName));
    assert_eq!(upsert(json!(["a"])), Err(DirectError::NotAnObject));
    // bulk_insert skips what upsert refuses.
    assert_eq!(objects.bulk_insert("", "v1", "configmaps", [json!({}), json!(1), named.clone()]), 1);
    assert_eq!(objects.bulk_insert("", "v1", "gizmos", [named.clone()]), 0);
    assert_eq!(objects.count("", "v1", "configmaps"), 1);

    // A replacement keeps the uid and creationTimestamp, like an update, and fills in the rest.
    let first = objects.get("", "v1", "configmaps", "default", "a").unwrap();
    let rv = upsert(json!({"metadata": {"name": "a", "uid": "mine"}, "data": {"v": "2"}})).unwrap();
    let second = objects.get("", "v1", "configmaps", "default", "a").unwrap();
    assert_eq!(second["metadata"]["uid"], first["metadata"]["uid"]);
    assert_eq!(second["metadata"]["creationTimestamp"], first["metadata"]["creationTimestamp"]);
    assert_eq!(second["metadata"]["resourceVersion"], rv.to_string());
    assert_eq!((second["apiVersion"].as_str(), second["kind"].as_str()), (Some("v1"), Some("ConfigMap")));
    assert_eq!(second["data"]["v"], "2");
    assert!(objects.delete("", "v1", "configmaps", "default", "a"));
    assert!(!objects.delete("", "v1", "configmaps", "default", "a"));
    assert!(!objects.delete("", "v1", "gizmos", "default", "a"));
    assert_eq!(objects.get("", "v1", "configmaps", "default", "a"), None);
}
