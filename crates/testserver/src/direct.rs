//! Direct object access that bypasses HTTP: fixtures, bulk loads for benchmarks, and reads for
//! assertions.

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use crate::state::Shared;
use crate::util::{new_uid, rfc3339_now};

/// Direct access to the server's objects, bypassing HTTP. Writes produce watch events exactly
/// like API writes do.
///
/// # Examples
///
/// ```no_run
/// # async fn demo() {
/// use kcache_testserver::TestServer;
/// use serde_json::json;
///
/// let server = TestServer::start().await;
/// let n = server.objects().bulk_insert(
///     "", "v1", "configmaps",
///     (0..50_000).map(|i| json!({"metadata": {"name": format!("cm-{i}"), "namespace": "default"}})),
/// );
/// assert_eq!(n, 50_000);
/// # }
/// ```
#[derive(Clone)]
pub struct Objects {
    pub(crate) shared: Arc<Shared>,
}

impl fmt::Debug for Objects {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Objects").finish_non_exhaustive()
    }
}

/// Why a direct write was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DirectError {
    /// The group/version/resource is not served.
    #[error("resource {0} is not served")]
    UnknownResource(String),
    /// The object has no `metadata.name`.
    #[error("object has no metadata.name")]
    MissingName,
    /// The object is not a JSON object.
    #[error("object is not a JSON object")]
    NotAnObject,
}

impl Objects {
    /// Creates or replaces one object (apiVersion, kind, uid, creationTimestamp and
    /// resourceVersion are filled in; a namespaced object without a namespace goes to
    /// `default`). Returns the resourceVersion of the write.
    ///
    /// # Errors
    ///
    /// When the resource is not served or the object has no name.
    pub fn upsert(
        &self,
        group: &str,
        version: &str,
        resource: &str,
        object: Value,
    ) -> Result<u64, DirectError> {
        let mut store = self.shared.store.lock();
        let res = store
            .lookup(group, version, resource)
            .ok_or_else(|| DirectError::UnknownResource(format!("{group}/{version}/{resource}")))?;
        let def = store.resources[res].def.clone();
        let value = prepare(&def, object)?;
        let key = (
            value["metadata"]["namespace"].as_str().unwrap_or_default().to_string(),
            value["metadata"]["name"].as_str().unwrap_or_default().to_string(),
        );
        let mut value = value;
        if let Some(old) = store.get(res, &key) {
            // Keep identity across replacement, like an update.
            let old = old.value();
            value["metadata"]["uid"] = old["metadata"]["uid"].clone();
            value["metadata"]["creationTimestamp"] = old["metadata"]["creationTimestamp"].clone();
        }
        let rv = store.put(res, value).rv;
        crate::gc::collect(&mut store);
        let latest = store.rv;
        drop(store);
        self.shared.notify(latest);
        Ok(rv)
    }

    /// Inserts many objects at once under one lock (each gets its own resourceVersion, and
    /// each write is an event in the history). Objects that cannot be stored are skipped.
    /// Returns how many were stored.
    pub fn bulk_insert(
        &self,
        group: &str,
        version: &str,
        resource: &str,
        objects: impl IntoIterator<Item = Value>,
    ) -> usize {
        let mut store = self.shared.store.lock();
        let Some(res) = store.lookup(group, version, resource) else { return 0 };
        let def = store.resources[res].def.clone();
        let mut n = 0;
        for object in objects {
            if let Ok(value) = prepare(&def, object) {
                store.put(res, value);
                n += 1;
            }
        }
        crate::gc::collect(&mut store);
        let rv = store.rv;
        drop(store);
        self.shared.notify(rv);
        n
    }

    /// Deletes one object (a DELETED event); returns whether it existed.
    pub fn delete(&self, group: &str, version: &str, resource: &str, namespace: &str, name: &str) -> bool {
        let mut store = self.shared.store.lock();
        let Some(res) = store.lookup(group, version, resource) else { return false };
        let gone = store.remove(res, &(namespace.to_string(), name.to_string())).is_some();
        crate::gc::collect(&mut store);
        let rv = store.rv;
        drop(store);
        self.shared.notify(rv);
        gone
    }

    /// The current object, as JSON.
    pub fn get(
        &self,
        group: &str,
        version: &str,
        resource: &str,
        namespace: &str,
        name: &str,
    ) -> Option<Value> {
        let store = self.shared.store.lock();
        let res = store.lookup(group, version, resource)?;
        store.get(res, &(namespace.to_string(), name.to_string())).map(|o| o.value())
    }

    /// Number of objects of a resource.
    pub fn count(&self, group: &str, version: &str, resource: &str) -> usize {
        let store = self.shared.store.lock();
        store.lookup(group, version, resource).map(|r| store.len(r)).unwrap_or(0)
    }
}

/// Fills in server-set fields for a direct write.
fn prepare(def: &crate::ResourceDef, object: Value) -> Result<Value, DirectError> {
    let mut value = object;
    let obj = value.as_object_mut().ok_or(DirectError::NotAnObject)?;
    obj.insert("apiVersion".into(), Value::String(def.api_version()));
    obj.insert("kind".into(), Value::String(def.kind.clone()));
    let meta = obj.entry("metadata").or_insert_with(|| Value::Object(Default::default()));
    let meta = meta.as_object_mut().ok_or(DirectError::MissingName)?;
    if meta.get("name").and_then(Value::as_str).is_none_or(str::is_empty) {
        return Err(DirectError::MissingName);
    }
    if def.namespaced {
        if meta.get("namespace").and_then(Value::as_str).is_none_or(str::is_empty) {
            meta.insert("namespace".into(), Value::String("default".into()));
        }
    } else {
        meta.remove("namespace");
    }
    meta.insert("uid".into(), Value::String(new_uid()));
    meta.insert("creationTimestamp".into(), Value::String(rfc3339_now()));
    if def.has_generation {
        meta.insert("generation".into(), Value::from(1));
    }
    Ok(value)
}
