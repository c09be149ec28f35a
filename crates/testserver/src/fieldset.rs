//! Field sets, as structured-merge-diff's `fieldpath` has them: a trie of path elements whose
//! nodes are members (owned) or merely lead to members, with the set algebra server-side apply
//! needs and the `FieldsV1` encoding kube-apiserver writes into `managedFields`
//! (`f:<field>`, `k:{"key":value}`, `v:<value>`, `i:<index>`, `.` for a node that is itself a
//! member and has members below it).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde_json::{Map, Value};

/// One step of a path. The variant order is structured-merge-diff's `PathElement.Compare`:
/// field names, then keys, then values, then indexes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Pe {
    /// A struct field or map key.
    Field(String),
    /// An associative list item by its key fields: `(name, value as JSON)`, sorted by name.
    Key(Vec<(String, String)>),
    /// A set item, by its value (as JSON).
    Value(String),
    /// A list item by position.
    Index(usize),
}

impl Pe {
    /// The key of an associative-list item with these key fields.
    pub(crate) fn key(fields: Vec<(String, Value)>) -> Pe {
        let mut k: Vec<(String, String)> = fields.into_iter().map(|(n, v)| (n, json(&v))).collect();
        k.sort();
        Pe::Key(k)
    }

    /// A set item.
    pub(crate) fn value(v: &Value) -> Pe {
        Pe::Value(json(v))
    }

    /// `f:name`, `k:{...}`, `v:...` or `i:N`, as in `FieldsV1`.
    fn encode(&self) -> String {
        match self {
            Pe::Field(n) => format!("f:{n}"),
            Pe::Key(k) => {
                let mut s = String::from("k:{");
                for (i, (n, v)) in k.iter().enumerate() {
                    if i > 0 {
                        s.push(',');
                    }
                    let _ = write!(s, "{}:{v}", json(&Value::String(n.clone())));
                }
                s.push('}');
                s
            }
            Pe::Value(v) => format!("v:{v}"),
            Pe::Index(i) => format!("i:{i}"),
        }
    }

    fn decode(s: &str) -> Option<Pe> {
        let (kind, rest) = s.split_once(':')?;
        Some(match kind {
            "f" => Pe::Field(rest.to_string()),
            "k" => match serde_json::from_str::<Value>(rest).ok()? {
                Value::Object(m) => Pe::key(m.into_iter().collect()),
                _ => return None,
            },
            "v" => Pe::value(&serde_json::from_str(rest).ok()?),
            "i" => Pe::Index(rest.parse().ok()?),
            _ => return None,
        })
    }
}

/// `.name`, `[k=v,...]`, `[=v]` or `[N]`, as `PathElement.String` writes it.
impl std::fmt::Display for Pe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Pe::Field(n) => write!(f, ".{n}"),
            Pe::Key(k) => {
                let parts: Vec<String> = k.iter().map(|(n, v)| format!("{n}={v}")).collect();
                write!(f, "[{}]", parts.join(","))
            }
            Pe::Value(v) => write!(f, "[={v}]"),
            Pe::Index(i) => write!(f, "[{i}]"),
        }
    }
}

fn json(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// A path from the root.
pub(crate) type Path = Vec<Pe>;

/// `fieldpath.Path.String`.
pub(crate) fn path_string(path: &[Pe]) -> String {
    path.iter().map(ToString::to_string).collect()
}

/// A set of paths (`fieldpath.Set`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Set {
    /// Paths that end here.
    members: BTreeSet<Pe>,
    /// Paths that continue below.
    children: BTreeMap<Pe, Set>,
}

impl Set {
    /// Whether no path is in the set.
    pub(crate) fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.values().all(Set::is_empty)
    }

    /// Adds a path (the empty path is ignored).
    pub(crate) fn insert(&mut self, path: &[Pe]) {
        match path {
            [] => {}
            [pe] => {
                self.members.insert(pe.clone());
            }
            [pe, rest @ ..] => self.children.entry(pe.clone()).or_default().insert(rest),
        }
    }

    /// Whether the path is a member.
    #[cfg(test)]
    pub(crate) fn has(&self, path: &[Pe]) -> bool {
        match path {
            [] => false,
            [pe] => self.members.contains(pe),
            [pe, rest @ ..] => self.children.get(pe).is_some_and(|c| c.has(rest)),
        }
    }

    /// The members directly here.
    pub(crate) fn members(&self) -> &BTreeSet<Pe> {
        &self.members
    }

    /// The subset below `pe`.
    pub(crate) fn child(&self, pe: &Pe) -> Option<&Set> {
        self.children.get(pe)
    }

    /// The subsets below each element.
    pub(crate) fn children(&self) -> &BTreeMap<Pe, Set> {
        &self.children
    }

    /// Makes `pe` a member (for `EnsureNamedFieldsAreMembers`).
    pub(crate) fn add_member(&mut self, pe: Pe) {
        self.members.insert(pe);
    }

    /// The subset below `pe`, created if absent.
    pub(crate) fn child_mut(&mut self, pe: Pe) -> &mut Set {
        self.children.entry(pe).or_default()
    }

    /// `Union`.
    pub(crate) fn union(&self, other: &Set) -> Set {
        let mut out = self.clone();
        out.members.extend(other.members.iter().cloned());
        for (pe, c) in &other.children {
            let merged = match out.children.get(pe) {
                Some(mine) => mine.union(c),
                None => c.clone(),
            };
            out.children.insert(pe.clone(), merged);
        }
        out
    }

    /// `Difference`: members of `self` not members of `other`, recursively (a member of
    /// `other` does not remove what lies below it in `self`).
    pub(crate) fn difference(&self, other: &Set) -> Set {
        let mut out =
            Set { members: self.members.difference(&other.members).cloned().collect(), ..Set::default() };
        for (pe, c) in &self.children {
            let d = match other.children.get(pe) {
                Some(o) => c.difference(o),
                None => c.clone(),
            };
            if !d.is_empty() {
                out.children.insert(pe.clone(), d);
            }
        }
        out
    }

    /// `Intersection`.
    pub(crate) fn intersection(&self, other: &Set) -> Set {
        let mut out =
            Set { members: self.members.intersection(&other.members).cloned().collect(), ..Set::default() };
        for (pe, c) in &self.children {
            if let Some(o) = other.children.get(pe) {
                let i = c.intersection(o);
                if !i.is_empty() {
                    out.children.insert(pe.clone(), i);
                }
            }
        }
        out
    }

    /// Every member path, in `Set.Iterate`'s order (members of a node before the nodes below).
    pub(crate) fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Path, out: &mut Vec<Path>) {
        for pe in &self.members {
            let mut p = prefix.clone();
            p.push(pe.clone());
            out.push(p);
        }
        for (pe, c) in &self.children {
            prefix.push(pe.clone());
            c.collect(prefix, out);
            prefix.pop();
        }
    }

    /// Removes the paths under the top-level fields in `fields` (the reset fields a
    /// resource's strategy keeps out of a write, such as `status`).
    pub(crate) fn without_top_fields(&self, keep: impl Fn(&str) -> bool) -> Set {
        let top = |pe: &Pe| matches!(pe, Pe::Field(f) if keep(f));
        Set {
            members: self.members.iter().filter(|pe| top(pe)).cloned().collect(),
            children: self
                .children
                .iter()
                .filter(|(pe, _)| top(pe))
                .map(|(p, c)| (p.clone(), c.clone()))
                .collect(),
        }
    }

    /// The `FieldsV1` JSON of the set.
    pub(crate) fn to_fields_v1(&self) -> Value {
        let mut m = Map::new();
        for pe in &self.members {
            if !self.children.contains_key(pe) {
                m.insert(pe.encode(), Value::Object(Map::new()));
            }
        }
        for (pe, c) in &self.children {
            if c.is_empty() && !self.members.contains(pe) {
                continue;
            }
            let mut inner = Map::new();
            if self.members.contains(pe) {
                inner.insert(".".into(), Value::Object(Map::new()));
            }
            if let Value::Object(below) = c.to_fields_v1() {
                inner.extend(below);
            }
            m.insert(pe.encode(), Value::Object(inner));
        }
        Value::Object(m)
    }

    /// Parses `FieldsV1` JSON; `None` when it is not a valid encoding.
    pub(crate) fn from_fields_v1(v: &Value) -> Option<Set> {
        let mut set = Set::default();
        for (k, inner) in v.as_object()? {
            if k == "." {
                continue;
            }
            let pe = Pe::decode(k)?;
            let inner = inner.as_object()?;
            let only_dot = inner.keys().all(|k| k == ".");
            if inner.is_empty() || inner.contains_key(".") {
                set.members.insert(pe.clone());
            }
            if !only_dot {
                let child = Set::from_fields_v1(&Value::Object(inner.clone()))?;
                if !child.is_empty() {
                    set.children.insert(pe, child);
                }
            }
        }
        Some(set)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn f(n: &str) -> Pe {
        Pe::Field(n.into())
    }

    #[test]
    fn fields_v1_round_trips() {
        let v = json!({
            "f:data": {".": {}, "f:a": {}},
            "f:metadata": {"f:labels": {"f:app": {}}, "f:finalizers": {"v:\"x\"": {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}}}},
        });
        let s = Set::from_fields_v1(&v).unwrap();
        assert!(s.has(&[f("data")]));
        assert!(s.has(&[f("data"), f("a")]));
        assert!(!s.has(&[f("metadata")]));
        assert!(s.has(&[f("metadata"), f("finalizers"), Pe::value(&json!("x"))]));
        let item = Pe::key(vec![("name".into(), json!("c"))]);
        assert!(s.has(&[f("spec"), f("containers"), item.clone()]));
        assert_eq!(s.to_fields_v1(), v);
        assert_eq!(
            path_string(&[f("spec"), f("containers"), item, f("image")]),
            ".spec.containers[name=\"c\"].image"
        );
        let ports = Pe::key(vec![("protocol".into(), json!("TCP")), ("containerPort".into(), json!(80))]);
        assert_eq!(ports.encode(), "k:{\"containerPort\":80,\"protocol\":\"TCP\"}");
        assert_eq!(ports.to_string(), "[containerPort=80,protocol=\"TCP\"]");
    }

    #[test]
    fn set_algebra() {
        let mut a = Set::default();
        a.insert(&[f("x"), f("y")]);
        a.insert(&[f("x")]);
        a.insert(&[f("z")]);
        let mut b = Set::default();
        b.insert(&[f("x")]);
        b.insert(&[f("x"), f("w")]);
        let d = a.difference(&b);
        assert_eq!(d.paths(), vec![vec![f("z")], vec![f("x"), f("y")]]);
        let i = a.intersection(&b);
        assert_eq!(i.paths(), vec![vec![f("x")]]);
        assert_eq!(a.union(&b).paths().len(), 4);
    }
}
