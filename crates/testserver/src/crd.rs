//! CustomResourceDefinitions: the defaulting and validation of apiextensions-apiserver's CRD
//! strategy, and what its controllers do once a CRD is stored (the naming controller's
//! `acceptedNames` and `NamesAccepted`, the establishing controller's `Established`, the CRD
//! handler serving the resource, and the finalizer deleting every object when the CRD goes).
//!
//! kube-apiserver does the second half asynchronously, shortly after the write; here it happens
//! under the same lock as the write, as a second write (a MODIFIED event) right after it, so the
//! create response has no conditions (as upstream) but any later read sees them.

use serde_json::{Map, Value, json};

use crate::resources::ResourceDef;
use crate::status::ApiError;
use crate::store::Store;
use crate::util::rfc3339_now;

/// A field error: (cause type, field, body), as [`ApiError::invalid`] takes them.
type Cause = (&'static str, String, String);

fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    path.iter().fold(v, |v, k| &v[*k]).as_str().unwrap_or_default()
}

/// `SetDefaults_CustomResourceDefinition`: `names.singular`, `names.listKind` and the
/// conversion strategy.
pub(crate) fn default(obj: &mut Map<String, Value>) {
    let Some(Value::Object(spec)) = obj.get_mut("spec") else { return };
    if let Some(Value::Object(names)) = spec.get_mut("names") {
        let kind = names.get("kind").and_then(Value::as_str).unwrap_or_default().to_string();
        if names.get("singular").and_then(Value::as_str).is_none_or(str::is_empty) {
            names.insert("singular".into(), Value::String(kind.to_lowercase()));
        }
        if !kind.is_empty() && names.get("listKind").and_then(Value::as_str).is_none_or(str::is_empty) {
            names.insert("listKind".into(), Value::String(format!("{kind}List")));
        }
    }
    if !spec.get("conversion").is_some_and(Value::is_object) {
        spec.insert("conversion".into(), json!({"strategy": "None"}));
    }
}

/// `ValidateCustomResourceDefinition`, reduced to what decides how the resource is served: the
/// name, group, names, scope, exactly one storage version, and a schema for every version.
fn validate(name: &str, crd: &Value) -> Vec<Cause> {
    let mut errs: Vec<Cause> = Vec::new();
    let spec = &crd["spec"];
    let group = str_at(spec, &["group"]);
    let plural = str_at(spec, &["names", "plural"]);
    if name != format!("{plural}.{group}") {
        errs.push((
            "FieldValueInvalid",
            "metadata.name".into(),
            format!("Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    if group.is_empty() {
        errs.push(("FieldValueRequired", "spec.group".into(), "Required value".into()));
    } else if !group.contains('.') {
        errs.push((
            "FieldValueInvalid",
            "spec.group".into(),
            format!("Invalid value: {group:?}: should be a domain with at least one dot"),
        ));
    }
    for field in ["plural", "kind"] {
        if str_at(spec, &["names", field]).is_empty() {
            errs.push(("FieldValueRequired", format!("spec.names.{field}"), "Required value".into()));
        }
    }
    let scope = str_at(spec, &["scope"]);
    if scope != "Cluster" && scope != "Namespaced" {
        errs.push((
            "FieldValueNotSupported",
            "spec.scope".into(),
            format!("Unsupported value: {scope:?}: supported values: \"Cluster\", \"Namespaced\""),
        ));
    }
    let versions = spec["versions"].as_array().map(Vec::as_slice).unwrap_or_default();
    if versions.is_empty() {
        errs.push((
            "FieldValueRequired",
            "spec.versions".into(),
            "Required value: must have at least one version".into(),
        ));
    } else if versions.iter().filter(|v| v["storage"] == true).count() != 1 {
        let names: Vec<&str> = versions.iter().map(|v| str_at(v, &["name"])).collect();
        errs.push((
            "FieldValueInvalid",
            "spec.versions".into(),
            format!("Invalid value: {names:?}: must have exactly one version marked as storage version"),
        ));
    }
    for (i, v) in versions.iter().enumerate() {
        if str_at(v, &["name"]).is_empty() {
            errs.push(("FieldValueRequired", format!("spec.versions[{i}].name"), "Required value".into()));
        }
        if !v["schema"]["openAPIV3Schema"].is_object() {
            errs.push((
                "FieldValueRequired",
                format!("spec.versions[{i}].schema.openAPIV3Schema"),
                "Required value: schemas are required".into(),
            ));
        }
    }
    errs
}

fn invalid(name: &str, errs: &[Cause]) -> ApiError {
    let causes: Vec<(&str, &str, String)> =
        errs.iter().map(|(t, f, b)| (*t, f.as_str(), b.clone())).collect();
    ApiError::invalid(crate::resources::CRD_GROUP, "CustomResourceDefinition", name, &causes)
}

/// Defaults and validates a CRD being created, and sets the status the strategy's
/// `PrepareForCreate` leaves: `storedVersions` = the storage version, nothing accepted yet.
pub(crate) fn prepare_create(name: &str, obj: &mut Map<String, Value>) -> Result<(), ApiError> {
    default(obj);
    let crd = Value::Object(obj.clone());
    let errs = validate(name, &crd);
    if !errs.is_empty() {
        return Err(invalid(name, &errs));
    }
    let storage = storage_version(&crd).unwrap_or_default();
    obj.insert(
        "status".into(),
        json!({"acceptedNames": {"plural": "", "kind": ""}, "storedVersions": [storage]}),
    );
    Ok(())
}

/// Validates an update of a CRD (already defaulted): the rules of a create, plus the fields
/// that cannot change once the CRD is established.
pub(crate) fn validate_update(old: &Value, new: &Value) -> Result<(), ApiError> {
    let name = str_at(new, &["metadata", "name"]);
    let mut errs = validate(name, new);
    for field in ["group", "scope"] {
        let (was, now) = (str_at(&old["spec"], &[field]), str_at(&new["spec"], &[field]));
        if was != now {
            errs.push((
                "FieldValueInvalid",
                format!("spec.{field}"),
                format!("Invalid value: {now:?}: field is immutable"),
            ));
        }
    }
    if errs.is_empty() { Ok(()) } else { Err(invalid(name, &errs)) }
}

/// The version objects are stored in.
fn storage_version(crd: &Value) -> Option<String> {
    let versions = crd["spec"]["versions"].as_array()?;
    versions.iter().find(|v| v["storage"] == true).map(|v| str_at(v, &["name"]).to_string())
}

/// The resource a (valid) CRD serves: its storage version, or the first served version when
/// the storage version is not served. `None` for a CRD naming a built-in resource (such as
/// `roles.rbac.authorization.k8s.io`): kube-apiserver keeps serving its own registry there.
pub(crate) fn definition(crd: &Value) -> Option<ResourceDef> {
    let def = served_definition(crd)?;
    let builtin = ResourceDef::builtins().iter().any(|b| b.group == def.group && b.resource == def.resource);
    (!builtin).then_some(def)
}

fn served_definition(crd: &Value) -> Option<ResourceDef> {
    let spec = &crd["spec"];
    let versions = spec["versions"].as_array()?;
    let version = versions
        .iter()
        .find(|v| v["storage"] == true && v["served"] == true)
        .or_else(|| versions.iter().find(|v| v["served"] == true))?;
    let names = &spec["names"];
    let mut def = ResourceDef::new(
        str_at(spec, &["group"]),
        str_at(version, &["name"]),
        str_at(names, &["plural"]),
        str_at(names, &["kind"]),
        str_at(spec, &["scope"]) == "Namespaced",
    );
    def.status_subresource = version["subresources"]["status"].is_object();
    if let Some(s) = names["singular"].as_str().filter(|s| !s.is_empty()) {
        def.singular = s.to_string();
    }
    if let Some(l) = names["listKind"].as_str().filter(|l| !l.is_empty()) {
        def.list_kind = l.to_string();
    }
    def.short_names = names["shortNames"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default();
    Some(def)
}

/// What the controllers do after a CRD write: serve (or re-define) its resource, then record
/// `acceptedNames`, `NamesAccepted`, `Established` and `storedVersions` in its status with a
/// second write, unless they are already there. `old` is the CRD before an update.
pub(crate) fn sync(store: &mut Store, crds: usize, crd: &Value, old: Option<&Value>) {
    if let Some(def) = definition(crd) {
        let served = old.and_then(definition).and_then(|o| store.lookup(&o.group, &o.version, &o.resource));
        match served {
            Some(id) => store.redefine(id, def),
            None => {
                store.register(def);
            }
        }
    }
    let mut desired = crd.clone();
    let status = &mut desired["status"];
    if !status.is_object() {
        *status = json!({});
    }
    status["acceptedNames"] = crd["spec"]["names"].clone();
    let now = rfc3339_now();
    let mut conditions = status["conditions"].as_array().cloned().unwrap_or_default();
    for (ty, reason, message) in [
        ("NamesAccepted", "NoConflicts", "no conflicts found"),
        ("Established", "InitialNamesAccepted", "the initial names have been accepted"),
    ] {
        let mut cond = json!({
            "type": ty, "status": "True", "lastTransitionTime": now, "reason": reason, "message": message,
        });
        match conditions.iter_mut().find(|c| c["type"] == ty) {
            Some(c) => {
                // SetCRDCondition keeps the transition time while the status stays the same.
                if c["status"] == "True" {
                    cond["lastTransitionTime"] = c["lastTransitionTime"].clone();
                }
                *c = cond;
            }
            None => conditions.push(cond),
        }
    }
    status["conditions"] = Value::Array(conditions);
    let mut stored = status["storedVersions"].as_array().cloned().unwrap_or_default();
    if let Some(v) = storage_version(crd).map(Value::String)
        && !stored.contains(&v)
    {
        stored.push(v);
    }
    status["storedVersions"] = Value::Array(stored);
    if desired != *crd {
        store.put(crds, desired);
    }
}

/// The CRD is gone: delete every object of its resource (DELETED events) and stop serving it;
/// requests then get 404 and open watches end.
pub(crate) fn remove(store: &mut Store, crd: &Value) {
    if let Some(def) = definition(crd)
        && let Some(id) = store.lookup(&def.group, &def.version, &def.resource)
    {
        store.unregister(id);
    }
}
