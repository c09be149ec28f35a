//! Field management: `metadata.managedFields` on every write and server-side apply, as
//! kube-apiserver's field manager (k8s.io/apimachinery `util/managedfields/internal`) runs
//! structured-merge-diff (sigs.k8s.io/structured-merge-diff/v6 `merge.Updater`).
//!
//! - Every create, update and patch records what its manager (`fieldManager`, else the
//!   User-Agent's product) changed as an `Update` entry, taking those fields from other
//!   managers (`Updater.Update`).
//! - An apply (`application/apply-patch+yaml`) merges the applied configuration into the
//!   object (associative lists by their keys, sets by value, atomic lists and maps whole),
//!   removes the fields the manager applied last time and no longer applies unless another
//!   manager owns them (`prune`), and fails with kube-apiserver's 409 conflict when it would
//!   change a field another manager owns, unless forced, which takes the field over
//!   (`Updater.Apply`).
//!
//! The typed walks (`to_set`, `compare`, `merge`, `remove`) follow structured-merge-diff's
//! `typed` package over the [`schema`](crate::schema) of the kind.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::fieldset::{Path, Pe, Set, path_string};
use crate::schema::{ListType, Node, Shape};
use crate::status::ApiError;

/// A typed operation failed on this value (structured-merge-diff's validation errors).
#[derive(Debug)]
pub(crate) struct TypeError(pub(crate) String);

type Result<T, E = TypeError> = std::result::Result<T, E>;

/// The item of an associative list as a path element (`listItemToPathElement`).
fn item_pe(item: &Value, elem: Node<'_>, ty: &ListType, index: usize) -> Result<Pe> {
    match ty {
        ListType::Atomic => Ok(Pe::Index(index)),
        ListType::Set => {
            if item.is_object() || item.is_array() {
                return Err(TypeError(
                    "associative list without keys has an element that's a map or a list".into(),
                ));
            }
            Ok(Pe::value(item))
        }
        ListType::Map(keys) => {
            if keys.is_empty() {
                return Err(TypeError("associative list with no keys".into()));
            }
            let props = match elem.shape() {
                Shape::Struct { props, .. } => Some(props),
                _ => None,
            };
            let mut fields = Vec::new();
            for k in keys {
                let v = item
                    .get(k)
                    .filter(|v| !v.is_null())
                    .cloned()
                    .or_else(|| props.and_then(|p| Node::default_of(p, k)));
                match v {
                    Some(v) => fields.push((k.clone(), v)),
                    None => {
                        return Err(TypeError(format!(
                            "associative list with keys has an element that omits key field {k:?} (and doesn't have default value)"
                        )));
                    }
                }
            }
            Ok(Pe::key(fields))
        }
    }
}

/// How to walk one value: as a struct (named fields), a map (one element type), a list, or a
/// leaf (scalars and anything atomic).
enum Walk<'a> {
    Fields { props: Option<&'a Map<String, Value>>, elem: Option<Node<'a>> },
    List { elem: Node<'a>, ty: ListType },
    Leaf,
}

/// How a node walks a value; a value of another type than the schema's is a leaf.
fn walk<'a>(node: Node<'a>, v: Option<&Value>) -> Walk<'a> {
    match node.shape() {
        Shape::Struct { props, atomic: false } if v.is_none_or(Value::is_object) => {
            Walk::Fields { props: Some(props), elem: None }
        }
        Shape::Map { elem, atomic: false } if v.is_none_or(Value::is_object) => {
            Walk::Fields { props: None, elem: Some(elem) }
        }
        Shape::Deduced if v.is_none_or(Value::is_object) => {
            Walk::Fields { props: None, elem: Some(Node::DEDUCED) }
        }
        Shape::List { elem, ty } if ty != ListType::Atomic && v.is_none_or(Value::is_array) => {
            Walk::List { elem, ty }
        }
        _ => Walk::Leaf,
    }
}

fn child_node<'a>(
    props: Option<&'a Map<String, Value>>,
    elem: Option<Node<'a>>,
    key: &str,
    root: bool,
) -> Node<'a> {
    match props {
        Some(p) if p.contains_key(key) || (root && key == "metadata") => Node::field(p, key, root),
        _ => elem.unwrap_or(Node::DEDUCED),
    }
}

/// `TypedValue.ToFieldSet`.
pub(crate) fn to_set(value: &Value, node: Node<'_>) -> Result<Set> {
    let mut set = Set::default();
    to_set_at(value, node, true, &mut Vec::new(), &mut set)?;
    Ok(set)
}

fn to_set_at(value: &Value, node: Node<'_>, root: bool, path: &mut Path, set: &mut Set) -> Result<()> {
    match walk(node, Some(value)) {
        Walk::Leaf => set.insert(path),
        Walk::Fields { props, elem } => {
            let Some(m) = value.as_object() else { return Ok(()) };
            for (k, v) in m {
                let declared =
                    props.is_some_and(|p| p.contains_key(k)) || (root && k == "metadata" && props.is_some());
                path.push(Pe::Field(k.clone()));
                to_set_at(v, child_node(props, elem, k, root), false, path, set)?;
                if v.is_null() || v.as_object().is_some_and(Map::is_empty) || !declared {
                    set.insert(path);
                }
                path.pop();
            }
        }
        Walk::List { elem, ty } => {
            let Some(items) = value.as_array() else { return Ok(()) };
            let mut seen = std::collections::BTreeSet::new();
            for (i, item) in items.iter().enumerate() {
                let pe = item_pe(item, elem, &ty, i)?;
                if !seen.insert(pe.clone()) {
                    return Err(TypeError(format!("duplicate entries for key {pe}")));
                }
                path.push(pe);
                to_set_at(item, elem, false, path, set)?;
                set.insert(path);
                path.pop();
            }
        }
    }
    Ok(())
}

/// What changed between two values (`typed.Comparison`).
#[derive(Debug, Default)]
pub(crate) struct Comparison {
    pub(crate) added: Set,
    pub(crate) removed: Set,
    pub(crate) modified: Set,
}

/// `TypedValue.Compare`.
pub(crate) fn compare(lhs: &Value, rhs: &Value, node: Node<'_>) -> Result<Comparison> {
    let mut c = Comparison::default();
    compare_at(Some(lhs), Some(rhs), node, true, &mut Vec::new(), &mut c)?;
    Ok(c)
}

fn compare_at(
    lhs: Option<&Value>,
    rhs: Option<&Value>,
    node: Node<'_>,
    root: bool,
    path: &mut Path,
    c: &mut Comparison,
) -> Result<()> {
    let wl = walk(node, lhs);
    let wr = walk(node, rhs);
    let leaf = matches!(wl, Walk::Leaf) || matches!(wr, Walk::Leaf);
    if leaf {
        match (lhs, rhs) {
            (None, Some(_)) => c.added.insert(path),
            (Some(_), None) => c.removed.insert(path),
            (Some(l), Some(r)) if l != r => c.modified.insert(path),
            _ => {}
        }
        return Ok(());
    }
    match wr {
        Walk::Fields { props, elem } => {
            let empty = Map::new();
            let lm = lhs.and_then(Value::as_object).unwrap_or(&empty);
            let rm = rhs.and_then(Value::as_object).unwrap_or(&empty);
            let keys: std::collections::BTreeSet<&String> = lm.keys().chain(rm.keys()).collect();
            for k in keys {
                path.push(Pe::Field(k.clone()));
                compare_at(lm.get(k), rm.get(k), child_node(props, elem, k, root), false, path, c)?;
                path.pop();
            }
        }
        Walk::List { elem, ty } => {
            let index = |v: Option<&Value>| -> Result<BTreeMap<Pe, Value>> {
                let mut m = BTreeMap::new();
                for (i, item) in v.and_then(Value::as_array).into_iter().flatten().enumerate() {
                    m.entry(item_pe(item, elem, &ty, i)?).or_insert_with(|| item.clone());
                }
                Ok(m)
            };
            let (li, ri) = (index(lhs)?, index(rhs)?);
            let pes: std::collections::BTreeSet<&Pe> = li.keys().chain(ri.keys()).collect();
            for pe in pes {
                path.push(pe.clone());
                compare_at(li.get(pe), ri.get(pe), elem, false, path, c)?;
                path.pop();
            }
        }
        Walk::Leaf => {}
    }
    if !path.is_empty() {
        if lhs.is_none() {
            c.added.insert(path);
        } else if rhs.is_none() {
            c.removed.insert(path);
        }
    }
    Ok(())
}

/// `TypedValue.Merge`: `rhs` over `lhs`.
pub(crate) fn merge(lhs: &Value, rhs: &Value, node: Node<'_>) -> Result<Value> {
    merge_at(lhs, rhs, node, true)
}

fn merge_at(lhs: &Value, rhs: &Value, node: Node<'_>, root: bool) -> Result<Value> {
    let (wl, wr) = (walk(node, Some(lhs)), walk(node, Some(rhs)));
    match (wl, wr) {
        (Walk::Fields { .. }, Walk::Fields { props, elem }) => {
            let (Some(lm), Some(rm)) = (lhs.as_object(), rhs.as_object()) else { return Ok(rhs.clone()) };
            if lm.is_empty() && rm.is_empty() {
                return Ok(rhs.clone());
            }
            let mut out = lm.clone();
            for (k, rv) in rm {
                let merged = match lm.get(k) {
                    Some(lv) => merge_at(lv, rv, child_node(props, elem, k, root), false)?,
                    None => rv.clone(),
                };
                out.insert(k.clone(), merged);
            }
            Ok(Value::Object(out))
        }
        (Walk::List { .. }, Walk::List { elem, ty }) => {
            let (Some(l), Some(r)) = (lhs.as_array(), rhs.as_array()) else { return Ok(rhs.clone()) };
            if l.is_empty() && r.is_empty() {
                return Ok(rhs.clone());
            }
            merge_list(l, r, elem, &ty).map(Value::Array)
        }
        _ => Ok(rhs.clone()),
    }
}

/// `mergingWalker.visitListItems`: the merged list keeps the order of `lhs`, except that items
/// both lists have come in the order of `rhs`, and items only `rhs` has come where `rhs` puts
/// them relative to the shared ones.
fn merge_list(l: &[Value], r: &[Value], elem: Node<'_>, ty: &ListType) -> Result<Vec<Value>> {
    let pes = |items: &[Value]| -> Result<(Vec<Pe>, BTreeMap<Pe, Value>)> {
        let mut order = Vec::new();
        let mut seen = BTreeMap::new();
        for (i, item) in items.iter().enumerate() {
            let pe = item_pe(item, elem, ty, i)?;
            if seen.contains_key(&pe) {
                return Err(TypeError(format!("duplicate entries for key {pe}")));
            }
            seen.insert(pe.clone(), item.clone());
            order.push(pe);
        }
        Ok((order, seen))
    };
    let (rpes, robs) = pes(r)?;
    let (lpes, lobs) = pes(l)?;
    let mut shared: std::collections::VecDeque<&Pe> =
        rpes.iter().filter(|pe| lobs.contains_key(*pe)).collect();
    let mut next_shared = shared.pop_front();
    let mut merged_rhs = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    let merge_item = |pe: &Pe| -> Result<Value> {
        match (lobs.get(pe), robs.get(pe)) {
            (Some(lv), Some(rv)) => merge_at(lv, rv, elem, false),
            (Some(v), None) | (None, Some(v)) => Ok(v.clone()),
            (None, None) => Ok(Value::Null),
        }
    };
    let (mut li, mut ri) = (0, 0);
    while li < lpes.len() || ri < rpes.len() {
        if li < lpes.len() && ri < rpes.len() {
            let pe = &lpes[li];
            if *pe == rpes[ri] {
                merged_rhs.insert(pe.clone());
                out.push(merge_item(pe)?);
                li += 1;
                ri += 1;
                next_shared = shared.pop_front();
                continue;
            }
            if robs.contains_key(pe) && next_shared.is_some_and(|n| n != pe) {
                li += 1;
                continue;
            }
        }
        if li < lpes.len() {
            let pe = &lpes[li];
            if !robs.contains_key(pe) {
                out.push(merge_item(pe)?);
                li += 1;
                continue;
            } else if merged_rhs.contains(pe) {
                li += 1;
            }
        }
        if ri < rpes.len() {
            let pe = &rpes[ri];
            merged_rhs.insert(pe.clone());
            out.push(merge_item(pe)?);
            ri += 1;
            if next_shared.is_some_and(|n| n == pe) {
                next_shared = shared.pop_front();
            }
        }
    }
    Ok(out)
}

/// `TypedValue.RemoveItems`: removes every member path of `set` (with what lies below it).
pub(crate) fn remove(value: &mut Value, set: &Set, node: Node<'_>) -> Result<()> {
    remove_at(value, set, node, true)
}

fn remove_at(value: &mut Value, set: &Set, node: Node<'_>, root: bool) -> Result<()> {
    match walk(node, Some(value)) {
        Walk::Fields { props, elem } => {
            let Some(m) = value.as_object_mut() else { return Ok(()) };
            for pe in set.members() {
                if let Pe::Field(k) = pe {
                    m.remove(k);
                }
            }
            for (pe, sub) in set.children() {
                if let Pe::Field(k) = pe
                    && let Some(v) = m.get_mut(k)
                {
                    remove_at(v, sub, child_node(props, elem, k, root), false)?;
                }
            }
        }
        Walk::List { elem, ty } => {
            let Some(items) = value.as_array_mut() else { return Ok(()) };
            let mut kept = Vec::with_capacity(items.len());
            for (i, mut item) in std::mem::take(items).into_iter().enumerate() {
                let pe = item_pe(&item, elem, &ty, i)?;
                if set.members().contains(&pe) {
                    continue;
                }
                if let Some(sub) = set.child(&pe) {
                    remove_at(&mut item, sub, elem, false)?;
                }
                kept.push(item);
            }
            *items = kept;
        }
        Walk::Leaf => {}
    }
    Ok(())
}

/// `Set.EnsureNamedFieldsAreMembers`: a struct field below which the set has members becomes a
/// member itself, so that removing the set removes such a field when nothing else keeps it.
fn ensure_named(set: &Set, node: Node<'_>, root: bool) -> Set {
    let mut out = set.clone();
    let (props, elem, list_elem) = match node.shape() {
        Shape::Struct { props, .. } => (Some(props), None, None),
        Shape::Map { elem, .. } => (None, Some(elem), None),
        Shape::List { elem, .. } => (None, None, Some(elem)),
        _ => (None, Some(Node::DEDUCED), None),
    };
    for (pe, sub) in set.children() {
        let child = match (pe, list_elem) {
            (_, Some(e)) => e,
            (Pe::Field(k), None) => child_node(props, elem, k, root),
            _ => Node::DEDUCED,
        };
        let ensured = ensure_named(sub, child, false);
        if let (Pe::Field(k), Some(p)) = (pe, props)
            && (p.contains_key(k) || (root && k == "metadata"))
            && !ensured.is_empty()
        {
            out.add_member(pe.clone());
        }
        *out.child_mut(pe.clone()) = ensured;
    }
    out
}

/// Who a `managedFields` entry belongs to: `BuildManagerInfo`'s identity.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Manager {
    pub(crate) name: String,
    /// `Apply` or `Update`.
    pub(crate) operation: String,
    pub(crate) api_version: String,
    pub(crate) subresource: String,
}

/// One `managedFields` entry.
#[derive(Debug, Clone)]
struct Entry {
    who: Manager,
    time: Option<String>,
    set: Set,
}

/// `metadata.managedFields` decoded; `None` when an entry cannot be read (then the field
/// manager starts afresh, as kube-apiserver does with managed fields it cannot decode).
fn decode(obj: &Value) -> Option<Vec<Entry>> {
    let Some(list) = obj["metadata"].get("managedFields") else { return Some(Vec::new()) };
    let Some(list) = list.as_array() else { return if list.is_null() { Some(Vec::new()) } else { None } };
    list.iter()
        .map(|e| {
            if e.get("fieldsType").and_then(Value::as_str).is_some_and(|t| t != "FieldsV1") {
                return None;
            }
            Some(Entry {
                who: Manager {
                    name: e["manager"].as_str().unwrap_or_default().into(),
                    operation: e["operation"].as_str()?.into(),
                    api_version: e["apiVersion"].as_str().unwrap_or_default().into(),
                    subresource: e["subresource"].as_str().unwrap_or_default().into(),
                },
                time: e["time"].as_str().map(str::to_string),
                set: match e.get("fieldsV1") {
                    Some(f) => Set::from_fields_v1(f)?,
                    None => Set::default(),
                },
            })
        })
        .collect()
}

/// `managedFields` as kube-apiserver writes them: sorted by operation (`Apply` first), time,
/// manager, apiVersion and subresource (`sortEncodedManagedFields`).
fn encode(entries: &mut [Entry]) -> Value {
    entries.sort_by(|a, b| {
        (
            a.who.operation.as_str(),
            a.time.as_deref().unwrap_or(""),
            &a.who.name,
            &a.who.api_version,
            &a.who.subresource,
        )
            .cmp(&(
                b.who.operation.as_str(),
                b.time.as_deref().unwrap_or(""),
                &b.who.name,
                &b.who.api_version,
                &b.who.subresource,
            ))
    });
    Value::Array(
        entries
            .iter()
            .map(|e| {
                let mut v = json!({
                    "manager": e.who.name,
                    "operation": e.who.operation,
                    "apiVersion": e.who.api_version,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": e.set.to_fields_v1(),
                });
                if let Some(t) = &e.time {
                    v["time"] = json!(t);
                }
                if !e.who.subresource.is_empty() {
                    v["subresource"] = json!(e.who.subresource);
                }
                v
            })
            .collect(),
    )
}

/// The paths no manager owns (`NewStripMetaManager`).
fn strip(set: &Set) -> Set {
    let mut s = Set::default();
    for p in [&["apiVersion"][..], &["kind"], &["metadata"]] {
        s.insert(&p.iter().map(|f| Pe::Field(f.to_string())).collect::<Vec<_>>());
    }
    for f in [
        "name",
        "namespace",
        "creationTimestamp",
        "selfLink",
        "uid",
        "clusterName",
        "generation",
        "managedFields",
        "resourceVersion",
    ] {
        s.insert(&[Pe::Field("metadata".into()), Pe::Field(f.into())]);
    }
    set.difference(&s)
}

/// What one write tracks: its manager, the endpoint and the reset fields of that endpoint.
#[derive(Debug, Clone)]
pub(crate) struct Write<'a> {
    /// The schema of the kind.
    pub(crate) node: Node<'a>,
    /// The manager's name.
    pub(crate) manager: String,
    /// The object's apiVersion.
    pub(crate) api_version: String,
    /// `status` for a write to the status subresource, else empty.
    pub(crate) subresource: String,
    /// The resource has a status subresource (its main endpoint leaves `status` alone).
    pub(crate) has_status: bool,
    /// Now, as `metav1.Time`.
    pub(crate) now: String,
}

impl Write<'_> {
    /// The fields this endpoint writes: `status` only on the status subresource, everything
    /// but `status` on the main endpoint of a resource that has one (the strategies'
    /// `GetResetFields`).
    fn tracked(&self, set: &Set) -> Set {
        if self.subresource == "status" {
            set.without_top_fields(|f| f == "status")
        } else if self.has_status {
            set.without_top_fields(|f| f != "status")
        } else {
            set.clone()
        }
    }

    fn who(&self, operation: &str) -> Manager {
        Manager {
            // `buildManagerInfo`: a write without a manager (and without a User-Agent) is
            // "unknown"'s.
            name: if self.manager.is_empty() { "unknown".into() } else { self.manager.clone() },
            operation: operation.into(),
            api_version: self.api_version.clone(),
            subresource: self.subresource.clone(),
        }
    }
}

fn without_managed_fields(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v["metadata"].as_object_mut() {
        m.remove("managedFields");
    }
    v
}

/// `Updater.Update` for a create (`live` is `None`), update or non-apply patch: sets
/// `new.metadata.managedFields`. Managed fields the client sent in `new` replace the stored
/// ones (that is how they are reset); on the status subresource they are ignored. When the
/// object cannot be typed (a list-map item without its key, say) the stored entries are kept
/// as they were, as kube-apiserver logs and skips tracking for such an object.
pub(crate) fn track_update(w: &Write<'_>, live: Option<&Value>, new: &mut Value) {
    let live_entries = live.and_then(decode).unwrap_or_default();
    let sent = new["metadata"].get("managedFields").filter(|m| m.as_array().is_some_and(|a| !a.is_empty()));
    let mut entries = match sent.and(decode(new)) {
        Some(e)
            if w.subresource.is_empty()
                && live.is_none_or(|l| l["metadata"].get("managedFields") != sent) =>
        {
            e
        }
        _ => live_entries.clone(),
    };
    let lhs = live.map(without_managed_fields).unwrap_or_else(|| json!({}));
    let rhs = without_managed_fields(new);
    let Ok(cmp) = compare(&lhs, &rhs, w.node) else {
        set_managed(new, live_entries);
        return;
    };
    // The endpoint's reset fields are ignored (the Updater's `IgnoreFilter`).
    let changed = w.tracked(&cmp.modified.union(&cmp.added));
    let removed = w.tracked(&cmp.removed);
    let me = w.who("Update");
    for e in entries.iter_mut().filter(|e| e.who != me) {
        e.set = e.set.difference(&changed).difference(&removed);
    }
    let mine = entries.iter().position(|e| e.who == me);
    let previous = mine.map(|i| entries[i].set.clone()).unwrap_or_default();
    let set = w.tracked(&strip(&previous.difference(&removed).union(&changed)));
    let time = if lhs != rhs || mine.is_none() {
        Some(w.now.clone())
    } else {
        mine.and_then(|i| entries[i].time.clone())
    };
    match mine {
        Some(i) => entries[i] = Entry { who: me, time, set },
        None => entries.push(Entry { who: me, time, set }),
    }
    entries.retain(|e| !e.set.is_empty());
    set_managed(new, entries);
}

fn set_managed(obj: &mut Value, mut entries: Vec<Entry>) {
    let Some(meta) = obj["metadata"].as_object_mut() else { return };
    if entries.is_empty() {
        meta.remove("managedFields");
    } else {
        meta.insert("managedFields".into(), encode(&mut entries));
    }
}

/// Why an apply failed.
#[derive(Debug)]
pub(crate) enum ApplyError {
    /// Fields other managers own would change (kube-apiserver's 409).
    Conflict(ApiError),
    /// The object or the configuration cannot be typed with the kind's schema.
    Type(TypeError),
}

/// `Updater.Apply`: the object after applying `config` as `w.manager` to `live` (for a create,
/// `live` is the empty object with only the name and namespace), managed fields included.
pub(crate) fn apply(w: &Write<'_>, live: &Value, config: &Value, force: bool) -> Result<Value, ApplyError> {
    let mut entries = decode(live).unwrap_or_default();
    let live = without_managed_fields(live);
    let mut config = without_managed_fields(config);
    // The endpoint's reset fields are not applied (`ResetFieldsStrategy`).
    if let Some(m) = config.as_object_mut() {
        if w.subresource == "status" {
            m.retain(|k, _| matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status"));
        } else if w.has_status {
            m.remove("status");
        }
    }
    let merged = merge(&live, &config, w.node).map_err(ApplyError::Type)?;
    let me = w.who("Apply");
    let mine = entries.iter().position(|e| e.who == me);
    let last = mine.map(|i| entries[i].set.clone());
    let set = w.tracked(&strip(&to_set(&config, w.node).map_err(ApplyError::Type)?));
    let previous_time = mine.and_then(|i| entries[i].time.clone());
    match mine {
        Some(i) => entries[i].set = set,
        None => entries.push(Entry { who: me.clone(), time: None, set }),
    }
    // `prune`: what this manager applied last time and no longer applies goes, unless some
    // manager (this one included) still owns it.
    let mut pruned = merged;
    if let Some(last) = last.filter(|l| !l.is_empty()) {
        let owned = entries.iter().fold(Set::default(), |acc, e| acc.union(&e.set));
        let gone = ensure_named(&last, w.node, true).difference(&ensure_named(&owned, w.node, true));
        remove(&mut pruned, &gone, w.node).map_err(ApplyError::Type)?;
    }
    let cmp = compare(&live, &pruned, w.node).map_err(ApplyError::Type)?;
    let changed = w.tracked(&cmp.modified.union(&cmp.added));
    let removed = w.tracked(&cmp.removed);
    let mut conflicts: Vec<(Manager, Option<String>, Set)> = Vec::new();
    for e in entries.iter().filter(|e| e.who != me) {
        let c = e.set.intersection(&changed);
        if !c.is_empty() {
            conflicts.push((e.who.clone(), e.time.clone(), c));
        }
    }
    if !force && !conflicts.is_empty() {
        return Err(ApplyError::Conflict(conflict_error(&conflicts)));
    }
    for e in entries.iter_mut().filter(|e| e.who != me) {
        e.set = e.set.difference(&changed).difference(&removed);
    }
    let changed_object = pruned != live;
    for e in entries.iter_mut().filter(|e| e.who == me) {
        e.time = if changed_object || previous_time.is_none() {
            Some(w.now.clone())
        } else {
            previous_time.clone()
        };
    }
    entries.retain(|e| !e.set.is_empty());
    set_managed(&mut pruned, entries);
    Ok(pruned)
}

/// `printManager`: an applier by name; an updater with its apiVersion. (`printManager` would
/// add the time, but the manager identity it is given never carries one.)
fn print_manager(who: &Manager) -> String {
    let mut s = format!("{:?}", who.name);
    if !who.subresource.is_empty() {
        s.push_str(&format!(" with subresource {:?}", who.subresource));
    }
    if who.operation == "Update" {
        s.push_str(&format!(" using {}", who.api_version));
    }
    s
}

/// `NewConflictError`: 409 Conflict, one `FieldManagerConflict` cause per field, and the
/// message `getConflictMessage` writes.
fn conflict_error(conflicts: &[(Manager, Option<String>, Set)]) -> ApiError {
    let mut causes = Vec::new();
    let mut all: Vec<(String, String)> = Vec::new();
    let mut sorted: Vec<&(Manager, Option<String>, Set)> = conflicts.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    for (who, _, set) in &sorted {
        let printed = print_manager(who);
        for p in set.paths() {
            let field = path_string(&p);
            causes.push(json!({"reason": "FieldManagerConflict", "message": format!("conflict with {printed}"), "field": field}));
            all.push((printed.clone(), field));
        }
    }
    let message = if all.len() == 1 {
        format!("Apply failed with 1 conflict: conflict with {}: {}", all[0].0, all[0].1)
    } else {
        let mut lines = Vec::new();
        let mut last: Option<&str> = None;
        for (m, f) in &all {
            if last != Some(m.as_str()) {
                lines.push(format!("conflicts with {m}:"));
                last = Some(m.as_str());
            }
            lines.push(format!("- {f}"));
        }
        format!("Apply failed with {} conflicts: {}", all.len(), lines.join("\n"))
    };
    ApiError::new(409, "Conflict", message, Some(json!({"causes": causes})))
}

/// The manager of a write without `fieldManager`: the User-Agent's product, up to the first
/// `/`, without unprintable characters, at most 128 bytes (`prefixFromUserAgent`).
pub(crate) fn manager_from_user_agent(user_agent: &str) -> String {
    let mut out = String::new();
    for c in user_agent.split('/').next().unwrap_or_default().chars().filter(|c| !c.is_control()) {
        if out.len() + c.len_utf8() > 128 {
            break;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::schema::builtin;

    fn pod() -> Node<'static> {
        Node::of(builtin("", "v1", "Pod").unwrap())
    }

    fn w(manager: &str) -> Write<'static> {
        Write {
            node: pod(),
            manager: manager.into(),
            api_version: "v1".into(),
            subresource: String::new(),
            has_status: true,
            now: "2026-01-01T00:00:00Z".into(),
        }
    }

    #[test]
    fn list_maps_merge_by_key_and_sets_by_value() {
        let live = json!({"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]},
            "metadata": {"finalizers": ["f1"]}});
        let cfg = json!({"spec": {"containers": [{"name": "b", "image": "z"}, {"name": "c", "image": "w"}]},
            "metadata": {"finalizers": ["f2", "f1"]}});
        let merged = merge(&live, &cfg, pod()).unwrap();
        assert_eq!(
            merged["spec"]["containers"],
            json!([{"name": "a", "image": "x"}, {"name": "b", "image": "z"}, {"name": "c", "image": "w"}])
        );
        assert_eq!(merged["metadata"]["finalizers"], json!(["f2", "f1"]));
    }

    #[test]
    fn apply_owns_prunes_and_conflicts() {
        let live = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}});
        let cfg = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "1", "b": "2"}},
            "spec": {"containers": [{"name": "c", "image": "i1"}]}});
        let one = apply(&w("one"), &live, &cfg, false).unwrap();
        assert_eq!(
            one["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:metadata": {"f:labels": {"f:a": {}, "f:b": {}}},
                "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:name": {}}}}})
        );
        // Another applier changing a label conflicts, then forces.
        let cfg2 =
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "9"}}});
        let Err(ApplyError::Conflict(e)) = apply(&w("two"), &one, &cfg2, false) else { panic!() };
        assert_eq!(
            e.status["message"],
            "Apply failed with 1 conflict: conflict with \"one\": .metadata.labels.a"
        );
        assert_eq!(e.status["details"]["causes"][0]["field"], ".metadata.labels.a");
        let two = apply(&w("two"), &one, &cfg2, true).unwrap();
        assert_eq!(two["metadata"]["labels"], json!({"a": "9", "b": "2"}));
        // The first applier drops label b: it goes (nobody else owns it); `a` is two's now.
        let cfg3 = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "i1"}]}});
        let three = apply(&w("one"), &two, &cfg3, false).unwrap();
        assert_eq!(three["metadata"]["labels"], json!({"a": "9"}));
        // Same value, no conflict: shared ownership.
        let cfg4 =
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "9"}}});
        assert!(apply(&w("three"), &three, &cfg4, false).is_ok());
    }

    #[test]
    fn updates_take_fields_from_appliers() {
        let live = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}});
        let cfg = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "1"}}});
        let applied = apply(&w("applier"), &live, &cfg, false).unwrap();
        let mut updated = applied.clone();
        updated["metadata"]["labels"]["a"] = json!("2");
        updated["metadata"]["annotations"] = json!({"x": "y"});
        track_update(&w("kubectl-edit"), Some(&applied), &mut updated);
        let mf = &updated["metadata"]["managedFields"];
        assert_eq!(mf.as_array().unwrap().len(), 1, "the applier lost its only field: {mf}");
        assert_eq!(mf[0]["operation"], "Update");
        assert_eq!(
            mf[0]["fieldsV1"],
            json!({"f:metadata": {"f:annotations": {".": {}, "f:x": {}}, "f:labels": {"f:a": {}}}})
        );
    }
}
