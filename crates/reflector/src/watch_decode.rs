//! Decoding a watch response: splitting the body into newline-delimited frames and each frame into
//! a [`WatchEvent`], as the lister-watcher's decoding options ask.

use std::borrow::Cow;
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use kube::core::{DynamicObject, Status};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::error::{ReflectorError, Result};
use crate::frame::{MAX_FRAME_BYTES, RawBookmark};
use crate::list_decode::describe_json_error;
use crate::lister_watcher::{Bookmark, WatchEvent, WatchStream};
use crate::protobuf::{ProtoFrameSplitter, ProtobufKind, decode_proto_frame};
use crate::strip::Stripped;
use crate::watch_helpers::{EventHelpers, FrameDecode};

/// A response body as its data chunks: what the list and watch decoders read.
pub(crate) type BodyChunks = BoxStream<'static, std::result::Result<Bytes, kube::Error>>;

/// How [`ApiListerWatcher`](crate::ApiListerWatcher) decodes objects (its options).
#[derive(Clone, Debug)]
pub(crate) struct Decoding {
    /// Skip `metadata.managedFields` while decoding (the default).
    pub(crate) strip_managed_fields: bool,
    /// The `apiVersion` and `kind` every watch event's object must carry.
    pub(crate) expect: Option<Arc<ExpectedType>>,
    /// Reallocates a decoded object at its exact size (`compact_objects`): a type-erased
    /// `*k = k.clone()`, given only when `K: Clone`.
    pub(crate) compact: Option<fn(&mut dyn std::any::Any)>,
    /// Ask for protobuf, and how to decode it (a built-in kind with protobuf on).
    pub(crate) protobuf: Option<Arc<ProtobufKind>>,
    /// Decode a watch's live events in the reader's task rather than on the watch's decoding
    /// thread (`live_events_in_task`; off by default).
    pub(crate) live_events_in_task: bool,
    /// Threads decoding a protobuf list's items or a watch-list's initial events beside the
    /// response's own decoding thread (`decode_helpers`; none by default).
    pub(crate) decode_helpers: usize,
}

impl Decoding {
    /// The helper threads a response gets: as set, but none outside a multi-threaded runtime,
    /// where everything is decoded in the task.
    pub(crate) fn decode_helpers(&self, multi_threaded: bool) -> usize {
        if multi_threaded { self.decode_helpers } else { 0 }
    }
}

impl Default for Decoding {
    fn default() -> Self {
        Self {
            strip_managed_fields: true,
            expect: None,
            compact: None,
            protobuf: None,
            live_events_in_task: false,
            decode_helpers: 0,
        }
    }
}

/// `*obj = obj.clone()` for a `K`: serde grows each `Vec` it decodes by doubling (JSON gives no
/// length up front), and `Clone` allocates every `Vec` at its length, so the clone holds no
/// growth slack; the decoded original is dropped.
pub(crate) fn compact_in_place<K: Clone + 'static>(obj: &mut dyn std::any::Any) {
    if let Some(k) = obj.downcast_mut::<K>() {
        *k = k.clone();
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
    /// Expects `api_version` and `kind`.
    pub(crate) fn new(api_version: &str, kind: &str) -> Self {
        Self { api_version: api_version.to_owned(), kind: kind.to_owned() }
    }

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
            .map_err(|e| ReflectorError::decode(describe_json_error(&format!("{what} event object"), &e)))?;
        self.compare(what, (peek.api_version.as_deref().unwrap_or(""), peek.kind.as_deref().unwrap_or("")))
    }

    /// Compares an object's `(apiVersion, kind)` with the expected pair.
    fn compare(&self, what: &str, got: (&str, &str)) -> Result<()> {
        if got == (self.api_version.as_str(), self.kind.as_str()) {
            return Ok(());
        }
        // Type names only, cut short: never a value from the object.
        let shown = |s: &str| s.chars().take(64).collect::<String>();
        Err(ReflectorError::decode(format!(
            "{what} event object: expected {} {}, got {:?} {:?}",
            self.api_version,
            self.kind,
            shown(got.0),
            shown(got.1)
        )))
    }
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

/// A string borrowed from the frame when it has no escapes (serde's own `Cow<str>` always
/// allocates).
struct CowStr<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for CowStr<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = CowStr<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> std::result::Result<Self::Value, E> {
                Ok(CowStr(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> std::result::Result<Self::Value, E> {
                Ok(CowStr(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> std::result::Result<Self::Value, E> {
                Ok(CowStr(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// A watch frame's `object`, as [`OnePass`] read it.
enum FrameObject<'a, K> {
    /// Absent or `null`.
    None,
    /// Decoded as `K` while the frame was parsed, and put in its `Arc` at once: from there on
    /// the event moves as a pointer. Moved by value through the frame's visitor, the decoder's
    /// result and the event's constructor, a ConfigMap (over 400 bytes) was copied four or five
    /// times per event (`memcpy` was a tenth of a JSON watch's instructions under callgrind).
    Typed(Arc<K>),
    /// Kept as JSON, to be decoded once the event type is known.
    Raw(&'a serde_json::value::RawValue),
}

/// A watch frame read in one pass: the event type, and the object decoded straight into `K`
/// when `type` comes before it and says ADDED, MODIFIED or DELETED (kube-apiserver writes `type`
/// first). Any other object is kept as a `RawValue` and decoded afterwards, as is every object
/// of a frame whose `type` comes later or that [`Decoding::expect`] checks first.
///
/// Why: scanning each object once as a `RawValue` and then parsing it again as `K` was about a
/// fifth of the instructions of a JSON watch of small ConfigMaps under callgrind (serde_json's
/// `skip_to_escape`, `ignore_str`, `ignore_value`; docs/benchmarks.md, "Where the time goes").
struct OnePass<'d, K> {
    decoding: &'d Decoding,
    _k: std::marker::PhantomData<fn() -> K>,
}

impl<'de, K: DeserializeOwned> serde::de::DeserializeSeed<'de> for OnePass<'_, K> {
    type Value = (Option<Cow<'de, str>>, FrameObject<'de, K>);

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, K: DeserializeOwned> serde::de::Visitor<'de> for OnePass<'_, K> {
    type Value = (Option<Cow<'de, str>>, FrameObject<'de, K>);

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a watch event")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<Self::Value, A::Error> {
        use serde::de::Error as _;
        let mut kind: Option<Cow<'de, str>> = None;
        let mut object: Option<FrameObject<'de, K>> = None;
        while let Some(CowStr(key)) = map.next_key::<CowStr<'de>>()? {
            match &*key {
                "type" if kind.is_some() => return Err(A::Error::duplicate_field("type")),
                "type" => kind = Some(map.next_value::<CowStr<'de>>()?.0),
                "object" if object.is_some() => return Err(A::Error::duplicate_field("object")),
                "object" => {
                    let typed = self.decoding.expect.is_none()
                        && matches!(kind.as_deref(), Some("ADDED" | "MODIFIED" | "DELETED"));
                    let o = if !typed {
                        map.next_value::<Option<&'de serde_json::value::RawValue>>()?.map(FrameObject::Raw)
                    } else if self.decoding.strip_managed_fields {
                        map.next_value::<Option<Stripped<K>>>()?.map(|s| FrameObject::Typed(Arc::new(s.0)))
                    } else {
                        map.next_value::<Option<K>>()?.map(|k| FrameObject::Typed(Arc::new(k)))
                    };
                    object = Some(o.unwrap_or(FrameObject::None));
                }
                _ => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        Ok((kind, object.unwrap_or(FrameObject::None)))
    }
}

/// Decodes one watch frame as `decoding` asks.
pub(crate) fn decode_frame<K: DeserializeOwned + 'static>(
    frame: &[u8],
    decoding: &Decoding,
) -> Result<WatchEvent<K>> {
    // Validated as UTF-8 once, whole: serde_json then reads it as a `str` and skips validating
    // each string it borrows (a third of the frame's decoding instructions under callgrind when
    // read from the bytes).
    let text = std::str::from_utf8(frame).map_err(|e| {
        ReflectorError::decode(format!("watch frame: invalid UTF-8 at byte {}", e.valid_up_to()))
    })?;
    let mut de = serde_json::Deserializer::from_str(text);
    let (kind, object) = serde::de::DeserializeSeed::deserialize(
        OnePass::<K> { decoding, _k: std::marker::PhantomData },
        &mut de,
    )
    .and_then(|v| de.end().map(|()| v))
    .map_err(|e| ReflectorError::decode(describe_json_error("watch frame", &e)))?;
    let Some(kind) = kind else {
        return Err(ReflectorError::decode("watch frame: missing field `type`"));
    };
    let raw = RawEvent {
        kind,
        object: match &object {
            FrameObject::Raw(r) => Some(*r),
            _ => None,
        },
    };
    let mut decoded = match object {
        FrameObject::Typed(k) => Some(k),
        _ => None,
    };
    let object =
        || raw.object.ok_or_else(|| ReflectorError::decode(format!("{} event without an object", raw.kind)));
    let mut typed = |kind: &str| -> Result<Arc<K>> {
        if let Some(mut obj) = decoded.take() {
            // Just made, so the only reference: `get_mut` always succeeds.
            if let (Some(compact), Some(k)) = (decoding.compact, Arc::get_mut(&mut obj)) {
                compact(k);
            }
            return Ok(obj);
        }
        let json = object()?.get();
        if let Some(expected) = &decoding.expect
            && ExpectedType::checks_before_decoding::<K>()
        {
            expected.check_json(kind, json)?;
        }
        let mut obj = if decoding.strip_managed_fields {
            serde_json::from_str::<Stripped<K>>(json).map(|s| s.0)
        } else {
            serde_json::from_str::<K>(json)
        }
        .map_err(|e| ReflectorError::decode(describe_json_error(&format!("{kind} event object"), &e)))?;
        if let Some(compact) = decoding.compact {
            compact(&mut obj);
        }
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
                .map_err(|e| ReflectorError::decode(describe_json_error("BOOKMARK event object", &e)))?;
            let (resource_version, initial_events_end) = b.into_parts()?;
            Ok(WatchEvent::Bookmark(Bookmark { resource_version, initial_events_end }))
        }
        "ERROR" => {
            let status: Status = match raw.object {
                Some(o) => serde_json::from_str(o.get()).unwrap_or_else(|_| Status::failure("", "")),
                None => Status::failure("", ""),
            };
            Ok(WatchEvent::Error(Box::new(status)))
        }
        other => Err(ReflectorError::UnknownEventType(other.chars().take(64).collect())),
    }
}

/// Splits a byte stream into newline-delimited frames, bounded by [`MAX_FRAME_BYTES`].
///
/// A frame that lies whole in one chunk is handed out as a slice of that chunk, without a copy
/// (most frames of a watch do: the server writes each event in one piece); only a frame split
/// between chunks is copied, its bytes gathered in `partial` until its newline arrives.
#[derive(Debug, Default)]
pub(crate) struct FrameSplitter {
    /// The start of a frame whose newline has not arrived yet. Invariant: holds no newline.
    partial: BytesMut,
    /// What is left of the pushed chunks, not yet scanned for newlines.
    chunk: Bytes,
}

impl FrameSplitter {
    pub(crate) fn push(&mut self, chunk: Bytes) {
        if self.chunk.is_empty() {
            self.chunk = chunk;
        } else {
            // Pushed again before the last chunk was read out (the decoder never does so, the
            // tests and fuzz targets may): one copy keeps the bytes in order.
            let mut joined = BytesMut::with_capacity(self.chunk.len() + chunk.len());
            joined.extend_from_slice(&self.chunk);
            joined.extend_from_slice(&chunk);
            self.chunk = joined.freeze();
        }
    }

    /// The next complete frame, `Ok(None)` if more bytes are needed, or an error when a frame
    /// outgrows the limit.
    pub(crate) fn next_frame(&mut self) -> Result<Option<Bytes>> {
        loop {
            match memchr::memchr(b'\n', &self.chunk) {
                Some(i) => {
                    let head = self.chunk.split_to(i);
                    self.chunk.advance(1);
                    let frame = if self.partial.is_empty() {
                        head
                    } else {
                        self.partial.extend_from_slice(&head);
                        self.partial.split().freeze()
                    };
                    if frame.iter().all(u8::is_ascii_whitespace) {
                        continue; // blank keep-alive lines
                    }
                    return Ok(Some(frame));
                }
                None if self.partial.len() + self.chunk.len() > MAX_FRAME_BYTES => {
                    return Err(ReflectorError::decode(format!(
                        "watch frame larger than {MAX_FRAME_BYTES} bytes"
                    )));
                }
                None => {
                    // Copied out, so that the chunk (a slice of the connection's read buffer)
                    // is not held while the rest of the frame arrives.
                    self.partial.extend_from_slice(&self.chunk);
                    self.chunk = Bytes::new();
                    return Ok(None);
                }
            }
        }
    }

    /// What is left when the stream ends (a final frame without a newline).
    pub(crate) fn finish(&mut self) -> Option<Bytes> {
        self.partial.extend_from_slice(&self.chunk);
        self.chunk = Bytes::new();
        let rest = self.partial.split().freeze();
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

/// How a watch stream is framed and decoded: by the response's `Content-Type`.
enum Framing {
    /// Newline-delimited JSON events.
    Json(FrameSplitter),
    /// Length-prefixed protobuf `WatchEvent`s of this kind.
    Protobuf(ProtoFrameSplitter, Arc<ProtobufKind>),
}

impl Framing {
    fn push(&mut self, chunk: Bytes) {
        match self {
            Framing::Json(s) => s.push(chunk),
            Framing::Protobuf(s, _) => s.push(chunk),
        }
    }

    fn next_frame(&mut self) -> Result<Option<Bytes>> {
        match self {
            Framing::Json(s) => s.next_frame(),
            Framing::Protobuf(s, _) => s.next_frame(),
        }
    }

    /// The last frame, when the stream ends (JSON: one without a newline; protobuf: none, and
    /// an error if the stream ended inside one).
    fn finish(&mut self) -> Result<Option<Bytes>> {
        match self {
            Framing::Json(s) => Ok(s.finish()),
            Framing::Protobuf(s, _) => s.finish().map(|()| None),
        }
    }

    fn decode<K: DeserializeOwned + 'static>(
        &self,
        frame: &[u8],
        decoding: &Decoding,
    ) -> Result<WatchEvent<K>> {
        match self {
            Framing::Json(_) => decode_frame::<K>(frame, decoding),
            Framing::Protobuf(_, pb) => decode_proto_frame::<K>(frame, pb, decoding.strip_managed_fields),
        }
    }
}

/// [`events_from_chunks`] in the calling task: the whole decoding path apart from the HTTP body
/// (the fuzz targets feed it arbitrary chunks). `protobuf` says the response is protobuf
/// (its `Content-Type`); it is decoded as such only if `decoding` asked for it.
///
/// With `helpers` (a watch-list's stream, on the watch's own decoding thread only: waiting for a
/// helper blocks the thread) its initial `ADDED` events are decoded by up to that many helper
/// threads too, in batches of `batch` frames ([`EventHelpers`]), and yielded in order.
///
/// [`events_from_chunks`]: crate::decode_thread::events_from_chunks
pub(crate) fn decode_in_task<K>(
    data: BodyChunks,
    decoding: Decoding,
    protobuf: bool,
    helpers: usize,
    batch: usize,
) -> WatchStream<K>
where
    K: DeserializeOwned + Send + Sync + 'static,
{
    struct State<K> {
        data: BodyChunks,
        framing: Framing,
        decoding: Decoding,
        helpers: Option<EventHelpers<K>>,
        done: bool,
    }
    let framing = match decoding.protobuf.clone().filter(|_| protobuf) {
        Some(pb) => Framing::Protobuf(ProtoFrameSplitter::default(), pb),
        None => Framing::Json(FrameSplitter::default()),
    };
    let helpers = (helpers > 0).then(|| {
        let decode: FrameDecode<K> = match &framing {
            Framing::Json(_) => {
                let decoding = decoding.clone();
                Arc::new(move |frame: &[u8]| decode_frame::<K>(frame, &decoding))
            }
            Framing::Protobuf(_, pb) => {
                let (pb, strip) = (Arc::clone(pb), decoding.strip_managed_fields);
                Arc::new(move |frame: &[u8]| decode_proto_frame::<K>(frame, &pb, strip))
            }
        };
        EventHelpers::new(decode, matches!(framing, Framing::Protobuf(..)), helpers, batch)
    });
    let state = State { data, framing, decoding, helpers, done: false };
    futures::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(h) = &mut st.helpers {
                if let Some(ev) = h.next_ready() {
                    return Some((ev, st));
                }
                if h.is_spent() {
                    st.helpers = None;
                }
            }
            if st.done {
                // Whatever is still queued behind the helpers, in order.
                let ev = st.helpers.as_mut().and_then(|h| {
                    h.hand_over();
                    h.wait_next()
                })?;
                return Some((ev, st));
            }
            match st.framing.next_frame() {
                Ok(Some(frame)) => match &mut st.helpers {
                    Some(h) => {
                        h.push_frame(&frame);
                        continue;
                    }
                    None => return Some((st.framing.decode::<K>(&frame, &st.decoding), st)),
                },
                Ok(None) => {}
                Err(e) => {
                    st.done = true;
                    match &mut st.helpers {
                        Some(h) => {
                            h.push_event(Err(e));
                            continue;
                        }
                        None => return Some((Err(e), st)),
                    }
                }
            }
            let next = match &mut st.helpers {
                // Nothing more to frame without waiting for bytes: hand over what is batched,
                // and yield what the helpers have decoded before waiting for the network.
                Some(h) => match st.data.next().now_or_never() {
                    Some(next) => next,
                    None => {
                        h.hand_over();
                        if let Some(ev) = h.wait_next() {
                            return Some((ev, st));
                        }
                        st.data.next().await
                    }
                },
                None => st.data.next().await,
            };
            match next {
                Some(Ok(chunk)) => st.framing.push(chunk),
                Some(Err(e)) => {
                    st.done = true;
                    if is_probable_eof(&e) {
                        tracing::debug!(error = %e, "watch stream ended by the connection; re-watching");
                        continue;
                    }
                    let e = Err(ReflectorError::transport(e));
                    match &mut st.helpers {
                        Some(h) => h.push_event(e),
                        None => return Some((e, st)),
                    }
                }
                None => {
                    st.done = true;
                    let last = match st.framing.finish() {
                        Ok(None) => continue,
                        Ok(Some(frame)) => st.framing.decode::<K>(&frame, &st.decoding),
                        Err(e) => Err(e),
                    };
                    match &mut st.helpers {
                        Some(h) => h.push_event(last),
                        None => return Some((last, st)),
                    }
                }
            }
        }
    })
    .boxed()
}

#[cfg(test)]
pub(crate) mod tests;
