//! `kind` and `apiVersion` on the wire, as kube-apiserver writes them: absent from the items of
//! a built-in kind's list (a typed Go list's items have an empty `TypeMeta`; the list's codec
//! sets only the list's), present on a got object, on every watch event's object (watch-list's
//! initial events included) and on a custom resource's list items (`UnstructuredList` items are
//! whole objects). Checked against kube-apiserver v1.36.3 by the e2e differential cases
//! ("list Secrets: items without kind and apiVersion" and the steps after it).

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kcache_testserver::{ResourceDef, TestServer};
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};

use crate::common::{cm, raw};

/// The `(kind, apiVersion)` of each item of a JSON list.
fn item_types(list: &Value) -> Vec<(Option<&str>, Option<&str>)> {
    list["items"]
        .as_array()
        .unwrap_or_else(|| panic!("a list: {list}"))
        .iter()
        .map(|i| (i["kind"].as_str(), i["apiVersion"].as_str()))
        .collect()
}

/// The watch frames of a body that ended (a `timeoutSeconds` watch), parsed.
async fn watch_frames(server: &TestServer, path: &str) -> Vec<Value> {
    let req = http::Request::builder().uri(path).body(kube::client::Body::from(Vec::new())).unwrap();
    let resp = server.client().send(req).await.unwrap();
    let bytes = http_body_util::BodyExt::collect(resp.into_body()).await.unwrap().to_bytes();
    bytes
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect()
}

async fn seeded() -> TestServer {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    cms.create(&PostParams::default(), &cm("a", &[("app", "x")], "1")).await.unwrap();
    cms.create(&PostParams::default(), &cm("b", &[("app", "x")], "2")).await.unwrap();
    let secrets: Api<Secret> = Api::namespaced(server.client(), "default");
    let s: Secret = serde_json::from_value(json!({"metadata": {"name": "s"}, "type": "Opaque"})).unwrap();
    secrets.create(&PostParams::default(), &s).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    let p: Pod = serde_json::from_value(json!({"metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}))
    .unwrap();
    pods.create(&PostParams::default(), &p).await.unwrap();
    server
}

/// apiserver `endpoints/handlers/get.go` `ListResource` encoding a typed list (the e2e
/// differential steps "list Secrets", "list Pods", "list ConfigMaps with a limit"): the list
/// carries its `kind` and `apiVersion`, its items none, whatever the page or selector; a GET
/// of one of them carries both.
#[tokio::test]
async fn built_in_list_items_have_no_kind_or_api_version() {
    let server = seeded().await;
    for (path, kind) in [
        ("/api/v1/namespaces/default/configmaps", "ConfigMapList"),
        ("/api/v1/namespaces/default/configmaps?limit=1", "ConfigMapList"),
        ("/api/v1/configmaps?labelSelector=app%3Dx", "ConfigMapList"),
        ("/api/v1/namespaces/default/configmaps?resourceVersion=0", "ConfigMapList"),
        ("/api/v1/namespaces/default/secrets", "SecretList"),
        ("/api/v1/namespaces/default/pods", "PodList"),
    ] {
        let (code, _, list) = raw(&server, "GET", path, &[], b"").await;
        assert_eq!((code, list["kind"].as_str(), list["apiVersion"].as_str()), (200, Some(kind), Some("v1")));
        let types = item_types(&list);
        assert!(!types.is_empty() && types.iter().all(|t| *t == (None, None)), "{path}: {list}");
    }
    let (_, _, one) = raw(&server, "GET", "/api/v1/namespaces/default/configmaps/a", &[], b"").await;
    assert_eq!((one["kind"].as_str(), one["apiVersion"].as_str()), (Some("ConfigMap"), Some("v1")));
    // kube's typed lists decode them, as they do kube-apiserver's.
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let names: Vec<_> =
        cms.list(&ListParams::default()).await.unwrap().items.into_iter().map(|c| c.metadata.name).collect();
    assert_eq!(names, [Some("a".into()), Some("b".into())]);
}

/// The custom-resource handler lists `Unstructured` objects (the e2e differential step "list
/// gadgets"): each item keeps its `kind` and `apiVersion`, and the list's metadata has an empty
/// `continue` (an `UnstructuredList` has no `omitempty`).
#[tokio::test]
async fn custom_resource_list_items_keep_kind_and_api_version() {
    let server = TestServer::start().await;
    server.register(ResourceDef::new("example.com", "v1", "widgets", "Widget", true));
    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    let w = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {}});
    assert_eq!(raw(&server, "POST", widgets, &[], &serde_json::to_vec(&w).unwrap()).await.0, 201);
    let (code, _, list) = raw(&server, "GET", widgets, &[], b"").await;
    assert_eq!((code, list["kind"].as_str()), (200, Some("WidgetList")));
    assert_eq!(item_types(&list), [(Some("Widget"), Some("example.com/v1"))]);
    // An UnstructuredList's metadata writes `continue` even when empty.
    assert_eq!(list["metadata"]["continue"], "", "{list}");
}

/// apiserver `endpoints/handlers/watch.go`'s `watchEncoder`, which encodes each event's object
/// with its kind (the e2e differential steps "watch Secrets from 0", "watch-list Secrets",
/// "watch Pods from 0"): plain watch events and watch-list initial events of a built-in kind
/// carry `kind` and `apiVersion`, unlike the items of its list.
#[tokio::test]
async fn watch_events_of_built_in_kinds_keep_kind_and_api_version() {
    let server = seeded().await;
    for path in [
        "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=0&timeoutSeconds=1",
        "/api/v1/namespaces/default/secrets?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan\
         &allowWatchBookmarks=true&timeoutSeconds=1",
        "/api/v1/namespaces/default/pods?watch=true&resourceVersion=0&timeoutSeconds=1",
    ] {
        let frames = watch_frames(&server, path).await;
        let added: Vec<_> = frames.iter().filter(|f| f["type"] == "ADDED").collect();
        assert!(!added.is_empty(), "{path}: {frames:?}");
        for f in added {
            assert!(f["object"]["kind"].is_string() && f["object"]["apiVersion"] == "v1", "{path}: {f}");
        }
    }
}

/// apiserver `registry/generic/registry/store.go` `DeleteCollection` returns the list it
/// deleted from (the e2e differential steps "deletecollection ..."): the objects as listed,
/// before their deletion (an object a finalizer keeps has no `deletionTimestamp` there), and a
/// built-in list's items without `kind` and `apiVersion`.
#[tokio::test]
async fn deletecollection_answers_the_objects_as_listed() {
    let server = TestServer::start().await;
    let cms = "/api/v1/namespaces/default/configmaps";
    for (name, finalizers) in [("a", json!([])), ("held", json!(["example.com/hold"]))] {
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "finalizers": finalizers}, "data": {"k": "v"}});
        assert_eq!(raw(&server, "POST", cms, &[], &serde_json::to_vec(&body).unwrap()).await.0, 201);
    }
    let (code, _, list) = raw(&server, "DELETE", cms, &[], b"").await;
    assert_eq!((code, list["kind"].as_str()), (200, Some("ConfigMapList")));
    assert_eq!(item_types(&list), [(None, None), (None, None)]);
    let held = &list["items"][1];
    assert_eq!(held["metadata"]["name"], "held");
    assert!(held["metadata"].get("deletionTimestamp").is_none(), "{held}");
    // It was marked all the same.
    let (_, _, now) = raw(&server, "GET", &format!("{cms}/held"), &[], b"").await;
    assert!(now["metadata"]["deletionTimestamp"].is_string(), "{now}");
}
