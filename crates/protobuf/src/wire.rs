//! The protobuf wire format: varints, tags and field values read from a byte slice, every read
//! bounds-checked (a malformed or truncated message is an [`Error`], never a panic).

use crate::error::{Error, Wire};

/// Wire type 0: a varint.
pub(crate) const VARINT: u8 = 0;
/// Wire type 1: 8 bytes, little-endian.
pub(crate) const FIXED64: u8 = 1;
/// Wire type 2: a varint length, then that many bytes.
pub(crate) const LEN: u8 = 2;
/// Wire type 5: 4 bytes, little-endian.
pub(crate) const FIXED32: u8 = 5;

/// One field's value as read off the wire.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Value<'a> {
    Varint(u64),
    Fixed64(u64),
    Fixed32(u32),
    Len(&'a [u8]),
}

impl Value<'_> {
    /// The wire type it came with.
    pub(crate) fn wire_type(&self) -> u8 {
        match self {
            Value::Varint(_) => VARINT,
            Value::Fixed64(_) => FIXED64,
            Value::Fixed32(_) => FIXED32,
            Value::Len(_) => LEN,
        }
    }
}

/// A cursor over one message's bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reader<'a> {
    pub(crate) buf: &'a [u8],
    pub(crate) pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    pub(crate) fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }

    /// A varint of at most 10 bytes.
    #[inline]
    pub(crate) fn varint(&mut self) -> Result<u64, Error> {
        // The common case, one byte (tags, small lengths and numbers).
        if let Some(&b) = self.buf.get(self.pos)
            && b < 0x80
        {
            self.pos += 1;
            return Ok(u64::from(b));
        }
        let start = self.pos;
        let mut value = 0u64;
        for i in 0..10 {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err(Error::wire(Wire::Truncated, start));
            };
            self.pos += 1;
            if i == 9 && b > 1 {
                return Err(Error::wire(Wire::Varint, start));
            }
            value |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                return Ok(value);
            }
        }
        Err(Error::wire(Wire::Varint, start))
    }

    /// A field's tag: its number and wire type.
    #[inline]
    pub(crate) fn tag(&mut self) -> Result<(u32, u8), Error> {
        let start = self.pos;
        let tag = self.varint()?;
        let number = tag >> 3;
        if number == 0 || number > u64::from(u32::MAX >> 3) {
            return Err(Error::wire(Wire::FieldNumber, start));
        }
        Ok((number as u32, (tag & 7) as u8))
    }

    /// `n` bytes.
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], Error> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        let Some(end) = end else { return Err(Error::wire(Wire::Truncated, self.pos)) };
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    /// The value of a field of wire type `wire`.
    #[inline]
    pub(crate) fn value(&mut self, wire: u8) -> Result<Value<'a>, Error> {
        match wire {
            VARINT => self.varint().map(Value::Varint),
            FIXED64 => {
                let b = self.take(8)?;
                Ok(Value::Fixed64(u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])))
            }
            LEN => {
                let start = self.pos;
                let n = self.varint()?;
                let n = usize::try_from(n).map_err(|_| Error::wire(Wire::Truncated, start))?;
                self.take(n).map(Value::Len)
            }
            FIXED32 => {
                let b = self.take(4)?;
                Ok(Value::Fixed32(u32::from_le_bytes([b[0], b[1], b[2], b[3]])))
            }
            // 3 and 4 are proto2 groups, which Kubernetes never writes; 6 and 7 do not exist.
            _ => Err(Error::wire(Wire::WireType, self.pos)),
        }
    }

    /// The next field: its number and value, or `None` at the end of the message.
    #[inline]
    pub(crate) fn field(&mut self) -> Result<Option<(u32, Value<'a>)>, Error> {
        if self.at_end() {
            return Ok(None);
        }
        let (number, wire) = self.tag()?;
        Ok(Some((number, self.value(wire)?)))
    }
}

/// Appends `v` as a varint.
pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends a tag.
pub(crate) fn put_tag(out: &mut Vec<u8>, number: u32, wire: u8) {
    put_varint(out, (u64::from(number) << 3) | u64::from(wire));
}

/// Appends a length-delimited field.
pub(crate) fn put_bytes(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    put_tag(out, number, LEN);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_bad_ones_are_errors() {
        for v in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX, (-1i64) as u64] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            let mut r = Reader::new(&b);
            assert_eq!(r.varint().unwrap(), v);
            assert!(r.at_end());
            // Every proper prefix is truncated.
            for cut in 0..b.len() {
                assert!(Reader::new(&b[..cut]).varint().is_err());
            }
        }
        // Eleven bytes, and a tenth byte above 1, overflow.
        assert!(Reader::new(&[0xff; 11]).varint().is_err());
        assert!(Reader::new(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02]).varint().is_err());
    }

    #[test]
    fn lengths_past_the_end_are_truncation() {
        let mut r = Reader::new(&[0x0a, 0x05, b'a']);
        assert!(r.field().is_err());
        // A group's wire type is refused.
        assert!(Reader::new(&[0x0b]).field().is_err());
        // Field number 0 is refused.
        assert!(Reader::new(&[0x00, 0x00]).field().is_err());
    }
}
