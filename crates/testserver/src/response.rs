//! Responses: the body type (a whole buffer, or a watch's stream of frames) and how errors,
//! objects and lists are written, the lists straight from the stored bytes.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Response, StatusCode, header};
use http_body::{Body, Frame, SizeHint};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::faults::RequestFault;
use crate::resources::ResourceDef;
use crate::status::ApiError;
use crate::store::StoredObject;

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
    let partial =
        json!({"kind": "PartialObjectMetadata", "apiVersion": api_version, "metadata": v["metadata"]});
    Bytes::from(serde_json::to_vec(&partial).unwrap_or_default())
}

/// `{"kind":"<Kind>List",...,"items":[...]}` built from the stored bytes.
pub(crate) fn list_body(def: &ResourceDef, meta: &str, items: &[Arc<StoredObject>]) -> Bytes {
    let head = format!(
        "{{\"kind\":\"{}\",\"apiVersion\":\"{}\",\"metadata\":{meta},\"items\":[",
        def.list_kind,
        def.api_version()
    );
    join_list(&head, items.iter().map(|o| &o.bytes[..]))
}

/// `head`, then the items separated by commas, then `]}`.
pub(crate) fn join_list<'a>(head: &str, items: impl Iterator<Item = &'a [u8]> + Clone) -> Bytes {
    let size: usize = items.clone().map(|b| b.len() + 1).sum();
    let mut out = Vec::with_capacity(size + head.len() + 2);
    out.extend_from_slice(head.as_bytes());
    for (i, b) in items.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b);
    }
    out.extend_from_slice(b"]}");
    Bytes::from(out)
}
