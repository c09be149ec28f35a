//! [`encode_json`]: an object's JSON form written as its protobuf message, as kube-apiserver's Go
//! code writes it (for kcache-testserver, which keeps objects as JSON).

use base64::Engine as _;
use serde_json::{Map, Value as Json};

use crate::generated::MESSAGES;
use crate::message_type::MessageType;
use crate::schema::flags::{MAP, NULLABLE, REPEATED};
use crate::schema::{Field, Kind, Message};
use crate::wire::{FIXED64, LEN, VARINT, put_bytes, put_tag, put_varint};

/// Why a JSON value could not be written as protobuf.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// A member's JSON type does not fit its field (a string where a number belongs, say).
    #[error("`{field}` of {message}: {expected} expected")]
    Type {
        /// The message's Go type.
        message: &'static str,
        /// The member.
        field: &'static str,
        /// What the field holds.
        expected: &'static str,
    },
    /// Messages nested deeper than [`MAX_DEPTH`](crate::MAX_DEPTH).
    #[error("nested too deeply")]
    Depth,
}

/// Writes `json`, an object of type `ty` in its JSON form, as `ty`'s protobuf message, the way
/// Go's generated `Marshal` does: fields in number order, map entries sorted by key, every
/// non-pointer field written even when JSON leaves it out (its zero value), members the message
/// does not have dropped.
///
/// # Errors
///
/// [`EncodeError`] when a member's JSON type does not fit its field.
///
/// # Examples
///
/// ```
/// use kcache_protobuf::{MessageType, encode_json};
///
/// let ty = MessageType::for_kind("v1", "ConfigMap").unwrap();
/// let bytes = encode_json(ty, &serde_json::json!({"metadata": {"name": "a"}}))?;
/// // metadata (1) holds name (1) = "a" and the zero values of ObjectMeta's other non-pointer fields.
/// assert_eq!(&bytes[..5], &[0x0a, bytes[1], 0x0a, 0x01, b'a']);
/// # Ok::<(), kcache_protobuf::EncodeError>(())
/// ```
pub fn encode_json(ty: MessageType, json: &Json) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::with_capacity(256);
    let empty = Map::new();
    let obj = json.as_object().unwrap_or(&empty);
    message(ty.message(), obj, &mut out, 0)?;
    Ok(out)
}

fn type_error(m: &Message, f: &Field, expected: &'static str) -> EncodeError {
    EncodeError::Type { message: m.name, field: f.json, expected }
}

fn message(
    m: &'static Message,
    obj: &Map<String, Json>,
    out: &mut Vec<u8>,
    depth: u32,
) -> Result<(), EncodeError> {
    if depth > crate::MAX_DEPTH {
        return Err(EncodeError::Depth);
    }
    for f in m.fields {
        if let Kind::Inline(i) = f.kind {
            // The inlined struct's members sit in this object.
            let mut sub = Vec::new();
            message(&MESSAGES[usize::from(i)], obj, &mut sub, depth + 1)?;
            put_bytes(out, f.number, &sub);
            continue;
        }
        let v = obj.get(f.json).filter(|v| !v.is_null());
        if f.has(MAP) {
            let Some(v) = v else { continue };
            let entries = v.as_object().ok_or_else(|| type_error(m, f, "an object"))?;
            // serde_json's map is sorted by key (no `preserve_order` here), as Go sorts.
            for (k, val) in entries {
                let mut entry = Vec::with_capacity(k.len() + 16);
                put_bytes(&mut entry, 1, k.as_bytes());
                value(m, f, 2, Some(val), &mut entry, depth)?;
                put_bytes(out, f.number, &entry);
            }
        } else if f.has(REPEATED) {
            let Some(v) = v else { continue };
            let items = v.as_array().ok_or_else(|| type_error(m, f, "an array"))?;
            for item in items {
                value(m, f, f.number, Some(item), out, depth)?;
            }
        } else if v.is_some() || !f.has(NULLABLE) {
            value(m, f, f.number, v, out, depth)?;
        }
    }
    Ok(())
}

/// Writes one value of field `f` as field `number`; `None` is the Go zero value.
fn value(
    m: &'static Message,
    f: &'static Field,
    number: u32,
    v: Option<&Json>,
    out: &mut Vec<u8>,
    depth: u32,
) -> Result<(), EncodeError> {
    let int = |v: Option<&Json>| -> Result<i64, EncodeError> {
        match v {
            None => Ok(0),
            Some(Json::Number(n)) => n
                .as_i64()
                .or_else(|| n.as_u64().map(|u| u as i64))
                .or_else(|| n.as_f64().map(|x| x as i64))
                .ok_or_else(|| type_error(m, f, "an integer")),
            Some(_) => Err(type_error(m, f, "a number")),
        }
    };
    let string = |v: Option<&Json>| -> Result<String, EncodeError> {
        match v {
            None => Ok(String::new()),
            Some(Json::String(s)) => Ok(s.clone()),
            Some(_) => Err(type_error(m, f, "a string")),
        }
    };
    match f.kind {
        Kind::String => put_bytes(out, number, string(v)?.as_bytes()),
        Kind::Bool => {
            let b = match v {
                None => false,
                Some(Json::Bool(b)) => *b,
                Some(_) => return Err(type_error(m, f, "a boolean")),
            };
            put_tag(out, number, VARINT);
            put_varint(out, u64::from(b));
        }
        Kind::Int32 => {
            put_tag(out, number, VARINT);
            // Sign-extended, as protobuf writes a negative int32.
            put_varint(out, i64::from(int(v)? as i32) as u64);
        }
        Kind::Int64 | Kind::Uint32 | Kind::Uint64 => {
            put_tag(out, number, VARINT);
            put_varint(out, int(v)? as u64);
        }
        Kind::Double => {
            let x = match v {
                None => 0.0,
                Some(Json::Number(n)) => n.as_f64().unwrap_or(0.0),
                Some(_) => return Err(type_error(m, f, "a number")),
            };
            put_tag(out, number, FIXED64);
            out.extend_from_slice(&x.to_bits().to_le_bytes());
        }
        Kind::Bytes => {
            // A nil []byte is not written.
            let Some(v) = v else { return Ok(()) };
            let s = v.as_str().ok_or_else(|| type_error(m, f, "a base64 string"))?;
            let b = base64::engine::general_purpose::STANDARD
                .decode(s)
                .map_err(|_| type_error(m, f, "a base64 string"))?;
            put_bytes(out, number, &b);
        }
        Kind::Msg(i) | Kind::Inline(i) => {
            let empty = Map::new();
            let obj = match v {
                None => &empty,
                Some(Json::Object(o)) => o,
                Some(_) => return Err(type_error(m, f, "an object")),
            };
            let mut sub = Vec::new();
            message(&MESSAGES[usize::from(i)], obj, &mut sub, depth + 1)?;
            put_bytes(out, number, &sub);
        }
        Kind::StringList => {
            let mut sub = Vec::new();
            if let Some(v) = v {
                for s in v.as_array().ok_or_else(|| type_error(m, f, "an array of strings"))? {
                    let s = s.as_str().ok_or_else(|| type_error(m, f, "an array of strings"))?;
                    put_bytes(&mut sub, 1, s.as_bytes());
                }
            }
            put_bytes(out, number, &sub);
        }
        Kind::Time | Kind::MicroTime => {
            let mut sub = Vec::new();
            if let Some(s) = v {
                let s = s.as_str().ok_or_else(|| type_error(m, f, "an RFC 3339 time"))?;
                let (seconds, nanos) =
                    parse_rfc3339(s).ok_or_else(|| type_error(m, f, "an RFC 3339 time"))?;
                let nanos = if matches!(f.kind, Kind::MicroTime) { nanos / 1000 * 1000 } else { 0 };
                put_tag(&mut sub, 1, VARINT);
                put_varint(&mut sub, seconds as u64);
                put_tag(&mut sub, 2, VARINT);
                put_varint(&mut sub, u64::from(nanos));
            }
            put_bytes(out, number, &sub);
        }
        Kind::Duration => {
            let nanos = match v {
                None => 0,
                Some(Json::String(s)) => {
                    parse_go_duration(s).ok_or_else(|| type_error(m, f, "a duration"))?
                }
                Some(_) => return Err(type_error(m, f, "a duration")),
            };
            let mut sub = Vec::new();
            put_tag(&mut sub, 1, VARINT);
            put_varint(&mut sub, nanos as u64);
            put_bytes(out, number, &sub);
        }
        Kind::IntOrString => {
            let (ty, n, s) = match v {
                None => (0, 0, ""),
                Some(Json::String(s)) => (1, 0, s.as_str()),
                Some(v @ Json::Number(_)) => (0, int(Some(v))?, ""),
                Some(_) => return Err(type_error(m, f, "an integer or a string")),
            };
            let mut sub = Vec::new();
            put_tag(&mut sub, 1, VARINT);
            put_varint(&mut sub, ty);
            put_tag(&mut sub, 2, VARINT);
            put_varint(&mut sub, i64::from(n as i32) as u64);
            put_bytes(&mut sub, 3, s.as_bytes());
            put_bytes(out, number, &sub);
        }
        Kind::Quantity => {
            let s = match v {
                None => "0".to_owned(),
                Some(Json::String(s)) => s.clone(),
                Some(Json::Number(n)) => n.to_string(),
                Some(_) => return Err(type_error(m, f, "a quantity")),
            };
            let mut sub = Vec::new();
            put_bytes(&mut sub, 1, s.as_bytes());
            put_bytes(out, number, &sub);
        }
        Kind::RawExtension | Kind::FieldsV1 => {
            let mut sub = Vec::new();
            if let Some(v) = v {
                let raw = serde_json::to_vec(v).map_err(|_| type_error(m, f, "JSON"))?;
                put_bytes(&mut sub, 1, &raw);
            }
            put_bytes(out, number, &sub);
        }
    }
    let _ = LEN;
    Ok(())
}

/// `2006-01-02T15:04:05[.frac](Z|±hh:mm)` to Unix seconds and nanoseconds.
fn parse_rfc3339(s: &str) -> Option<(i64, u32)> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = b.get(r)?;
        part.iter()
            .all(u8::is_ascii_digit)
            .then(|| part.iter().fold(0i64, |a, d| a * 10 + i64::from(d - b'0')))
    };
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let (y, mo, d, h, mi, sec) =
        (num(0..4)?, num(5..7)?, num(8..10)?, num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut i = 19;
    let mut nanos = 0u32;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            if i - start < 9 {
                nanos = nanos * 10 + u32::from(b[i] - b'0');
            }
            i += 1;
        }
        for _ in (i - start).min(9)..9 {
            nanos *= 10;
        }
    }
    let offset = match b.get(i)? {
        b'Z' | b'z' if i + 1 == b.len() => 0,
        c @ (b'+' | b'-') if i + 6 == b.len() && b[i + 3] == b':' => {
            let o = num(i + 1..i + 3)? * 3600 + num(i + 4..i + 6)? * 60;
            if *c == b'+' { o } else { -o }
        }
        _ => return None,
    };
    // Days from civil (Howard Hinnant's `days_from_civil`).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86_400 + h * 3600 + mi * 60 + sec - offset, nanos))
}

/// Go's `time.ParseDuration`: `[-+]` then one or more `<decimal><unit>` (`ns`, `us`, `µs`, `ms`,
/// `s`, `m`, `h`), or `0`.
fn parse_go_duration(s: &str) -> Option<i64> {
    let (neg, mut rest) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Some(0);
    }
    let mut total: f64 = 0.0;
    while !rest.is_empty() {
        let n = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let x: f64 = rest[..n].parse().ok()?;
        rest = &rest[n..];
        let u = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let scale = match &rest[..u] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        rest = &rest[u..];
        total += x * scale;
    }
    let total = total.round() as i64;
    Some(if neg { -total } else { total })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some((0, 0)));
        assert_eq!(parse_rfc3339("2026-12-06T07:25:26Z"), Some((1_796_541_926, 0)));
        assert_eq!(parse_rfc3339("2026-12-06T08:25:26.123456+01:00"), Some((1_796_541_926, 123_456_000)));
        assert_eq!(parse_rfc3339("2026-12-06"), None);
        assert_eq!(parse_rfc3339("2026-13-06T08:18:46Z"), None);
        for secs in [-62_135_596_800i64, -1, 0, 951_782_400, 1_796_541_926, 253_402_300_799] {
            let s = crate::time::rfc3339(secs, None).unwrap();
            let s = s.as_str();
            assert_eq!(parse_rfc3339(s), Some((secs, 0)), "{s}");
        }
    }

    #[test]
    fn durations_parse() {
        for d in [0i64, 1, 1_100, 2_200_000, 3_300_000_000, 18_367_001_000_000, -1_100] {
            assert_eq!(parse_go_duration(&crate::time::go_duration(d)), Some(d));
        }
        assert_eq!(parse_go_duration("1x"), None);
    }
}
