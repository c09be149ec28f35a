//! Decoding a list response while it arrives.
//!
//! A list at resource version "0" is answered from the server's watch cache in one unpaginated
//! response: 50k objects are a body of tens of megabytes, and client-go holds all of it while it
//! decodes. [`ListDecoder`] instead takes the body chunk by chunk, decodes each element of
//! `items` as soon as its last byte is in, and keeps only the bytes of the element still being
//! read, so the peak is the decoded objects plus one object's bytes.
//!
//! It reads the top-level object itself (keys, `:` and `,` between members, the `items` array)
//! and leaves every value to serde. Each item is decoded as `K` (or [`Stripped<K>`]) in one pass
//! where it lies in the chunk (as `str` when the chunk is UTF-8, so serde need not check each
//! string), and serde says where it ended; only an item cut by a chunk's end is scanned for its
//! end by tracking nesting, strings and escapes (no recursion, so nesting depth costs no stack),
//! and decoded once its end is in. `metadata` is decoded as the list metadata, and any other
//! member is checked to be well-formed JSON and dropped. A body that is not a JSON object with such members
//! is a [`ReflectorError::Decode`] that names a byte offset, never the body's content (it may be a Secret).
//! A body whose `kind` is `Status` (an error answered with a success code) is the error that
//! `Status` describes, unless it reports success.
//!
//! Here too: [`describe_json_error`], which the watch decoder shares, and (for tests and the
//! `list_decode` fuzz target) the `oracle` the decoder is checked against: serde's decode of the
//! whole body.

use std::marker::PhantomData;
use std::sync::Arc;

use bytes::{Buf, BytesMut};
use kube::core::Status;
use kube::core::response::StatusSummary;
use serde::Deserialize;
use serde::de::{DeserializeOwned, IgnoredAny};

use crate::error::{ReflectorError, Result};
use crate::lister_watcher::ListPage;
use crate::strip::Stripped;

/// Describes a serde error without quoting the input (which may be a Secret).
pub(crate) fn describe_json_error(what: &str, e: &serde_json::Error) -> String {
    format!("{what}: {:?} error at line {} column {}", e.classify(), e.line(), e.column())
}

/// Whether serde reported `e` at the end of `read`, the input it was given (where it may have
/// stopped only because the input did).
fn error_at_end(e: &serde_json::Error, read: &[u8]) -> bool {
    let line_start = memchr::memrchr(b'\n', read).map_or(0, |i| i + 1);
    e.line() == 1 + memchr::memchr_iter(b'\n', read).count() && e.column() == read.len() - line_start
}

/// Where the reader is in the top-level object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum At {
    /// Before the opening `{`.
    Start,
    /// After `{`: a key or `}`.
    FirstKey,
    /// After `,`: a key.
    Key,
    /// After a key: `:`.
    Colon,
    /// After `:`: the member's value.
    Value,
    /// After a value: `,` or `}`.
    AfterValue,
    /// After `items: [`: an element or `]`.
    FirstItem,
    /// After `,` in `items`: an element.
    Item,
    /// After an element: `,` or `]`.
    AfterItem,
    /// After the closing `}`: only whitespace.
    End,
}

/// Which member a value belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Member {
    Items,
    Metadata,
    /// `kind`: a `Status` in place of a list is an error response.
    Kind,
    /// A member only a `Status` has (`status`, `code`, `reason`, `message`, `details`), kept in
    /// case `kind` says it is one.
    StatusField,
    Other,
}

/// Finds where one JSON value ends, across as many calls as its bytes take to arrive.
#[derive(Debug, Default)]
struct ValueEnd {
    /// Bytes of the value already scanned.
    scanned: usize,
    /// Open `{` and `[`.
    depth: u64,
    in_string: bool,
    escaped: bool,
    /// The value is a number or literal (it ends at the first delimiter).
    scalar: bool,
}

impl ValueEnd {
    /// Scans `value` (the value's bytes so far, from its first byte); the value's length once
    /// its last byte is in, `None` while more are needed.
    fn find(&mut self, value: &[u8]) -> Option<usize> {
        let from = self.scanned.min(value.len());
        self.scan(&value[from..]).map(|n| from + n)
    }

    /// Scans `more`, the value's bytes that follow those already scanned: how many of them
    /// belong to the value once its last byte is among them (for a number or literal, up to
    /// the delimiter that ends it), `None` while more are needed.
    fn scan(&mut self, more: &[u8]) -> Option<usize> {
        let mut i = 0;
        while i < more.len() {
            let b = more[i];
            let first = self.scanned == 0;
            self.scanned += 1;
            i += 1;
            if first {
                match b {
                    b'{' | b'[' => self.depth = 1,
                    b'"' => self.in_string = true,
                    _ => self.scalar = true,
                }
                continue;
            }
            if self.scalar {
                if matches!(b, b',' | b'}' | b']') || b.is_ascii_whitespace() {
                    return Some(i - 1);
                }
                continue;
            }
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_string = false;
                    if self.depth == 0 {
                        return Some(i);
                    }
                } else {
                    // Most of an object's bytes are string content: jump to its next quote or
                    // backslash (or past the bytes in so far).
                    let rest = &more[i..];
                    let skip = memchr::memchr2(b'"', b'\\', rest).unwrap_or(rest.len());
                    i += skip;
                    self.scanned += skip;
                }
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => {
                    self.depth -= 1;
                    if self.depth == 0 {
                        return Some(i);
                    }
                }
                _ => {}
            }
        }
        None
    }
}

/// The bytes one call of [`ListDecoder::advance`] reads: part of the body, and how much of it
/// is known to be UTF-8.
struct Input<'a> {
    bytes: &'a [u8],
    /// `bytes` up to where they are valid UTF-8 (all of them but for a character cut by the
    /// chunk's end or a malformed one): the items inside it are parsed as `str`, which spares
    /// serde checking every string it reads.
    text: &'a str,
    /// Bytes consumed.
    pos: usize,
}

impl<'a> Input<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        let text = match std::str::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default(),
        };
        Self { bytes, text, pos: 0 }
    }

    fn rest(&self) -> &'a [u8] {
        &self.bytes[self.pos..]
    }
}

/// What became of a list item that [`ListDecoder`] tried to decode where it starts.
enum Item<K> {
    /// Decoded from the first this many bytes.
    Decoded(Arc<K>, usize),
    /// Its last byte is not in yet.
    Incomplete,
}

/// Decodes a list response from its chunks, in the order they arrive; see the module docs.
///
/// Each item is decoded in one pass where it lies: in the chunk itself, parsed as `str` when
/// the chunk is UTF-8. Only an item cut by the chunk's end goes another way: its bytes so far are
/// scanned for its end ([`ValueEnd`]) and kept, the next chunks' bytes are scanned on until its
/// end is in, and then those bytes alone are appended and the item decoded from the buffer.
/// So a chunk's bytes are copied only for the item it cuts, and an item is parsed once
/// (twice, in part, for the one a chunk cuts) where it used to be scanned and then parsed.
pub(crate) struct ListDecoder<K> {
    /// The bytes of a value cut by the end of a chunk (all of them scanned by `value`), and
    /// nothing else.
    buf: BytesMut,
    /// Body offset of the next byte to read, for error messages.
    offset: u64,
    at: At,
    member: Member,
    value: ValueEnd,
    /// Skip `metadata.managedFields` of each item.
    strip: bool,
    items: Vec<Arc<K>>,
    metadata: RawListMeta,
    /// The top-level `kind`, when it is a string.
    kind: Option<String>,
    /// The `Status` members seen, by name.
    status_fields: serde_json::Map<String, serde_json::Value>,
    /// The name of the member being read.
    member_name: String,
    /// Body bytes copied into `buf` so far.
    #[cfg(test)]
    copied: usize,
    _k: PhantomData<fn() -> K>,
}

impl<K: DeserializeOwned> ListDecoder<K> {
    /// A decoder that skips each item's managed fields when `strip` is set.
    pub(crate) fn new(strip: bool) -> Self {
        Self {
            buf: BytesMut::new(),
            offset: 0,
            at: At::Start,
            member: Member::Other,
            value: ValueEnd::default(),
            strip,
            items: Vec::new(),
            metadata: RawListMeta::default(),
            kind: None,
            status_fields: serde_json::Map::new(),
            member_name: String::new(),
            #[cfg(test)]
            copied: 0,
            _k: PhantomData,
        }
    }

    /// Decodes a whole body given as `chunks`, in order (tests, fuzzing and tools; a list
    /// request pushes chunks as they arrive).
    #[cfg(any(test, fuzzing))]
    pub(crate) fn decode_chunks<'a>(
        chunks: impl IntoIterator<Item = &'a [u8]>,
        strip: bool,
    ) -> Result<ListPage<K>> {
        let mut decoder = Self::new(strip);
        for chunk in chunks {
            decoder.push(chunk)?;
        }
        decoder.finish()
    }

    /// Takes the next chunk of the body and decodes every item it completes.
    pub(crate) fn push(&mut self, mut chunk: &[u8]) -> Result<()> {
        if !self.buf.is_empty() {
            // A value cut by the last chunk: scan on for its end, and append only its bytes
            // (and the byte after them, which ends a number or literal).
            let Some(end) = self.value.scan(chunk) else {
                self.keep(chunk);
                return Ok(());
            };
            let take = (end + 1).min(chunk.len());
            self.keep(&chunk[..take]);
            chunk = &chunk[take..];
            self.value = ValueEnd::default();
            self.advance_buffered()?;
            if !self.buf.is_empty() {
                // The byte after the value began another that is not whole: go on from the
                // buffer (never the case in a well-formed list: a value is followed by a
                // delimiter or whitespace).
                self.keep(chunk);
                return self.advance_buffered();
            }
        }
        let mut input = Input::new(chunk);
        self.advance(&mut input)?;
        self.keep(input.rest());
        Ok(())
    }

    /// Appends body bytes to the buffer.
    fn keep(&mut self, bytes: &[u8]) {
        #[cfg(test)]
        {
            self.copied += bytes.len();
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The page, once the whole body has been pushed.
    pub(crate) fn finish(mut self) -> Result<ListPage<K>> {
        self.advance_buffered()?;
        if self.at != At::End {
            return Err(self.error("the list ended early"));
        }
        if self.kind.as_deref() == Some("Status") {
            // An error answered with a success code (as some aggregated API servers and proxies
            // do): client-go's `Result.Into` turns any `Status` that is not a success into the
            // API error it describes, and so do we; never an empty list.
            let status: Status = serde_json::from_value(serde_json::Value::Object(self.status_fields))
                .map_err(|e| {
                    ReflectorError::decode(describe_json_error("a Status in place of a list", &e))
                })?;
            if status.status != Some(StatusSummary::Success) {
                return Err(ReflectorError::from_status(status, None, None));
            }
        }
        Ok(ListPage {
            items: self.items,
            shard_info: self.metadata.shard_info(),
            resource_version: self.metadata.resource_version.unwrap_or_default(),
            continue_token: self.metadata.continue_token.filter(|c| !c.is_empty()),
        })
    }

    /// Items decoded so far.
    #[cfg(test)]
    pub(crate) fn items_decoded(&self) -> usize {
        self.items.len()
    }

    /// Bytes held that are not decoded yet.
    #[cfg(test)]
    pub(crate) fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Body bytes copied into the decoder's buffer so far.
    #[cfg(test)]
    pub(crate) fn copied(&self) -> usize {
        self.copied
    }

    fn error(&self, what: &str) -> ReflectorError {
        ReflectorError::decode(format!("list: {what} at byte {}", self.offset))
    }

    /// Decodes what the buffer holds, keeping what is left of it.
    fn advance_buffered(&mut self) -> Result<()> {
        let buf = std::mem::take(&mut self.buf);
        let mut input = Input::new(&buf);
        let advanced = self.advance(&mut input);
        let consumed = input.pos;
        self.buf = buf;
        self.buf.advance(consumed);
        advanced
    }

    fn consume(&mut self, input: &mut Input<'_>, n: usize) {
        input.pos += n;
        self.offset += n as u64;
    }

    /// Skips whitespace; the next byte, if one is in.
    fn peek(&mut self, input: &mut Input<'_>) -> Option<u8> {
        let ws = input.rest().iter().take_while(|b| b.is_ascii_whitespace()).count();
        self.consume(input, ws);
        input.rest().first().copied()
    }

    /// Expects `want` (after whitespace) and consumes it; `Ok(false)` if no byte is in yet.
    fn expect(&mut self, input: &mut Input<'_>, want: u8, what: &str) -> Result<bool> {
        match self.peek(input) {
            None => Ok(false),
            Some(b) if b == want => {
                self.consume(input, 1);
                Ok(true)
            }
            Some(_) => Err(self.error(what)),
        }
    }

    /// The length of the value at the start of the input once all of it is in.
    fn value_end(&mut self, input: &Input<'_>) -> Option<usize> {
        let end = self.value.find(input.rest());
        if end.is_some() {
            self.value = ValueEnd::default();
        }
        end
    }

    /// Decodes the item at the start of the input in one pass, or finds that it is not whole
    /// yet (then the scan for its end has covered all of its bytes in).
    fn item(&mut self, input: &Input<'_>) -> Result<Item<K>> {
        fn one<'de, R: serde_json::de::Read<'de>, T: Deserialize<'de>, K>(
            de: serde_json::Deserializer<R>,
            into: impl FnOnce(T) -> K,
        ) -> std::result::Result<(Arc<K>, usize), serde_json::Error> {
            // A stream deserializer says how many bytes the value took (and that a number cut
            // by the end of the input is not whole); whatever follows is the state machine's.
            let mut stream = de.into_iter::<T>();
            match stream.next() {
                // Into its `Arc` at once: every move of a decoded object is a copy of its bytes
                // (hundreds for a ConfigMap), which the profile showed as `memcpy`.
                Some(Ok(v)) => Ok((Arc::new(into(v)), stream.byte_offset())),
                Some(Err(e)) => Err(e),
                // Only whitespace, which `peek` has skipped: never the case.
                None => Err(serde::de::Error::custom("no value")),
            }
        }
        fn decode<'de, R: serde_json::de::Read<'de>, K: DeserializeOwned>(
            de: serde_json::Deserializer<R>,
            strip: bool,
        ) -> std::result::Result<(Arc<K>, usize), serde_json::Error> {
            if strip { one(de, |s: Stripped<K>| s.0) } else { one(de, |k: K| k) }
        }
        let bytes = input.rest();
        let text = input.text.get(input.pos..).filter(|t| !t.is_empty());
        // Serde's answer is final only if it did not depend on where the input ended: a number
        // that runs to the end of what serde read may go on in the next chunk (an object, array
        // or string ends at its own closing byte), and an error at the end (EOF, or a number
        // whose exponent overflows, read up to the end) may be another error, or none, once
        // more bytes are in.
        let scalar = !matches!(bytes.first(), Some(b'{' | b'[' | b'"'));
        let settled =
            |decoded: &std::result::Result<(Arc<K>, usize), serde_json::Error>, read: &[u8]| match decoded {
                Ok((_, n)) => !(scalar && *n == read.len()),
                Err(e) => !e.is_eof() && !error_at_end(e, read),
            };
        let mut read = bytes;
        let mut decoded = match text {
            Some(text) => {
                read = text.as_bytes();
                decode::<_, K>(serde_json::Deserializer::from_str(text), self.strip)
            }
            None => decode::<_, K>(serde_json::Deserializer::from_slice(bytes), self.strip),
        };
        if read.len() < bytes.len() && !settled(&decoded, read) {
            // The text ended before the bytes (a character cut by the chunk's end, or bytes
            // that are no UTF-8, which serde still accepts in a value it ignores).
            read = bytes;
            decoded = decode::<_, K>(serde_json::Deserializer::from_slice(bytes), self.strip);
        }
        if !settled(&decoded, read) {
            let Some(end) = self.value.find(bytes) else { return Ok(Item::Incomplete) };
            // The item's end is in: decode it with the byte after it, as it is decoded when a
            // chunk cut it (`push`), so the answer never depends on where the body was cut.
            decoded = decode::<_, K>(
                serde_json::Deserializer::from_slice(&bytes[..(end + 1).min(bytes.len())]),
                self.strip,
            );
        }
        match decoded {
            Ok((obj, n)) => Ok(Item::Decoded(obj, n)),
            Err(e) => Err(ReflectorError::decode(describe_json_error("list item", &e))),
        }
    }

    fn advance(&mut self, input: &mut Input<'_>) -> Result<()> {
        loop {
            match self.at {
                At::Start => {
                    if !self.expect(input, b'{', "expected an object")? {
                        return Ok(());
                    }
                    self.at = At::FirstKey;
                }
                At::FirstKey | At::Key => match self.peek(input) {
                    None => return Ok(()),
                    Some(b'}') if self.at == At::FirstKey => {
                        self.consume(input, 1);
                        self.at = At::End;
                    }
                    Some(b'"') => {
                        let Some(n) = self.value_end(input) else { return Ok(()) };
                        let key: String = serde_json::from_slice(&input.rest()[..n]).map_err(|e| {
                            ReflectorError::decode(describe_json_error("list member name", &e))
                        })?;
                        self.member = match key.as_str() {
                            "items" => Member::Items,
                            "metadata" => Member::Metadata,
                            "kind" => Member::Kind,
                            "status" | "code" | "reason" | "message" | "details" => Member::StatusField,
                            _ => Member::Other,
                        };
                        self.member_name = key;
                        self.consume(input, n);
                        self.at = At::Colon;
                    }
                    Some(_) => return Err(self.error("expected a member name")),
                },
                At::Colon => {
                    if !self.expect(input, b':', "expected ':'")? {
                        return Ok(());
                    }
                    self.at = At::Value;
                }
                At::Value => {
                    let Some(first) = self.peek(input) else { return Ok(()) };
                    if matches!(first, b',' | b'}' | b']' | b':') {
                        return Err(self.error("expected a value"));
                    }
                    if self.member == Member::Items && first == b'[' {
                        self.consume(input, 1);
                        self.items.clear();
                        self.at = At::FirstItem;
                        continue;
                    }
                    let Some(n) = self.value_end(input) else { return Ok(()) };
                    let value = &input.rest()[..n];
                    match self.member {
                        // `null` (anything else is not a list).
                        Member::Items => {
                            let _: Option<NoItems> = serde_json::from_slice(value)
                                .map_err(|e| ReflectorError::decode(describe_json_error("list items", &e)))?;
                            self.items.clear();
                        }
                        Member::Metadata => {
                            self.metadata = serde_json::from_slice::<Option<RawListMeta>>(value)
                                .map_err(|e| {
                                    ReflectorError::decode(describe_json_error("list metadata", &e))
                                })?
                                .unwrap_or_default();
                        }
                        Member::Kind => {
                            let kind = serde_json::from_slice::<serde_json::Value>(value)
                                .map_err(|e| ReflectorError::decode(describe_json_error("list kind", &e)))?;
                            self.kind = kind.as_str().map(str::to_owned);
                        }
                        Member::StatusField => {
                            let v = serde_json::from_slice::<serde_json::Value>(value).map_err(|e| {
                                ReflectorError::decode(describe_json_error("list member", &e))
                            })?;
                            self.status_fields.insert(std::mem::take(&mut self.member_name), v);
                        }
                        Member::Other => {
                            serde_json::from_slice::<IgnoredAny>(value).map_err(|e| {
                                ReflectorError::decode(describe_json_error("list member", &e))
                            })?;
                        }
                    }
                    self.consume(input, n);
                    self.at = At::AfterValue;
                }
                At::AfterValue | At::AfterItem => {
                    let (close, next, what) = if self.at == At::AfterValue {
                        (b'}', At::Key, "expected ',' or '}'")
                    } else {
                        (b']', At::Item, "expected ',' or ']'")
                    };
                    match self.peek(input) {
                        None => return Ok(()),
                        Some(b',') => {
                            self.consume(input, 1);
                            self.at = next;
                        }
                        Some(b) if b == close => {
                            self.consume(input, 1);
                            self.at = if self.at == At::AfterValue { At::End } else { At::AfterValue };
                        }
                        Some(_) => return Err(self.error(what)),
                    }
                }
                At::FirstItem | At::Item => {
                    let Some(first) = self.peek(input) else { return Ok(()) };
                    if first == b']' && self.at == At::FirstItem {
                        self.consume(input, 1);
                        self.at = At::AfterValue;
                        continue;
                    }
                    if matches!(first, b',' | b'}' | b']' | b':') {
                        return Err(self.error("expected a list item"));
                    }
                    match self.item(input)? {
                        Item::Decoded(obj, n) => {
                            // (A scan of it, if one began, is over.)
                            self.value = ValueEnd::default();
                            self.items.push(obj);
                            self.consume(input, n);
                            self.at = At::AfterItem;
                        }
                        Item::Incomplete => return Ok(()),
                    }
                }
                At::End => {
                    return match self.peek(input) {
                        None => Ok(()),
                        Some(_) => Err(self.error("trailing bytes after the list")),
                    };
                }
            }
        }
    }
}

/// The members of a list's `metadata` that a page keeps.
#[derive(Deserialize, Default)]
pub(crate) struct RawListMeta {
    #[serde(default, rename = "resourceVersion")]
    pub(crate) resource_version: Option<String>,
    #[serde(default, rename = "continue")]
    pub(crate) continue_token: Option<String>,
    /// `shardInfo` (KEP-5866), which k8s-openapi's `ListMeta` does not have yet: present when
    /// the server filtered by a shard selector.
    #[serde(default, rename = "shardInfo")]
    pub(crate) shard_info: Option<RawShardInfo>,
}

impl RawListMeta {
    /// `shardInfo.selector`; an empty string when `shardInfo` came without one (still proof
    /// that the server filtered).
    pub(crate) fn shard_info(&mut self) -> Option<String> {
        self.shard_info.take().map(|i| i.selector.unwrap_or_default())
    }
}

/// A list's `metadata.shardInfo`.
#[derive(Deserialize, Default)]
pub(crate) struct RawShardInfo {
    #[serde(default)]
    pub(crate) selector: Option<String>,
}

/// What `items` may be when it is not an array: only `null` decodes (to `None`).
enum NoItems {}

impl<'de> serde::Deserialize<'de> for NoItems {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = NoItems;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a list of objects or null")
            }
        }
        d.deserialize_any(V)
    }
}

/// The oracle of the [`ListDecoder`] tests and of the `list_decode` fuzz target: a list response
/// decoded by serde in one pass over the whole body (how lists were decoded before
/// [`ListDecoder`]).
#[cfg(any(test, fuzzing))]
pub(crate) mod oracle {
    use std::fmt;
    use std::marker::PhantomData;
    use std::sync::Arc;

    use serde::Deserialize;
    use serde::de::DeserializeOwned;

    use super::{RawListMeta, describe_json_error};
    use crate::error::{ReflectorError, Result};
    use crate::lister_watcher::ListPage;
    use crate::strip::Stripped;

    /// A list response: `W` is how each item is read (`K` itself, or [`Stripped<K>`]).
    #[derive(Deserialize)]
    #[serde(bound(deserialize = "W: DeserializeOwned + IntoObject<K>"))]
    struct RawList<K, W> {
        #[serde(default)]
        metadata: RawListMeta,
        #[serde(default = "ArcItems::default")]
        items: ArcItems<K, W>,
    }

    /// How a list item is read off the wire and what object it becomes.
    trait IntoObject<K> {
        fn into_object(self) -> K;
    }

    impl<K> IntoObject<K> for K {
        fn into_object(self) -> K {
            self
        }
    }

    impl<K> IntoObject<K> for Stripped<K> {
        fn into_object(self) -> K {
            self.0
        }
    }

    /// A list's `items` (`null` reads as none), each moved into its `Arc` as soon as it is decoded.
    struct ArcItems<K, W>(Vec<Arc<K>>, PhantomData<fn() -> W>);

    impl<K, W> Default for ArcItems<K, W> {
        fn default() -> Self {
            Self(Vec::new(), PhantomData)
        }
    }

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

    /// A list response decoded by serde in one pass over the whole body.
    pub(crate) fn decode_list_whole<K: DeserializeOwned>(body: &[u8], strip: bool) -> Result<ListPage<K>> {
        let describe = |e: serde_json::Error| ReflectorError::decode(describe_json_error("list", &e));
        let (mut metadata, items) = if strip {
            let raw: RawList<K, Stripped<K>> = serde_json::from_slice(body).map_err(describe)?;
            (raw.metadata, raw.items.0)
        } else {
            let raw: RawList<K, K> = serde_json::from_slice(body).map_err(describe)?;
            (raw.metadata, raw.items.0)
        };
        Ok(ListPage {
            items,
            shard_info: metadata.shard_info(),
            resource_version: metadata.resource_version.unwrap_or_default(),
            continue_token: metadata.continue_token.filter(|c| !c.is_empty()),
        })
    }
}

#[cfg(test)]
mod tests;
