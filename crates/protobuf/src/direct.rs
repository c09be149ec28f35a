//! [`Decoder`]: messages decoded into k8s-openapi's structs by field number, as Go's generated
//! `Unmarshal` does, with no serde visitor matching member names between the bytes and the
//! struct.
//!
//! The decoders are generated (`generated.rs`, `cargo xtask protobuf-direct`) for every message
//! whose k8s-openapi type is a struct with k8s-openapi's plain generated `Deserialize`. Each
//! field is written with the same rules as the serde path ([`decode`](crate::decode)) applies
//! before it hands a member to that `Deserialize`: the wire type checked, a zero value JSON
//! leaves out (`omitempty`) left out, a zero Time left `None`, repeated fields and maps
//! gathered, inlined messages flattened, `managedFields` skipped on request. Leaf values
//! (strings, numbers, Time, Quantity, ...) and the messages without a generated decoder are
//! read by the serde path itself ([`ValueDe`]), so both decoders give the same value; the test
//! `direct_and_serde_decoders_agree` holds every generated type to that.

use std::any::{Any, TypeId};
use std::collections::BTreeMap;
use std::marker::PhantomData;

use serde::de::DeserializeOwned;

use crate::de::{Ctx, DecodeOptions, ValueDe, is_zero, packable, time_fields, utf8, wire_of};
use crate::error::{Error, Wire};
use crate::message_type::MessageType;
use crate::schema::flags::{NULLABLE, OMIT_EMPTY};
use crate::schema::{Field, Kind, Message};
use crate::wire::{LEN, Reader, Value};

#[cfg(feature = "k8s-openapi")]
k8s_openapi::k8s_if_1_37! {
    // The generated decoders name k8s-openapi's v1_37 types and fields: with another version
    // selected, every type is decoded by the serde path.
    mod generated;

    fn lookup(msg: u16) -> Option<Erased> {
        generated::erased(msg)
    }
}

#[cfg(feature = "k8s-openapi")]
k8s_openapi::k8s_if_le_1_36! {
    fn lookup(_msg: u16) -> Option<Erased> {
        None
    }
}

#[cfg(not(feature = "k8s-openapi"))]
fn lookup(_msg: u16) -> Option<Erased> {
    None
}

/// A type with a generated decoder: its fields are written from a message's bytes.
pub(crate) trait Direct: Default {
    /// Writes the fields present in `buf` into `self`.
    fn merge(&mut self, buf: &[u8], cx: Ctx) -> Result<(), Error>;
}

/// A generated decoder, its type erased: the `TypeId` of the type it writes, and a function
/// that decodes into an `Option` of that type.
pub(crate) type Erased = (TypeId, DecodeFn);

/// A generated decoder writing into an `Option` of its type, behind `dyn Any`.
pub(crate) type DecodeFn = fn(&[u8], Ctx, &mut dyn Any) -> Result<(), Error>;

/// `T`'s generated decoder, erased.
#[allow(dead_code)]
pub(crate) fn erase<T: Direct + 'static>() -> Erased {
    (TypeId::of::<T>(), decode_into::<T>)
}

fn decode_into<T: Direct + 'static>(buf: &[u8], cx: Ctx, out: &mut dyn Any) -> Result<(), Error> {
    let value = direct::<T>(Kind::Msg(0), Value::Len(buf), cx)?;
    match out.downcast_mut::<Option<T>>() {
        Some(slot) => {
            *slot = Some(value);
            Ok(())
        }
        None => Err(Error::data("decoder of another type")),
    }
}

/// Decodes the messages of one type into `T`: with the decoder generated for `T` when `T` is
/// the message's k8s-openapi type (k8s-openapi built for Kubernetes 1.37, the version of the
/// schema), else with the serde path ([`decode`](crate::decode)). The two give the same value,
/// and each turns malformed bytes into an [`Error`]; the generated decoder costs about half the
/// instructions per object.
///
/// Made once per stream (it looks the type up), then used for every object.
///
/// # Examples
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache_protobuf::{DecodeOptions, Decoder, MessageType};
///
/// // metadata { name: "a" }, data { "k": "v" }
/// let bytes = [0x0a, 0x03, 0x0a, 0x01, b'a', 0x12, 0x06, 0x0a, 0x01, b'k', 0x12, 0x01, b'v'];
/// let ty = MessageType::for_kind("v1", "ConfigMap").unwrap();
/// let decoder = Decoder::<ConfigMap>::new(ty);
/// assert!(decoder.is_generated());
/// let cm = decoder.decode(&bytes, DecodeOptions::default())?;
/// assert_eq!(cm.metadata.name.as_deref(), Some("a"));
/// assert_eq!(cm.data.unwrap()["k"], "v");
///
/// // Any other serde type is decoded by the serde path.
/// let json = Decoder::<serde_json::Value>::new(ty).decode(&bytes, DecodeOptions::default())?;
/// assert_eq!(json["data"]["k"], "v");
/// # Ok::<(), kcache_protobuf::Error>(())
/// ```
pub struct Decoder<T> {
    ty: MessageType,
    generated: Option<DecodeFn>,
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for Decoder<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Decoder<T> {}

impl<T> std::fmt::Debug for Decoder<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoder").field("ty", &self.ty).field("generated", &self.generated.is_some()).finish()
    }
}

impl<T: DeserializeOwned + 'static> Decoder<T> {
    /// The decoder of messages of type `ty` into `T`.
    pub fn new(ty: MessageType) -> Self {
        let generated = lookup(ty.0).filter(|(id, _)| *id == TypeId::of::<T>()).map(|(_, f)| f);
        Self { ty, generated, _t: PhantomData }
    }

    /// The decoder of messages of type `ty` into `T` by the serde path only, for comparison.
    pub fn serde_only(ty: MessageType) -> Self {
        Self { ty, generated: None, _t: PhantomData }
    }

    /// Whether the generated decoder is used.
    pub fn is_generated(&self) -> bool {
        self.generated.is_some()
    }

    /// The message type decoded.
    pub fn message_type(&self) -> MessageType {
        self.ty
    }

    /// Decodes `bytes`, a message of this decoder's type.
    ///
    /// # Errors
    ///
    /// As [`decode`](crate::decode): [`Error`] for malformed bytes and for values `T` rejects.
    pub fn decode(&self, bytes: &[u8], opts: DecodeOptions) -> Result<T, Error> {
        match self.generated {
            Some(f) => {
                let mut slot: Option<T> = None;
                f(bytes, Ctx::new(opts), &mut slot)?;
                slot.ok_or_else(|| Error::data("decoder of another type"))
            }
            None => crate::decode(self.ty, bytes, opts),
        }
    }
}

// ---- What the generated code calls ----

/// The next field of message `m`: where its tag was, its number, its value.
#[inline]
pub(crate) fn field<'a>(
    r: &mut Reader<'a>,
    m: &'static Message,
) -> Result<Option<(usize, u32, Value<'a>)>, Error> {
    let at = r.pos;
    match r.field() {
        Ok(Some((n, v))) => Ok(Some((at, n, v))),
        Ok(None) => Ok(None),
        Err(e) => Err(e.at(m.name, "?")),
    }
}

/// A message read by its generated decoder.
#[inline]
pub(crate) fn direct<T: Direct>(_kind: Kind, v: Value<'_>, cx: Ctx) -> Result<T, Error> {
    let mut t = T::default();
    if let Value::Len(b) = v {
        t.merge(b, cx.deeper()?)?;
    } else {
        cx.deeper()?;
    }
    Ok(t)
}

/// A value read by the serde path.
#[inline]
pub(crate) fn serde<T: DeserializeOwned>(kind: Kind, v: Value<'_>, cx: Ctx) -> Result<T, Error> {
    T::deserialize(ValueDe { kind, value: v, ctx: cx })
}

/// A string, as the serde path hands it to `String`'s `Deserialize`.
#[inline]
pub(crate) fn string(_kind: Kind, v: Value<'_>, _cx: Ctx) -> Result<String, Error> {
    match v {
        Value::Len(b) => utf8(b).map(String::from),
        _ => Ok(String::new()),
    }
}

/// 0000-01-01T00:00:00Z in seconds since the Unix epoch.
const FIRST_RFC3339_SECOND: i64 = -62_167_219_200;
/// 9999-12-31T23:59:59Z in seconds since the Unix epoch.
const LAST_RFC3339_SECOND: i64 = 253_402_300_799;

/// The seconds (and, for a MicroTime, microseconds) of a Time message: what the serde path's
/// RFC 3339 text says, `None` where that text cannot be written (outside years 0 to 9999).
fn time_parts(kind: Kind, v: Value<'_>) -> Result<(i64, i32), Error> {
    let b = match v {
        Value::Len(b) => b,
        _ => &[],
    };
    let (seconds, micros) = time_fields(kind, b)?;
    // The range the serde path's text can be written in: 0000-01-01T00:00:00Z to
    // 9999-12-31T23:59:59Z (`rfc3339` refuses the rest; the test
    // `time_range_is_rfc3339s` holds the two to the same bounds).
    if !(FIRST_RFC3339_SECOND..=LAST_RFC3339_SECOND).contains(&seconds) {
        return Err(Error::data("time out of range"));
    }
    Ok((seconds, micros.map_or(0, |us| (us % 1_000_000) as i32 * 1000)))
}

/// metav1.Time, built from its seconds where the serde path writes and parses RFC 3339 text.
#[cfg(feature = "k8s-openapi")]
#[allow(dead_code)]
#[inline]
pub(crate) fn time(
    kind: Kind,
    v: Value<'_>,
    _cx: Ctx,
) -> Result<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time, Error> {
    let (seconds, nanos) = time_parts(kind, v)?;
    k8s_openapi::jiff::Timestamp::new(seconds, nanos)
        .map(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time)
        .map_err(|_| Error::data("time out of range"))
}

/// metav1.MicroTime, as [`time`].
#[cfg(feature = "k8s-openapi")]
#[allow(dead_code)]
#[inline]
pub(crate) fn micro_time(
    kind: Kind,
    v: Value<'_>,
    _cx: Ctx,
) -> Result<k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime, Error> {
    let (seconds, nanos) = time_parts(kind, v)?;
    k8s_openapi::jiff::Timestamp::new(seconds, nanos)
        .map(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime)
        .map_err(|_| Error::data("time out of range"))
}

/// Whether one occurrence of a field that is neither repeated nor a map is a member JSON would
/// have: its wire type checked, a zero value `omitempty` leaves out and an empty Time left out.
#[inline]
fn single(m: &'static Message, f: &'static Field, v: Value<'_>, at: usize) -> Result<bool, Error> {
    if v.wire_type() != wire_of(f.kind) {
        return Err(Error::wire(Wire::WireType, at).at(m.name, f.json));
    }
    if f.flags & OMIT_EMPTY != 0 && f.flags & NULLABLE == 0 && is_zero(f.kind, v) {
        return Ok(false);
    }
    // A zero Time is written as an empty message; its JSON is `null`.
    Ok(!matches!((f.kind, v), (Kind::Time | Kind::MicroTime, Value::Len([]))))
}

/// An inlined message's bytes, if present.
#[inline]
pub(crate) fn inline<'a>(
    m: &'static Message,
    f: &'static Field,
    v: Value<'a>,
    at: usize,
) -> Result<Option<&'a [u8]>, Error> {
    if !single(m, f, v, at)? {
        return Ok(None);
    }
    Ok(match v {
        Value::Len(b) => Some(b),
        _ => None,
    })
}

/// A field the Rust type does not have: its wire type checked, its value ignored.
#[allow(dead_code)]
#[inline]
pub(crate) fn skip(m: &'static Message, f: &'static Field, v: Value<'_>, at: usize) -> Result<(), Error> {
    if f.flags & (crate::schema::flags::REPEATED | crate::schema::flags::MAP) != 0 {
        let ok = if f.flags & crate::schema::flags::MAP != 0 {
            v.wire_type() == LEN
        } else {
            v.wire_type() == wire_of(f.kind) || (packable(f.kind) && v.wire_type() == LEN)
        };
        if !ok {
            return Err(Error::wire(Wire::WireType, at).at(m.name, f.json));
        }
        return Ok(());
    }
    single(m, f, v, at).map(|_| ())
}

/// `T`: set from each occurrence.
#[inline]
pub(crate) fn req<'a, T>(
    slot: &mut T,
    m: &'static Message,
    f: &'static Field,
    v: Value<'a>,
    at: usize,
    cx: Ctx,
    read: impl Fn(Kind, Value<'a>, Ctx) -> Result<T, Error>,
) -> Result<(), Error> {
    if single(m, f, v, at)? {
        *slot = read(f.kind, v, cx).map_err(|e| e.at(m.name, f.json))?;
    }
    Ok(())
}

/// `Option<T>`: set from each occurrence.
#[inline]
pub(crate) fn opt<'a, T>(
    slot: &mut Option<T>,
    m: &'static Message,
    f: &'static Field,
    v: Value<'a>,
    at: usize,
    cx: Ctx,
    read: impl Fn(Kind, Value<'a>, Ctx) -> Result<T, Error>,
) -> Result<(), Error> {
    if single(m, f, v, at)? {
        *slot = Some(read(f.kind, v, cx).map_err(|e| e.at(m.name, f.json))?);
    }
    Ok(())
}

/// `Vec<T>`: each occurrence appended (a packed run of numbers element by element).
#[inline]
pub(crate) fn vec<'a, T>(
    out: &mut Vec<T>,
    m: &'static Message,
    f: &'static Field,
    v: Value<'a>,
    at: usize,
    cx: Ctx,
    read: impl Fn(Kind, Value<'a>, Ctx) -> Result<T, Error>,
) -> Result<(), Error> {
    let kind = f.kind;
    match v {
        Value::Len(b) if packable(kind) => {
            let mut r = Reader::new(b);
            while !r.at_end() {
                let x = r.value(wire_of(kind)).map_err(|e| e.at(m.name, f.json))?;
                out.push(read(kind, x, cx).map_err(|e| e.at(m.name, f.json))?);
            }
        }
        v if v.wire_type() == wire_of(kind) => out.push(read(kind, v, cx).map_err(|e| e.at(m.name, f.json))?),
        _ => return Err(Error::wire(Wire::WireType, at).at(m.name, f.json)),
    }
    Ok(())
}

/// `Option<Vec<T>>`: `Some` from the first occurrence.
#[inline]
pub(crate) fn opt_vec<'a, T>(
    slot: &mut Option<Vec<T>>,
    m: &'static Message,
    f: &'static Field,
    v: Value<'a>,
    at: usize,
    cx: Ctx,
    read: impl Fn(Kind, Value<'a>, Ctx) -> Result<T, Error>,
) -> Result<(), Error> {
    vec(slot.get_or_insert_with(Vec::new), m, f, v, at, cx, read)
}

/// `BTreeMap<String, T>`: each entry (`key = 1`, `value = 2`; absent ones the zero value) inserted.
#[inline]
pub(crate) fn map<'a, T>(
    out: &mut BTreeMap<String, T>,
    m: &'static Message,
    f: &'static Field,
    v: Value<'a>,
    at: usize,
    cx: Ctx,
    read: impl Fn(Kind, Value<'a>, Ctx) -> Result<T, Error>,
) -> Result<(), Error> {
    let Value::Len(entry) = v else { return Err(Error::wire(Wire::WireType, at).at(m.name, f.json)) };
    let wire = wire_of(f.kind);
    let mut key: &[u8] = &[];
    let mut value = None;
    let mut r = Reader::new(entry);
    while let Some((n, x)) = r.field().map_err(|e| e.at(m.name, f.json))? {
        match (n, x) {
            (1, Value::Len(k)) => key = k,
            (2, x) if x.wire_type() == wire => value = Some(x),
            (1 | 2, _) => return Err(Error::wire(Wire::WireType, r.pos).at(m.name, f.json)),
            _ => {}
        }
    }
    let value = value.unwrap_or(if wire == LEN { Value::Len(&[]) } else { Value::Varint(0) });
    let key = String::from(utf8(key).map_err(|e| e.at(m.name, f.json))?);
    let value = read(f.kind, value, cx).map_err(|e| e.at(m.name, f.json))?;
    out.insert(key, value);
    Ok(())
}

/// `Option<BTreeMap<String, T>>`: `Some` from the first entry.
#[inline]
pub(crate) fn opt_map<'a, T>(
    slot: &mut Option<BTreeMap<String, T>>,
    m: &'static Message,
    f: &'static Field,
    v: Value<'a>,
    at: usize,
    cx: Ctx,
    read: impl Fn(Kind, Value<'a>, Ctx) -> Result<T, Error>,
) -> Result<(), Error> {
    map(slot.get_or_insert_with(BTreeMap::new), m, f, v, at, cx, read)
}

#[cfg(test)]
mod tests;
