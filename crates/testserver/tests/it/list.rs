//! Lists: pagination with consistent continue tokens, expired tokens, resourceVersion semantics
//! ("", "0", exact, too large), selectors and namespaces.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_testserver::TestServer;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, VersionMatch};
use serde_json::{Value, json};

use crate::common::{cm, status_of};

async fn seeded(n: usize) -> (TestServer, Api<ConfigMap>) {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    for i in 0..n {
        let labels: &[(&str, &str)] = if i % 2 == 0 { &[("parity", "even")] } else { &[("parity", "odd")] };
        cms.create(&PostParams::default(), &cm(&format!("cm-{i:02}"), labels, "1")).await.unwrap();
    }
    (server, cms)
}

fn names(list: &kube::api::ObjectList<ConfigMap>) -> Vec<String> {
    list.items.iter().map(|c| c.metadata.name.clone().unwrap()).collect()
}

#[tokio::test]
async fn list_resource_version_is_the_current_one_and_items_are_in_key_order() {
    let (server, cms) = seeded(3).await;
    let list = cms.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.metadata.resource_version, Some(server.resource_version().to_string()));
    assert_eq!(names(&list), ["cm-00", "cm-01", "cm-02"]);
}

#[tokio::test]
async fn pages_are_a_consistent_snapshot_even_when_objects_change_between_them() {
    let (_server, cms) = seeded(5).await;
    let first = cms.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(names(&first), ["cm-00", "cm-01"]);
    assert_eq!(first.metadata.remaining_item_count, Some(3));
    let token = first.metadata.continue_.clone().unwrap();

    // Changes after the first page must not show in later pages.
    cms.delete("cm-03", &DeleteParams::default()).await.unwrap();
    cms.patch("cm-02", &PatchParams::default(), &Patch::Merge(json!({"data": {"v": "changed"}})))
        .await
        .unwrap();
    cms.create(&PostParams::default(), &cm("cm-05", &[], "1")).await.unwrap();

    let second = cms.list(&ListParams::default().limit(2).continue_token(&token)).await.unwrap();
    assert_eq!(names(&second), ["cm-02", "cm-03"]);
    assert_eq!(second.items[0].data.as_ref().unwrap()["v"], "1", "old content of cm-02");
    assert_eq!(second.metadata.resource_version, first.metadata.resource_version);
    let third = cms
        .list(&ListParams::default().limit(2).continue_token(second.metadata.continue_.as_ref().unwrap()))
        .await
        .unwrap();
    assert_eq!(names(&third), ["cm-04"]);
    assert_eq!(third.metadata.continue_, None);
}

/// A continue token older than the compacted history is 410 with etcd3's "inconsistent
/// continue" message and a replacement token (k8s.io/apiserver/pkg/storage/etcd3/errors.go
/// `handleCompactedErrorForPaging`) whose rv -1 means "the latest version when used".
#[tokio::test]
async fn an_expired_continue_token_is_410_with_the_real_message_and_a_fresh_token() {
    let (server, cms) = seeded(4).await;
    let first = cms.list(&ListParams::default().limit(2)).await.unwrap();
    cms.create(&PostParams::default(), &cm("cm-99", &[], "1")).await.unwrap();
    server.compact();
    let token = first.metadata.continue_.unwrap();
    let s = status_of(cms.list(&ListParams::default().limit(2).continue_token(&token)).await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (410, "Expired"));
    assert_eq!(
        s.message,
        "The provided continue parameter is too old to display a consistent list result. You can start a new \
         list without the continue parameter, or use the continue token in this response to retrieve the \
         remainder of the results. Continuing with the provided token results in an inconsistent list - objects \
         that were created, modified, or deleted between the time the first chunk was returned and now may show \
         up in the list."
    );
    let fresh = s.metadata.and_then(|m| m.continue_).expect("an inconsistent continue token");
    // etcd3 handleCompactedErrorForPaging: the new token's rv is -1, "the latest when used".
    let decoded: Value = serde_json::from_slice(&b64_url_decode(&fresh)).unwrap();
    assert_eq!(decoded["rv"], -1, "{decoded}");
    cms.create(&PostParams::default(), &cm("cm-98", &[], "1")).await.unwrap();
    let rest = cms.list(&ListParams::default().limit(10).continue_token(&fresh)).await.unwrap();
    assert_eq!(names(&rest), ["cm-02", "cm-03", "cm-98", "cm-99"], "read at the version current when used");
    assert_eq!(rest.metadata.resource_version, Some(server.resource_version().to_string()));
}

#[tokio::test]
async fn resource_version_zero_is_served_unpaginated() {
    let (_server, cms) = seeded(5).await;
    // kube's ListParams drops resourceVersion=0 when a limit is set, so send both by hand.
    let req = http::Request::get("/api/v1/namespaces/default/configmaps?limit=2&resourceVersion=0")
        .body(Vec::new())
        .unwrap();
    let list: kube::api::ObjectList<ConfigMap> = cms.clone().into_client().request(req).await.unwrap();
    assert_eq!(list.items.len(), 5);
    assert_eq!(list.metadata.continue_, None);
}

#[tokio::test]
async fn exact_reads_reconstruct_old_state_and_expire_after_compaction() {
    let (server, cms) = seeded(3).await;
    let rv = server.resource_version().to_string();
    cms.delete("cm-00", &DeleteParams::default()).await.unwrap();
    let lp = ListParams::default().at(&rv).matching(VersionMatch::Exact);
    let old = cms.list(&lp).await.unwrap();
    assert_eq!(names(&old), ["cm-00", "cm-01", "cm-02"]);
    assert_eq!(old.metadata.resource_version, Some(rv.clone()));

    // Not-older-than is served at the current state.
    let now = cms.list(&ListParams::default().at(&rv).matching(VersionMatch::NotOlderThan)).await.unwrap();
    assert_eq!(names(&now), ["cm-01", "cm-02"]);

    server.compact();
    let s = status_of(cms.list(&lp).await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (410, "Expired"));
    assert_eq!(s.message, "The resourceVersion for the provided list is too old.");
    // With a limit and no match, resourceVersion N is an exact read too.
    let s = status_of(cms.list(&ListParams::default().at(&rv).limit(1)).await.unwrap_err());
    assert_eq!(s.code, 410);
}

/// A list at a resourceVersion the server has not reached is 504 with cause
/// ResourceVersionTooLarge (k8s.io/apiserver/pkg/storage/errors.go
/// `NewTooLargeResourceVersionError`) and a `Retry-After: 1` header matching
/// `details.retryAfterSeconds` (pkg/endpoints/handlers/responsewriters/writers.go
/// `ErrorNegotiated`).
#[tokio::test]
async fn a_resource_version_newer_than_the_server_is_504_too_large() {
    let (server, cms) = seeded(1).await;
    let future = (server.resource_version() + 5).to_string();
    let s = status_of(cms.list(&ListParams::default().at(&future)).await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (504, "Timeout"));
    assert_eq!(
        s.message,
        format!("Timeout: Too large resource version: {future}, current: {}", server.resource_version())
    );
    let details = s.details.unwrap();
    assert_eq!(details.causes[0].reason, "ResourceVersionTooLarge");
    assert_eq!(details.causes[0].message, "Too large resource version");
    assert_eq!(details.retry_after_seconds, 1);

    let (code, headers, _) = get(&server, &format!("resourceVersion={future}")).await;
    assert_eq!(code, 504);
    assert_eq!(headers.get("retry-after").map(|v| v.to_str().unwrap()), Some("1"));
}

/// A raw GET of the default namespace's configmaps: code, headers and JSON body.
async fn get(server: &TestServer, query: &str) -> (u16, http::HeaderMap, Value) {
    get_path(server, &format!("/api/v1/namespaces/default/configmaps?{query}")).await
}

/// A raw GET: code, headers and JSON body.
async fn get_path(server: &TestServer, path_and_query: &str) -> (u16, http::HeaderMap, Value) {
    let req = http::Request::get(path_and_query).body(kube::client::Body::from(Vec::new())).unwrap();
    let resp = server.client().send(req).await.unwrap();
    let (code, headers) = (resp.status().as_u16(), resp.headers().clone());
    let body = http_body_util::BodyExt::collect(resp.into_body()).await.unwrap().to_bytes();
    (code, headers, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

/// With a selector, a page that reaches the limit carries a continue token whenever any stored
/// object follows its last item, matching or not, so the next page may be empty and final:
/// k8s.io/apiserver/pkg/storage/cacher/cacher.go `GetList` (`hasMoreListItems`) and
/// storage/etcd3/store.go `GetList` (`hasMore`).
#[tokio::test]
async fn a_selected_page_has_a_token_while_any_object_follows_and_the_last_page_may_be_empty() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    cms.create(&PostParams::default(), &cm("a", &[("x", "1")], "1")).await.unwrap();
    cms.create(&PostParams::default(), &cm("b", &[("x", "1")], "1")).await.unwrap();
    cms.create(&PostParams::default(), &cm("c", &[("x", "2")], "1")).await.unwrap();
    let lp = ListParams::default().labels("x=1").limit(2);
    let first = cms.list(&lp).await.unwrap();
    assert_eq!(names(&first), ["a", "b"]);
    let token = first.metadata.continue_.clone().expect("c follows b, so a token");
    assert_eq!(first.metadata.remaining_item_count, None);
    let second = cms.list(&lp.clone().continue_token(&token)).await.unwrap();
    assert!(second.items.is_empty(), "{:?}", names(&second));
    assert_eq!(second.metadata.continue_, None);
    assert_eq!(second.metadata.resource_version, first.metadata.resource_version);

    // Nothing after the last item: no token.
    let all = cms.list(&ListParams::default().labels("x=2").limit(1)).await.unwrap();
    assert_eq!((names(&all), all.metadata.continue_), (vec!["c".to_string()], None));
}

/// `continue` may come with resourceVersion "0" (ignored in favour of the token's); any other
/// resourceVersion is a 400: k8s.io/apiserver/pkg/storage/interfaces.go `ValidateListOptions`.
#[tokio::test]
async fn continue_is_allowed_with_resource_version_zero_only() {
    let (server, cms) = seeded(3).await;
    let first = cms.list(&ListParams::default().limit(1)).await.unwrap();
    let token = first.metadata.continue_.clone().unwrap();
    cms.create(&PostParams::default(), &cm("cm-09", &[], "1")).await.unwrap();
    let (code, _, body) = get(&server, &format!("limit=1&continue={token}&resourceVersion=0")).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["items"][0]["metadata"]["name"], "cm-01");
    assert_eq!(body["metadata"]["resourceVersion"].as_str(), first.metadata.resource_version.as_deref());
    assert!(body["metadata"]["continue"].is_string());

    let rv = first.metadata.resource_version.unwrap();
    let (code, _, body) = get(&server, &format!("limit=1&continue={token}&resourceVersion={rv}")).await;
    assert_eq!(code, 400);
    assert_eq!(body["message"], "specifying resource version is not allowed when using continue");
}

/// A bad continue token is a 400 whose message is "invalid continue token: " and the decoding
/// error (k8s.io/apiserver/pkg/storage/interfaces.go `ValidateListOptions`, storage/continue.go
/// `DecodeContinue`); a token with rv -1 reads at the latest version when used.
#[tokio::test]
async fn bad_continue_tokens_get_the_real_messages() {
    let (server, _cms) = seeded(2).await;
    let b64 = |s: &str| b64_url(s.as_bytes());
    for (token, message) in [
        ("garbage!".to_string(), "continue key is not valid: illegal base64 data at input byte 7"),
        (
            b64(r#"{"v":"meta.k8s.io/v2","rv":3,"start":"default/a\u0000"}"#),
            "continue key is not valid: server does not recognize this encoded version meta.k8s.io/v2",
        ),
        (
            b64(r#"{"v":"meta.k8s.io/v1","rv":0,"start":"default/a\u0000"}"#),
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        ),
        (
            b64(r#"{"v":"meta.k8s.io/v1","rv":3,"start":""}"#),
            "continue key is not valid: encoded start key empty (version meta.k8s.io/v1)",
        ),
    ] {
        let (code, _, body) = get(&server, &format!("limit=1&continue={token}")).await;
        assert_eq!(code, 400, "{token}");
        assert_eq!(body["message"], format!("invalid continue token: {message}"), "{token}");
    }
    let latest = b64(r#"{"v":"meta.k8s.io/v1","rv":-1,"start":"default/cm-00\u0000"}"#);
    let (code, _, body) = get(&server, &format!("limit=5&continue={latest}")).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["items"][0]["metadata"]["name"], "cm-01");
    assert_eq!(body["metadata"]["resourceVersion"], server.resource_version().to_string());
}

/// Unpadded URL-safe base64 (Go's `base64.RawURLEncoding`, the encoding of continue tokens).
fn b64_url(data: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(data)
}

/// Decodes [`b64_url`]'s output.
fn b64_url_decode(s: &str) -> Vec<u8> {
    URL_SAFE_NO_PAD.decode(s).expect("base64")
}

#[tokio::test]
async fn label_and_field_selectors_filter_lists_and_pages() {
    let (_server, cms) = seeded(6).await;
    let even = cms.list(&ListParams::default().labels("parity=even")).await.unwrap();
    assert_eq!(names(&even), ["cm-00", "cm-02", "cm-04"]);
    let set = cms.list(&ListParams::default().labels("parity in (odd),parity!=even")).await.unwrap();
    assert_eq!(names(&set), ["cm-01", "cm-03", "cm-05"]);
    assert_eq!(names(&cms.list(&ListParams::default().labels("!parity")).await.unwrap()).len(), 0);
    assert_eq!(names(&cms.list(&ListParams::default().labels("parity")).await.unwrap()).len(), 6);
    assert_eq!(names(&cms.list(&ListParams::default().labels("parity notin (odd)")).await.unwrap()).len(), 3);

    let page = cms.list(&ListParams::default().labels("parity=odd").limit(2)).await.unwrap();
    assert_eq!(names(&page), ["cm-01", "cm-03"]);
    assert_eq!(page.metadata.remaining_item_count, None, "no count when a selector is used");

    let by_name = cms.list(&ListParams::default().fields("metadata.name=cm-04")).await.unwrap();
    assert_eq!(names(&by_name), ["cm-04"]);
    let not = cms
        .list(&ListParams::default().fields("metadata.name!=cm-04,metadata.namespace==default"))
        .await
        .unwrap();
    assert_eq!(names(&not).len(), 5);
    let s = status_of(cms.list(&ListParams::default().fields("data.x=1")).await.unwrap_err());
    assert_eq!(
        (s.code, s.reason.as_str(), s.message.as_str()),
        (
            400,
            "BadRequest",
            r#""data.x" is not a known field selector: only "metadata.name", "metadata.namespace""#
        )
    );
}

/// Field selectors follow each kind's `ConvertFieldLabel`: the per-kind lists of
/// kubernetes/pkg/apis/core/v1/conversion.go (pods' spec.nodeName and status.phase, secrets'
/// type, namespaces' status.phase and no metadata.namespace) with "field label not supported",
/// and apiextensions-apiserver's crConverter for custom resources (no metadata.namespace when
/// cluster-scoped).
#[tokio::test]
async fn field_selectors_accept_each_kinds_own_fields() {
    use k8s_openapi::api::core::v1::{Namespace, Pod, Secret};
    let server = TestServer::start().await;
    let client = server.client();
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    for (name, node) in [("p1", "n1"), ("p2", "n2")] {
        let pod = json!({"metadata": {"name": name}, "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]}});
        pods.create(&PostParams::default(), &serde_json::from_value(pod).unwrap()).await.unwrap();
    }
    let on_n1 = pods.list(&ListParams::default().fields("spec.nodeName=n1")).await.unwrap();
    assert_eq!(on_n1.items.iter().map(|p| p.metadata.name.clone().unwrap()).collect::<Vec<_>>(), ["p1"]);
    let pending =
        pods.list(&ListParams::default().fields("status.phase=Pending,spec.nodeName!=n1")).await.unwrap();
    assert_eq!(pending.items.len(), 1);
    let s = status_of(pods.list(&ListParams::default().fields("spec.foo=x")).await.unwrap_err());
    assert_eq!((s.code, s.message.as_str()), (400, "field label not supported: spec.foo"));

    let secrets: Api<Secret> = Api::default_namespaced(client.clone());
    for (name, ty) in [("s1", "Opaque"), ("s2", "kubernetes.io/tls")] {
        let secret = json!({"metadata": {"name": name}, "type": ty});
        secrets.create(&PostParams::default(), &serde_json::from_value(secret).unwrap()).await.unwrap();
    }
    let opaque = secrets.list(&ListParams::default().fields("type=Opaque")).await.unwrap();
    assert_eq!(opaque.items.iter().map(|p| p.metadata.name.clone().unwrap()).collect::<Vec<_>>(), ["s1"]);

    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "ns1"}})).unwrap(),
        )
        .await
        .unwrap();
    let active = namespaces.list(&ListParams::default().fields("status.phase=Active")).await.unwrap();
    assert_eq!(active.items.len(), 1);
    let s =
        status_of(namespaces.list(&ListParams::default().fields("metadata.namespace=x")).await.unwrap_err());
    assert_eq!((s.code, s.message.as_str()), (400, "field label not supported: metadata.namespace"));

    // A cluster-scoped built-in without its own conversion accepts metadata.namespace (only ""
    // matches); a cluster-scoped custom resource does not.
    let (code, _, _) = get_path(
        &server,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles?fieldSelector=metadata.namespace%3Dx",
    )
    .await;
    assert_eq!(code, 200);
    server.register(kcache_testserver::ResourceDef::new("example.com", "v1", "widgets", "Widget", false));
    let (code, _, body) =
        get_path(&server, "/apis/example.com/v1/widgets?fieldSelector=metadata.namespace%3Dx").await;
    assert_eq!((code, &body["message"]), (400, &json!("field label not supported: metadata.namespace")));
}

#[tokio::test]
async fn all_namespace_lists_span_namespaces_in_key_order() {
    let server = TestServer::start().await;
    let client = server.client();
    for ns in ["b", "a"] {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        api.create(&PostParams::default(), &cm("x", &[], "1")).await.unwrap();
    }
    let all: Api<ConfigMap> = Api::all(client.clone());
    let list = all.list(&ListParams::default()).await.unwrap();
    let keys: Vec<_> = list.items.iter().map(|c| c.metadata.namespace.clone().unwrap()).collect();
    assert_eq!(keys, ["a", "b"]);
    let only_b: Api<ConfigMap> = Api::namespaced(client, "b");
    assert_eq!(only_b.list(&ListParams::default()).await.unwrap().items.len(), 1);
}
