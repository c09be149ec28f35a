//! What a request asks for: its path routed to a [`Route`] and its query string decoded into a
//! [`Query`].

use parking_lot::Mutex;

use crate::resources::ResourceDef;
use crate::status::ApiError;
use crate::store::{Key, ResourceId, Store};

/// A routed resource request.
#[derive(Debug)]
pub(crate) struct Route {
    /// Which resource.
    pub(crate) res: ResourceId,
    /// Its definition (a copy, taken at routing time).
    pub(crate) def: ResourceDef,
    /// Namespace from the path.
    pub(crate) namespace: Option<String>,
    /// Object name from the path.
    pub(crate) name: Option<String>,
    /// The request is for the `status` subresource.
    pub(crate) status: bool,
}

impl Route {
    /// The store key of the object the path names (empty parts when it names none).
    pub(crate) fn key(&self) -> Key {
        (self.namespace.clone().unwrap_or_default(), self.name.clone().unwrap_or_default())
    }
}

/// Routes a path: `Ok(None)` for discovery and other non-resource paths.
pub(crate) fn route(store: &Mutex<Store>, path: &str) -> Result<Option<Route>, ApiError> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').filter(|s| !s.is_empty()).collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] if !rest.is_empty() => ("", *v, rest),
        ["apis", g, v, rest @ ..] if !rest.is_empty() => (*g, *v, rest),
        _ => return Ok(None),
    };
    let (namespace, resource, name, sub) = match rest {
        [r] => (None, *r, None, None),
        [r, n] => (None, *r, Some(*n), None),
        // `/api/v1/namespaces/<name>/status` (and `finalize`) are a namespace's subresources,
        // as kube-apiserver's RequestInfo special-cases them; otherwise `namespaces/<ns>/<r>`
        // is a namespaced collection.
        ["namespaces", n, sub @ ("status" | "finalize")] => (None, "namespaces", Some(*n), Some(*sub)),
        ["namespaces", ns, r] => (Some(*ns), *r, None, None),
        [r, n, sub] => (None, *r, Some(*n), Some(*sub)),
        ["namespaces", ns, r, n] => (Some(*ns), *r, Some(*n), None),
        ["namespaces", ns, r, n, sub] => (Some(*ns), *r, Some(*n), Some(*sub)),
        _ => return Err(ApiError::path_not_found()),
    };
    let store = store.lock();
    let res = store.lookup(group, version, resource).ok_or_else(ApiError::path_not_found)?;
    let def = store.resources[res].def.clone();
    drop(store);
    let status = sub == Some("status");
    if let Some(sub) = sub.filter(|s| *s != "status")
        && (namespace.is_some() || !def.namespaced)
    {
        // A subresource kube-apiserver serves for this resource but this server does not is
        // said so, rather than claimed not to exist; any other is 404 as upstream.
        if upstream_subresources(&def).contains(&sub) {
            return Err(ApiError::not_supported(&format!(
                "the {sub} subresource of {}",
                def.qualified_resource()
            )));
        }
        return Err(ApiError::path_not_found());
    }
    if namespace.is_some() && !def.namespaced {
        return Err(ApiError::path_not_found());
    }
    if def.namespaced && namespace.is_none() && name.is_some() {
        return Err(ApiError::path_not_found());
    }
    if status && !def.status_subresource {
        return Err(ApiError::path_not_found());
    }
    Ok(Some(Route {
        res,
        def,
        namespace: namespace.map(str::to_string),
        name: name.map(str::to_string),
        status,
    }))
}

/// The subresources (other than `status`) kube-apiserver v1.36 serves for a resource this
/// server serves.
fn upstream_subresources(def: &ResourceDef) -> &'static [&'static str] {
    match (def.group.as_str(), def.resource.as_str()) {
        ("", "pods") => &[
            "attach",
            "binding",
            "ephemeralcontainers",
            "eviction",
            "exec",
            "log",
            "portforward",
            "proxy",
            "resize",
        ],
        ("", "namespaces") => &["finalize"],
        ("", "serviceaccounts") => &["token"],
        ("", "services" | "nodes") => &["proxy"],
        ("apps", "deployments" | "replicasets" | "statefulsets") | ("", "replicationcontrollers") => {
            &["scale"]
        }
        // A custom resource's scale subresource, when its CRD declares one.
        _ if def.is_custom() => &["scale"],
        _ => &[],
    }
}

/// Decoded query parameters.
#[derive(Debug, Default)]
pub(crate) struct Query {
    /// The pairs in order, decoded as `application/x-www-form-urlencoded` (`+` is a space).
    pairs: Vec<(String, String)>,
}

impl Query {
    /// Decodes a raw query string.
    pub(crate) fn parse(raw: &str) -> Self {
        Self { pairs: form_urlencoded::parse(raw.as_bytes()).into_owned().collect() }
    }

    /// The first value of `key`.
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// Every value of `key`, in order.
    pub(crate) fn all(&self, key: &str) -> Vec<&str> {
        self.pairs.iter().filter(|(k, _)| k == key).map(|(_, v)| v.as_str()).collect()
    }

    /// A boolean parameter, parsed as Go's `strconv.ParseBool` (invalid values are an error).
    pub(crate) fn flag(&self, key: &str) -> Result<Option<bool>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => parse_bool(v).map(Some).ok_or_else(|| {
                ApiError::bad_request(format!("{key}: strconv.ParseBool: parsing {v:?}: invalid syntax"))
            }),
        }
    }
}

/// Go's `strconv.ParseBool`.
pub(crate) fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_decoding() {
        let q = Query::parse("labelSelector=app%3Dweb%2Ctier+in+(a)&watch=1&x&&bad=%zz%4");
        assert_eq!(
            q.pairs,
            [
                ("labelSelector".into(), "app=web,tier in (a)".into()),
                ("watch".into(), "1".into()),
                ("x".into(), String::new()),
                ("bad".into(), "%zz%4".into()),
            ]
        );
        assert_eq!(q.get("watch"), Some("1"));
        assert_eq!(q.flag("watch").unwrap(), Some(true));
        assert_eq!(q.flag("missing").unwrap(), None);
        assert_eq!(q.flag("x").unwrap_err().code, 400);
    }
}
