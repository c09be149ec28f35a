//! Differential checks: the same requests, in the same order, to kube-apiserver and to
//! kcache-testserver, answers compared (status code and body, normalized).
//!
//! Each [`Step`] is one raw HTTP request in a fresh namespace. [`run`] sends them to one server
//! and returns each answer normalized: uids, timestamps and resourceVersions become
//! placeholders and the namespace becomes `<ns>`, so two servers (or two runs) give equal
//! [`Outcome`]s exactly when they answered alike. Differences kcache-testserver has on purpose
//! are folded in [`documented_differences`] and listed in docs/testing.md.
//!
//! On a real cluster the suite runs the steps on it and on an in-process kcache-testserver
//! (without its garbage collector, as the cluster has no kube-controller-manager) and compares;
//! it can also write the real server's outcomes to the fixture
//! (`KCACHE_E2E_RECORD_DIFFERENTIAL=1`), against which `embedded` runs compare the test server
//! when no real server is at hand.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The fixture of kube-apiserver's normalized answers.
pub const FIXTURE: &str = "differential/kube-apiserver-v1.36.3.json";
/// The fixture of the [`unsharded_steps`]' answers, from the server without `ShardedListAndWatch`.
pub const UNSHARDED_FIXTURE: &str = "differential/kube-apiserver-v1.36.3-unsharded.json";

/// The CRD the custom-resource steps use (cluster-scoped: deleted by [`cleanup`]).
pub const CRD_NAME: &str = "gadgets.diff.kcache.dev";

/// How a step's answer is compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compare {
    /// Status code and normalized body.
    Full,
    /// Status code only (set-up steps whose bodies the test server does not claim to match).
    Code,
    /// Status code and the body's shape: `kind` and `apiVersion` of the answer and of each
    /// list item (or each watch event's `type` and its object's `kind` and `apiVersion`), for
    /// kinds whose bodies kube-apiserver defaults beyond what the test server claims (Pods).
    Shape,
}

/// One request.
#[derive(Debug, Clone)]
pub struct Step {
    /// What it checks.
    pub name: &'static str,
    method: &'static str,
    /// Path and query; `{ns}` is the step's namespace.
    path: String,
    content_type: Option<&'static str>,
    accept: Option<&'static str>,
    body: Vec<u8>,
    compare: Compare,
}

/// One normalized answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// The step's name.
    pub step: String,
    /// HTTP status code.
    pub code: u16,
    /// The normalized body (`null` when only the code is compared).
    pub body: Value,
}

const APPLY: &str = "application/apply-patch+yaml";
const MERGE: &str = "application/merge-patch+json";
const CMS: &str = "/api/v1/namespaces/{ns}/configmaps";
const GADGETS: &str = "/apis/diff.kcache.dev/v1/namespaces/{ns}/gadgets";
/// What `kube::Api::list_metadata` and client-go's metadata client send.
const AS_LIST: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
/// What `kube::Api::get_metadata` and `watch_metadata` send.
const AS_OBJECT: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";

fn step(name: &'static str, method: &'static str, path: impl Into<String>) -> Step {
    Step {
        name,
        method,
        path: path.into(),
        content_type: None,
        accept: None,
        body: Vec::new(),
        compare: Compare::Full,
    }
}

impl Step {
    fn json(mut self, content_type: &'static str, body: Value) -> Self {
        self.content_type = Some(content_type);
        self.body = serde_json::to_vec(&body).unwrap_or_default();
        self
    }

    fn raw(mut self, content_type: &'static str, body: &[u8]) -> Self {
        self.content_type = Some(content_type);
        self.body = body.to_vec();
        self
    }

    fn accept(mut self, accept: &'static str) -> Self {
        self.accept = Some(accept);
        self
    }

    fn code_only(mut self) -> Self {
        self.compare = Compare::Code;
        self
    }

    fn shape_only(mut self) -> Self {
        self.compare = Compare::Shape;
        self
    }
}

fn cm(name: &str, labels: Value, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}, "data": data})
}

fn owner(name: &str, uid: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": uid})
}

fn gadget(spec: Value) -> Value {
    json!({"apiVersion": "diff.kcache.dev/v1", "kind": "Gadget", "metadata": {"name": "g"}, "spec": spec})
}

/// The CRD of the custom-resource steps: a list-map (`parts`, keyed by `id`) and an atomic
/// list (`tags`).
pub fn crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME},
        "spec": {"group": "diff.kcache.dev", "scope": "Namespaced",
            "names": {"plural": "gadgets", "kind": "Gadget"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {"spec": {"type": "object", "properties": {
                    "parts": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["id"],
                        "items": {"type": "object", "required": ["id"],
                            "properties": {"id": {"type": "string"}, "size": {"type": "integer"}}}},
                    "tags": {"type": "array", "items": {"type": "string"}}}}}}}}]},
    })
}

/// The steps before the custom resource's CRD is served.
pub fn steps() -> Vec<Step> {
    let cms = CMS;
    vec![
        // Content types.
        step("create with a CBOR body: 415", "POST", cms).raw("application/cbor", b"\xa0"),
        step("list with Accept text/html: 406", "GET", cms).accept("text/html"),
        step("get with Accept text/html: 406", "GET", format!("{cms}/x")).accept("text/html"),
        step("watch with Accept text/html: 406", "GET", format!("{cms}?watch=true")).accept("text/html"),
        step("create with Accept text/html: 406", "POST", cms)
            .json("application/json", cm("x", json!({}), json!({})))
            .accept("text/html"),
        step("patch with Content-Type application/json: 415", "PATCH", format!("{cms}/x"))
            .json("application/json", json!({})),
        // Server-side apply.
        step("apply without fieldManager: 422", "PATCH", format!("{cms}/a"))
            .json(APPLY, cm("a", json!({"app": "x"}), json!({"k1": "v1"}))),
        step("apply creates a missing object: 201", "PATCH", format!("{cms}/a?fieldManager=alpha"))
            .json(APPLY, cm("a", json!({"app": "x"}), json!({"k1": "v1", "k2": "v2"}))),
        step("apply changing another applier's field: 409", "PATCH", format!("{cms}/a?fieldManager=beta"))
            .json(APPLY, cm("a", json!({}), json!({"k1": "beta"}))),
        step("apply with force takes the field", "PATCH", format!("{cms}/a?fieldManager=beta&force=true"))
            .json(APPLY, cm("a", json!({}), json!({"k1": "beta"}))),
        step("merge patch by another manager: Update entry", "PATCH", format!("{cms}/a?fieldManager=editor"))
            .json(MERGE, json!({"data": {"k2": "edited", "k3": "new"}})),
        step("apply against an updater's field: 409 naming its apiVersion", "PATCH", format!("{cms}/a?fieldManager=alpha"))
            .json(APPLY, cm("a", json!({"app": "x"}), json!({"k2": "alpha", "k3": "alpha"}))),
        step("apply adding fields", "PATCH", format!("{cms}/a?fieldManager=alpha"))
            .json(APPLY, cm("a", json!({"app": "x", "tier": "web"}), json!({"k4": "v4"}))),
        step("apply without fields applied before removes them", "PATCH", format!("{cms}/a?fieldManager=alpha"))
            .json(APPLY, cm("a", json!({"app": "x"}), json!({}))),
        step("apply ownerReferences (a list map by uid)", "PATCH", format!("{cms}/b?fieldManager=gamma")).json(
            APPLY,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b",
                "ownerReferences": [owner("o1", "11111111-1111-4111-8111-111111111111")],
                "finalizers": ["a.kcache.dev/x"]}}),
        ),
        step("a second applier's ownerReference and finalizer merge in", "PATCH", format!("{cms}/b?fieldManager=delta"))
            .json(
                APPLY,
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b",
                    "ownerReferences": [owner("o2", "22222222-2222-4222-8222-222222222222")],
                    "finalizers": ["b.kcache.dev/y"]}}),
            ),
        // Unknown fields of a built-in kind, and a strategic merge patch without lists.
        step("create with an unknown field and fieldValidation=Strict: 400", "POST", format!("{cms}?fieldValidation=Strict"))
            .json("application/json", json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "u", "colour": "red"}, "data": {"k": "v"}, "extra": 1})),
        step("create with an unknown field: dropped (a warning)", "POST", cms)
            .json("application/json", json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "u"}, "data": {"k": "v"}, "extra": 1})),
        step("create with fieldValidation=Sometimes: 422", "POST", format!("{cms}?fieldValidation=Sometimes"))
            .json("application/json", cm("v", json!({}), json!({}))),
        step("strategic merge patch of maps", "PATCH", format!("{cms}/u?fieldManager=smp"))
            .json("application/strategic-merge-patch+json", json!({"metadata": {"labels": {"l": "1"}}, "data": {"k": null, "k2": "v2"}})),
        // Verbs and parameters.
        step("PUT on a collection: 405", "PUT", cms).json("application/json", cm("w", json!({}), json!({}))),
        step("POST to a named object: 405", "POST", format!("{cms}/w")).json("application/json", cm("w", json!({}), json!({}))),
        step("create with dryRun=Yes: 422", "POST", format!("{cms}?dryRun=Yes")).json("application/json", cm("w", json!({}), json!({}))),
        step("create with dryRun=All: the object, not stored", "POST", format!("{cms}?dryRun=All&fieldManager=dry"))
            .json("application/json", cm("w", json!({"a": "b"}), json!({"k": "v"}))),
        step("get after a dry run: 404", "GET", format!("{cms}/w")),
        // Deletion: kube-apiserver's half of garbage collection.
        step("create for deletion", "POST", format!("{cms}?fieldManager=setup"))
            .json("application/json", cm("fg", json!({}), json!({"k": "v"}))),
        step("delete with Foreground: foregroundDeletion finalizer", "DELETE", format!("{cms}/fg"))
            .json("application/json", json!({"propagationPolicy": "Foreground"})),
        step("delete again with Orphan: the finalizer swapped", "DELETE", format!("{cms}/fg"))
            .json("application/json", json!({"propagationPolicy": "Orphan"})),
        step("delete again with Background: no finalizer left, deleted", "DELETE", format!("{cms}/fg"))
            .json("application/json", json!({"propagationPolicy": "Background"})),
        step("get after the delete: 404", "GET", format!("{cms}/fg")),
        step("create with a finalizer", "POST", format!("{cms}?fieldManager=setup")).json(
            "application/json",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "held", "finalizers": ["example.com/hold"]}}),
        ),
        step("delete with orphanDependents false: 202", "DELETE", format!("{cms}/held"))
            .json("application/json", json!({"orphanDependents": false})),
        step("emptying the finalizers deletes it", "PATCH", format!("{cms}/held?fieldManager=setup"))
            .json(MERGE, json!({"metadata": {"finalizers": null}})),
        step("get after the last finalizer: 404", "GET", format!("{cms}/held")),
        step("delete with an unknown propagationPolicy: 422", "DELETE", format!("{cms}/a"))
            .json("application/json", json!({"propagationPolicy": "Sideways"})),
        step("delete with a uid precondition that does not hold: 409", "DELETE", format!("{cms}/a")).json(
            "application/json",
            json!({"preconditions": {"uid": "33333333-3333-4333-8333-333333333333"}}),
        ),
        // The custom resource's CRD (its answer differs in defaulted schema details).
        step("create the CRD", "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
            .json("application/json", crd())
            .code_only(),
    ]
}

/// The steps once the CRD's resource is served.
pub fn custom_steps() -> Vec<Step> {
    vec![
        step("strategic merge patch of a custom resource: 415", "PATCH", format!("{GADGETS}/g"))
            .json("application/strategic-merge-patch+json", json!({})),
        step("apply a custom resource: 201", "PATCH", format!("{GADGETS}/g?fieldManager=alpha"))
            .json(APPLY, gadget(json!({"parts": [{"id": "x", "size": 1}], "tags": ["t1"]}))),
        step(
            "a second applier's list-map item merges by key",
            "PATCH",
            format!("{GADGETS}/g?fieldManager=beta"),
        )
        .json(APPLY, gadget(json!({"parts": [{"id": "y", "size": 2}]}))),
        step(
            "an atomic list owned by another applier: 409",
            "PATCH",
            format!("{GADGETS}/g?fieldManager=beta"),
        )
        .json(APPLY, gadget(json!({"tags": ["t2"]}))),
        step(
            "a field inside another applier's list-map item: 409",
            "PATCH",
            format!("{GADGETS}/g?fieldManager=beta"),
        )
        .json(APPLY, gadget(json!({"parts": [{"id": "y", "size": 2}, {"id": "x", "size": 5}]}))),
        step(
            "an applier dropping its list-map item and its atomic list",
            "PATCH",
            format!("{GADGETS}/g?fieldManager=alpha"),
        )
        .json(APPLY, gadget(json!({}))),
        step("an update taking a list-map item's field", "PATCH", format!("{GADGETS}/g?fieldManager=editor"))
            .json(MERGE, json!({"spec": {"parts": [{"id": "y", "size": 3}], "note": "n"}})),
        step(
            "a custom resource with an unknown field and fieldValidation=Strict: 400",
            "POST",
            format!("{GADGETS}?fieldValidation=Strict"),
        )
        .json(
            "application/json",
            json!({"apiVersion": "diff.kcache.dev/v1", "kind": "Gadget", "metadata": {"name": "h"},
                "spec": {"tags": [], "colour": "red"}}),
        ),
        step(
            "the item's applier forcing it back",
            "PATCH",
            format!("{GADGETS}/g?fieldManager=beta&force=true"),
        )
        .json(APPLY, gadget(json!({"parts": [{"id": "y", "size": 2}]}))),
        // Metadata-only reads (issue #37): PartialObjectMetadata(List) through Accept.
        step("create a ConfigMap for the metadata reads", "POST", CMS).json(
            "application/json",
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "m", "labels": {"meta": "yes"}, "annotations": {"note": "n"},
                    "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o",
                        "uid": "11111111-1111-1111-1111-111111111111", "controller": true}]},
                "data": {"k": "v"}}),
        ),
        step("list as PartialObjectMetadataList v1", "GET", format!("{CMS}?labelSelector=meta%3Dyes")).accept(AS_LIST),
        step("list as PartialObjectMetadataList v1beta1", "GET", format!("{CMS}?labelSelector=meta%3Dyes"))
            .accept("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1"),
        step("get as PartialObjectMetadata", "GET", format!("{CMS}/m")).accept(AS_OBJECT),
        step("get as PartialObjectMetadata v1beta1", "GET", format!("{CMS}/m"))
            .accept("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1"),
        step("list as PartialObjectMetadata: 406", "GET", CMS).accept(AS_OBJECT),
        step("get as PartialObjectMetadataList: 406", "GET", format!("{CMS}/m")).accept(AS_LIST),
        step("list as PartialObjectMetadataList of meta.k8s.io/v2: 406", "GET", CMS)
            .accept("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v2"),
        step("list as PartialObjectMetadataList without a group: 406", "GET", CMS)
            .accept("application/json;as=PartialObjectMetadataList;v=v1"),
        step("list as PartialObjectMetadataList of group apps: 406", "GET", CMS)
            .accept("application/json;as=PartialObjectMetadataList;g=apps;v=v1"),
        step("list as an unknown kind: 406", "GET", CMS).accept("application/json;as=Gizmo;g=meta.k8s.io;v=v1"),
        step("get as an unknown kind, then JSON: the object", "GET", format!("{CMS}/m"))
            .accept("application/json;as=Gizmo;g=meta.k8s.io;v=v1, application/json"),
        step(
            "watch from 0 as PartialObjectMetadata",
            "GET",
            format!("{CMS}?watch=true&resourceVersion=0&timeoutSeconds=1&labelSelector=meta%3Dyes"),
        )
        .accept(AS_OBJECT),
        step(
            "watch-list as PartialObjectMetadata",
            "GET",
            format!(
                "{CMS}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true\
                 &timeoutSeconds=1&labelSelector=meta%3Dyes"
            ),
        )
        .accept(AS_OBJECT),
        step(
            "watch from 0 as PartialObjectMetadataList",
            "GET",
            format!("{CMS}?watch=true&resourceVersion=0&timeoutSeconds=1&labelSelector=meta%3Dyes"),
        )
        .accept(AS_LIST),
        step("watch as PartialObjectMetadata of meta.k8s.io/v2: 406", "GET", format!("{CMS}?watch=true"))
            .accept("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v2"),
        // Metadata-only reads of a custom resource: no go-restful router, the CRD handler's
        // errors.
        step("list gadgets as PartialObjectMetadataList", "GET", GADGETS).accept(AS_LIST),
        step("get a gadget as PartialObjectMetadata", "GET", format!("{GADGETS}/g")).accept(AS_OBJECT),
        step("list gadgets as PartialObjectMetadata: 406", "GET", GADGETS).accept(AS_OBJECT),
        step("get a gadget as PartialObjectMetadataList: 500", "GET", format!("{GADGETS}/g")).accept(AS_LIST),
        step("list gadgets as PartialObjectMetadataList of meta.k8s.io/v2: 406", "GET", GADGETS)
            .accept("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v2"),
        step("list gadgets with Accept text/html: 406", "GET", GADGETS).accept("text/html"),
        step("watch gadgets with Accept text/html: 406", "GET", format!("{GADGETS}?watch=true"))
            .accept("text/html"),
        step(
            "watch gadgets from 0 as PartialObjectMetadata",
            "GET",
            format!("{GADGETS}?watch=true&resourceVersion=0&timeoutSeconds=1"),
        )
        .accept(AS_OBJECT),
    ]
}

/// `s` percent-encoded for a query string (everything but RFC 3986's unreserved characters).
fn q(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Every uid: `[0, 2^64)`.
const ALL_UIDS: &str = "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')";
/// Only the uids whose FNV-1a hash is 0: none in practice. With [`ALL_UIDS`] these make the
/// answers independent of the uids the two servers assign (which shard a given object falls in
/// is checked apart, in `sharded_lists_and_watches_split_the_objects`).
const NO_UIDS: &str = "shardRange(object.metadata.uid, '0x0000000000000000', '0x0000000000000001')";

/// Server-side sharded list and watch (KEP-5866) on a server with the `ShardedListAndWatch`
/// gate: filtered answers, `metadata.shardInfo`, and the 500 for each class of malformed
/// selector (apiserver v0.36.3 `pkg/sharding/parser.go`).
pub fn sharded_steps() -> Vec<Step> {
    let labelled =
        |name: &str, first: &str| cm(name, json!({"shard": "yes", "first": first}), json!({"k": "v"}));
    let list = |sel: &str| format!("{CMS}?labelSelector=shard%3Dyes&shardSelector={}", q(sel));
    let mut steps = vec![
        step("create a ConfigMap for the sharded reads", "POST", CMS)
            .json("application/json", labelled("s1", "yes")),
        step("create another", "POST", CMS).json("application/json", labelled("s2", "no")),
        step("sharded list of every uid: all, with shardInfo", "GET", list(ALL_UIDS)),
        step("sharded list of no uid: empty, with shardInfo", "GET", list(NO_UIDS)),
        step(
            "sharded list, a union of two ranges",
            "GET",
            list(&format!(
                "{NO_UIDS} || shardRange(object.metadata.uid, '0x0000000000000001', '0x10000000000000000')"
            )),
        ),
        step(
            "sharded list spelled with parentheses and double quotes: canonical shardInfo",
            "GET",
            list(r#" ( shardRange(object.metadata.uid,"0x0000000000000000","0x10000000000000000") ) "#),
        ),
        step(
            "sharded list by namespace",
            "GET",
            list("shardRange(object.metadata.namespace, '0x0000000000000000', '0x10000000000000000')"),
        ),
        step(
            "sharded list with an empty parameter: unsharded",
            "GET",
            format!("{CMS}?labelSelector=shard%3Dyes&shardSelector="),
        ),
        step("sharded list as PartialObjectMetadataList: no shardInfo", "GET", list(ALL_UIDS))
            .accept(AS_LIST),
        step(
            "sharded list, a page of one: remainingItemCount unfiltered",
            "GET",
            format!("{CMS}?limit=1&shardSelector={}", q(NO_UIDS)),
        ),
        // One object each: kcache-testserver sends initial events in another order on purpose.
        step(
            "sharded watch from 0",
            "GET",
            format!(
                "{CMS}?watch=true&resourceVersion=0&timeoutSeconds=1&labelSelector=first%3Dyes&shardSelector={}",
                q(ALL_UIDS)
            ),
        ),
        step(
            "sharded watch-list: the end bookmark without shardInfo",
            "GET",
            format!(
                "{CMS}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true\
                 &timeoutSeconds=1&labelSelector=first%3Dyes&shardSelector={}",
                q(ALL_UIDS)
            ),
        ),
        step(
            "sharded deletecollection of no uid: nothing deleted",
            "DELETE",
            format!("{CMS}?labelSelector=shard%3Dyes&shardSelector={}", q(NO_UIDS)),
        ),
        step(
            "a malformed selector on a watch: 500",
            "GET",
            format!("{CMS}?watch=true&shardSelector={}", q("bogus(x)")),
        ),
        step(
            "a malformed selector on a watch-list: 500",
            "GET",
            format!(
                "{CMS}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&shardSelector={}",
                q("bogus(x)")
            ),
        ),
        step(
            "a malformed selector on a deletecollection: 500",
            "DELETE",
            format!("{CMS}?shardSelector={}", q("bogus(x)")),
        ),
        // cel-go's own syntax messages are not reproduced (kcache-shard-selector's README).
        step("a selector that is not CEL: 500", "GET", list("shardRange(")).code_only(),
    ];
    // One malformed selector of each class the parser reports; the body is compared whole.
    let r = |start: &str, end: &str| format!("shardRange(object.metadata.uid, '{start}', '{end}')");
    let z = "0x0000000000000000";
    let malformed: Vec<(&'static str, String)> = vec![
        ("malformed selector: only whitespace", "  ".to_owned()),
        ("malformed selector: an unknown function", "bogus(x)".to_owned()),
        (
            "malformed selector: an operator other than ||",
            format!("{} && {}", r(z, "0x8000000000000000"), r(z, "0x8000000000000000")),
        ),
        ("malformed selector: a literal alone", format!("'{z}'")),
        ("malformed selector: two arguments", format!("shardRange(object.metadata.uid, '{z}')")),
        (
            "malformed selector: a string as the field",
            format!("shardRange('object.metadata.uid', '{z}', '0x8000000000000000')"),
        ),
        (
            "malformed selector: the name field",
            format!("shardRange(object.metadata.name, '{z}', '0x8000000000000000')"),
        ),
        (
            "malformed selector: a call as a bound",
            "shardRange(object.metadata.uid, hex(0), '0x8000000000000000')".to_owned(),
        ),
        (
            "malformed selector: an integer as a bound",
            "shardRange(object.metadata.uid, 0, '0x8000000000000000')".to_owned(),
        ),
        ("malformed selector: a bound without 0x", r("0000000000000000", "0x8000000000000000")),
        ("malformed selector: a bound of 0x alone", r("0x", "0x8000000000000000")),
        ("malformed selector: a bound of 18 digits", r("0x000000000000000000", "0x8000000000000000")),
        ("malformed selector: an upper-case digit", r("0x000000000000000A", "0x8000000000000000")),
        ("malformed selector: 17 digits other than 2^64", r(z, "0x20000000000000000")),
        ("malformed selector: a short bound", r("0x0", "0x8000000000000000")),
        ("malformed selector: start equal to end", r("0x8000000000000000", "0x8000000000000000")),
        (
            "malformed selector: two fields",
            format!(
                "{} || shardRange(object.metadata.namespace, '{z}', '0x8000000000000000')",
                r(z, "0x8000000000000000")
            ),
        ),
        ("malformed selector: a reserved word", "if(x)".to_owned()),
    ];
    for (name, sel) in malformed {
        steps.push(step(name, "GET", list(&sel)));
    }
    steps
}

/// A Secret of the list steps.
fn secret(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "labels": {"w": "yes"}},
        "type": "Opaque", "data": {"k": "dg=="}})
}

/// A Pod of the list and status steps (kube-apiserver defaults much of it: compared by shape).
fn pod(status: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"w": "yes"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}, "status": status})
}

/// The items of built-in lists (without `kind` and `apiVersion`, unlike watch events and custom
/// resources' lists), and every write verb's answer asked for as `PartialObjectMetadata(List)`
/// (issue 37): converted after the write, a `Status` never, and the reads' 406 and 500 for a
/// list asked of an object or an object asked of a list.
pub fn write_steps() -> Vec<Step> {
    const SECRETS: &str = "/api/v1/namespaces/{ns}/secrets";
    const PODS: &str = "/api/v1/namespaces/{ns}/pods";
    const AS_OBJECT_BETA: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1";
    const AS_V2: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v2";
    const JSON: &str = "application/json";
    let w = |name: &str| cm(name, json!({"w": "yes"}), json!({"k": "v"}));
    let held = |name: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "labels": {"w": "yes"}, "finalizers": ["example.com/hold"]}})
    };
    let watch = |path: &str, rest: &str| format!("{path}?watch=true&timeoutSeconds=1&{rest}");
    let gadget_w = json!({"apiVersion": "diff.kcache.dev/v1", "kind": "Gadget", "metadata": {"name": "w"},
        "spec": {"tags": ["a"]}});
    vec![
        // Items of lists.
        step("create a Secret", "POST", SECRETS).json(JSON, secret("s1")),
        step("create a second Secret", "POST", SECRETS).json(JSON, secret("s2")),
        step("list Secrets: items without kind and apiVersion", "GET", SECRETS),
        step(
            "watch Secrets from 0: events with kind and apiVersion",
            "GET",
            watch(SECRETS, "resourceVersion=0&fieldSelector=metadata.name%3Ds1"),
        ),
        step(
            "watch-list Secrets: initial events with kind and apiVersion",
            "GET",
            watch(
                SECRETS,
                "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true\
                 &fieldSelector=metadata.name%3Ds2",
            ),
        ),
        step("create a Pod", "POST", PODS).json(JSON, pod(json!({}))).shape_only(),
        step("list Pods: items without kind and apiVersion", "GET", PODS).shape_only(),
        step("watch Pods from 0: events with kind and apiVersion", "GET", watch(PODS, "resourceVersion=0"))
            .shape_only(),
        step("list gadgets: a custom resource's items keep kind and apiVersion", "GET", GADGETS),
        step(
            "list ConfigMaps with a limit: items without kind and apiVersion",
            "GET",
            format!("{CMS}?limit=1&labelSelector=meta%3Dyes"),
        ),
        // Writes answered as PartialObjectMetadata.
        step("create as PartialObjectMetadata", "POST", CMS).json(JSON, w("w1")).accept(AS_OBJECT),
        step("create as PartialObjectMetadata v1beta1", "POST", CMS)
            .json(JSON, w("w2"))
            .accept(AS_OBJECT_BETA),
        step("create with dryRun as PartialObjectMetadata", "POST", format!("{CMS}?dryRun=All"))
            .json(JSON, w("w9"))
            .accept(AS_OBJECT),
        step("create as PartialObjectMetadataList: 406 after the write", "POST", CMS)
            .json(JSON, w("w3"))
            .accept(AS_LIST),
        step("the object created anyway", "GET", format!("{CMS}/w3")),
        step("create as PartialObjectMetadata of meta.k8s.io/v2: 406", "POST", CMS)
            .json(JSON, w("w4"))
            .accept(AS_V2),
        step("nothing created", "GET", format!("{CMS}/w4")),
        step("update as PartialObjectMetadata", "PUT", format!("{CMS}/w1"))
            .json(JSON, cm("w1", json!({"w": "yes"}), json!({"k": "updated"})))
            .accept(AS_OBJECT),
        step("merge patch as PartialObjectMetadata", "PATCH", format!("{CMS}/w1"))
            .json(MERGE, json!({"metadata": {"annotations": {"merged": "yes"}}}))
            .accept(AS_OBJECT),
        step("strategic merge patch as PartialObjectMetadata", "PATCH", format!("{CMS}/w1"))
            .json("application/strategic-merge-patch+json", json!({"metadata": {"labels": {"s": "yes"}}}))
            .accept(AS_OBJECT),
        step("JSON patch as PartialObjectMetadata", "PATCH", format!("{CMS}/w1"))
            .json("application/json-patch+json", json!([{"op": "add", "path": "/data/j", "value": "yes"}]))
            .accept(AS_OBJECT),
        step("apply as PartialObjectMetadata", "PATCH", format!("{CMS}/w1?fieldManager=applier"))
            .json(APPLY, cm("w1", json!({"applied": "yes"}), json!({})))
            .accept(AS_OBJECT),
        step(
            "apply creating as PartialObjectMetadata: 201",
            "PATCH",
            format!("{CMS}/w5?fieldManager=applier"),
        )
        .json(APPLY, w("w5"))
        .accept(AS_OBJECT),
        step("patch as PartialObjectMetadataList: 406 after the write", "PATCH", format!("{CMS}/w1"))
            .json(MERGE, json!({"data": {"list": "asked"}}))
            .accept(AS_LIST),
        step("the patch applied anyway", "GET", format!("{CMS}/w1")),
        step("status update of a Pod as PartialObjectMetadata", "PUT", format!("{PODS}/p/status"))
            .json(JSON, pod(json!({"message": "m"})))
            .accept(AS_OBJECT)
            .shape_only(),
        step("status patch of a Pod as PartialObjectMetadata", "PATCH", format!("{PODS}/p/status"))
            .json(MERGE, json!({"status": {"reason": "r"}}))
            .accept(AS_OBJECT)
            .shape_only(),
        step("a custom resource created as PartialObjectMetadata", "POST", GADGETS)
            .json(JSON, gadget_w)
            .accept(AS_OBJECT),
        step(
            "a custom resource patched as PartialObjectMetadataList: 500 after the write",
            "PATCH",
            format!("{GADGETS}/w"),
        )
        .json(MERGE, json!({"spec": {"tags": ["b"]}}))
        .accept(AS_LIST),
        step(
            "a custom resource deleted as PartialObjectMetadata: a Status",
            "DELETE",
            format!("{GADGETS}/w"),
        )
        .accept(AS_OBJECT),
        step("create with a finalizer", "POST", CMS).json(JSON, held("wf")),
        step(
            "delete held by a finalizer as PartialObjectMetadata: the object",
            "DELETE",
            format!("{CMS}/wf"),
        )
        .accept(AS_OBJECT),
        step("delete as PartialObjectMetadata: the Status, unconverted", "DELETE", format!("{CMS}/w2"))
            .accept(AS_OBJECT),
        step("delete as PartialObjectMetadataList: the Status, unconverted", "DELETE", format!("{CMS}/w3"))
            .accept(AS_LIST),
        step("delete as PartialObjectMetadata of meta.k8s.io/v2: 406", "DELETE", format!("{CMS}/w5"))
            .accept(AS_V2),
        step("create another with a finalizer", "POST", CMS).json(JSON, held("wg")),
        step(
            "deletecollection as PartialObjectMetadataList: the objects as listed",
            "DELETE",
            format!("{CMS}?labelSelector=w%3Dyes"),
        )
        .accept(AS_LIST),
        step(
            "deletecollection as PartialObjectMetadata: 406 after the write",
            "DELETE",
            format!("{SECRETS}?labelSelector=w%3Dyes&fieldSelector=metadata.name%3Ds1"),
        )
        .accept(AS_OBJECT),
        step(
            "deletecollection: a built-in list, items without kind and apiVersion",
            "DELETE",
            format!("{SECRETS}?labelSelector=w%3Dyes"),
        ),
        // More of the metadata-only path (kube's `list_metadata`, `get_metadata`).
        step("an empty PartialObjectMetadataList", "GET", format!("{CMS}?labelSelector=none%3Dyes"))
            .accept(AS_LIST),
        step(
            "an empty PartialObjectMetadataList of a custom resource",
            "GET",
            format!("{GADGETS}?labelSelector=none%3Dyes"),
        )
        .accept(AS_LIST),
        step("a page of a PartialObjectMetadataList", "GET", format!("{CMS}?limit=1")).accept(AS_LIST),
        step(
            "a deletecollection of nothing as PartialObjectMetadataList",
            "DELETE",
            format!("{CMS}?labelSelector=none%3Dyes"),
        )
        .accept(AS_LIST),
        step("get_metadata of a missing object: 404", "GET", format!("{CMS}/missing")).accept(AS_OBJECT),
    ]
}

/// The same `shardSelector`s, well-formed and not, sent to a server without the
/// `ShardedListAndWatch` gate: ignored, everything answered, no `shardInfo`.
pub fn unsharded_steps() -> Vec<Step> {
    let list = |sel: &str| format!("{CMS}?shardSelector={}", q(sel));
    vec![
        step("create a ConfigMap", "POST", CMS)
            .json("application/json", cm("u1", json!({}), json!({"k": "v"}))),
        step("gate off: a selector of no uid is ignored", "GET", list(NO_UIDS)),
        step("gate off: a malformed selector is ignored", "GET", list("bogus(x)")),
        step(
            "gate off: a watch with a malformed selector",
            "GET",
            format!("{CMS}?watch=true&resourceVersion=0&timeoutSeconds=1&shardSelector={}", q("bogus(x)")),
        ),
        step("gate off: a metadata list with a selector", "GET", list(NO_UIDS)).accept(AS_LIST),
    ]
}

/// Runs `steps` against `client` in namespace `ns` (which must exist): the normalized answers.
pub async fn run_steps(client: &kube::Client, ns: &str, steps: &[Step]) -> Result<Vec<Outcome>> {
    let mut out = Vec::new();
    for s in steps {
        out.push(outcome(s, send(client, ns, s).await?, ns));
    }
    Ok(out)
}

/// Sends one step.
async fn send(client: &kube::Client, ns: &str, s: &Step) -> Result<(u16, Value)> {
    let mut req = http::Request::builder().method(s.method).uri(s.path.replace("{ns}", ns));
    if let Some(ct) = s.content_type {
        req = req.header(http::header::CONTENT_TYPE, ct);
    }
    if let Some(a) = s.accept {
        req = req.header(http::header::ACCEPT, a);
    }
    let req = req.body(kube::client::Body::from(s.body.clone()))?;
    let resp = client.send(req).await.with_context(|| format!("step {:?}", s.name))?;
    let code = resp.status().as_u16();
    let bytes = http_body_util::BodyExt::collect(resp.into_body()).await?.to_bytes();
    // A watch's body is a stream of JSON events, one per line: an array of them.
    let body = serde_json::from_slice(&bytes).unwrap_or_else(|_| {
        let events = bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty());
        Value::Array(events.map(|l| serde_json::from_slice(l).unwrap_or(Value::Null)).collect())
    });
    Ok((code, body))
}

/// Runs every step against `client` in namespace `ns` (which must exist): the normalized
/// answers, in order; the [`sharded_steps`] last (the server must have `ShardedListAndWatch`). Waits (polling, up to 60 s) for the CRD's resource to be served between
/// the two groups of steps.
pub async fn run(client: &kube::Client, ns: &str) -> Result<Vec<Outcome>> {
    let mut out = Vec::new();
    for s in steps() {
        out.push(outcome(&s, send(client, ns, &s).await?, ns));
    }
    let probe = step("probe", "GET", GADGETS);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if send(client, ns, &probe).await?.0 == 200 {
            break;
        }
        if tokio::time::Instant::now() > deadline {
            bail!("the CRD's resource was not served within 60 s");
        }
        // kube-apiserver serves a new CRD asynchronously: polling is the only signal.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for s in custom_steps() {
        out.push(outcome(&s, send(client, ns, &s).await?, ns));
    }
    out.extend(run_steps(client, ns, &sharded_steps()).await?);
    out.extend(run_steps(client, ns, &write_steps()).await?);
    Ok(out)
}

/// Deletes the CRD (best effort).
pub async fn cleanup(client: &kube::Client) {
    let s = step(
        "cleanup",
        "DELETE",
        format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD_NAME}"),
    );
    let _ = send(client, "", &s).await;
}

fn outcome(s: &Step, (code, mut body): (u16, Value), ns: &str) -> Outcome {
    if s.compare == Compare::Code {
        body = Value::Null;
    } else if s.compare == Compare::Shape {
        body = shape(&body);
    } else {
        // A periodic BOOKMARK (not the initial-events-end one) comes when a timer fires: a busy
        // kube-apiserver puts one into a one-second watch-list now and then.
        if let Some(events) = body.as_array_mut() {
            events
                .retain(|e| e["type"] != "BOOKMARK" || e["object"]["metadata"].get("annotations").is_some());
        }
        let mut uids = Vec::new();
        normalize(&mut body, ns, &mut uids);
    }
    Outcome { step: s.name.to_string(), code, body }
}

/// The `kind` and `apiVersion` of an answer and of its list items, or of each watch event's
/// object (with the event's `type`), absent ones `null`.
fn shape(body: &Value) -> Value {
    let type_meta = |o: &Value| json!({"kind": o.get("kind"), "apiVersion": o.get("apiVersion")});
    let event = |e: &Value| json!({"type": e["type"], "object": type_meta(&e["object"])});
    if let Some(events) = body.as_array() {
        return events.iter().map(event).collect();
    }
    // A watch body of one event parses as that event.
    if body.get("type").is_some() && body.get("object").is_some() {
        return json!([event(body)]);
    }
    let mut out = type_meta(body);
    if let Some(items) = body.get("items").and_then(Value::as_array) {
        out["items"] = items.iter().map(type_meta).collect();
    }
    out
}

/// Whether `s` is an RFC 3339 timestamp as `metav1.Time` writes it.
fn is_time(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 20 && b[4] == b'-' && b[10] == b'T' && b[19] == b'Z'
}

/// Replaces what differs between servers and runs: uids (numbered by first appearance),
/// timestamps, resourceVersions, the namespace name.
fn normalize(v: &mut Value, ns: &str, uids: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            m.remove("selfLink");
            for (k, x) in m.iter_mut() {
                match (k.as_str(), &*x) {
                    ("uid", Value::String(u))
                        if !u.starts_with("1111") && !u.starts_with("2222") && !u.starts_with("3333") =>
                    {
                        let i = uids.iter().position(|x| x == u).unwrap_or_else(|| {
                            uids.push(u.clone());
                            uids.len() - 1
                        });
                        *x = json!(format!("<uid-{i}>"));
                    }
                    ("resourceVersion", Value::String(_)) => *x = json!("<rv>"),
                    // A continue token holds the list's resourceVersion and a key in each
                    // server's own encoding: opaque, compared by presence.
                    ("continue", Value::String(c)) if !c.is_empty() => *x = json!("<continue>"),
                    (_, Value::String(s)) if is_time(s) => *x = json!("<time>"),
                    _ => normalize(x, ns, uids),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| normalize(x, ns, uids)),
        Value::String(s) => {
            let mut out = s.replace(ns, "<ns>");
            out = scrub_uuids(&out);
            for (i, u) in uids.iter().enumerate() {
                out = out.replace(u.as_str(), &format!("<uid-{i}>"));
            }
            // Timestamps inside messages ("using v1 at 2026-...Z").
            let mut t = String::new();
            let mut rest = out.as_str();
            while let Some(i) = rest.find(|c: char| c.is_ascii_digit()) {
                let cand = rest.get(i..i + 20);
                if cand.is_some_and(is_time) {
                    t.push_str(&rest[..i]);
                    t.push_str("<time>");
                    rest = &rest[i + 20..];
                } else {
                    t.push_str(&rest[..=i]);
                    rest = &rest[i + 1..];
                }
            }
            t.push_str(rest);
            *s = t;
        }
        _ => {}
    }
}

/// Replaces every RFC 4122 uuid in a message (other than the steps' own fixed ones) by
/// `<uid>`.
fn scrub_uuids(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::new();
    let mut i = 0;
    while i < b.len() {
        let cand = s.get(i..i + 36);
        let is_uuid = cand.is_some_and(|c| {
            c.bytes().enumerate().all(|(j, ch)| {
                if matches!(j, 8 | 13 | 18 | 23) { ch == b'-' } else { ch.is_ascii_hexdigit() }
            })
        });
        match cand {
            Some(c)
                if is_uuid && !c.starts_with("1111") && !c.starts_with("2222") && !c.starts_with("3333") =>
            {
                out.push_str("<uid>");
                i += 36;
            }
            _ => {
                let ch = s[i..].chars().next().unwrap_or(' ');
                out.push(ch);
                i += ch.len_utf8();
            }
        }
    }
    out
}

/// Folds the differences kcache-testserver has on purpose (docs/testing.md, "Differential
/// checks"): it decodes and encodes JSON only, so its 415 and 406 list only
/// `application/json` where kube-apiserver also lists YAML and protobuf.
pub fn documented_differences(outcomes: &mut [Outcome]) {
    for o in outcomes {
        if let Some(Value::String(m)) = o.body.get_mut("message") {
            for (real, ours) in [
                (
                    "application/json, application/yaml, application/vnd.kubernetes.protobuf",
                    "application/json",
                ),
                (
                    "application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch",
                    "application/json;stream=watch",
                ),
            ] {
                *m = m.replace(real, ours);
            }
        }
    }
}

/// The differences between two runs, one line per differing step.
pub fn diff(expected: &[Outcome], actual: &[Outcome]) -> Vec<String> {
    let mut out = Vec::new();
    for (i, (e, a)) in expected.iter().zip(actual).enumerate() {
        if e != a {
            out.push(format!(
                "step {i} {:?}: kube-apiserver {} {}\n    kcache-testserver {} {}",
                e.step,
                e.code,
                serde_json::to_string(&e.body).unwrap_or_default(),
                a.code,
                serde_json::to_string(&a.body).unwrap_or_default()
            ));
        }
    }
    if expected.len() != actual.len() {
        out.push(format!("{} outcomes expected, {} got", expected.len(), actual.len()));
    }
    out
}
