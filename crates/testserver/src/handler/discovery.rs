//! Discovery: the API group and resource documents, `/version`, and the health endpoints.

use bytes::Bytes;
use http::{Method, Response};
use serde_json::{Value, json};

use crate::resources::ResourceDef;
use crate::response::{ResBody, error_response, json_response, respond};
use crate::state::Shared;
use crate::status::ApiError;

/// Discovery documents and `/version`.
pub(crate) fn discovery(shared: &Shared, method: &Method, path: &str) -> Response<ResBody> {
    if method != Method::GET {
        return error_response(&ApiError::path_not_found());
    }
    let store = shared.store.lock();
    let defs: Vec<ResourceDef> = store.resources.iter().filter(|r| r.served).map(|r| r.def.clone()).collect();
    drop(store);
    let segs: Vec<&str> = path.trim_matches('/').split('/').filter(|s| !s.is_empty()).collect();
    let resource_list = |group: &str, version: &str| {
        let resources: Vec<Value> = defs
            .iter()
            .filter(|d| d.group == group && d.version == version)
            .map(|d| {
                let mut r = json!({
                    "name": d.resource,
                    "singularName": d.singular,
                    "namespaced": d.namespaced,
                    "kind": d.kind,
                    "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
                });
                if !d.short_names.is_empty() {
                    r["shortNames"] = json!(d.short_names);
                }
                r
            })
            .collect();
        let gv = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
        (!resources.is_empty()).then(|| {
            json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources})
        })
    };
    let group_doc = |group: &str| {
        let mut versions: Vec<&str> =
            defs.iter().filter(|d| d.group == group).map(|d| d.version.as_str()).collect();
        versions.dedup();
        let versions: Vec<Value> =
            versions.iter().map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v})).collect();
        let preferred = versions.first().cloned();
        preferred.map(|p| json!({"name": group, "versions": versions, "preferredVersion": p}))
    };
    let doc = match segs.as_slice() {
        ["version"] => Some(json!({
            "major": "1", "minor": "34", "gitVersion": "v1.34.0-kcache-testserver",
            "gitCommit": "", "gitTreeState": "clean", "buildDate": "", "goVersion": "",
            "compiler": "rust", "platform": "linux/amd64",
        })),
        ["api"] => Some(json!({
            "kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": shared.addr.to_string()}],
        })),
        ["api", v] => resource_list("", v),
        ["apis"] => {
            let mut groups: Vec<&str> =
                defs.iter().filter(|d| !d.group.is_empty()).map(|d| d.group.as_str()).collect();
            groups.sort_unstable();
            groups.dedup();
            let groups: Vec<Value> = groups.iter().filter_map(|g| group_doc(g)).collect();
            Some(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}))
        }
        ["apis", g] => group_doc(g).map(|mut d| {
            d["kind"] = json!("APIGroup");
            d["apiVersion"] = json!("v1");
            d
        }),
        ["apis", g, v] => resource_list(g, v),
        ["healthz"] | ["readyz"] | ["livez"] => {
            return respond(200, Bytes::from_static(b"ok"), None);
        }
        _ => None,
    };
    match doc {
        Some(d) => json_response(200, &d),
        None => error_response(&ApiError::path_not_found()),
    }
}
