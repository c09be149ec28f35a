//! An in-process Kubernetes API server for tests, demos and fault injection, spoken to through
//! `kube::Client` exactly as to kube-apiserver.
//!
//! It plays the part envtest's etcd + kube-apiserver pair plays for Go controllers, but starts in
//! milliseconds inside the test process: plain HTTP on a random port of 127.0.0.1, the real REST
//! paths, JSON shapes, watch wire protocol and `Status` errors, and a [`Faults`] handle that
//! breaks it on purpose (failed requests, broken or hung watch streams, compaction, restarts,
//! servers that predate watch-list). A [`RequestLog`] records what clients did.
//!
//! # Starting it in a test
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> anyhow::Result<()> {
//! # use k8s_openapi::api::core::v1::ConfigMap;
//! let server = kcache_testserver::TestServer::start().await;
//! let cms: kube::Api<ConfigMap> = kube::Api::default_namespaced(server.client());
//! assert!(cms.list(&Default::default()).await?.items.is_empty());
//! # Ok(()) }
//! ```
//!
//! # What it serves
//!
//! - core/v1 `configmaps`, `secrets`, `pods` (namespaced) and `namespaces` (cluster-scoped), plus
//!   any [`ResourceDef`] added with [`TestServer::register`] (custom resources; `DynamicObject`
//!   works), with discovery (`/api`, `/api/v1`, `/apis`, `/apis/<group>`, `/apis/<group>/<version>`)
//!   and `/version`.
//! - get, list, watch, create, update (PUT), patch (JSON merge, strategic merge treated as JSON
//!   merge, and RFC 6902 JSON patch), delete and deletecollection, the `status` subresource,
//!   namespaced
//!   and across all namespaces; label selectors (`=`, `==`, `!=`, `in`, `notin`, `key`, `!key`)
//!   and the `metadata.name` / `metadata.namespace` field selectors (`=`, `==`, `!=`).
//! - One global, strictly increasing resourceVersion (a decimal string, like etcd's revision;
//!   1 for an empty server) and a bounded event history ([`Builder::history_size`],
//!   [`TestServer::compact`]).
//!
//! # Watch protocol
//!
//! A watch (`GET ...?watch=true`) is a chunked 200 response of newline-delimited
//! `{"type":...,"object":...}` frames.
//!
//! - From `""` or `"0"`: synthetic ADDED events for the current state, **newest first**
//!   (descending resourceVersion, deliberately not resourceVersion order: a client that publishes
//!   the resourceVersion of the first synthetic event and resumes from it loses every other
//!   object), then live events.
//! - From `N` inside the history: exactly the events after `N`. Older than the history: one ERROR
//!   event with a 410 Expired Status `too old resource version: N (M)` (M = oldest resumable
//!   resourceVersion), then the stream ends.
//! - `allowWatchBookmarks=true`: a BOOKMARK (`apiVersion`, `kind` and `metadata.resourceVersion`
//!   only) every [`Builder::bookmark_interval`] while the stream is idle.
//! - `sendInitialEvents=true&resourceVersionMatch=NotOlderThan` (watch-list): the initial ADDED
//!   events, then, with `allowWatchBookmarks=true`, a BOOKMARK at the snapshot resourceVersion
//!   annotated `k8s.io/initial-events-end: "true"`, then live events on the same stream. Invalid
//!   combinations get kube-apiserver's 422 `ListOptions.meta.k8s.io "" is invalid: ...`. As in
//!   Kubernetes 1.34+, a plain watch from `""`/`"0"` is defaulted to a watch-list
//!   (`SetListOptionsDefaults`), so with bookmarks allowed it also gets the end bookmark;
//!   [`Faults::set_watch_list_support`] imitates older servers.
//! - `timeoutSeconds`: the stream ends cleanly (terminating chunk) after that long.
//! - Selectors apply to events as in the watch cache: an object that starts matching is ADDED,
//!   one that stops matching is DELETED (its previous content at the change's resourceVersion).
//!
//! # Lists
//!
//! `limit`/`continue` with opaque tokens holding the list's resourceVersion and the last key;
//! continuation pages are consistent snapshots (reconstructed from the history). A token older
//! than the history gets 410 Expired with kube-apiserver's "The provided continue parameter is
//! too old ..." message and a fresh token in `metadata.continue`. `resourceVersion=""` is a
//! consistent read; `"0"` is answered from "the cache", unpaginated; `N` with `limit` or
//! `resourceVersionMatch=Exact` is an exact read (410 "The resourceVersion for the provided list
//! is too old." once compacted); `N` newer than the server is 504 "Too large resource version"
//! with cause `ResourceVersionTooLarge`.
//!
//! # Faults
//!
//! See [`Faults`], [`RequestFault`], [`WatchFault`] and [`WatchListSupport`]: fail the next K
//! requests (optionally by verb and path) with 500, 429 + `Retry-After`, 401, 403, 410 or any
//! Status; close watches after N events or at once; send a malformed frame, an unknown event
//! type, or an ERROR with any Status; hang a stream; slow a stream to N events/s; imitate servers
//! without watch-list; compact now; restart (drop every connection, keep state).
//!
//! # Request log and direct access
//!
//! [`TestServer::request_log`] records every request: method, path, raw query, [`Verb`], whether
//! it was a watch, the connection it came on, the response status, and when (tokio clock, so a
//! paused test clock shows backoff intervals, and wall clock). [`TestServer::objects`] reads and
//! writes objects without HTTP ([`Objects::bulk_insert`] loads 100k objects for a benchmark in
//! well under a second); its writes are watch events like any other.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> anyhow::Result<()> {
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kcache_testserver::{RequestFault, TestServer, Verb};
//! use serde_json::json;
//!
//! let server = TestServer::start().await;
//! let fixtures = (0..3).map(|i| json!({"metadata": {"name": format!("cm-{i}")}}));
//! server.objects().bulk_insert("", "v1", "configmaps", fixtures);
//! server.faults().fail_requests(1, RequestFault::too_many_requests(1).verb(Verb::List));
//!
//! let cms: kube::Api<ConfigMap> = kube::Api::default_namespaced(server.client());
//! assert!(cms.list(&Default::default()).await.is_err());
//! assert_eq!(cms.list(&Default::default()).await?.items.len(), 3);
//!
//! let lists = server.request_log().filter(|r| r.verb == Verb::List);
//! assert_eq!(lists.iter().map(|r| r.status).collect::<Vec<_>>(), [429, 200]);
//! # Ok(()) }
//! ```
//!
//! # Fidelity
//!
//! Known differences from kube-apiserver (where they disagree, this server is wrong):
//!
//! - No authentication, authorization, admission or defaulting/validation of object bodies
//!   beyond `metadata`. By default namespaces need not exist before objects are created in them
//!   and none exist at start; [`Builder::strict_namespaces`] starts with the usual four and
//!   enforces existence on create. Deleting a namespace does not delete its contents (it is
//!   removed at once, without the Terminating phase).
//! - Pods are deleted at once (no graceful deletion); any object with finalizers gets a
//!   `deletionTimestamp` and is removed when an update or patch empties its finalizers.
//! - `metadata.generation` is kept for pods and custom resources and bumped when anything outside
//!   `metadata` and `status` changes. The `status` subresource exists for pods, namespaces and
//!   custom resources ([`ResourceDef::status_subresource`]): status writes change only
//!   `.status`, other writes keep it, and create sets pods to `Pending` and namespaces to
//!   `Active` (no QoS class, no namespace `spec.finalizers`) and drops a custom resource's
//!   status. No other subresources (`scale`, `log`, `eviction`, ...), no `managedFields`, and
//!   no server-side apply (`application/apply-patch+yaml` gets 415). Strategic merge patch
//!   is treated as JSON merge patch (lists are replaced, never merged by key). A JSON patch
//!   (RFC 6902) that does not apply gets 422 Invalid with this server's own message.
//! - Only JSON: no protobuf, no CBOR, no `Table` output. `PartialObjectMetadata(List)` is
//!   served when `Accept` asks for it (kube's `*_metadata` calls).
//! - Field selectors support only `metadata.name` and `metadata.namespace`.
//! - A list at a resourceVersion newer than the server is answered 504 at once (kube-apiserver
//!   waits up to 3 s for its cache first); a watch from a future resourceVersion waits for events
//!   after it.
//! - The history is one global window (like etcd compaction, not per-resource watch caches). A
//!   live watch that falls more than [`Builder::history_size`] events behind, or is behind when
//!   [`TestServer::compact`] runs, ends with the 410 ERROR event (kube-apiserver would instead
//!   close a watcher whose buffer overflows).
//! - Synthetic and initial events come newest first; kube-apiserver sends them in key order.
//!   Both are "not resourceVersion order".
//! - Bookmarks are sent every [`Builder::bookmark_interval`] of idleness (default 1 s) rather
//!   than about once a minute.
//! - A watch without `timeoutSeconds` lasts 30 minutes (kube-apiserver: random 30-60 minutes).
//! - The message for a body of the wrong kind for a built-in resource is approximate; for
//!   custom resources it is kube-apiserver's 422 (`kind: Invalid value: ...`).
//! - No `remainingItemCount` when selectors are used (as kube-apiserver); continue tokens are
//!   this server's own encoding.
//! - Plain HTTP/1.1 only (no TLS, no HTTP/2); `/version` reports v1.34.0.
//! - Every name is validated as an RFC 1123 subdomain (kube-apiserver uses stricter rules for
//!   some kinds, e.g. namespaces must be DNS labels); a `resourceVersion` in a create body is
//!   ignored; `metadata` field types are checked, nothing else in a body is.
//! - deletecollection answers the list of deleted objects for every kind.
//! - The Status bodies of injected faults are this server's (modelled on kube-apiserver's).
//! - Writes through [`Objects`] bypass validation (but are ordinary events for watches).
//!
//! # Performance
//!
//! Objects are stored as shared serialized bytes; lists and watch frames concatenate them, so
//! nothing is re-serialised on the read path. On the 2-CPU development machine (shared with
//! other builds) `cargo bench -p kcache-testserver --bench throughput` measured a 50k-object list
//! in about 82 ms and a replay of 200k watch events to one client at about 800k events/s; 100k
//! small ConfigMaps take about 72 MB RSS. See docs/benchmarks.md.
//!
//! For other languages' benchmarks it also runs standalone:
//! `cargo run --release -p kcache-testserver --example serve -- --port 8080 --objects 10000`
//! prints its URL.

mod auth;
mod crd;
mod direct;
mod faults;
mod handler;
mod jsonpatch;
mod log;
mod resources;
mod selector;
mod server;
mod status;
mod store;
mod util;
mod watch;

pub use direct::{DirectError, Objects};
pub use faults::{Faults, RequestFault, Verb, WatchFault, WatchListSupport};
pub use log::{RequestLog, RequestRecord};
pub use resources::ResourceDef;
pub use server::{Builder, DEFAULT_BOOKMARK_INTERVAL, DEFAULT_HISTORY_SIZE, TestServer};
