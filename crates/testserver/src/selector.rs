//! Label selectors (equality- and set-based) and field selectors (`metadata.name`,
//! `metadata.namespace` and the per-kind fields of pods, secrets and namespaces), parsed from
//! query strings as k8s.io/apimachinery/pkg/labels and pkg/fields do.

use serde_json::Value;

use crate::resources::ResourceDef;
use crate::status::ApiError;
use crate::store::StoredObject;

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    /// `key=value` or `key==value`.
    Equals(String, String),
    /// `key!=value` (also true when the label is absent).
    NotEquals(String, String),
    /// `key in (a,b)`.
    In(String, Vec<String>),
    /// `key notin (a,b)` (also true when the label is absent).
    NotIn(String, Vec<String>),
    /// `key`.
    Exists(String),
    /// `!key`.
    DoesNotExist(String),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LabelSelector {
    /// All must hold (the comma is AND).
    reqs: Vec<Requirement>,
}

impl LabelSelector {
    /// Parses `labelSelector`.
    pub(crate) fn parse(s: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for part in split_top_level(s) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            reqs.push(parse_requirement(part).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "unable to parse requirement: invalid label selector: {part:?}"
                ))
            })?);
        }
        Ok(Self { reqs })
    }

    /// Whether labels (key/value pairs) satisfy every requirement.
    pub(crate) fn matches(&self, labels: &[(String, String)]) -> bool {
        let get = |k: &str| labels.iter().find(|(lk, _)| lk == k).map(|(_, v)| v.as_str());
        self.reqs.iter().all(|r| match r {
            Requirement::Equals(k, v) => get(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => get(k) != Some(v.as_str()),
            Requirement::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Requirement::NotIn(k, vs) => get(k).is_none_or(|x| !vs.iter().any(|v| v == x)),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::DoesNotExist(k) => get(k).is_none(),
        })
    }

    /// Whether the selector is empty.
    pub(crate) fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }
}

/// Splits on commas that are not inside parentheses.
fn split_top_level(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

/// Whether `s` is a plausible label key or value (no spaces or operator characters).
fn valid_token(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn valid_value(s: &str) -> bool {
    s.is_empty() || valid_token(s)
}

fn parse_requirement(part: &str) -> Option<Requirement> {
    if let Some(key) = part.strip_prefix('!') {
        let key = key.trim();
        return valid_token(key).then(|| Requirement::DoesNotExist(key.to_string()));
    }
    for (op, notin) in [(" notin ", true), (" in ", false)] {
        if let Some(idx) = part.find(op) {
            let key = part[..idx].trim();
            let rest = part[idx + op.len()..].trim();
            let inner = rest.strip_prefix('(')?.strip_suffix(')')?;
            let values: Vec<String> = inner.split(',').map(|v| v.trim().to_string()).collect();
            if !valid_token(key) || !values.iter().all(|v| valid_value(v)) {
                return None;
            }
            return Some(if notin {
                Requirement::NotIn(key.into(), values)
            } else {
                Requirement::In(key.into(), values)
            });
        }
    }
    if let Some((k, v)) = part.split_once("!=") {
        let (k, v) = (k.trim(), v.trim());
        return (valid_token(k) && valid_value(v)).then(|| Requirement::NotEquals(k.into(), v.into()));
    }
    if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
        let (k, v) = (k.trim(), v.trim());
        return (valid_token(k) && valid_value(v)).then(|| Requirement::Equals(k.into(), v.into()));
    }
    valid_token(part).then(|| Requirement::Exists(part.to_string()))
}

/// Which field labels a resource's field selectors may use, and how an unknown one is refused:
/// the `ConvertFieldLabel` of the resource's scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FieldLabels {
    /// A built-in kind without its own conversion function (runtime/conversion.go
    /// `DefaultMetaV1FieldSelectorConversion`): `metadata.name` and `metadata.namespace`, the
    /// latter also for cluster-scoped kinds (where only `""` matches).
    Default,
    /// A kind registered with its own list (pkg/apis/core/v1/conversion.go): pods, secrets and
    /// namespaces. Unknown labels are "field label not supported".
    Kind(&'static [&'static str]),
    /// A custom resource (apiextensions-apiserver's `crConverter`): `metadata.name`, and
    /// `metadata.namespace` only when namespaced.
    Custom {
        /// Whether the resource is namespaced.
        namespaced: bool,
    },
}

const POD_FIELDS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.podIPs",
    "status.nominatedNodeName",
];
const SECRET_FIELDS: &[&str] = &["type", "metadata.namespace", "metadata.name"];
const NAMESPACE_FIELDS: &[&str] = &["status.phase", "metadata.name"];

impl FieldLabels {
    fn of(def: &ResourceDef) -> Self {
        let builtin =
            ResourceDef::builtins().iter().any(|b| b.group == def.group && b.resource == def.resource);
        match (def.group.as_str(), def.resource.as_str()) {
            ("", "pods") => Self::Kind(POD_FIELDS),
            ("", "secrets") => Self::Kind(SECRET_FIELDS),
            ("", "namespaces") => Self::Kind(NAMESPACE_FIELDS),
            _ if builtin => Self::Default,
            _ => Self::Custom { namespaced: def.namespaced },
        }
    }

    /// The canonical label for `label`, or kube-apiserver's error for an unsupported one.
    fn convert(self, label: &str) -> Result<&str, String> {
        let not_supported = || format!("field label not supported: {label}");
        match self {
            Self::Default => match label {
                "metadata.name" | "metadata.namespace" => Ok(label),
                _ => Err(format!(
                    "{label:?} is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
                )),
            },
            // Old v1 clients' name for spec.nodeName.
            Self::Kind(fields) if fields == POD_FIELDS && label == "spec.host" => Ok("spec.nodeName"),
            Self::Kind(fields) => fields.contains(&label).then_some(label).ok_or_else(not_supported),
            Self::Custom { namespaced } => match label {
                "metadata.name" => Ok(label),
                "metadata.namespace" if namespaced => Ok(label),
                _ => Err(not_supported()),
            },
        }
    }
}

/// One term of a field selector.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FieldTerm {
    /// The canonical field label, e.g. `metadata.name` or `spec.nodeName`.
    field: String,
    value: String,
    /// `!=` rather than `=`/`==`.
    negated: bool,
}

/// A parsed field selector over the fields the resource supports: `metadata.name` and
/// `metadata.namespace`, plus pods' `spec.nodeName`, `status.phase` and the rest of
/// `ToSelectableFields`, secrets' `type` and namespaces' `status.phase`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FieldSelector {
    /// All must hold (the comma is AND).
    terms: Vec<FieldTerm>,
}

impl FieldSelector {
    /// Parses `fieldSelector` for the resource `def`; fields it does not support are rejected
    /// with kube-apiserver's 400 and message.
    pub(crate) fn parse(s: &str, def: &ResourceDef) -> Result<Self, ApiError> {
        // Worked out at the first term: most requests have no field selector.
        let mut labels = None;
        let mut terms = Vec::new();
        for part in s.split(',') {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let (field, value, negated) = if let Some((f, v)) = part.split_once("!=") {
                (f, v, true)
            } else if let Some((f, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                (f, v, false)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid field selector: invalid selector: '{part}'; can't understand '{part}'"
                )));
            };
            let labels = *labels.get_or_insert_with(|| FieldLabels::of(def));
            let field = labels.convert(field.trim()).map_err(ApiError::bad_request)?.to_string();
            terms.push(FieldTerm { field, value: value.trim().to_string(), negated });
        }
        Ok(Self { terms })
    }

    /// Whether an object matches. Fields outside `metadata` are read from the object's JSON
    /// (parsed once, and only if needed); an absent field is `""`, as in a `fields.Set`.
    pub(crate) fn matches(&self, o: &StoredObject) -> bool {
        let mut parsed: Option<Value> = None;
        self.terms.iter().all(|t| {
            let equal = match t.field.as_str() {
                "metadata.name" => o.name == t.value,
                "metadata.namespace" => o.namespace == t.value,
                field => {
                    let v =
                        parsed.get_or_insert_with(|| serde_json::from_slice(&o.bytes).unwrap_or(Value::Null));
                    field_value(v, field) == t.value
                }
            };
            equal != t.negated
        })
    }

    /// Whether the selector is empty.
    pub(crate) fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }
}

/// The value of a selectable field other than `metadata.*`, as the registries'
/// `ToSelectableFields` compute it from the object.
fn field_value(obj: &Value, field: &str) -> String {
    let str_at = |ptr: &str| obj.pointer(ptr).and_then(Value::as_str).unwrap_or_default().to_string();
    match field {
        // The internal Pod keeps hostNetwork in its security context; false when unset.
        "spec.hostNetwork" => (obj.pointer("/spec/hostNetwork") == Some(&Value::Bool(true))).to_string(),
        // The internal Pod has only podIPs; v1's podIP becomes podIPs[0] when podIPs is empty.
        "status.podIP" => obj
            .pointer("/status/podIPs/0/ip")
            .and_then(Value::as_str)
            .map_or_else(|| str_at("/status/podIP"), str::to_string),
        // Accepted by the conversion but not in the pod's field set.
        "status.podIPs" => String::new(),
        "type" => str_at("/type"),
        _ => str_at(&format!("/{}", field.replace('.', "/"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn label_selector_syntax() {
        let l = labels(&[("app", "web"), ("tier", "front")]);
        for (sel, want) in [
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app=db", false),
            ("missing!=x", true),
            ("app in (web,db)", true),
            ("app in (db)", false),
            ("app notin (db)", true),
            ("missing notin (db)", true),
            ("tier", true),
            ("missing", false),
            ("!missing", true),
            ("!app", false),
            ("app=web,tier in (front, back)", true),
            ("app=web,tier=back", false),
        ] {
            assert_eq!(LabelSelector::parse(sel).unwrap().matches(&l), want, "{sel}");
        }
        assert!(LabelSelector::parse("app in web").is_err());
        assert!(LabelSelector::parse("a b").is_err());
    }

    fn def(resource: &str) -> ResourceDef {
        ResourceDef::builtins().into_iter().find(|d| d.resource == resource).unwrap()
    }

    fn obj(v: Value) -> StoredObject {
        StoredObject::from_value(&v, 1)
    }

    #[test]
    fn field_selector_syntax() {
        let cms = def("configmaps");
        let f = FieldSelector::parse("metadata.name=a,metadata.namespace!=kube-system", &cms).unwrap();
        let cm = |ns: &str, name: &str| obj(serde_json::json!({"metadata": {"namespace": ns, "name": name}}));
        assert!(f.matches(&cm("default", "a")));
        assert!(!f.matches(&cm("kube-system", "a")));
        assert!(!f.matches(&cm("default", "b")));
        assert!(FieldSelector::parse("spec.foo=bar", &cms).is_err());
    }

    #[test]
    fn per_kind_fields() {
        let pod = obj(serde_json::json!({
            "metadata": {"namespace": "default", "name": "p"},
            "spec": {"nodeName": "n1"},
            "status": {"phase": "Running", "podIP": "10.0.0.1"},
        }));
        let pods = def("pods");
        for (sel, want) in [
            ("spec.nodeName=n1", true),
            ("spec.host=n1", true),
            ("spec.nodeName=n2", false),
            ("status.phase=Running,spec.hostNetwork=false", true),
            ("status.podIP=10.0.0.1", true),
            ("spec.schedulerName=", true),
            ("spec.schedulerName!=", false),
        ] {
            assert_eq!(FieldSelector::parse(sel, &pods).unwrap().matches(&pod), want, "{sel}");
        }
        let secret = obj(serde_json::json!({"metadata": {"name": "s"}, "type": "Opaque"}));
        assert!(FieldSelector::parse("type=Opaque", &def("secrets")).unwrap().matches(&secret));
        let ns = obj(serde_json::json!({"metadata": {"name": "x"}, "status": {"phase": "Active"}}));
        assert!(FieldSelector::parse("status.phase=Active", &def("namespaces")).unwrap().matches(&ns));
        assert!(FieldSelector::parse("metadata.namespace=x", &def("namespaces")).is_err());
        let widgets = ResourceDef::new("example.com", "v1", "widgets", "Widget", false);
        assert!(FieldSelector::parse("metadata.namespace=x", &widgets).is_err());
        assert!(FieldSelector::parse("metadata.name=x", &widgets).is_ok());
    }
}
