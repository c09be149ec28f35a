//! CustomResourceDefinitions: creating one serves its resource (discovery, every verb through
//! `DynamicObject`), its status gets `acceptedNames`, `NamesAccepted` and `Established`, invalid
//! ones get 422, and deleting it deletes its objects and stops serving it.

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionNames, CustomResourceDefinitionSpec,
    CustomResourceDefinitionVersion, CustomResourceSubresources, CustomResourceValidation, JSONSchemaProps,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kcache_testserver::TestServer;
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::{self, Scope};
use serde_json::json;

use crate::common::status_of;

/// A CRD for `<plural>.example.com`, version v1, with a permissive schema and a status
/// subresource.
fn crd(plural: &str, kind: &str, scope: &str) -> CustomResourceDefinition {
    CustomResourceDefinition {
        metadata: ObjectMeta { name: Some(format!("{plural}.example.com")), ..Default::default() },
        spec: CustomResourceDefinitionSpec {
            group: "example.com".into(),
            names: CustomResourceDefinitionNames {
                plural: plural.into(),
                kind: kind.into(),
                short_names: Some(vec!["wd".into()]),
                ..Default::default()
            },
            scope: scope.into(),
            versions: vec![CustomResourceDefinitionVersion {
                name: "v1".into(),
                served: true,
                storage: true,
                schema: Some(CustomResourceValidation {
                    open_api_v3_schema: Some(JSONSchemaProps {
                        type_: Some("object".into()),
                        x_kubernetes_preserve_unknown_fields: Some(true),
                        ..Default::default()
                    }),
                }),
                subresources: Some(CustomResourceSubresources {
                    status: Some(Default::default()),
                    scale: None,
                }),
                ..Default::default()
            }],
            ..Default::default()
        },
        status: None,
    }
}

fn widgets_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("example.com", "v1", "Widget"), "widgets")
}

fn widget(name: &str, size: i64) -> DynamicObject {
    DynamicObject::new(name, &widgets_resource()).data(json!({"spec": {"size": size}}))
}

fn condition(crd: &CustomResourceDefinition, ty: &str) -> Option<(String, String)> {
    let conds = crd.status.as_ref()?.conditions.as_ref()?;
    conds.iter().find(|c| c.type_ == ty).map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
}

#[tokio::test]
async fn created_crd_is_established_and_serves_its_resource() {
    let server = TestServer::start().await;
    let client = server.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());

    // As upstream, the create response carries only what the strategy sets.
    let created = crds.create(&PostParams::default(), &crd("widgets", "Widget", "Namespaced")).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    let status = created.status.clone().unwrap();
    assert_eq!(status.stored_versions, Some(vec!["v1".to_string()]));
    assert_eq!(condition(&created, "Established"), None);
    assert_eq!(created.spec.names.singular.as_deref(), Some("widget"), "defaulted");
    assert_eq!(created.spec.names.list_kind.as_deref(), Some("WidgetList"), "defaulted");

    // The next read sees what the naming and establishing controllers write.
    let got = crds.get("widgets.example.com").await.unwrap();
    assert_eq!(condition(&got, "NamesAccepted"), Some(("True".into(), "NoConflicts".into())));
    assert_eq!(condition(&got, "Established"), Some(("True".into(), "InitialNamesAccepted".into())));
    let accepted = got.status.unwrap().accepted_names.unwrap();
    assert_eq!((accepted.plural.as_str(), accepted.kind.as_str()), ("widgets", "Widget"));

    // Discovery lists it, with its scope and names.
    let gvk = GroupVersionKind::gvk("example.com", "v1", "Widget");
    let (ar, caps) = discovery::pinned_kind(&client, &gvk).await.unwrap();
    assert_eq!((ar.plural.as_str(), caps.scope), ("widgets", Scope::Namespaced));
    let resources = client.list_api_group_resources("example.com/v1").await.unwrap();
    let widgets = resources.resources.iter().find(|r| r.name == "widgets").unwrap();
    assert_eq!(widgets.singular_name, "widget");
    assert_eq!(widgets.short_names, Some(vec!["wd".to_string()]));
    let groups = client.list_api_groups().await.unwrap();
    let group = groups.groups.iter().find(|g| g.name == "example.com").unwrap();
    assert_eq!(group.preferred_version.as_ref().unwrap().group_version, "example.com/v1");
    assert!(groups.groups.iter().any(|g| g.name == "apiextensions.k8s.io"));
}

#[tokio::test]
async fn a_crd_watcher_sees_it_added_then_established() {
    let server = TestServer::start().await;
    let crds: Api<CustomResourceDefinition> = Api::all(server.client());
    let rv = server.resource_version().to_string();
    let mut events = crds.watch(&WatchParams::default().disable_bookmarks(), &rv).await.unwrap().boxed();
    crds.create(&PostParams::default(), &crd("widgets", "Widget", "Namespaced")).await.unwrap();

    let WatchEvent::Added(added) = events.try_next().await.unwrap().unwrap() else { panic!("not ADDED") };
    assert_eq!(condition(&added, "Established"), None);
    let WatchEvent::Modified(established) = events.try_next().await.unwrap().unwrap() else {
        panic!("not MODIFIED")
    };
    assert_eq!(condition(&established, "Established").map(|c| c.0).as_deref(), Some("True"));
    assert_eq!(established.metadata.generation, Some(1), "a status write keeps the generation");
}

#[tokio::test]
async fn a_crd_with_finalizers_goes_when_they_are_removed() {
    let server = TestServer::start().await;
    let crds: Api<CustomResourceDefinition> = Api::all(server.client());
    let mut with_finalizer = crd("widgets", "Widget", "Namespaced");
    with_finalizer.metadata.finalizers = Some(vec!["example.com/keep".into()]);
    crds.create(&PostParams::default(), &with_finalizer).await.unwrap();
    let api: Api<DynamicObject> = Api::namespaced_with(server.client(), "default", &widgets_resource());
    api.create(&PostParams::default(), &widget("w1", 1)).await.unwrap();

    crds.delete("widgets.example.com", &DeleteParams::default()).await.unwrap();
    assert_eq!(api.list(&ListParams::default()).await.unwrap().items.len(), 1, "served until it goes");
    let unfinalize = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    crds.patch("widgets.example.com", &PatchParams::default(), &unfinalize).await.unwrap();
    assert_eq!(status_of(api.list(&ListParams::default()).await.unwrap_err()).code, 404);
    assert_eq!(status_of(crds.get("widgets.example.com").await.unwrap_err()).code, 404);
}

#[tokio::test]
async fn custom_objects_support_every_verb() {
    let server = TestServer::start().await;
    let crds: Api<CustomResourceDefinition> = Api::all(server.client());
    crds.create(&PostParams::default(), &crd("widgets", "Widget", "Namespaced")).await.unwrap();
    let api: Api<DynamicObject> = Api::namespaced_with(server.client(), "e2e-1", &widgets_resource());

    let w1 = api.create(&PostParams::default(), &widget("w1", 1)).await.unwrap();
    assert_eq!(w1.metadata.generation, Some(1));
    let rv = server.resource_version().to_string();
    let mut events = api.watch(&WatchParams::default().disable_bookmarks(), &rv).await.unwrap().boxed();

    let mut w1 = w1;
    w1.data["spec"]["size"] = json!(2);
    let w1 = api.replace("w1", &PostParams::default(), &w1).await.unwrap();
    assert_eq!(w1.metadata.generation, Some(2));
    api.patch("w1", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})))
        .await
        .unwrap();
    api.create(&PostParams::default(), &widget("w2", 3)).await.unwrap();
    api.delete("w2", &DeleteParams::default()).await.unwrap();

    let mut seen = Vec::new();
    for _ in 0..4 {
        match events.try_next().await.unwrap().unwrap() {
            WatchEvent::Added(o) => seen.push(("ADDED", o.metadata.name.unwrap())),
            WatchEvent::Modified(o) => seen.push(("MODIFIED", o.metadata.name.unwrap())),
            WatchEvent::Deleted(o) => seen.push(("DELETED", o.metadata.name.unwrap())),
            other => panic!("unexpected {other:?}"),
        }
    }
    let names = |v: &[(&'static str, String)]| v.iter().map(|(t, n)| format!("{t} {n}")).collect::<Vec<_>>();
    assert_eq!(names(&seen), ["MODIFIED w1", "MODIFIED w1", "ADDED w2", "DELETED w2"]);

    let listed = api.list(&ListParams::default().labels("a=b")).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.types.kind, "WidgetList");

    // A watch-list (sendInitialEvents) works as for any resource.
    let all: Api<DynamicObject> = Api::all_with(server.client(), &widgets_resource());
    let mut initial = all.watch(&WatchParams::default().initial_events(), "").await.unwrap().boxed();
    let first = initial.try_next().await.unwrap().unwrap();
    assert!(matches!(first, WatchEvent::Added(o) if o.metadata.name.as_deref() == Some("w1")));
    let end = initial.try_next().await.unwrap().unwrap();
    assert!(
        matches!(end, WatchEvent::Bookmark(b) if b.metadata.annotations.contains_key("k8s.io/initial-events-end"))
    );
}

#[tokio::test]
async fn cluster_scoped_crds_serve_cluster_scoped_objects() {
    let server = TestServer::start().await;
    let crds: Api<CustomResourceDefinition> = Api::all(server.client());
    crds.create(&PostParams::default(), &crd("gadgets", "Gadget", "Cluster")).await.unwrap();
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("example.com", "v1", "Gadget"), "gadgets");
    let api: Api<DynamicObject> = Api::all_with(server.client(), &ar);
    let g = DynamicObject::new("g1", &ar).data(json!({"spec": {}}));
    let created = api.create(&PostParams::default(), &g).await.unwrap();
    assert_eq!(created.metadata.namespace, None);
    let namespaced: Api<DynamicObject> = Api::namespaced_with(server.client(), "default", &ar);
    assert_eq!(status_of(namespaced.list(&ListParams::default()).await.unwrap_err()).code, 404);
}

#[tokio::test]
async fn deleting_the_crd_deletes_its_objects_and_stops_serving() {
    let server = TestServer::start().await;
    let crds: Api<CustomResourceDefinition> = Api::all(server.client());
    crds.create(&PostParams::default(), &crd("widgets", "Widget", "Namespaced")).await.unwrap();
    let api: Api<DynamicObject> = Api::namespaced_with(server.client(), "default", &widgets_resource());
    api.create(&PostParams::default(), &widget("w1", 1)).await.unwrap();
    let rv = server.resource_version().to_string();
    let mut events = api.watch(&WatchParams::default().disable_bookmarks(), &rv).await.unwrap().boxed();

    crds.delete("widgets.example.com", &DeleteParams::default()).await.unwrap();

    // Watchers see the objects go, then the stream ends.
    let ev = events.try_next().await.unwrap().unwrap();
    assert!(matches!(ev, WatchEvent::Deleted(o) if o.metadata.name.as_deref() == Some("w1")));
    assert!(events.try_next().await.unwrap().is_none(), "watch ends when the resource goes");

    let gone = status_of(api.list(&ListParams::default()).await.unwrap_err());
    assert_eq!((gone.code, gone.message.as_str()), (404, "the server could not find the requested resource"));
    assert_eq!(status_of(api.create(&PostParams::default(), &widget("w2", 1)).await.unwrap_err()).code, 404);
    assert!(server.client().list_api_group_resources("example.com/v1").await.is_err());
    assert!(!server.client().list_api_groups().await.unwrap().groups.iter().any(|g| g.name == "example.com"));
    assert_eq!(status_of(crds.get("widgets.example.com").await.unwrap_err()).code, 404);

    // Created again, it is served again, empty.
    crds.create(&PostParams::default(), &crd("widgets", "Widget", "Namespaced")).await.unwrap();
    assert!(api.list(&ListParams::default()).await.unwrap().items.is_empty());
}

#[tokio::test]
async fn invalid_crds_are_rejected_like_kube_apiserver() {
    let server = TestServer::start().await;
    let crds: Api<CustomResourceDefinition> = Api::all(server.client());

    let mut misnamed = crd("widgets", "Widget", "Namespaced");
    misnamed.metadata.name = Some("gizmos.example.com".into());
    let s = status_of(crds.create(&PostParams::default(), &misnamed).await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        s.message,
        "CustomResourceDefinition.apiextensions.k8s.io \"gizmos.example.com\" is invalid: metadata.name: \
         Invalid value: \"gizmos.example.com\": must be spec.names.plural+\".\"+spec.group"
    );

    let s = status_of(
        crds.create(&PostParams::default(), &crd("widgets", "Widget", "Global")).await.unwrap_err(),
    );
    assert_eq!(s.code, 422);
    assert!(s.message.contains("spec.scope: Unsupported value: \"Global\""), "{}", s.message);
    assert_eq!(server.objects().count("apiextensions.k8s.io", "v1", "customresourcedefinitions"), 0);

    // The scope cannot change once established.
    let created = crds.create(&PostParams::default(), &crd("widgets", "Widget", "Namespaced")).await.unwrap();
    let patch = Patch::Merge(json!({"spec": {"scope": "Cluster"}}));
    let s = status_of(crds.patch("widgets.example.com", &PatchParams::default(), &patch).await.unwrap_err());
    assert_eq!(s.code, 422);
    assert!(
        s.message.contains("spec.scope: Invalid value: \"Cluster\": field is immutable"),
        "{}",
        s.message
    );
    assert_eq!(created.spec.scope, "Namespaced");
}

#[tokio::test]
async fn a_crd_naming_a_builtin_resource_does_not_replace_it() {
    let server = TestServer::start().await;
    let crds: Api<CustomResourceDefinition> = Api::all(server.client());
    let mut shadow = crd("roles", "Role", "Namespaced");
    shadow.metadata.name = Some("roles.rbac.authorization.k8s.io".into());
    shadow.spec.group = "rbac.authorization.k8s.io".into();
    crds.create(&PostParams::default(), &shadow).await.unwrap();
    crds.delete("roles.rbac.authorization.k8s.io", &DeleteParams::default()).await.unwrap();
    let roles: Api<k8s_openapi::api::rbac::v1::Role> = Api::namespaced(server.client(), "default");
    assert!(roles.list(&ListParams::default()).await.unwrap().items.is_empty(), "still served");
}

#[tokio::test]
async fn updating_the_crd_redefines_the_resource() {
    let server = TestServer::start().await;
    let crds: Api<CustomResourceDefinition> = Api::all(server.client());
    crds.create(&PostParams::default(), &crd("widgets", "Widget", "Namespaced")).await.unwrap();
    let api: Api<DynamicObject> = Api::namespaced_with(server.client(), "default", &widgets_resource());
    api.create(&PostParams::default(), &widget("w1", 1)).await.unwrap();

    // A new storage version: objects are served under it, and storedVersions records both.
    let mut current = crds.get("widgets.example.com").await.unwrap();
    let mut v2 = current.spec.versions[0].clone();
    v2.name = "v2".into();
    current.spec.versions[0].storage = false;
    current.spec.versions.push(v2);
    crds.replace("widgets.example.com", &PostParams::default(), &current).await.unwrap();

    let after = crds.get("widgets.example.com").await.unwrap();
    assert_eq!(after.status.unwrap().stored_versions, Some(vec!["v1".to_string(), "v2".to_string()]));
    let v2 =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("example.com", "v2", "Widget"), "widgets");
    let api2: Api<DynamicObject> = Api::namespaced_with(server.client(), "default", &v2);
    let w1 = api2.get("w1").await.unwrap();
    assert_eq!(w1.types.unwrap().api_version, "example.com/v2");
    assert_eq!(status_of(api.get("w1").await.unwrap_err()).code, 404, "only the storage version is served");
}
