//! Get, create, update, merge patch and delete of built-in resources through typed `kube::Api`.

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret};
use kcache_testserver::TestServer;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams, Preconditions};
use serde_json::json;

use crate::common::{cm, status_of};

#[tokio::test]
async fn create_sets_server_fields_and_get_returns_the_object() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let created = cms.create(&PostParams::default(), &cm("a", &[], "1")).await.unwrap();
    let meta = &created.metadata;
    assert_eq!(meta.namespace.as_deref(), Some("default"));
    assert!(meta.uid.as_deref().is_some_and(|u| u.len() == 36));
    assert!(meta.creation_timestamp.is_some());
    let rv: u64 = meta.resource_version.as_deref().unwrap().parse().unwrap();
    assert_eq!(rv, server.resource_version());
    assert_eq!(meta.generation, None, "configmaps have no generation");

    let got = cms.get("a").await.unwrap();
    assert_eq!(got, created);

    let second = cms.create(&PostParams::default(), &cm("b", &[], "1")).await.unwrap();
    let rv2: u64 = second.metadata.resource_version.unwrap().parse().unwrap();
    assert!(rv2 > rv, "resourceVersion strictly increases");
}

#[tokio::test]
async fn create_existing_is_409_already_exists_and_get_missing_is_404() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    cms.create(&PostParams::default(), &cm("a", &[], "1")).await.unwrap();
    let s = status_of(cms.create(&PostParams::default(), &cm("a", &[], "1")).await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(s.message, "configmaps \"a\" already exists");

    let s = status_of(cms.get("nope").await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (404, "NotFound"));
    assert_eq!(s.message, "configmaps \"nope\" not found");
    let details = s.details.unwrap();
    assert_eq!((details.name.as_str(), details.kind.as_str()), ("nope", "configmaps"));
}

#[tokio::test]
async fn update_with_stale_resource_version_is_409_conflict() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let v1 = cms.create(&PostParams::default(), &cm("a", &[], "1")).await.unwrap();
    let mut v2 = v1.clone();
    v2.data = Some([("v".to_string(), "2".to_string())].into());
    let v2 = cms.replace("a", &PostParams::default(), &v2).await.unwrap();
    assert_ne!(v2.metadata.resource_version, v1.metadata.resource_version);
    assert_eq!(v2.metadata.uid, v1.metadata.uid);

    let mut stale = v1.clone();
    stale.data = Some([("v".to_string(), "3".to_string())].into());
    let s = status_of(cms.replace("a", &PostParams::default(), &stale).await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        s.message,
        "Operation cannot be fulfilled on configmaps \"a\": the object has been modified; please apply your \
         changes to the latest version and try again"
    );

    // Without a resourceVersion the update is unconditional (allowed for built-ins).
    stale.metadata.resource_version = None;
    let v3 = cms.replace("a", &PostParams::default(), &stale).await.unwrap();
    assert_eq!(v3.data.unwrap()["v"], "3");

    // Updating a missing object is 404.
    let s = status_of(cms.replace("zz", &PostParams::default(), &cm("zz", &[], "1")).await.unwrap_err());
    assert_eq!(s.code, 404);
}

#[tokio::test]
async fn a_no_op_update_keeps_the_resource_version() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let v1 = cms.create(&PostParams::default(), &cm("a", &[], "1")).await.unwrap();
    let same = cms.replace("a", &PostParams::default(), &v1).await.unwrap();
    assert_eq!(same.metadata.resource_version, v1.metadata.resource_version);
    let rv_before = server.resource_version();
    cms.patch("a", &PatchParams::default(), &Patch::Merge(json!({"data": {"v": "1"}}))).await.unwrap();
    assert_eq!(server.resource_version(), rv_before);
}

#[tokio::test]
async fn merge_patch_and_strategic_patch_merge_into_the_object() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    cms.create(&PostParams::default(), &cm("a", &[("app", "x")], "1")).await.unwrap();
    let p = cms
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"w": "2"}, "metadata": {"labels": {"app": null, "b": "c"}}})),
        )
        .await
        .unwrap();
    let data = p.data.unwrap();
    assert_eq!((data["v"].as_str(), data["w"].as_str()), ("1", "2"));
    assert_eq!(p.metadata.labels.unwrap().into_iter().collect::<Vec<_>>(), vec![("b".into(), "c".into())]);

    let p = cms
        .patch("a", &PatchParams::default(), &Patch::Strategic(json!({"data": {"v": "9"}})))
        .await
        .unwrap();
    assert_eq!(p.data.unwrap()["v"], "9");

    // A patch carrying a stale resourceVersion is a conflict.
    let s = status_of(
        cms.patch("a", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"resourceVersion": "1"}})))
            .await
            .unwrap_err(),
    );
    assert_eq!(s.code, 409);
    let s = status_of(cms.patch("zz", &PatchParams::default(), &Patch::Merge(json!({}))).await.unwrap_err());
    assert_eq!(s.code, 404);
}

#[tokio::test]
async fn delete_answers_status_for_configmaps_and_the_object_for_pods() {
    let server = TestServer::start().await;
    let client = server.client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let created = cms.create(&PostParams::default(), &cm("a", &[], "1")).await.unwrap();
    let res = cms.delete("a", &DeleteParams::default()).await.unwrap();
    let status = res.right().expect("configmap delete answers a Status");
    assert_eq!(status.details.unwrap().uid, created.metadata.uid.unwrap());
    assert_eq!(status_of(cms.get("a").await.unwrap_err()).code, 404);
    assert_eq!(status_of(cms.delete("a", &DeleteParams::default()).await.unwrap_err()).code, 404);

    let pods: Api<Pod> = Api::default_namespaced(client);
    let pod =
        Pod { metadata: ObjectMeta { name: Some("p".into()), ..Default::default() }, ..Default::default() };
    let created = pods.create(&PostParams::default(), &pod).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    let deleted =
        pods.delete("p", &DeleteParams::default()).await.unwrap().left().expect("pod delete answers the pod");
    assert_eq!(deleted.metadata.name.as_deref(), Some("p"));
    let rv: u64 = deleted.metadata.resource_version.unwrap().parse().unwrap();
    assert_eq!(rv, server.resource_version(), "the deleted object carries the deletion's resourceVersion");
}

/// `rest.BeforeDelete` checks the preconditions before storage does, and names the resource
/// by its kind: `Operation cannot be fulfilled on ConfigMap "a": the ResourceVersion in the
/// precondition (1) does not match ...` (this server used etcd3's "Precondition failed" wording).
#[tokio::test]
async fn delete_preconditions_are_checked() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    cms.create(&PostParams::default(), &cm("a", &[], "1")).await.unwrap();
    let dp = DeleteParams {
        preconditions: Some(Preconditions { resource_version: Some("1".into()), uid: None }),
        ..Default::default()
    };
    let s = status_of(cms.delete("a", &dp).await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        s.message,
        "Operation cannot be fulfilled on ConfigMap \"a\": the ResourceVersion in the precondition (1) does not \
         match the ResourceVersion in record (2). The object might have been modified"
    );
    assert_eq!(s.details.map(|d| d.kind), Some("ConfigMap".to_string()));
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let mut c = cm("a", &[], "1");
    c.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    cms.create(&PostParams::default(), &c).await.unwrap();
    let marked =
        cms.delete("a", &DeleteParams::default()).await.unwrap().left().expect("object while finalizing");
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert!(cms.get("a").await.is_ok());
    cms.patch("a", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": null}})))
        .await
        .unwrap();
    assert_eq!(status_of(cms.get("a").await.unwrap_err()).code, 404);
}

#[tokio::test]
async fn secrets_pods_and_cluster_scoped_namespaces_are_served() {
    let server = TestServer::start().await;
    let client = server.client();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "team");
    let s = Secret {
        metadata: ObjectMeta { name: Some("s".into()), ..Default::default() },
        string_data: None,
        data: Some([("k".to_string(), k8s_openapi::ByteString(b"v".to_vec()))].into()),
        ..Default::default()
    };
    let created = secrets.create(&PostParams::default(), &s).await.unwrap();
    assert_eq!(created.metadata.namespace.as_deref(), Some("team"));
    assert_eq!(created.data.unwrap()["k"].0, b"v");

    let nss: Api<Namespace> = Api::all(client.clone());
    let ns = Namespace {
        metadata: ObjectMeta { name: Some("team".into()), ..Default::default() },
        ..Default::default()
    };
    let created = nss.create(&PostParams::default(), &ns).await.unwrap();
    assert_eq!(created.metadata.namespace, None);
    assert_eq!(nss.list(&ListParams::default()).await.unwrap().items.len(), 1);
    assert!(nss.delete("team", &DeleteParams::default()).await.unwrap().is_left());

    let pods: Api<Pod> = Api::all(client);
    assert!(pods.list(&ListParams::default()).await.unwrap().items.is_empty());
}

#[tokio::test]
async fn generate_name_picks_a_name() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let mut c = cm("", &[], "1");
    c.metadata.name = None;
    c.metadata.generate_name = Some("gen-".into());
    let created = cms.create(&PostParams::default(), &c).await.unwrap();
    let name = created.metadata.name.unwrap();
    assert!(name.starts_with("gen-") && name.len() == 9, "{name}");
}

#[tokio::test]
async fn dry_run_does_not_store() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let pp = PostParams { dry_run: true, ..Default::default() };
    cms.create(&pp, &cm("a", &[], "1")).await.unwrap();
    assert_eq!(status_of(cms.get("a").await.unwrap_err()).code, 404);
}

/// Sends a JSON patch (kube's `Patch::Json` needs a kube feature this workspace leaves off).
async fn json_patch(client: &kube::Client, name: &str, ops: serde_json::Value) -> (u16, serde_json::Value) {
    let req = http::Request::patch(format!("/api/v1/namespaces/default/configmaps/{name}"))
        .header("content-type", "application/json-patch+json")
        .body(kube::client::Body::from(ops.to_string().into_bytes()))
        .unwrap();
    let resp = client.send(req).await.unwrap();
    let code = resp.status().as_u16();
    let body = http_body_util::BodyExt::collect(resp.into_body()).await.unwrap().to_bytes();
    (code, serde_json::from_slice(&body).unwrap())
}

#[tokio::test]
async fn json_patch_as_kube_runtime_finalizers_use_it() {
    let server = TestServer::start().await;
    let client = server.client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    cms.create(&PostParams::default(), &cm("a", &[], "1")).await.unwrap();
    // kube-runtime's finalizer helper: test the absent list, then add it.
    let (code, body) = json_patch(
        &client,
        "a",
        json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": ["example.com/f"]},
        ]),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["metadata"]["finalizers"], json!(["example.com/f"]));

    // A failing test operation is 422 and changes nothing.
    let rv = server.resource_version();
    let (code, body) = json_patch(
        &client,
        "a",
        json!([
            {"op": "test", "path": "/metadata/finalizers/0", "value": "other"},
            {"op": "remove", "path": "/metadata/finalizers/0"},
        ]),
    )
    .await;
    assert_eq!((code, body["reason"].as_str()), (422, Some("Invalid")));
    assert_eq!(server.resource_version(), rv);

    let (code, body) =
        json_patch(&client, "a", json!([{"op": "remove", "path": "/metadata/finalizers/0"}])).await;
    assert_eq!(code, 200);
    // An empty list is dropped, as kube-apiserver's ObjectMeta (`omitempty`) drops it.
    assert_eq!(body["metadata"].get("finalizers"), None);
}

#[tokio::test]
async fn strict_namespaces_start_with_the_usual_four_and_refuse_unknown_ones() {
    let server = TestServer::builder().strict_namespaces(true).start().await;
    let client = server.client();
    let nss: Api<Namespace> = Api::all(client.clone());
    let names: Vec<_> = nss
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|n| n.metadata.name.unwrap())
        .collect();
    assert_eq!(names, ["default", "kube-node-lease", "kube-public", "kube-system"]);

    let team: Api<ConfigMap> = Api::namespaced(client.clone(), "team");
    let s = status_of(team.create(&PostParams::default(), &cm("a", &[], "1")).await.unwrap_err());
    assert_eq!((s.code, s.message.as_str()), (404, "namespaces \"team\" not found"));
    let ns = Namespace {
        metadata: ObjectMeta { name: Some("team".into()), ..Default::default() },
        ..Default::default()
    };
    nss.create(&PostParams::default(), &ns).await.unwrap();
    team.create(&PostParams::default(), &cm("a", &[], "1")).await.unwrap();
    let default: Api<ConfigMap> = Api::default_namespaced(client);
    default.create(&PostParams::default(), &cm("a", &[], "1")).await.unwrap();
}
