//! [`ApiListerWatcher`]: the [`ListerWatcher`] over `kube::Client`, which builds the list and watch
//! requests, classifies error responses and hands response bodies to the decoders.

use std::fmt;
use std::marker::PhantomData;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use http::HeaderValue;
use http_body_util::BodyExt;
use kcache_shard_selector::ShardSelector;
use kube::core::Status;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::decode_thread::{ListBodyDecoder, decode_list_body, events_from_chunks, multi_thread_runtime};
use crate::error::{ReflectorError, Result};
use crate::lister_watcher::{ListOptions, ListPage, ListerWatcher, WatchOptions, WatchStream};
use crate::protobuf::{ACCEPT_PROTOBUF, ProtobufKind, is_protobuf};
use crate::watch_decode::{Decoding, ExpectedType};

/// [`ListerWatcher`] over a `kube::Api<K>`: typed k8s-openapi resources, `DynamicObject`, or
/// kube's `PartialObjectMeta` for metadata only.
///
/// Requests go through `kube::Client::send` (kube's transport, auth and middleware); this type
/// only builds the query string and decodes the responses, so it can classify every failure
/// precisely (HTTP code, `Retry-After`, malformed frame versus unknown event type).
///
/// # Metadata only
///
/// When `K` is kube's [`PartialObjectMeta`](kube::core::PartialObjectMeta) (any type whose
/// `Resource::metadata_api()` is true), lists and watches ask the server for
/// `PartialObjectMetadataList` and `PartialObjectMetadata` through `Accept`, with the media
/// types kube's own `Api::list_metadata` and `Api::watch_metadata` send (client-go's
/// `metadata` client asks for the same, protobuf first): the server sends each object's
/// `metadata` and nothing else, so a cache of Pods holds no specs or statuses at all. The same
/// streaming decoding, decoding threads and `managedFields` stripping apply, and watch-list
/// works as for whole objects.
///
/// ```no_run
/// use k8s_openapi::api::core::v1::Pod;
/// use kcache_reflector::ApiListerWatcher;
/// use kube::core::PartialObjectMeta;
///
/// # fn f(client: kube::Client) {
/// // Lists and watches only the metadata of every Pod.
/// let lw = ApiListerWatcher::new(kube::Api::<PartialObjectMeta<Pod>>::all(client));
/// assert!(lw.is_metadata_only());
/// # }
/// ```
///
/// # Examples
///
/// ```no_run
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache_reflector::ApiListerWatcher;
///
/// # fn f(client: kube::Client) {
/// let api: kube::Api<ConfigMap> = kube::Api::namespaced(client, "default");
/// let lw = ApiListerWatcher::new(api).labels("app=web");
/// # let _ = lw;
/// # }
/// ```
pub struct ApiListerWatcher<K> {
    client: kube::Client,
    url_path: String,
    label_selector: Option<String>,
    field_selector: Option<String>,
    /// Sent as `shardSelector` when the request's options carry none.
    shard_selector: Option<ShardSelector>,
    decoding: Decoding,
    /// Whether requests ask for `PartialObjectMetadata(List)` (`K::metadata_api()`).
    metadata_only: bool,
    _kind: PhantomData<fn() -> K>,
}

impl<K> fmt::Debug for ApiListerWatcher<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiListerWatcher")
            .field("url_path", &self.url_path)
            .field("label_selector", &self.label_selector)
            .field("field_selector", &self.field_selector)
            .field("shard_selector", &self.shard_selector.as_ref().map(ToString::to_string))
            .field("decoding", &self.decoding)
            .field("metadata_only", &self.metadata_only)
            .finish()
    }
}

impl<K> Clone for ApiListerWatcher<K> {
    fn clone(&self) -> Self {
        Self {
            client: self.client.clone(),
            url_path: self.url_path.clone(),
            label_selector: self.label_selector.clone(),
            field_selector: self.field_selector.clone(),
            shard_selector: self.shard_selector.clone(),
            decoding: self.decoding.clone(),
            metadata_only: self.metadata_only,
            _kind: PhantomData,
        }
    }
}

impl<K> ApiListerWatcher<K> {
    /// Lists and watches what `api` addresses (a namespace, or all namespaces); only the
    /// metadata when `K` is a `PartialObjectMeta` (see [Metadata only](Self#metadata-only)).
    pub fn new(api: kube::Api<K>) -> Self
    where
        K: kube::Resource,
    {
        let url_path = api.resource_url().to_owned();
        Self::with_url(api.into_client(), url_path)
    }

    /// Lists and watches the collection at `url_path` (e.g. `/api/v1/namespaces/ns/configmaps`,
    /// as `kube::Resource::url_path` builds it), through `client`; only the metadata when `K` is
    /// a `PartialObjectMeta`.
    ///
    /// ```no_run
    /// use kcache_reflector::ApiListerWatcher;
    /// use kube::core::{ApiResource, DynamicObject, GroupVersionKind, PartialObjectMeta, Resource};
    ///
    /// # fn f(client: kube::Client) {
    /// let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget"));
    /// let url = DynamicObject::url_path(&ar, Some("default"));
    /// let lw = ApiListerWatcher::<PartialObjectMeta<DynamicObject>>::with_url(client, url);
    /// # let _ = lw;
    /// # }
    /// ```
    pub fn with_url(client: kube::Client, url_path: impl Into<String>) -> Self
    where
        K: kube::Resource,
    {
        Self {
            client,
            url_path: url_path.into(),
            label_selector: None,
            field_selector: None,
            shard_selector: None,
            decoding: Decoding::default(),
            metadata_only: K::metadata_api(),
            _kind: PhantomData,
        }
    }

    /// Whether this lists and watches `PartialObjectMetadata` rather than whole objects: true
    /// exactly when `K` is kube's `PartialObjectMeta` (`Resource::metadata_api()`).
    pub fn is_metadata_only(&self) -> bool {
        self.metadata_only
    }

    /// Restricts to objects matching a label selector (`labelSelector`).
    #[must_use]
    pub fn labels(mut self, selector: &str) -> Self {
        self.label_selector = Some(selector.to_owned()).filter(|s| !s.is_empty());
        self
    }

    /// Restricts to objects matching a field selector (`fieldSelector`).
    #[must_use]
    pub fn fields(mut self, selector: &str) -> Self {
        self.field_selector = Some(selector.to_owned()).filter(|s| !s.is_empty());
        self
    }

    /// Restricts to one shard of the collection (`shardSelector`, KEP-5866: kube-apiserver
    /// v1.36+ with the `ShardedListAndWatch` gate sends only the objects whose uid or namespace
    /// hashes into the selector's ranges); `None` for the whole collection.
    ///
    /// Sent on every LIST, WATCH and watch-list request, JSON, protobuf and metadata-only
    /// alike (unless a request's own [`ListOptions::shard_selector`] or
    /// [`WatchOptions::shard_selector`] names another). A [`Reflector`](crate::Reflector) or
    /// informer built on this lister-watcher adopts the selector: it checks that the server
    /// filtered, and filters itself when it did not (see
    /// [`Reflector::shard_selector`](crate::Reflector::shard_selector)).
    ///
    /// ```no_run
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache_reflector::ApiListerWatcher;
    /// use kcache_shard_selector::{ShardKey, ShardSelector};
    ///
    /// # fn f(client: kube::Client) {
    /// // The second of three shards by uid.
    /// let shard = ShardSelector::split(ShardKey::Uid, 3).swap_remove(1);
    /// let lw = ApiListerWatcher::new(kube::Api::<ConfigMap>::all(client)).shard_selector(Some(shard));
    /// # let _ = lw;
    /// # }
    /// ```
    #[must_use]
    pub fn shard_selector(mut self, selector: Option<ShardSelector>) -> Self {
        self.shard_selector = selector;
        self
    }

    /// Whether objects are decoded without `metadata.managedFields`. **On by default**; pass
    /// `false` to keep them, as client-go's and kube-runtime's library defaults do.
    ///
    /// When on, the member is skipped while parsing, so it is never allocated, and objects
    /// arrive with `managed_fields: None`; nothing else of them changes. Go users get the same
    /// cache, after a full decode, from an informer transform: kube-controller-manager and
    /// kube-scheduler install one that clears `managedFields` on all their informers, and
    /// controller-runtime offers `TransformStripManagedFields`.
    ///
    /// Why it is the default: k8s-openapi decodes each `managedFields[].fieldsV1` into a
    /// `serde_json::Value` tree (a `BTreeMap` node of about 630 bytes per JSON object in it),
    /// where client-go keeps the raw bytes: about 2.6 KB of heap for a small ConfigMap written by
    /// one manager, more than the rest of the object. Kept, they make a cache of 50k ConfigMaps
    /// on a real kube-apiserver peak at 1.5 to 1.9x client-go's RSS; skipped, at 0.5 to 0.8x
    /// (docs/benchmarks.md). Writing a cached object back is safe either way: an update without
    /// `managedFields` leaves the server's record of them as it is.
    ///
    /// Keep them (`false`) when something reading the cache needs them, for example to find
    /// which fields a manager owns.
    ///
    /// ```no_run
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kcache_reflector::ApiListerWatcher;
    ///
    /// # fn f(client: kube::Client) {
    /// // Cache Pods with their managed fields, as client-go does.
    /// let lw = ApiListerWatcher::new(kube::Api::<Pod>::all(client)).strip_managed_fields(false);
    /// # let _ = lw;
    /// # }
    /// ```
    #[must_use]
    pub fn strip_managed_fields(mut self, strip: bool) -> Self {
        self.decoding.strip_managed_fields = strip;
        self
    }

    /// Decodes a watch's live events in the reflector's own task instead of on the watch's
    /// decoding thread (off by default).
    ///
    /// By default a watch is read and decoded on a thread of its own for its whole life, which
    /// keeps an updated object's memory in the arena of the one it replaces. With this on, that
    /// thread decodes only a watch-list's initial events and then hands the stream back, and a
    /// plain watch is decoded in the task from the start, as kube-runtime's watcher does: a
    /// steady flow of small events then wakes no second thread per chunk, which made the CPU
    /// per event steadier and lower on a two-core VM (0.65 to 0.73 against 0.68 to 1.75 CPU
    /// seconds for 200k events), for about 5 MiB more at the peak of a 10k-object cache taking
    /// 5k updates (docs/benchmarks.md, "The hand-off").
    ///
    /// ```no_run
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache_reflector::ApiListerWatcher;
    ///
    /// # fn f(client: kube::Client) {
    /// let lw = ApiListerWatcher::new(kube::Api::<ConfigMap>::all(client)).live_events_in_task(true);
    /// # let _ = lw;
    /// # }
    /// ```
    #[must_use]
    pub fn live_events_in_task(mut self, in_task: bool) -> Self {
        self.decoding.live_events_in_task = in_task;
        self
    }

    /// How many helper threads decode beside a response's own decoding thread (none by
    /// default): the items of a protobuf list, and the initial events of a watch-list (JSON or
    /// protobuf). They start only after the first 256 items or events, on a multi-threaded
    /// runtime, and end with the list or at the bookmark that ends the initial events; live
    /// events are decoded one by one on the watch's thread as before. A JSON list is decoded on
    /// one thread (its items cannot be cut apart without parsing them).
    ///
    /// Protobuf frames each item of a list with its length, and a watch frames each event (a
    /// length, or a newline), so they can be cut apart without decoding them, and decoding is
    /// nearly all of a sync's CPU. With a helper it runs on two cores instead of one. The
    /// objects, their order and the errors are the same either way (the first bad item's
    /// error, whichever thread found it).
    ///
    /// The price is memory: a helper's objects come from its own malloc arena, so the memory
    /// an updated object frees there is not reused by the watch's thread, which decodes the
    /// updates (with glibc, about 6 MiB more at the peak of the 10k-ConfigMap memory benchmark,
    /// 38 MiB against 32; docs/benchmarks.md, "A second decoding thread"). On two cores shared
    /// with the API server it made a 50k-object protobuf list sync about 15% faster.
    ///
    /// ```no_run
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache_reflector::ApiListerWatcher;
    ///
    /// # fn f(client: kube::Client) {
    /// // Sync faster on a machine with cores to spare.
    /// let lw = ApiListerWatcher::new(kube::Api::<ConfigMap>::all(client)).protobuf(true).decode_helpers(1);
    /// # let _ = lw;
    /// # }
    /// ```
    #[must_use]
    pub fn decode_helpers(mut self, helpers: usize) -> Self {
        self.decoding.decode_helpers = helpers;
        self
    }

    /// Reallocates every decoded object at its exact size before it is handed on (off by
    /// default). serde grows each `Vec` it decodes by doubling, as JSON does not say a list's
    /// length up front, so a Pod's three volumes sit in room for four and its containers' env
    /// vars in room for eight; k8s-openapi's list elements are large (a `Volume` inlines every
    /// volume source), and that slack was a fifth of a cache of realistic Pods' heap in
    /// `cargo xtask bench`'s `scale_full` (docs/benchmarks.md). With this on, each object is
    /// cloned once after decoding (`Clone` allocates every `Vec` at its length) and the decoded
    /// original dropped: what the cache holds is the same object, in less memory, for one
    /// clone's CPU time per object (kube-runtime's store clones every object too).
    ///
    /// ```no_run
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kcache_reflector::ApiListerWatcher;
    ///
    /// # fn f(client: kube::Client) {
    /// let lw = ApiListerWatcher::new(kube::Api::<Pod>::all(client)).compact_objects(true);
    /// # let _ = lw;
    /// # }
    /// ```
    #[must_use]
    pub fn compact_objects(mut self, compact: bool) -> Self
    where
        K: Clone + 'static,
    {
        self.decoding.compact =
            compact.then_some(crate::watch_decode::compact_in_place::<K> as fn(&mut dyn std::any::Any));
        self
    }

    /// Requires every watch event's object to carry this `apiVersion` and `kind`; an event with
    /// any other (or none) is a [`Decode`](crate::ErrorKind::Decode) error, which relists. Typed
    /// k8s-openapi resources get this check from their own decoding; this gives it to
    /// `DynamicObject`, which decodes any kind (client-go checks the expected GVK of unstructured
    /// objects the same way, but skips the event instead of relisting).
    ///
    /// ```no_run
    /// use kcache_reflector::ApiListerWatcher;
    /// use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
    ///
    /// # fn f(client: kube::Client) {
    /// let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget"));
    /// let api = kube::Api::<DynamicObject>::all_with(client, &ar);
    /// let lw = ApiListerWatcher::new(api).expect_type(&ar.api_version, &ar.kind);
    /// # let _ = lw;
    /// # }
    /// ```
    #[must_use]
    pub fn expect_type(mut self, api_version: &str, kind: &str) -> Self {
        self.decoding.expect = Some(Arc::new(ExpectedType::new(api_version, kind)));
        self
    }

    /// Whether lists and watches ask kube-apiserver for Kubernetes' protobuf encoding
    /// (`application/vnd.kubernetes.protobuf`) instead of JSON. **Off by default.**
    ///
    /// This is client-go's `rest.Config.ContentType = "application/vnd.kubernetes.protobuf"`,
    /// which kube-controller-manager and kube-scheduler use for built-in types: smaller bodies
    /// for the server to write and cheaper ones to read. kcache decodes protobuf straight into
    /// `K` (k8s-openapi's own `Deserialize`, driven by kcache-protobuf's schema of the built-in
    /// messages), so the objects are the very ones JSON gives.
    ///
    /// JSON stays the fallback, with nothing to configure:
    /// - a kind without a protobuf form (a custom resource: `K`'s kind is not a built-in) is
    ///   asked for and read as JSON, whatever this says;
    /// - requests accept JSON too (`Accept: application/vnd.kubernetes.protobuf,
    ///   application/json`), and every response is decoded by its `Content-Type`, so a server
    ///   (or proxy) that does not speak protobuf answers JSON and is read as JSON.
    ///
    /// Bad protobuf input is a classified [`Decode`](crate::ErrorKind::Decode) error that names
    /// a byte offset and a field, never a value, and leads to a relist, as for JSON.
    ///
    /// ```no_run
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kcache_reflector::ApiListerWatcher;
    ///
    /// # fn f(client: kube::Client) {
    /// let lw = ApiListerWatcher::new(kube::Api::<Pod>::all(client)).protobuf(true);
    /// # let _ = lw;
    /// # }
    /// ```
    #[must_use]
    pub fn protobuf(mut self, on: bool) -> Self
    where
        K: kube::Resource<DynamicType = ()>,
    {
        self.decoding.protobuf =
            if on { ProtobufKind::new(&K::api_version(&()), &K::kind(&())).map(Arc::new) } else { None };
        self
    }

    fn query(&self, shard: Option<&ShardSelector>) -> form_urlencoded::Serializer<'static, String> {
        let start = self.url_path.len() + 1;
        let mut q = form_urlencoded::Serializer::for_suffix(format!("{}?", self.url_path), start);
        if let Some(l) = &self.label_selector {
            q.append_pair("labelSelector", l);
        }
        if let Some(f) = &self.field_selector {
            q.append_pair("fieldSelector", f);
        }
        // apimachinery's canonical rendering (`ShardSelector::String()`), which the server
        // echoes in `metadata.shardInfo.selector`.
        if let Some(s) = shard.or(self.shard_selector.as_ref()) {
            q.append_pair("shardSelector", &s.to_string());
        }
        q
    }

    fn list_request(&self, opts: &ListOptions) -> Result<http::Request<kube::client::Body>> {
        let mut q = self.query(opts.shard_selector.as_ref());
        if let Some(limit) = opts.limit {
            q.append_pair("limit", &limit.to_string());
        }
        match &opts.continue_token {
            // client-go's pager clears resourceVersion on continuation pages: the token pins it.
            Some(token) => {
                q.append_pair("continue", token);
            }
            None if !opts.resource_version.is_empty() => {
                q.append_pair("resourceVersion", &opts.resource_version);
            }
            None => {}
        }
        build_get(q.finish(), self.accept(&METADATA_LIST_ACCEPT))
    }

    /// The `Accept` header: one of kube's metadata media types (`metadata`) for a
    /// metadata-only lister-watcher; else protobuf first when asked for and `K` has a protobuf
    /// form; else JSON.
    fn accept(&self, metadata: &'static LazyLock<HeaderValue>) -> &'static str {
        if self.metadata_only {
            let metadata: &'static HeaderValue = metadata;
            metadata.to_str().unwrap_or("application/json")
        } else if self.decoding.protobuf.is_some() {
            ACCEPT_PROTOBUF
        } else {
            "application/json"
        }
    }

    fn watch_request(&self, opts: &WatchOptions) -> Result<http::Request<kube::client::Body>> {
        let mut q = self.query(opts.shard_selector.as_ref());
        q.append_pair("watch", "true");
        if !opts.resource_version.is_empty() {
            q.append_pair("resourceVersion", &opts.resource_version);
        }
        q.append_pair("timeoutSeconds", &opts.timeout_seconds.to_string());
        if opts.allow_bookmarks {
            q.append_pair("allowWatchBookmarks", "true");
        }
        if opts.send_initial_events {
            q.append_pair("sendInitialEvents", "true");
            q.append_pair("resourceVersionMatch", "NotOlderThan");
        }
        build_get(q.finish(), self.accept(&METADATA_ACCEPT))
    }
}

/// The `Accept` header of kube's `list_metadata` request builder
/// (`application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1`).
///
/// Only the header is taken from kube's builder, not the request: its `ListParams` leaves out
/// `resourceVersion=0` when a limit is set, which would turn the reflector's first list (at "0",
/// paginated, as client-go's) from a read of the watch cache into a quorum read of etcd.
static METADATA_LIST_ACCEPT: LazyLock<HeaderValue> = LazyLock::new(|| {
    let req = kube::core::Request::new("/").list_metadata(&kube::core::params::ListParams::default());
    accept_of(req.ok())
});

/// The `Accept` header of kube's `watch_metadata` request builder
/// (`application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1`).
static METADATA_ACCEPT: LazyLock<HeaderValue> = LazyLock::new(|| {
    let req = kube::core::Request::new("/").watch_metadata(&kube::core::params::WatchParams::default(), "0");
    accept_of(req.ok())
});

/// The `Accept` header of a request kube built.
fn accept_of(req: Option<http::Request<Vec<u8>>>) -> HeaderValue {
    req.and_then(|r| r.headers().get(http::header::ACCEPT).cloned())
        // kube's builders always set it (and cannot fail with default parameters).
        .unwrap_or_else(|| HeaderValue::from_static("application/json"))
}

fn build_get(uri: String, accept: &str) -> Result<http::Request<kube::client::Body>> {
    http::Request::get(uri)
        .header(http::header::ACCEPT, accept)
        // Watch streams must not be compressed: some servers gzip one member per event.
        .header(http::header::ACCEPT_ENCODING, "identity")
        .body(kube::client::Body::empty())
        .map_err(|e| ReflectorError::BuildRequest(e.to_string()))
}

/// The most of an error response's body read for its `Status`: kube-apiserver's are a few
/// hundred bytes; a larger body (a broken proxy's endless page, say) is not read further.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Turns a non-success response into a classified error (reading its Status body).
async fn error_from_response(res: http::Response<kube::client::Body>) -> ReflectorError {
    let code = res.status().as_u16();
    let retry_after = res
        .headers()
        .get(http::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let body = match http_body_util::Limited::new(res.into_body(), MAX_ERROR_BODY).collect().await {
        Ok(b) => Some(b.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => None,
        Err(e) => return ReflectorError::transport_boxed(e),
    };
    let status = body.as_deref().and_then(status_body).unwrap_or_else(|| {
        // Not a Status (a proxy's HTML page, say): keep the code, never the body.
        let mut s = Status::failure(&format!("HTTP {code} with a non-Status body"), "");
        s.code = code;
        s
    });
    ReflectorError::from_status(status, Some(code), retry_after)
}

/// The body as a `Status`, only if it says it is one (`"kind": "Status"`): another JSON object
/// (a proxy's own error format) could carry anything in a `message` member, and an error's
/// message ends up in logs.
fn status_body(body: &[u8]) -> Option<Status> {
    if body.starts_with(kcache_protobuf::MAGIC) {
        // A client that accepts protobuf gets its errors in protobuf.
        return crate::protobuf::status_body(body);
    }
    #[derive(Deserialize)]
    struct Kind<'a> {
        #[serde(borrow)]
        kind: Option<std::borrow::Cow<'a, str>>,
    }
    let kind = serde_json::from_slice::<Kind<'_>>(body).ok()?.kind?;
    (kind == "Status").then(|| serde_json::from_slice::<Status>(body).ok()).flatten()
}

/// The events of a watch response; `initial_events` when the request asked for a watch-list's
/// initial events (`sendInitialEvents`).
fn event_stream<K>(
    res: http::Response<kube::client::Body>,
    decoding: Decoding,
    initial_events: bool,
) -> WatchStream<K>
where
    K: DeserializeOwned + Send + Sync + 'static,
{
    let protobuf = is_protobuf(res.headers());
    events_from_chunks(res.into_body().into_data_stream().boxed(), decoding, protobuf, initial_events)
}

impl<K> ListerWatcher<K> for ApiListerWatcher<K>
where
    K: DeserializeOwned + Send + Sync + 'static,
{
    fn list(&self, opts: ListOptions) -> BoxFuture<'static, Result<ListPage<K>>> {
        let client = self.client.clone();
        let strip = self.decoding.strip_managed_fields;
        let compact = self.decoding.compact;
        let protobuf = self.decoding.protobuf.clone();
        let helpers = self.decoding.decode_helpers(multi_thread_runtime().is_some());
        let req = self.list_request(&opts);
        async move {
            let res = client.send(req?).await.map_err(ReflectorError::transport)?;
            if !res.status().is_success() {
                return Err(error_from_response(res).await);
            }
            // Decoded by what the server sent: JSON from a server without protobuf.
            let decoder =
                ListBodyDecoder::new(protobuf.filter(|_| is_protobuf(res.headers())), strip, helpers);
            let mut page = decode_list_body::<K>(res.into_body().into_data_stream().boxed(), decoder).await?;
            if let Some(compact) = compact {
                // Each item's `Arc` was made by the decoder and is not shared yet.
                for item in &mut page.items {
                    if let Some(obj) = Arc::get_mut(item) {
                        compact(obj);
                    }
                }
            }
            Ok(page)
        }
        .boxed()
    }

    fn watch(&self, opts: WatchOptions) -> BoxFuture<'static, Result<WatchStream<K>>> {
        let client = self.client.clone();
        let decoding = self.decoding.clone();
        let req = self.watch_request(&opts);
        let initial_events = opts.send_initial_events;
        async move {
            let res = client.send(req?).await.map_err(ReflectorError::transport)?;
            if !res.status().is_success() {
                return Err(error_from_response(res).await);
            }
            Ok(event_stream::<K>(res, decoding, initial_events))
        }
        .boxed()
    }

    fn shard_selector(&self) -> Option<ShardSelector> {
        self.shard_selector.clone()
    }

    /// Not for `PartialObjectMetadataList`s: kube-apiserver v1.36 drops `shardInfo` when it
    /// turns a list into one (`asPartialObjectMetadataList` copies only `resourceVersion`,
    /// `continue` and `remainingItemCount`).
    fn lists_carry_shard_info(&self) -> bool {
        !self.metadata_only
    }
}

#[cfg(test)]
mod tests;
