//! The object store: one global, strictly increasing resourceVersion (like etcd's revision),
//! objects kept as serialized JSON bytes, and a bounded event history that watches replay.
//!
//! Objects are stored as [`Bytes`] of their final JSON (resourceVersion included), so a list or a
//! watch frame is built by concatenating shared buffers, never by re-serialising; only labels are
//! kept parsed, for selectors. Writes parse the stored bytes again, which is the cheap side for a
//! read-mostly test server. A built-in object's protobuf form is written the first time a client
//! asks for it and kept with that version ([`StoredObject::protobuf`]), so protobuf reads are
//! concatenations too.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use kcache_protobuf::MessageType;
use serde_json::Value;

use crate::resources::ResourceDef;

/// Index of a resource in [`Store::resources`].
pub(crate) type ResourceId = usize;

/// `(namespace, name)`; the namespace is empty for cluster-scoped objects. The order of this tuple
/// is the order of etcd keys, which is the order lists are returned in.
pub(crate) type Key = (String, String);

/// One stored version of an object.
#[derive(Debug)]
pub(crate) struct StoredObject {
    /// Namespace, empty for cluster-scoped objects.
    pub(crate) namespace: String,
    /// Name.
    pub(crate) name: String,
    /// `metadata.uid` (`""` if unset), for shard selectors.
    pub(crate) uid: Box<str>,
    /// The object's JSON, with `metadata.resourceVersion` equal to [`Self::rv`]. When it has
    /// both, `kind` and `apiVersion` come first, as Go writes its `TypeMeta`:
    /// `{"kind":..,"apiVersion":..,<the rest>}` (see [`Self::list_item`]).
    pub(crate) bytes: Bytes,
    /// How many bytes after the opening `{` of [`Self::bytes`] hold `"kind":..,"apiVersion":..,`
    /// (0 when the object lacks either): what a built-in list item leaves out.
    type_meta: u32,
    /// `metadata.labels`, for label selectors.
    pub(crate) labels: Vec<(String, String)>,
    /// The resourceVersion in `bytes`.
    pub(crate) rv: u64,
    /// The uids of its `metadata.ownerReferences` (empty for most objects).
    pub(crate) owners: Box<[Box<str>]>,
    /// It carries a `deletionTimestamp` and one of the garbage collector's finalizers
    /// (`foregroundDeletion` or `orphan`), so the collector has work on it.
    pub(crate) gc_finalizing: bool,
    /// The object in Kubernetes' protobuf, written the first time a client asks for it
    /// ([`crate::response::stored_protobuf`]): a stored version never changes, so every later
    /// list, get or watch event that sends it as protobuf reuses these bytes, as it reuses
    /// [`Self::bytes`] for JSON.
    pub(crate) protobuf: OnceLock<ProtobufForm>,
}

/// A stored object as one protobuf message: what [`StoredObject::protobuf`] holds.
#[derive(Debug, Clone)]
pub(crate) struct ProtobufForm {
    /// The message it was written as (its kind's).
    pub(crate) message: MessageType,
    /// The object in its envelope, as a get or a watch event sends it.
    pub(crate) envelope: Bytes,
    /// The bare message, a list's item: a slice of [`Self::envelope`].
    pub(crate) raw: Bytes,
}

impl StoredObject {
    /// Builds a stored object from its JSON, which must already carry its resourceVersion.
    pub(crate) fn from_value(value: &Value, rv: u64) -> Self {
        let (bytes, type_meta) = serialize(value);
        let meta = &value["metadata"];
        let labels = meta["labels"]
            .as_object()
            .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect())
            .unwrap_or_default();
        let owners = meta["ownerReferences"]
            .as_array()
            .map(|refs| refs.iter().filter_map(|r| Some(Box::from(r["uid"].as_str()?))).collect())
            .unwrap_or_default();
        let gc_finalizing = meta.get("deletionTimestamp").is_some_and(|t| !t.is_null())
            && meta["finalizers"]
                .as_array()
                .is_some_and(|f| f.iter().any(|f| f == "foregroundDeletion" || f == "orphan"));
        Self {
            owners,
            gc_finalizing,
            namespace: meta["namespace"].as_str().unwrap_or_default().to_string(),
            name: meta["name"].as_str().unwrap_or_default().to_string(),
            uid: meta["uid"].as_str().unwrap_or_default().into(),
            bytes: Bytes::from(bytes),
            type_meta,
            labels,
            rv,
            protobuf: OnceLock::new(),
        }
    }

    /// The object as an item of a built-in kind's list: without `kind` and `apiVersion`, as
    /// kube-apiserver writes the items of a typed Go list (their `TypeMeta` is empty; only the
    /// list has one). Custom resources' list items are `Unstructured` and keep theirs: they are
    /// listed as [`Self::bytes`]. Two slices of the stored bytes, `{` and the rest, so a list
    /// is still built by concatenation.
    pub(crate) fn list_item(&self) -> [&[u8]; 2] {
        let skip = 1 + self.type_meta as usize;
        [&self.bytes[..1], &self.bytes[skip..]]
    }

    /// The object parsed back into a JSON value.
    pub(crate) fn value(&self) -> Value {
        serde_json::from_slice(&self.bytes).unwrap_or(Value::Null)
    }

    /// A copy whose `metadata.resourceVersion` is `rv` (for DELETED events, which carry the last
    /// state of the object at the resourceVersion of the deletion).
    pub(crate) fn with_rv(&self, rv: u64) -> StoredObject {
        let mut value = self.value();
        value["metadata"]["resourceVersion"] = Value::String(rv.to_string());
        StoredObject::from_value(&value, rv)
    }
}

/// An object's JSON with `kind` and `apiVersion` first (when it has both, as strings, and other
/// fields), and how many bytes after the `{` they take.
fn serialize(value: &Value) -> (Vec<u8>, u32) {
    let Some(map) = value.as_object() else { return (serde_json::to_vec(value).unwrap_or_default(), 0) };
    let (Some(Value::String(kind)), Some(Value::String(api_version))) =
        (map.get("kind"), map.get("apiVersion"))
    else {
        return (serde_json::to_vec(value).unwrap_or_default(), 0);
    };
    if map.len() < 3 {
        return (serde_json::to_vec(value).unwrap_or_default(), 0);
    }
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"{\"kind\":");
    let _ = serde_json::to_writer(&mut out, kind);
    out.extend_from_slice(b",\"apiVersion\":");
    let _ = serde_json::to_writer(&mut out, api_version);
    out.push(b',');
    let type_meta = u32::try_from(out.len() - 1).unwrap_or(0);
    let mut first = true;
    for (k, v) in map.iter().filter(|(k, _)| *k != "kind" && *k != "apiVersion") {
        if !first {
            out.push(b',');
        }
        first = false;
        let _ = serde_json::to_writer(&mut out, k);
        out.push(b':');
        let _ = serde_json::to_writer(&mut out, v);
    }
    out.push(b'}');
    (out, type_meta)
}

/// Type of a stored event (BOOKMARK and ERROR exist only on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventType {
    /// Created.
    Added,
    /// Updated.
    Modified,
    /// Deleted; the object is the last state at the deletion's resourceVersion.
    Deleted,
}

/// One change, as the watch cache keeps it.
#[derive(Debug)]
pub(crate) struct Event {
    /// resourceVersion of the change.
    pub(crate) rv: u64,
    /// Which resource changed.
    pub(crate) resource: ResourceId,
    /// What happened.
    pub(crate) kind: EventType,
    /// The new state (for DELETED: the last state, at `rv`).
    pub(crate) object: Arc<StoredObject>,
    /// The state before the change (`None` for ADDED).
    pub(crate) prev: Option<Arc<StoredObject>>,
}

/// Objects of one resource.
#[derive(Debug)]
pub(crate) struct ResourceState {
    /// The definition served.
    pub(crate) def: ResourceDef,
    /// Current objects, in key order.
    pub(crate) objects: BTreeMap<Key, Arc<StoredObject>>,
    /// Whether requests reach it. A deleted CRD's resource stays in [`Store::resources`] (so
    /// ids stay valid) but is no longer served, and has no objects.
    pub(crate) served: bool,
    /// How many times it stopped being served; a watch opened before a removal ends when it
    /// sees this change.
    pub(crate) removals: u64,
}

/// A requested resourceVersion is no longer in the history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TooOld {
    /// The oldest resourceVersion that can still be served (`history_start`).
    pub(crate) oldest: u64,
}

/// The whole state, behind one lock.
#[derive(Debug)]
pub(crate) struct Store {
    /// The current resourceVersion: that of the last write (1 when empty).
    pub(crate) rv: u64,
    /// Served resources; a [`ResourceId`] indexes this. Never shrinks, so ids stay valid.
    pub(crate) resources: Vec<ResourceState>,
    /// Events in resourceVersion order, at most `history_cap`.
    history: VecDeque<Arc<Event>>,
    /// Maximum history length.
    history_cap: usize,
    /// Invariant: every event with `rv > history_start` is in `history`. A watch or consistent
    /// read can start from any resourceVersion `>= history_start`.
    pub(crate) history_start: u64,
    /// Objects with owner references, by owner uid: the garbage collector's dependency graph.
    dependents: HashMap<Box<str>, BTreeSet<(ResourceId, Key)>>,
    /// Changes the garbage collector has not looked at yet; `None` while it is off.
    pub(crate) journal: Option<VecDeque<Change>>,
}

/// A change the garbage collector looks at, as its graph builder sees watch events.
#[derive(Debug)]
pub(crate) enum Change {
    /// The object at this key was created or updated.
    Put(ResourceId, Key),
    /// This object was deleted (its last state).
    Removed(Arc<StoredObject>),
}

impl Store {
    /// An empty store serving the built-in resources; `gc` keeps the journal the garbage
    /// collector reads.
    pub(crate) fn new(history_cap: usize, gc: bool) -> Self {
        let mut store = Self {
            rv: 1,
            resources: Vec::new(),
            history: VecDeque::new(),
            history_cap: history_cap.max(1),
            history_start: 1,
            dependents: HashMap::new(),
            journal: gc.then(VecDeque::new),
        };
        for def in ResourceDef::builtins() {
            store.register(def);
        }
        store
    }

    /// Adds (or replaces the definition of) a resource, serving it again if it was removed.
    pub(crate) fn register(&mut self, def: ResourceDef) -> ResourceId {
        // The served entry if there is one (a CRD whose storage version changed can leave an
        // unserved entry behind with the same group/version/resource), else an unserved one.
        let known = self.lookup(&def.group, &def.version, &def.resource).or_else(|| {
            self.resources.iter().position(|r| {
                r.def.group == def.group && r.def.version == def.version && r.def.resource == def.resource
            })
        });
        if let Some(id) = known {
            self.resources[id].def = def;
            self.resources[id].served = true;
            return id;
        }
        self.resources.push(ResourceState { def, objects: BTreeMap::new(), served: true, removals: 0 });
        self.resources.len() - 1
    }

    /// Replaces the definition of a served resource, which may change its version: its objects
    /// then carry the new `apiVersion` (rewritten in place, without events, as kube-apiserver
    /// converts stored custom resources on read).
    pub(crate) fn redefine(&mut self, id: ResourceId, def: ResourceDef) {
        let state = &mut self.resources[id];
        let api_version = def.api_version();
        let rewrite = state.def.api_version() != api_version;
        state.def = def;
        if rewrite {
            for obj in state.objects.values_mut() {
                let mut value = obj.value();
                value["apiVersion"] = Value::String(api_version.clone());
                *obj = Arc::new(StoredObject::from_value(&value, obj.rv));
            }
        }
    }

    /// Stops serving a resource: every object is deleted (a DELETED event each), then requests
    /// no longer reach it and open watches end.
    pub(crate) fn unregister(&mut self, id: ResourceId) {
        let keys: Vec<Key> = self.resources[id].objects.keys().cloned().collect();
        for key in keys {
            self.remove(id, &key);
        }
        self.resources[id].served = false;
        self.resources[id].removals += 1;
    }

    /// Finds a served resource.
    pub(crate) fn lookup(&self, group: &str, version: &str, resource: &str) -> Option<ResourceId> {
        self.resources.iter().position(|r| {
            r.served && r.def.group == group && r.def.version == version && r.def.resource == resource
        })
    }

    /// The current object at `key`.
    pub(crate) fn get(&self, res: ResourceId, key: &Key) -> Option<Arc<StoredObject>> {
        self.resources[res].objects.get(key).cloned()
    }

    /// Writes `value` at a new resourceVersion (set into `metadata.resourceVersion`) and records
    /// the event. Returns the stored object.
    pub(crate) fn put(&mut self, res: ResourceId, mut value: Value) -> Arc<StoredObject> {
        self.rv += 1;
        let rv = self.rv;
        if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
        }
        let obj = Arc::new(StoredObject::from_value(&value, rv));
        let key = (obj.namespace.clone(), obj.name.clone());
        let prev = self.resources[res].objects.insert(key.clone(), obj.clone());
        if let Some(p) = &prev {
            self.unindex_owners(res, &key, &p.owners);
        }
        for owner in &obj.owners {
            self.dependents.entry(owner.clone()).or_default().insert((res, key.clone()));
        }
        if let Some(journal) = &mut self.journal {
            journal.push_back(Change::Put(res, key));
        }
        let kind = if prev.is_some() { EventType::Modified } else { EventType::Added };
        self.record(Event { rv, resource: res, kind, object: obj.clone(), prev });
        obj
    }

    /// Deletes the object at `key` at a new resourceVersion; returns its last state (at that
    /// resourceVersion), or `None` when absent.
    pub(crate) fn remove(&mut self, res: ResourceId, key: &Key) -> Option<Arc<StoredObject>> {
        let prev = self.resources[res].objects.remove(key)?;
        self.unindex_owners(res, key, &prev.owners);
        if let Some(journal) = &mut self.journal {
            journal.push_back(Change::Removed(prev.clone()));
        }
        self.rv += 1;
        let rv = self.rv;
        let last = Arc::new(prev.with_rv(rv));
        self.record(Event {
            rv,
            resource: res,
            kind: EventType::Deleted,
            object: last.clone(),
            prev: Some(prev),
        });
        Some(last)
    }

    fn unindex_owners(&mut self, res: ResourceId, key: &Key, owners: &[Box<str>]) {
        for owner in owners {
            if let Some(deps) = self.dependents.get_mut(owner) {
                deps.remove(&(res, key.clone()));
                if deps.is_empty() {
                    self.dependents.remove(owner);
                }
            }
        }
    }

    /// The objects that name `uid` among their owners.
    pub(crate) fn dependents_of(&self, uid: &str) -> Vec<(ResourceId, Key)> {
        self.dependents.get(uid).map(|d| d.iter().cloned().collect()).unwrap_or_default()
    }

    /// Whether any object names `uid` among its owners.
    pub(crate) fn has_dependents(&self, uid: &str) -> bool {
        self.dependents.contains_key(uid)
    }

    /// A served resource by API group and kind (any version), as the garbage collector's
    /// REST mapper resolves an owner reference.
    pub(crate) fn lookup_kind(&self, group: &str, kind: &str) -> Option<ResourceId> {
        self.resources.iter().position(|r| r.served && r.def.group == group && r.def.kind == kind)
    }

    fn record(&mut self, event: Event) {
        self.history.push_back(Arc::new(event));
        while self.history.len() > self.history_cap {
            if let Some(old) = self.history.pop_front() {
                self.history_start = old.rv;
            }
        }
    }

    /// Drops the whole history: afterwards only the current resourceVersion can be watched from.
    pub(crate) fn compact(&mut self) {
        self.history.clear();
        self.history_start = self.rv;
    }

    /// Changes the history size, trimming if needed.
    pub(crate) fn set_history_cap(&mut self, cap: usize) {
        self.history_cap = cap.max(1);
        while self.history.len() > self.history_cap {
            if let Some(old) = self.history.pop_front() {
                self.history_start = old.rv;
            }
        }
    }

    /// Up to `max` events with `rv > from`, or [`TooOld`] when some of them were dropped.
    pub(crate) fn events_since(&self, from: u64, max: usize) -> Result<Vec<Arc<Event>>, TooOld> {
        if from < self.history_start {
            return Err(TooOld { oldest: self.history_start });
        }
        let start = self.history.partition_point(|e| e.rv <= from);
        Ok(self.history.range(start..).take(max).cloned().collect())
    }

    /// The objects of `res` (in `namespace` if given) with keys after `after`, in key order, as
    /// they were at resourceVersion `at` (reconstructed from the history when older than now).
    pub(crate) fn list_at(
        &self,
        res: ResourceId,
        namespace: Option<&str>,
        after: Option<&Key>,
        at: u64,
    ) -> Result<Vec<Arc<StoredObject>>, TooOld> {
        if at < self.history_start {
            return Err(TooOld { oldest: self.history_start });
        }
        let objects = &self.resources[res].objects;
        let in_scope = |k: &Key| namespace.is_none_or(|ns| k.0 == ns) && after.is_none_or(|a| k > a);
        let current: Vec<Arc<StoredObject>> = match (namespace, after) {
            (_, Some(a)) => objects
                .range::<Key, _>((std::ops::Bound::Excluded(a.clone()), std::ops::Bound::Unbounded))
                .take_while(|(k, _)| namespace.is_none_or(|ns| k.0 == ns))
                .map(|(_, v)| v.clone())
                .collect(),
            (Some(ns), None) => objects
                .range::<Key, _>((ns.to_string(), String::new())..)
                .take_while(|(k, _)| k.0 == ns)
                .map(|(_, v)| v.clone())
                .collect(),
            (None, None) => objects.values().cloned().collect(),
        };
        if at >= self.rv {
            return Ok(current);
        }
        // Undo the changes after `at`: the earliest change of each key after `at` tells what the
        // key held at `at` (nothing, for an ADDED; the previous state otherwise).
        let mut overlay: BTreeMap<Key, Option<Arc<StoredObject>>> = BTreeMap::new();
        let start = self.history.partition_point(|e| e.rv <= at);
        for e in self.history.range(start..).filter(|e| e.resource == res) {
            let key = (e.object.namespace.clone(), e.object.name.clone());
            if !in_scope(&key) || overlay.contains_key(&key) {
                continue;
            }
            let was = match e.kind {
                EventType::Added => None,
                EventType::Modified | EventType::Deleted => e.prev.clone(),
            };
            overlay.insert(key, was);
        }
        if overlay.is_empty() {
            return Ok(current);
        }
        let mut merged: BTreeMap<Key, Arc<StoredObject>> =
            current.into_iter().map(|o| ((o.namespace.clone(), o.name.clone()), o)).collect();
        for (k, v) in overlay {
            match v {
                Some(o) => merged.insert(k, o),
                None => merged.remove(&k),
            };
        }
        Ok(merged.into_values().collect())
    }

    /// Number of objects of a resource.
    pub(crate) fn len(&self, res: ResourceId) -> usize {
        self.resources[res].objects.len()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn item(o: &StoredObject) -> Value {
        serde_json::from_slice(&o.list_item().concat()).unwrap()
    }

    /// The stored bytes lead with `kind` and `apiVersion`, as Go's encoding of a typed object,
    /// and read back as the value stored; a list item is the same object without them.
    #[test]
    fn stored_bytes_lead_with_type_meta_and_list_items_leave_it_out() {
        let v = json!({"apiVersion": "v1", "data": {"kind": "x"}, "kind": "ConfigMap",
            "metadata": {"name": "a", "resourceVersion": "2"}});
        let o = StoredObject::from_value(&v, 2);
        assert!(o.bytes.starts_with(br#"{"kind":"ConfigMap","apiVersion":"v1","#), "{:?}", o.bytes);
        assert_eq!(o.value(), v);
        assert_eq!(
            item(&o),
            json!({"data": {"kind": "x"}, "metadata": {"name": "a", "resourceVersion": "2"}})
        );
    }

    /// An object without both fields (written through `Objects`, say) is stored and listed as
    /// it is.
    #[test]
    fn objects_without_type_meta_are_listed_whole() {
        for v in [
            json!({"metadata": {"name": "a"}}),
            json!({"kind": "ConfigMap", "metadata": {"name": "a"}}),
            json!({"kind": "ConfigMap", "apiVersion": "v1"}),
        ] {
            let o = StoredObject::from_value(&v, 1);
            assert_eq!((o.value(), item(&o)), (v.clone(), v));
        }
    }
}
