//! Kubernetes' protobuf answers (`Builder::protobuf`, on by default): the reads of built-in kinds
//! in `application/vnd.kubernetes.protobuf` for a client that prefers it, as kube-apiserver's
//! protobuf serializer writes them (`NegotiateOutputMediaType` choosing
//! `runtime/serializer/protobuf`; watches through its length-delimited framer), errors as
//! protobuf `Status`es, JSON for custom resources and from a server with protobuf off. The bytes
//! themselves are kcache-protobuf's encoder's, checked against kube-apiserver v1.36.3's in that
//! crate and by the e2e differential steps.

use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_protobuf::{DecodeOptions, ListPart, ListReader, MessageType, decode, unknown, watch_event};
use kcache_testserver::{ResourceDef, TestServer};
use kube::api::{Api, PostParams};

use crate::common::cm;

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const BOTH: &str = "application/vnd.kubernetes.protobuf, application/json";

async fn get(server: &TestServer, path: &str, accept: &str) -> (u16, String, Vec<u8>) {
    let req = http::Request::get(path).header("accept", accept).body(kube::client::Body::empty()).unwrap();
    let resp = server.client().send(req).await.unwrap();
    let code = resp.status().as_u16();
    let ct = resp.headers().get("content-type").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
    (code, ct, resp.into_body().collect().await.unwrap().to_bytes().to_vec())
}

fn list_items(body: &[u8]) -> (String, Vec<ConfigMap>) {
    let mut r = ListReader::new();
    r.push(body);
    let ty = MessageType::for_kind("v1", "ConfigMap").unwrap();
    let (mut kind, mut items) = (String::new(), Vec::new());
    while let Some(p) = r.next_part().unwrap() {
        match p {
            ListPart::Type { kind: k, .. } => kind = k.to_owned(),
            ListPart::Item(b) => items.push(decode(ty, b, DecodeOptions::default()).unwrap()),
            _ => {}
        }
    }
    r.finish().unwrap();
    (kind, items)
}

/// A server holding ConfigMaps `a` (labelled) and `b` in `default`.
async fn server_with_a_and_b() -> (TestServer, Api<ConfigMap>) {
    let server = TestServer::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    api.create(&PostParams::default(), &cm("a", &[("app", "web")], "1")).await.unwrap();
    api.create(&PostParams::default(), &cm("b", &[], "2")).await.unwrap();
    (server, api)
}

/// Get, list and watch of a built-in kind in protobuf decode to the very objects JSON gives.
#[tokio::test]
async fn reads_of_built_ins_are_protobuf_when_preferred() {
    let (server, api) = server_with_a_and_b().await;
    let json = api.list(&Default::default()).await.unwrap().items;

    let (code, ct, body) = get(&server, CMS, BOTH).await;
    assert_eq!((code, ct.as_str()), (200, "application/vnd.kubernetes.protobuf"));
    let (kind, items) = list_items(&body);
    assert_eq!(kind, "ConfigMapList");
    assert_eq!(items, json);

    let (code, ct, body) = get(&server, &format!("{CMS}/a"), "application/vnd.kubernetes.protobuf").await;
    assert_eq!((code, ct.as_str()), (200, "application/vnd.kubernetes.protobuf"));
    let u = unknown(&body).unwrap();
    assert_eq!((u.api_version, u.kind), ("v1", "ConfigMap"));
    let a: ConfigMap =
        decode(MessageType::for_kind("v1", "ConfigMap").unwrap(), u.raw, DecodeOptions::default()).unwrap();
    assert_eq!(a, json[0]);

    // A watch from "0" with a short timeout: two ADDED frames, then the end of the stream.
    let (code, ct, body) =
        get(&server, &format!("{CMS}?watch=true&resourceVersion=0&timeoutSeconds=1"), BOTH).await;
    assert_eq!((code, ct.as_str()), (200, "application/vnd.kubernetes.protobuf;stream=watch"));
    let mut rest = &body[..];
    let mut names = Vec::new();
    while !rest.is_empty() {
        let len = u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
        let ev = watch_event(&rest[4..4 + len]).unwrap();
        assert_eq!(ev.event_type, "ADDED");
        let u = unknown(ev.object).unwrap();
        let o: ConfigMap =
            decode(MessageType::for_kind("v1", "ConfigMap").unwrap(), u.raw, DecodeOptions::default())
                .unwrap();
        names.push(o.metadata.name.unwrap());
        rest = &rest[4 + len..];
    }
    names.sort();
    assert_eq!(names, ["a", "b"], "synthetic ADDED events, in any order");
}

/// Each stored version is written as protobuf once and its bytes kept: a get, a list item and a
/// watch event of the same version carry the same message, byte for byte, and a new version (an
/// update, a delete's final state at its own resourceVersion) carries its own, never the kept
/// bytes of the version before.
#[tokio::test]
async fn kept_protobuf_bytes_follow_every_version() {
    let (server, api) = server_with_a_and_b().await;
    let pb = "application/vnd.kubernetes.protobuf";
    let ty = MessageType::for_kind("v1", "ConfigMap").unwrap();
    let get_raw = |body: Vec<u8>| unknown(&body).unwrap().raw.to_vec();
    let list_raw = |body: &[u8], name: &str| {
        let mut r = ListReader::new();
        r.push(body);
        let mut found = None;
        while let Some(p) = r.next_part().unwrap() {
            if let ListPart::Item(b) = p {
                let o: ConfigMap = decode(ty, b, DecodeOptions::default()).unwrap();
                if o.metadata.name.as_deref() == Some(name) {
                    found = Some(b.to_vec());
                }
            }
        }
        found.unwrap()
    };

    // Twice each: the second answer comes from the kept bytes.
    let first = get_raw(get(&server, &format!("{CMS}/a"), pb).await.2);
    assert_eq!(get_raw(get(&server, &format!("{CMS}/a"), pb).await.2), first);
    assert_eq!(list_raw(&get(&server, CMS, pb).await.2, "a"), first);
    assert_eq!(list_raw(&get(&server, CMS, pb).await.2, "a"), first);

    let mut a = api.get("a").await.unwrap();
    let rv = a.metadata.resource_version.clone().unwrap();
    a.data = Some([("k".to_owned(), "new".to_owned())].into());
    let updated = api.replace("a", &PostParams::default(), &a).await.unwrap();
    api.delete("a", &Default::default()).await.unwrap();

    let (code, _, body) = get(&server, &format!("{CMS}/a"), pb).await;
    assert_eq!(code, 404, "a deleted object is not served from its kept bytes");
    assert_eq!(unknown(&body).unwrap().kind, "Status");
    assert!(
        list_items(&get(&server, CMS, pb).await.2).1.iter().all(|o| o.metadata.name.as_deref() != Some("a"))
    );

    // The watch from before the update: MODIFIED with the update, DELETED with its final state.
    let (_, _, body) =
        get(&server, &format!("{CMS}?watch=true&resourceVersion={rv}&timeoutSeconds=1"), pb).await;
    let events: Vec<(String, ConfigMap)> = frames(&body)
        .into_iter()
        .map(|(t, o)| (t, decode(ty, unknown(&o).unwrap().raw, DecodeOptions::default()).unwrap()))
        .filter(|(_, o): &(String, ConfigMap)| o.metadata.name.as_deref() == Some("a"))
        .collect();
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0], ("MODIFIED".to_owned(), updated.clone()));
    assert_eq!(events[1].0, "DELETED");
    assert_eq!(events[1].1.data, updated.data);
    assert_ne!(events[1].1.metadata.resource_version, updated.metadata.resource_version);
}

/// An error answered to a client that negotiated protobuf is a protobuf `Status`, as
/// kube-apiserver's `ErrorNegotiated` writes it.
#[tokio::test]
async fn errors_are_protobuf_statuses() {
    let server = TestServer::start().await;
    let (code, ct, body) = get(&server, &format!("{CMS}/missing"), BOTH).await;
    assert_eq!((code, ct.as_str()), (404, "application/vnd.kubernetes.protobuf"));
    let u = unknown(&body).unwrap();
    assert_eq!(u.kind, "Status");
    let status: kube::core::Status = decode(MessageType::status(), u.raw, DecodeOptions::default()).unwrap();
    assert_eq!((status.code, status.reason.as_str()), (404, "NotFound"));
    assert_eq!(status.message, "configmaps \"missing\" not found");
}

/// Custom resources have no protobuf form: JSON for a client that also accepts it, 406 for one
/// that does not (apiextensions-apiserver's serializers); with `protobuf(false)` built-ins are
/// answered the same way.
#[tokio::test]
async fn json_for_custom_resources_and_from_a_json_only_server() {
    let server = TestServer::start().await;
    server.register(ResourceDef::new("example.com", "v1", "widgets", "Widget", true));
    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    let (code, ct, _) = get(&server, widgets, BOTH).await;
    assert_eq!((code, ct.as_str()), (200, "application/json"));
    assert_eq!(get(&server, widgets, "application/vnd.kubernetes.protobuf").await.0, 406);

    let json_only = TestServer::builder().protobuf(false).start().await;
    let (code, ct, _) = get(&json_only, CMS, BOTH).await;
    assert_eq!((code, ct.as_str()), (200, "application/json"));
    assert_eq!(get(&json_only, CMS, "application/vnd.kubernetes.protobuf").await.0, 406);
}

/// client-go's metadata client (`k8s.io/client-go/metadata`, metadata.go), which
/// metadatainformer lists and watches with: protobuf first, JSON after.
fn metadata_client_accept(as_kind: &str) -> String {
    format!(
        "application/vnd.kubernetes.protobuf;as={as_kind};g=meta.k8s.io;v=v1,application/json;as={as_kind};g=meta.k8s.io;v=v1,application/json"
    )
}

/// A protobuf `PartialObjectMetadata(List)` body decoded to its JSON form.
fn decode_partial(body: &[u8], api_version: &str, kind: &str) -> serde_json::Value {
    let u = unknown(body).unwrap();
    assert_eq!((u.api_version, u.kind), (api_version, kind));
    decode(MessageType::for_kind(api_version, kind).unwrap(), u.raw, DecodeOptions::default()).unwrap()
}

/// The frames of a protobuf watch body: (type, object envelope).
fn frames(body: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut rest = body;
    let mut out = Vec::new();
    while !rest.is_empty() {
        let len = u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
        let ev = watch_event(&rest[4..4 + len]).unwrap();
        out.push((ev.event_type.to_owned(), ev.object.to_vec()));
        rest = &rest[4 + len..];
    }
    out
}

/// `metadataResourceClient.List`, `Get` and `Watch` against a built-in kind: kube-apiserver
/// answers their protobuf clause (`targetEncodingForTransform` picks the meta.k8s.io codecs),
/// so the answers are protobuf `PartialObjectMetadataList`, `PartialObjectMetadata` and
/// `PartialObjectMetadata` watch frames holding what the JSON conversion holds; v1beta1's list
/// too.
#[tokio::test]
async fn metadata_client_reads_are_protobuf() {
    let (server, _) = server_with_a_and_b().await;
    let as_json = |as_kind: &str, v: &str| format!("application/json;as={as_kind};g=meta.k8s.io;v={v}");
    let json_list = |v: &'static str| {
        let accept = as_json("PartialObjectMetadataList", v);
        let server = &server;
        async move { serde_json::from_slice::<serde_json::Value>(&get(server, CMS, &accept).await.2).unwrap() }
    };

    let (code, ct, body) = get(&server, CMS, &metadata_client_accept("PartialObjectMetadataList")).await;
    assert_eq!((code, ct.as_str()), (200, "application/vnd.kubernetes.protobuf"));
    let list = decode_partial(&body, "meta.k8s.io/v1", "PartialObjectMetadataList");
    let want = json_list("v1").await;
    assert_eq!(list["items"].as_array().unwrap().len(), 2);
    assert_eq!(list["metadata"], want["metadata"]);
    for (got, want) in list["items"].as_array().unwrap().iter().zip(want["items"].as_array().unwrap()) {
        assert_eq!(got["metadata"], want["metadata"]);
        assert!(got.get("data").is_none());
    }

    let accept = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1";
    let (code, ct, body) = get(&server, CMS, accept).await;
    assert_eq!((code, ct.as_str()), (200, "application/vnd.kubernetes.protobuf"));
    let list = decode_partial(&body, "meta.k8s.io/v1beta1", "PartialObjectMetadataList");
    assert_eq!(list["items"][1]["metadata"], json_list("v1beta1").await["items"][1]["metadata"]);

    let (code, ct, body) =
        get(&server, &format!("{CMS}/a"), &metadata_client_accept("PartialObjectMetadata")).await;
    assert_eq!((code, ct.as_str()), (200, "application/vnd.kubernetes.protobuf"));
    let one = decode_partial(&body, "meta.k8s.io/v1", "PartialObjectMetadata");
    let (_, _, json_one) = get(&server, &format!("{CMS}/a"), &as_json("PartialObjectMetadata", "v1")).await;
    let json_one: serde_json::Value = serde_json::from_slice(&json_one).unwrap();
    assert_eq!(one["metadata"], json_one["metadata"]);

    let (code, ct, body) = get(
        &server,
        &format!("{CMS}?watch=true&resourceVersion=0&timeoutSeconds=1"),
        &metadata_client_accept("PartialObjectMetadata"),
    )
    .await;
    assert_eq!((code, ct.as_str()), (200, "application/vnd.kubernetes.protobuf;stream=watch"));
    let mut names: Vec<_> = frames(&body)
        .iter()
        .map(|(ty, object)| {
            assert_eq!(ty, "ADDED");
            let o = decode_partial(object, "meta.k8s.io/v1", "PartialObjectMetadata");
            o["metadata"]["name"].as_str().unwrap().to_owned()
        })
        .collect();
    names.sort();
    assert_eq!(names, ["a", "b"]);
}

/// A metadata informer's watch-list (`sendInitialEvents=true`): the initial events and the
/// closing BOOKMARK (`k8s.io/initial-events-end`) are protobuf `PartialObjectMetadata`, as
/// kube-apiserver's watch encodes every frame's object with the embedded meta.k8s.io encoder.
#[tokio::test]
async fn metadata_watch_list_is_protobuf() {
    let server = TestServer::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    api.create(&PostParams::default(), &cm("a", &[], "1")).await.unwrap();
    let path = format!(
        "{CMS}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1"
    );
    let (code, ct, body) = get(&server, &path, &metadata_client_accept("PartialObjectMetadata")).await;
    assert_eq!((code, ct.as_str()), (200, "application/vnd.kubernetes.protobuf;stream=watch"));
    let frames = frames(&body);
    assert_eq!(frames[0].0, "ADDED");
    let (ty, object) = frames.iter().find(|(ty, _)| ty == "BOOKMARK").unwrap();
    assert_eq!(ty, "BOOKMARK");
    let bookmark = decode_partial(object, "meta.k8s.io/v1", "PartialObjectMetadata");
    assert_eq!(bookmark["metadata"]["annotations"]["k8s.io/initial-events-end"], "true");
}

/// Custom resources: apiextensions-apiserver's serializers include protobuf for the
/// meta.k8s.io conversions ("CRDs explicitly do not support protobuf, but some objects
/// returned by the API server do"), so the metadata client gets protobuf for them too.
#[tokio::test]
async fn metadata_client_reads_of_custom_resources_are_protobuf() {
    let server = TestServer::start().await;
    server.register(ResourceDef::new("example.com", "v1", "widgets", "Widget", true));
    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    let w = serde_json::json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"x": 1}});
    let req = http::Request::post(widgets)
        .header("content-type", "application/json")
        .body(kube::client::Body::from(serde_json::to_vec(&w).unwrap()))
        .unwrap();
    assert_eq!(server.client().send(req).await.unwrap().status(), 201);

    let (code, ct, body) = get(&server, widgets, &metadata_client_accept("PartialObjectMetadataList")).await;
    assert_eq!((code, ct.as_str()), (200, "application/vnd.kubernetes.protobuf"));
    let list = decode_partial(&body, "meta.k8s.io/v1", "PartialObjectMetadataList");
    assert_eq!(list["items"][0]["metadata"]["name"], "w");
    let (code, ct, body) =
        get(&server, &format!("{widgets}/w"), &metadata_client_accept("PartialObjectMetadata")).await;
    assert_eq!((code, ct.as_str()), (200, "application/vnd.kubernetes.protobuf"));
    assert_eq!(decode_partial(&body, "meta.k8s.io/v1", "PartialObjectMetadata")["metadata"]["name"], "w");
}

/// The metadata client's errors are JSON: kube-apiserver negotiates an error's media type
/// without conversions (`ErrorNegotiated` with `DefaultEndpointRestrictions`), so its only
/// fitting clause is the plain `application/json`; a conversion that does not fit (an object
/// asked of a list) is such an error.
#[tokio::test]
async fn metadata_client_errors_are_json() {
    let server = TestServer::start().await;
    let (code, ct, body) =
        get(&server, &format!("{CMS}/missing"), &metadata_client_accept("PartialObjectMetadata")).await;
    assert_eq!((code, ct.as_str()), (404, "application/json"));
    let status: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(status["reason"], "NotFound");
    let accept = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
    let (code, ct, body) = get(&server, CMS, accept).await;
    assert_eq!((code, ct.as_str()), (406, "application/json"));
    let status: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        status["message"],
        "you requested PartialObjectMetadata, but the requested object is a list (*core.ConfigMapList)"
    );
}
