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

/// Sends `body` (JSON) with `content_type`, asking `accept`.
async fn write(
    server: &TestServer,
    method: &str,
    path: &str,
    content_type: &str,
    accept: &str,
    body: serde_json::Value,
) -> (u16, serde_json::Value) {
    let headers = [("content-type", content_type), ("accept", accept)];
    let (code, _, answer) = raw(server, method, path, &headers, &serde_json::to_vec(&body).unwrap()).await;
    (code, answer)
}

/// The answer is a `PartialObjectMetadata` of `api_version` for the object named `name`.
#[track_caller]
fn assert_partial(answer: &serde_json::Value, api_version: &str, name: &str) {
    assert_eq!(answer["kind"], "PartialObjectMetadata", "{answer}");
    assert_eq!(answer["apiVersion"], api_version, "{answer}");
    assert_eq!(answer["metadata"]["name"], name, "{answer}");
    let fields: Vec<_> = answer.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(fields, ["apiVersion", "kind", "metadata"], "{answer}");
}

/// apiserver `endpoints/handlers` `create.go`, `update.go`, `patch.go`, `delete.go`: every write
/// answers through `transformResponseObject`, so `Accept: ...;as=PartialObjectMetadata` gets
/// the written object's metadata only, in the version asked for (the e2e differential steps
/// "create as PartialObjectMetadata" to "status patch of a Pod as PartialObjectMetadata").
/// kube's `Api::patch_metadata` asks for it.
#[tokio::test]
async fn every_write_answers_partial_object_metadata_when_asked() {
    const BETA: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1";
    let server = TestServer::start().await;
    let body = |v: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w"}, "data": {"k": v}});
    let (code, created) = write(&server, "POST", CMS, "application/json", AS_OBJECT, body("1")).await;
    assert_eq!(code, 201);
    assert_partial(&created, "meta.k8s.io/v1", "w");
    assert!(created["metadata"]["uid"].is_string() && created["metadata"]["managedFields"].is_array());
    let dry = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d"}});
    let (code, dry) =
        write(&server, "POST", &format!("{CMS}?dryRun=All"), "application/json", BETA, dry).await;
    assert_eq!(code, 201);
    assert_partial(&dry, "meta.k8s.io/v1beta1", "d");
    let w = format!("{CMS}/w");
    let (code, updated) = write(&server, "PUT", &w, "application/json", AS_OBJECT, body("2")).await;
    assert_eq!(code, 200);
    assert_partial(&updated, "meta.k8s.io/v1", "w");
    for (content_type, patch) in [
        ("application/merge-patch+json", json!({"metadata": {"labels": {"m": "1"}}})),
        ("application/strategic-merge-patch+json", json!({"metadata": {"labels": {"s": "1"}}})),
        ("application/json-patch+json", json!([{"op": "add", "path": "/data/j", "value": "1"}])),
    ] {
        let (code, patched) = write(&server, "PATCH", &w, content_type, BETA, patch).await;
        assert_eq!(code, 200, "{content_type}: {patched}");
        assert_partial(&patched, "meta.k8s.io/v1beta1", "w");
    }
    let apply =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"k": "3"}});
    let x = format!("{CMS}/x?fieldManager=a");
    let (code, applied) = write(&server, "PATCH", &x, "application/apply-patch+yaml", AS_OBJECT, apply).await;
    assert_eq!(code, 201);
    assert_partial(&applied, "meta.k8s.io/v1", "x");

    // The status subresource, and kube's patch_metadata.
    let pods = "/api/v1/namespaces/default/pods";
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    assert_eq!(write(&server, "POST", pods, "application/json", "application/json", pod).await.0, 201);
    let (code, status) = write(
        &server,
        "PATCH",
        &format!("{pods}/p/status"),
        "application/merge-patch+json",
        AS_OBJECT,
        json!({"status": {"message": "m"}}),
    )
    .await;
    assert_eq!(code, 200);
    assert_partial(&status, "meta.k8s.io/v1", "p");
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let patch = kube::api::Patch::Merge(json!({"metadata": {"annotations": {"a": "1"}}}));
    let meta = api.patch_metadata("w", &Default::default(), &patch).await.unwrap();
    assert_eq!(meta.types.map(|t| t.kind).as_deref(), Some("PartialObjectMetadata"));
    assert_eq!(meta.metadata.annotations.unwrap()["a"], "1");
}

/// `doTransformObject` returns a `*metav1.Status` unconverted: a DELETE that finished answers
/// its Success Status whatever the `Accept` (a custom resource's too: apiextensions-apiserver's
/// registry has no `ReturnDeletedObject`), one a finalizer holds answers the object, converted
/// (the e2e differential steps "delete held by a finalizer as PartialObjectMetadata", "delete as
/// PartialObjectMetadata(List): the Status, unconverted", "a custom resource deleted as
/// PartialObjectMetadata: a Status").
#[tokio::test]
async fn a_finished_delete_answers_its_status_and_a_held_one_the_object() {
    let server = server_with_a().await;
    for accept in [AS_OBJECT, AS_LIST] {
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "gone"}});
        assert_eq!(write(&server, "POST", CMS, "application/json", "application/json", body).await.0, 201);
        let (code, _, status) =
            raw(&server, "DELETE", &format!("{CMS}/gone"), &[("accept", accept)], b"").await;
        assert_eq!(
            (code, status["kind"].as_str(), status["status"].as_str()),
            (200, Some("Status"), Some("Success"))
        );
    }
    let held = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "held", "finalizers": ["example.com/hold"]}});
    assert_eq!(write(&server, "POST", CMS, "application/json", "application/json", held).await.0, 201);
    let (code, _, marked) =
        raw(&server, "DELETE", &format!("{CMS}/held"), &[("accept", AS_OBJECT)], b"").await;
    assert_eq!(code, 200);
    assert_partial(&marked, "meta.k8s.io/v1", "held");
    assert!(marked["metadata"]["deletionTimestamp"].is_string());

    // A custom resource's DELETE answers a Status too (its registry does not return the
    // deleted object): unconverted.
    server.register(ResourceDef::new("example.com", "v1", "widgets", "Widget", true));
    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    let w = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}});
    assert_eq!(write(&server, "POST", widgets, "application/json", AS_OBJECT, w).await.0, 201);
    let (code, _, status) =
        raw(&server, "DELETE", &format!("{widgets}/w"), &[("accept", AS_OBJECT)], b"").await;
    assert_eq!((code, status["kind"].as_str()), (200, Some("Status")));
    assert_eq!(status["details"]["group"], "example.com");
}

/// The conversion runs after the write (`transformResponseObject`), so a write asked as
/// `PartialObjectMetadataList` happens and then answers the reads' error: 406 for a built-in,
/// the 500 of `meta.EachListItem` for a custom resource; a conversion the endpoints do not
/// allow is refused before the write (`NegotiateOutputMediaType`). The e2e differential steps
/// "create as PartialObjectMetadataList: 406 after the write", "the object created anyway",
/// "create as PartialObjectMetadata of meta.k8s.io/v2: 406", "nothing created", "a custom
/// resource patched as PartialObjectMetadataList: 500 after the write".
#[tokio::test]
async fn a_write_asked_as_a_list_happens_then_fails_as_a_read_would() {
    let server = TestServer::start().await;
    let body = |name: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
    // An unknown field: the write's warning comes with the error too (warning.AddWarning sets
    // the header at once).
    let mut l = body("l");
    l["extra"] = json!(1);
    let headers = [("content-type", "application/json"), ("accept", AS_LIST)];
    let (code, headers, status) = raw(&server, "POST", CMS, &headers, &serde_json::to_vec(&l).unwrap()).await;
    assert_eq!(code, 406);
    assert_eq!(headers["warning"], "299 - \"unknown field \\\"extra\\\"\"");
    assert_eq!(
        status["message"],
        "you requested PartialObjectMetadataList, but the requested object is not a list (*core.ConfigMap)"
    );
    assert_eq!(raw(&server, "GET", &format!("{CMS}/l"), &[], b"").await.0, 200);
    let v2 = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v2";
    assert_eq!(write(&server, "POST", CMS, "application/json", v2, body("v2")).await.0, 406);
    assert_eq!(raw(&server, "GET", &format!("{CMS}/v2"), &[], b"").await.0, 404);

    server.register(ResourceDef::new("example.com", "v1", "widgets", "Widget", true));
    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    let w = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}});
    let (code, status) = write(&server, "POST", widgets, "application/json", AS_LIST, w).await;
    assert_eq!((code, status["message"].as_str()), (500, Some("content is not a list")));
    assert_eq!(raw(&server, "GET", &format!("{widgets}/w"), &[], b"").await.0, 200);
}

/// DELETECOLLECTION answers a list (`Store.DeleteCollection`), converted as a LIST's: to a
/// `PartialObjectMetadataList` when asked, 406 `... is a list` when asked as one object, after
/// deleting all the same (the e2e differential steps "deletecollection as
/// PartialObjectMetadataList", "deletecollection as PartialObjectMetadata: 406 after the write").
#[tokio::test]
async fn deletecollection_answers_a_partial_object_metadata_list() {
    let server = server_with_a().await;
    let (code, _, list) = raw(&server, "DELETE", CMS, &[("accept", AS_LIST)], b"").await;
    assert_eq!((code, list["kind"].as_str()), (200, Some("PartialObjectMetadataList")));
    assert_partial(&list["items"][0], "meta.k8s.io/v1", "a");
    let meta: Vec<_> = list["metadata"].as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(meta, ["resourceVersion"]);

    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}});
    assert_eq!(write(&server, "POST", CMS, "application/json", "application/json", body).await.0, 201);
    let (code, _, status) = raw(&server, "DELETE", CMS, &[("accept", AS_OBJECT)], b"").await;
    assert_eq!(code, 406);
    assert_eq!(
        status["message"],
        "you requested PartialObjectMetadata, but the requested object is a list (*core.ConfigMapList)"
    );
    assert_eq!(raw(&server, "GET", &format!("{CMS}/b"), &[], b"").await.0, 404);
}

/// `asPartialObjectMetadataList` appends each item to a nil slice, so a list with no items is
/// `"items": null` (unlike the typed list it converts, whose empty items transformResponseObject
/// sets to `[]`); the e2e differential steps "an empty PartialObjectMetadataList" (of a
/// built-in and of a custom resource) and "a deletecollection of nothing as
/// PartialObjectMetadataList". kube's `list_metadata` reads it as no items.
#[tokio::test]
async fn an_empty_partial_object_metadata_list_has_null_items() {
    let server = server_with_a().await;
    let none = format!("{CMS}?labelSelector=none%3Dyes");
    for method in ["GET", "DELETE"] {
        let (code, _, list) = raw(&server, method, &none, &[("accept", AS_LIST)], b"").await;
        assert_eq!((code, list["kind"].as_str()), (200, Some("PartialObjectMetadataList")), "{method}");
        assert!(list.get("items").is_some_and(serde_json::Value::is_null), "{method}: {list}");
    }
    let (_, _, plain) = raw(&server, "GET", &none, &[], b"").await;
    assert_eq!(plain["items"], json!([]), "a typed list's empty items stay []");
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let listed = api.list_metadata(&kube::api::ListParams::default().labels("none=yes")).await.unwrap();
    assert!(listed.items.is_empty());
}
