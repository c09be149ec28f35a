//! Validation of what clients send, with kube-apiserver's errors: list and watch options
//! (selectors, resourceVersion) and object bodies (kind, `metadata` types, name, namespace).

use std::sync::atomic::Ordering;

use kcache_shard_selector::{ShardKey, ShardSelector};
use serde_json::{Map, Value};

use crate::request::{Query, Route};
use crate::resources::ResourceDef;
use crate::selector::{FieldSelector, LabelSelector};
use crate::state::Shared;
use crate::status::ApiError;
use crate::store::StoredObject;

/// Parses the selectors of a list or watch.
pub(crate) fn selectors(
    query: &Query,
    def: &ResourceDef,
) -> Result<(LabelSelector, FieldSelector), ApiError> {
    Ok((
        LabelSelector::parse(query.get("labelSelector").unwrap_or_default())?,
        FieldSelector::parse(query.get("fieldSelector").unwrap_or_default(), def)?,
    ))
}

/// The `shardSelector` of a list, watch or deletecollection, as kube-apiserver v1.36's registry
/// store reads it (`Store.ListPredicate`, `Store.Watch`): `None` when the
/// `ShardedListAndWatch` gate is off (the parameter is then ignored, even malformed) or the
/// parameter is absent or empty; a malformed one is a plain Go error there, which the handler
/// answers as a 500 Status with no reason and the message `invalid shard selector: <error>`.
pub(crate) fn shard_selector(shared: &Shared, query: &Query) -> Result<Option<ShardSelector>, ApiError> {
    if !shared.sharded_list_and_watch.load(Ordering::Relaxed) {
        return Ok(None);
    }
    match query.get("shardSelector") {
        None | Some("") => Ok(None),
        Some(s) => ShardSelector::parse(s).map(Some).map_err(|e| {
            let mut err = ApiError::new(500, "", format!("invalid shard selector: {e}"), None);
            // metav1.StatusReasonUnknown is "", which `omitempty` leaves out.
            if let Some(status) = err.status.as_object_mut() {
                status.remove("reason");
            }
            err
        }),
    }
}

/// Whether `o` is in the shard (always, without a selector): its uid or namespace hashed as
/// apimachinery's `sharding.Selector.Matches` hashes them.
pub(crate) fn in_shard(shard: Option<&ShardSelector>, o: &StoredObject) -> bool {
    shard.is_none_or(|s| {
        s.matches_value(match s.key() {
            ShardKey::Uid => &o.uid,
            ShardKey::Namespace => &o.namespace,
        })
    })
}

/// `metadata.shardInfo` of a sharded list (`SelectionPredicate.SetShardInfoOnList`): the
/// selector's canonical `String()`, not the parameter as sent. JSON members to append to a
/// ListMeta object (empty without a selector).
pub(crate) fn shard_info(shard: Option<&ShardSelector>) -> String {
    shard.map_or_else(String::new, |s| {
        format!(",\"shardInfo\":{{\"selector\":{}}}", Value::String(s.to_string()))
    })
}

/// Parses a resourceVersion parameter as the watch cache does.
pub(crate) fn parse_rv(s: &str) -> Result<u64, ApiError> {
    s.parse::<u64>().map_err(|_| {
        ApiError::bad_request(format!(
            "invalid resource version: strconv.ParseUint: parsing {s:?}: invalid syntax"
        ))
    })
}

/// `field.Forbidden` as a (type, field, body) cause.
pub(crate) fn forbidden(field: &'static str, detail: &str) -> (&'static str, &'static str, String) {
    ("FieldValueForbidden", field, format!("Forbidden: {detail}"))
}

/// The 422 kube-apiserver answers for invalid ListOptions.
pub(crate) fn invalid_list_options(causes: &[(&str, &str, String)]) -> ApiError {
    ApiError::invalid("meta.k8s.io", "ListOptions", "", causes)
}

/// Decodes a request body into a JSON object with the checks the create/update handlers make.
pub(crate) fn decode_body(def: &ResourceDef, body: &[u8]) -> Result<Map<String, Value>, ApiError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        let summary: String = String::from_utf8_lossy(&body[..body.len().min(30)]).into_owned();
        ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): couldn't get version/kind; json parse error: {e} ({summary})",
            def.kind
        ))
    })?;
    let Value::Object(mut obj) = value else {
        return Err(ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): couldn't get version/kind; json parse error: expected an object",
            def.kind
        )));
    };
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or_default().to_string();
    if !api_version.is_empty() && api_version != def.api_version() {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({})",
            def.api_version()
        )));
    }
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default().to_string();
    if !kind.is_empty() && kind != def.kind {
        let name =
            obj.get("metadata").and_then(|m| m.get("name")).and_then(Value::as_str).unwrap_or_default();
        if def.group.is_empty() {
            return Err(ApiError::bad_request(format!(
                "{kind} in version {:?} cannot be handled as a {}: the kind in the data ({kind}) does not match the expected kind ({})",
                def.version, def.kind, def.kind
            )));
        }
        return Err(ApiError::invalid(
            &def.group,
            &kind,
            name,
            &[("FieldValueInvalid", "kind", format!("Invalid value: {kind:?}: must be {}", def.kind))],
        ));
    }
    obj.insert("apiVersion".into(), Value::String(def.api_version()));
    obj.insert("kind".into(), Value::String(def.kind.clone()));
    match obj.get("metadata") {
        None | Some(Value::Null) => {
            obj.insert("metadata".into(), Value::Object(Map::new()));
        }
        Some(Value::Object(meta)) => check_meta_types(def, meta)?,
        Some(_) => {
            return Err(ApiError::bad_request(format!(
                "{} in version {:?} cannot be handled as a {}: json: cannot unmarshal into Go struct field {}.metadata of type v1.ObjectMeta",
                def.kind, def.version, def.kind, def.kind
            )));
        }
    }
    Ok(obj)
}

/// The JSON types `metav1.ObjectMeta` accepts for the fields clients set; anything else fails
/// decoding in kube-apiserver with a 400.
pub(crate) fn check_meta_types(def: &ResourceDef, meta: &Map<String, Value>) -> Result<(), ApiError> {
    let bad = |field: &str, want: &str| {
        Err(ApiError::bad_request(format!(
            "{kind} in version {:?} cannot be handled as a {kind}: json: cannot unmarshal into Go struct field \
             ObjectMeta.metadata.{field} of type {want}",
            def.version,
            kind = def.kind
        )))
    };
    for field in [
        "name",
        "namespace",
        "generateName",
        "resourceVersion",
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
    ] {
        if meta.get(field).is_some_and(|v| !v.is_string() && !v.is_null()) {
            return bad(field, "string");
        }
    }
    for field in ["labels", "annotations"] {
        match meta.get(field) {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) if m.values().all(Value::is_string) => {}
            Some(_) => return bad(field, "map[string]string"),
        }
    }
    match meta.get("finalizers") {
        None | Some(Value::Null) => {}
        Some(Value::Array(a)) if a.iter().all(Value::is_string) => {}
        Some(_) => return bad("finalizers", "[]string"),
    }
    if meta.get("generation").is_some_and(|v| !v.is_i64() && !v.is_null()) {
        return bad("generation", "int64");
    }
    Ok(())
}

/// `metadata.<field>` as a string (empty when absent or not a string).
pub(crate) fn meta_str<'a>(obj: &'a Map<String, Value>, field: &str) -> &'a str {
    obj.get("metadata").and_then(|m| m.get(field)).and_then(Value::as_str).unwrap_or_default()
}

/// `metadata`, made an empty object first if it is missing or not an object.
pub(crate) fn meta_mut(obj: &mut Map<String, Value>) -> &mut Map<String, Value> {
    if !matches!(obj.get("metadata"), Some(Value::Object(_))) {
        obj.insert("metadata".into(), Value::Object(Map::new()));
    }
    match obj.get_mut("metadata") {
        Some(Value::Object(m)) => m,
        _ => unreachable!("metadata was just made an object"),
    }
}

/// RFC 1123 subdomain, as object names must be.
pub(crate) fn name_errors(name: &str) -> Option<String> {
    let ok = name.len() <= 253
        && name.split('.').all(|part| {
            !part.is_empty()
                && part.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        });
    (!ok).then(|| {
        format!(
            "Invalid value: {name:?}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric \
             characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', \
             regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        )
    })
}

/// Checks the namespace in the body against the path, filling it in when empty.
pub(crate) fn check_namespace(route: &Route, obj: &mut Map<String, Value>) -> Result<(), ApiError> {
    let meta = meta_mut(obj);
    if route.def.namespaced {
        let ns = route.namespace.clone().unwrap_or_default();
        match meta.get("namespace").and_then(Value::as_str) {
            Some(body_ns) if !body_ns.is_empty() && body_ns != ns => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => {
                meta.insert("namespace".into(), Value::String(ns));
            }
        }
    } else {
        meta.remove("namespace");
    }
    Ok(())
}

/// `ValidateDryRun`: every `dryRun` value must be `All` (422 on the request's options kind,
/// `CreateOptions`, `DeleteOptions`, ...). Returns whether the request is a dry run.
pub(crate) fn dry_run(values: &[&str], options_kind: &str) -> Result<bool, ApiError> {
    if values.iter().all(|v| *v == "All") {
        return Ok(!values.is_empty());
    }
    let listed = serde_json::to_string(values).unwrap_or_default();
    Err(ApiError::invalid(
        "meta.k8s.io",
        options_kind,
        "",
        &[(
            "FieldValueNotSupported",
            "dryRun",
            format!("Unsupported value: {listed}: supported values: \"All\""),
        )],
    ))
}
