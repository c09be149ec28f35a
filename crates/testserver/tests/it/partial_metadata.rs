//! `PartialObjectMetadata(List)` through `Accept`, as kube-apiserver's handlers answer it
//! (apiserver `endpoints/handlers/response.go`: `asPartialObjectMetadata`,
//! `asPartialObjectMetadataList`, `doTransformObject`; `rest.go`: `AllowsMediaTypeTransform`).
//! The same requests are compared with a real kube-apiserver in the e2e differential cases.

use k8s_openapi::api::core::v1::ConfigMap;
use kcache_testserver::{ResourceDef, TestServer};
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::common::{cm, raw};

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const AS_LIST: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
const AS_OBJECT: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";

async fn server_with_a() -> TestServer {
    let server = TestServer::start().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    api.create(&PostParams::default(), &cm("a", &[("app", "x")], "1")).await.unwrap();
    server
}

/// `asPartialObjectMetadataList` and `asPartialObjectMetadata` in both group versions
/// (meta.k8s.io/v1 and v1beta1): the list and its items carry the version asked for, the
/// metadata only.
#[tokio::test]
async fn lists_and_gets_convert_to_the_version_asked_for() {
    let server = server_with_a().await;
    for v in ["v1", "v1beta1"] {
        let accept = format!("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v={v}");
        let (code, _, list) = raw(&server, "GET", CMS, &[("accept", &accept)], b"").await;
        assert_eq!(code, 200);
        assert_eq!(list["kind"], "PartialObjectMetadataList");
        assert_eq!(list["apiVersion"], format!("meta.k8s.io/{v}"));
        assert_eq!(list["items"][0]["apiVersion"], format!("meta.k8s.io/{v}"));
        assert_eq!(list["items"][0]["metadata"]["labels"], json!({"app": "x"}));
        assert!(list["items"][0].get("data").is_none());
        let accept = format!("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v={v}");
        let (code, _, one) = raw(&server, "GET", &format!("{CMS}/a"), &[("accept", &accept)], b"").await;
        assert_eq!((code, one["kind"].as_str()), (200, Some("PartialObjectMetadata")));
        assert_eq!(one["apiVersion"], format!("meta.k8s.io/{v}"));
    }
}

/// `asPartialObjectMetadata` of a list and `asPartialObjectMetadataList` of one object: 406
/// naming the internal Go type for a built-in; for a custom resource (an
/// `*unstructured.Unstructured`, which passes the list check) a get as a list fails in
/// `meta.EachListItem`, a 500 without a reason.
#[tokio::test]
async fn a_list_asked_as_an_object_and_an_object_asked_as_a_list_fail() {
    let server = server_with_a().await;
    let (code, _, status) = raw(&server, "GET", CMS, &[("accept", AS_OBJECT)], b"").await;
    assert_eq!((code, status["reason"].as_str()), (406, Some("NotAcceptable")));
    assert_eq!(
        status["message"],
        "you requested PartialObjectMetadata, but the requested object is a list (*core.ConfigMapList)"
    );
    let (code, _, status) = raw(&server, "GET", &format!("{CMS}/a"), &[("accept", AS_LIST)], b"").await;
    assert_eq!(code, 406);
    assert_eq!(
        status["message"],
        "you requested PartialObjectMetadataList, but the requested object is not a list (*core.ConfigMap)"
    );

    server.register(ResourceDef::new("example.com", "v1", "widgets", "Widget", true));
    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    let w = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}});
    assert_eq!(raw(&server, "POST", widgets, &[], &serde_json::to_vec(&w).unwrap()).await.0, 201);
    let (code, _, status) = raw(&server, "GET", widgets, &[("accept", AS_OBJECT)], b"").await;
    assert_eq!(code, 406);
    assert_eq!(
        status["message"],
        "you requested PartialObjectMetadata, but the requested object is a list (*unstructured.UnstructuredList)"
    );
    let (code, _, status) = raw(&server, "GET", &format!("{widgets}/w"), &[("accept", AS_LIST)], b"").await;
    assert_eq!((code, status["message"].as_str()), (500, Some("content is not a list")));
    assert!(status.get("reason").is_none(), "{status}");
    let (code, _, list) = raw(&server, "GET", widgets, &[("accept", AS_LIST)], b"").await;
    assert_eq!((code, list["items"][0]["kind"].as_str()), (200, Some("PartialObjectMetadata")));
}

/// A conversion the endpoints do not allow (`AllowsMediaTypeTransform`: only meta.k8s.io v1 and
/// v1beta1, a group and a version both given) is skipped like an unknown media type: the
/// handler's 406 when nothing else fits (the router passes it, as go-restful looks at media
/// types only), the next clause otherwise. A watch is negotiated by its list handler first, so
/// its 406 lists the same types.
#[tokio::test]
async fn conversions_the_server_does_not_make_are_406_from_the_handler() {
    let server = server_with_a().await;
    for accept in [
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v2",
        "application/json;as=PartialObjectMetadataList;v=v1",
        "application/json;as=PartialObjectMetadataList;g=apps;v=v1",
        "application/json;as=Gizmo;g=meta.k8s.io;v=v1",
    ] {
        for path in [CMS.to_owned(), format!("{CMS}?watch=true")] {
            let (code, _, status) = raw(&server, "GET", &path, &[("accept", accept)], b"").await;
            assert_eq!(code, 406, "{accept} {path}");
            assert_eq!(status["message"], "only the following media types are accepted: application/json");
        }
    }
    let accept = "application/json;as=Gizmo;g=meta.k8s.io;v=v1, application/json";
    let (code, _, one) = raw(&server, "GET", &format!("{CMS}/a"), &[("accept", accept)], b"").await;
    assert_eq!((code, one["kind"].as_str()), (200, Some("ConfigMap")));
}

/// A watch converts each event's object (`watchEmbeddedEncoder`); one object cannot become a
/// `PartialObjectMetadataList`, and kube-apiserver then ends the stream without a frame at its
/// first event (`doTransformObject` fails, the object itself cannot be encoded as meta.k8s.io).
#[tokio::test]
async fn a_watch_converts_each_event_and_ends_when_asked_for_lists() {
    let server = server_with_a().await;
    let path = format!("{CMS}?watch=true&resourceVersion=0&timeoutSeconds=1");
    let req = |accept: &str| {
        http::Request::get(&path).header("accept", accept).body(kube::client::Body::empty()).unwrap()
    };
    let resp = server.client().send(req(AS_OBJECT)).await.unwrap();
    let body = http_body_util::BodyExt::collect(resp.into_body()).await.unwrap().to_bytes();
    let event: serde_json::Value =
        serde_json::from_slice(body.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!(event["type"], "ADDED");
    assert_eq!(event["object"]["kind"], "PartialObjectMetadata");
    assert!(event["object"].get("data").is_none());

    let resp = server.client().send(req(AS_LIST)).await.unwrap();
    assert_eq!(resp.status(), 200);
    let body = http_body_util::BodyExt::collect(resp.into_body()).await.unwrap().to_bytes();
    assert!(body.is_empty(), "{}", String::from_utf8_lossy(&body));
}
