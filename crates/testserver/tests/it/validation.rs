//! Bad requests get kube-apiserver's codes and Status bodies, and no input makes the server
//! panic.

use k8s_openapi::api::core::v1::ConfigMap;
use kcache_testserver::TestServer;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use crate::common::{cm, status_of};

/// Sends a request through the kube client and returns the code and the JSON body.
async fn send(
    client: &kube::Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: &[u8],
) -> (u16, Value) {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .body(kube::client::Body::from(body.to_vec()))
        .unwrap();
    let resp = client.send(req).await.expect("the server answers");
    let code = resp.status().as_u16();
    let body = http_body_util::BodyExt::collect(resp.into_body()).await.unwrap().to_bytes();
    (code, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

const CMS: &str = "/api/v1/namespaces/default/configmaps";

fn assert_status(body: &Value, code: u16, reason: &str) {
    assert_eq!(body["kind"], "Status", "{body}");
    assert_eq!(body["apiVersion"], "v1");
    assert_eq!(body["status"], "Failure");
    assert_eq!(body["code"], code, "{body}");
    assert_eq!(body["reason"], reason, "{body}");
}

#[tokio::test]
async fn malformed_json_is_400_bad_request() {
    let server = TestServer::start().await;
    let client = server.client();
    let (code, body) = send(&client, "POST", CMS, "application/json", b"{not json").await;
    assert_eq!(code, 400);
    assert_status(&body, 400, "BadRequest");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .starts_with("the object provided is unrecognized (must be of type ConfigMap)")
    );
    let (code, _) = send(&client, "POST", CMS, "application/json", b"[1,2]").await;
    assert_eq!(code, 400);
}

#[tokio::test]
async fn wrong_api_version_or_kind_is_400() {
    let server = TestServer::start().await;
    let client = server.client();
    let body = json!({"apiVersion": "v2", "kind": "ConfigMap", "metadata": {"name": "a"}});
    let (code, b) = send(&client, "POST", CMS, "application/json", body.to_string().as_bytes()).await;
    assert_eq!(code, 400);
    assert_status(&b, 400, "BadRequest");
    assert_eq!(b["message"], "the API version in the data (v2) does not match the expected API version (v1)");

    let body = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "a"}});
    let (code, b) = send(&client, "POST", CMS, "application/json", body.to_string().as_bytes()).await;
    assert_eq!(code, 400);
    assert_status(&b, 400, "BadRequest");
}

#[tokio::test]
async fn missing_or_invalid_name_is_422_invalid() {
    let server = TestServer::start().await;
    let client = server.client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let mut c = cm("x", &[], "1");
    c.metadata.name = None;
    let s = status_of(cms.create(&PostParams::default(), &c).await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        s.message,
        "ConfigMap \"\" is invalid: metadata.name: Required value: name or generateName is required"
    );
    let cause = &s.details.unwrap().causes[0];
    assert_eq!((cause.reason.as_str(), cause.field.as_str()), ("FieldValueRequired", "metadata.name"));

    let s = status_of(cms.create(&PostParams::default(), &cm("Not_Valid", &[], "1")).await.unwrap_err());
    assert_eq!(s.code, 422);
    assert!(s.message.starts_with("ConfigMap \"Not_Valid\" is invalid: metadata.name: Invalid value: \"Not_Valid\": a lowercase RFC 1123 subdomain"), "{}", s.message);
}

#[tokio::test]
async fn unknown_resources_and_paths_are_404_with_a_status() {
    let server = TestServer::start().await;
    let client = server.client();
    for path in [
        "/api/v1/namespaces/default/widgets",
        "/apis/example.com/v1/widgets",
        "/nope",
        "/api/v1/configmaps/x",
    ] {
        let (code, b) = send(&client, "GET", path, "application/json", b"").await;
        assert_eq!(code, 404, "{path}");
        assert_status(&b, 404, "NotFound");
        assert_eq!(b["message"], "the server could not find the requested resource");
    }
}

#[tokio::test]
async fn name_or_namespace_mismatch_between_url_and_body_is_400() {
    let server = TestServer::start().await;
    let client = server.client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    cms.create(&PostParams::default(), &cm("a", &[], "1")).await.unwrap();
    let s = status_of(cms.replace("a", &PostParams::default(), &cm("b", &[], "1")).await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (400, "BadRequest"));
    assert_eq!(s.message, "the name of the object (b) does not match the name on the URL (a)");

    let mut other_ns = cm("c", &[], "1");
    other_ns.metadata.namespace = Some("elsewhere".into());
    let s = status_of(cms.create(&PostParams::default(), &other_ns).await.unwrap_err());
    assert_eq!(s.code, 400);
    assert_eq!(
        s.message,
        "the namespace of the provided object does not match the namespace sent on the request"
    );
}

#[tokio::test]
async fn unsupported_patch_types_and_bad_query_values_are_rejected() {
    let server = TestServer::start().await;
    let client = server.client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    cms.create(&PostParams::default(), &cm("a", &[], "1")).await.unwrap();
    let (code, b) = send(&client, "PATCH", &format!("{CMS}/a"), "application/apply-patch+cbor", b"{}").await;
    assert_eq!(code, 415);
    assert_status(&b, 415, "UnsupportedMediaType");
    let (code, _) =
        send(&client, "PATCH", &format!("{CMS}/a"), "application/merge-patch+json", b"nope").await;
    assert_eq!(code, 400);
    let (code, _) = send(&client, "GET", &format!("{CMS}?labelSelector=a%20b"), "", b"").await;
    assert_eq!(code, 400);
    let (code, _) = send(&client, "GET", &format!("{CMS}?watch=maybe"), "", b"").await;
    assert_eq!(code, 400);
    let (code, _) = send(&client, "GET", &format!("{CMS}?resourceVersion=abc"), "", b"").await;
    assert_eq!(code, 400);
    let (code, _) = send(&client, "GET", &format!("{CMS}?limit=2&continue=garbage!"), "", b"").await;
    assert_eq!(code, 400);
    let (code, _) = send(&client, "PUT", CMS, "application/json", b"{}").await;
    assert_eq!(code, 405);
}

#[tokio::test]
async fn no_input_makes_the_server_panic() {
    let server = TestServer::start().await;
    let client = server.client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    cms.create(&PostParams::default(), &cm("a", &[], "1")).await.unwrap();
    let bodies: &[&[u8]] = &[
        b"",
        b"null",
        b"\"str\"",
        b"{\"metadata\": 5}",
        b"{\"metadata\": {\"name\": 5}}",
        b"{\"metadata\": {\"name\": \"a\", \"labels\": [1]}}",
        b"{\"metadata\": {\"name\": \"a\", \"resourceVersion\": 7}}",
        b"{\"kind\": 1, \"apiVersion\": []}",
        &[0xff, 0xfe, 0x00],
        b"{\"metadata\": {\"name\": \"a\", \"finalizers\": \"x\"}}",
    ];
    let paths = [
        CMS.to_string(),
        format!("{CMS}/a"),
        format!("{CMS}/a/status"),
        "/api/v1/namespaces".into(),
        "/api/v1/namespaces/default".into(),
        "/apis".into(),
        "/apis/x".into(),
        "/api/v1/namespaces//configmaps".into(),
        format!("{CMS}?limit=-1&resourceVersion=%ff&fieldSelector=metadata.name"),
        format!("{CMS}?labelSelector=a%20in%20(&watch=true&timeoutSeconds=-5&resourceVersion=0"),
    ];
    let types = ["application/json", "application/merge-patch+json", "text/plain"];
    for path in &paths {
        for method in ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] {
            for body in bodies {
                for ty in types {
                    if method == "GET" && path.contains("watch=true") {
                        continue;
                    }
                    let (code, _) = send(&client, method, path, ty, body).await;
                    assert!((200..600).contains(&code));
                }
            }
        }
    }
    // Still alive and consistent.
    assert!(cms.get("a").await.is_ok() || status_of(cms.get("a").await.unwrap_err()).code == 404);
    let (code, _) = send(&client, "GET", "/version", "", b"").await;
    assert_eq!(code, 200);
}

#[tokio::test]
async fn extreme_watch_parameters_do_not_break_the_server() {
    use futures::StreamExt;
    let server = TestServer::builder().bookmark_interval(std::time::Duration::ZERO).start().await;
    let client = server.client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    cms.create(&PostParams::default(), &cm("a", &[], "1")).await.unwrap();
    let req =
        http::Request::get(format!("{CMS}?watch=true&resourceVersion=0&timeoutSeconds=9223372036854775807"))
            .body(Vec::new())
            .unwrap();
    let s = client.request_events::<ConfigMap>(req).await.unwrap();
    let mut s = std::pin::pin!(s);
    assert!(matches!(s.next().await, Some(Ok(kube::api::WatchEvent::Added(_)))));
    // Bookmarks with a zero interval are sent as fast as the (clamped) timer allows.
    let wp = kube::api::WatchParams::default();
    let mut s = cms.watch(&wp, &server.resource_version().to_string()).await.unwrap().boxed();
    assert!(matches!(s.next().await, Some(Ok(kube::api::WatchEvent::Bookmark(_)))));
}

/// A built-in kind's unknown fields are dropped as kube-apiserver's decoding drops them: with a
/// `Warning: 299` header by default (`fieldValidation` `Warn`), silently with `Ignore`, and
/// `fieldValidation=Strict` is a 400 `strict decoding error` naming them (create.go,
/// `transformDecodeError`); another value is 422 (`ValidateFieldValidation`). They were kept.
#[tokio::test]
async fn unknown_fields_of_built_ins_are_dropped_warned_or_refused() {
    let server = TestServer::start().await;
    let body = br#"{"metadata":{"name":"u","colour":"red"},"data":{"k":"v"},"extra":1}"#;
    let (code, headers, obj) = crate::common::raw(&server, "POST", CMS, &[], body).await;
    assert_eq!(code, 201);
    assert_eq!(obj.get("extra"), None);
    assert_eq!(obj["metadata"].get("colour"), None);
    let warnings: Vec<_> =
        headers.get_all("warning").iter().map(|v| v.to_str().unwrap().to_string()).collect();
    assert_eq!(
        warnings,
        [r#"299 - "unknown field \"extra\"""#, r#"299 - "unknown field \"metadata.colour\"""#]
    );

    let (code, _, s) =
        crate::common::raw(&server, "POST", &format!("{CMS}?fieldValidation=Strict"), &[], body).await;
    assert_eq!(code, 400);
    assert_eq!(
        s["message"],
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: unknown field \
         \"extra\", unknown field \"metadata.colour\""
    );
    let (code, _, s) =
        crate::common::raw(&server, "POST", &format!("{CMS}?fieldValidation=No"), &[], body).await;
    assert_eq!(code, 422);
    assert_eq!(
        s["message"],
        "CreateOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value: \"No\": supported values: \
         \"\", \"Ignore\", \"Strict\", \"Warn\""
    );
}

/// `ValidateDryRun`: `dryRun` takes only `All`; anything else is 422 on the request's options
/// (it was taken for a real write). A dry run answers the object and stores nothing.
#[tokio::test]
async fn dry_run_takes_only_all() {
    let server = TestServer::start().await;
    let body = br#"{"metadata":{"name":"d"},"data":{"k":"v"}}"#;
    let (code, _, s) = crate::common::raw(&server, "POST", &format!("{CMS}?dryRun=Yes"), &[], body).await;
    assert_eq!(code, 422);
    assert_eq!(
        s["message"],
        "CreateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: [\"Yes\"]: supported values: \"All\""
    );
    let (code, _, obj) = crate::common::raw(&server, "POST", &format!("{CMS}?dryRun=All"), &[], body).await;
    assert_eq!((code, obj["metadata"]["name"].as_str()), (201, Some("d")));
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    assert!(cms.get_opt("d").await.unwrap().is_none());
    let (code, _, _) = crate::common::raw(
        &server,
        "DELETE",
        &format!("{CMS}/d"),
        &[("content-type", "application/json")],
        br#"{"dryRun":["Maybe"]}"#,
    )
    .await;
    assert_eq!(code, 422);
}

/// A custom resource is pruned to its CRD's structural schema (apiextensions-apiserver's
/// `schemaCoercingDecoder`): an undeclared field is dropped with a warning, or refused under
/// `Strict`; where the schema says `x-kubernetes-preserve-unknown-fields`, it stays. It was kept.
#[tokio::test]
async fn custom_resources_are_pruned_to_their_structural_schema() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let server = TestServer::start().await;
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "things.example.com"},
        "spec": {"group": "example.com", "names": {"plural": "things", "kind": "Thing"}, "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {"spec": {"type": "object", "properties": {
                    "size": {"type": "integer"},
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}}}]},
    }))
    .unwrap();
    Api::<CustomResourceDefinition>::all(server.client()).create(&PostParams::default(), &crd).await.unwrap();
    let things = "/apis/example.com/v1/namespaces/default/things";
    let body = br#"{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"t"},"spec":{"size":1,"colour":"red","free":{"any":{"thing":1}}}}"#;
    let (code, headers, obj) = crate::common::raw(&server, "POST", things, &[], body).await;
    assert_eq!(code, 201, "{obj}");
    assert_eq!(obj["spec"], json!({"size": 1, "free": {"any": {"thing": 1}}}));
    assert_eq!(headers["warning"], r#"299 - "unknown field \"spec.colour\"""#);
    let (code, _, s) =
        crate::common::raw(&server, "POST", &format!("{things}?fieldValidation=Strict"), &[], body).await;
    assert_eq!(code, 400);
    assert_eq!(
        s["message"],
        "Thing in version \"v1\" cannot be handled as a Thing: strict decoding error: unknown field \"spec.colour\""
    );
}
