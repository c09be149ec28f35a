//! The write verbs: create, update, patch (JSON, merge and strategic merge), delete and
//! deletecollection, with finalizers, generation, the status subresource and dry runs.

use http::Response;
use serde_json::{Map, Value, json};

use crate::gc::{DeleteOptions, Deleted};
use crate::managed::Write;
use crate::request::{Query, Route};
use crate::resources::ResourceDef;
use crate::response::{ResBody, json_response, list_body, object_response, respond};
use crate::schema::Node;
use crate::state::Shared;
use crate::status::ApiError;
use crate::store::Store;
use crate::util::{new_uid, random_suffix, rfc3339_now};
use crate::validation::{
    check_meta_types, check_namespace, decode_body, meta_mut, meta_str, name_errors, selectors,
};

/// Who writes, as the field manager records it, and how unknown fields are treated.
#[derive(Debug, Clone)]
pub(crate) struct Writer {
    /// `fieldManager`, else the User-Agent's product (`managerOrUserAgent`).
    pub(crate) manager: String,
    /// The `fieldManager` query parameter, if given.
    pub(crate) field_manager: Option<String>,
    /// `fieldValidation` as given (empty: kube-apiserver's default, `Warn`).
    pub(crate) field_validation: String,
    /// Warnings for the response's `Warning` headers (unknown fields under `Warn`).
    pub(crate) warnings: std::cell::RefCell<Vec<String>>,
}

impl Writer {
    /// The writer of a request.
    pub(crate) fn new(query: &Query, user_agent: &str) -> Self {
        let field_manager = query.get("fieldManager").filter(|m| !m.is_empty()).map(str::to_string);
        let manager =
            field_manager.clone().unwrap_or_else(|| crate::managed::manager_from_user_agent(user_agent));
        let field_validation = query.get("fieldValidation").unwrap_or_default().to_string();
        Self { manager, field_manager, field_validation, warnings: Default::default() }
    }

    /// `ValidateFieldValidation` for a request whose options are `kind` (`CreateOptions`, ...).
    pub(crate) fn check_field_validation(&self, kind: &str) -> Result<(), ApiError> {
        if matches!(self.field_validation.as_str(), "" | "Ignore" | "Strict" | "Warn") {
            return Ok(());
        }
        Err(ApiError::invalid(
            "meta.k8s.io",
            kind,
            "",
            &[(
                "FieldValueNotSupported",
                "fieldValidation",
                format!(
                    "Unsupported value: {:?}: supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"",
                    self.field_validation
                ),
            )],
        ))
    }

    /// Drops the fields the kind's schema does not have, as kube-apiserver's decoding does (a
    /// built-in's Go type, a custom resource's structural schema): a 400 `strict decoding
    /// error` with `fieldValidation=Strict`, a warning by default (`Warn`), nothing with
    /// `Ignore`. A resource without a schema keeps everything.
    fn prune_unknown(
        &self,
        def: &ResourceDef,
        schema: &SchemaSource,
        obj: &mut Value,
    ) -> Result<(), ApiError> {
        let node = match schema {
            SchemaSource::Builtin(s) => Node::of(s),
            SchemaSource::Custom(s) => Node::of(s),
            SchemaSource::Missing => return Ok(()),
        };
        let mut unknown = Vec::new();
        crate::schema::prune_unknown(obj, node, true, "", &mut unknown);
        if unknown.is_empty() {
            return Ok(());
        }
        let errors: Vec<String> = unknown.iter().map(|p| format!("unknown field {p:?}")).collect();
        match self.field_validation.as_str() {
            // transformDecodeError wraps the decoder's error.
            "Strict" => Err(ApiError::bad_request(format!(
                "{kind} in version {:?} cannot be handled as a {kind}: strict decoding error: {}",
                def.version,
                errors.join(", "),
                kind = def.kind
            ))),
            "Ignore" => Ok(()),
            _ => {
                self.warnings.borrow_mut().extend(errors);
                Ok(())
            }
        }
    }
}

/// Where a resource's schema comes from: the captured built-ins, the CRD that defines it, or
/// nowhere (a resource added with `TestServer::register`: deduced, like a CRD that preserves
/// unknown fields).
enum SchemaSource {
    Builtin(&'static Value),
    Custom(Value),
    Missing,
}

impl SchemaSource {
    fn of(store: &Store, def: &ResourceDef) -> Self {
        if let Some(s) = crate::schema::builtin(&def.group, &def.version, &def.kind) {
            return SchemaSource::Builtin(s);
        }
        let crd = store
            .lookup(crate::resources::CRD_GROUP, "v1", "customresourcedefinitions")
            .and_then(|crds| store.get(crds, &(String::new(), def.qualified_resource())));
        let schema = crd.and_then(|crd| {
            let v = crd.value();
            v["spec"]["versions"]
                .as_array()?
                .iter()
                .find(|ver| ver["name"] == def.version.as_str())
                .map(|ver| ver["schema"]["openAPIV3Schema"].clone())
                .filter(Value::is_object)
        });
        schema.map_or(SchemaSource::Missing, SchemaSource::Custom)
    }

    /// Drops what a built-in object loses in kube-apiserver's decoding (`schema::omit_empty`).
    fn omit_empty(&self, obj: &mut Value) {
        if let SchemaSource::Builtin(s) = self {
            crate::schema::omit_empty(obj, Node::of(s), true);
        }
    }

    fn node(&self) -> Node<'_> {
        match self {
            SchemaSource::Builtin(s) => Node::of(s),
            SchemaSource::Custom(s) => Node::of(s),
            SchemaSource::Missing => Node::DEDUCED,
        }
    }
}

/// What the field manager needs for a write through `route`.
fn tracking<'a>(route: &Route, schema: &'a SchemaSource, writer: &Writer) -> Write<'a> {
    Write {
        node: schema.node(),
        manager: writer.manager.clone(),
        api_version: route.def.api_version(),
        subresource: if route.status { "status".into() } else { String::new() },
        has_status: route.def.status_subresource,
        now: rfc3339_now(),
    }
}

/// The field manager's `Update` on an object about to replace `old`.
fn track(
    store: &Store,
    route: &Route,
    writer: &Writer,
    old: &Value,
    new: Map<String, Value>,
) -> Map<String, Value> {
    let schema = SchemaSource::of(store, &route.def);
    let mut new = Value::Object(new);
    schema.omit_empty(&mut new);
    crate::managed::track_update(&tracking(route, &schema, writer), Some(old), &mut new);
    match new {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// Lets the garbage collector act on the writes, releases the store, then wakes watches.
fn commit(shared: &Shared, mut store: parking_lot::MutexGuard<'_, Store>) {
    crate::gc::collect(&mut store);
    let rv = store.rv;
    drop(store);
    shared.notify(rv);
}

pub(crate) fn create(
    shared: &Shared,
    route: &Route,
    body: &[u8],
    dry_run: bool,
    writer: &Writer,
) -> Result<Response<ResBody>, ApiError> {
    create_inner(shared, route, body, dry_run, writer, false)
}

/// A create; `applied`: the body is the result of an apply, its managed fields already set.
fn create_inner(
    shared: &Shared,
    route: &Route,
    body: &[u8],
    dry_run: bool,
    writer: &Writer,
    applied: bool,
) -> Result<Response<ResBody>, ApiError> {
    if route.name.is_some() && !applied {
        return Err(ApiError::method_not_allowed());
    }
    if route.def.namespaced && route.namespace.is_none() {
        return Err(ApiError::path_not_found());
    }
    writer.check_field_validation("CreateOptions")?;
    let mut obj = decode_body(&route.def, body)?;
    if !applied {
        let mut v = Value::Object(obj);
        let schema = SchemaSource::of(&shared.store.lock(), &route.def);
        writer.prune_unknown(&route.def, &schema, &mut v)?;
        obj = match v {
            Value::Object(m) => m,
            _ => Map::new(),
        };
    }
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
        crate::lease::prepare_create(&mut obj, shared.coordinated_leader_election);
        crate::lease::validate(&route.def, &name, &obj)?;
    }
    if route.def.is_lease_candidate() {
        crate::coordinator::validate(&route.def, &name, &obj, None)?;
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
    let mut obj = Value::Object(obj);
    let schema = SchemaSource::of(&store, &route.def);
    schema.omit_empty(&mut obj);
    if !applied {
        crate::managed::track_update(&tracking(route, &schema, writer), None, &mut obj);
    }
    if dry_run {
        return Ok(json_response(201, &obj));
    }
    let stored = store.put(route.res, obj);
    if route.def.is_crd() {
        crate::crd::sync(&mut store, route.res, &stored.value(), None);
    }
    commit(shared, store);
    Ok(object_response(201, &stored))
}

/// Server-owned fields carried over from the stored object, generation bumped on spec changes,
/// and a no-op write detected. Returns `None` when nothing changed.
fn finish_update(route: &Route, old: &Value, mut new: Map<String, Value>) -> Option<Value> {
    let def = &route.def;
    if route.status {
        // A status write changes only `.status`, and the managed fields that track it (the
        // CRD status strategy's PrepareForUpdate).
        let mut kept = old.as_object().cloned().unwrap_or_default();
        match new.remove("status") {
            Some(s) => kept.insert("status".into(), s),
            None => kept.remove("status"),
        };
        let managed = meta_mut(&mut new).remove("managedFields");
        let meta = meta_mut(&mut kept);
        match managed {
            Some(m) => meta.insert("managedFields".into(), m),
            None => meta.remove("managedFields"),
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

/// Stores an updated object; one that empties the finalizers of an object being deleted
/// deletes it (one DELETED event), and the response is then the object as updated.
fn store_update(
    shared: &Shared,
    mut store: parking_lot::MutexGuard<'_, Store>,
    route: &Route,
    old: &Value,
    new: Value,
) -> Response<ResBody> {
    let key = route.key();
    let stored = crate::gc::update_or_finish(&mut store, route.res, &route.def, &key, new.clone());
    if let Some(stored) = &stored
        && route.def.is_crd()
        && !route.status
    {
        crate::crd::sync(&mut store, route.res, &stored.value(), Some(old));
    }
    commit(shared, store);
    match stored {
        Some(o) => object_response(200, &o),
        // `deleteWithoutFinalizers`: "clients are expecting an updated object if a PUT
        // succeeded", so the object as updated (at its previous resourceVersion).
        None => json_response(200, &new),
    }
}

pub(crate) fn update(
    shared: &Shared,
    route: &Route,
    body: &[u8],
    dry_run: bool,
    writer: &Writer,
) -> Result<Response<ResBody>, ApiError> {
    let name = route.name.clone().unwrap_or_default();
    writer.check_field_validation("UpdateOptions")?;
    let mut obj = decode_body(&route.def, body)?;
    let mut v = Value::Object(obj);
    let schema = SchemaSource::of(&shared.store.lock(), &route.def);
    writer.prune_unknown(&route.def, &schema, &mut v)?;
    obj = match v {
        Value::Object(m) => m,
        _ => Map::new(),
    };
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
            return create(shared, &create_route, body, dry_run, writer);
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
    prepare_update(shared, route, &name, &mut obj, &old_value)?;
    let obj = track(&store, route, writer, &old_value, obj);
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

/// RFC 6902 JSON patch.
const JSON_PATCH: &str = "application/json-patch+json";
/// RFC 7386 JSON merge patch.
const MERGE_PATCH: &str = "application/merge-patch+json";
/// Strategic merge patch (built-in types only).
const STRATEGIC_MERGE_PATCH: &str = "application/strategic-merge-patch+json";
/// Server-side apply.
pub(crate) const APPLY_PATCH: &str = "application/apply-patch+yaml";

/// PatchResource's first check: the patch types of the resource, in kube-apiserver's order
/// (custom resources have no strategic merge patch), else 415: listing them for a custom
/// resource, go-restful's plain "415: Unsupported Media Type" for a built-in. The media type is
/// compared as sent, up to its first `;` (so `APPLICATION/JSON-PATCH+JSON` is refused, as
/// upstream).
pub(crate) fn check_patch_type(def: &ResourceDef, content_type: &str) -> Result<(), ApiError> {
    let media = content_type.split(';').next().unwrap_or_default();
    let supported: &[&str] = if def.is_custom() {
        &[JSON_PATCH, MERGE_PATCH, APPLY_PATCH]
    } else {
        &[JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH, APPLY_PATCH]
    };
    if supported.contains(&media) {
        Ok(())
    } else if def.is_custom() {
        // apiextensions-apiserver's handler: PatchResource's own 415.
        Err(crate::media::unsupported_media_type(supported))
    } else {
        // A built-in route consumes only its patch types; go-restful refuses the rest.
        Err(crate::media::restful_unsupported_media_type())
    }
}

pub(crate) fn patch(
    shared: &Shared,
    route: &Route,
    body: &[u8],
    content_type: &str,
    query: &Query,
    writer: &Writer,
) -> Result<Response<ResBody>, ApiError> {
    let dry_run = crate::validation::dry_run(&query.all("dryRun"), "PatchOptions")?;
    let media = content_type.split(';').next().unwrap_or_default().trim();
    let json_patch = media == JSON_PATCH;
    // ValidatePatchOptions.
    let force = query.flag("force")?;
    writer.check_field_validation("PatchOptions")?;
    if media == APPLY_PATCH && writer.field_manager.is_none() {
        return Err(ApiError::invalid(
            "meta.k8s.io",
            "PatchOptions",
            "",
            &[("FieldValueRequired", "fieldManager", "Required value: is required for apply patch".into())],
        ));
    }
    if media != APPLY_PATCH && force.is_some() {
        return Err(ApiError::invalid(
            "meta.k8s.io",
            "PatchOptions",
            "",
            &[("FieldValueForbidden", "force", "Forbidden: may not be specified for non-apply patch".into())],
        ));
    }
    if media == APPLY_PATCH {
        return apply(shared, route, body, force.unwrap_or(false), dry_run, writer);
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
    if media == STRATEGIC_MERGE_PATCH
        && let Some(at) = crate::schema::strategic_merge_needed(
            &patch,
            SchemaSource::of(&store, &route.def).node(),
            "",
            true,
        )
    {
        // This server applies a strategic merge patch as a JSON merge patch, which is the
        // same thing unless the patch merges a list by key or uses a directive: say so
        // rather than replace the list.
        return Err(ApiError::not_supported(&format!(
            "a strategic merge patch that merges a list or uses a directive (at {at})"
        )));
    }
    let old = store.get(route.res, &route.key()).ok_or_else(|| ApiError::not_found(&route.def, &name))?;
    let old_value = old.value();
    let mut patched = old_value.clone();
    if json_patch {
        crate::jsonpatch::apply(&mut patched, &patch).map_err(|e| ApiError::new(422, "Invalid", e, None))?;
    } else {
        // RFC 7386 JSON merge patch; strategic merge patch is treated as one (see the crate docs).
        json_patch::merge(&mut patched, &patch);
    }
    writer.prune_unknown(&route.def, &SchemaSource::of(&store, &route.def), &mut patched)?;
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
    prepare_update(shared, route, &name, &mut obj, &old_value)?;
    let obj = track(&store, route, writer, &old_value, obj);
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

/// Server-side apply (`applyPatcher`): the applied configuration merged into the object with
/// field ownership; an object that does not exist is created from it (201).
fn apply(
    shared: &Shared,
    route: &Route,
    body: &[u8],
    force: bool,
    dry_run: bool,
    writer: &Writer,
) -> Result<Response<ResBody>, ApiError> {
    let name = route.name.clone().unwrap_or_default();
    // The body is YAML; every JSON document is YAML, and kube, client-go and kubectl send JSON.
    let config: Value = serde_json::from_slice(body)
        .map_err(|_| ApiError::not_supported("an apply-patch+yaml body that is not JSON (YAML syntax)"))?;
    if !config.is_object() {
        return Err(ApiError::bad_request("error decoding YAML: the applied configuration is not an object"));
    }
    // VersionCheckManager, then the structured merge manager's own checks.
    let (api_version, kind) =
        (config["apiVersion"].as_str().unwrap_or_default(), config["kind"].as_str().unwrap_or_default());
    if api_version != route.def.api_version() || kind != route.def.kind {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        return Err(ApiError::bad_request(format!("invalid object type: {group}/{version}, Kind={kind}")));
    }
    if config["metadata"].get("managedFields").is_some_and(|m| !m.is_null()) {
        return Err(ApiError::bad_request("metadata.managedFields must be nil"));
    }
    if let Some(meta) = config.get("metadata").filter(|m| !m.is_null()) {
        match meta.as_object() {
            Some(m) => check_meta_types(&route.def, m)?,
            None => return Err(ApiError::bad_request("error decoding YAML: metadata must be an object")),
        }
    }
    let body_name = config["metadata"]["name"].as_str().unwrap_or_default();
    if body_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    let store = shared.store.lock();
    let schema = SchemaSource::of(&store, &route.def);
    if matches!(schema, SchemaSource::Missing) && !route.def.is_custom() {
        return Err(ApiError::not_supported(&format!(
            "server-side apply of {} (kcache-testserver has no schema for it)",
            route.def.qualified_resource()
        )));
    }
    let w = tracking(route, &schema, writer);
    let old = store.get(route.res, &route.key());
    let live = match &old {
        Some(o) => o.value(),
        None => {
            if route.status {
                return Err(ApiError::not_found(&route.def, &name));
            }
            let mut meta = json!({"name": name});
            if let Some(ns) = &route.namespace {
                meta["namespace"] = json!(ns);
            }
            json!({"apiVersion": route.def.api_version(), "kind": route.def.kind, "metadata": meta})
        }
    };
    let applied = match crate::managed::apply(&w, &live, &config, force) {
        Ok(v) => v,
        Err(crate::managed::ApplyError::Conflict(e)) => return Err(e),
        Err(crate::managed::ApplyError::Type(e)) => {
            let ns = route.namespace.clone().unwrap_or_default();
            return Err(ApiError::new(
                500,
                "",
                format!(
                    "failed to create typed patch object ({ns}/{name}; {}/{}, Kind={}): {}",
                    route.def.group, route.def.version, route.def.kind, e.0
                ),
                None,
            ));
        }
    };
    let mut applied = applied;
    schema.omit_empty(&mut applied);
    let Value::Object(mut obj) = applied else {
        return Err(ApiError::bad_request("the applied object is not an object"));
    };
    check_namespace(route, &mut obj)?;
    let Some(old) = old else {
        drop(store);
        // Apply on a missing object creates it through the create path (name validation, uid,
        // generation, the registries' PrepareForCreate), with the applier's managed fields.
        let body = serde_json::to_vec(&Value::Object(obj)).unwrap_or_default();
        return create_inner(shared, route, &body, dry_run, writer, true);
    };
    let old_value = old.value();
    prepare_update(shared, route, &name, &mut obj, &old_value)?;
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
    query: &Query,
) -> Result<Response<ResBody>, ApiError> {
    let name = route.name.clone().unwrap_or_default();
    let opts = DeleteOptions::parse(body, query)?;
    let mut store = shared.store.lock();
    let deleted = crate::gc::delete(&mut store, route.res, &route.def, &route.key(), &opts)?;
    commit(shared, store);
    // DeleteResource answers 202 for an object not deleted at once only when the client asked
    // for `orphanDependents: false` (kept for old clients); otherwise 200.
    let marked_code = if opts.orphan_dependents == Some(false) { 202 } else { 200 };
    Ok(match deleted {
        Deleted::Marked(o) => object_response(marked_code, &o),
        Deleted::DryRun { object, gone: false } => json_response(marked_code, &object),
        Deleted::Gone(_) | Deleted::DryRun { gone: true, .. } if !route.def.delete_returns_object => {
            let uid = match &deleted {
                Deleted::Gone(o) => o.value()["metadata"]["uid"].clone(),
                Deleted::DryRun { object, .. } => object["metadata"]["uid"].clone(),
                Deleted::Marked(_) => Value::Null,
            };
            json_response(200, &success_status(&route.def, &name, &uid))
        }
        Deleted::Gone(o) => object_response(200, &o),
        Deleted::DryRun { object, .. } => json_response(200, &object),
    })
}

pub(crate) fn delete_collection(
    shared: &Shared,
    route: &Route,
    query: &Query,
    body: &[u8],
) -> Result<Response<ResBody>, ApiError> {
    let opts = &DeleteOptions::parse(body, query)?;
    let dry_run = opts.dry_run;
    let (labels, fields) = selectors(query, &route.def)?;
    // DeleteCollection lists through Store.List, so the shard selector applies there too.
    let shard = crate::validation::shard_selector(shared, query)?;
    let mut store = shared.store.lock();
    let current = store.rv;
    let items = store
        .list_at(route.res, route.namespace.as_deref(), None, current)
        .map_err(|_| ApiError::expired("The resourceVersion for the provided list is too old."))?;
    let selected = |o: &&std::sync::Arc<crate::store::StoredObject>| {
        crate::validation::in_shard(shard.as_ref(), o) && labels.matches(&o.labels) && fields.matches(o)
    };
    // Store.DeleteCollection answers the list it deleted from: the objects as listed, at the
    // list's resourceVersion, not their states after the deletion (one a finalizer keeps has
    // no deletionTimestamp there).
    let listed: Vec<_> = items.iter().filter(selected).cloned().collect();
    if !dry_run {
        for o in &listed {
            // Each object is deleted as by DELETE with the request's options; one gone in
            // between is skipped (`IsNotFound`).
            let _ = crate::gc::delete(
                &mut store,
                route.res,
                &route.def,
                &(o.namespace.clone(), o.name.clone()),
                opts,
            );
        }
    }
    commit(shared, store);
    // The list Store.List returned, so a sharded one carries shardInfo.
    let meta =
        format!("{{\"resourceVersion\":\"{current}\"{}}}", crate::validation::shard_info(shard.as_ref()));
    Ok(respond(200, list_body(&route.def, &meta, &listed), None))
}

/// The registries' `PrepareForUpdate` and `ValidateUpdate` that update, patch and apply share:
/// a CRD's defaults, a Lease's strategy and validation, a LeaseCandidate's validation.
fn prepare_update(
    shared: &Shared,
    route: &Route,
    name: &str,
    obj: &mut Map<String, Value>,
    old_value: &Value,
) -> Result<(), ApiError> {
    if route.def.is_crd() && !route.status {
        crate::crd::default(obj);
    }
    if route.def.is_lease() {
        crate::lease::prepare_update(obj, old_value, shared.coordinated_leader_election);
        crate::lease::validate(&route.def, name, obj)?;
    }
    if route.def.is_lease_candidate() {
        crate::coordinator::validate(&route.def, name, obj, Some(old_value))?;
    }
    Ok(())
}
