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
//! - core/v1 `configmaps`, `secrets`, `pods` (namespaced) and `namespaces` (cluster-scoped),
//!   apiextensions.k8s.io/v1 `customresourcedefinitions` (see below), rbac.authorization.k8s.io/v1
//!   `roles`, `rolebindings` (namespaced), `clusterroles` and `clusterrolebindings`,
//!   events.k8s.io/v1 `events` (namespaced; what kube-runtime's event `Recorder` writes),
//!   coordination.k8s.io/v1 `leases` (namespaced; as kube-apiserver's registry, an update must
//!   carry a resourceVersion and a stale one is a 409 Conflict, a PUT of a missing lease creates
//!   it, and `ValidateLeaseSpec` applies; `strategy` and `preferredHolder` are cleared as with the
//!   `CoordinatedLeaderElection` gate off, its default; with
//!   [`Builder::coordinated_leader_election`] they are kept, coordination.k8s.io/v1beta1
//!   `leasecandidates` are served and a coordinator elects the holders, as kube-apiserver's
//!   `leader-election-controller`), plus the
//!   resources of the CRDs created and any [`ResourceDef`] added with [`TestServer::register`]
//!   (custom resources; `DynamicObject` works), with discovery (`/api`, `/api/v1`, `/apis`,
//!   `/apis/<group>`, `/apis/<group>/<version>`) and `/version`.
//! - get, list, watch, create, update (PUT), patch (server-side apply, JSON merge, strategic
//!   merge treated as JSON merge, and RFC 6902 JSON patch), delete and deletecollection (with
//!   `propagationPolicy`), the `status` subresource, namespaced and across all namespaces; label selectors (`=`, `==`, `!=`, `in`, `notin`, `key`, `!key`)
//!   and the `metadata.name` / `metadata.namespace` field selectors (`=`, `==`, `!=`).
//! - One global, strictly increasing resourceVersion (a decimal string, like etcd's revision;
//!   1 for an empty server) and a bounded event history ([`Builder::history_size`],
//!   [`TestServer::compact`]).
//!
//! # Server-side apply and managed fields
//!
//! Every create, update and patch records `metadata.managedFields` as kube-apiserver's field
//! manager does: an `Update` entry for its manager (`fieldManager`, else the User-Agent's
//! product) holding what it changed, in the `FieldsV1` format. A PATCH with
//! `application/apply-patch+yaml` (kube's `Patch::Apply`, `fieldManager` required) is
//! server-side apply, as structured-merge-diff does it: the applied configuration is merged into
//! the object (created if missing, 201), fields the manager applied before and no longer applies
//! are removed unless another manager owns them, and changing a field another manager owns is
//! kube-apiserver's 409 Conflict (`Apply failed with 1 conflict: conflict with "other":
//! .data.key`, one `FieldManagerConflict` cause per field) unless `force=true`, which takes the
//! field over. Lists merge as their schema says: by the keys of `x-kubernetes-list-type: map`
//! (or a patch merge key), by value for sets, whole when atomic. For the built-in kinds these
//! markers come from the OpenAPI v3 schemas captured from kube-apiserver v1.36.3
//! (`cargo xtask capture-openapi`, kept in `openapi/`); for custom resources from their CRD's
//! structural schema; a resource added with [`TestServer::register`] is untyped (maps merge by
//! key, lists are atomic), like a CRD that preserves unknown fields. The status subresource
//! owns `status` only; the main endpoint of a resource with one ignores `status`.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> anyhow::Result<()> {
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::api::{Api, Patch, PatchParams};
//! use serde_json::json;
//!
//! let server = kcache_testserver::TestServer::start().await;
//! let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
//! let cm = |v: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": v}});
//! cms.patch("c", &PatchParams::apply("first"), &Patch::Apply(cm("1"))).await?;
//! let Err(kube::Error::Api(status)) = cms.patch("c", &PatchParams::apply("second"), &Patch::Apply(cm("2"))).await
//! else { panic!("a conflict") };
//! assert_eq!((status.code, status.message.as_str()), (409, "Apply failed with 1 conflict: conflict with \"first\": .data.k"));
//! let taken = cms.patch("c", &PatchParams::apply("second").force(), &Patch::Apply(cm("2"))).await?;
//! assert_eq!(taken.data.unwrap()["k"], "2");
//! # Ok(()) }
//! ```
//!
//! # Garbage collection
//!
//! DELETE honours `propagationPolicy` (and the older `orphanDependents`) as kube-apiserver does:
//! `Foreground` stores the object with a `deletionTimestamp` and the `foregroundDeletion`
//! finalizer, `Orphan` with the `orphan` finalizer, `Background` (the default) deletes it at
//! once. Then kube-controller-manager's garbage collector, which runs inside the server after
//! every write, deletes objects whose owners (`metadata.ownerReferences`) are all gone, removes
//! owner references to an owner being orphaned, and deletes the dependents of an owner being
//! deleted in the foreground before the owner (waiting for those with `blockOwnerDeletion:
//! true`). Dependents disappear through ordinary DELETED watch events.
//! [`Builder::garbage_collection`]`(false)` turns the collector off, like an envtest without
//! kube-controller-manager: the finalizers are still added, and stay.
//!
//! # Content types
//!
//! The server reads JSON, and writes JSON and, for the reads (get, list, watch) of built-in
//! kinds, Kubernetes' protobuf to a client that prefers it (client-go with `ContentType:
//! application/vnd.kubernetes.protobuf`, kcache's `ApiListerWatcher::protobuf(true)`): the bytes
//! kube-apiserver writes, errors included as protobuf `Status`es
//! ([`Builder::protobuf`](crate::Builder::protobuf)`(false)` turns it off). Each stored version of
//! an object is written as protobuf on the first read that asks for it and kept, as
//! kube-apiserver's watch cache keeps serializations, so later lists, gets and watch events
//! reuse the bytes. A request body in
//! another media type (protobuf, CBOR, YAML) is kube-apiserver's 415 `the body of the request was
//! in an unknown format - accepted media types include: application/json`; an `Accept` it cannot
//! satisfy is 406 (go-restful's `406: Not Acceptable` for the built-in kinds, `only the
//! following media types are accepted` for custom resources), while an `Accept` that also allows
//! JSON gets JSON (custom resources have no protobuf form). As kube-apiserver's typed lists, the
//! JSON list of a built-in kind writes its items without `kind` and `apiVersion` (a GET, every
//! watch event's object and a custom resource's list items carry them); its protobuf items
//! never have them. `Accept: application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1` (or
//! `v1beta1`, or `PartialObjectMetadataList`) converts what a read answers and what a write
//! answers alike; asked as `application/vnd.kubernetes.protobuf;as=...` (client-go's metadata
//! client, which metadatainformer uses, asks so first), a read (get, list, watch and
//! watch-list) answers the protobuf `PartialObjectMetadata(List)` kube-apiserver writes, for
//! custom resources too, with its errors still JSON (kube-apiserver negotiates errors without
//! conversions): create, update (`status` too), every patch (apply included), a DELETE that
//! answers the object (finalizers keep it, or a custom resource), a deletecollection's list. A
//! DELETE that finished answers its `Status` unconverted, as `doTransformObject` passes
//! `Status`es through; a conversion that does not fit (a list asked of one object, one object of
//! a list) fails after the write is done, as kube-apiserver converts the written object.
//! A PATCH's media type must be one of the resource's patch types (custom
//! resources have no strategic merge patch), else 415. Subresources kube-apiserver serves and
//! this server does not (`pods/log`, `pods/exec`, `pods/eviction`, a custom resource's `scale`,
//! ...) are a 501 Status `... is not supported by kcache-testserver`, never a 404 that says
//! they do not exist.
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
//! With [`Builder::sharded_list_and_watch`] (KEP-5866, off by default like kube-apiserver's
//! alpha gate), `shardSelector` filters lists, watches and deletecollections by the FNV-1a hash
//! of the uid or namespace, and a sharded JSON or protobuf list carries `metadata.shardInfo`.
//!
//! # CustomResourceDefinitions
//!
//! Creating an apiextensions.k8s.io/v1 CustomResourceDefinition serves its resource at once:
//! discovery lists it and `kube::Api<DynamicObject>` with its `ApiResource` can create, list,
//! watch (watch-list too), update, patch and delete objects, with custom-resource semantics
//! (generation, resourceVersion required on update, a `Status` from DELETE, a `status`
//! subresource when the version declares one). As in kube-apiserver, the CRD's name must be
//! `<spec.names.plural>.<spec.group>` (else 422 Invalid with upstream's message), `singular`
//! and `listKind` are defaulted, and the create response carries only `storedVersions`; the
//! naming and establishing controllers' work (`acceptedNames`, conditions `NamesAccepted` and
//! `Established` = `"True"`) is a second write (a MODIFIED event) made **immediately after the
//! create**, so any later GET, list or watch sees it. Updating the CRD re-defines the resource
//! (kind, names, storage version). Deleting it deletes every object of the resource (DELETED
//! events), ends the watches of the resource, and then removes the CRD; the resource's paths
//! answer 404 from then on. Creating it again serves an empty resource.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> anyhow::Result<()> {
//! use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
//! use kube::api::{Api, DynamicObject, PostParams};
//! use kube::core::{ApiResource, GroupVersionKind};
//! use serde_json::json;
//!
//! let server = kcache_testserver::TestServer::start().await;
//! let crd: CustomResourceDefinition = serde_json::from_value(json!({
//!     "metadata": {"name": "widgets.example.com"},
//!     "spec": {
//!         "group": "example.com",
//!         "names": {"plural": "widgets", "kind": "Widget"},
//!         "scope": "Namespaced",
//!         "versions": [{"name": "v1", "served": true, "storage": true,
//!             "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}],
//!     },
//! }))?;
//! Api::<CustomResourceDefinition>::all(server.client()).create(&PostParams::default(), &crd).await?;
//!
//! let gvk = GroupVersionKind::gvk("example.com", "v1", "Widget");
//! let ar = ApiResource::from_gvk_with_plural(&gvk, "widgets");
//! let widgets: Api<DynamicObject> = Api::namespaced_with(server.client(), "default", &ar);
//! let w = DynamicObject::new("w1", &ar).data(json!({"spec": {"size": 1}}));
//! assert_eq!(widgets.create(&PostParams::default(), &w).await?.metadata.generation, Some(1));
//! # Ok(()) }
//! ```
//!
//! # Authentication and RBAC
//!
//! Off by default: every request is allowed, whatever credentials it carries. Each
//! [`Builder::token`] adds a bearer token for a user and its groups (a static token file), and
//! with at least one token the server authenticates and authorizes like kube-apiserver:
//!
//! - No `Authorization: Bearer <known token>`: 401 with upstream's `Unauthorized` Status
//!   (with [`Builder::anonymous_auth`], a request without a token is `system:anonymous`
//!   instead, as with `--anonymous-auth=true`; an unknown token is always 401).
//! - `system:masters` may do anything. [`TestServer::config`] and [`TestServer::client`] use
//!   the first token of such a user; [`TestServer::client_for_token`] and
//!   [`TestServer::config_for_token`] speak as anyone.
//! - Everyone else is authorized at every request by the Roles, ClusterRoles, RoleBindings and
//!   ClusterRoleBindings stored in the server, evaluated as the RBAC authorizer does: the
//!   request's verb (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
//!   `deletecollection`), API group, resource (`resource/subresource` for subresources, with
//!   `*/subresource` rules), namespace and name (`resourceNames`; a list or watch with a
//!   `metadata.name=` field selector names its object, as kube-apiserver's RequestInfo does),
//!   `*` wildcards, `nonResourceURLs`, RoleBindings to a Role or a ClusterRole, and subjects of
//!   kind User, Group and ServiceAccount (`system:serviceaccount:<ns>:<name>`). A grant or a
//!   revocation applies to the next request (no restart, so a reflector backing off from 403
//!   recovers).
//! - Denied requests get kube-apiserver's 403 Status (responsewriters `Forbidden`), e.g.
//!   `configmaps is forbidden: User "alice" cannot list resource "configmaps" in API group ""
//!   in the namespace "e2e-1"` (`... at the cluster scope` for cluster-scoped requests,
//!   `forbidden: User "alice" cannot get path "/metrics"` for other paths, and `: RBAC: ...`
//!   naming roles that bindings refer to but that do not exist).
//! - The bootstrap ClusterRoles users bind to are stored at start: `cluster-admin` (bound to
//!   `system:masters`), `admin`, `edit`, `view`, and `system:discovery`,
//!   `system:public-info-viewer` and `system:basic-user` with their bindings, so discovery,
//!   `/version` and the health endpoints are open to every authenticated user.
//! - Authentication and authorization happen before routing and fault injection: a denied
//!   request does not consume a [`RequestFault`], and an unknown path is 403 for a user who may
//!   not see it (404 for `system:masters`). [`RequestRecord::user`] says who was served.
//!
//! # Faults
//!
//! See [`Faults`], [`RequestFault`], [`WatchFault`] and [`WatchListSupport`]: fail the next K
//! requests (optionally by verb and path) with 500, 429 + `Retry-After` (API Priority and
//! Fairness's plain-text rejection, or a Status), 401, 403, 410, a conflict storm
//! ([`RequestFault::conflict`]) or any Status, as JSON or plain text; close watches after N events or at once; send a malformed frame, an unknown event
//! type, an ERROR with any Status, or any raw bytes; hang a stream; slow a stream to N events/s; imitate servers
//! without watch-list; compact now; restart (as a graceful kube-apiserver restart: in-flight
//! requests finish with `Connection: close`, watches are cut, state is kept); make the
//! server unreachable ([`Faults::unreachable`]: no answer, no effect, until removed) or slow to
//! answer ([`Faults::slow_responses`], on the [`Builder::clock`]). Request faults and lasting
//! faults can be limited to one user ([`RequestMatch`]), so one client among several can be cut
//! off.
//!
//! # In-memory connections
//!
//! [`TestServer::in_memory_client`] is a `kube::Client` whose requests go over in-memory pipes
//! ([`TestServer::connect_in_memory`]) instead of TCP: on tokio's paused clock such a test is
//! deterministic (the runtime idles only when every task waits for time) and takes no real time.
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
//! - Authentication only by static bearer tokens ([`Builder::token`]; no client certificates,
//!   service-account tokens, OIDC, webhooks, impersonation or `TokenReview`); authorization
//!   only by RBAC plus the `system:masters` short cut (no Node or webhook authorizer, no
//!   `SubjectAccessReview` / `SelfSubjectAccessReview` / `SelfSubjectRulesReview` endpoints).
//!   RBAC's privilege-escalation checks are not made (anyone allowed to create a Role or a
//!   binding may grant anything), ClusterRole `aggregationRule` is ignored, and the stored
//!   bootstrap `admin`, `edit` and `view` roles have only their core-group (and, for `admin`,
//!   RBAC) rules. The bootstrap policy is only the roles listed above.
//! - No admission (no webhooks, no quota, no LimitRanger), no API aggregation (APIService),
//!   and no defaulting/validation of object bodies beyond `metadata` (custom resources are
//!   not validated against their CRD's schema; unknown fields are pruned, see below).
//! - CRDs: only the storage version is served (another served version answers 404; no
//!   conversion, no webhooks); updating the storage version rewrites the stored objects'
//!   `apiVersion` without events. Validation covers the name, group, names, scope, exactly one
//!   storage version, a schema present for every version, and immutable group and scope; the
//!   wording of messages other than the name's is approximate. No name-conflict detection
//!   (`NamesAccepted` is always `"True"`), no `scale` subresource, printer columns,
//!   categories or `KubernetesAPIApprovalPolicyConformant` condition. Deletion is synchronous:
//!   no `Terminating` condition and no `customresourcecleanup.apiextensions.k8s.io` finalizer
//!   (user finalizers on the CRD are honoured). Writing CRDs through [`Objects`] does not serve
//!   or remove their resources. By default namespaces need not exist before objects are created in them
//!   and none exist at start; [`Builder::strict_namespaces`] starts with the usual four and
//!   enforces existence on create. Deleting a namespace does not delete its contents (it is
//!   removed at once, without the Terminating phase).
//! - Pods are deleted at once (no graceful deletion); any object with finalizers gets a
//!   `deletionTimestamp` and is removed when an update or patch empties its finalizers (one
//!   DELETED event, as upstream). The garbage collector runs synchronously after each write
//!   (kube-controller-manager's acts shortly after, from its informers); its own writes and
//!   those of the CRD controllers record no `managedFields` entry (kube-apiserver would show
//!   `kube-controller-manager` and `kube-apiserver` updates). It resolves an owner reference by
//!   API group and kind among the served resources; an unknown kind keeps the dependent.
//! - `metadata.generation` is kept for pods and custom resources and bumped when anything outside
//!   `metadata` and `status` changes. The `status` subresource exists for pods, namespaces and
//!   custom resources ([`ResourceDef::status_subresource`]): status writes change only
//!   `.status`, other writes keep it, and create sets pods to `Pending` and namespaces to
//!   `Active` (no QoS class, no namespace `spec.finalizers`) and drops a custom resource's
//!   status. No other subresources (501, see "Content types"). Strategic merge patch
//!   is treated as JSON merge patch (lists are replaced, never merged by key). A JSON patch
//!   (RFC 6902) that does not apply gets 422 Invalid with this server's own message.
//! - Server-side apply: an apply body must be JSON (YAML syntax is a 501); no cap on `Update`
//!   entries (kube-apiserver merges those past ten into `ancient-changes`), no
//!   `kubectl.kubernetes.io/last-applied-configuration` interplay with client-side apply, no
//!   managed-field conversion between versions (only the storage version is served). A
//!   built-in object loses `null` fields, empty maps and empty metadata lists, as Go's
//!   `omitempty` drops them, and the fields its schema does not have (with a `Warning` header,
//!   or a 400 under `fieldValidation=Strict`); other defaulting of kube-apiserver's typed
//!   decoding does not happen. A custom resource is pruned to its CRD's structural schema
//!   the same way (where the schema does not preserve unknown fields). A typed
//!   error (a list-map item without its key) is a 500 in kube-apiserver's shape, with this
//!   server's own message.
//! - JSON bodies only (no protobuf, CBOR or YAML request bodies); protobuf output for the reads
//!   of built-in kinds and the metadata-only reads of any kind only (a write's answer is JSON
//!   where kube-apiserver would answer protobuf); no YAML and no `Table` output (406 or 415,
//!   see "Content types").
//!   `PartialObjectMetadata(List)` of meta.k8s.io `v1` or `v1beta1` is served when
//!   `Accept` asks for it (kube's `*_metadata` calls, client-go's metadata client), with
//!   kube-apiserver's errors: 406 for a list asked as an object or an object as a list (500 for
//!   a custom resource's, as `meta.EachListItem` fails), the handler's 406 for any other
//!   conversion; a watch asked for lists ends at its first frame (checked against
//!   kube-apiserver by the e2e differential cases). Write responses are converted the same
//!   way (see "Content types").
//! - Field selectors support `metadata.name` and `metadata.namespace` (each kind's rules, as
//!   kube-apiserver's field-label conversions), pods' `spec.nodeName`, `status.phase` and the
//!   other fields of their `ToSelectableFields`, secrets' `type` and namespaces' `status.phase`;
//!   custom resources have no `selectableFields`. Values are read from the stored object without
//!   the defaulting kube-apiserver applies (an unset `spec.restartPolicy` is `""`).
//! - A list at a resourceVersion newer than the server is answered 504 at once, and a
//!   watch-list from one gets its 200 and single 504 ERROR event at once (kube-apiserver waits
//!   up to 3 s for its cache first); a plain watch from a future resourceVersion waits for
//!   events after it.
//! - A negative `timeoutSeconds` ends the watch right after the headers with no events
//!   (kube-apiserver races its expired timer against the first events).
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
//! - Plain HTTP/1.1 only (no TLS, no HTTP/2); `/version` reports v1.34.0. A restart
//!   ([`Faults::restart`]) takes no time: idle connections answer one more request with
//!   `Connection: close` where kube-apiserver closes them at once.
//! - Every name is validated as an RFC 1123 subdomain (kube-apiserver uses stricter rules for
//!   some kinds, e.g. namespaces must be DNS labels); a `resourceVersion` in a create body is
//!   ignored; `metadata` field types are checked, nothing else in a body is.
//! - deletecollection is served for every kind, namespaces included (kube-apiserver's namespace
//!   registry has none); like the generic registry's, it answers the list it deleted from (the
//!   objects as listed, before their deletion).
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

// Imports run one way: a module imports only from the groups below its own, never back up.
//   server                               the handles and the accept loop
//   handler                              authentication, faults and the log; routing
//   handler::{reads, writes, discovery}, watch, auth, direct
//   state                                what every connection shares
//   gc, managed
//   log, validation
//   request, response, crd, selector, media
//   status, store
//   faults, resources, jsonpatch, util, schema, fieldset
mod auth;
mod connection;
mod coordinator;
mod crd;
mod direct;
mod faults;
mod fieldset;
mod gc;
mod handler;
mod jsonpatch;
mod lease;
mod log;
mod managed;
mod media;
mod memory;
mod request;
mod resources;
mod response;
mod schema;
mod selector;
mod server;
mod state;
mod status;
mod store;
mod util;
mod validation;
mod watch;

pub use direct::{DirectError, Objects};
pub use faults::{FaultBody, FaultId, RequestFault, RequestMatch, Verb, WatchFault, WatchListSupport};
/// The clock types of [`Builder::clock`], from kcache-utils.
pub use kcache_utils::{Clock, FakeClock, SystemClock};
pub use log::{RequestLog, RequestRecord};
pub use resources::ResourceDef;
pub use server::{Builder, DEFAULT_BOOKMARK_INTERVAL, DEFAULT_HISTORY_SIZE, Faults, TestServer};
