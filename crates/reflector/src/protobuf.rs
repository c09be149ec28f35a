//! Kubernetes' protobuf encoding on the reflector's decode path (opt-in:
//! [`ApiListerWatcher::protobuf`](crate::ApiListerWatcher::protobuf)): list responses read
//! item by item while they arrive ([`ProtoListDecoder`]), watch streams split into their
//! length-prefixed frames ([`ProtoFrameSplitter`]) and each frame decoded
//! ([`decode_proto_frame`]), error bodies read as `Status`. The objects themselves are decoded
//! by kcache-protobuf straight into `K`, with no intermediate prost struct: by the decoder
//! generated for `K` when `K` is a k8s-openapi type (fields written by number, as Go's
//! `Unmarshal`), else through `K`'s own `Deserialize` (the same value either way).
//!
//! Errors name the event, the byte offset and the class of the problem (kcache-protobuf's
//! [`Error`](kcache_protobuf::Error) never quotes a value), never the bytes.

use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use kcache_protobuf::{DecodeOptions, Decoder, ListPart, ListReader, MessageType};
use kube::core::Status;
use kube::core::response::StatusSummary;
use serde::de::DeserializeOwned;

use crate::error::{ReflectorError, Result};
use crate::frame::{MAX_FRAME_BYTES, RawBookmark};
use crate::list_decode::RawListMeta;
use crate::list_helpers::Helpers;
use crate::lister_watcher::{Bookmark, ListPage, WatchEvent};

/// Whether a response's `Content-Type` is Kubernetes' protobuf (a list's, or a watch's
/// `;stream=watch`).
pub(crate) fn is_protobuf(headers: &http::HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().to_ascii_lowercase().starts_with(kcache_protobuf::MEDIA_TYPE))
}

/// The `Accept` header of a request for a built-in kind: protobuf first, JSON as the fallback
/// a server without protobuf answers with (client-go's `AcceptContentTypes` when
/// `ContentType` is protobuf).
pub(crate) const ACCEPT_PROTOBUF: &str = "application/vnd.kubernetes.protobuf, application/json";

/// A built-in kind the server can send as protobuf: its type and its messages.
#[derive(Debug)]
pub(crate) struct ProtobufKind {
    api_version: String,
    kind: String,
    list_kind: String,
    /// The object's message.
    item: MessageType,
    /// The list's metadata message (`ListMeta`).
    list_meta: MessageType,
}

impl ProtobufKind {
    /// The kind `api_version` `kind`, if it is a built-in with a protobuf form (not a custom
    /// resource).
    pub(crate) fn new(api_version: &str, kind: &str) -> Option<Self> {
        let item = MessageType::for_kind(api_version, kind)?;
        let list_kind = format!("{kind}List");
        let list_meta = MessageType::for_kind(api_version, &list_kind)?.field_message(1)?;
        Some(Self { api_version: api_version.to_owned(), kind: kind.to_owned(), list_kind, item, list_meta })
    }

    /// Checks the type an envelope carries against the expected one.
    ///
    /// `what` names what was decoded in the error; a `Display` (such as `format_args!`) so that
    /// a watch, which checks every event's object, builds no `String` for it unless the check
    /// fails.
    fn check(&self, what: impl std::fmt::Display, got: (&str, &str), kind: &str) -> Result<()> {
        if got == (self.api_version.as_str(), kind) {
            return Ok(());
        }
        // The envelope's strings are named only when they are a built-in kind's: in a corrupted
        // body they can be any bytes of an object, a Secret's data included (found by the
        // `protobuf_decode` fuzz target).
        let known = MessageType::for_kind(got.0, got.1).is_some()
            || got.1.strip_suffix("List").is_some_and(|k| MessageType::for_kind(got.0, k).is_some());
        let shown = if known {
            format!("{} {}", got.0, got.1)
        } else {
            format!("a type that is no built-in kind ({} and {} bytes)", got.0.len(), got.1.len())
        };
        Err(ReflectorError::decode(format!("{what}: expected {} {kind}, got {shown}", self.api_version)))
    }
}

/// A kcache-protobuf error as a decode error, named after what was decoded.
fn decode_error(what: &str, e: &kcache_protobuf::Error) -> ReflectorError {
    ReflectorError::decode(format!("{what}: {e}"))
}

/// The options objects are decoded with.
fn options(strip_managed_fields: bool) -> DecodeOptions {
    DecodeOptions::default().skip_managed_fields(strip_managed_fields)
}

/// A protobuf `Status` body (an error response, or a `Status` in place of a list), if `body`
/// is one.
pub(crate) fn status_body(body: &[u8]) -> Option<Status> {
    let u = kcache_protobuf::unknown(body).ok()?;
    (u.kind == "Status").then(|| status_message(u.raw).ok()).flatten()
}

/// A `Status` message.
fn status_message(raw: &[u8]) -> std::result::Result<Status, kcache_protobuf::Error> {
    kcache_protobuf::decode(MessageType::status(), raw, DecodeOptions::default())
}

/// Decodes a protobuf list response while it arrives, as [`ListDecoder`] does a JSON one:
/// every item as soon as its last byte is in, only the bytes of the item being read kept.
///
/// [`ListDecoder`]: crate::list_decode::ListDecoder
pub(crate) struct ProtoListDecoder<K> {
    reader: ListReader,
    pb: Arc<ProtobufKind>,
    /// The items, decoded on this thread and any helpers.
    items: Helpers<K>,
    metadata: RawListMeta,
    /// The envelope said `Status`: its message, once read.
    status: Option<Option<Status>>,
    typed: bool,
}

impl<K: DeserializeOwned + Send + Sync + 'static> ProtoListDecoder<K> {
    /// A decoder for lists of `pb`, skipping each item's managed fields when `strip` is set,
    /// with up to `helpers` threads decoding items beside the caller's
    /// ([`Helpers`], in batches of `batch` items).
    pub(crate) fn new(pb: Arc<ProtobufKind>, strip: bool, helpers: usize, batch: usize) -> Self {
        Self {
            reader: ListReader::new(),
            items: Helpers::new(Decoder::new(pb.item), options(strip), helpers, batch),
            pb,
            metadata: RawListMeta::default(),
            status: None,
            typed: false,
        }
    }

    /// Takes the next chunk of the body and decodes every item it completes.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Result<()> {
        self.reader.push(chunk);
        let pushed = self.push_parts();
        if pushed.is_err() {
            // An item before the error's place may still be decoding on a helper: its error
            // comes first, as it would on one thread.
            self.items.settle()?;
        }
        pushed
    }

    fn push_parts(&mut self) -> Result<()> {
        while let Some(part) = self.reader.next_part().map_err(|e| decode_error("protobuf list", &e))? {
            match part {
                ListPart::Type { api_version, kind } => {
                    if kind == "Status" {
                        self.status = Some(None);
                    } else {
                        self.pb.check("protobuf list", (api_version, kind), &self.pb.list_kind)?;
                    }
                    self.typed = true;
                }
                ListPart::Metadata(b) => {
                    self.metadata = kcache_protobuf::decode(self.pb.list_meta, b, DecodeOptions::default())
                        .map_err(|e| decode_error("protobuf list metadata", &e))?;
                }
                ListPart::Item(b) => self.items.push(b)?,
                ListPart::Object(b) => {
                    // Only a type that is not a list gets here: `Status`, checked above.
                    let status = status_message(b)
                        .map_err(|e| decode_error("a protobuf Status in place of a list", &e))?;
                    self.status = Some(Some(status));
                }
            }
        }
        Ok(())
    }

    /// The page, once the whole body has been pushed.
    pub(crate) fn finish(mut self) -> Result<ListPage<K>> {
        // Every item's error comes before what is wrong with the body's end.
        let items = self.items.finish()?;
        self.reader.finish().map_err(|e| decode_error("protobuf list", &e))?;
        if !self.typed {
            return Err(ReflectorError::decode("protobuf list: no type in the envelope"));
        }
        if let Some(status) = self.status {
            // As for JSON: a Status that is not a success is the error it describes.
            let status =
                status.ok_or_else(|| ReflectorError::decode("protobuf list: a Status without a body"))?;
            if status.status != Some(StatusSummary::Success) {
                return Err(ReflectorError::from_status(status, None, None));
            }
        }
        Ok(ListPage {
            shard_info: self.metadata.shard_info(),
            items,
            resource_version: self.metadata.resource_version.unwrap_or_default(),
            continue_token: self.metadata.continue_token.filter(|c| !c.is_empty()),
        })
    }
}

/// Splits a protobuf watch stream into frames: each a 4-byte big-endian length, then that many
/// bytes (a `WatchEvent` message), bounded by [`MAX_FRAME_BYTES`].
#[derive(Debug, Default)]
pub(crate) struct ProtoFrameSplitter {
    buf: BytesMut,
}

impl ProtoFrameSplitter {
    pub(crate) fn push(&mut self, chunk: Bytes) {
        if self.buf.is_empty() {
            // Usually a chunk holds whole frames: no copy until one is split across chunks.
            self.buf = BytesMut::from(chunk);
        } else {
            self.buf.extend_from_slice(&chunk);
        }
    }

    /// The next complete frame (without its length), `Ok(None)` if more bytes are needed, or an
    /// error when a frame's length is over the limit.
    pub(crate) fn next_frame(&mut self) -> Result<Option<Bytes>> {
        let Some(len) = self.buf.get(..4) else { return Ok(None) };
        let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
        if len > MAX_FRAME_BYTES {
            return Err(ReflectorError::decode(format!("watch frame larger than {MAX_FRAME_BYTES} bytes")));
        }
        if self.buf.len() < 4 + len {
            return Ok(None);
        }
        self.buf.advance(4);
        Ok(Some(self.buf.split_to(len).freeze()))
    }

    /// An error if the stream ended inside a frame.
    pub(crate) fn finish(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let n = self.buf.len();
        self.buf.clear();
        Err(ReflectorError::decode(format!("protobuf watch stream ended inside a frame ({n} bytes of it)")))
    }
}

/// Decodes one protobuf watch frame (a `WatchEvent`) of a watch of `pb`.
pub(crate) fn decode_proto_frame<K: DeserializeOwned + 'static>(
    frame: &[u8],
    pb: &ProtobufKind,
    strip_managed_fields: bool,
) -> Result<WatchEvent<K>> {
    let ev = kcache_protobuf::watch_event(frame).map_err(|e| decode_error("protobuf watch frame", &e))?;
    let what = ev.event_type;
    let envelope = || {
        if ev.object.is_empty() {
            return Err(ReflectorError::decode(format!("{what} event without an object")));
        }
        kcache_protobuf::unknown(ev.object).map_err(|e| decode_error(&format!("{what} event object"), &e))
    };
    let typed = || -> Result<Arc<K>> {
        let u = envelope()?;
        pb.check(format_args!("{what} event object"), (u.api_version, u.kind), &pb.kind)?;
        // Looking the generated decoder up is a jump table and a `TypeId` comparison.
        Decoder::<K>::new(pb.item)
            .decode(u.raw, options(strip_managed_fields))
            .map(Arc::new)
            .map_err(|e| decode_error(&format!("{what} event object"), &e))
    };
    match what {
        "ADDED" => Ok(WatchEvent::Added(typed()?)),
        "MODIFIED" => Ok(WatchEvent::Modified(typed()?)),
        "DELETED" => Ok(WatchEvent::Deleted(typed()?)),
        "BOOKMARK" => {
            let u = envelope()?;
            pb.check("BOOKMARK event object", (u.api_version, u.kind), &pb.kind)?;
            let b: RawBookmark = kcache_protobuf::decode(pb.item, u.raw, options(true))
                .map_err(|e| decode_error("BOOKMARK event object", &e))?;
            let (resource_version, initial_events_end) = b.into_parts()?;
            Ok(WatchEvent::Bookmark(Bookmark { resource_version, initial_events_end }))
        }
        "ERROR" => {
            let status = envelope()
                .ok()
                .filter(|u| u.kind == "Status")
                .and_then(|u| status_message(u.raw).ok())
                .unwrap_or_else(|| Status::failure("", ""));
            Ok(WatchEvent::Error(Box::new(status)))
        }
        other => Err(ReflectorError::UnknownEventType(other.chars().take(64).collect())),
    }
}

#[cfg(test)]
mod tests;
