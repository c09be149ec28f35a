//! Kubernetes' protobuf envelope: the `k8s\0` prefix and `runtime.Unknown` around every object
//! a response carries, and the length-prefixed `WatchEvent` frames of a watch.

use crate::error::{Error, Wire};
use crate::wire::{LEN, Reader, Value, put_bytes, put_tag, put_varint};

/// The four bytes every protobuf-encoded object starts with.
pub const MAGIC: &[u8; 4] = b"k8s\0";

/// Kubernetes' protobuf media type (`Content-Type` and `Accept`).
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The media type of a protobuf watch stream.
pub const WATCH_MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";

/// A `runtime.Unknown`: the type of an object and its encoded bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unknown<'a> {
    /// `typeMeta.apiVersion`.
    pub api_version: &'a str,
    /// `typeMeta.kind`.
    pub kind: &'a str,
    /// The object's message (for [`decode`](crate::decode)).
    pub raw: &'a [u8],
    /// `contentEncoding` (empty: none).
    pub content_encoding: &'a str,
    /// `contentType` (empty: protobuf).
    pub content_type: &'a str,
}

fn utf8(b: &[u8]) -> Result<&str, Error> {
    std::str::from_utf8(b).map_err(|e| Error::wire(Wire::Utf8, e.valid_up_to()))
}

/// Reads the envelope of a protobuf-encoded object: [`MAGIC`], then a `runtime.Unknown`.
///
/// # Errors
///
/// [`Wire::Envelope`] without the prefix; a wire-level [`Error`] for a malformed message.
///
/// # Examples
///
/// ```
/// let body = kcache_protobuf::envelope("v1", "Status", &[]);
/// let u = kcache_protobuf::unknown(&body)?;
/// assert_eq!(u.kind, "Status");
/// assert!(kcache_protobuf::unknown(b"{\"kind\":\"Status\"}").is_err());
/// # Ok::<(), kcache_protobuf::Error>(())
/// ```
pub fn unknown(body: &[u8]) -> Result<Unknown<'_>, Error> {
    let Some(rest) = body.strip_prefix(MAGIC.as_slice()) else {
        return Err(Error::wire(Wire::Envelope, 0));
    };
    let mut u = Unknown { api_version: "", kind: "", raw: &[], content_encoding: "", content_type: "" };
    let mut r = Reader::new(rest);
    while let Some((n, v)) = r.field()? {
        let b = match v {
            Value::Len(b) => b,
            _ if (1..=4).contains(&n) => return Err(Error::wire(Wire::WireType, r.pos)),
            _ => continue,
        };
        match n {
            1 => {
                let mut t = Reader::new(b);
                while let Some((n, v)) = t.field()? {
                    match (n, v) {
                        (1, Value::Len(s)) => u.api_version = utf8(s)?,
                        (2, Value::Len(s)) => u.kind = utf8(s)?,
                        (1 | 2, _) => return Err(Error::wire(Wire::WireType, t.pos)),
                        _ => {}
                    }
                }
            }
            2 => u.raw = b,
            3 => u.content_encoding = utf8(b)?,
            4 => u.content_type = utf8(b)?,
            _ => {}
        }
    }
    Ok(u)
}

/// Writes an object's envelope as kube-apiserver does: [`MAGIC`], then a `runtime.Unknown` with
/// the type, `raw`, and empty `contentEncoding` and `contentType`.
pub fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut type_meta = Vec::with_capacity(api_version.len() + kind.len() + 4);
    put_bytes(&mut type_meta, 1, api_version.as_bytes());
    put_bytes(&mut type_meta, 2, kind.as_bytes());
    let mut out = Vec::with_capacity(raw.len() + type_meta.len() + 16);
    out.extend_from_slice(MAGIC);
    put_bytes(&mut out, 1, &type_meta);
    put_bytes(&mut out, 2, raw);
    put_bytes(&mut out, 3, b"");
    put_bytes(&mut out, 4, b"");
    out
}

/// One watch event as read off a frame: its type and its object's envelope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawWatchEvent<'a> {
    /// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK` or `ERROR`.
    pub event_type: &'a str,
    /// The object, an envelope for [`unknown`] (empty if the event has none).
    pub object: &'a [u8],
}

/// Reads one frame of a protobuf watch stream (without its 4-byte length): a `meta/v1
/// WatchEvent`, `type = 1` and `object = 2` (a `RawExtension` whose `raw` is the object's
/// envelope).
///
/// # Errors
///
/// A wire-level [`Error`] for a malformed message.
///
/// # Examples
///
/// ```
/// let frame = kcache_protobuf::watch_frame("ADDED", &kcache_protobuf::envelope("v1", "ConfigMap", &[]));
/// let ev = kcache_protobuf::watch_event(&frame[4..])?;
/// assert_eq!(ev.event_type, "ADDED");
/// assert_eq!(kcache_protobuf::unknown(ev.object)?.kind, "ConfigMap");
/// # Ok::<(), kcache_protobuf::Error>(())
/// ```
pub fn watch_event(frame: &[u8]) -> Result<RawWatchEvent<'_>, Error> {
    let mut ev = RawWatchEvent { event_type: "", object: &[] };
    let mut r = Reader::new(frame);
    while let Some((n, v)) = r.field()? {
        match (n, v) {
            (1, Value::Len(s)) => ev.event_type = utf8(s)?,
            (2, Value::Len(ext)) => {
                let mut e = Reader::new(ext);
                while let Some((n, v)) = e.field()? {
                    match (n, v) {
                        (1, Value::Len(raw)) => ev.object = raw,
                        (1, _) => return Err(Error::wire(Wire::WireType, e.pos)),
                        _ => {}
                    }
                }
            }
            (1 | 2, _) => return Err(Error::wire(Wire::WireType, r.pos)),
            _ => {}
        }
    }
    Ok(ev)
}

/// Writes one watch frame as kube-apiserver does: the 4-byte big-endian length, then the
/// `WatchEvent` with `object` (an envelope, see [`envelope`]) as its `RawExtension`'s `raw`.
pub fn watch_frame(event_type: &str, object: &[u8]) -> Vec<u8> {
    let mut ext = Vec::with_capacity(object.len() + 6);
    put_bytes(&mut ext, 1, object);
    let mut out = vec![0; 4];
    put_bytes(&mut out, 1, event_type.as_bytes());
    put_tag(&mut out, 2, LEN);
    put_varint(&mut out, ext.len() as u64);
    out.extend_from_slice(&ext);
    let len = u32::try_from(out.len() - 4).unwrap_or(u32::MAX);
    out[..4].copy_from_slice(&len.to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes of a ConfigMapList kube-apiserver v1.36.3 sent (`GET .../configmaps` with
    /// `Accept: application/vnd.kubernetes.protobuf`), cut to its envelope and list metadata.
    #[test]
    fn reads_kube_apiservers_envelope() {
        let mut body =
            b"k8s\0\x0a\x13\x0a\x02v1\x12\x0dConfigMapList\x12\x0b\x0a\x09\x0a\x00\x12\x03201\x1a\x00"
                .to_vec();
        body.extend_from_slice(b"\x1a\x00\x22\x00");
        let u = unknown(&body).unwrap();
        assert_eq!((u.api_version, u.kind, u.content_type), ("v1", "ConfigMapList", ""));
        assert_eq!(u.raw, b"\x0a\x09\x0a\x00\x12\x03201\x1a\x00");
        assert_eq!(envelope("v1", "ConfigMapList", u.raw), body);
    }

    /// A watch frame as kube-apiserver v1.36.3 wrote it for a BOOKMARK (the object's bytes
    /// shortened).
    #[test]
    fn watch_frames_round_trip() {
        let object = envelope("v1", "ConfigMap", b"\x0a\x00");
        let frame = watch_frame("BOOKMARK", &object);
        assert_eq!(u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize, frame.len() - 4);
        assert_eq!(&frame[4..14], b"\x0a\x08BOOKMARK");
        let ev = watch_event(&frame[4..]).unwrap();
        assert_eq!(ev, RawWatchEvent { event_type: "BOOKMARK", object: &object });
        for cut in 0..frame.len() - 4 {
            // A cut frame is an error or a different event, never a panic.
            let _ = watch_event(&frame[4..4 + cut]);
        }
    }
}
