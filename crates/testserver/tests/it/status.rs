//! The `status` subresource: status writes change only `.status`, object writes keep it, and
//! resources without the subresource answer 404.

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, PodStatus};
use kcache_testserver::{ResourceDef, TestServer};
use kube::api::{Api, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

use crate::common::{cm, status_of};

#[tokio::test]
async fn pod_status_is_written_only_through_the_subresource() {
    let server = TestServer::start().await;
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    let mut pod =
        Pod { metadata: ObjectMeta { name: Some("p".into()), ..Default::default() }, ..Default::default() };
    pod.status = Some(PodStatus { phase: Some("Running".into()), ..Default::default() });
    let created = pods.create(&PostParams::default(), &pod).await.unwrap();
    assert_eq!(created.status.and_then(|s| s.phase).as_deref(), Some("Pending"), "create sets the status");

    let patched = pods
        .patch_status(
            "p",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"phase": "Running"}, "metadata": {"labels": {"ignored": "yes"}}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(patched.status.unwrap().phase.as_deref(), Some("Running"));
    assert_eq!(patched.metadata.labels, None, "a status write changes nothing else");
    assert_eq!(patched.metadata.generation, Some(1), "status is not part of the generation");

    // Through the object itself, status changes are dropped.
    let mut via_main = pods.get("p").await.unwrap();
    via_main.status = Some(PodStatus { phase: Some("Failed".into()), ..Default::default() });
    via_main.metadata.labels = Some([("a".to_string(), "b".to_string())].into());
    let replaced = pods.replace("p", &PostParams::default(), &via_main).await.unwrap();
    assert_eq!(replaced.status.as_ref().unwrap().phase.as_deref(), Some("Running"));
    assert!(replaced.metadata.labels.is_some());

    let mut via_status = replaced.clone();
    via_status.status = Some(PodStatus { phase: Some("Succeeded".into()), ..Default::default() });
    let replaced = pods.replace_status("p", &PostParams::default(), &via_status).await.unwrap();
    assert_eq!(replaced.status.unwrap().phase.as_deref(), Some("Succeeded"));
    assert_eq!(pods.get_status("p").await.unwrap().metadata.name.as_deref(), Some("p"));

    // Stale status writes conflict like any update.
    let s = status_of(pods.replace_status("p", &PostParams::default(), &via_status).await.unwrap_err());
    assert_eq!(s.code, 409);
}

#[tokio::test]
async fn custom_resource_and_namespace_status() {
    let server = TestServer::start().await;
    server.register(ResourceDef::new("example.com", "v1", "widgets", "Widget", true));
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget"));
    let api: Api<DynamicObject> = Api::namespaced_with(server.client(), "default", &ar);
    api.create(&PostParams::default(), &DynamicObject::new("w", &ar).data(json!({"spec": {"size": 1}})))
        .await
        .unwrap();
    let w = api
        .patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"ready": true}, "spec": {"size": 9}})),
        )
        .await
        .unwrap();
    assert_eq!((w.data["status"]["ready"].as_bool(), w.data["spec"]["size"].as_i64()), (Some(true), Some(1)));
    assert_eq!(w.metadata.generation, Some(1));

    let nss: Api<Namespace> = Api::all(server.client());
    nss.create(
        &PostParams::default(),
        &Namespace {
            metadata: ObjectMeta { name: Some("team".into()), ..Default::default() },
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let ns = nss
        .patch_status("team", &PatchParams::default(), &Patch::Merge(json!({"status": {"phase": "Active"}})))
        .await
        .unwrap();
    assert_eq!(ns.status.unwrap().phase.as_deref(), Some("Active"));
    let created = api.get("w").await.unwrap();
    assert!(created.data["status"]["ready"].as_bool().unwrap());
    let fresh = api
        .create(
            &PostParams::default(),
            &DynamicObject::new("v", &ar).data(json!({"status": {"ready": true}})),
        )
        .await
        .unwrap();
    assert!(fresh.data.get("status").is_none(), "create drops status for custom resources");
}

#[tokio::test]
async fn resources_without_a_status_subresource_answer_404() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    cms.create(&PostParams::default(), &cm("a", &[], "1")).await.unwrap();
    let s = status_of(
        cms.patch_status("a", &PatchParams::default(), &Patch::Merge(json!({}))).await.unwrap_err(),
    );
    assert_eq!(s.code, 404);
}
