//! Responses: the body type (a whole buffer, or a watch's stream of frames) and how errors,
//! objects and lists are written, the lists straight from the stored bytes.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Response, StatusCode, header};
use http_body::{Body, Frame, SizeHint};
use kcache_protobuf::MessageType;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::faults::RequestFault;
use crate::resources::ResourceDef;
use crate::status::ApiError;
use crate::store::{ProtobufForm, StoredObject};

/// A response body: a whole buffer, or a stream of chunks (watches).
pub(crate) enum ResBody {
    /// The whole body; `None` once sent.
    Full(Option<Bytes>),
    /// Chunks from a watch task; ends when the sender is dropped.
    Stream(mpsc::Receiver<Bytes>),
}

impl Body for ResBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            ResBody::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            ResBody::Stream(rx) => rx.poll_recv(cx).map(|o| o.map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, ResBody::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ResBody::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            ResBody::Full(None) => SizeHint::with_exact(0),
            ResBody::Stream(_) => SizeHint::default(),
        }
    }
}

/// A whole JSON response.
pub(crate) fn respond(code: u16, body: Bytes, retry_after: Option<u64>) -> Response<ResBody> {
    respond_as(code, "application/json", body, retry_after)
}

/// A whole response with this content type; plain text also gets `nosniff`, as Go's `http.Error`
/// sends it.
fn respond_as(code: u16, content_type: &str, body: Bytes, retry_after: Option<u64>) -> Response<ResBody> {
    let mut b = Response::builder()
        .status(StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header(header::CONTENT_TYPE, content_type)
        .header("audit-id", "kcache-testserver");
    if content_type.starts_with("text/plain") {
        b = b.header(header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    }
    if let Some(secs) = retry_after {
        b = b.header(header::RETRY_AFTER, secs.to_string());
    }
    b.body(ResBody::Full(Some(body))).unwrap_or_else(|_| Response::new(ResBody::Full(None)))
}

/// The Status of an error, with its code and `Retry-After`.
pub(crate) fn error_response(e: &ApiError) -> Response<ResBody> {
    respond(e.code, Bytes::from(e.body()), e.retry_after)
}

/// A whole protobuf response.
pub(crate) fn respond_protobuf(
    code: u16,
    body: impl Into<Bytes>,
    retry_after: Option<u64>,
) -> Response<ResBody> {
    respond_as(code, kcache_protobuf::MEDIA_TYPE, body.into(), retry_after)
}

/// The Status of an error as protobuf (for a client that negotiated protobuf), with its code and
/// `Retry-After`.
pub(crate) fn protobuf_error_response(e: &ApiError) -> Response<ResBody> {
    respond_protobuf(e.code, protobuf_status(&e.status), e.retry_after)
}

/// A `Status` (JSON form) in its protobuf envelope, as kube-apiserver writes it.
pub(crate) fn protobuf_status(status: &Value) -> Vec<u8> {
    let raw = kcache_protobuf::encode_json(MessageType::status(), status).unwrap_or_default();
    kcache_protobuf::envelope("v1", "Status", &raw)
}

/// An object stored as JSON, written as `ty`'s protobuf message in its envelope.
///
/// # Errors
///
/// 500 when the stored JSON does not fit the message (never for objects this server stored:
/// they passed its validation).
pub(crate) fn protobuf_object(ty: MessageType, json: &[u8]) -> Result<Vec<u8>, ApiError> {
    let v: Value = serde_json::from_slice(json).map_err(internal)?;
    let raw = kcache_protobuf::encode_json(ty, &v).map_err(internal)?;
    let api_version = v["apiVersion"].as_str().unwrap_or_default();
    let kind = v["kind"].as_str().unwrap_or_default();
    Ok(kcache_protobuf::envelope(api_version, kind, &raw))
}

/// A stored object as `ty`'s protobuf message: written once per stored version and kept in
/// [`StoredObject::protobuf`], so that a list of 50k objects, or the same event sent to many
/// watches, is built from bytes already written, as kube-apiserver's watch cache reuses an
/// object's serialization. (Written each time instead, a 50k-ConfigMap list took this server
/// about 130 ms against JSON's 15 ms, and bounded how fast any protobuf client could sync.)
///
/// # Errors
///
/// As [`protobuf_object`]; an object that does not encode is not kept, and fails again.
pub(crate) fn stored_protobuf(ty: MessageType, obj: &StoredObject) -> Result<ProtobufForm, ApiError> {
    if let Some(form) = obj.protobuf.get().filter(|f| f.message == ty) {
        return Ok(form.clone());
    }
    let envelope = Bytes::from(protobuf_object(ty, &obj.bytes)?);
    let raw = envelope.slice_ref(kcache_protobuf::unknown(&envelope).map_err(internal)?.raw);
    let form = ProtobufForm { message: ty, envelope, raw };
    // Kept unless another request kept the same bytes first. (Only the kind's own message is
    // ever asked of a stored object; another one would be written each time.)
    let _ = obj.protobuf.set(form.clone());
    Ok(form)
}

/// A list (`metadata` in JSON, each item its bare protobuf message, from [`stored_protobuf`])
/// written as the list kind's protobuf message in its envelope. The envelope names the list
/// kind; the items have no type of their own (protobuf list items are bare messages).
pub(crate) fn protobuf_list(
    list_ty: MessageType,
    api_version: &str,
    list_kind: &str,
    meta: &str,
    items: &[Bytes],
) -> Result<Vec<u8>, ApiError> {
    let meta_ty = list_ty.field_message(1).ok_or_else(|| internal("a list without metadata"))?;
    let meta: Value = serde_json::from_str(meta).map_err(internal)?;
    let meta = kcache_protobuf::encode_json(meta_ty, &meta).map_err(internal)?;
    let mut raw = Vec::with_capacity(meta.len() + 8 + items.iter().map(|i| i.len() + 6).sum::<usize>());
    put_field(&mut raw, 1, &meta);
    for item in items {
        put_field(&mut raw, 2, item);
    }
    Ok(kcache_protobuf::envelope(api_version, list_kind, &raw))
}

/// Appends a length-delimited field (protobuf's wire format: tag, varint length, bytes).
fn put_field(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    let mut varint = |mut v: u64| {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    };
    varint((u64::from(number) << 3) | 2);
    varint(bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn internal(e: impl std::fmt::Display) -> ApiError {
    ApiError::new(500, "InternalError", format!("Internal error occurred: protobuf: {e}"), None)
}

/// A fault answered as Go's `http.Error` writes: the message and a newline as plain text.
pub(crate) fn plain_text_response(fault: &RequestFault) -> Response<ResBody> {
    let body = Bytes::from(format!("{}\n", fault.message));
    respond_as(fault.http_code.unwrap_or(fault.code), "text/plain; charset=utf-8", body, fault.retry_after)
}

/// A JSON value, serialized.
pub(crate) fn json_response(code: u16, v: &Value) -> Response<ResBody> {
    respond(code, Bytes::from(serde_json::to_vec(v).unwrap_or_default()), None)
}

/// A stored object, as stored.
pub(crate) fn object_response(code: u16, obj: &StoredObject) -> Response<ResBody> {
    respond(code, obj.bytes.clone(), None)
}

/// The `PartialObjectMetadata` form of an object (metadata only), as kube-apiserver serves it to
/// clients that ask for it in `Accept`.
/// `api_version` is `meta.k8s.io/v1` or `meta.k8s.io/v1beta1`, as the `Accept` header asked.
pub(crate) fn partial_object_metadata(bytes: &[u8], api_version: &str) -> Bytes {
    let v: Value = serde_json::from_slice(bytes).unwrap_or(Value::Null);
    Bytes::from(serde_json::to_vec(&partial_value(&v["metadata"], api_version)).unwrap_or_default())
}

/// `{"kind":"PartialObjectMetadata","apiVersion":<api_version>,"metadata":<metadata>}`.
pub(crate) fn partial_value(metadata: &Value, api_version: &str) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": api_version, "metadata": metadata})
}

/// `{"kind":"<Kind>List",...,"items":[...]}` built from the stored bytes. A built-in kind's
/// items have no `kind` and `apiVersion` (kube-apiserver encodes a typed Go list, whose items'
/// `TypeMeta` is empty); a custom resource's keep them (an `UnstructuredList`'s items are whole
/// objects).
pub(crate) fn list_body(def: &ResourceDef, meta: &str, items: &[Arc<StoredObject>]) -> Bytes {
    let head = format!(
        "{{\"kind\":\"{}\",\"apiVersion\":\"{}\",\"metadata\":{meta},\"items\":[",
        def.list_kind,
        def.api_version()
    );
    if def.is_custom() {
        join_list(&head, items.iter().map(|o| [&o.bytes[..]]))
    } else {
        join_list(&head, items.iter().map(|o| o.list_item()))
    }
}

/// `head`, then the items (each the concatenation of its parts) separated by commas, then `]}`.
pub(crate) fn join_list<'a, P: AsRef<[&'a [u8]]>>(
    head: &str,
    items: impl Iterator<Item = P> + Clone,
) -> Bytes {
    let size: usize = items.clone().map(|p| p.as_ref().iter().map(|b| b.len()).sum::<usize>() + 1).sum();
    let mut out = Vec::with_capacity(size + head.len() + 2);
    out.extend_from_slice(head.as_bytes());
    for (i, parts) in items.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        for b in parts.as_ref() {
            out.extend_from_slice(b);
        }
    }
    out.extend_from_slice(b"]}");
    Bytes::from(out)
}
