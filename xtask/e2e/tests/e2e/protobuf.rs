//! Kubernetes' protobuf (issue 38): kcache's reflector with `ApiListerWatcher::protobuf(true)`
//! against the cluster, and kcache-testserver's protobuf answers checked against kube-apiserver's.
//!
//! The test server keeps objects as JSON and writes protobuf with kcache-protobuf's encoder; so
//! its answers are kube-apiserver's exactly when that encoder, given the JSON kube-apiserver
//! sends for an object, writes the bytes kube-apiserver sends for it in protobuf. That is what
//! [`testserver_protobuf_is_kube_apiservers`] checks on a real server, for lists, a watch event
//! and an error, and then that the test server answers the same requests with the same media
//! types and codes.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service, ServicePort, ServiceSpec};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kcache_e2e::{Cluster, ClusterKind, Recorder, churn_configmaps, skip};
use kcache_informer::SharedIndexInformer;
use kcache_protobuf::{MEDIA_TYPE, MessageType, encode_json, envelope, watch_frame};
use kcache_reflector::ApiListerWatcher;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ObjectMeta, PostParams};
use serde_json::Value;

use crate::{configmap, converge, run_informer, synced};

const BOTH: &str = "application/vnd.kubernetes.protobuf, application/json";

/// One GET: status code, Content-Type and body.
pub(crate) async fn get(client: &kube::Client, path: &str, accept: &str) -> Result<(u16, String, Vec<u8>)> {
    let req = http::Request::get(path).header("accept", accept).body(kube::client::Body::empty())?;
    let resp = client.send(req).await?;
    let code = resp.status().as_u16();
    let ct = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    Ok((code, ct, resp.into_body().collect().await?.to_bytes().to_vec()))
}

/// A reflector speaking protobuf, in an informer, follows CRUD churn on ConfigMaps to the
/// server's exact state (the churn test of `informer_churn_converges_exactly`, in protobuf).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_informer_converges_exactly() -> Result<()> {
    let c = Cluster::connect().await?;
    let ns = c.namespace(&c.main, "pb-churn").await?;
    let api: Api<ConfigMap> = Api::namespaced(c.main.client(), &ns.name);
    churn_configmaps(&api, 1, 40, 60).await?;
    let informer =
        SharedIndexInformer::new(ApiListerWatcher::new(api.clone()).protobuf(true), Duration::ZERO);
    let rec = Recorder::new();
    informer.add_event_handler(rec.handler())?;
    let cancel = run_informer(&informer);
    synced(&[&informer]).await?;
    let writes = churn_configmaps(&api, 2, 80, 400).await?;
    let server = converge("protobuf churn convergence", &api, &informer, &[&rec]).await?;
    eprintln!("protobuf informer: {writes} writes, {} objects at the end", server.len());
    cancel.cancel();
    Ok(())
}

/// The JSON of a list response as the list message `list_kind` in its envelope, written by
/// kcache-protobuf's encoder (as the test server writes lists).
pub(crate) fn encode_list(api_version: &str, list_kind: &str, json: &Value) -> Result<Vec<u8>> {
    let ty = MessageType::for_kind(api_version, list_kind).context("a built-in list kind")?;
    Ok(envelope(api_version, list_kind, &encode_json(ty, json)?))
}

/// The cluster, unless it is kcache-testserver itself (`embedded`): a differential test then
/// says it is skipped.
async fn real_server(test: &str) -> Result<Option<Cluster>> {
    let c = Cluster::connect().await?;
    if c.kind == ClusterKind::Embedded {
        skip(test, "the cluster is kcache-testserver itself");
        return Ok(None);
    }
    Ok(Some(c))
}

/// ConfigMap `a`, labelled `app: web`.
fn labelled() -> ConfigMap {
    let mut a = configmap("a", "1");
    a.metadata.labels = Some(BTreeMap::from([("app".to_owned(), "web".to_owned())]));
    a
}

/// kube-apiserver's protobuf for ConfigMaps, Secrets and Services (lists at one resource
/// version), for a watch event and for a 404 is, byte for byte, what kcache-protobuf writes from
/// kube-apiserver's JSON for the same request: so kcache-testserver, which writes its protobuf
/// that way from the JSON it holds, answers as kube-apiserver does. Then the test server answers
/// the same reads with the same codes and media types.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn testserver_protobuf_is_kube_apiservers() -> Result<()> {
    let Some(c) = real_server("testserver_protobuf_is_kube_apiservers").await? else { return Ok(()) };
    let ns = c.namespace(&c.main, "pb-diff").await?;
    let client = c.main.client();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let labelled = labelled();
    cms.create(&PostParams::default(), &labelled).await?;
    cms.create(&PostParams::default(), &configmap("b", "2")).await?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns.name);
    let secret = Secret {
        metadata: ObjectMeta { name: Some("s".into()), ..Default::default() },
        data: Some(BTreeMap::from([("k".to_owned(), k8s_openapi::ByteString(vec![0, 1, 2, 255]))])),
        ..Default::default()
    };
    secrets.create(&PostParams::default(), &secret).await?;
    let services: Api<Service> = Api::namespaced(client.clone(), &ns.name);
    let service = Service {
        metadata: ObjectMeta { name: Some("svc".into()), ..Default::default() },
        spec: Some(ServiceSpec {
            ports: Some(vec![ServicePort {
                port: 80,
                target_port: Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(
                    "http".into(),
                )),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    services.create(&PostParams::default(), &service).await?;

    for (resource, list_kind) in
        [("configmaps", "ConfigMapList"), ("secrets", "SecretList"), ("services", "ServiceList")]
    {
        let path = format!("/api/v1/namespaces/{}/{resource}", ns.name);
        let (code, _, json) = get(&client, &path, "application/json").await?;
        ensure!(code == 200, "JSON list of {resource}: {code}");
        let json: Value = serde_json::from_slice(&json)?;
        let rv = json["metadata"]["resourceVersion"].as_str().context("list resourceVersion")?;
        let exact = format!("{path}?resourceVersion={rv}&resourceVersionMatch=Exact");
        let (code, ct, pb) = get(&client, &exact, BOTH).await?;
        ensure!((code, ct.as_str()) == (200, MEDIA_TYPE), "protobuf list of {resource}: {code} {ct}");
        ensure!(
            pb == encode_list("v1", list_kind, &json)?,
            "{resource}: kube-apiserver's protobuf list differs from kcache-protobuf's encoding of its JSON"
        );
    }

    // A watch event: the ADDED frame of a ConfigMap created while watching.
    let list = cms.list(&Default::default()).await?;
    let rv = list.metadata.resource_version.context("list resourceVersion")?;
    let watch_path =
        format!("/api/v1/namespaces/{}/configmaps?watch=true&resourceVersion={rv}&timeoutSeconds=5", ns.name);
    let watching = {
        let client = client.clone();
        tokio::spawn(async move { get(&client, &watch_path, BOTH).await })
    };
    // The watch is open once the server has it; creating a little later is enough, and a
    // created object the watch missed fails below, never passes wrongly.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let created = cms.create(&PostParams::default(), &configmap("w", "3")).await?;
    let (code, ct, frames) = watching.await??;
    ensure!(code == 200 && ct == kcache_protobuf::WATCH_MEDIA_TYPE, "protobuf watch: {code} {ct}");
    let (code, _, json) =
        get(&client, &format!("/api/v1/namespaces/{}/configmaps/w", ns.name), "application/json").await?;
    ensure!(code == 200);
    let json: Value = serde_json::from_slice(&json)?;
    ensure!(json["metadata"]["resourceVersion"] == serde_json::json!(created.metadata.resource_version));
    let ty = MessageType::for_kind("v1", "ConfigMap").context("ConfigMap")?;
    let expected = watch_frame("ADDED", &envelope("v1", "ConfigMap", &encode_json(ty, &json)?));
    ensure!(
        frames.starts_with(&expected),
        "kube-apiserver's protobuf watch frame differs from kcache-protobuf's encoding of its JSON"
    );

    // An error: the protobuf Status of a 404.
    let missing = format!("/api/v1/namespaces/{}/configmaps/missing", ns.name);
    let (code, _, json) = get(&client, &missing, "application/json").await?;
    let (pcode, ct, pb) = get(&client, &missing, BOTH).await?;
    ensure!((code, pcode, ct.as_str()) == (404, 404, MEDIA_TYPE), "404s: {code} {pcode} {ct}");
    let status: Value = serde_json::from_slice(&json)?;
    let expected = envelope("v1", "Status", &encode_json(MessageType::status(), &status)?);
    ensure!(
        pb == expected,
        "kube-apiserver's protobuf Status differs from kcache-protobuf's encoding of its JSON"
    );

    // The test server: the same reads, the same codes and media types (bodies: its encoding,
    // checked above).
    let server = kcache_testserver::TestServer::start().await;
    let ts: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    ts.create(&PostParams::default(), &labelled).await?;
    let cms_path = "/api/v1/namespaces/default/configmaps";
    for (path, accept, want) in [
        (cms_path.to_owned(), BOTH, (200, MEDIA_TYPE)),
        (format!("{cms_path}/a"), BOTH, (200, MEDIA_TYPE)),
        (format!("{cms_path}/missing"), BOTH, (404, MEDIA_TYPE)),
        (cms_path.to_owned(), "application/json", (200, "application/json")),
    ] {
        let (code, ct, _) = get(&server.client(), &path, accept).await?;
        let (rcode, rct, _) =
            get(&client, &path.replace("/default/", &format!("/{}/", ns.name)), accept).await?;
        ensure!(
            (code, ct.as_str()) == want && (rcode, rct.as_str()) == want,
            "{path} ({accept}): {code} {ct} vs kube-apiserver {rcode} {rct}"
        );
    }
    Ok(())
}

/// client-go's metadata client's `Accept` (`k8s.io/client-go/metadata`, what metadatainformer
/// lists and watches with): `PartialObjectMetadata(List)` in protobuf first, then in JSON.
fn metadata_accept(as_kind: &str, version: &str) -> String {
    format!(
        "application/vnd.kubernetes.protobuf;as={as_kind};g=meta.k8s.io;v={version},application/json;as={as_kind};g=meta.k8s.io;v={version},application/json"
    )
}

/// The JSON-only `Accept` of the same conversion.
fn metadata_json(as_kind: &str, version: &str) -> String {
    format!("application/json;as={as_kind};g=meta.k8s.io;v={version}")
}

/// What kube-apiserver answers `path` with when asked for `as_kind` in protobuf equals
/// kcache-protobuf's encoding of its JSON answer to the same request (`path` pins a
/// resourceVersion for lists); the JSON is returned.
async fn same_partial_bytes(
    client: &kube::Client,
    path: &str,
    as_kind: &str,
    version: &str,
) -> Result<Value> {
    let (code, ct, json) = get(client, path, &metadata_json(as_kind, version)).await?;
    ensure!((code, ct.as_str()) == (200, "application/json"), "{path} {as_kind} {version} JSON: {code} {ct}");
    let json: Value = serde_json::from_slice(&json)?;
    let (code, ct, pb) = get(client, path, &metadata_accept(as_kind, version)).await?;
    ensure!((code, ct.as_str()) == (200, MEDIA_TYPE), "{path} {as_kind} {version} protobuf: {code} {ct}");
    let api_version = format!("meta.k8s.io/{version}");
    ensure!(
        pb == encode_list(&api_version, as_kind, &json)?,
        "{path}: kube-apiserver's protobuf {as_kind} ({version}) differs from kcache-protobuf's encoding of its JSON"
    );
    Ok(json)
}

/// client-go's metadata client (issue 37) against kube-apiserver: its protobuf
/// `PartialObjectMetadataList` of ConfigMaps (meta.k8s.io v1 and v1beta1, at one resource
/// version) and of a custom resource, a `PartialObjectMetadata` GET and watch frame are, byte
/// for byte, kcache-protobuf's encoding of its JSON for the same request, and its errors are
/// JSON; then kcache-testserver answers the same reads with the same codes and media types, and
/// its protobuf bodies are that encoding of its own JSON answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn testserver_protobuf_metadata_is_kube_apiservers() -> Result<()> {
    let Some(c) = real_server("testserver_protobuf_metadata_is_kube_apiservers").await? else {
        return Ok(());
    };
    let ns = c.namespace(&c.main, "pb-meta").await?;
    let client = c.main.client();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let mut labelled = labelled();
    labelled.metadata.annotations = Some(BTreeMap::from([("note".to_owned(), "n".to_owned())]));
    cms.create(&PostParams::default(), &labelled).await?;
    cms.create(&PostParams::default(), &configmap("b", "2")).await?;
    let path = format!("/api/v1/namespaces/{}/configmaps", ns.name);
    let rv =
        cms.list(&Default::default()).await?.metadata.resource_version.context("list resourceVersion")?;
    let exact = format!("{path}?resourceVersion={rv}&resourceVersionMatch=Exact");
    for version in ["v1", "v1beta1"] {
        same_partial_bytes(&client, &exact, "PartialObjectMetadataList", version).await?;
    }
    same_partial_bytes(&client, &format!("{path}/a"), "PartialObjectMetadata", "v1").await?;

    // A watch event: the ADDED frame of a ConfigMap created while watching.
    let watch_path = format!("{path}?watch=true&resourceVersion={rv}&timeoutSeconds=5");
    let watching = {
        let client = client.clone();
        let accept = metadata_accept("PartialObjectMetadata", "v1");
        tokio::spawn(async move { get(&client, &watch_path, &accept).await })
    };
    // As in `testserver_protobuf_is_kube_apiservers`: a created object the watch missed fails
    // below, never passes wrongly.
    tokio::time::sleep(Duration::from_millis(500)).await;
    cms.create(&PostParams::default(), &configmap("w", "3")).await?;
    let (code, ct, frames) = watching.await??;
    ensure!(code == 200 && ct == kcache_protobuf::WATCH_MEDIA_TYPE, "protobuf metadata watch: {code} {ct}");
    let (_, _, json) =
        get(&client, &format!("{path}/w"), &metadata_json("PartialObjectMetadata", "v1")).await?;
    let json: Value = serde_json::from_slice(&json)?;
    let ty =
        MessageType::for_kind("meta.k8s.io/v1", "PartialObjectMetadata").context("PartialObjectMetadata")?;
    let expected =
        watch_frame("ADDED", &envelope("meta.k8s.io/v1", "PartialObjectMetadata", &encode_json(ty, &json)?));
    ensure!(
        frames.starts_with(&expected),
        "kube-apiserver's protobuf PartialObjectMetadata watch frame differs from kcache-protobuf's encoding of its JSON"
    );

    // A custom resource: apiextensions-apiserver writes the meta.k8s.io conversions in protobuf.
    let group = format!("{}.e2e.kcache.dev", c.unique("pbm"));
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let _cleanup = crate::create_crd(&c, &crds, &crate::widget_crd(&group)).await?;
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", "Widget"), "widgets");
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns.name, &ar);
    let mut widget = DynamicObject::new("w", &ar);
    widget.data = serde_json::json!({"spec": {"size": 1}});
    crate::create_retrying(&widgets, &widget).await?;
    let widgets_path = format!("/apis/{group}/v1/namespaces/{}/widgets", ns.name);
    let rv = widgets.list(&Default::default()).await?.metadata.resource_version.context("resourceVersion")?;
    let exact = format!("{widgets_path}?resourceVersion={rv}&resourceVersionMatch=Exact");
    same_partial_bytes(&client, &exact, "PartialObjectMetadataList", "v1").await?;

    // Errors are negotiated without conversions: JSON for the metadata client.
    let (code, ct, _) =
        get(&client, &format!("{path}/missing"), &metadata_accept("PartialObjectMetadata", "v1")).await?;
    ensure!((code, ct.as_str()) == (404, "application/json"), "metadata 404: {code} {ct}");

    // The test server: the same reads, the same codes and media types; its protobuf bodies are
    // kcache-protobuf's encoding of its own JSON answers.
    let server = kcache_testserver::TestServer::start().await;
    let ts: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    ts.create(&PostParams::default(), &labelled).await?;
    server.register(kcache_testserver::ResourceDef::new(&group, "v1", "widgets", "Widget", true));
    let ts_widgets: Api<DynamicObject> = Api::namespaced_with(server.client(), "default", &ar);
    ts_widgets.create(&PostParams::default(), &widget).await?;
    let ts_path = "/api/v1/namespaces/default/configmaps";
    let ts_widgets_path = format!("/apis/{group}/v1/namespaces/default/widgets");
    for (p, as_kind, version) in [
        (ts_path.to_owned(), "PartialObjectMetadataList", "v1"),
        (ts_path.to_owned(), "PartialObjectMetadataList", "v1beta1"),
        (format!("{ts_path}/a"), "PartialObjectMetadata", "v1"),
        (ts_widgets_path.clone(), "PartialObjectMetadataList", "v1"),
    ] {
        same_partial_bytes(&server.client(), &p, as_kind, version).await?;
    }
    for (p, accept, want) in [
        (
            format!("{ts_path}/missing"),
            metadata_accept("PartialObjectMetadata", "v1"),
            (404, "application/json"),
        ),
        (ts_path.to_owned(), metadata_accept("PartialObjectMetadata", "v1"), (406, "application/json")),
        (
            format!("{ts_path}/a"),
            metadata_accept("PartialObjectMetadataList", "v1"),
            (406, "application/json"),
        ),
    ] {
        let (code, ct, _) = get(&server.client(), &p, &accept).await?;
        let (rcode, rct, _) =
            get(&client, &p.replace("/default/", &format!("/{}/", ns.name)), &accept).await?;
        ensure!(
            (code, ct.as_str()) == want && (rcode, rct.as_str()) == want,
            "{p} ({accept}): {code} {ct} vs kube-apiserver {rcode} {rct}"
        );
    }
    Ok(())
}
