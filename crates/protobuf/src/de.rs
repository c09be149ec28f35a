//! The serde `Deserializer` over protobuf bytes: a message is presented to the type being
//! decoded as the JSON object the JSON encoding would have given it (member names from the
//! schema, members JSON omits left out, inlined members flattened, the special types in their
//! JSON form), so k8s-openapi's own `Deserialize` impls build the object, with no intermediate
//! representation.

use base64::Engine as _;
use serde::de::value::BorrowedStrDeserializer;
use serde::de::{self, DeserializeOwned, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::forward_to_deserialize_any;

use crate::error::{Error, Wire};
use crate::generated::{MESSAGES, OBJECT_META};
use crate::message_type::MessageType;
use crate::schema::flags::{MAP, NULLABLE, OMIT_EMPTY, REPEATED};
use crate::schema::{Field, Kind, Message};
use crate::time::{go_duration, rfc3339};
use crate::wire::{FIXED64, LEN, Reader, VARINT, Value};

/// How deep messages may nest (each `Msg` field one level). Kubernetes' deepest built-in
/// types (a JSONSchemaProps-free Pod template in a CronJob) stay under 20; the bound keeps a
/// hostile message from exhausting the stack.
pub const MAX_DEPTH: u32 = 100;

/// How many `json:",inline"` levels a message may open inside one JSON object.
const MAX_INLINE: usize = 4;

/// ObjectMeta's field number of `managedFields`.
const MANAGED_FIELDS: u32 = 17;

/// Options of [`decode`].
///
/// # Examples
///
/// ```
/// use kcache_protobuf::DecodeOptions;
///
/// let opts = DecodeOptions::default().skip_managed_fields(true);
/// # let _ = opts;
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DecodeOptions {
    skip_managed_fields: bool,
}

impl DecodeOptions {
    /// Whether `metadata.managedFields` is skipped (never decoded, never allocated: objects
    /// arrive with `managed_fields: None`). Off by default.
    #[must_use]
    pub fn skip_managed_fields(mut self, skip: bool) -> Self {
        self.skip_managed_fields = skip;
        self
    }
}

/// Decodes `bytes`, a message of type `ty` (the `raw` of a `runtime.Unknown`), into `T`, which
/// must have the shape of the type's JSON form: a k8s-openapi type, or any serde type that reads
/// the members it needs.
///
/// # Errors
///
/// [`Error`] for malformed bytes (truncated, a bad varint or wire type, a string that is not
/// UTF-8, nesting past [`MAX_DEPTH`]) and for values `T` rejects.
///
/// # Examples
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache_protobuf::{DecodeOptions, MessageType, decode};
///
/// // metadata { name: "a" }, data { "k": "v" }
/// let bytes = [0x0a, 0x03, 0x0a, 0x01, b'a', 0x12, 0x06, 0x0a, 0x01, b'k', 0x12, 0x01, b'v'];
/// let ty = MessageType::for_kind("v1", "ConfigMap").unwrap();
/// let cm: ConfigMap = decode(ty, &bytes, DecodeOptions::default())?;
/// assert_eq!(cm.metadata.name.as_deref(), Some("a"));
/// assert_eq!(cm.data.unwrap()["k"], "v");
/// # Ok::<(), kcache_protobuf::Error>(())
/// ```
pub fn decode<T: DeserializeOwned>(ty: MessageType, bytes: &[u8], opts: DecodeOptions) -> Result<T, Error> {
    T::deserialize(MessageDe { msg: ty.0, buf: bytes, ctx: Ctx::new(opts) })
}

/// What every level of the decoding carries.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ctx {
    opts: DecodeOptions,
    depth: u32,
}

impl Ctx {
    /// The context of a top-level message.
    pub(crate) fn new(opts: DecodeOptions) -> Self {
        Self { opts, depth: 0 }
    }

    /// Whether ObjectMeta's `managedFields` is skipped.
    pub(crate) fn skips_managed_fields(self) -> bool {
        self.opts.skip_managed_fields
    }

    pub(crate) fn deeper(self) -> Result<Self, Error> {
        if self.depth >= MAX_DEPTH {
            return Err(Error::wire(Wire::Depth, 0));
        }
        Ok(Self { depth: self.depth + 1, ..self })
    }
}

/// The wire type a single value of `kind` is written with.
pub(crate) fn wire_of(kind: Kind) -> u8 {
    match kind {
        Kind::Bool | Kind::Int32 | Kind::Int64 | Kind::Uint32 | Kind::Uint64 => VARINT,
        Kind::Double => FIXED64,
        _ => LEN,
    }
}

/// Whether `kind` is a number that a repeated field may pack into one length-delimited value.
pub(crate) fn packable(kind: Kind) -> bool {
    wire_of(kind) != LEN
}

/// Whether `value` is the zero value JSON's `omitempty` leaves out.
pub(crate) fn is_zero(kind: Kind, value: Value<'_>) -> bool {
    match (kind, value) {
        (Kind::String | Kind::Bytes, Value::Len(b)) => b.is_empty(),
        (_, Value::Varint(0) | Value::Fixed64(0)) => true,
        _ => false,
    }
}

pub(crate) fn utf8(b: &[u8]) -> Result<&str, Error> {
    std::str::from_utf8(b).map_err(|e| Error::wire(Wire::Utf8, e.valid_up_to()))
}

/// A whole message.
struct MessageDe<'a> {
    msg: u16,
    buf: &'a [u8],
    ctx: Ctx,
}

impl<'de> de::Deserializer<'de> for MessageDe<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_map(MessageAccess::new(self.msg, self.buf, self.ctx.deeper()?))
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple tuple_struct map struct enum identifier
    }
}

/// One message level being read as a JSON object's members.
#[derive(Debug, Clone, Copy)]
struct Frame<'a> {
    msg: &'static Message,
    reader: Reader<'a>,
    /// Repeated and map fields already handed out whole (by field index), whose later
    /// occurrences are skipped.
    done: u128,
}

/// A key handed out, its value not yet.
#[derive(Debug, Clone, Copy)]
struct Pending<'a> {
    msg: &'static Message,
    field: &'static Field,
    value: Value<'a>,
    /// The frame's reader at this field's tag: where a repeated field's or a map's values are
    /// looked for.
    from: Reader<'a>,
}

/// A message as a JSON object: [`MapAccess`] over its fields, inlined messages flattened.
struct MessageAccess<'a> {
    frames: [Frame<'a>; MAX_INLINE + 1],
    len: usize,
    pending: Option<Pending<'a>>,
    ctx: Ctx,
}

impl<'a> MessageAccess<'a> {
    fn new(msg: u16, buf: &'a [u8], ctx: Ctx) -> Self {
        let frame = Frame { msg: &MESSAGES[usize::from(msg)], reader: Reader::new(buf), done: 0 };
        Self { frames: [frame; MAX_INLINE + 1], len: 1, pending: None, ctx }
    }

    /// The next field that is a JSON member, pushing inlined messages and skipping what JSON
    /// leaves out.
    fn next_member(&mut self) -> Result<Option<Pending<'a>>, Error> {
        loop {
            let depth = self.len - 1;
            let frame = &mut self.frames[depth];
            let from = frame.reader;
            let Some((number, value)) = frame.reader.field().map_err(|e| e.at(frame.msg.name, "?"))? else {
                if depth == 0 {
                    return Ok(None);
                }
                self.len -= 1;
                continue;
            };
            let msg = frame.msg;
            let Some(index) = msg.field(number) else { continue };
            let field = &msg.fields[index];
            let whole = field.has(REPEATED) || field.has(MAP);
            if whole {
                let bit = 1u128 << index;
                if frame.done & bit != 0 {
                    continue;
                }
                frame.done |= bit;
            }
            if self.ctx.opts.skip_managed_fields
                && number == MANAGED_FIELDS
                && std::ptr::eq(msg, &MESSAGES[usize::from(OBJECT_META)])
            {
                continue;
            }
            let wire = value.wire_type();
            let wire_ok = if field.has(REPEATED) && packable(field.kind) {
                wire == wire_of(field.kind) || wire == LEN
            } else if field.has(MAP) {
                wire == LEN
            } else {
                wire == wire_of(field.kind)
            };
            if !wire_ok {
                return Err(Error::wire(Wire::WireType, from.pos).at(msg.name, field.json));
            }
            if !whole {
                if field.has(OMIT_EMPTY) && !field.has(NULLABLE) && is_zero(field.kind, value) {
                    continue;
                }
                match (field.kind, value) {
                    // A zero Time is written as an empty message; its JSON is `null`.
                    (Kind::Time | Kind::MicroTime, Value::Len([])) => continue,
                    (Kind::Inline(m), Value::Len(b)) => {
                        if self.len > MAX_INLINE {
                            return Err(Error::wire(Wire::Depth, from.pos).at(msg.name, field.json));
                        }
                        self.frames[self.len] =
                            Frame { msg: &MESSAGES[usize::from(m)], reader: Reader::new(b), done: 0 };
                        self.len += 1;
                        continue;
                    }
                    _ => {}
                }
            }
            return Ok(Some(Pending { msg, field, value, from }));
        }
    }
}

impl<'de> MapAccess<'de> for MessageAccess<'de> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Error> {
        let Some(p) = self.next_member()? else { return Ok(None) };
        self.pending = Some(p);
        seed.deserialize(BorrowedStrDeserializer::new(p.field.json)).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let Some(p) = self.pending.take() else { return Err(Error::data("a value without its key")) };
        let ctx = self.ctx;
        let out = if p.field.has(MAP) || p.field.has(REPEATED) {
            seed.deserialize(RepeatedDe { field: p.field, from: p.from, ctx })
        } else {
            seed.deserialize(ValueDe { kind: p.field.kind, value: p.value, ctx })
        };
        out.map_err(|e| e.at(p.msg.name, p.field.json))
    }
}

/// A repeated or map field: every occurrence of its number in the rest of the message, a
/// sequence of its elements, or a map of its entries (`key = 1`, `value = 2`) when the field
/// is a map.
struct RepeatedDe<'a> {
    field: &'static Field,
    from: Reader<'a>,
    ctx: Ctx,
}

impl<'de> de::Deserializer<'de> for RepeatedDe<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let (field, reader, ctx) = (self.field, self.from, self.ctx);
        if field.has(MAP) {
            visitor.visit_map(Entries { field, reader, value: None, ctx })
        } else {
            visitor.visit_seq(Elements { field, reader, packed: None, ctx })
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_some(self)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct newtype_struct seq tuple tuple_struct map struct enum identifier
    }
}

struct Elements<'a> {
    field: &'static Field,
    reader: Reader<'a>,
    /// Inside a packed run of numbers.
    packed: Option<Reader<'a>>,
    ctx: Ctx,
}

impl<'de> SeqAccess<'de> for Elements<'de> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, Error> {
        let kind = self.field.kind;
        loop {
            if let Some(packed) = &mut self.packed {
                if !packed.at_end() {
                    let value = packed.value(wire_of(kind))?;
                    return seed.deserialize(ValueDe { kind, value, ctx: self.ctx }).map(Some);
                }
                self.packed = None;
            }
            let at = self.reader.pos;
            let Some((number, value)) = self.reader.field()? else { return Ok(None) };
            if number != self.field.number {
                continue;
            }
            match value {
                Value::Len(b) if packable(kind) => self.packed = Some(Reader::new(b)),
                v if v.wire_type() == wire_of(kind) => {
                    return seed.deserialize(ValueDe { kind, value, ctx: self.ctx }).map(Some);
                }
                _ => return Err(Error::wire(Wire::WireType, at)),
            }
        }
    }
}

struct Entries<'a> {
    field: &'static Field,
    reader: Reader<'a>,
    value: Option<Value<'a>>,
    ctx: Ctx,
}

impl<'de> MapAccess<'de> for Entries<'de> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Error> {
        loop {
            let Some((number, entry)) = self.reader.field()? else { return Ok(None) };
            if number != self.field.number {
                continue;
            }
            let Value::Len(entry) = entry else { return Err(Error::wire(Wire::WireType, self.reader.pos)) };
            // Absent members are the type's default, as protobuf says.
            let mut key: &[u8] = &[];
            let mut value = None;
            let mut r = Reader::new(entry);
            while let Some((n, v)) = r.field()? {
                match (n, v) {
                    (1, Value::Len(k)) => key = k,
                    (2, v) if v.wire_type() == wire_of(self.field.kind) => value = Some(v),
                    (1 | 2, _) => return Err(Error::wire(Wire::WireType, r.pos)),
                    _ => {}
                }
            }
            self.value = Some(value.unwrap_or(if wire_of(self.field.kind) == LEN {
                Value::Len(&[])
            } else {
                Value::Varint(0)
            }));
            return seed.deserialize(BorrowedStrDeserializer::new(utf8(key)?)).map(Some);
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let Some(value) = self.value.take() else { return Err(Error::data("a value without its key")) };
        seed.deserialize(ValueDe { kind: self.field.kind, value, ctx: self.ctx })
    }
}

/// One value of a field.
pub(crate) struct ValueDe<'a> {
    pub(crate) kind: Kind,
    pub(crate) value: Value<'a>,
    pub(crate) ctx: Ctx,
}

impl<'a> ValueDe<'a> {
    fn bytes(&self) -> &'a [u8] {
        match self.value {
            Value::Len(b) => b,
            _ => &[],
        }
    }

    fn number(&self) -> u64 {
        match self.value {
            Value::Varint(v) | Value::Fixed64(v) => v,
            Value::Fixed32(v) => u64::from(v),
            Value::Len(_) => 0,
        }
    }
}

/// The fields of a small special message (Time, IntOrString, ...): numbers `1..=3`, last
/// occurrence wins, as protobuf says.
fn small_fields(b: &[u8]) -> Result<[Option<Value<'_>>; 3], Error> {
    let mut out = [None; 3];
    let mut r = Reader::new(b);
    while let Some((n, v)) = r.field()? {
        if let Some(slot) = out.get_mut((n as usize).wrapping_sub(1)) {
            *slot = Some(v);
        }
    }
    Ok(out)
}

/// A Time's or MicroTime's message: its seconds, and for a MicroTime its microseconds (Time is
/// written to the second: Go's Time.Unmarshal drops the nanoseconds).
pub(crate) fn time_fields(kind: Kind, b: &[u8]) -> Result<(i64, Option<u32>), Error> {
    let [seconds, nanos, _] = small_fields(b)?;
    let seconds = as_int(seconds)?;
    let micros = match kind {
        Kind::MicroTime => Some(((as_int(nanos)? as i32).clamp(0, 999_999_999) / 1000) as u32),
        _ => None,
    };
    Ok((seconds, micros))
}

fn as_int(v: Option<Value<'_>>) -> Result<i64, Error> {
    match v {
        None => Ok(0),
        Some(Value::Varint(n)) => Ok(n as i64),
        Some(_) => Err(Error::wire(Wire::WireType, 0)),
    }
}

fn as_bytes(v: Option<Value<'_>>) -> Result<&[u8], Error> {
    match v {
        None => Ok(&[]),
        Some(Value::Len(b)) => Ok(b),
        Some(_) => Err(Error::wire(Wire::WireType, 0)),
    }
}

/// Hands the JSON in `raw` (a RawExtension's or FieldsV1's bytes) to `visitor`.
fn embedded_json<'de, V: Visitor<'de>>(raw: &'de [u8], visitor: V) -> Result<V::Value, Error> {
    if raw.is_empty() {
        return visitor.visit_unit();
    }
    let mut de = serde_json::Deserializer::from_slice(raw);
    let out =
        de::Deserializer::deserialize_any(&mut de, visitor).map_err(|_| Error::data("embedded JSON"))?;
    de.end().map_err(|_| Error::data("embedded JSON"))?;
    Ok(out)
}

impl<'de> de::Deserializer<'de> for ValueDe<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.kind {
            Kind::String => visitor.visit_borrowed_str(utf8(self.bytes())?),
            Kind::Bool => visitor.visit_bool(self.number() != 0),
            // An int32 is sign-extended to 64 bits on the wire; a value out of range is
            // truncated, as Go's generated code does.
            Kind::Int32 => visitor.visit_i32(self.number() as i32),
            Kind::Int64 => visitor.visit_i64(self.number() as i64),
            Kind::Uint32 => visitor.visit_u32(self.number() as u32),
            Kind::Uint64 => visitor.visit_u64(self.number()),
            Kind::Double => visitor.visit_f64(f64::from_bits(self.number())),
            // JSON writes bytes in base64, which is what k8s-openapi's ByteString reads.
            Kind::Bytes => {
                visitor.visit_string(base64::engine::general_purpose::STANDARD.encode(self.bytes()))
            }
            Kind::Msg(m) | Kind::Inline(m) => {
                visitor.visit_map(MessageAccess::new(m, self.bytes(), self.ctx.deeper()?))
            }
            Kind::StringList => visitor.visit_seq(Elements {
                field: &STRING_ITEMS,
                reader: Reader::new(self.bytes()),
                packed: None,
                ctx: self.ctx,
            }),
            Kind::Time | Kind::MicroTime => {
                let (seconds, micros) = time_fields(self.kind, self.bytes())?;
                match rfc3339(seconds, micros) {
                    Some(s) => visitor.visit_str(s.as_str()),
                    None => Err(Error::data("time out of range")),
                }
            }
            Kind::Duration => {
                let [nanos, _, _] = small_fields(self.bytes())?;
                visitor.visit_string(go_duration(as_int(nanos)?))
            }
            Kind::IntOrString => {
                let [ty, int, string] = small_fields(self.bytes())?;
                if as_int(ty)? == 1 {
                    visitor.visit_borrowed_str(utf8(as_bytes(string)?)?)
                } else {
                    visitor.visit_i32(as_int(int)? as i32)
                }
            }
            Kind::Quantity => {
                let [string, _, _] = small_fields(self.bytes())?;
                visitor.visit_borrowed_str(utf8(as_bytes(string)?)?)
            }
            Kind::RawExtension | Kind::FieldsV1 => {
                let [raw, _, _] = small_fields(self.bytes())?;
                embedded_json(as_bytes(raw)?, visitor)
            }
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.kind {
            Kind::Bytes => visitor.visit_borrowed_bytes(self.bytes()),
            _ => self.deserialize_any(visitor),
        }
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_bytes(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    /// A string as a unit variant, as serde_json reads a JSON string into an enum (kube's
    /// `StatusSummary`, say).
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.kind {
            Kind::String => {
                let s: BorrowedStrDeserializer<'de, Error> =
                    BorrowedStrDeserializer::new(utf8(self.bytes())?);
                visitor.visit_enum(s)
            }
            _ => self.deserialize_any(visitor),
        }
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        unit unit_struct seq tuple tuple_struct map struct identifier
    }
}

/// The one field of a [`Kind::StringList`] message.
static STRING_ITEMS: Field = Field { number: 1, json: "items", kind: Kind::String, flags: REPEATED };

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::put_bytes;

    /// scheduling/v1alpha3's CompositePodGroupTemplate holds itself (field 9), so the schema does
    /// not bound how deep a message nests: [`MAX_DEPTH`] does.
    #[test]
    fn nesting_deeper_than_max_depth_is_refused() {
        let i =
            MESSAGES.iter().position(|m| m.name == "scheduling/v1alpha3.CompositePodGroupTemplate").unwrap();
        let ty = MessageType(i as u16);
        let nested = |levels: u32| {
            let mut msg = Vec::new();
            for _ in 0..levels {
                let mut outer = Vec::new();
                put_bytes(&mut outer, 9, &msg);
                msg = outer;
            }
            msg
        };
        assert!(decode::<serde_json::Value>(ty, &nested(MAX_DEPTH - 2), DecodeOptions::default()).is_ok());
        let err =
            decode::<serde_json::Value>(ty, &nested(MAX_DEPTH + 5), DecodeOptions::default()).unwrap_err();
        assert_eq!(err.wire_class(), Some(Wire::Depth));
        // A hostile depth far beyond the limit is refused the same way, not by overflowing the stack.
        assert!(decode::<serde_json::Value>(ty, &nested(100_000), DecodeOptions::default()).is_err());
    }

    /// Any serde type that reads members works, `serde_json::Value` included (a message as an
    /// object, with JSON's omissions).
    #[test]
    fn decodes_into_json_values() {
        let ty = MessageType::for_kind("v1", "ConfigMap").unwrap();
        // metadata { name: "a", generateName: "" (omitted in JSON) }, immutable: false (a pointer: kept)
        let bytes = [0x0a, 0x05, 0x0a, 0x01, b'a', 0x12, 0x00, 0x20, 0x00];
        let v: serde_json::Value = decode(ty, &bytes, DecodeOptions::default()).unwrap();
        assert_eq!(v, serde_json::json!({"metadata": {"name": "a"}, "immutable": false}));
    }
}
