//! Server-side apply and managed fields, as kube-apiserver's field manager runs
//! structured-merge-diff (k8s.io/apiserver `endpoints/handlers/patch.go` `applyPatcher`,
//! k8s.io/apimachinery `util/managedfields`, sigs.k8s.io/structured-merge-diff `merge.Updater`);
//! the scenarios follow apiserver's `test/integration/apiserver/apply/apply_test.go`.

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kcache_testserver::TestServer;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

use crate::common::{cm, raw, status_of};

fn pp(manager: &str) -> PatchParams {
    PatchParams::apply(manager)
}

fn cm_config(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

fn managed<T: kube::Resource<DynamicType = ()>>(obj: &T) -> Value {
    serde_json::to_value(&obj.meta().managed_fields).unwrap()
}

/// `TestApplyAlsoCreates`: an apply to an object that does not exist creates it (201), and its
/// applier owns exactly what it applied (`f:data` and each key; the name is nobody's).
#[tokio::test]
async fn apply_creates_a_missing_object_and_records_its_fields() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let body = serde_json::to_vec(&cm_config("a", json!({"k": "v"}))).unwrap();
    let (code, _, obj) = raw(
        &server,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/a?fieldManager=ctl",
        &[("content-type", "application/apply-patch+yaml")],
        &body,
    )
    .await;
    assert_eq!(code, 201, "{obj}");
    let mf = &obj["metadata"]["managedFields"];
    assert_eq!(mf.as_array().unwrap().len(), 1);
    assert_eq!(mf[0]["manager"], "ctl");
    assert_eq!(mf[0]["operation"], "Apply");
    assert_eq!(mf[0]["apiVersion"], "v1");
    assert_eq!(mf[0]["fieldsType"], "FieldsV1");
    assert_eq!(mf[0]["fieldsV1"], json!({"f:data": {"f:k": {}}}));
    assert!(mf[0]["time"].is_string());
    assert_eq!(cms.get("a").await.unwrap().data.unwrap()["k"], "v");
}

/// Every other write is an `Update` entry for its manager (`fieldManager`, else the
/// User-Agent's product), holding what it changed, with `.` on the maps it created
/// (`Updater.Update`).
#[tokio::test]
async fn creates_and_updates_record_update_entries() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let pp = PostParams { field_manager: Some("creator".into()), ..Default::default() };
    let created = cms.create(&pp, &cm("a", &[("app", "x")], "1")).await.unwrap();
    assert_eq!(
        managed(&created),
        json!([{"manager": "creator", "operation": "Update", "apiVersion": "v1", "time": created.metadata.managed_fields.as_ref().unwrap()[0].time,
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {".": {}, "f:v": {}}, "f:metadata": {"f:labels": {".": {}, "f:app": {}}}}}])
    );
    let patched = cms
        .patch(
            "a",
            &PatchParams { field_manager: Some("editor".into()), ..Default::default() },
            &Patch::Merge(json!({"data": {"v": "2", "w": "3"}})),
        )
        .await
        .unwrap();
    let mf = managed(&patched);
    let by = |m: &str| mf.as_array().unwrap().iter().find(|e| e["manager"] == m).cloned().unwrap();
    // The creator keeps `data` itself; a node with nothing owned below it is `{}`.
    assert_eq!(
        by("creator")["fieldsV1"],
        json!({"f:data": {}, "f:metadata": {"f:labels": {".": {}, "f:app": {}}}})
    );
    assert_eq!(by("editor")["fieldsV1"], json!({"f:data": {"f:v": {}, "f:w": {}}}));
}

/// `TestApplyUpdateApplyConflictForced` / `TestApplyManagedFields`: an apply that would change a
/// field another manager owns is 409 Conflict with one `FieldManagerConflict` cause per field
/// and `getConflictMessage`'s wording; with `force=true` the applier takes the field over.
#[tokio::test]
async fn conflicts_are_409_and_force_takes_ownership() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    cms.patch("a", &pp("first"), &Patch::Apply(cm_config("a", json!({"x": "1", "y": "1"})))).await.unwrap();
    let err =
        cms.patch("a", &pp("second"), &Patch::Apply(cm_config("a", json!({"x": "2"})))).await.unwrap_err();
    let s = status_of(err);
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
    assert_eq!(s.message, "Apply failed with 1 conflict: conflict with \"first\": .data.x");
    let causes = s.details.unwrap().causes;
    assert_eq!(causes.len(), 1);
    assert_eq!((causes[0].reason.as_str(), causes[0].field.as_str()), ("FieldManagerConflict", ".data.x"));
    assert_eq!(causes[0].message, "conflict with \"first\"");

    let two = cms
        .patch("a", &pp("second").force(), &Patch::Apply(cm_config("a", json!({"x": "2"}))))
        .await
        .unwrap();
    assert_eq!(
        two.data.unwrap(),
        [("x".to_string(), "2".to_string()), ("y".to_string(), "1".to_string())].into()
    );
    let mf = managed(&cms.get("a").await.unwrap());
    let by = |m: &str| mf.as_array().unwrap().iter().find(|e| e["manager"] == m).cloned().unwrap();
    assert_eq!(by("first")["fieldsV1"], json!({"f:data": {"f:y": {}}}));
    assert_eq!(by("second")["fieldsV1"], json!({"f:data": {"f:x": {}}}));

    // Two conflicts with an updater: its apiVersion is named.
    let upd = PatchParams { field_manager: Some("updater".into()), ..Default::default() };
    cms.patch("a", &upd, &Patch::Merge(json!({"data": {"p": "1", "q": "1"}}))).await.unwrap();
    let s = status_of(
        cms.patch("a", &pp("third"), &Patch::Apply(cm_config("a", json!({"p": "2", "q": "2"}))))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        s.message,
        "Apply failed with 2 conflicts: conflicts with \"updater\" using v1:\n- .data.p\n- .data.q"
    );
}

/// `TestApplyRemovesFields` (and structured-merge-diff's `prune`): a field the manager applied
/// before and no longer applies is removed, unless another manager owns it too.
#[tokio::test]
async fn fields_no_longer_applied_are_removed() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    cms.patch(
        "a",
        &pp("me"),
        &Patch::Apply(cm_config("a", json!({"keep": "1", "drop": "1", "shared": "1"}))),
    )
    .await
    .unwrap();
    // Another applier co-owns `shared` (same value: no conflict).
    cms.patch("a", &pp("other"), &Patch::Apply(cm_config("a", json!({"shared": "1"})))).await.unwrap();
    let after = cms.patch("a", &pp("me"), &Patch::Apply(cm_config("a", json!({"keep": "1"})))).await.unwrap();
    let data = after.data.unwrap();
    assert_eq!(data.keys().collect::<Vec<_>>(), ["keep", "shared"]);
}

/// Lists merge as their schema says (`x-kubernetes-list-type: map` with its keys, `set`, or
/// atomic), from the OpenAPI captured from kube-apiserver: two managers own one container
/// each; container ports merge by `containerPort` and `protocol`, the omitted `protocol` taking
/// its schema default (`TCP`); finalizers merge as a set.
#[tokio::test]
async fn lists_merge_by_their_keys() {
    let server = TestServer::start().await;
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    let pod = |containers: Value, finalizers: Value| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "finalizers": finalizers},
            "spec": {"containers": containers}})
    };
    pods.patch(
        "p",
        &pp("a"),
        &Patch::Apply(pod(
            json!([{"name": "app", "image": "app:1", "ports": [{"containerPort": 80}]}]),
            json!(["a/f"]),
        )),
    )
    .await
    .unwrap();
    let both = pods
        .patch(
            "p",
            &pp("b"),
            &Patch::Apply(pod(json!([{"name": "sidecar", "image": "side:1"}]), json!(["b/f"]))),
        )
        .await
        .unwrap();
    let names: Vec<_> = both.spec.as_ref().unwrap().containers.iter().map(|c| c.name.clone()).collect();
    assert_eq!(names, ["app", "sidecar"]);
    assert_eq!(both.metadata.finalizers.unwrap(), ["a/f", "b/f"]);
    let mf = managed(&pods.get("p").await.unwrap());
    let a = mf.as_array().unwrap().iter().find(|e| e["manager"] == "a").unwrap();
    assert_eq!(
        a["fieldsV1"],
        json!({"f:metadata": {"f:finalizers": {"v:\"a/f\"": {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:image": {}, "f:name": {},
                "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}}}}})
    );
    // `a` updates its container's image without touching b's.
    let again = pods
        .patch(
            "p",
            &pp("a"),
            &Patch::Apply(pod(
                json!([{"name": "app", "image": "app:2", "ports": [{"containerPort": 80}]}]),
                json!(["a/f"]),
            )),
        )
        .await
        .unwrap();
    let images: Vec<_> =
        again.spec.unwrap().containers.into_iter().map(|c| c.image.unwrap_or_default()).collect();
    assert_eq!(images, ["app:2", "side:1"]);
}

/// A CRD's structural schema carries the same markers: a `x-kubernetes-list-type: map` list of
/// a custom resource merges by its keys; a list without markers is atomic (replaced, and a
/// conflict when another manager owns it).
#[tokio::test]
async fn custom_resources_merge_by_their_crd_markers() {
    let server = TestServer::start().await;
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "names": {"plural": "widgets", "kind": "Widget"}, "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {"spec": {"type": "object", "properties": {
                    "parts": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["id"],
                        "items": {"type": "object", "properties": {"id": {"type": "string"}, "size": {"type": "integer"}}}},
                    "tags": {"type": "array", "items": {"type": "string"}}}}}}}}]},
    }))
    .unwrap();
    Api::<CustomResourceDefinition>::all(server.client()).create(&PostParams::default(), &crd).await.unwrap();
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("example.com", "v1", "Widget"), "widgets");
    let widgets: Api<DynamicObject> = Api::namespaced_with(server.client(), "default", &ar);
    let w = |spec: Value| json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec});
    widgets
        .patch("w", &pp("a"), &Patch::Apply(w(json!({"parts": [{"id": "x", "size": 1}], "tags": ["t1"]}))))
        .await
        .unwrap();
    let both = widgets
        .patch("w", &pp("b"), &Patch::Apply(w(json!({"parts": [{"id": "y", "size": 2}]}))))
        .await
        .unwrap();
    assert_eq!(both.data["spec"]["parts"], json!([{"id": "x", "size": 1}, {"id": "y", "size": 2}]));
    let s =
        status_of(widgets.patch("w", &pp("b"), &Patch::Apply(w(json!({"tags": ["t2"]})))).await.unwrap_err());
    assert_eq!(s.message, "Apply failed with 1 conflict: conflict with \"a\": .spec.tags");
}

/// `ValidatePatchOptions`: an apply without `fieldManager` is 422 ("is required for apply
/// patch"); `force` on another patch type is 422 too.
#[tokio::test]
async fn patch_options_are_validated() {
    let server = TestServer::start().await;
    let body = serde_json::to_vec(&cm_config("a", json!({}))).unwrap();
    let apply = [("content-type", "application/apply-patch+yaml")];
    let (code, _, s) = raw(&server, "PATCH", "/api/v1/namespaces/default/configmaps/a", &apply, &body).await;
    assert_eq!(code, 422);
    assert_eq!(
        s["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
    );
    let merge = [("content-type", "application/merge-patch+json")];
    let (code, _, s) =
        raw(&server, "PATCH", "/api/v1/namespaces/default/configmaps/a?force=true", &merge, b"{}").await;
    assert_eq!(code, 422);
    assert_eq!(
        s["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch"
    );
    // The applied object must be of the resource's kind.
    let wrong = serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "a"}}))
        .unwrap();
    let (code, _, s) =
        raw(&server, "PATCH", "/api/v1/namespaces/default/configmaps/a?fieldManager=m", &apply, &wrong).await;
    assert_eq!((code, s["message"].as_str()), (400, Some("invalid object type: /v1, Kind=Secret")));
    // YAML that is not JSON is said to be unsupported rather than misread.
    let (code, _, s) = raw(
        &server,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/a?fieldManager=m",
        &apply,
        b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
    )
    .await;
    assert_eq!(code, 501, "{s}");
}

/// An apply to the status subresource owns only `status` and changes nothing else; an apply
/// to the main endpoint ignores `status` (the strategies' reset fields).
#[tokio::test]
async fn status_applies_own_only_status() {
    let server = TestServer::start().await;
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    pods.patch(
        "p",
        &pp("spec-owner"),
        &Patch::Apply(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "i"}]}, "status": {"message": "ignored"}})),
    )
    .await
    .unwrap();
    let p = pods.get("p").await.unwrap();
    assert_eq!(p.status.as_ref().unwrap().message, None);
    let p = pods
        .patch_status(
            "p",
            &pp("status-owner"),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "status": {"message": "hello"}})),
        )
        .await
        .unwrap();
    assert_eq!(p.status.unwrap().message.as_deref(), Some("hello"));
    let mf = managed(&pods.get("p").await.unwrap());
    let s = mf.as_array().unwrap().iter().find(|e| e["manager"] == "status-owner").unwrap();
    assert_eq!(
        (s["subresource"].as_str(), &s["fieldsV1"]),
        (Some("status"), &json!({"f:status": {"f:message": {}}}))
    );
}
