//! [`ListReader`]: a protobuf list response read while it arrives, one item at a time, so the
//! body is never held whole (as kcache's JSON list decoder does for JSON).

use crate::envelope::MAGIC;
use crate::error::{Error, Wire};
use crate::wire::{FIXED32, FIXED64, LEN, VARINT};

/// One part of a protobuf list response, in the order the response carries them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListPart<'a> {
    /// The envelope's type (`runtime.Unknown.typeMeta`), such as `v1` `ConfigMapList`.
    Type {
        /// `apiVersion`.
        api_version: &'a str,
        /// `kind`.
        kind: &'a str,
    },
    /// The list's `metadata` (field 1): a `ListMeta` message.
    Metadata(&'a [u8]),
    /// One element of `items` (field 2): the item's message.
    Item(&'a [u8]),
    /// The whole `raw` of an envelope whose type came first and is not a list (`kind` without
    /// the `List` suffix): a `Status` answered in place of a list, say.
    Object(&'a [u8]),
}

/// Where the reader is in the response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum At {
    /// Before [`MAGIC`].
    Magic,
    /// Between two fields of the `runtime.Unknown`.
    Envelope,
    /// Inside the envelope's `raw`, a list message, with this many of its bytes still to come.
    List { left: usize },
}

/// Reads a protobuf list response (`k8s\0`, then a `runtime.Unknown` whose `raw` is a
/// `<Kind>List` message) from its chunks, in the order they arrive, and hands out each part as
/// soon as its last byte is in: the type, the list metadata, then every item. Only the bytes of
/// the part being read are kept, so a list of 50k objects never sits in memory as one body.
///
/// Push each chunk with [`push`](Self::push), take parts with [`next_part`](Self::next_part)
/// until it answers `None`, and call [`finish`](Self::finish) at the end of the body.
///
/// # Examples
///
/// ```
/// use kcache_protobuf::{ListPart, ListReader, MessageType, encode_json, envelope};
///
/// let list = MessageType::for_kind("v1", "ConfigMapList").unwrap();
/// let json = serde_json::json!({"metadata": {"resourceVersion": "7"},
///     "items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]});
/// let body = envelope("v1", "ConfigMapList", &encode_json(list, &json)?);
/// let mut reader = ListReader::new();
/// let mut items = 0;
/// // Two bytes at a time: parts come out whenever they are whole.
/// for chunk in body.chunks(2) {
///     reader.push(chunk);
///     while let Some(part) = reader.next_part()? {
///         if let ListPart::Item(_) = part {
///             items += 1;
///         }
///     }
/// }
/// reader.finish()?;
/// assert_eq!(items, 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct ListReader {
    /// Bytes received and not yet consumed start at `buf[pos]`.
    buf: Vec<u8>,
    pos: usize,
    /// Body offset of `buf[0]`, for error messages.
    base: usize,
    at: At,
    /// The envelope's kind once read (empty before): decides whether `raw` is streamed as a list.
    kind: String,
}

impl Default for ListReader {
    fn default() -> Self {
        Self::new()
    }
}

/// A varint at the start of `b`: its value and length, `None` while its last byte is missing.
fn varint(b: &[u8], offset: usize) -> Result<Option<(u64, usize)>, Error> {
    let mut value = 0u64;
    for i in 0..10 {
        let Some(&byte) = b.get(i) else { return Ok(None) };
        if i == 9 && byte > 1 {
            return Err(Error::wire(Wire::Varint, offset));
        }
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte < 0x80 {
            return Ok(Some((value, i + 1)));
        }
    }
    Err(Error::wire(Wire::Varint, offset))
}

/// A field found at the start of a buffer.
struct RawField {
    number: u32,
    wire: u8,
    /// Where its value is (the payload of a length-delimited field).
    value: std::ops::Range<usize>,
    /// Its whole length, tag included (for a streamed field: the payload's length).
    len: usize,
}

/// One whole field at the start of `b`, `None` while bytes are missing. A length-delimited field
/// with `stream_len` set is returned as soon as its tag and length are in, with an empty value
/// range and the payload's length as `len`.
fn field(b: &[u8], offset: usize, stream_len: bool) -> Result<Option<RawField>, Error> {
    let Some((tag, n)) = varint(b, offset)? else { return Ok(None) };
    let number = tag >> 3;
    if number == 0 || number > u64::from(u32::MAX >> 3) {
        return Err(Error::wire(Wire::FieldNumber, offset));
    }
    let number = number as u32;
    let wire = (tag & 7) as u8;
    let raw = |value: std::ops::Range<usize>, len| RawField { number, wire, value, len };
    let fixed = |len: usize| Ok((b.len() >= n + len).then(|| raw(n..n + len, n + len)));
    match wire {
        VARINT => Ok(varint(&b[n..], offset + n)?.map(|(_, m)| raw(n..n + m, n + m))),
        FIXED64 => fixed(8),
        FIXED32 => fixed(4),
        LEN => {
            let Some((len, m)) = varint(&b[n..], offset + n)? else { return Ok(None) };
            let len = usize::try_from(len).map_err(|_| Error::wire(Wire::Truncated, offset))?;
            let start = n + m;
            if stream_len {
                return Ok(Some(raw(start..start, len)));
            }
            let end = start.checked_add(len).ok_or(Error::wire(Wire::Truncated, offset))?;
            Ok((b.len() >= end).then(|| raw(start..end, end)))
        }
        _ => Err(Error::wire(Wire::WireType, offset)),
    }
}

fn utf8(b: &[u8], offset: usize) -> Result<&str, Error> {
    std::str::from_utf8(b).map_err(|e| Error::wire(Wire::Utf8, offset + e.valid_up_to()))
}

impl ListReader {
    /// A reader at the start of a response.
    pub fn new() -> Self {
        Self { buf: Vec::new(), pos: 0, base: 0, at: At::Magic, kind: String::new() }
    }

    /// Appends the next chunk of the body.
    pub fn push(&mut self, chunk: &[u8]) {
        if self.pos > 0 && (self.pos == self.buf.len() || self.pos >= self.buf.len() / 2) {
            // Drop what was consumed (the parts handed out), so the buffer holds one part.
            self.buf.drain(..self.pos);
            self.base += self.pos;
            self.pos = 0;
        }
        self.buf.extend_from_slice(chunk);
    }

    /// The next part whose bytes are all in, `None` while more are needed.
    ///
    /// # Errors
    ///
    /// [`Error`] for bytes that are not a protobuf list response: no [`MAGIC`], a malformed
    /// field, an envelope field of the wrong wire type, a type that is not UTF-8.
    pub fn next_part(&mut self) -> Result<Option<ListPart<'_>>, Error> {
        loop {
            let offset = self.base + self.pos;
            let rest = &self.buf[self.pos..];
            match self.at {
                At::Magic => {
                    if rest.len() < MAGIC.len() {
                        if !MAGIC.starts_with(rest) {
                            return Err(Error::wire(Wire::Envelope, offset));
                        }
                        return Ok(None);
                    }
                    if &rest[..MAGIC.len()] != MAGIC {
                        return Err(Error::wire(Wire::Envelope, offset));
                    }
                    self.pos += MAGIC.len();
                    self.at = At::Envelope;
                }
                At::Envelope => {
                    // `raw` (2) is streamed when it holds a list, or when the type is not known
                    // yet (kube-apiserver writes the type first; a body that does not is read as
                    // a list and its type checked at the end).
                    let stream_raw = self.kind.is_empty() || self.kind.ends_with("List");
                    let Some((tag, _)) = varint(rest, offset)? else { return Ok(None) };
                    let is_raw = tag == (2 << 3) | u64::from(LEN);
                    let Some(RawField { number, wire, value, len }) =
                        field(rest, offset, is_raw && stream_raw)?
                    else {
                        return Ok(None);
                    };
                    if number == 2 && wire == LEN && stream_raw {
                        // `len` is the list's length; its fields follow.
                        self.pos += value.start;
                        self.at = At::List { left: len };
                        continue;
                    }
                    if (1..=4).contains(&number) && wire != LEN {
                        return Err(Error::wire(Wire::WireType, offset));
                    }
                    let start = self.pos;
                    self.pos += len;
                    let bytes = &self.buf[start + value.start..start + value.end];
                    match number {
                        1 => {
                            let (mut api_version, mut kind) = ("", "");
                            let mut at = 0;
                            while at < bytes.len() {
                                let o = offset + value.start + at;
                                let Some(RawField { number: n, wire: w, value: v, len: l }) =
                                    field(&bytes[at..], o, false)?
                                else {
                                    return Err(Error::wire(Wire::Truncated, o));
                                };
                                match (n, w) {
                                    (1, LEN) => api_version = utf8(&bytes[at + v.start..at + v.end], o)?,
                                    (2, LEN) => kind = utf8(&bytes[at + v.start..at + v.end], o)?,
                                    (1 | 2, _) => return Err(Error::wire(Wire::WireType, o)),
                                    _ => {}
                                }
                                at += l;
                            }
                            self.kind = kind.to_owned();
                            return Ok(Some(ListPart::Type { api_version, kind }));
                        }
                        2 => return Ok(Some(ListPart::Object(bytes))),
                        _ => {}
                    }
                }
                At::List { left: 0 } => self.at = At::Envelope,
                At::List { left } => {
                    let rest = &rest[..rest.len().min(left)];
                    let Some(RawField { number, wire, value, len }) = field(rest, offset, false)? else {
                        if rest.len() == left {
                            // All of the list's bytes are in and they end inside a field.
                            return Err(Error::wire(Wire::Truncated, offset));
                        }
                        return Ok(None);
                    };
                    let start = self.pos;
                    self.pos += len;
                    self.at = At::List { left: left - len };
                    let bytes = &self.buf[start + value.start..start + value.end];
                    match (number, wire) {
                        (1, LEN) => return Ok(Some(ListPart::Metadata(bytes))),
                        (2, LEN) => return Ok(Some(ListPart::Item(bytes))),
                        (1 | 2, _) => return Err(Error::wire(Wire::WireType, offset)),
                        _ => {}
                    }
                }
            }
        }
    }

    /// Checks that the body ended where a response may end: after the envelope's last field.
    ///
    /// # Errors
    ///
    /// [`Wire::Truncated`] if it ended inside a field or the list, [`Wire::Envelope`] if it
    /// ended before [`MAGIC`].
    pub fn finish(&self) -> Result<(), Error> {
        let offset = self.base + self.pos;
        match self.at {
            At::Magic => Err(Error::wire(Wire::Envelope, offset)),
            At::Envelope if self.pos == self.buf.len() => Ok(()),
            At::List { left: 0 } if self.pos == self.buf.len() => Ok(()),
            _ => Err(Error::wire(Wire::Truncated, offset)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{MessageType, encode_json, envelope};

    fn parts(body: &[u8], chunk: usize) -> Result<Vec<String>, Error> {
        let mut r = ListReader::new();
        let mut out = Vec::new();
        for c in body.chunks(chunk.max(1)) {
            r.push(c);
            while let Some(p) = r.next_part()? {
                out.push(match p {
                    ListPart::Type { api_version, kind } => format!("type {api_version} {kind}"),
                    ListPart::Metadata(b) => format!("meta {}", b.len()),
                    ListPart::Item(b) => format!("item {}", b.len()),
                    ListPart::Object(b) => format!("object {}", b.len()),
                });
            }
        }
        r.finish()?;
        Ok(out)
    }

    fn list_body() -> Vec<u8> {
        let ty = MessageType::for_kind("v1", "ConfigMapList").unwrap();
        let json = serde_json::json!({"metadata": {"resourceVersion": "7", "continue": "x"},
            "items": [{"metadata": {"name": "a"}, "data": {"k": "v"}}, {"metadata": {"name": "bb"}}]});
        envelope("v1", "ConfigMapList", &encode_json(ty, &json).unwrap())
    }

    /// However the body is cut into chunks, the same parts come out.
    #[test]
    fn any_chunking_gives_the_same_parts() {
        let body = list_body();
        let whole = parts(&body, body.len()).unwrap();
        assert_eq!(whole[0], "type v1 ConfigMapList");
        assert!(whole[1].starts_with("meta "));
        assert_eq!(whole.iter().filter(|p| p.starts_with("item")).count(), 2);
        for chunk in 1..body.len() {
            assert_eq!(parts(&body, chunk).unwrap(), whole, "chunks of {chunk}");
        }
    }

    /// A Status in place of a list comes out whole.
    #[test]
    fn a_status_is_one_object() {
        let status = MessageType::status();
        let raw = encode_json(status, &serde_json::json!({"status": "Failure", "code": 410})).unwrap();
        let body = envelope("v1", "Status", &raw);
        assert_eq!(
            parts(&body, 3).unwrap(),
            vec!["type v1 Status".to_owned(), format!("object {}", raw.len())]
        );
    }

    /// Every proper prefix is refused at the end (or earlier), never accepted, never a panic.
    #[test]
    fn cut_bodies_are_errors() {
        let body = list_body();
        for cut in 0..body.len() {
            // The envelope's last fields (empty contentEncoding and contentType) may be cut
            // cleanly: the body then ends after a whole field.
            // (A body cut right after its type is an empty envelope: no metadata, no items.)
            let r = parts(&body[..cut], 5);
            if cut < body.len() - 4 {
                assert!(r.as_ref().map_or(true, |p| p.len() <= 1), "cut at {cut}: {r:?}");
            }
        }
        assert!(parts(b"{\"kind\":\"ConfigMapList\"}", 4).is_err());
    }
}
