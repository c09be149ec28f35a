//! The transport seam: [`ListerWatcher`], and its implementation over `kube::Client`.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use http_body_util::BodyExt;
use kube::core::{DynamicObject, Status};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};
use crate::list_decode::ListDecoder;
use crate::strip::Stripped;

/// Parameters of one list request (one page).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListOptions {
    /// `resourceVersion`: "" (consistent read), "0" (any, e.g. from the watch cache) or N (not
    /// older than N). Never sent on continuation pages.
    pub resource_version: String,
    /// `limit`: page size; `None` asks for everything in one response.
    pub limit: Option<u32>,
    /// `continue`: the token from the previous page.
    pub continue_token: Option<String>,
}

/// One page of a list response.
#[derive(Debug, Clone)]
pub struct ListPage<K> {
    /// The objects, each in the `Arc` the stores keep. [`ApiListerWatcher`] decodes every item
    /// straight into its `Arc`, so a large list never also sits in a `Vec<K>` of its own.
    pub items: Vec<Arc<K>>,
    /// `metadata.resourceVersion` of the list.
    pub resource_version: String,
    /// `metadata.continue`: present when more pages follow.
    pub continue_token: Option<String>,
}

/// Parameters of one watch request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchOptions {
    /// `resourceVersion` to start from ("" or "0" produce synthetic ADDED events first).
    pub resource_version: String,
    /// `timeoutSeconds`: the server ends the watch cleanly after this long.
    pub timeout_seconds: u64,
    /// `allowWatchBookmarks`.
    pub allow_bookmarks: bool,
    /// `sendInitialEvents=true` with `resourceVersionMatch=NotOlderThan` (watch-list).
    pub send_initial_events: bool,
}

/// A BOOKMARK event: the server's position, and whether it ends a watch-list's initial events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bookmark {
    /// `metadata.resourceVersion` of the bookmark object.
    pub resource_version: String,
    /// The bookmark carries the annotation `k8s.io/initial-events-end: "true"`.
    pub initial_events_end: bool,
}

/// One decoded watch event.
///
/// Objects come in an [`Arc`], allocated where they were decoded, and go into the store as they
/// are.
#[derive(Debug, Clone)]
pub enum WatchEvent<K> {
    /// ADDED.
    Added(Arc<K>),
    /// MODIFIED.
    Modified(Arc<K>),
    /// DELETED, carrying the object's last state.
    Deleted(Arc<K>),
    /// BOOKMARK.
    Bookmark(Bookmark),
    /// ERROR, with the Status the server sent.
    Error(Box<Status>),
}

/// A stream of watch events. It ends when the server closes the watch; an `Err` item means the
/// watch is broken and the caller should stop reading it.
pub type WatchStream<K> = BoxStream<'static, Result<WatchEvent<K>>>;

/// Lists and watches one collection: the reflector's only view of the API server.
///
/// [`ApiListerWatcher`] implements it over `kube::Api`; tests and other transports can plug in
/// their own. Selectors and namespace belong to the implementation, not to the options, exactly
/// as client-go's `ListWatch` closes over them.
pub trait ListerWatcher<K>: Send + Sync + 'static {
    /// Lists one page.
    fn list(&self, opts: ListOptions) -> BoxFuture<'static, Result<ListPage<K>>>;
    /// Opens a watch.
    fn watch(&self, opts: WatchOptions) -> BoxFuture<'static, Result<WatchStream<K>>>;
}

impl<K, T: ListerWatcher<K> + ?Sized> ListerWatcher<K> for std::sync::Arc<T> {
    fn list(&self, opts: ListOptions) -> BoxFuture<'static, Result<ListPage<K>>> {
        (**self).list(opts)
    }

    fn watch(&self, opts: WatchOptions) -> BoxFuture<'static, Result<WatchStream<K>>> {
        (**self).watch(opts)
    }
}

/// Largest watch frame accepted. Kubernetes objects are limited to about 1.5 MiB by etcd; this
/// leaves room for big custom resources while bounding what a broken stream can make us buffer.
pub const MAX_FRAME_BYTES: usize = 64 * 1024 * 1024;

/// [`ListerWatcher`] over a `kube::Api<K>`: typed k8s-openapi resources or `DynamicObject`.
///
/// Requests go through `kube::Client::send` (kube's transport, auth and middleware); this type
/// only builds the query string and decodes the responses, so it can classify every failure
/// precisely (HTTP code, `Retry-After`, malformed frame versus unknown event type).
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
    decoding: Decoding,
    _kind: PhantomData<fn() -> K>,
}

impl<K> fmt::Debug for ApiListerWatcher<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiListerWatcher")
            .field("url_path", &self.url_path)
            .field("label_selector", &self.label_selector)
            .field("field_selector", &self.field_selector)
            .field("decoding", &self.decoding)
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
            decoding: self.decoding.clone(),
            _kind: PhantomData,
        }
    }
}

impl<K> ApiListerWatcher<K> {
    /// Lists and watches what `api` addresses (a namespace, or all namespaces).
    pub fn new(api: kube::Api<K>) -> Self
    where
        K: kube::Resource,
    {
        let url_path = api.resource_url().to_owned();
        Self {
            client: api.into_client(),
            url_path,
            label_selector: None,
            field_selector: None,
            decoding: Decoding::default(),
            _kind: PhantomData,
        }
    }

    /// Lists and watches the collection at `url_path` (e.g. `/api/v1/namespaces/ns/configmaps`,
    /// as `kube::Resource::url_path` builds it), through `client`.
    pub fn with_url(client: kube::Client, url_path: impl Into<String>) -> Self {
        Self {
            client,
            url_path: url_path.into(),
            label_selector: None,
            field_selector: None,
            decoding: Decoding::default(),
            _kind: PhantomData,
        }
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
        self.decoding.expect =
            Some(Arc::new(ExpectedType { api_version: api_version.to_owned(), kind: kind.to_owned() }));
        self
    }

    fn query(&self) -> form_urlencoded::Serializer<'static, String> {
        let start = self.url_path.len() + 1;
        let mut q = form_urlencoded::Serializer::for_suffix(format!("{}?", self.url_path), start);
        if let Some(l) = &self.label_selector {
            q.append_pair("labelSelector", l);
        }
        if let Some(f) = &self.field_selector {
            q.append_pair("fieldSelector", f);
        }
        q
    }

    fn list_request(&self, opts: &ListOptions) -> Result<http::Request<kube::client::Body>> {
        let mut q = self.query();
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
        build_get(q.finish())
    }

    fn watch_request(&self, opts: &WatchOptions) -> Result<http::Request<kube::client::Body>> {
        let mut q = self.query();
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
        build_get(q.finish())
    }
}

fn build_get(uri: String) -> Result<http::Request<kube::client::Body>> {
    http::Request::get(uri)
        .header(http::header::ACCEPT, "application/json")
        // Watch streams must not be compressed: some servers gzip one member per event.
        .header(http::header::ACCEPT_ENCODING, "identity")
        .body(kube::client::Body::empty())
        .map_err(|e| Error::BuildRequest(e.to_string()))
}

/// The most of an error response's body read for its `Status`: kube-apiserver's are a few
/// hundred bytes; a larger body (a broken proxy's endless page, say) is not read further.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Turns a non-success response into a classified error (reading its Status body).
async fn error_from_response(res: http::Response<kube::client::Body>) -> Error {
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
        Err(e) => return Error::transport_boxed(e),
    };
    let status = body.as_deref().and_then(status_body).unwrap_or_else(|| {
        // Not a Status (a proxy's HTML page, say): keep the code, never the body.
        let mut s = Status::failure(&format!("HTTP {code} with a non-Status body"), "");
        s.code = code;
        s
    });
    Error::from_status(status, Some(code), retry_after)
}

/// The body as a `Status`, only if it says it is one (`"kind": "Status"`): another JSON object
/// (a proxy's own error format) could carry anything in a `message` member, and an error's
/// message ends up in logs.
fn status_body(body: &[u8]) -> Option<Status> {
    #[derive(Deserialize)]
    struct Kind<'a> {
        #[serde(borrow)]
        kind: Option<std::borrow::Cow<'a, str>>,
    }
    let kind = serde_json::from_slice::<Kind<'_>>(body).ok()?.kind?;
    (kind == "Status").then(|| serde_json::from_slice::<Status>(body).ok()).flatten()
}

/// A list response: `W` is how each item is read (`K` itself, or [`Stripped<K>`]).
#[cfg(any(test, fuzzing))]
#[derive(Deserialize)]
#[serde(bound(deserialize = "W: DeserializeOwned + IntoObject<K>"))]
struct RawList<K, W> {
    #[serde(default)]
    metadata: RawListMeta,
    #[serde(default = "ArcItems::default")]
    items: ArcItems<K, W>,
}

#[cfg(any(test, fuzzing))]
/// How a list item is read off the wire and what object it becomes.
trait IntoObject<K> {
    fn into_object(self) -> K;
}

#[cfg(any(test, fuzzing))]
impl<K> IntoObject<K> for K {
    fn into_object(self) -> K {
        self
    }
}

#[cfg(any(test, fuzzing))]
impl<K> IntoObject<K> for Stripped<K> {
    fn into_object(self) -> K {
        self.0
    }
}

#[cfg(any(test, fuzzing))]
/// A list's `items` (`null` reads as none), each moved into its `Arc` as soon as it is decoded.
struct ArcItems<K, W>(Vec<Arc<K>>, PhantomData<fn() -> W>);

#[cfg(any(test, fuzzing))]
impl<K, W> Default for ArcItems<K, W> {
    fn default() -> Self {
        Self(Vec::new(), PhantomData)
    }
}

#[cfg(any(test, fuzzing))]
impl<'de, K, W: DeserializeOwned + IntoObject<K>> Deserialize<'de> for ArcItems<K, W> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Items<K, W>(PhantomData<fn() -> (K, W)>);
        impl<'de, K, W: DeserializeOwned + IntoObject<K>> serde::de::Visitor<'de> for Items<K, W> {
            type Value = ArcItems<K, W>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of objects or null")
            }
            fn visit_none<E: serde::de::Error>(self) -> std::result::Result<Self::Value, E> {
                Ok(ArcItems::default())
            }
            fn visit_unit<E: serde::de::Error>(self) -> std::result::Result<Self::Value, E> {
                Ok(ArcItems::default())
            }
            fn visit_some<D: serde::Deserializer<'de>>(
                self,
                d: D,
            ) -> std::result::Result<Self::Value, D::Error> {
                d.deserialize_seq(self)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> std::result::Result<Self::Value, A::Error> {
                // A size hint comes from the input: never trust it beyond a modest bound.
                let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
                while let Some(w) = seq.next_element::<W>()? {
                    items.push(Arc::new(w.into_object()));
                }
                Ok(ArcItems(items, PhantomData))
            }
        }
        d.deserialize_option(Items(PhantomData))
    }
}

/// How [`ApiListerWatcher`] decodes objects (its options).
#[derive(Clone, Debug)]
pub(crate) struct Decoding {
    /// Skip `metadata.managedFields` while decoding (the default).
    pub(crate) strip_managed_fields: bool,
    /// The `apiVersion` and `kind` every watch event's object must carry.
    pub(crate) expect: Option<Arc<ExpectedType>>,
}

impl Default for Decoding {
    fn default() -> Self {
        Self { strip_managed_fields: true, expect: None }
    }
}

/// An `apiVersion` and `kind`.
#[derive(Debug)]
pub(crate) struct ExpectedType {
    api_version: String,
    kind: String,
}

/// The type members of an object, the rest skipped.
#[derive(Deserialize)]
struct TypePeek<'a> {
    #[serde(default, rename = "apiVersion", borrow)]
    api_version: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    kind: Option<Cow<'a, str>>,
}

impl ExpectedType {
    /// Whether the object of a `what` event must be checked before it is decoded: only when `K`
    /// does not keep its type members. A `DynamicObject` keeps them, so it is checked after its
    /// one decoding pass ([`check_decoded`](Self::check_decoded)); any other `K` is peeked at
    /// first ([`check_json`](Self::check_json)), which parses the object a second time.
    fn checks_before_decoding<K: 'static>() -> bool {
        std::any::TypeId::of::<K>() != std::any::TypeId::of::<DynamicObject>()
    }

    /// Checks a decoded object of a `what` event, if `K` is `DynamicObject`.
    fn check_decoded<K: 'static>(&self, what: &str, obj: &K) -> Result<()> {
        match (obj as &dyn std::any::Any).downcast_ref::<DynamicObject>() {
            Some(d) => {
                let t = d.types.as_ref();
                self.compare(
                    what,
                    (t.map_or("", |t| t.api_version.as_str()), t.map_or("", |t| t.kind.as_str())),
                )
            }
            None => Ok(()),
        }
    }

    /// Checks the object of a `what` event, written as `json`, before it is decoded.
    fn check_json(&self, what: &str, json: &str) -> Result<()> {
        let peek: TypePeek<'_> = serde_json::from_str(json)
            .map_err(|e| Error::decode(describe_json_error(&format!("{what} event object"), &e)))?;
        self.compare(what, (peek.api_version.as_deref().unwrap_or(""), peek.kind.as_deref().unwrap_or("")))
    }

    /// Compares an object's `(apiVersion, kind)` with the expected pair.
    fn compare(&self, what: &str, got: (&str, &str)) -> Result<()> {
        if got == (self.api_version.as_str(), self.kind.as_str()) {
            return Ok(());
        }
        // Type names only, cut short: never a value from the object.
        let shown = |s: &str| s.chars().take(64).collect::<String>();
        Err(Error::decode(format!(
            "{what} event object: expected {} {}, got {:?} {:?}",
            self.api_version,
            self.kind,
            shown(got.0),
            shown(got.1)
        )))
    }
}

/// A response body as its data chunks: what the list and watch decoders read.
pub(crate) type BodyChunks = BoxStream<'static, std::result::Result<Bytes, kube::Error>>;

/// The runtime to start decoding threads in: the current one if it is multi-threaded. On a
/// current-thread runtime (the paused-clock tests) or outside any, decoding stays in the
/// calling task.
fn multi_thread_runtime() -> Option<tokio::runtime::Handle> {
    tokio::runtime::Handle::try_current()
        .ok()
        .filter(|rt| rt.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread)
}

/// Runs `work` to completion on a new thread named `name`, inside `rt` (so its timers and I/O
/// work); if no thread can be started, as a task of `rt` instead.
fn run_on_thread<F>(rt: &tokio::runtime::Handle, name: &str, work: F)
where
    F: Future<Output = ()> + Send + 'static,
{
    // The closure holds the work in a slot it empties when it runs, so that the work can be
    // taken back when the thread is never started.
    let slot = Arc::new(std::sync::Mutex::new(Some(work)));
    let handed = Arc::clone(&slot);
    let thread_rt = rt.clone();
    let spawned = std::thread::Builder::new().name(name.into()).spawn(move || {
        let work = handed.lock().ok().and_then(|mut w| w.take());
        drop(handed);
        if let Some(work) = work {
            thread_rt.block_on(work);
        }
    });
    if let Err(e) = spawned {
        tracing::debug!(error = %e, thread = name, "cannot start a decoding thread; decoding in a runtime task");
        if let Some(work) = slot.lock().ok().and_then(|mut w| w.take()) {
            rt.spawn(work);
        }
    }
}

/// Reads and decodes a list response while it arrives ([`ListDecoder`]: never the whole body in
/// memory), on a thread of its own when the runtime is multi-threaded, for the reasons
/// [`events_from_chunks`] gives (and so that decoding a 50k-object list, a fraction of a second of
/// CPU, never holds up a runtime worker); in the calling task elsewhere. Dropping the future
/// ends the thread and drops the body.
async fn decode_list_body<K>(body: BodyChunks, strip: bool) -> Result<ListPage<K>>
where
    K: DeserializeOwned + Send + Sync + 'static,
{
    let read = async move {
        let mut body = body;
        let mut decoder = ListDecoder::<K>::new(strip);
        while let Some(chunk) = body.next().await {
            decoder.push(&chunk.map_err(Error::transport)?)?;
        }
        decoder.finish()
    };
    let Some(rt) = multi_thread_runtime() else { return read.await };
    let (mut tx, rx) = tokio::sync::oneshot::channel();
    run_on_thread(&rt, "kcache-list-decode", async move {
        tokio::select! {
            biased;
            () = tx.closed() => {}
            page = read => {
                let _ = tx.send(page);
            }
        }
    });
    rx.await.unwrap_or_else(|_| Err(Error::decode("the list decoding thread ended early")))
}

/// A whole list body decoded at once by [`ListDecoder`] (tests and tools).
#[cfg(test)]
fn decode_list<K: DeserializeOwned>(body: &[u8], strip: bool) -> Result<ListPage<K>> {
    ListDecoder::decode_chunks([body], strip)
}

/// Test helpers shared with [`crate::list_decode`].
#[cfg(test)]
pub(crate) mod tests_support {
    pub(crate) use super::decode_list_whole;
}

/// The oracle of the [`ListDecoder`] tests: a list response decoded by serde in one pass over the
/// whole body (how lists were decoded before [`ListDecoder`]).
#[cfg(any(test, fuzzing))]
pub(crate) fn decode_list_whole<K: DeserializeOwned>(body: &[u8], strip: bool) -> Result<ListPage<K>> {
    let describe = |e: serde_json::Error| Error::decode(describe_json_error("list", &e));
    let (metadata, items) = if strip {
        let raw: RawList<K, Stripped<K>> = serde_json::from_slice(body).map_err(describe)?;
        (raw.metadata, raw.items.0)
    } else {
        let raw: RawList<K, K> = serde_json::from_slice(body).map_err(describe)?;
        (raw.metadata, raw.items.0)
    };
    Ok(ListPage {
        items,
        resource_version: metadata.resource_version.unwrap_or_default(),
        continue_token: metadata.continue_token.filter(|c| !c.is_empty()),
    })
}

#[derive(Deserialize, Default)]
pub(crate) struct RawListMeta {
    #[serde(default, rename = "resourceVersion")]
    pub(crate) resource_version: Option<String>,
    #[serde(default, rename = "continue")]
    pub(crate) continue_token: Option<String>,
}

#[derive(Deserialize)]
struct RawEvent<'a> {
    /// Borrowed when it can be; a `Cow` because a type written with JSON escapes (`"\u0041DDED"`
    /// is `ADDED`) cannot be borrowed from the frame, and a `&str` field rejects it outright.
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    object: Option<&'a serde_json::value::RawValue>,
}

#[derive(Deserialize)]
struct RawBookmark {
    #[serde(default)]
    metadata: RawBookmarkMeta,
}

#[derive(Deserialize, Default)]
struct RawBookmarkMeta {
    #[serde(default, rename = "resourceVersion")]
    resource_version: Option<String>,
    #[serde(default)]
    annotations: Option<BTreeMap<String, String>>,
}

/// Describes a serde error without quoting the input (which may be a Secret).
pub(crate) fn describe_json_error(what: &str, e: &serde_json::Error) -> String {
    format!("{what}: {:?} error at line {} column {}", e.classify(), e.line(), e.column())
}

/// Decodes one watch frame as `decoding` asks.
pub(crate) fn decode_frame<K: DeserializeOwned + 'static>(
    frame: &[u8],
    decoding: &Decoding,
) -> Result<WatchEvent<K>> {
    let raw: RawEvent<'_> =
        serde_json::from_slice(frame).map_err(|e| Error::decode(describe_json_error("watch frame", &e)))?;
    let object = || raw.object.ok_or_else(|| Error::decode(format!("{} event without an object", raw.kind)));
    let typed = |kind: &str| -> Result<Arc<K>> {
        let json = object()?.get();
        if let Some(expected) = &decoding.expect
            && ExpectedType::checks_before_decoding::<K>()
        {
            expected.check_json(kind, json)?;
        }
        let obj = if decoding.strip_managed_fields {
            serde_json::from_str::<Stripped<K>>(json).map(|s| s.0)
        } else {
            serde_json::from_str::<K>(json)
        }
        .map_err(|e| Error::decode(describe_json_error(&format!("{kind} event object"), &e)))?;
        if let Some(expected) = &decoding.expect {
            expected.check_decoded(kind, &obj)?;
        }
        Ok(Arc::new(obj))
    };
    match &*raw.kind {
        "ADDED" => Ok(WatchEvent::Added(typed("ADDED")?)),
        "MODIFIED" => Ok(WatchEvent::Modified(typed("MODIFIED")?)),
        "DELETED" => Ok(WatchEvent::Deleted(typed("DELETED")?)),
        "BOOKMARK" => {
            let b: RawBookmark = serde_json::from_str(object()?.get())
                .map_err(|e| Error::decode(describe_json_error("BOOKMARK event object", &e)))?;
            let resource_version = b
                .metadata
                .resource_version
                .filter(|rv| !rv.is_empty())
                .ok_or(Error::MissingResourceVersion("bookmark"))?;
            let initial_events_end = b
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("k8s.io/initial-events-end"))
                .is_some_and(|v| v == "true");
            Ok(WatchEvent::Bookmark(Bookmark { resource_version, initial_events_end }))
        }
        "ERROR" => {
            let status: Status = match raw.object {
                Some(o) => serde_json::from_str(o.get()).unwrap_or_else(|_| Status::failure("", "")),
                None => Status::failure("", ""),
            };
            Ok(WatchEvent::Error(Box::new(status)))
        }
        other => Err(Error::UnknownEventType(other.chars().take(64).collect())),
    }
}

/// Splits a byte stream into newline-delimited frames, bounded by [`MAX_FRAME_BYTES`].
#[derive(Debug, Default)]
pub(crate) struct FrameSplitter {
    buf: BytesMut,
    /// Bytes at the start of `buf` already known to hold no newline, so a frame that arrives
    /// in many chunks is scanned once, not once per chunk.
    scanned: usize,
}

impl FrameSplitter {
    pub(crate) fn push(&mut self, chunk: Bytes) {
        self.buf.extend_from_slice(&chunk);
    }

    /// The next complete frame, `Ok(None)` if more bytes are needed, or an error when a frame
    /// outgrows the limit.
    pub(crate) fn next_frame(&mut self) -> Result<Option<Bytes>> {
        loop {
            match memchr::memchr(b'\n', &self.buf[self.scanned..]).map(|i| i + self.scanned) {
                Some(i) => {
                    self.scanned = 0;
                    let frame = self.buf.split_to(i).freeze();
                    self.buf.advance(1);
                    if frame.iter().all(u8::is_ascii_whitespace) {
                        continue; // blank keep-alive lines
                    }
                    return Ok(Some(frame));
                }
                None if self.buf.len() > MAX_FRAME_BYTES => {
                    return Err(Error::decode(format!("watch frame larger than {MAX_FRAME_BYTES} bytes")));
                }
                None => {
                    self.scanned = self.buf.len();
                    return Ok(None);
                }
            }
        }
    }

    /// What is left when the stream ends (a final frame without a newline).
    pub(crate) fn finish(&mut self) -> Option<Bytes> {
        self.scanned = 0;
        let rest = self.buf.split().freeze();
        (!rest.iter().all(u8::is_ascii_whitespace)).then_some(rest)
    }
}

/// Whether a body error is the connection ending mid-stream, which client-go's `StreamWatcher`
/// treats as the end of the watch rather than a failure (`io.ErrUnexpectedEOF`, and
/// apimachinery's `net.IsProbableEOF` / `net.IsTimeout`: a reset or aborted connection, a broken
/// pipe, an HTTP/2 GOAWAY, a closed connection, a timed-out read). The reflector then re-watches
/// from the resource version it holds instead of relisting.
fn is_probable_eof(e: &(dyn std::error::Error + 'static)) -> bool {
    use std::io::ErrorKind as Io;
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && matches!(
                io.kind(),
                Io::UnexpectedEof
                    | Io::ConnectionReset
                    | Io::ConnectionAborted
                    | Io::BrokenPipe
                    | Io::TimedOut
            )
        {
            return true;
        }
        let s = err.to_string();
        let lower = s.to_ascii_lowercase();
        if s.contains("unexpected EOF")
            || s.contains("connection closed before message completed")
            || lower.contains("connection reset by peer")
            || lower.contains("use of closed network connection")
            || s.contains("GOAWAY")
        {
            return true;
        }
        cur = err.source();
    }
    false
}

fn event_stream<K>(body: kube::client::Body, decoding: Decoding) -> WatchStream<K>
where
    K: DeserializeOwned + Send + Sync + 'static,
{
    events_from_chunks(body.into_data_stream().boxed(), decoding)
}

/// How many batches of decoded events a watch's decoding thread may hold ahead of the reflector
/// before it stops reading the stream.
const BATCHES_AHEAD: usize = 4;

/// The most events one batch carries from the decoding thread to the reflector.
const BATCH: usize = 32;

/// Splits a watch response's data chunks into frames and decodes each one, as `decoding` asks.
///
/// On a multi-threaded tokio runtime the decoding runs on a thread of its own for the life of the
/// watch; the stream it returns is fed through a channel of up to [`BATCHES_AHEAD`] batches, each
/// of the events already decoded (at most [`BATCH`]) when it is sent, so a burst costs one
/// hand-over per batch, not per event. Every object a watch decodes is then allocated by one
/// thread, so with glibc's per-thread malloc arenas a cache's objects come from one arena and an
/// updated object can reuse the memory of the one it replaces; decoded in the reflector's task,
/// which the runtime moves between its worker threads, they were spread over the arenas of all
/// of them and the memory freed in one was not reused by the next allocation in another
/// (docs/benchmarks.md, "Where the memory scenario's RSS goes"). It also takes the decoding off the
/// runtime's workers. Dropping the stream ends the thread, even one waiting for bytes that never
/// come. Elsewhere (a current-thread runtime, as the paused-clock tests use, or no runtime) it
/// decodes in the stream's own task.
pub(crate) fn events_from_chunks<K>(data: BodyChunks, decoding: Decoding) -> WatchStream<K>
where
    K: DeserializeOwned + Send + Sync + 'static,
{
    match multi_thread_runtime() {
        Some(rt) => decode_on_thread(&rt, decode_in_task(data, decoding)),
        None => decode_in_task(data, decoding),
    }
}

/// Polls `events` on a new thread (inside `rt`) and hands them over in batches through a bounded
/// channel; see [`events_from_chunks`].
fn decode_on_thread<K>(rt: &tokio::runtime::Handle, mut events: WatchStream<K>) -> WatchStream<K>
where
    K: Send + Sync + 'static,
{
    type Batch<K> = Vec<Result<WatchEvent<K>>>;
    let (tx, rx) = tokio::sync::mpsc::channel::<Batch<K>>(BATCHES_AHEAD);
    run_on_thread(rt, "kcache-watch-decode", async move {
        loop {
            let next = tokio::select! {
                biased;
                () = tx.closed() => return,
                next = events.next() => next,
            };
            let Some(first) = next else { return };
            let mut batch = Vec::with_capacity(BATCH);
            batch.push(first);
            // Whatever is decodable without waiting goes in the same batch.
            let mut ended = false;
            while batch.len() < BATCH {
                match events.next().now_or_never() {
                    Some(Some(ev)) => batch.push(ev),
                    Some(None) => {
                        ended = true;
                        break;
                    }
                    None => break,
                }
            }
            if tx.send(batch).await.is_err() || ended {
                return;
            }
        }
    });
    futures::stream::unfold((rx, Vec::new().into_iter()), |(mut rx, mut batch)| async move {
        loop {
            if let Some(ev) = batch.next() {
                return Some((ev, (rx, batch)));
            }
            batch = rx.recv().await?.into_iter();
        }
    })
    .boxed()
}

/// [`events_from_chunks`] in the calling task: the whole decoding path apart from the HTTP body
/// (the fuzz targets feed it arbitrary chunks).
pub(crate) fn decode_in_task<K>(data: BodyChunks, decoding: Decoding) -> WatchStream<K>
where
    K: DeserializeOwned + Send + Sync + 'static,
{
    struct State {
        data: BodyChunks,
        splitter: FrameSplitter,
        decoding: Decoding,
        done: bool,
    }
    let state = State { data, splitter: FrameSplitter::default(), decoding, done: false };
    futures::stream::unfold(state, |mut st| async move {
        loop {
            if st.done {
                return None;
            }
            match st.splitter.next_frame() {
                Ok(Some(frame)) => return Some((decode_frame::<K>(&frame, &st.decoding), st)),
                Ok(None) => {}
                Err(e) => {
                    st.done = true;
                    return Some((Err(e), st));
                }
            }
            match st.data.next().await {
                Some(Ok(chunk)) => st.splitter.push(chunk),
                Some(Err(e)) => {
                    st.done = true;
                    if is_probable_eof(&e) {
                        tracing::debug!(error = %e, "watch stream ended by the connection; re-watching");
                        return None;
                    }
                    return Some((Err(Error::transport(e)), st));
                }
                None => {
                    st.done = true;
                    let last = st.splitter.finish()?;
                    return Some((decode_frame::<K>(&last, &st.decoding), st));
                }
            }
        }
    })
    .boxed()
}

impl<K> ListerWatcher<K> for ApiListerWatcher<K>
where
    K: DeserializeOwned + Send + Sync + 'static,
{
    fn list(&self, opts: ListOptions) -> BoxFuture<'static, Result<ListPage<K>>> {
        let client = self.client.clone();
        let strip = self.decoding.strip_managed_fields;
        let req = self.list_request(&opts);
        async move {
            let res = client.send(req?).await.map_err(Error::transport)?;
            if !res.status().is_success() {
                return Err(error_from_response(res).await);
            }
            decode_list_body::<K>(res.into_body().into_data_stream().boxed(), strip).await
        }
        .boxed()
    }

    fn watch(&self, opts: WatchOptions) -> BoxFuture<'static, Result<WatchStream<K>>> {
        let client = self.client.clone();
        let decoding = self.decoding.clone();
        let req = self.watch_request(&opts);
        async move {
            let res = client.send(req?).await.map_err(Error::transport)?;
            if !res.status().is_success() {
                return Err(error_from_response(res).await);
            }
            Ok(event_stream::<K>(res.into_body(), decoding))
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn error_response(code: u16, body: Vec<u8>) -> http::Response<kube::client::Body> {
        http::Response::builder().status(code).body(kube::client::Body::from(body)).unwrap()
    }

    /// An error response is its `Status` only when the body says it is one, and only the first
    /// 64 KiB of it are read: a proxy's JSON with a `message` of its own never reaches the
    /// error's text (it could quote anything), and an endless error page is not held in memory.
    #[tokio::test]
    async fn an_error_body_is_read_only_if_it_is_a_small_status() {
        let status = br#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"configmaps is forbidden","reason":"Forbidden","code":403}"#;
        let e = error_from_response(error_response(403, status.to_vec())).await;
        assert_eq!(e.kind(), crate::ErrorKind::Forbidden);
        assert!(e.to_string().contains("configmaps is forbidden"), "{e}");

        for body in [
            br#"{"message":"hunter2","code":403}"#.to_vec(),
            br#"{"kind":"Other","message":"hunter2"}"#.to_vec(),
            b"<html>hunter2</html>".to_vec(),
        ] {
            let e = error_from_response(error_response(403, body)).await;
            assert_eq!(e.kind(), crate::ErrorKind::Forbidden, "classified by the HTTP code");
            assert!(!e.to_string().contains("hunter2"), "{e}");
        }

        let mut huge = br#"{"kind":"Status","code":500,"reason":"InternalError","message":""#.to_vec();
        huge.resize(MAX_ERROR_BODY + 1, b'x');
        huge.extend_from_slice(br#""}"#);
        let e = error_from_response(error_response(500, huge)).await;
        assert_eq!(e.kind(), crate::ErrorKind::InternalError);
        assert!(e.to_string().contains("non-Status body") && !e.to_string().contains("xxxx"), "{e}");
    }

    #[test]
    fn decodes_each_event_type() {
        let ev: WatchEvent<Value> =
            decode_frame(br#"{"type":"ADDED","object":{"metadata":{"name":"a"}}}"#, &Decoding::default())
                .unwrap();
        assert!(matches!(ev, WatchEvent::Added(_)));
        let ev: WatchEvent<Value> = decode_frame(
            br#"{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"12","annotations":{"k8s.io/initial-events-end":"true"}}}}"#,
            &Decoding::default(),
        )
        .unwrap();
        match ev {
            WatchEvent::Bookmark(b) => {
                assert_eq!(b.resource_version, "12");
                assert!(b.initial_events_end);
            }
            other => panic!("{other:?}"),
        }
        let ev: WatchEvent<Value> = decode_frame(
            br#"{"type":"ERROR","object":{"code":410,"reason":"Expired","message":"too old"}}"#,
            &Decoding::default(),
        )
        .unwrap();
        assert!(matches!(ev, WatchEvent::Error(s) if s.code == 410));
    }

    #[test]
    fn classifies_bad_frames_without_quoting_them() {
        let e =
            decode_frame::<Value>(br#"{"type":"ADDED","object":{"secret":"hunter2""#, &Decoding::default())
                .unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Decode);
        assert!(!e.to_string().contains("hunter2"));
        let e =
            decode_frame::<Value>(br#"{"type":"SURPRISE","object":{}}"#, &Decoding::default()).unwrap_err();
        assert!(matches!(e, Error::UnknownEventType(t) if t == "SURPRISE"));
        let e =
            decode_frame::<Value>(br#"{"type":"BOOKMARK","object":{"metadata":{}}}"#, &Decoding::default())
                .unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::MissingResourceVersion);
        let e =
            decode_frame::<u32>(br#"{"type":"MODIFIED","object":{"data":"hunter2"}}"#, &Decoding::default())
                .unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Decode);
        assert!(!e.to_string().contains("hunter2"));
    }

    /// Found by the `watch_events` fuzz target: a type with JSON escapes was a decode error
    /// (a borrowed `&str` cannot hold it) instead of the type it spells.
    #[test]
    fn event_type_with_escapes() {
        let ev: WatchEvent<Value> = decode_frame(
            br#"{"type":"\u0041DDED","object":{"metadata":{"name":"a"}}}"#,
            &Decoding::default(),
        )
        .unwrap();
        assert!(matches!(ev, WatchEvent::Added(_)));
        let e = decode_frame::<Value>(b"{\"type\":\"\\u0001\\n\",\"object\":{}}", &Decoding::default())
            .unwrap_err();
        assert!(matches!(e, Error::UnknownEventType(t) if t == "\u{1}\n"));
    }

    fn expecting(api_version: &str, kind: &str) -> Decoding {
        Decoding {
            expect: Some(Arc::new(ExpectedType { api_version: api_version.into(), kind: kind.into() })),
            strip_managed_fields: false,
        }
    }

    /// `expect_type` on `DynamicObject` (checked after its one decoding pass) and on any other
    /// type (peeked at before decoding) accepts the expected type and rejects every other one,
    /// also when the object has no type members, naming types only, never values.
    #[test]
    fn expected_type_is_checked_once_decoded_or_peeked() {
        let d = expecting("example.com/v1", "Widget");
        let frame = |types: &str| {
            format!(
                r#"{{"type":"MODIFIED","object":{{{types}"metadata":{{"name":"w","resourceVersion":"3"}},"spec":"hunter2"}}}}"#
            )
        };
        let widget = frame(r#""apiVersion":"example.com/v1","kind":"Widget","#);
        let foreign = frame(r#""apiVersion":"v1","kind":"ConfigMap","#);
        let untyped = frame("");
        let ok: WatchEvent<DynamicObject> = decode_frame(widget.as_bytes(), &d).unwrap();
        assert!(matches!(ok, WatchEvent::Modified(o) if o.metadata.name.as_deref() == Some("w")));
        let ok: WatchEvent<Value> = decode_frame(widget.as_bytes(), &d).unwrap();
        assert!(matches!(ok, WatchEvent::Modified(_)));
        let stripped = Decoding { strip_managed_fields: true, ..d.clone() };
        assert!(decode_frame::<DynamicObject>(widget.as_bytes(), &stripped).is_ok());
        for bad in [&foreign, &untyped] {
            for e in [
                decode_frame::<DynamicObject>(bad.as_bytes(), &d).unwrap_err(),
                decode_frame::<DynamicObject>(bad.as_bytes(), &stripped).unwrap_err(),
                decode_frame::<Value>(bad.as_bytes(), &d).unwrap_err(),
            ] {
                assert_eq!(e.kind(), crate::ErrorKind::Decode, "{e}");
                let msg = e.to_string();
                assert!(msg.contains("MODIFIED event object: expected example.com/v1 Widget"), "{msg}");
                assert!(!msg.contains("hunter2"), "{msg}");
            }
        }
        let e = decode_frame::<DynamicObject>(foreign.as_bytes(), &d).unwrap_err();
        assert!(e.to_string().contains(r#"got "v1" "ConfigMap""#), "{e}");
        // Bookmarks carry no type members worth checking.
        let bookmark = br#"{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}}"#;
        assert!(matches!(decode_frame::<DynamicObject>(bookmark, &d).unwrap(), WatchEvent::Bookmark(_)));
    }

    /// A list body decodes into a page of `Arc`s, with or without managed fields; `items` may be
    /// missing or `null` (an empty list), and an empty continue token means the last page.
    #[test]
    fn decodes_list_pages_into_arcs() {
        use k8s_openapi::api::core::v1::ConfigMap;
        let body = br#"{"kind":"ConfigMapList","metadata":{"resourceVersion":"7","continue":"tok"},"items":[
            {"metadata":{"name":"a","managedFields":[{"manager":"m","operation":"Update"}]},"data":{"k":"v"}},
            {"metadata":{"name":"b"}}]}"#;
        let page = decode_list::<ConfigMap>(body, false).unwrap();
        assert_eq!(page.resource_version, "7");
        assert_eq!(page.continue_token.as_deref(), Some("tok"));
        let names: Vec<_> = page.items.iter().map(|c| c.metadata.name.clone().unwrap()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(page.items[0].metadata.managed_fields.as_ref().map(Vec::len), Some(1));
        assert_eq!(page.items[0].data.as_ref().unwrap()["k"], "v");
        let stripped = decode_list::<ConfigMap>(body, true).unwrap();
        assert_eq!(stripped.items.len(), 2);
        assert_eq!(stripped.items[0].metadata.managed_fields, None);
        for empty in [
            &br#"{"metadata":{"resourceVersion":"8","continue":""},"items":null}"#[..],
            br#"{"metadata":{"resourceVersion":"8"}}"#,
        ] {
            let page = decode_list::<ConfigMap>(empty, false).unwrap();
            assert!(page.items.is_empty());
            assert_eq!((page.resource_version.as_str(), page.continue_token), ("8", None));
        }
        let e = decode_list::<ConfigMap>(br#"{"items":[{"metadata":{"name":5}}]}"#, false).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Decode);
        let e = decode_list::<ConfigMap>(br#"{"items":{"not":"a list"}}"#, true).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Decode);
    }

    #[test]
    fn splits_frames_across_chunks() {
        let mut s = FrameSplitter::default();
        s.push(Bytes::from_static(b"{\"a\":1}\n{\"b\""));
        assert_eq!(s.next_frame().unwrap().unwrap(), Bytes::from_static(b"{\"a\":1}"));
        assert!(s.next_frame().unwrap().is_none());
        s.push(Bytes::from_static(b":2}\n\n"));
        assert_eq!(s.next_frame().unwrap().unwrap(), Bytes::from_static(b"{\"b\":2}"));
        assert!(s.next_frame().unwrap().is_none());
        assert!(s.finish().is_none());
    }

    /// A body stream of `frames` (then, if `hang`, no end) that records the name of the thread
    /// polling it and reports on `dropped` when it is dropped.
    fn recorded_body(
        frames: Vec<&'static str>,
        hang: bool,
        polled_on: Arc<std::sync::Mutex<Vec<String>>>,
        dropped: std::sync::mpsc::Sender<()>,
    ) -> BodyChunks {
        struct OnDrop(std::sync::mpsc::Sender<()>);
        impl Drop for OnDrop {
            fn drop(&mut self) {
                let _ = self.0.send(());
            }
        }
        let guard = OnDrop(dropped);
        let chunks = futures::stream::iter(frames).map(move |f| {
            let name = std::thread::current().name().unwrap_or("").to_owned();
            polled_on.lock().unwrap().push(name);
            Ok(Bytes::from(format!("{f}\n")))
        });
        let tail = if hang { futures::stream::pending().boxed() } else { futures::stream::empty().boxed() };
        chunks
            .chain(tail)
            .map(move |c| {
                let _ = &guard;
                c
            })
            .boxed()
    }

    const FRAMES: [&str; 3] = [
        r#"{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"1"}}}"#,
        r#"{"type":"MODIFIED","object":{"metadata":{"name":"a","resourceVersion":"2"}}}"#,
        r#"{"type":"DELETED","object":{"metadata":{"name":"a","resourceVersion":"3"}}}"#,
    ];

    fn rv(ev: &WatchEvent<DynamicObject>) -> &str {
        match ev {
            WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => {
                o.metadata.resource_version.as_deref().unwrap_or("")
            }
            other => panic!("{other:?}"),
        }
    }

    /// On a multi-threaded runtime a watch is read and decoded on a thread of its own, which
    /// hands the events over in order and ends with the stream.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_watch_is_decoded_on_a_thread_of_its_own_on_a_multi_threaded_runtime() {
        let polled_on = Arc::default();
        let (dropped, was_dropped) = std::sync::mpsc::channel();
        let body = recorded_body(FRAMES.to_vec(), false, Arc::clone(&polled_on), dropped);
        let events: Vec<_> =
            events_from_chunks::<DynamicObject>(body, Decoding::default()).collect::<Vec<_>>().await;
        let rvs: Vec<_> = events.iter().map(|e| rv(e.as_ref().unwrap()).to_owned()).collect();
        assert_eq!(rvs, ["1", "2", "3"]);
        assert_eq!(*polled_on.lock().unwrap(), ["kcache-watch-decode"; 3]);
        was_dropped.recv_timeout(Duration::from_secs(30)).expect("the thread drops the body when it ends");
    }

    /// Dropping the stream ends its decoding thread (and drops the body, closing the
    /// connection) also while that thread waits for bytes that never come, as for a hung watch.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dropping_the_stream_ends_a_decoding_thread_that_waits_for_bytes() {
        let (dropped, was_dropped) = std::sync::mpsc::channel();
        let body = recorded_body(FRAMES[..1].to_vec(), true, Arc::default(), dropped);
        let mut events = events_from_chunks::<DynamicObject>(body, Decoding::default());
        let first = events.next().await.unwrap().unwrap();
        assert_eq!(rv(&first), "1");
        assert!(was_dropped.try_recv().is_err(), "the body is still being read");
        drop(events);
        was_dropped.recv_timeout(Duration::from_secs(30)).expect("the body was never dropped");
    }

    /// Where the clock may be paused (a current-thread runtime) the stream decodes in its own
    /// task; errors and the frame left at the end come through either way.
    #[tokio::test(flavor = "current_thread")]
    async fn a_current_thread_runtime_decodes_in_the_streams_task() {
        let polled_on = Arc::default();
        let (dropped, _was_dropped) = std::sync::mpsc::channel();
        let body = recorded_body(
            vec![FRAMES[0], r#"{"type":"SURPRISE","object":{}}"#],
            false,
            Arc::clone(&polled_on),
            dropped,
        );
        let events: Vec<_> =
            events_from_chunks::<DynamicObject>(body, Decoding::default()).collect::<Vec<_>>().await;
        assert_eq!(rv(events[0].as_ref().unwrap()), "1");
        assert!(matches!(&events[1], Err(Error::UnknownEventType(t)) if t == "SURPRISE"));
        let here = std::thread::current().name().unwrap_or("").to_owned();
        assert_eq!(*polled_on.lock().unwrap(), [here.clone(), here]);
    }

    /// Errors cross from the decoding thread like events: a bad frame ends the stream with
    /// a classified error after the events before it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_decoding_threads_error_reaches_the_reflector_in_order() {
        let (dropped, _was_dropped) = std::sync::mpsc::channel();
        let body = recorded_body(
            vec![FRAMES[0], r#"{"type":"ADDED","object":{"#, FRAMES[1]],
            false,
            Arc::default(),
            dropped,
        );
        let events: Vec<_> =
            events_from_chunks::<DynamicObject>(body, Decoding::default()).collect::<Vec<_>>().await;
        assert_eq!(rv(events[0].as_ref().unwrap()), "1");
        assert_eq!(events[1].as_ref().unwrap_err().kind(), crate::ErrorKind::Decode);
    }

    /// An item that remembers the name of the thread that decoded it.
    #[derive(Debug)]
    struct DecodedOn(String);

    impl<'de> Deserialize<'de> for DecodedOn {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
            serde::de::IgnoredAny::deserialize(d)?;
            Ok(DecodedOn(std::thread::current().name().unwrap_or("").to_owned()))
        }
    }

    const LIST: &str = r#"{"metadata":{"resourceVersion":"7","continue":"c"},"items":[{},{}]}"#;

    /// A list body in chunks of `size` bytes.
    fn chunked(body: &'static [u8], size: usize) -> BodyChunks {
        futures::stream::iter(body.chunks(size).map(|c| Ok(Bytes::from_static(c)))).boxed()
    }

    /// On a multi-threaded runtime a list body is read and decoded on a thread of its own, never
    /// on a runtime worker, while it arrives; the page is the same.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_list_is_decoded_off_the_runtime_on_a_multi_threaded_runtime() {
        let page = decode_list_body::<DecodedOn>(chunked(LIST.as_bytes(), 5), false).await.unwrap();
        assert_eq!(page.resource_version, "7");
        assert_eq!(page.continue_token.as_deref(), Some("c"));
        let threads: Vec<_> = page.items.iter().map(|i| i.0.as_str()).collect();
        assert_eq!(threads, ["kcache-list-decode"; 2]);
        let e = decode_list_body::<DecodedOn>(chunked(b"{\"items\":[{", 3), false).await.unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Decode);
    }

    /// On a current-thread runtime (the paused-clock tests) the list is decoded in the task.
    #[tokio::test(flavor = "current_thread")]
    async fn a_current_thread_runtime_decodes_a_list_in_the_task() {
        let page = decode_list_body::<DecodedOn>(chunked(LIST.as_bytes(), 7), false).await.unwrap();
        let here = std::thread::current().name().unwrap_or("").to_owned();
        assert_eq!(page.items.len(), 2);
        assert!(page.items.iter().all(|i| i.0 == here));
    }

    /// Each item is decoded as soon as its last byte is in, before the rest of the body has
    /// arrived: the decoder never holds the whole body.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn list_items_are_decoded_while_the_body_arrives() {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<std::result::Result<Bytes, kube::Error>>();
        let body =
            futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|c| (c, rx)) }).boxed();
        let decoding = tokio::spawn(decode_list_body::<DecodedOn>(body, false));
        let mut decoder = ListDecoder::<Value>::new(false);
        decoder.push(br#"{"metadata":{"resourceVersion":"9"},"items":[{"a":1},{"b":"]}"#).unwrap();
        assert_eq!(decoder.items_decoded(), 1, "the first item is decoded before the second is complete");
        decoder.push(br#""}]}"#).unwrap();
        assert_eq!(decoder.items_decoded(), 2);
        assert_eq!(decoder.buffered(), 0, "nothing of a decoded item is kept");
        let page = decoder.finish().unwrap();
        assert_eq!(page.resource_version, "9");
        tx.send(Ok(Bytes::from_static(LIST.as_bytes()))).unwrap();
        drop(tx);
        assert_eq!(decoding.await.unwrap().unwrap().items.len(), 2);
    }

    /// Dropping a list in progress ends its decoding thread and drops the body (closing the
    /// connection), also while the thread waits for bytes that never come.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dropping_a_list_in_progress_ends_its_decoding_thread() {
        let (dropped, was_dropped) = std::sync::mpsc::channel();
        let body = recorded_body(vec![r#"{"items":[{}"#], true, Arc::default(), dropped);
        let list = tokio::spawn(decode_list_body::<DecodedOn>(body, false));
        tokio::task::yield_now().await;
        list.abort();
        assert!(list.await.unwrap_err().is_cancelled());
        was_dropped.recv_timeout(Duration::from_secs(30)).expect("the body was never dropped");
    }

    /// A watch body broken by the connection (reset, aborted, broken pipe, timed out, GOAWAY,
    /// unexpected EOF) ends the stream after the events before it, with no error: client-go's
    /// `StreamWatcher` stops quietly on `net.IsProbableEOF` and `net.IsTimeout`, and the reflector
    /// re-watches from the resource version it holds instead of relisting. Any other transport
    /// error is reported as one.
    #[tokio::test]
    async fn a_watch_broken_by_the_connection_ends_quietly() {
        use std::io::{Error as IoError, ErrorKind as Io};
        let service = |e: IoError| kube::Error::Service(Box::new(e));
        let ends: Vec<(kube::Error, bool)> = vec![
            (service(IoError::from(Io::ConnectionReset)), true),
            (service(IoError::from(Io::ConnectionAborted)), true),
            (service(IoError::from(Io::BrokenPipe)), true),
            (service(IoError::from(Io::TimedOut)), true),
            (service(IoError::from(Io::UnexpectedEof)), true),
            (kube::Error::Service("read tcp: connection reset by peer".into()), true),
            (kube::Error::Service("http2: server sent GOAWAY and closed the connection".into()), true),
            (service(IoError::from(Io::PermissionDenied)), false),
            (kube::Error::Service("certificate verify failed".into()), false),
        ];
        for (err, quiet) in ends {
            let what = err.to_string();
            let body =
                futures::stream::iter(vec![Ok(Bytes::from(format!("{}\n", FRAMES[0]))), Err(err)]).boxed();
            let events: Vec<_> =
                decode_in_task::<DynamicObject>(body, Decoding::default()).collect::<Vec<_>>().await;
            assert_eq!(rv(events[0].as_ref().unwrap()), "1", "{what}");
            if quiet {
                assert_eq!(events.len(), 1, "{what}: {events:?}");
            } else {
                assert_eq!(events.len(), 2, "{what}");
                assert_eq!(events[1].as_ref().unwrap_err().kind(), crate::ErrorKind::Transport, "{what}");
            }
        }
    }

    /// A transport error while the body arrives is classified as one, not as a decode error.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_list_body_that_breaks_is_a_transport_error() {
        let broken = futures::stream::iter(vec![
            Ok(Bytes::from_static(br#"{"items":[{}"#)),
            Err(kube::Error::Service("connection reset".into())),
        ])
        .boxed();
        let e = decode_list_body::<DecodedOn>(broken, false).await.unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Transport);
    }
}
