//! The generated decoders against the serde path, on random messages made from the schema:
//! well-formed ones (every kind of field, repeated and packed, maps with missing keys and
//! values, inlined members, zero values `omitempty` leaves out, Times out of range) and ones
//! broken on purpose (wrong wire types, truncation, strings that are not UTF-8, unknown fields).

use std::fmt::Debug;

use kcache_test_support::rng::SplitMix64;
use serde::de::DeserializeOwned;

use super::{Decoder, Direct};
use crate::DecodeOptions;
use crate::generated::MESSAGES;
use crate::message_type::MessageType;
use crate::schema::Kind;
use crate::schema::flags::{MAP, REPEATED};
use crate::wire::{FIXED64, LEN, VARINT, put_bytes, put_tag, put_varint};

/// Both decoders give the same value (`Ok(true)`), or both refuse the bytes (`Ok(false)`).
pub(super) fn agree<T: Direct + DeserializeOwned + PartialEq + Debug + 'static>(
    msg: u16,
    bytes: &[u8],
    opts: DecodeOptions,
) -> Result<bool, String> {
    let ty = MessageType(msg);
    let decoder = Decoder::<T>::new(ty);
    if !decoder.is_generated() {
        return Err(format!("{}: no generated decoder for its own type", ty.name()));
    }
    match (crate::decode::<T>(ty, bytes, opts), decoder.decode(bytes, opts)) {
        (Ok(a), Ok(b)) if a == b => Ok(true),
        (Err(_), Err(_)) => Ok(false),
        (a, b) => Err(format!("{}: serde {a:?}\n   generated {b:?}", ty.name())),
    }
}

/// Random bytes for a value of `kind`.
struct Gen {
    rng: SplitMix64,
    /// Out of 1000: how often something is broken on purpose.
    broken: u64,
}

impl Gen {
    fn chance(&mut self, per_mille: u64) -> bool {
        self.rng.below(1000) < per_mille
    }

    fn string(&mut self) -> Vec<u8> {
        match self.rng.below(8) {
            0 => Vec::new(),
            1 => "ü-é\n\"".as_bytes().to_vec(),
            2 if self.chance(self.broken * 5) => vec![0xff, b'a'],
            3 => b"0".to_vec(),
            4 => b"1.5Gi".to_vec(),
            _ => format!("s{}", self.rng.below(5)).into_bytes(),
        }
    }

    fn number(&mut self) -> u64 {
        match self.rng.below(6) {
            0 => 0,
            1 => 1,
            2 => (-3i64) as u64,
            3 => u64::from(u32::MAX) + 7,
            _ => self.rng.below(1000),
        }
    }

    /// The payload of one value of `kind`, written as field `number` into `out`.
    fn value(&mut self, kind: Kind, number: u32, depth: u32, out: &mut Vec<u8>) {
        match kind {
            Kind::Bool | Kind::Int32 | Kind::Int64 | Kind::Uint32 | Kind::Uint64 => {
                put_tag(out, number, VARINT);
                let v = if kind == Kind::Bool { self.rng.below(3) } else { self.number() };
                put_varint(out, v);
            }
            Kind::Double => {
                put_tag(out, number, FIXED64);
                out.extend_from_slice(&(self.rng.below(100) as f64 / 4.0).to_bits().to_le_bytes());
            }
            Kind::String | Kind::Bytes => {
                let s = self.string();
                put_bytes(out, number, &s);
            }
            Kind::Msg(m) | Kind::Inline(m) => {
                let body = if depth > 3 { Vec::new() } else { self.message(m, depth + 1) };
                put_bytes(out, number, &body);
            }
            Kind::StringList => {
                let mut body = Vec::new();
                for _ in 0..self.rng.below(3) {
                    let s = self.string();
                    put_bytes(&mut body, 1, &s);
                }
                put_bytes(out, number, &body);
            }
            Kind::Time | Kind::MicroTime | Kind::Duration => {
                let mut body = Vec::new();
                if !self.chance(200) {
                    let seconds = match self.rng.below(8) {
                        0 => 0,
                        1 => (-62_135_596_800i64) as u64,
                        // The first and the last second RFC 3339 can write, and one past each.
                        5 => (-62_167_219_200i64 - self.rng.below(2) as i64) as u64,
                        6 => 253_402_300_799 + self.rng.below(2),
                        2 if self.chance(self.broken * 5) => 1u64 << 62,
                        _ => 1_700_000_000 + self.rng.below(1_000_000),
                    };
                    put_tag(&mut body, 1, VARINT);
                    put_varint(&mut body, seconds);
                    if self.chance(500) {
                        put_tag(&mut body, 2, VARINT);
                        put_varint(&mut body, self.rng.below(1_000_000_000));
                    }
                }
                put_bytes(out, number, &body);
            }
            Kind::IntOrString => {
                let mut body = Vec::new();
                let ty = self.rng.below(3);
                put_tag(&mut body, 1, VARINT);
                put_varint(&mut body, ty);
                put_tag(&mut body, 2, VARINT);
                put_varint(&mut body, self.number());
                let s = self.string();
                put_bytes(&mut body, 3, &s);
                put_bytes(out, number, &body);
            }
            Kind::Quantity => {
                let mut body = Vec::new();
                let s = self.string();
                put_bytes(&mut body, 1, &s);
                put_bytes(out, number, &body);
            }
            Kind::RawExtension | Kind::FieldsV1 => {
                let mut body = Vec::new();
                let raw: &[u8] = match self.rng.below(5) {
                    0 => b"",
                    1 => b"{\"f:metadata\":{\"f:labels\":{}}}",
                    2 if self.chance(self.broken * 5) => b"{\"a\":",
                    3 => b"[1,\"x\",null]",
                    _ => b"{\"apiVersion\":\"v1\",\"kind\":\"Pod\"}",
                };
                put_bytes(&mut body, 1, raw);
                put_bytes(out, number, &body);
            }
        }
    }

    /// A random message of type `m`.
    fn message(&mut self, m: u16, depth: u32) -> Vec<u8> {
        let msg = &MESSAGES[usize::from(m)];
        let mut out = Vec::new();
        for f in msg.fields {
            if !self.chance(if depth <= 1 { 800 } else { 500 }) {
                continue;
            }
            let times =
                if f.has(REPEATED) || f.has(MAP) { 1 + self.rng.below(3) } else { 1 + self.rng.below(2) };
            for _ in 0..times {
                if f.has(MAP) {
                    let mut entry = Vec::new();
                    if !self.chance(100) {
                        let k = self.string();
                        put_bytes(&mut entry, 1, &k);
                    }
                    if !self.chance(100) {
                        self.value(f.kind, 2, depth, &mut entry);
                    }
                    put_bytes(&mut out, f.number, &entry);
                } else if f.has(REPEATED) && super::packable(f.kind) && self.chance(500) {
                    let mut packed = Vec::new();
                    for _ in 0..self.rng.below(3) {
                        put_varint(&mut packed, self.number());
                    }
                    put_bytes(&mut out, f.number, &packed);
                } else {
                    self.value(f.kind, f.number, depth, &mut out);
                }
            }
            if self.chance(self.broken) {
                // The field again, with the wrong wire type.
                let wrong = if super::wire_of(f.kind) == LEN { VARINT } else { LEN };
                put_tag(&mut out, f.number, wrong);
                put_varint(&mut out, 0);
            }
        }
        if self.chance(100) {
            // A field the schema does not know.
            put_bytes(&mut out, 999, b"unknown");
        }
        if self.chance(self.broken) && !out.is_empty() {
            let cut = self.rng.below(out.len() as u64) as usize;
            out.truncate(cut);
        }
        out
    }
}

/// Every message with a generated decoder: random messages decode to the same value on both
/// paths, or are refused by both, with and without `managedFields` skipped.
#[test]
fn direct_and_serde_decoders_agree() {
    let mut generated = 0;
    let mut failures = Vec::new();
    // (both decoded, both refused), per seed.
    let mut outcomes = [(0, 0); 3];
    for (s, (seed, broken)) in [(1, 0), (2, 20), (3, 100)].into_iter().enumerate() {
        let mut g = Gen { rng: SplitMix64::new(seed), broken };
        for m in 0..MESSAGES.len() as u16 {
            for i in 0..24 {
                let bytes = g.message(m, 1);
                let opts = DecodeOptions::default().skip_managed_fields(i % 2 == 0);
                match super::generated::agree(m, &bytes, opts) {
                    None => break,
                    Some(Ok(decoded)) => {
                        generated += usize::from(s == 0 && i == 0);
                        if decoded {
                            outcomes[s].0 += 1;
                        } else {
                            outcomes[s].1 += 1;
                        }
                    }
                    Some(Err(e)) => failures.push(e),
                }
            }
        }
    }
    // Well-formed messages mostly decode (a Time out of range or a string a type rejects
    // does not); broken ones are mostly refused: both sides of the comparison are exercised.
    assert!(outcomes[0].0 > outcomes[0].1 * 4, "{outcomes:?}");
    assert!(outcomes[2].1 > outcomes[2].0, "{outcomes:?}");
    if !failures.is_empty() {
        let mut names: Vec<&str> = failures.iter().map(|f| f.split(':').next().unwrap()).collect();
        names.dedup();
        panic!("{} disagreements ({names:?}), first:\n{}", failures.len(), failures[0]);
    }
    assert!(generated > 700, "only {generated} generated decoders");
}

/// The decoders most users meet are generated, and a type that is not the message's own (or
/// not a k8s-openapi type) goes the serde way.
#[test]
fn built_in_kinds_have_generated_decoders() {
    use k8s_openapi::api::{apps::v1::Deployment, core::v1 as core};
    let ty = |v, k| MessageType::for_kind(v, k).unwrap();
    assert!(Decoder::<core::Pod>::new(ty("v1", "Pod")).is_generated());
    assert!(Decoder::<core::ConfigMap>::new(ty("v1", "ConfigMap")).is_generated());
    assert!(Decoder::<core::Secret>::new(ty("v1", "Secret")).is_generated());
    assert!(Decoder::<Deployment>::new(ty("apps/v1", "Deployment")).is_generated());
    assert!(!Decoder::<core::Pod>::new(ty("v1", "ConfigMap")).is_generated());
    assert!(!Decoder::<serde_json::Value>::new(ty("v1", "Pod")).is_generated());
    assert!(!Decoder::<core::Pod>::serde_only(ty("v1", "Pod")).is_generated());
}

/// The generated decoders' range check of a Time is exactly where the serde path's RFC 3339
/// text stops being writable.
#[test]
fn time_range_is_rfc3339s() {
    use super::{FIRST_RFC3339_SECOND, LAST_RFC3339_SECOND};
    use crate::time::rfc3339;
    assert_eq!(rfc3339(FIRST_RFC3339_SECOND, None).unwrap().as_str(), "0000-01-01T00:00:00Z");
    assert_eq!(rfc3339(LAST_RFC3339_SECOND, None).unwrap().as_str(), "9999-12-31T23:59:59Z");
    assert!(rfc3339(FIRST_RFC3339_SECOND - 1, None).is_none());
    assert!(rfc3339(LAST_RFC3339_SECOND + 1, None).is_none());
}
