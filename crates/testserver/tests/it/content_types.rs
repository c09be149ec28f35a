//! Content negotiation and what the server does not serve: 415 for request bodies it does not
//! decode, 406 for an `Accept` it cannot satisfy (apiserver `endpoints/handlers/negotiation`),
//! the patch types of built-in and custom resources, and an explicit 501 for subresources
//! kube-apiserver has and this server does not.

use k8s_openapi::api::core::v1::ConfigMap;
use kcache_testserver::{ResourceDef, TestServer};
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::common::{cm, raw};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

/// `NegotiateInputSerializer` (create.go, update.go): a body in a media type the server has no
/// serializer for is 415 UnsupportedMediaType, "the body of the request was in an unknown
/// format - accepted media types include: ...". A controller-runtime or client-go client sends
/// protobuf (`application/vnd.kubernetes.protobuf`); this server decodes JSON only, so it lists
/// only JSON (kube-apiserver also lists YAML and protobuf). It was a misleading 400 JSON parse
/// error.
#[tokio::test]
async fn a_protobuf_body_is_415_with_kube_apiservers_message() {
    let server = TestServer::start().await;
    let protobuf = b"k8s\x00\n\x0f\n\x02v1\x12\tConfigMap";
    for (method, path) in [("POST", CMS.to_string()), ("PUT", format!("{CMS}/x"))] {
        let (code, _, status) =
            raw(&server, method, &path, &[("content-type", "application/vnd.kubernetes.protobuf")], protobuf)
                .await;
        assert_eq!(code, 415, "{method}: {status}");
        assert_eq!(
            status,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "the body of the request was in an unknown format - accepted media types include: application/json",
                "reason": "UnsupportedMediaType", "code": 415})
        );
    }
    // DeleteOptions in a body are negotiated the same way.
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    cms.create(&PostParams::default(), &cm("x", &[], "1")).await.unwrap();
    let (code, _, _) = raw(
        &server,
        "DELETE",
        &format!("{CMS}/x"),
        &[("content-type", "application/yaml")],
        b"kind: DeleteOptions",
    )
    .await;
    assert_eq!(code, 415);
    // JSON with parameters, or no content type at all, is decoded.
    let body = serde_json::to_vec(&cm("y", &[], "1")).unwrap();
    let (code, _, _) =
        raw(&server, "POST", CMS, &[("content-type", "application/json; charset=utf-8")], &body).await;
    assert_eq!(code, 201);
    let body = serde_json::to_vec(&cm("z", &[], "1")).unwrap();
    assert_eq!(raw(&server, "POST", CMS, &[], &body).await.0, 201);
}

/// `NegotiateOutputMediaType`: an `Accept` with no clause the server can write is 406
/// NotAcceptable; a clause it cannot write is skipped for the next one (on a server without
/// protobuf, client-go's protobuf clients send `application/vnd.kubernetes.protobuf,
/// application/json` and get JSON; kubectl's `as=Table` clauses fall through to its plain
/// `application/json`). For a built-in resource kube-apiserver's router (go-restful) refuses
/// first, with its own message; for a custom resource the handler does, "only the following
/// media types are accepted: ...". (Protobuf answers: `tests/it/protobuf.rs`.)
#[tokio::test]
async fn accept_is_negotiated_and_406_when_nothing_fits() {
    let server = TestServer::builder().protobuf(false).start().await;
    let (code, headers, _) =
        raw(&server, "GET", CMS, &[("accept", "application/vnd.kubernetes.protobuf")], b"").await;
    assert_eq!(code, 406);
    assert_eq!(headers["content-type"], "application/json");
    let (_, _, status) = raw(&server, "GET", CMS, &[("accept", "text/html")], b"").await;
    assert_eq!(
        status["message"],
        "406: Not Acceptable\n\nAvailable representations: application/json, application/json;stream=watch"
    );
    assert_eq!((status["reason"].as_str(), &status["details"]), (Some("NotAcceptable"), &json!({})));
    let (_, _, status) = raw(&server, "GET", &format!("{CMS}/x"), &[("accept", "text/html")], b"").await;
    assert_eq!(status["message"], "406: Not Acceptable\n\nAvailable representations: application/json");
    server.register(ResourceDef::new("example.com", "v1", "widgets", "Widget", true));
    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    let (_, _, status) = raw(&server, "GET", widgets, &[("accept", "text/html")], b"").await;
    assert_eq!(status["message"], "only the following media types are accepted: application/json");
    let (_, _, status) =
        raw(&server, "GET", &format!("{widgets}?watch=true"), &[("accept", "text/html")], b"").await;
    // A watch is negotiated by its list handler first (ListResource), with the list's types.
    assert_eq!(status["message"], "only the following media types are accepted: application/json");

    let both = "application/vnd.kubernetes.protobuf, application/json";
    let (code, _, list) = raw(&server, "GET", CMS, &[("accept", both)], b"").await;
    assert_eq!((code, list["kind"].as_str()), (200, Some("ConfigMapList")));
    let kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
    let (code, _, list) = raw(&server, "GET", CMS, &[("accept", kubectl)], b"").await;
    assert_eq!((code, list["kind"].as_str()), (200, Some("ConfigMapList")));
    let (code, _, status) =
        raw(&server, "GET", widgets, &[("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")], b"")
            .await;
    assert_eq!(code, 406);
    assert!(status["message"].as_str().unwrap().contains("not supported by kcache-testserver"), "{status}");
}

/// PatchResource checks the patch type first, against the types of the resource: built-ins
/// take JSON patch, merge patch, strategic merge patch and apply (go-restful refuses others);
/// custom resources have no strategic merge patch (apiextensions-apiserver's
/// `supportedTypes`), and got one treated as a merge patch before.
#[tokio::test]
async fn patch_types_are_those_of_the_resource() {
    let server = TestServer::start().await;
    server.register(ResourceDef::new("example.com", "v1", "widgets", "Widget", true));
    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    let w = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"a": 1}});
    assert_eq!(raw(&server, "POST", widgets, &[], &serde_json::to_vec(&w).unwrap()).await.0, 201);
    let smp = [("content-type", "application/strategic-merge-patch+json")];
    let (code, _, status) =
        raw(&server, "PATCH", &format!("{widgets}/w"), &smp, br#"{"spec":{"a":2}}"#).await;
    assert_eq!(code, 415);
    assert_eq!(
        status["message"],
        "the body of the request was in an unknown format - accepted media types include: \
         application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    );
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    cms.create(&PostParams::default(), &cm("c", &[], "1")).await.unwrap();
    // A built-in route consumes only its patch types: go-restful's 415.
    let (code, _, status) =
        raw(&server, "PATCH", &format!("{CMS}/c"), &[("content-type", "application/json")], b"{}").await;
    assert_eq!((code, status["message"].as_str()), (415, Some("415: Unsupported Media Type")));
}

/// A subresource kube-apiserver serves for the resource but this server does not (pods' `log`,
/// `exec`, `eviction`, a custom resource's `scale`) is an explicit 501 naming it, never the
/// generic 404 that says it does not exist; an unknown subresource is that 404, as upstream.
#[tokio::test]
async fn unsupported_subresources_say_so() {
    let server = TestServer::start().await;
    let (code, _, status) = raw(&server, "GET", "/api/v1/namespaces/default/pods/p/log", &[], b"").await;
    assert_eq!(code, 501);
    assert_eq!(status["message"], "the log subresource of pods is not supported by kcache-testserver");
    assert_eq!(status["reason"], "NotImplemented");
    let (code, _, _) = raw(&server, "POST", "/api/v1/namespaces/default/pods/p/eviction", &[], b"{}").await;
    assert_eq!(code, 501);
    let (code, _, status) =
        raw(&server, "GET", "/api/v1/namespaces/default/pods/p/frobnicate", &[], b"").await;
    assert_eq!(
        (code, status["message"].as_str()),
        (404, Some("the server could not find the requested resource"))
    );
    let (code, _, _) = raw(&server, "GET", "/api/v1/namespaces/default/configmaps/c/log", &[], b"").await;
    assert_eq!(code, 404);
    // A namespace's own subresources are still routed as such.
    assert_eq!(raw(&server, "PUT", "/api/v1/namespaces/ns/finalize", &[], b"{}").await.0, 501);
}

/// A strategic merge patch is applied as a JSON merge patch, which means the same for maps,
/// scalars and atomic lists; one that would merge a list by its patch merge key (pod
/// containers, finalizers) or uses a `$` directive is a 501 naming where, rather than a
/// replaced list (what it was before).
#[tokio::test]
async fn strategic_merge_patches_this_server_cannot_merge_say_so() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    cms.create(&PostParams::default(), &cm("c", &[], "1")).await.unwrap();
    let smp = [("content-type", "application/strategic-merge-patch+json")];
    let (code, _, obj) = raw(&server, "PATCH", &format!("{CMS}/c"), &smp, br#"{"data":{"v":"2"}}"#).await;
    assert_eq!((code, obj["data"]["v"].as_str()), (200, Some("2")));
    let (code, _, s) =
        raw(&server, "PATCH", &format!("{CMS}/c"), &smp, br#"{"metadata":{"finalizers":["a/b"]}}"#).await;
    assert_eq!(code, 501);
    assert_eq!(
        s["message"],
        "a strategic merge patch that merges a list or uses a directive (at .metadata.finalizers) is not \
         supported by kcache-testserver"
    );
    let pods = "/api/v1/namespaces/default/pods";
    let pod = br#"{"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i"}]}}"#;
    assert_eq!(raw(&server, "POST", pods, &[], pod).await.0, 201);
    let patch = br#"{"spec":{"containers":[{"name":"c","image":"j"}]}}"#;
    let (code, _, s) = raw(&server, "PATCH", &format!("{pods}/p"), &smp, patch).await;
    assert_eq!((code, s["message"].as_str().map(|m| m.contains(".spec.containers"))), (501, Some(true)));
    let (code, _, _) = raw(&server, "PATCH", &format!("{CMS}/c"), &smp, br#"{"$patch":"replace"}"#).await;
    assert_eq!(code, 501);
}
