//! Bearer tokens and RBAC: 401 without a known token, `system:masters` may do anything, other
//! users get exactly what Roles, ClusterRoles and their bindings grant (at the next request),
//! with kube-apiserver's 403 Status otherwise; discovery stays open.

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use kcache_testserver::TestServer;
use kube::api::{Api, DynamicObject, ListParams, ObjectMeta, Patch, PatchParams, PostParams, WatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::Discovery;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::{cm, status_of};

const ADMIN: &str = "admin-token";
const ALICE: &str = "alice-token";
const BOB: &str = "bob-token";

async fn server() -> TestServer {
    TestServer::builder()
        .token(ADMIN, "admin", &["system:masters"])
        .token(ALICE, "alice", &[])
        .token(BOB, "bob", &["e2e-readers"])
        .start()
        .await
}

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> PolicyRule {
    let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    PolicyRule {
        api_groups: Some(v(groups)),
        resources: Some(v(resources)),
        verbs: v(verbs),
        ..Default::default()
    }
}

fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta { name: Some(name.into()), namespace: namespace.map(Into::into), ..Default::default() }
}

fn subject(kind: &str, name: &str) -> Subject {
    Subject {
        kind: kind.into(),
        name: name.into(),
        api_group: Some("rbac.authorization.k8s.io".into()),
        ..Default::default()
    }
}

fn role_ref(kind: &str, name: &str) -> RoleRef {
    RoleRef { api_group: Some("rbac.authorization.k8s.io".into()), kind: kind.into(), name: name.into() }
}

/// Grants `rules` to `subject` in `namespace` through a Role and a RoleBinding named `name`.
async fn grant(admin: &kube::Client, namespace: &str, name: &str, rules: Vec<PolicyRule>, who: Subject) {
    let roles: Api<Role> = Api::namespaced(admin.clone(), namespace);
    roles
        .create(&PostParams::default(), &Role { metadata: meta(name, None), rules: Some(rules) })
        .await
        .unwrap();
    let bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), namespace);
    let binding = RoleBinding {
        metadata: meta(name, None),
        role_ref: role_ref("Role", name),
        subjects: Some(vec![who]),
    };
    bindings.create(&PostParams::default(), &binding).await.unwrap();
}

/// A raw HTTP/1.1 request; returns the status code and the body parsed as JSON.
async fn raw(server: &TestServer, method: &str, path: &str, auth: Option<&str>) -> (u16, Value) {
    let mut tcp = TcpStream::connect(server.addr()).await.unwrap();
    let auth = auth.map(|a| format!("authorization: {a}\r\n")).unwrap_or_default();
    let req = format!("{method} {path} HTTP/1.1\r\nhost: x\r\n{auth}connection: close\r\n\r\n");
    tcp.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    tcp.read_to_end(&mut buf).await.unwrap();
    let text = String::from_utf8(buf).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let code = head.split(' ').nth(1).unwrap().parse().unwrap();
    (code, serde_json::from_str(body).unwrap_or(Value::String(body.to_string())))
}

#[tokio::test]
async fn requests_without_a_known_token_get_401() {
    let server = server().await;
    let unauthorized = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "Unauthorized", "reason": "Unauthorized", "code": 401,
    });
    for auth in [None, Some("Bearer nope"), Some("Basic YWxpY2U6cHc=")] {
        assert_eq!(
            raw(&server, "GET", "/api/v1/namespaces/e2e-1/configmaps", auth).await,
            (401, unauthorized.clone())
        );
        assert_eq!(raw(&server, "GET", "/apis", auth).await.0, 401, "discovery needs authentication too");
    }
    let anonymous: Api<ConfigMap> = Api::namespaced(server.client_for_token("wrong"), "e2e-1");
    let s = status_of(anonymous.list(&ListParams::default()).await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (401, "Unauthorized"));

    // The default client is the first system:masters user's.
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "e2e-1");
    cms.create(&PostParams::default(), &cm("a", &[], "1")).await.unwrap();
    let log = server.request_log().entries();
    assert_eq!(log.last().unwrap().user.as_deref(), Some("admin"));
}

#[tokio::test]
async fn without_tokens_everything_is_allowed() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(server.client_for_token("anything"), "e2e-1");
    cms.create(&PostParams::default(), &cm("a", &[], "1")).await.unwrap();
    assert_eq!(raw(&server, "GET", "/api/v1/namespaces/e2e-1/configmaps", None).await.0, 200);
    assert_eq!(server.request_log().entries().last().unwrap().user, None);
}

#[tokio::test]
async fn denied_requests_get_kube_apiservers_forbidden_status() {
    let server = server().await;
    let alice = server.client_for_token(ALICE);

    let cms: Api<ConfigMap> = Api::namespaced(alice.clone(), "e2e-1");
    let s = status_of(cms.list(&ListParams::default()).await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        s.message,
        "configmaps is forbidden: User \"alice\" cannot list resource \"configmaps\" in API group \"\" in the \
         namespace \"e2e-1\""
    );
    let s = status_of(cms.get("x").await.unwrap_err());
    assert_eq!(
        s.message,
        "configmaps \"x\" is forbidden: User \"alice\" cannot get resource \"configmaps\" in API group \"\" in \
         the namespace \"e2e-1\""
    );

    let namespaces: Api<Namespace> = Api::all(alice.clone());
    let s = status_of(namespaces.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(
        s.message,
        "namespaces is forbidden: User \"alice\" cannot list resource \"namespaces\" in API group \"\" at the \
         cluster scope"
    );

    // The whole body, as kube-apiserver writes it (details name the group, resource and object).
    let (code, body) = raw(
        &server,
        "GET",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/e2e-1/roles/r1",
        Some("Bearer alice-token"),
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(
        body,
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "roles.rbac.authorization.k8s.io \"r1\" is forbidden: User \"alice\" cannot get resource \
                        \"roles\" in API group \"rbac.authorization.k8s.io\" in the namespace \"e2e-1\"",
            "reason": "Forbidden",
            "details": {"name": "r1", "group": "rbac.authorization.k8s.io", "kind": "roles"},
            "code": 403,
        })
    );
    // Subresources are named "resource/subresource"; paths outside the API are "path"s.
    let (_, body) =
        raw(&server, "PUT", "/api/v1/namespaces/e2e-1/pods/p/status", Some("Bearer alice-token")).await;
    assert_eq!(
        body["message"],
        "pods \"p\" is forbidden: User \"alice\" cannot update resource \"pods/status\" in API group \"\" in the \
         namespace \"e2e-1\""
    );
    let (code, body) = raw(&server, "GET", "/metrics", Some("Bearer alice-token")).await;
    assert_eq!(
        (code, body["message"].as_str()),
        (403, Some("forbidden: User \"alice\" cannot get path \"/metrics\""))
    );
    assert_eq!(body["details"], json!({}));

    // Authorization comes before routing: a resource that does not exist is 403, not 404.
    let (code, _) = raw(&server, "GET", "/apis/example.com/v1/widgets", Some("Bearer alice-token")).await;
    assert_eq!(code, 403);
    assert_eq!(raw(&server, "GET", "/apis/example.com/v1/widgets", Some("Bearer admin-token")).await.0, 404);
}

#[tokio::test]
async fn a_granted_role_takes_effect_at_the_next_request() {
    let server = server().await;
    let admin = server.client();
    let alice: Api<ConfigMap> = Api::namespaced(server.client_for_token(ALICE), "e2e-1");
    assert_eq!(status_of(alice.list(&ListParams::default()).await.unwrap_err()).code, 403);
    assert_eq!(status_of(alice.watch(&WatchParams::default(), "0").await.err().unwrap()).code, 403);

    grant(
        &admin,
        "e2e-1",
        "cm-reader",
        vec![rule(&[""], &["configmaps"], &["get", "list", "watch"])],
        subject("User", "alice"),
    )
    .await;
    assert!(alice.list(&ListParams::default()).await.unwrap().items.is_empty());
    assert!(alice.watch(&WatchParams::default(), "0").await.is_ok());

    // Only what was granted: not other verbs, not other namespaces, not to other users.
    let s = status_of(alice.create(&PostParams::default(), &cm("a", &[], "1")).await.unwrap_err());
    assert_eq!(s.code, 403);
    assert!(s.message.contains("cannot create resource \"configmaps\""), "{}", s.message);
    let elsewhere: Api<ConfigMap> = Api::namespaced(server.client_for_token(ALICE), "e2e-2");
    assert_eq!(status_of(elsewhere.list(&ListParams::default()).await.unwrap_err()).code, 403);
    let bob: Api<ConfigMap> = Api::namespaced(server.client_for_token(BOB), "e2e-1");
    assert_eq!(status_of(bob.list(&ListParams::default()).await.unwrap_err()).code, 403);

    // Revoking is just as immediate.
    let bindings: Api<RoleBinding> = Api::namespaced(admin, "e2e-1");
    bindings.delete("cm-reader", &Default::default()).await.unwrap();
    assert_eq!(status_of(alice.list(&ListParams::default()).await.unwrap_err()).code, 403);
}

#[tokio::test]
async fn groups_cluster_roles_wildcards_and_resource_names() {
    let server = server().await;
    let admin = server.client();
    let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), "e2e-1");
    for name in ["cm-a", "cm-b"] {
        cms.create(&PostParams::default(), &cm(name, &[], "1")).await.unwrap();
    }

    // A RoleBinding to a ClusterRole, for a group, with resourceNames.
    let cluster_roles: Api<ClusterRole> = Api::all(admin.clone());
    let mut only_a = rule(&[""], &["configmaps"], &["get", "list", "watch"]);
    only_a.resource_names = Some(vec!["cm-a".into()]);
    cluster_roles
        .create(
            &PostParams::default(),
            &ClusterRole {
                metadata: meta("cm-a-reader", None),
                rules: Some(vec![only_a]),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), "e2e-1");
    let binding = RoleBinding {
        metadata: meta("readers", None),
        role_ref: role_ref("ClusterRole", "cm-a-reader"),
        subjects: Some(vec![subject("Group", "e2e-readers")]),
    };
    bindings.create(&PostParams::default(), &binding).await.unwrap();

    let bob: Api<ConfigMap> = Api::namespaced(server.client_for_token(BOB), "e2e-1");
    assert_eq!(bob.get("cm-a").await.unwrap().metadata.name.as_deref(), Some("cm-a"));
    assert_eq!(status_of(bob.get("cm-b").await.unwrap_err()).code, 403);
    assert_eq!(status_of(bob.list(&ListParams::default()).await.unwrap_err()).code, 403);
    // A list or watch with an exact metadata.name field selector names the object.
    let one = bob.list(&ListParams::default().fields("metadata.name=cm-a")).await.unwrap();
    assert_eq!(one.items.len(), 1);
    assert!(bob.watch(&WatchParams::default().fields("metadata.name=cm-a"), "0").await.is_ok());

    // A ClusterRoleBinding with wildcards reaches every namespace and every group.
    let crbs: Api<ClusterRoleBinding> = Api::all(admin.clone());
    cluster_roles
        .create(
            &PostParams::default(),
            &ClusterRole {
                metadata: meta("reader", None),
                rules: Some(vec![rule(&["*"], &["*"], &["list"])]),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let crb = ClusterRoleBinding {
        metadata: meta("alice-reads", None),
        role_ref: role_ref("ClusterRole", "reader"),
        subjects: Some(vec![subject("User", "alice")]),
    };
    crbs.create(&PostParams::default(), &crb).await.unwrap();
    let everywhere: Api<ConfigMap> = Api::all(server.client_for_token(ALICE));
    assert_eq!(everywhere.list(&ListParams::default()).await.unwrap().items.len(), 2);
    let roles: Api<Role> = Api::all(server.client_for_token(ALICE));
    assert!(roles.list(&ListParams::default()).await.is_ok());
    assert_eq!(status_of(everywhere.watch(&WatchParams::default(), "0").await.err().unwrap()).code, 403);

    // Subresources: "*/status" and "pods/status" match "pods/status", "pods" does not.
    grant(
        &admin,
        "e2e-1",
        "status-writer",
        vec![rule(&[""], &["*/status"], &["update", "patch"])],
        subject("User", "alice"),
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "e2e-1");
    pods.create(&PostParams::default(), &Pod { metadata: meta("p", None), ..Default::default() })
        .await
        .unwrap();
    let alice_pods: Api<Pod> = Api::namespaced(server.client_for_token(ALICE), "e2e-1");
    let status = Patch::Merge(json!({"status": {"phase": "Running"}}));
    alice_pods.patch_status("p", &PatchParams::default(), &status).await.unwrap();
    let s = status_of(alice_pods.patch("p", &PatchParams::default(), &status).await.unwrap_err());
    assert_eq!(s.code, 403);
}

#[tokio::test]
async fn custom_resources_are_authorized_by_their_group() {
    let server = server().await;
    server.register(kcache_testserver::ResourceDef::new("example.com", "v1", "widgets", "Widget", true));
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("example.com", "v1", "Widget"), "widgets");
    let alice: Api<DynamicObject> = Api::namespaced_with(server.client_for_token(ALICE), "e2e-1", &ar);
    let s = status_of(alice.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(
        s.message,
        "widgets.example.com is forbidden: User \"alice\" cannot list resource \"widgets\" in API group \
         \"example.com\" in the namespace \"e2e-1\""
    );
    // A rule for the wrong group does not help.
    grant(
        &server.client(),
        "e2e-1",
        "core",
        vec![rule(&[""], &["widgets"], &["*"])],
        subject("User", "alice"),
    )
    .await;
    assert_eq!(status_of(alice.list(&ListParams::default()).await.unwrap_err()).code, 403);
    grant(
        &server.client(),
        "e2e-1",
        "widgets",
        vec![rule(&["example.com"], &["widgets"], &["*"])],
        subject("User", "alice"),
    )
    .await;
    let w = DynamicObject::new("w", &ar).data(json!({"spec": {}}));
    alice.create(&PostParams::default(), &w).await.unwrap();
    assert_eq!(alice.list(&ListParams::default()).await.unwrap().items.len(), 1);
}

#[tokio::test]
async fn the_bootstrap_cluster_roles_exist_and_can_be_bound() {
    let server = server().await;
    let admin = server.client();
    let cluster_roles: Api<ClusterRole> = Api::all(admin.clone());
    let names: Vec<String> = cluster_roles
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|r| r.metadata.name)
        .collect();
    for expected in ["cluster-admin", "admin", "edit", "view", "system:discovery"] {
        assert!(names.iter().any(|n| n == expected), "{expected} in {names:?}");
    }

    let bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), "e2e-1");
    let view = RoleBinding {
        metadata: meta("alice-view", None),
        role_ref: role_ref("ClusterRole", "view"),
        subjects: Some(vec![subject("User", "alice")]),
    };
    bindings.create(&PostParams::default(), &view).await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(server.client_for_token(ALICE), "e2e-1");
    assert!(cms.list(&ListParams::default()).await.is_ok());
    assert_eq!(
        status_of(cms.create(&PostParams::default(), &cm("a", &[], "1")).await.unwrap_err()).code,
        403
    );
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(server.client_for_token(ALICE), "e2e-1");
    assert_eq!(
        status_of(secrets.list(&ListParams::default()).await.unwrap_err()).code,
        403,
        "view omits secrets"
    );

    let edit = RoleBinding {
        metadata: meta("alice-edit", None),
        role_ref: role_ref("ClusterRole", "edit"),
        subjects: Some(vec![subject("User", "alice")]),
    };
    bindings.create(&PostParams::default(), &edit).await.unwrap();
    cms.create(&PostParams::default(), &cm("a", &[], "1")).await.unwrap();
    assert!(secrets.list(&ListParams::default()).await.is_ok());
}

#[tokio::test]
async fn bindings_to_missing_roles_are_named_in_the_reason() {
    let server = server().await;
    let bindings: Api<RoleBinding> = Api::namespaced(server.client(), "e2e-1");
    let binding = RoleBinding {
        metadata: meta("dangling", None),
        role_ref: role_ref("Role", "missing"),
        subjects: Some(vec![subject("User", "alice")]),
    };
    bindings.create(&PostParams::default(), &binding).await.unwrap();
    let alice: Api<ConfigMap> = Api::namespaced(server.client_for_token(ALICE), "e2e-1");
    let s = status_of(alice.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(
        s.message,
        "configmaps is forbidden: User \"alice\" cannot list resource \"configmaps\" in API group \"\" in the \
         namespace \"e2e-1\": RBAC: role.rbac.authorization.k8s.io \"missing\" not found"
    );
}

#[tokio::test]
async fn discovery_is_open_to_every_authenticated_user() {
    let server = server().await;
    let alice = server.client_for_token(ALICE);
    let discovery = Discovery::new(alice.clone()).run().await.unwrap();
    assert!(discovery.groups().any(|g| g.name() == "rbac.authorization.k8s.io"));
    assert_eq!(alice.apiserver_version().await.unwrap().major, "1");
    assert_eq!(raw(&server, "GET", "/api/v1", Some("Bearer alice-token")).await.0, 200);
    assert_eq!(raw(&server, "GET", "/healthz", Some("Bearer alice-token")).await.0, 200);
}

#[tokio::test]
async fn anonymous_requests_are_authorized_as_system_anonymous_when_enabled() {
    let server =
        TestServer::builder().token(ADMIN, "admin", &["system:masters"]).anonymous_auth(true).start().await;
    let (code, body) = raw(&server, "GET", "/api/v1/namespaces/e2e-1/configmaps", None).await;
    assert_eq!(code, 403);
    assert_eq!(
        body["message"],
        "configmaps is forbidden: User \"system:anonymous\" cannot list resource \"configmaps\" in API group \"\" \
         in the namespace \"e2e-1\""
    );
    assert_eq!(raw(&server, "GET", "/version", None).await.0, 200);
    let (code, body) = raw(&server, "GET", "/apis", None).await;
    assert_eq!(
        (code, body["message"].as_str()),
        (403, Some("forbidden: User \"system:anonymous\" cannot get path \"/apis\""))
    );
    assert_eq!(
        raw(&server, "GET", "/apis", Some("Bearer unknown")).await.0,
        401,
        "a bad token is never anonymous"
    );
}
