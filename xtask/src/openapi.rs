//! `cargo xtask capture-openapi [--out PATH]`: captures the OpenAPI v3 documents of the real
//! kube-apiserver (the version `cargo xtask cluster` builds) and writes the part
//! kcache-testserver needs, its schema knowledge for server-side apply, as a versioned fixture.
//!
//! The server's field-ownership rules (which lists merge by which keys, which maps and structs
//! are atomic) must not be written by hand: they come from the `x-kubernetes-list-type`,
//! `x-kubernetes-list-map-keys`, `x-kubernetes-patch-merge-key`, `x-kubernetes-patch-strategy`
//! and `x-kubernetes-map-type` markers kube-apiserver serves under `/openapi/v3`. This starts
//! a throwaway etcd and kube-apiserver through `control_plane.rs` (the code behind
//! `cargo xtask cluster up`), reads `/openapi/v3`, then the documents of the group-versions
//! kcache-testserver serves, keeps the schemas reachable from the kinds it serves, strips
//! everything but structure and markers (descriptions, formats, defaults), and writes
//! `crates/testserver/openapi/kube-apiserver-<version>.json` with the version recorded in it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use serde_json::{Map, Value, json};

use crate::control_plane::{self, ADMIN_TOKEN, ControlPlane, ServerSpec, Spec};

/// The group-versions kcache-testserver serves (and the coordination group its leases live in).
const GROUP_VERSIONS: &[&str] = &[
    "api/v1",
    "apis/rbac.authorization.k8s.io/v1",
    "apis/apiextensions.k8s.io/v1",
    "apis/coordination.k8s.io/v1",
];

/// The schemas of the kinds kcache-testserver serves; everything they reach is kept.
const ROOTS: &[&str] = &[
    "io.k8s.api.core.v1.ConfigMap",
    "io.k8s.api.core.v1.Secret",
    "io.k8s.api.core.v1.Pod",
    "io.k8s.api.core.v1.Namespace",
    "io.k8s.api.rbac.v1.Role",
    "io.k8s.api.rbac.v1.RoleBinding",
    "io.k8s.api.rbac.v1.ClusterRole",
    "io.k8s.api.rbac.v1.ClusterRoleBinding",
    "io.k8s.api.coordination.v1.Lease",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition",
];

/// The schema keys kept: structure and the list/map markers (and scalar defaults, see `trim`).
const KEPT: &[&str] = &[
    "type",
    "properties",
    "items",
    "additionalProperties",
    "allOf",
    "$ref",
    "x-kubernetes-group-version-kind",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-patch-merge-key",
    "x-kubernetes-patch-strategy",
    "x-kubernetes-map-type",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-int-or-string",
    "x-kubernetes-embedded-resource",
];

pub(crate) fn run(args: &[String]) -> Result<()> {
    let mut out = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--out" => out = Some(PathBuf::from(it.next().context("--out needs a path")?)),
            other => bail!("unknown capture-openapi option `{other}`"),
        }
    }
    control_plane::install_interrupt_handler();
    let bins = control_plane::ensure_binaries()?;
    let dir = std::env::temp_dir().join(format!("kcache-openapi-{}", std::process::id()));
    let spec = Spec {
        servers: vec![ServerSpec::new("kube-apiserver")],
        detach: false,
        logs_on_failure: crate::project_root().join("target/openapi-logs"),
    };
    let plane = ControlPlane::start(&bins, &dir, &spec)?;
    let instance = plane.instance();
    let version = instance.kube_version.clone();
    let url = instance.server("kube-apiserver")?.url.clone();
    let fetch = |path: &str| -> Result<Value> {
        match control_plane::get(&bins, &format!("{url}{path}"), ADMIN_TOKEN)? {
            Some((200, body)) => serde_json::from_str(&body).with_context(|| format!("parsing {path}")),
            Some((code, body)) => bail!("GET {path}: {code} {}", body.chars().take(200).collect::<String>()),
            None => bail!("GET {path}: the server could not be reached"),
        }
    };
    let index = fetch("/openapi/v3")?;
    let mut schemas: BTreeMap<String, Value> = BTreeMap::new();
    for gv in GROUP_VERSIONS {
        let rel = index["paths"][*gv]["serverRelativeURL"]
            .as_str()
            .with_context(|| format!("/openapi/v3 lists no {gv}"))?;
        let doc = fetch(rel)?;
        let components =
            doc["components"]["schemas"].as_object().with_context(|| format!("{gv}: no schemas"))?;
        for (name, schema) in components {
            schemas.entry(name.clone()).or_insert_with(|| schema.clone());
        }
    }
    drop(plane);

    // Keep what the served kinds reach.
    let mut kept: BTreeMap<String, Value> = BTreeMap::new();
    let mut todo: Vec<String> = ROOTS.iter().map(|s| s.to_string()).collect();
    let mut seen = BTreeSet::new();
    while let Some(name) = todo.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        let schema = schemas.get(&name).with_context(|| format!("no schema {name}"))?;
        let trimmed = trim(schema, &mut todo);
        kept.insert(name, trimmed);
    }
    let fixture = json!({
        "kubeVersion": version,
        "source": "kube-apiserver /openapi/v3 (components.schemas), captured by `cargo xtask capture-openapi`",
        "groupVersions": GROUP_VERSIONS,
        "schemas": kept,
    });
    let out = out.unwrap_or_else(|| {
        crate::project_root().join(format!("crates/testserver/openapi/kube-apiserver-{version}.json"))
    });
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut text = serde_json::to_string_pretty(&fixture)?;
    text.push('\n');
    std::fs::write(&out, text)?;
    eprintln!(
        "capture-openapi: {} schemas from kube-apiserver {version} written to {}",
        kept.len(),
        out.display()
    );
    Ok(())
}

/// A schema with only the [`KEPT`] keys, recursively; `$ref` targets are queued.
fn trim(schema: &Value, refs: &mut Vec<String>) -> Value {
    match schema {
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, v) in m {
                if !KEPT.contains(&k.as_str()) {
                    continue;
                }
                match k.as_str() {
                    "$ref" => {
                        if let Some(name) = v.as_str().and_then(|r| r.strip_prefix("#/components/schemas/")) {
                            refs.push(name.to_string());
                        }
                        out.insert(k.clone(), v.clone());
                    }
                    "properties" => {
                        let props = v
                            .as_object()
                            .map(|p| p.iter().map(|(n, s)| (n.clone(), trim(s, refs))).collect::<Map<_, _>>())
                            .unwrap_or_default();
                        out.insert(k.clone(), Value::Object(props));
                    }
                    "items" | "additionalProperties" => {
                        out.insert(k.clone(), if v.is_object() { trim(v, refs) } else { v.clone() });
                    }
                    "allOf" => {
                        let all = v
                            .as_array()
                            .map(|a| a.iter().map(|s| trim(s, refs)).collect())
                            .unwrap_or_default();
                        out.insert(k.clone(), Value::Array(all));
                    }
                    _ => {
                        out.insert(k.clone(), v.clone());
                    }
                }
            }
            // A scalar default can complete the key of a list-map item (a container port's
            // `protocol` is "TCP" when omitted); object defaults carry no such knowledge.
            if let Some(d) = m.get("default").filter(|d| !d.is_object() && !d.is_array()) {
                out.insert("default".into(), d.clone());
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}
