//! `metav1.Status` error bodies with the codes, reasons and messages of kube-apiserver
//! (k8s.io/apimachinery/pkg/api/errors and k8s.io/apiserver/pkg/storage).

use serde_json::{Value, json};

use crate::resources::ResourceDef;

/// An API error: an HTTP status code and the `Status` object sent as the body (or inside a watch
/// ERROR event).
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    /// HTTP status code: `status.code`, unless a fault answers with another one.
    pub(crate) code: u16,
    /// The full `Status` object.
    pub(crate) status: Value,
    /// Extra response headers (e.g. `Retry-After`).
    pub(crate) retry_after: Option<u64>,
}

impl ApiError {
    /// A failure Status with the given parts; `details` is omitted when `None`.
    pub(crate) fn new(code: u16, reason: &str, message: impl Into<String>, details: Option<Value>) -> Self {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message.into(),
            "reason": reason,
            "code": code,
        });
        if let Some(details) = details {
            status["details"] = details;
        }
        Self { code, status, retry_after: None }
    }

    /// 404 `<resource> "<name>" not found`.
    pub(crate) fn not_found(def: &ResourceDef, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{}\" not found", def.qualified_resource(), name),
            Some(details(def, name)),
        )
    }

    /// 404 for a path that names no served resource; kube-apiserver answers these with the
    /// generic "the server could not find the requested resource".
    pub(crate) fn path_not_found() -> Self {
        Self::new(404, "NotFound", "the server could not find the requested resource", Some(json!({})))
    }

    /// 409 `<resource> "<name>" already exists`.
    pub(crate) fn already_exists(def: &ResourceDef, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{}\" already exists", def.qualified_resource(), name),
            Some(details(def, name)),
        )
    }

    /// 409 Conflict for a stale resourceVersion (the storage layer's optimistic-concurrency check).
    pub(crate) fn conflict(def: &ResourceDef, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {} \"{}\": {}", def.qualified_resource(), name, why),
            Some(details(def, name)),
        )
    }

    /// The reason text of a resourceVersion conflict.
    pub(crate) const MODIFIED: &'static str =
        "the object has been modified; please apply your changes to the latest version and try again";

    /// 400 BadRequest.
    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message, None)
    }

    /// 422 Invalid with one field error, as `errors.NewInvalid` renders it.
    pub(crate) fn invalid(
        group: &str,
        kind: &str,
        name: &str,
        causes: &[(&str, &str, String)], // (cause type, field, body)
    ) -> Self {
        let qualified = if group.is_empty() { kind.to_string() } else { format!("{kind}.{group}") };
        let rendered: Vec<String> =
            causes.iter().map(|(_, field, body)| format!("{field}: {body}")).collect();
        let aggregate =
            if rendered.len() == 1 { rendered[0].clone() } else { format!("[{}]", rendered.join(", ")) };
        let causes: Vec<Value> = causes
            .iter()
            .map(|(ty, field, body)| json!({"reason": ty, "message": body, "field": field}))
            .collect();
        let mut d = details_of(kind, group, name);
        d["causes"] = json!(causes);
        Self::new(422, "Invalid", format!("{qualified} \"{name}\" is invalid: {aggregate}"), Some(d))
    }

    /// 410 Expired (`errors.NewResourceExpired`).
    pub(crate) fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message, None)
    }

    /// 504 Timeout with cause ResourceVersionTooLarge (`storage.NewTooLargeResourceVersionError`),
    /// asking to retry after 1 s: in the body's `details.retryAfterSeconds` and, as an error
    /// response, in the `Retry-After` header (responsewriters.ErrorNegotiated sets it whenever
    /// `retryAfterSeconds > 0`).
    pub(crate) fn too_large_resource_version(requested: u64, current: u64) -> Self {
        let mut e = Self::new(
            504,
            "Timeout",
            format!("Timeout: Too large resource version: {requested}, current: {current}"),
            Some(json!({
                "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                "retryAfterSeconds": 1,
            })),
        );
        e.retry_after = Some(1);
        e
    }

    /// 405 MethodNotAllowed, as kube-apiserver's router answers it (empty details).
    pub(crate) fn method_not_allowed() -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
            Some(json!({})),
        )
    }

    /// 501 for something kube-apiserver serves and this server does not: a Status of this
    /// server's own (reason `NotImplemented`), so a client never mistakes it for an answer
    /// kube-apiserver would give.
    pub(crate) fn not_supported(what: &str) -> Self {
        Self::new(501, "NotImplemented", format!("{what} is not supported by kcache-testserver"), None)
    }

    /// The `Status` body serialised.
    pub(crate) fn body(&self) -> Vec<u8> {
        serde_json::to_vec(&self.status).unwrap_or_default()
    }
}

/// `StatusDetails` naming one object of `def`.
fn details(def: &ResourceDef, name: &str) -> Value {
    details_of(&def.resource, &def.group, name)
}

/// `StatusDetails` with a kind, a group and a name, each left out when empty (all of its fields
/// are omitempty: a ListOptions error names no object).
fn details_of(kind: &str, group: &str, name: &str) -> Value {
    let mut d = json!({"kind": kind});
    if !name.is_empty() {
        d["name"] = json!(name);
    }
    if !group.is_empty() {
        d["group"] = json!(group);
    }
    d
}
