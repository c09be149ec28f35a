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

/// Get, list and watch of a built-in kind in protobuf decode to the very objects JSON gives.
#[tokio::test]
async fn reads_of_built_ins_are_protobuf_when_preferred() {
    let server = TestServer::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    api.create(&PostParams::default(), &cm("a", &[("app", "web")], "1")).await.unwrap();
    api.create(&PostParams::default(), &cm("b", &[], "2")).await.unwrap();
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
