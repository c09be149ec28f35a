//! The write verbs: create, update, patch (JSON, merge and strategic merge), delete and
//! deletecollection, with finalizers, generation, the status subresource and dry runs.

use http::Response;
use serde_json::{Map, Value, json};

use crate::request::{Query, Route};
use crate::resources::ResourceDef;
use crate::response::{ResBody, error_response, json_response, list_body, object_response, respond};
use crate::state::Shared;
use crate::status::ApiError;
use crate::store::Store;
use crate::util::{new_uid, random_suffix, rfc3339_now};
use crate::validation::{
    check_meta_types, check_namespace, decode_body, meta_mut, meta_str, name_errors, selectors,
};

/// Releases the store, then wakes watches up to `rv`.
fn commit(shared: &Shared, store: parking_lot::MutexGuard<'_, Store>, rv: u64) {
    drop(store);
    shared.notify(rv);
}

pub(crate) fn create(
    shared: &Shared,
    route: &Route,
    body: &[u8],
    dry_run: bool,
) -> Result<Response<ResBody>, ApiError> {
    if route.name.is_some() {
        return Err(ApiError::method_not_allowed());
    }
    if route.def.namespaced && route.namespace.is_none() {
        return Err(ApiError::path_not_found());
    }
    let mut obj = decode_body(&route.def, body)?;
    check_namespace(route, &mut obj)?;
    let meta = meta_mut(&mut obj);
    let mut name = meta.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
    if name.is_empty()
        && let Some(prefix) = meta.get("generateName").and_then(Value::as_str).filter(|p| !p.is_empty())
    {
        name = format!("{prefix}{}", random_suffix());
        meta.insert("name".into(), Value::String(name.clone()));
    }
    if name.is_empty() {
        return Err(ApiError::invalid(
            &route.def.group,
            &route.def.kind,
            "",
            &[(
                "FieldValueRequired",
                "metadata.name",
                "Required value: name or generateName is required".into(),
            )],
        ));
    }
    if let Some(why) = name_errors(&name) {
        return Err(ApiError::invalid(
            &route.def.group,
            &route.def.kind,
            &name,
            &[("FieldValueInvalid", "metadata.name", why)],
        ));
    }
    meta.insert("uid".into(), Value::String(new_uid()));
    meta.insert("creationTimestamp".into(), Value::String(rfc3339_now()));
    meta.remove("resourceVersion");
    meta.remove("deletionTimestamp");
    meta.remove("deletionGracePeriodSeconds");
    if route.def.has_generation {
        meta.insert("generation".into(), Value::from(1));
    } else {
        meta.remove("generation");
    }
    let ns = meta.get("namespace").and_then(Value::as_str).unwrap_or_default().to_string();
    if route.def.status_subresource {
        // The registries' PrepareForCreate: status is not the client's to set.
        obj.remove("status");
        match route.def.resource.as_str() {
            "pods" if route.def.group.is_empty() => {
                obj.insert("status".into(), json!({"phase": "Pending"}));
            }
            "namespaces" if route.def.group.is_empty() => {
                obj.insert("status".into(), json!({"phase": "Active"}));
            }
            _ => {}
        }
    }
    if route.def.is_crd() {
        crate::crd::prepare_create(&name, &mut obj)?;
    }
    if route.def.is_lease() {
        crate::lease::prepare_create(&mut obj);
        crate::lease::validate(&route.def, &name, &obj)?;
    }
    let mut store = shared.store.lock();
    if !store.resources[route.res].served {
        // A CRD deleted since this request was routed.
        return Err(ApiError::path_not_found());
    }
    if shared.strict_namespaces && route.def.namespaced {
        let namespaces = store.lookup("", "v1", "namespaces");
        if namespaces.is_some_and(|n| store.get(n, &(String::new(), ns.clone())).is_none()) {
            let def = namespaces.map(|n| store.resources[n].def.clone()).unwrap_or_else(|| route.def.clone());
            return Err(ApiError::not_found(&def, &ns));
        }
    }
    if store.get(route.res, &(ns, name.clone())).is_some() {
        return Err(ApiError::already_exists(&route.def, &name));
    }
    if dry_run {
        return Ok(json_response(201, &Value::Object(obj)));
    }
    let stored = store.put(route.res, Value::Object(obj));
    if route.def.is_crd() {
        crate::crd::sync(&mut store, route.res, &stored.value(), None);
    }
    let rv = store.rv;
    commit(shared, store, rv);
    Ok(object_response(201, &stored))
}

/// Server-owned fields carried over from the stored object, generation bumped on spec changes,
/// and a no-op write detected. Returns `None` when nothing changed.
fn finish_update(route: &Route, old: &Value, mut new: Map<String, Value>) -> Option<Value> {
    let def = &route.def;
    if route.status {
        // A status write changes only `.status` (the CRD status strategy's PrepareForUpdate).
        let mut kept = old.as_object().cloned().unwrap_or_default();
        match new.remove("status") {
            Some(s) => kept.insert("status".into(), s),
            None => kept.remove("status"),
        };
        new = kept;
    } else if def.status_subresource {
        // With a status subresource, writes to the object keep the stored status.
        match old.get("status") {
            Some(s) => new.insert("status".into(), s.clone()),
            None => new.remove("status"),
        };
    }
    let old_meta = &old["metadata"];
    let meta = meta_mut(&mut new);
    for field in ["uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"]
    {
        match old_meta.get(field) {
            Some(v) => meta.insert(field.into(), v.clone()),
            None => meta.remove(field),
        };
    }
    meta.insert("resourceVersion".into(), old_meta["resourceVersion"].clone());
    let new = Value::Object(new);
    if &new == old {
        return None;
    }
    let mut new = new;
    if def.has_generation {
        let spec_changed = new
            .as_object()
            .into_iter()
            .flatten()
            .chain(old.as_object().into_iter().flatten())
            .any(|(k, _)| k != "metadata" && k != "status" && new.get(k) != old.get(k));
        if spec_changed {
            let g = old_meta["generation"].as_i64().unwrap_or(0) + 1;
            new["metadata"]["generation"] = Value::from(g);
        }
    }
    Some(new)
}

/// Stores an updated object, finishing a pending deletion once its finalizers are gone.
fn store_update(
    shared: &Shared,
    mut store: parking_lot::MutexGuard<'_, Store>,
    route: &Route,
    old: &Value,
    new: Value,
) -> Response<ResBody> {
    let finalizers_left = new["metadata"]["finalizers"].as_array().is_some_and(|f| !f.is_empty());
    if new["metadata"].get("deletionTimestamp").is_some() && !finalizers_left {
        let key = route.key();
        if route.def.is_crd() {
            crate::crd::remove(&mut store, old);
        }
        store.put(route.res, new);
        let last = store.remove(route.res, &key);
        let rv = store.rv;
        commit(shared, store, rv);
        return match last {
            Some(o) => object_response(200, &o),
            None => error_response(&ApiError::not_found(&route.def, &key.1)),
        };
    }
    let stored = store.put(route.res, new);
    if route.def.is_crd() && !route.status {
        crate::crd::sync(&mut store, route.res, &stored.value(), Some(old));
    }
    let rv = store.rv;
    commit(shared, store, rv);
    object_response(200, &stored)
}

pub(crate) fn update(
    shared: &Shared,
    route: &Route,
    body: &[u8],
    dry_run: bool,
) -> Result<Response<ResBody>, ApiError> {
    let name = route.name.clone().unwrap_or_default();
    let mut obj = decode_body(&route.def, body)?;
    let body_name = meta_str(&obj, "name").to_string();
    if body_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    check_namespace(route, &mut obj)?;
    let body_rv = meta_str(&obj, "resourceVersion").to_string();
    let store = shared.store.lock();
    let Some(old) = store.get(route.res, &route.key()) else {
        if route.def.allow_create_on_update && !route.status {
            // The generic registry's Update with `AllowCreateOnUpdate`: a PUT of a missing object
            // creates it (201), whatever resourceVersion the body carries.
            drop(store);
            let create_route = Route {
                res: route.res,
                def: route.def.clone(),
                namespace: route.namespace.clone(),
                name: None,
                status: false,
            };
            return create(shared, &create_route, body, dry_run);
        }
        return Err(ApiError::not_found(&route.def, &name));
    };
    if body_rv.is_empty() {
        if !route.def.allow_unconditional_update {
            // The generic registry names the resource where the kind would be
            // (`schema.GroupKind{Group: qualifiedResource.Group, Kind: qualifiedResource.Resource}`):
            // `leases.coordination.k8s.io "x" is invalid: ...`.
            return Err(ApiError::invalid(
                &route.def.group,
                &route.def.resource,
                &name,
                &[(
                    "FieldValueInvalid",
                    "metadata.resourceVersion",
                    "Invalid value: 0: must be specified for an update".into(),
                )],
            ));
        }
    } else if body_rv != old.rv.to_string() {
        return Err(ApiError::conflict(&route.def, &name, ApiError::MODIFIED));
    }
    let old_value = old.value();
    if route.def.is_crd() && !route.status {
        crate::crd::default(&mut obj);
    }
    if route.def.is_lease() {
        crate::lease::prepare_update(&mut obj, &old_value);
        crate::lease::validate(&route.def, &name, &obj)?;
    }
    let Some(new) = finish_update(route, &old_value, obj) else {
        return Ok(object_response(200, &old));
    };
    if route.def.is_crd() && !route.status {
        crate::crd::validate_update(&old_value, &new)?;
    }
    if dry_run {
        return Ok(json_response(200, &new));
    }
    Ok(store_update(shared, store, route, &old_value, new))
}

pub(crate) fn patch(
    shared: &Shared,
    route: &Route,
    body: &[u8],
    content_type: &str,
    dry_run: bool,
) -> Result<Response<ResBody>, ApiError> {
    let media = content_type.split(';').next().unwrap_or_default().trim();
    let json_patch = media == "application/json-patch+json";
    if !json_patch
        && media != "application/merge-patch+json"
        && media != "application/strategic-merge-patch+json"
    {
        return Err(ApiError::unsupported_patch());
    }
    let name = route.name.clone().unwrap_or_default();
    let patch: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
    if json_patch && !patch.is_array() {
        return Err(ApiError::bad_request(
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch",
        ));
    }
    if !json_patch && !patch.is_object() {
        return Err(ApiError::bad_request("error decoding patch: the patch is not a JSON object"));
    }
    let store = shared.store.lock();
    let old = store.get(route.res, &route.key()).ok_or_else(|| ApiError::not_found(&route.def, &name))?;
    let old_value = old.value();
    let mut patched = old_value.clone();
    if json_patch {
        crate::jsonpatch::apply(&mut patched, &patch).map_err(|e| ApiError::new(422, "Invalid", e, None))?;
    } else {
        // RFC 7386 JSON merge patch; strategic merge patch is treated as one (see the crate docs).
        json_patch::merge(&mut patched, &patch);
    }
    let Value::Object(mut obj) = patched else {
        return Err(ApiError::bad_request("error decoding patch: the patched object is not a JSON object"));
    };
    match obj.get("metadata") {
        Some(Value::Object(meta)) => check_meta_types(&route.def, meta)?,
        _ => return Err(ApiError::bad_request("error decoding patch: metadata must be an object")),
    }
    if obj.get("apiVersion") != old_value.get("apiVersion") || obj.get("kind") != old_value.get("kind") {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({}) does not match the expected API version ({})",
            obj.get("apiVersion").and_then(Value::as_str).unwrap_or_default(),
            route.def.api_version()
        )));
    }
    if meta_str(&obj, "name") != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({}) does not match the name on the URL ({name})",
            meta_str(&obj, "name")
        )));
    }
    check_namespace(route, &mut obj)?;
    // A patch that sets a resourceVersion (to anything but the current one) is a precondition.
    let patched_rv = meta_str(&obj, "resourceVersion");
    if !patched_rv.is_empty() && patched_rv != old.rv.to_string() {
        return Err(ApiError::conflict(&route.def, &name, ApiError::MODIFIED));
    }
    if route.def.is_crd() && !route.status {
        crate::crd::default(&mut obj);
    }
    if route.def.is_lease() {
        crate::lease::prepare_update(&mut obj, &old_value);
        crate::lease::validate(&route.def, &name, &obj)?;
    }
    let Some(new) = finish_update(route, &old_value, obj) else {
        return Ok(object_response(200, &old));
    };
    if route.def.is_crd() && !route.status {
        crate::crd::validate_update(&old_value, &new)?;
    }
    if dry_run {
        return Ok(json_response(200, &new));
    }
    Ok(store_update(shared, store, route, &old_value, new))
}

fn success_status(def: &ResourceDef, name: &str, uid: &Value) -> Value {
    let mut details = json!({"name": name, "kind": def.resource, "uid": uid});
    if !def.group.is_empty() {
        details["group"] = json!(def.group);
    }
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})
}

pub(crate) fn delete(
    shared: &Shared,
    route: &Route,
    body: &[u8],
    dry_run: bool,
) -> Result<Response<ResBody>, ApiError> {
    let name = route.name.clone().unwrap_or_default();
    let opts: Value = if body.iter().all(u8::is_ascii_whitespace) {
        Value::Null
    } else {
        serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!(
                "the object provided is unrecognized (must be of type DeleteOptions): {e}"
            ))
        })?
    };
    let mut store = shared.store.lock();
    let key = route.key();
    let old = store.get(route.res, &key).ok_or_else(|| ApiError::not_found(&route.def, &name))?;
    let mut old_value = old.value();
    let pre = &opts["preconditions"];
    if let Some(uid) = pre["uid"].as_str() {
        let actual = old_value["metadata"]["uid"].as_str().unwrap_or_default();
        if uid != actual {
            return Err(ApiError::conflict(
                &route.def,
                &name,
                &format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}"),
            ));
        }
    }
    if let Some(rv) = pre["resourceVersion"].as_str()
        && rv != old.rv.to_string()
    {
        return Err(ApiError::conflict(
            &route.def,
            &name,
            &format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                old.rv
            ),
        ));
    }
    if dry_run {
        return Ok(object_response(200, &old));
    }
    let has_finalizers = old_value["metadata"]["finalizers"].as_array().is_some_and(|f| !f.is_empty());
    if has_finalizers {
        // Graceful: mark for deletion and wait for the finalizers to be removed by updates.
        if old_value["metadata"].get("deletionTimestamp").is_none() {
            old_value["metadata"]["deletionTimestamp"] = Value::String(rfc3339_now());
            old_value["metadata"]["deletionGracePeriodSeconds"] = Value::from(0);
            let stored = store.put(route.res, old_value);
            commit(shared, store, stored.rv);
            return Ok(object_response(200, &stored));
        }
        return Ok(object_response(200, &old));
    }
    if route.def.is_crd() {
        // The CRD finalizer's work: the custom objects go first, then the CRD.
        crate::crd::remove(&mut store, &old_value);
    }
    let last = store.remove(route.res, &key).ok_or_else(|| ApiError::not_found(&route.def, &name))?;
    commit(shared, store, last.rv);
    if route.def.delete_returns_object {
        Ok(object_response(200, &last))
    } else {
        Ok(json_response(200, &success_status(&route.def, &name, &old_value["metadata"]["uid"])))
    }
}

pub(crate) fn delete_collection(
    shared: &Shared,
    route: &Route,
    query: &Query,
    dry_run: bool,
) -> Result<Response<ResBody>, ApiError> {
    let (labels, fields) = selectors(query, &route.def)?;
    let mut store = shared.store.lock();
    let current = store.rv;
    let items = store
        .list_at(route.res, route.namespace.as_deref(), None, current)
        .map_err(|_| ApiError::expired("The resourceVersion for the provided list is too old."))?;
    let mut deleted = Vec::new();
    for o in items.iter().filter(|o| labels.matches(&o.labels) && fields.matches(o)) {
        if dry_run {
            deleted.push(o.clone());
            continue;
        }
        if route.def.is_crd() {
            crate::crd::remove(&mut store, &o.value());
        }
        if let Some(last) = store.remove(route.res, &(o.namespace.clone(), o.name.clone())) {
            deleted.push(last);
        }
    }
    let rv = store.rv;
    commit(shared, store, rv);
    Ok(respond(200, list_body(&route.def, &format!("{{\"resourceVersion\":\"{rv}\"}}"), &deleted), None))
}
