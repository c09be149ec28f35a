//! What server-side apply knows about a type: which maps and structs are atomic, which lists
//! merge as sets or by which keys. Built-in kinds take it from the OpenAPI v3 schemas captured
//! from kube-apiserver (`openapi/kube-apiserver-v1.36.3.json`, written by
//! `cargo xtask capture-openapi`); custom resources from their CRD's structural schema; both
//! read the same markers as kube-openapi's `schemaconv` (`x-kubernetes-list-type`,
//! `x-kubernetes-list-map-keys`, `x-kubernetes-patch-strategy`, `x-kubernetes-patch-merge-key`,
//! `x-kubernetes-map-type`). A resource with no schema at all (one added with
//! `TestServer::register`) is "deduced", as kube-apiserver treats a CRD that preserves unknown
//! fields: maps merge key by key, lists are atomic.

use std::collections::HashMap;
use std::sync::OnceLock;

use serde_json::{Map, Value};

/// The captured schemas, and the Kubernetes version they come from.
static FIXTURE: &str = include_str!("../openapi/kube-apiserver-v1.36.3.json");

fn fixture() -> &'static Value {
    static PARSED: OnceLock<Value> = OnceLock::new();
    PARSED.get_or_init(|| serde_json::from_str(FIXTURE).unwrap_or(Value::Null))
}

/// The version of kube-apiserver the built-in schemas were captured from.
#[cfg(test)]
pub(crate) fn kube_version() -> &'static str {
    fixture()["kubeVersion"].as_str().unwrap_or_default()
}

fn named(name: &str) -> Option<&'static Value> {
    fixture()["schemas"].get(name)
}

/// The schema of `metav1.ObjectMeta`, which custom resources share with the built-ins.
fn object_meta() -> Option<&'static Value> {
    named("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")
}

/// The root schema of a built-in kind, found by its `x-kubernetes-group-version-kind`.
pub(crate) fn builtin(group: &str, version: &str, kind: &str) -> Option<&'static Value> {
    type Roots = HashMap<(String, String, String), &'static Value>;
    static ROOTS: OnceLock<Roots> = OnceLock::new();
    let roots = ROOTS.get_or_init(|| {
        let mut roots = Roots::new();
        for s in fixture()["schemas"].as_object().into_iter().flat_map(|m| m.values()) {
            for g in s["x-kubernetes-group-version-kind"].as_array().into_iter().flatten() {
                let part = |k: &str| g[k].as_str().unwrap_or_default().to_string();
                roots.insert((part("group"), part("version"), part("kind")), s);
            }
        }
        roots
    });
    roots.get(&(group.to_string(), version.to_string(), kind.to_string())).copied()
}

/// How the elements of a list relate (kube-openapi `getListElementRelationship`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ListType {
    /// Replaced as a whole.
    Atomic,
    /// A set of scalars: items merge by value.
    Set,
    /// Items merge by these key fields.
    Map(Vec<String>),
}

/// A schema node, resolved.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Node<'a> {
    /// The node itself (`None`: untyped, deduced from the value).
    schema: Option<&'a Value>,
    /// The property node that led here, whose markers (list type, map type) count too.
    outer: Option<&'a Value>,
}

/// What a node is.
#[derive(Debug, Clone)]
pub(crate) enum Shape<'a> {
    /// A struct: named fields (unknown fields are deduced); `atomic` if
    /// `x-kubernetes-map-type: atomic`.
    Struct { props: &'a Map<String, Value>, atomic: bool },
    /// A map with one element type; `atomic` if `x-kubernetes-map-type: atomic`.
    Map { elem: Node<'a>, atomic: bool },
    /// A list.
    List { elem: Node<'a>, ty: ListType },
    /// A scalar (or anything whose value is replaced as a whole).
    Scalar,
    /// Untyped: maps merge key by key, lists are atomic, scalars are leaves
    /// (structured-merge-diff's `__untyped_deduced_`).
    Deduced,
}

impl<'a> Node<'a> {
    /// The untyped node.
    pub(crate) const DEDUCED: Node<'static> = Node { schema: None, outer: None };

    /// The node of a schema value.
    pub(crate) fn of(schema: &'a Value) -> Self {
        Node { schema: Some(schema), outer: None }
    }

    fn marker(&self, key: &str) -> Option<&'a Value> {
        self.outer.and_then(|o| o.get(key)).or_else(|| self.schema.and_then(|s| s.get(key)))
    }

    /// Follows `$ref` / `allOf: [{$ref}]` to the named schema, keeping this node's markers.
    fn resolved(self) -> Self {
        let Some(s) = self.schema else { return self };
        let target = s
            .get("$ref")
            .or_else(|| s["allOf"].as_array().and_then(|a| a.iter().find_map(|x| x.get("$ref"))))
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix("#/components/schemas/"))
            .and_then(named);
        match target {
            Some(t) => Node { schema: Some(t), outer: self.outer.or(Some(s)) },
            None => self,
        }
    }

    /// The shape of this node.
    pub(crate) fn shape(self) -> Shape<'a> {
        let node = self.resolved();
        let Some(s) = node.schema else { return Shape::Deduced };
        if node.marker("x-kubernetes-int-or-string").is_some_and(|v| v == true) {
            return Shape::Scalar;
        }
        let atomic_map = node.marker("x-kubernetes-map-type").is_some_and(|v| v == "atomic");
        match s.get("type").and_then(Value::as_str) {
            Some("array") => {
                let elem = match s.get("items") {
                    Some(items) => Node { schema: Some(items), outer: None },
                    None => Node::DEDUCED,
                };
                Shape::List { elem, ty: list_type(node) }
            }
            Some("string" | "integer" | "number" | "boolean") => Shape::Scalar,
            _ => {
                if let Some(props) = s.get("properties").and_then(Value::as_object) {
                    Shape::Struct { props, atomic: atomic_map }
                } else if let Some(ap) = s.get("additionalProperties").filter(|a| a.is_object()) {
                    Shape::Map { elem: Node { schema: Some(ap), outer: None }, atomic: atomic_map }
                } else if atomic_map {
                    Shape::Scalar
                } else {
                    Shape::Deduced
                }
            }
        }
    }

    /// The node of a struct field; `metadata` of a root is always `ObjectMeta` (a custom
    /// resource's schema may not describe it: apiextensions-apiserver uses ObjectMeta's).
    pub(crate) fn field(props: &'a Map<String, Value>, name: &str, root: bool) -> Node<'a> {
        if root
            && name == "metadata"
            && let Some(meta) = object_meta()
        {
            return Node { schema: Some(meta), outer: None };
        }
        match props.get(name) {
            Some(p) => Node { schema: Some(p), outer: None },
            None => Node::DEDUCED,
        }
    }

    /// The scalar default of a struct field, which completes a list-map key.
    pub(crate) fn default_of(props: &Map<String, Value>, name: &str) -> Option<Value> {
        let p = props.get(name)?;
        p.get("default").cloned().or_else(|| {
            Node { schema: Some(p), outer: None }.resolved().schema.and_then(|s| s.get("default")).cloned()
        })
    }
}

/// What a built-in object loses in kube-apiserver's round trip through its Go type: `null`
/// fields, empty maps (Go maps are `omitempty` throughout the API), and empty `finalizers`,
/// `ownerReferences` and `managedFields` lists (`omitempty` in ObjectMeta). Other empty lists
/// stay: whether they survive depends on each Go field's tag, which the schema does not carry.
pub(crate) fn omit_empty(value: &mut Value, node: Node<'_>, root: bool) {
    let Value::Object(m) = value else { return };
    let (props, elem) = match node.shape() {
        Shape::Struct { props, .. } => (Some(props), None),
        Shape::Map { elem, .. } => (None, Some(elem)),
        _ => return,
    };
    let is_meta = props.is_some_and(|p| p.contains_key("ownerReferences") && p.contains_key("finalizers"));
    m.retain(|k, v| {
        let child = match props {
            Some(p) => Node::field(p, k, root),
            None => elem.unwrap_or(Node::DEDUCED),
        };
        if v.is_null() {
            return false;
        }
        if v.as_object().is_some_and(Map::is_empty) && matches!(child.shape(), Shape::Map { .. }) {
            return false;
        }
        if is_meta
            && matches!(k.as_str(), "finalizers" | "ownerReferences" | "managedFields")
            && v.as_array().is_some_and(Vec::is_empty)
        {
            return false;
        }
        true
    });
    for (k, v) in m.iter_mut() {
        let child = match props {
            Some(p) => Node::field(p, k, root),
            None => elem.unwrap_or(Node::DEDUCED),
        };
        match v {
            Value::Object(_) => omit_empty(v, child, false),
            Value::Array(items) => {
                if let Shape::List { elem, .. } = child.shape() {
                    items.iter_mut().for_each(|i| omit_empty(i, elem, false));
                }
            }
            _ => {}
        }
    }
}

/// Where a strategic merge patch would need more than a JSON merge patch does: a `$` directive
/// (`$patch`, `$retainKeys`, `$setElementOrder/...`, `$deleteFromPrimitiveList/...`), or a list
/// whose `x-kubernetes-patch-strategy` merges it (by a merge key, or as a set of values). The
/// first such place, as a field path (`.spec.containers`), or `None`: then the strategic merge
/// patch means what the JSON merge patch of the same document means.
pub(crate) fn strategic_merge_needed(
    patch: &Value,
    node: Node<'_>,
    path: &str,
    root: bool,
) -> Option<String> {
    let Value::Object(m) = patch else { return None };
    let (props, elem) = match node.shape() {
        Shape::Struct { props, .. } => (Some(props), None),
        Shape::Map { elem, .. } => (None, Some(elem)),
        _ => (None, Some(Node::DEDUCED)),
    };
    for (k, v) in m {
        let here = format!("{path}.{k}");
        if k.starts_with('$') {
            return Some(here);
        }
        let child = match props {
            Some(p) => Node::field(p, k, root),
            None => elem.unwrap_or(Node::DEDUCED),
        };
        if v.is_array() {
            let merges = child
                .resolved()
                .marker("x-kubernetes-patch-strategy")
                .and_then(Value::as_str)
                .is_some_and(|s| s.contains("merge"));
            if merges {
                return Some(here);
            }
        } else if let Some(p) = strategic_merge_needed(v, child, &here, false) {
            return Some(p);
        }
    }
    None
}

/// Removes the fields a schema does not have, as kube-apiserver's decoding drops them (a
/// built-in kind's Go type; a custom resource's structural schema, which may preserve unknown
/// fields where it says so), and returns their paths as sigs.k8s.io/json reports them
/// (`spec.foo`, `spec.containers[0].foo`).
pub(crate) fn prune_unknown(
    value: &mut Value,
    node: Node<'_>,
    root: bool,
    path: &str,
    unknown: &mut Vec<String>,
) {
    match node.shape() {
        Shape::Struct { props, .. } => {
            let Value::Object(m) = value else { return };
            // A custom resource's schema may keep unknown fields at this level.
            let preserve =
                node.resolved().marker("x-kubernetes-preserve-unknown-fields").is_some_and(|v| v == true);
            let keys: Vec<String> = m.keys().cloned().collect();
            for k in keys {
                let here = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                let declared = props.contains_key(&k)
                    || (root && matches!(k.as_str(), "metadata" | "apiVersion" | "kind"))
                    || preserve;
                if !declared {
                    m.remove(&k);
                    unknown.push(here);
                } else if let Some(v) = m.get_mut(&k) {
                    prune_unknown(v, Node::field(props, &k, root), false, &here, unknown);
                }
            }
        }
        Shape::Map { elem, .. } => {
            if let Value::Object(m) = value {
                for (k, v) in m.iter_mut() {
                    prune_unknown(v, elem, false, &format!("{path}.{k}"), unknown);
                }
            }
        }
        Shape::List { elem, .. } => {
            if let Value::Array(items) = value {
                for (i, v) in items.iter_mut().enumerate() {
                    prune_unknown(v, elem, false, &format!("{path}[{i}]"), unknown);
                }
            }
        }
        Shape::Scalar | Shape::Deduced => {}
    }
}

/// kube-openapi `getListElementRelationship`: the list type, else a merge patch strategy
/// (with a key: a map; without: a set), else atomic.
fn list_type(node: Node<'_>) -> ListType {
    match node.marker("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("set") => return ListType::Set,
        Some("map") => {
            let keys = node
                .marker("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|k| k.iter().filter_map(|k| k.as_str().map(str::to_string)).collect())
                .unwrap_or_default();
            return ListType::Map(keys);
        }
        Some(_) => return ListType::Atomic,
        None => {}
    }
    match node.marker("x-kubernetes-patch-strategy").and_then(Value::as_str) {
        Some("merge" | "merge,retainKeys") => {
            match node.marker("x-kubernetes-patch-merge-key").and_then(Value::as_str) {
                Some(key) => ListType::Map(vec![key.to_string()]),
                None => ListType::Set,
            }
        }
        _ => ListType::Atomic,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fixture_knows_the_served_kinds() {
        assert_eq!(kube_version(), "v1.36.3");
        for (g, k) in [
            ("", "ConfigMap"),
            ("", "Pod"),
            ("rbac.authorization.k8s.io", "Role"),
            ("coordination.k8s.io", "Lease"),
        ] {
            assert!(builtin(g, "v1", k).is_some(), "{k}");
        }
        let pod = Node::of(builtin("", "v1", "Pod").unwrap());
        let Shape::Struct { props, .. } = pod.shape() else { panic!() };
        let Shape::Struct { props: spec, .. } = Node::field(props, "spec", true).shape() else { panic!() };
        let Shape::List { ty, elem } = Node::field(spec, "containers", false).shape() else { panic!() };
        assert_eq!(ty, ListType::Map(vec!["name".into()]));
        let Shape::Struct { props: c, .. } = elem.shape() else { panic!() };
        let Shape::List { ty, elem } = Node::field(c, "ports", false).shape() else { panic!() };
        assert_eq!(ty, ListType::Map(vec!["containerPort".into(), "protocol".into()]));
        let Shape::Struct { props: port, .. } = elem.shape() else { panic!() };
        assert_eq!(Node::default_of(port, "protocol"), Some(Value::from("TCP")));
        let Shape::Struct { props: meta, .. } = Node::field(props, "metadata", true).shape() else {
            panic!()
        };
        assert!(matches!(
            Node::field(meta, "finalizers", false).shape(),
            Shape::List { ty: ListType::Set, .. }
        ));
        assert!(matches!(Node::field(meta, "labels", false).shape(), Shape::Map { atomic: false, .. }));
        assert!(matches!(
            Node::field(meta, "managedFields", false).shape(),
            Shape::List { ty: ListType::Atomic, .. }
        ));
    }
}
