//! Bearer-token authentication and an RBAC authorizer, modelled on kube-apiserver's token
//! authenticator, `RequestInfoFactory` (k8s.io/apiserver/pkg/endpoints/request), the RBAC
//! authorizer (plugin/pkg/auth/authorizer/rbac) and the Status bodies of
//! k8s.io/apiserver/pkg/endpoints/handlers/responsewriters `Forbidden` and the authentication
//! filter's `Unauthorized`.
//!
//! Only active when [`Builder::token`](crate::Builder::token) configured at least one token.

use http::{HeaderMap, Method, header};
use serde_json::{Value, json};

use crate::request::{Query, parse_bool};
use crate::resources::RBAC_GROUP;
use crate::state::{MASTERS, Shared, User};
use crate::status::ApiError;
use crate::store::Store;

/// What a request asks to do, as kube-apiserver's `RequestInfo` describes it for authorizers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Attributes {
    /// RBAC verb (`get`, `list`, `watch`, `create`, ...); the lowercased method for
    /// non-resource requests.
    pub(crate) verb: String,
    /// Whether the path names a resource (else it is a non-resource URL such as `/apis`).
    pub(crate) resource_request: bool,
    /// The URL path.
    pub(crate) path: String,
    /// API group (empty for core).
    pub(crate) api_group: String,
    /// Resource (plural).
    pub(crate) resource: String,
    /// Subresource, such as `status`.
    pub(crate) subresource: String,
    /// Namespace; for `namespaces` requests, the namespace's own name.
    pub(crate) namespace: String,
    /// Object name; for list and watch, the name of an exact `metadata.name` field selector.
    pub(crate) name: String,
}

/// `RequestInfoFactory.NewRequestInfo`, without the deprecated `/watch/` prefix paths.
pub(crate) fn attributes(method: &Method, path: &str, query: &Query) -> Attributes {
    let mut a =
        Attributes { verb: method.as_str().to_lowercase(), path: path.to_string(), ..Default::default() };
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let mut rest: &[&str] = match parts.as_slice() {
        ["api", _version, rest @ ..] if !rest.is_empty() => rest,
        ["apis", group, _version, rest @ ..] if !rest.is_empty() => {
            a.api_group = group.to_string();
            rest
        }
        _ => {
            a.api_group.clear();
            return a;
        }
    };
    a.resource_request = true;
    a.verb = match *method {
        Method::POST => "create",
        Method::GET | Method::HEAD => "get",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => "",
    }
    .to_string();
    if rest[0] == "namespaces" && rest.len() > 1 {
        a.namespace = rest[1].to_string();
        // `/namespaces/<ns>/status` and `/finalize` are subresources of the namespace itself.
        if rest.len() > 2 && rest[2] != "status" && rest[2] != "finalize" {
            rest = &rest[2..];
        }
    }
    a.resource = rest[0].to_string();
    if rest.len() >= 2 {
        a.name = rest[1].to_string();
    }
    if rest.len() >= 3 {
        a.subresource = rest[2].to_string();
    }
    if a.name.is_empty() && a.verb == "get" {
        let watch = query.get("watch").and_then(parse_bool).unwrap_or(false);
        a.verb = if watch { "watch" } else { "list" }.to_string();
        if let Some(name) = exact_name(query.get("fieldSelector").unwrap_or_default()) {
            a.name = name;
        }
    }
    if a.name.is_empty() && a.verb == "delete" {
        a.verb = "deletecollection".to_string();
    }
    a
}

/// The value of a `metadata.name=<name>` (or `==`) term of a field selector
/// (`RequiresExactMatch`), if it is a valid path segment.
fn exact_name(selector: &str) -> Option<String> {
    selector.split(',').find_map(|term| {
        let (field, value) = term.split_once("==").or_else(|| term.split_once('='))?;
        let valid = !value.is_empty() && value != "." && value != ".." && !value.contains(['/', '%']);
        (field.trim() == "metadata.name" && valid).then(|| value.trim().to_string())
    })
}

/// Authenticates and authorizes a request. `Ok(None)` when authentication is off (no tokens
/// configured); the user otherwise.
///
/// # Errors
///
/// 401 without a known bearer token (unless anonymous requests are enabled), 403 when RBAC
/// does not allow the request.
pub(crate) fn check(
    shared: &Shared,
    headers: &HeaderMap,
    method: &Method,
    path: &str,
    query: &Query,
) -> Result<Option<User>, ApiError> {
    if shared.tokens.is_empty() {
        return Ok(None);
    }
    let user = authenticate(shared, headers)?;
    let attrs = attributes(method, path, query);
    let store = shared.store.lock();
    match authorize(&store, &user, &attrs) {
        Ok(()) => Ok(Some(user)),
        Err(reason) => Err(forbidden(&user, &attrs, &reason)),
    }
}

/// The bearer token authenticator, then (when enabled) the anonymous one, as kube-apiserver
/// chains them: a token that is present but unknown is a 401, never anonymous.
fn authenticate(shared: &Shared, headers: &HeaderMap) -> Result<User, ApiError> {
    let unauthorized = || ApiError::new(401, "Unauthorized", "Unauthorized", None);
    let auth = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).unwrap_or_default().trim();
    let mut parts = auth.splitn(3, ' ');
    let bearer = parts.next().is_some_and(|s| s.eq_ignore_ascii_case("bearer"));
    match parts.next() {
        Some(token) if bearer => {
            let (_, user) = shared.tokens.iter().find(|(t, _)| t == token).ok_or_else(unauthorized)?;
            let mut user = user.clone();
            // AuthenticatedGroupAdder.
            if !user.groups.iter().any(|g| g == "system:authenticated") {
                user.groups.push("system:authenticated".into());
            }
            Ok(user)
        }
        _ if shared.anonymous_auth => {
            Ok(User { name: "system:anonymous".into(), groups: vec!["system:unauthenticated".into()] })
        }
        _ => Err(unauthorized()),
    }
}

/// The part of kube-apiserver's bootstrap RBAC policy (plugin/pkg/auth/authorizer/rbac/
/// bootstrappolicy) that matters to clients of this server, stored as ordinary objects when
/// authentication is on: `cluster-admin` (bound to `system:masters`), the user-facing `admin`,
/// `edit` and `view` (their core and RBAC rules, without aggregation), `system:discovery` and
/// `system:basic-user` (bound to `system:authenticated`) and `system:public-info-viewer` (bound
/// to everyone).
pub(crate) fn bootstrap_policy() -> (Vec<Value>, Vec<Value>) {
    let meta = |name: &str| {
        json!({
            "name": name,
            "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
        })
    };
    let read = ["get", "list", "watch"];
    let write = ["create", "delete", "deletecollection", "patch", "update"];
    let view_core = [
        "configmaps",
        "endpoints",
        "persistentvolumeclaims",
        "persistentvolumeclaims/status",
        "pods",
        "replicationcontrollers",
        "replicationcontrollers/scale",
        "serviceaccounts",
        "services",
        "services/status",
        "bindings",
        "events",
        "limitranges",
        "namespaces/status",
        "pods/log",
        "pods/status",
        "replicationcontrollers/status",
        "resourcequotas",
        "resourcequotas/status",
    ];
    let edit_core = [
        "pods",
        "pods/attach",
        "pods/exec",
        "pods/portforward",
        "pods/proxy",
        "configmaps",
        "endpoints",
        "events",
        "persistentvolumeclaims",
        "replicationcontrollers",
        "replicationcontrollers/scale",
        "secrets",
        "serviceaccounts",
        "services",
        "services/proxy",
    ];
    let view_rules = vec![
        json!({"apiGroups": [""], "resources": view_core, "verbs": read}),
        json!({"apiGroups": [""], "resources": ["namespaces"], "verbs": read}),
    ];
    let mut edit_rules = view_rules.clone();
    edit_rules.push(json!({"apiGroups": [""], "resources": edit_core, "verbs": write}));
    edit_rules.push(json!({"apiGroups": [""], "resources": ["secrets"], "verbs": read}));
    let mut admin_rules = edit_rules.clone();
    admin_rules.push(json!({
        "apiGroups": [RBAC_GROUP], "resources": ["rolebindings", "roles"],
        "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
    }));
    let role = |name: &str, rules: Vec<Value>| json!({"metadata": meta(name), "rules": rules});
    let get = |urls: &[&str]| vec![json!({"nonResourceURLs": urls, "verbs": ["get"]})];
    let roles = vec![
        role(
            "cluster-admin",
            vec![
                json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}),
                json!({"nonResourceURLs": ["*"], "verbs": ["*"]}),
            ],
        ),
        role("admin", admin_rules),
        role("edit", edit_rules),
        role("view", view_rules),
        role(
            "system:discovery",
            get(&[
                "/api",
                "/api/*",
                "/apis",
                "/apis/*",
                "/healthz",
                "/livez",
                "/openapi",
                "/openapi/*",
                "/readyz",
                "/version",
                "/version/",
            ]),
        ),
        role("system:public-info-viewer", get(&["/healthz", "/livez", "/readyz", "/version", "/version/"])),
        role(
            "system:basic-user",
            vec![json!({
                "apiGroups": ["authorization.k8s.io"],
                "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                "verbs": ["create"],
            })],
        ),
    ];
    let group = |name: &str| json!({"apiGroup": RBAC_GROUP, "kind": "Group", "name": name});
    let binding = |name: &str, subjects: Vec<Value>| {
        json!({
            "metadata": meta(name),
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": name},
            "subjects": subjects,
        })
    };
    let bindings = vec![
        binding("cluster-admin", vec![group(MASTERS)]),
        binding("system:discovery", vec![group("system:authenticated")]),
        binding("system:basic-user", vec![group("system:authenticated")]),
        binding(
            "system:public-info-viewer",
            vec![group("system:authenticated"), group("system:unauthenticated")],
        ),
    ];
    (roles, bindings)
}

/// The RBAC authorizer (behind the privileged-group short cut for `system:masters`): allowed
/// when a rule of a role bound to the user allows the request. Discovery is allowed by the
/// stored [`bootstrap_policy`], as in a real cluster. `Err` carries the reason
/// appended to the Forbidden message (empty, or `RBAC: ...` naming roles that bindings refer to
/// but that do not exist).
fn authorize(store: &Store, user: &User, a: &Attributes) -> Result<(), String> {
    if user.groups.iter().any(|g| g == MASTERS) {
        return Ok(());
    }
    let objects = |resource: &str| -> Vec<Value> {
        store
            .lookup(RBAC_GROUP, "v1", resource)
            .map(|id| store.resources[id].objects.values().map(|o| o.value()).collect())
            .unwrap_or_default()
    };
    let cluster_roles = objects("clusterroles");
    let find = |roles: &[Value], name: &str, namespace: &str| -> Option<Value> {
        roles
            .iter()
            .find(|r| {
                r["metadata"]["name"] == name
                    && r["metadata"]["namespace"].as_str().unwrap_or("") == namespace
            })
            .cloned()
    };
    let mut errors: Vec<String> = Vec::new();
    let mut bindings: Vec<(Value, String)> =
        objects("clusterrolebindings").into_iter().map(|b| (b, String::new())).collect();
    let roles = if a.namespace.is_empty() { Vec::new() } else { objects("roles") };
    if !a.namespace.is_empty() {
        bindings.extend(
            objects("rolebindings")
                .into_iter()
                .filter(|b| b["metadata"]["namespace"] == a.namespace.as_str())
                .map(|b| (b, a.namespace.clone())),
        );
    }
    for (binding, namespace) in bindings {
        let subjects = binding["subjects"].as_array().map(Vec::as_slice).unwrap_or_default();
        if !subjects.iter().any(|s| applies_to(user, s, &namespace)) {
            continue;
        }
        let role_ref = &binding["roleRef"];
        let name = role_ref["name"].as_str().unwrap_or_default();
        let role = match role_ref["kind"].as_str() {
            Some("ClusterRole") => find(&cluster_roles, name, "")
                .ok_or_else(|| format!("clusterrole.rbac.authorization.k8s.io {name:?} not found")),
            Some("Role") if !namespace.is_empty() => find(&roles, name, &namespace)
                .ok_or_else(|| format!("role.rbac.authorization.k8s.io {name:?} not found")),
            other => Err(format!("unsupported role reference kind: {:?}", other.unwrap_or_default())),
        };
        match role {
            Ok(role) => {
                let rules = role["rules"].as_array().map(Vec::as_slice).unwrap_or_default();
                if rules.iter().any(|r| rule_allows(a, r)) {
                    return Ok(());
                }
            }
            Err(e) => errors.push(e),
        }
    }
    // utilerrors.NewAggregate(...).Error(): deduplicated, bracketed when several.
    let mut unique: Vec<String> = Vec::new();
    for e in errors {
        if !unique.contains(&e) {
            unique.push(e);
        }
    }
    Err(match unique.len() {
        0 => String::new(),
        1 => format!("RBAC: {}", unique[0]),
        _ => format!("RBAC: [{}]", unique.join(", ")),
    })
}

/// `appliesToUser`: subjects of kind User, Group and ServiceAccount (as
/// `system:serviceaccount:<namespace>:<name>`, the namespace defaulting to the binding's).
fn applies_to(user: &User, subject: &Value, namespace: &str) -> bool {
    let name = subject["name"].as_str().unwrap_or_default();
    match subject["kind"].as_str() {
        Some("User") => user.name == name,
        Some("Group") => user.groups.iter().any(|g| g == name),
        Some("ServiceAccount") => {
            let ns = subject["namespace"].as_str().filter(|n| !n.is_empty()).unwrap_or(namespace);
            !ns.is_empty() && user.name == format!("system:serviceaccount:{ns}:{name}")
        }
        _ => false,
    }
}

fn strings(v: &Value) -> impl Iterator<Item = &str> {
    v.as_array().map(Vec::as_slice).unwrap_or_default().iter().filter_map(Value::as_str)
}

/// `RuleAllows`, with `*` wildcards for verbs, groups, resources and `*/<subresource>`.
fn rule_allows(a: &Attributes, rule: &Value) -> bool {
    let verb = strings(&rule["verbs"]).any(|v| v == "*" || v == a.verb);
    if !a.resource_request {
        return verb && strings(&rule["nonResourceURLs"]).any(|u| url_matches(u, &a.path));
    }
    let combined = if a.subresource.is_empty() {
        a.resource.clone()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    };
    let group = strings(&rule["apiGroups"]).any(|g| g == "*" || g == a.api_group);
    let resource = strings(&rule["resources"]).any(|r| {
        r == "*"
            || r == combined
            || (!a.subresource.is_empty() && r.strip_prefix("*/").is_some_and(|s| s == a.subresource))
    });
    let names = &rule["resourceNames"];
    let name = strings(names).next().is_none() || strings(names).any(|n| n == a.name);
    verb && group && resource && name
}

/// `NonResourceURLMatches`: exact, `*`, or a prefix ending in `*`.
fn url_matches(rule: &str, path: &str) -> bool {
    rule == "*" || rule == path || rule.strip_suffix('*').is_some_and(|prefix| path.starts_with(prefix))
}

/// `responsewriters.Forbidden`: kube-apiserver's 403 for a request the authorizer denied.
fn forbidden(user: &User, a: &Attributes, reason: &str) -> ApiError {
    let mut message = if !a.resource_request {
        format!("User {:?} cannot {} path {:?}", user.name, a.verb, a.path)
    } else {
        let resource = if a.subresource.is_empty() {
            a.resource.clone()
        } else {
            format!("{}/{}", a.resource, a.subresource)
        };
        let scope = if a.namespace.is_empty() {
            "at the cluster scope".to_string()
        } else {
            format!("in the namespace {:?}", a.namespace)
        };
        format!(
            "User {:?} cannot {} resource {resource:?} in API group {:?} {scope}",
            user.name, a.verb, a.api_group
        )
    };
    if !reason.is_empty() {
        message = format!("{message}: {reason}");
    }
    // errors.NewForbidden(groupResource, name, err).
    let (group, resource) =
        if a.resource_request { (a.api_group.as_str(), a.resource.as_str()) } else { ("", "") };
    let qualified = if group.is_empty() { resource.to_string() } else { format!("{resource}.{group}") };
    let message = if qualified.is_empty() {
        format!("forbidden: {message}")
    } else if a.name.is_empty() || !a.resource_request {
        format!("{qualified} is forbidden: {message}")
    } else {
        format!("{qualified} {:?} is forbidden: {message}", a.name)
    };
    let mut details = json!({});
    if a.resource_request {
        if !a.name.is_empty() {
            details["name"] = json!(a.name);
        }
        if !group.is_empty() {
            details["group"] = json!(group);
        }
        if !resource.is_empty() {
            details["kind"] = json!(resource);
        }
    }
    ApiError::new(403, "Forbidden", message, Some(details))
}
