//! Deletion and garbage collection: kube-apiserver's side (DeleteOptions, the registry's
//! `Delete` with its `orphan` and `foregroundDeletion` finalizers) and kube-controller-manager's
//! garbage collector, which deletes dependents whose owners are gone, orphans the dependents of
//! an owner deleted with `propagationPolicy: Orphan`, and deletes those of an owner deleted in
//! the foreground before the owner itself.
//!
//! The apiserver half follows k8s.io/apiserver `registry/generic/registry/store.go` (`Delete`,
//! `updateForGracefulDeletionAndFinalizers`, `deletionFinalizersForGarbageCollection`,
//! `markAsDeleting`) and `registry/rest/delete.go` (`BeforeDelete`); it always runs, as in
//! kube-apiserver, whose `--enable-garbage-collector` is on by default. The collector follows
//! k8s.io/kubernetes `pkg/controller/garbagecollector` (`attemptToDeleteItem`,
//! `classifyReferences`, `processDeletingDependentsItem`, `orphanDependents`); it runs unless
//! [`Builder::garbage_collection`](crate::Builder::garbage_collection) turned it off, like an
//! envtest without kube-controller-manager.
//!
//! kube-controller-manager collects asynchronously, from its informers' events. Here the
//! collector runs right after every write, under the same lock, until there is nothing left
//! to do: the request's own response is what kube-apiserver answers (an owner deleted in the
//! foreground comes back with its `deletionTimestamp` and finalizer), and by the time the
//! client reads it the dependents are gone (DELETED events, each at its own resourceVersion,
//! after the write that caused them).

use std::collections::VecDeque;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::request::Query;
use crate::resources::ResourceDef;
use crate::status::ApiError;
use crate::store::{Change, Key, ResourceId, Store, StoredObject};
use crate::util::rfc3339_now;

/// `metav1.FinalizerOrphanDependents`.
const ORPHAN: &str = "orphan";
/// `metav1.FinalizerDeleteDependents`.
const FOREGROUND: &str = "foregroundDeletion";

/// `metav1.DeletionPropagation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Propagation {
    /// Orphan the dependents (the `orphan` finalizer until the collector has).
    Orphan,
    /// Delete the object now; the collector deletes the dependents afterwards.
    Background,
    /// Delete the dependents first (the `foregroundDeletion` finalizer until they are gone).
    Foreground,
}

/// The `metav1.DeleteOptions` this server acts on.
#[derive(Debug, Default, Clone)]
pub(crate) struct DeleteOptions {
    /// `propagationPolicy`.
    pub(crate) propagation: Option<Propagation>,
    /// The deprecated `orphanDependents`.
    pub(crate) orphan_dependents: Option<bool>,
    /// `preconditions.uid`.
    pub(crate) uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub(crate) resource_version: Option<String>,
    /// `dryRun: [All]`.
    pub(crate) dry_run: bool,
}

impl DeleteOptions {
    /// DeleteOptions as `DeleteResource` reads them: from the body when there is one (the query
    /// is then ignored), else from the query parameters.
    ///
    /// # Errors
    ///
    /// 400 for a body that is not DeleteOptions JSON or a query value that does not parse; 422
    /// (`ValidateDeleteOptions`) for an unknown propagation policy or both policies at once.
    pub(crate) fn parse(body: &[u8], query: &Query) -> Result<Self, ApiError> {
        let mut opts = DeleteOptions::default();
        let policy: Option<String>;
        if body.iter().all(u8::is_ascii_whitespace) {
            policy = query.get("propagationPolicy").map(str::to_string);
            opts.orphan_dependents = query.flag("orphanDependents")?;
            opts.dry_run = crate::validation::dry_run(&query.all("dryRun"), "DeleteOptions")?;
        } else {
            let v: Value = serde_json::from_slice(body).map_err(|e| {
                ApiError::bad_request(format!(
                    "the object provided is unrecognized (must be of type DeleteOptions): {e}"
                ))
            })?;
            let bad = |field: &str, ty: &str| {
                ApiError::bad_request(format!(
                    "json: cannot unmarshal into Go struct field DeleteOptions.{field} of type {ty}"
                ))
            };
            policy = match &v["propagationPolicy"] {
                Value::Null => None,
                Value::String(s) => Some(s.clone()),
                _ => return Err(bad("propagationPolicy", "v1.DeletionPropagation")),
            };
            opts.orphan_dependents = match &v["orphanDependents"] {
                Value::Null => None,
                Value::Bool(b) => Some(*b),
                _ => return Err(bad("orphanDependents", "bool")),
            };
            opts.uid = v["preconditions"]["uid"].as_str().map(str::to_string);
            opts.resource_version = v["preconditions"]["resourceVersion"].as_str().map(str::to_string);
            let values: Vec<&str> = v["dryRun"]
                .as_array()
                .map(|d| d.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            opts.dry_run = crate::validation::dry_run(&values, "DeleteOptions")?;
        }
        let mut causes = Vec::new();
        if let (Some(p), Some(_)) = (&policy, opts.orphan_dependents) {
            causes.push((
                "FieldValueInvalid",
                "propagationPolicy",
                format!("Invalid value: {p:?}: orphanDependents and deletionPropagation cannot be both set"),
            ));
        }
        opts.propagation = match policy.as_deref() {
            None => None,
            Some("Orphan") => Some(Propagation::Orphan),
            Some("Background") => Some(Propagation::Background),
            Some("Foreground") => Some(Propagation::Foreground),
            Some(other) => {
                causes.push((
                    "FieldValueNotSupported",
                    "propagationPolicy",
                    format!(
                        "Unsupported value: {other:?}: supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
                    ),
                ));
                None
            }
        };
        if !causes.is_empty() {
            return Err(ApiError::invalid("meta.k8s.io", "DeleteOptions", "", &causes));
        }
        Ok(opts)
    }
}

/// What a delete did.
#[derive(Debug)]
pub(crate) enum Deleted {
    /// Finalizers keep the object: it is stored with a `deletionTimestamp` (or was already).
    Marked(Arc<StoredObject>),
    /// It is gone; its last state.
    Gone(Arc<StoredObject>),
    /// A dry run: what the object would be (marked), or its current state (deleted at once).
    DryRun { object: Value, gone: bool },
}

fn finalizers(v: &Value) -> Vec<String> {
    v["metadata"]["finalizers"]
        .as_array()
        .map(|f| f.iter().filter_map(|s| s.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

fn set_finalizers(v: &mut Value, finalizers: Vec<String>) {
    if finalizers.is_empty() {
        if let Some(meta) = v["metadata"].as_object_mut() {
            meta.remove("finalizers");
        }
    } else {
        v["metadata"]["finalizers"] = json!(finalizers);
    }
}

fn deleting(v: &Value) -> bool {
    v["metadata"].get("deletionTimestamp").is_some_and(|t| !t.is_null())
}

/// `deletionFinalizersForGarbageCollection`: the finalizers after a delete with `opts`, the
/// garbage collector's two replaced as the options (or, without options, the object's own
/// finalizers) ask.
fn finalizers_for_delete(current: &[String], opts: &DeleteOptions) -> Vec<String> {
    // shouldOrphanDependents / shouldDeleteDependents: explicit options first, then the
    // finalizer already on the object; every served resource's default policy is to delete
    // dependents in the background.
    let (orphan, foreground) = match (opts.orphan_dependents, opts.propagation) {
        (Some(o), _) => (o, false),
        (None, Some(Propagation::Orphan)) => (true, false),
        (None, Some(Propagation::Foreground)) => (false, true),
        (None, Some(Propagation::Background)) => (false, false),
        (None, None) => {
            let first = current.iter().find(|f| *f == ORPHAN || *f == FOREGROUND);
            (first.is_some_and(|f| f == ORPHAN), first.is_some_and(|f| f == FOREGROUND))
        }
    };
    let mut out: Vec<String> = current.iter().filter(|f| *f != ORPHAN && *f != FOREGROUND).cloned().collect();
    if orphan {
        out.push(ORPHAN.into());
    }
    if foreground {
        out.push(FOREGROUND.into());
    }
    let same =
        |a: &[String], b: &[String]| a.iter().all(|x| b.contains(x)) && b.iter().all(|x| a.contains(x));
    if same(&out, current) {
        // Nothing to change: keep the object's order.
        return current.to_vec();
    }
    out
}

/// The registry's `Delete` of the object at `key`: preconditions, then either an update that
/// marks it deleting (finalizers pending, the garbage collector's included) or its removal.
///
/// # Errors
///
/// 404 when absent; 409 for a failed precondition (`BeforeDelete`'s wording).
pub(crate) fn delete(
    store: &mut Store,
    res: ResourceId,
    def: &ResourceDef,
    key: &Key,
    opts: &DeleteOptions,
) -> Result<Deleted, ApiError> {
    let old = store.get(res, key).ok_or_else(|| ApiError::not_found(def, &key.1))?;
    let mut value = old.value();
    // BeforeDelete names the resource by its kind in these conflicts.
    let conflict = |why: String| {
        let mut details = json!({"name": key.1, "kind": def.kind});
        if !def.group.is_empty() {
            details["group"] = json!(def.group);
        }
        let what =
            if def.group.is_empty() { def.kind.clone() } else { format!("{}.{}", def.kind, def.group) };
        ApiError::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {what} \"{}\": {why}", key.1),
            Some(details),
        )
    };
    let uid = value["metadata"]["uid"].as_str().unwrap_or_default().to_string();
    if let Some(want) = &opts.uid
        && *want != uid
    {
        return Err(conflict(format!(
            "the UID in the precondition ({want}) does not match the UID in record ({uid}). The object might have been deleted and then recreated"
        )));
    }
    if let Some(want) = &opts.resource_version
        && *want != old.rv.to_string()
    {
        return Err(conflict(format!(
            "the ResourceVersion in the precondition ({want}) does not match the ResourceVersion in record ({}). The object might have been modified",
            old.rv
        )));
    }
    let current = finalizers(&value);
    let wanted = finalizers_for_delete(&current, opts);
    if !wanted.is_empty() {
        // markAsDeleting: the first time, a deletionTimestamp, a zero grace period and (for
        // kinds that keep one) a generation bump.
        let changed = wanted != current || !deleting(&value);
        if !deleting(&value) {
            let meta = &mut value["metadata"];
            if let Some(g) = meta["generation"].as_i64().filter(|g| *g > 0) {
                meta["generation"] = json!(g + 1);
            }
            meta["deletionTimestamp"] = json!(rfc3339_now());
        }
        value["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        set_finalizers(&mut value, wanted);
        if opts.dry_run {
            return Ok(Deleted::DryRun { object: value, gone: false });
        }
        if !changed {
            return Ok(Deleted::Marked(old));
        }
        return Ok(Deleted::Marked(store.put(res, value)));
    }
    if opts.dry_run {
        return Ok(Deleted::DryRun { object: value, gone: true });
    }
    if def.is_crd() {
        // The CRD finalizer's work: the custom objects go first, then the CRD.
        crate::crd::remove(store, &value);
    }
    let last = store.remove(res, key).ok_or_else(|| ApiError::not_found(def, &key.1))?;
    Ok(Deleted::Gone(last))
}

/// Stores an update of the object at `key`; one that empties the finalizers of an object being
/// deleted deletes it instead (`ShouldDeleteDuringUpdate`, then `deleteWithoutFinalizers`): a
/// single DELETED event carrying the last stored state. Returns the stored object, or `None`
/// when it was deleted.
pub(crate) fn update_or_finish(
    store: &mut Store,
    res: ResourceId,
    def: &ResourceDef,
    key: &Key,
    new: Value,
) -> Option<Arc<StoredObject>> {
    if deleting(&new) && finalizers(&new).is_empty() {
        if def.is_crd() {
            crate::crd::remove(store, &new);
        }
        store.remove(res, key);
        return None;
    }
    Some(store.put(res, new))
}

/// Runs the garbage collector until it has nothing left to do (see the module docs). Does
/// nothing while it is off.
pub(crate) fn collect(store: &mut Store) {
    // Every step deletes an object, drops an owner reference or a finalizer, so the work is
    // finite; the bound is a guard against a bug turning into a hang.
    let mut budget = 1_000_000usize;
    while let Some(change) = store.journal.as_mut().and_then(VecDeque::pop_front) {
        budget -= 1;
        if budget == 0 {
            tracing::error!("kcache-testserver: garbage collection did not settle; dropping its queue");
            if let Some(j) = store.journal.as_mut() {
                j.clear();
            }
            return;
        }
        match change {
            Change::Put(res, key) => {
                let Some(obj) = store.get(res, &key) else { continue };
                if obj.gc_finalizing {
                    finalize(store, res, &key);
                } else if !obj.owners.is_empty() {
                    attempt_to_delete(store, res, &key);
                }
            }
            Change::Removed(last) => {
                let value = last.value();
                let uid = value["metadata"]["uid"].as_str().unwrap_or_default();
                // Its dependents may have lost their last owner.
                for (dres, dkey) in store.dependents_of(uid) {
                    attempt_to_delete(store, dres, &dkey);
                }
                // An owner deleting its dependents in the foreground may be waiting for it.
                if !last.owners.is_empty() {
                    let ns = last.namespace.clone();
                    for r in owner_refs(&value) {
                        if let Some((ores, okey)) = resolve(store, &r, &ns)
                            && let Some(owner) = store.get(ores, &okey)
                            && owner.gc_finalizing
                        {
                            finalize(store, ores, &okey);
                        }
                    }
                }
            }
        }
    }
}

/// One `metadata.ownerReferences` entry.
#[derive(Debug, Clone)]
struct OwnerRef {
    group: String,
    kind: String,
    name: String,
    uid: String,
    block: bool,
}

fn owner_refs(v: &Value) -> Vec<OwnerRef> {
    v["metadata"]["ownerReferences"]
        .as_array()
        .map(|refs| {
            refs.iter()
                .map(|r| {
                    let api_version = r["apiVersion"].as_str().unwrap_or_default();
                    OwnerRef {
                        group: api_version.rsplit_once('/').map(|(g, _)| g.to_string()).unwrap_or_default(),
                        kind: r["kind"].as_str().unwrap_or_default().into(),
                        name: r["name"].as_str().unwrap_or_default().into(),
                        uid: r["uid"].as_str().unwrap_or_default().into(),
                        block: r["blockOwnerDeletion"].as_bool().unwrap_or(false),
                    }
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Where the owner an owner reference names would be stored: a namespaced owner lives in its
/// dependent's namespace. `None` when the kind is not served (the collector cannot map it and
/// leaves the dependent alone) or a cluster-scoped dependent names a namespaced owner.
fn resolve(store: &Store, r: &OwnerRef, dependent_ns: &str) -> Option<(ResourceId, Key)> {
    let res = store.lookup_kind(&r.group, &r.kind)?;
    let ns = if store.resources[res].def.namespaced {
        if dependent_ns.is_empty() {
            return None;
        }
        dependent_ns.to_string()
    } else {
        String::new()
    };
    Some((res, (ns, r.name.clone())))
}

/// How an owner reference stands (`classifyReferences`).
#[derive(Debug, PartialEq, Eq)]
enum Owner {
    /// Exists and is not deleting its dependents (or cannot be looked up).
    Solid,
    /// Absent, or another object of the same name (another uid).
    Dangling,
    /// Being deleted in the foreground.
    Waiting,
}

fn classify(store: &Store, r: &OwnerRef, dependent_ns: &str) -> Owner {
    let Some((res, key)) = resolve(store, r, dependent_ns) else { return Owner::Solid };
    let Some(owner) = store.get(res, &key) else { return Owner::Dangling };
    let v = owner.value();
    if v["metadata"]["uid"].as_str() != Some(r.uid.as_str()) {
        return Owner::Dangling;
    }
    if deleting(&v) && finalizers(&v).iter().any(|f| f == FOREGROUND) {
        return Owner::Waiting;
    }
    Owner::Solid
}

/// `attemptToDeleteItem` for an object with owner references.
fn attempt_to_delete(store: &mut Store, res: ResourceId, key: &Key) {
    let Some(obj) = store.get(res, key) else { return };
    let mut value = obj.value();
    if deleting(&value) {
        if finalizers(&value).iter().any(|f| f == FOREGROUND) {
            finalize(store, res, key);
        }
        return;
    }
    let refs = owner_refs(&value);
    if refs.is_empty() {
        return;
    }
    let classes: Vec<Owner> = refs.iter().map(|r| classify(store, r, &key.0)).collect();
    let def = store.resources[res].def.clone();
    if classes.contains(&Owner::Solid) {
        // Keep the object; drop the references to owners that are gone or going.
        let drop: Vec<&str> = refs
            .iter()
            .zip(&classes)
            .filter(|(_, c)| **c != Owner::Solid)
            .map(|(r, _)| r.uid.as_str())
            .collect();
        if !drop.is_empty() {
            remove_owner_refs(&mut value, &drop);
            update_or_finish(store, res, &def, key, value);
        }
        return;
    }
    let uid = value["metadata"]["uid"].as_str().unwrap_or_default().to_string();
    let propagation = if classes.contains(&Owner::Waiting) && store.has_dependents(&uid) {
        // An owner waits for its dependents, and this one has its own: delete it in the
        // foreground too, so the owner waits for the whole tree.
        Propagation::Foreground
    } else {
        let f = finalizers(&value);
        if f.iter().any(|f| f == ORPHAN) {
            Propagation::Orphan
        } else if f.iter().any(|f| f == FOREGROUND) {
            Propagation::Foreground
        } else {
            Propagation::Background
        }
    };
    let opts = DeleteOptions { propagation: Some(propagation), uid: Some(uid), ..Default::default() };
    let _ = delete(store, res, &def, key, &opts);
}

fn remove_owner_refs(value: &mut Value, uids: &[&str]) {
    let Some(meta) = value["metadata"].as_object_mut() else { return };
    let Some(Value::Array(refs)) = meta.get_mut("ownerReferences") else { return };
    refs.retain(|r| !uids.contains(&r["uid"].as_str().unwrap_or_default()));
    if refs.is_empty() {
        meta.remove("ownerReferences");
    }
}

/// The collector's work on an object being deleted with one of its finalizers: orphan the
/// dependents, or delete them first (`processDeletingDependentsItem`), then drop the finalizer.
fn finalize(store: &mut Store, res: ResourceId, key: &Key) {
    let Some(obj) = store.get(res, key) else { return };
    let value = obj.value();
    if !deleting(&value) {
        return;
    }
    let uid = value["metadata"]["uid"].as_str().unwrap_or_default().to_string();
    let f = finalizers(&value);
    if f.iter().any(|f| f == ORPHAN) {
        for (dres, dkey) in store.dependents_of(&uid) {
            if let Some(dep) = store.get(dres, &dkey) {
                let mut dv = dep.value();
                remove_owner_refs(&mut dv, &[uid.as_str()]);
                let ddef = store.resources[dres].def.clone();
                update_or_finish(store, dres, &ddef, &dkey, dv);
            }
        }
        remove_finalizer(store, res, key, ORPHAN);
        return;
    }
    if f.iter().any(|f| f == FOREGROUND) {
        // Every dependent is tried (the graph builder enqueues them all when the owner starts
        // deleting its dependents); the owner waits only for those that block it.
        for (dres, dkey) in store.dependents_of(&uid) {
            attempt_to_delete(store, dres, &dkey);
        }
        let blocking = store.dependents_of(&uid).into_iter().any(|(dres, dkey)| {
            store
                .get(dres, &dkey)
                .is_some_and(|d| owner_refs(&d.value()).iter().any(|r| r.uid == uid && r.block))
        });
        if !blocking {
            remove_finalizer(store, res, key, FOREGROUND);
        }
    }
}

fn remove_finalizer(store: &mut Store, res: ResourceId, key: &Key, finalizer: &str) {
    let Some(obj) = store.get(res, key) else { return };
    let mut value = obj.value();
    let f: Vec<String> = finalizers(&value).into_iter().filter(|x| x != finalizer).collect();
    set_finalizers(&mut value, f);
    let def = store.resources[res].def.clone();
    update_or_finish(store, res, &def, key, value);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(p: Option<Propagation>, orphan: Option<bool>) -> DeleteOptions {
        DeleteOptions { propagation: p, orphan_dependents: orphan, ..Default::default() }
    }

    #[test]
    fn finalizers_follow_options_then_the_object() {
        let none: Vec<String> = vec![];
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(finalizers_for_delete(&none, &opts(None, None)), none);
        assert_eq!(
            finalizers_for_delete(&none, &opts(Some(Propagation::Foreground), None)),
            s(&[FOREGROUND])
        );
        assert_eq!(
            finalizers_for_delete(&s(&["a"]), &opts(Some(Propagation::Orphan), None)),
            s(&["a", ORPHAN])
        );
        assert_eq!(finalizers_for_delete(&s(&[ORPHAN]), &opts(Some(Propagation::Background), None)), none);
        assert_eq!(finalizers_for_delete(&s(&[ORPHAN, "a"]), &opts(None, None)), s(&[ORPHAN, "a"]));
        assert_eq!(finalizers_for_delete(&s(&[FOREGROUND]), &opts(None, Some(true))), s(&[ORPHAN]));
        assert_eq!(finalizers_for_delete(&s(&[FOREGROUND]), &opts(None, Some(false))), none);
    }

    #[test]
    fn delete_options_are_validated() {
        let q = Query::parse("");
        let e = DeleteOptions::parse(br#"{"propagationPolicy":"Sideways"}"#, &q).unwrap_err();
        assert_eq!(e.code, 422);
        assert_eq!(
            e.status["message"],
            "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"Sideways\": \
             supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
        );
        let e = DeleteOptions::parse(br#"{"propagationPolicy":"Orphan","orphanDependents":true}"#, &q)
            .unwrap_err();
        assert_eq!(
            e.status["message"],
            "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Invalid value: \"Orphan\": \
             orphanDependents and deletionPropagation cannot be both set"
        );
        let o = DeleteOptions::parse(b"", &Query::parse("propagationPolicy=Foreground&dryRun=All")).unwrap();
        assert_eq!((o.propagation, o.dry_run), (Some(Propagation::Foreground), true));
        // A body wins over the query.
        let o = DeleteOptions::parse(b"{}", &Query::parse("propagationPolicy=Foreground")).unwrap();
        assert_eq!(o.propagation, None);
    }
}
