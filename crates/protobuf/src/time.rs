//! The JSON forms of metav1.Time, metav1.MicroTime and metav1.Duration, written from their
//! protobuf fields exactly as Go's `MarshalJSON` writes them.

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// An RFC 3339 time written into a buffer of its own: formatting it (`write!`) was 9% of the
/// instructions of a protobuf watch of small ConfigMaps (docs/benchmarks.md, the profile).
pub(crate) struct Rfc3339 {
    buf: [u8; 27],
    len: usize,
}

impl Rfc3339 {
    pub(crate) fn as_str(&self) -> &str {
        // Only ASCII digits and `-T:.Z` are ever written.
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or_default()
    }
}

/// `seconds` since the Unix epoch as RFC 3339 in UTC (`2006-01-02T15:04:05Z`, Go's
/// `time.RFC3339`), with `micros` microseconds when given (`time.RFC3339Micro`, six digits).
/// `None` outside years 0 to 9999, which RFC 3339 cannot write (Go's `MarshalJSON` fails too).
pub(crate) fn rfc3339(seconds: i64, micros: Option<u32>) -> Option<Rfc3339> {
    let days = seconds.div_euclid(86_400);
    let secs = seconds.rem_euclid(86_400);
    let (y, mo, d) = civil_from_days(days);
    if !(0..=9999).contains(&y) {
        return None;
    }
    let (h, mi, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    let mut out = Rfc3339 { buf: *b"0000-00-00T00:00:00.000000Z", len: 20 };
    let mut digits = |at: usize, width: usize, mut v: u64| {
        for i in (at..at + width).rev() {
            out.buf[i] = b'0' + (v % 10) as u8;
            v /= 10;
        }
    };
    digits(0, 4, y as u64);
    digits(5, 2, u64::from(mo));
    digits(8, 2, u64::from(d));
    digits(11, 2, h as u64);
    digits(14, 2, mi as u64);
    digits(17, 2, s as u64);
    match micros {
        Some(us) => {
            digits(20, 6, u64::from(us % 1_000_000));
            out.len = 27;
        }
        None => out.buf[19] = b'Z',
    }
    Some(out)
}

/// Go's `time.Duration.String` of `nanos`: `1h2m3.5s`, `1.5ms`, `0s`.
pub(crate) fn go_duration(nanos: i64) -> String {
    // Written backwards into a buffer, as Go's `format` does.
    let mut buf: Vec<u8> = Vec::with_capacity(32);
    let neg = nanos < 0;
    let mut u = nanos.unsigned_abs();
    fn frac(buf: &mut Vec<u8>, mut v: u64, prec: usize) -> u64 {
        let mut print = false;
        for _ in 0..prec {
            let digit = v % 10;
            print = print || digit != 0;
            if print {
                buf.push(b'0' + digit as u8);
            }
            v /= 10;
        }
        if print {
            buf.push(b'.');
        }
        v
    }
    fn int(buf: &mut Vec<u8>, mut v: u64) {
        if v == 0 {
            buf.push(b'0');
            return;
        }
        while v > 0 {
            buf.push(b'0' + (v % 10) as u8);
            v /= 10;
        }
    }
    if u < 1_000_000_000 {
        buf.push(b's');
        let prec = match u {
            0 => return "0s".to_owned(),
            1..=999 => {
                buf.push(b'n');
                0
            }
            1_000..=999_999 => {
                // "µ" (U+00B5), its two UTF-8 bytes pushed in reverse.
                buf.extend_from_slice(&[0xb5, 0xc2]);
                3
            }
            _ => {
                buf.push(b'm');
                6
            }
        };
        u = frac(&mut buf, u, prec);
        int(&mut buf, u);
    } else {
        buf.push(b's');
        u = frac(&mut buf, u, 9);
        int(&mut buf, u % 60);
        u /= 60;
        if u > 0 {
            buf.push(b'm');
            int(&mut buf, u % 60);
            u /= 60;
            if u > 0 {
                buf.push(b'h');
                int(&mut buf, u);
            }
        }
    }
    if neg {
        buf.push(b'-');
    }
    buf.reverse();
    String::from_utf8(buf).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_as_go_writes_it() {
        let s = |seconds, micros| rfc3339(seconds, micros).map(|t| t.as_str().to_owned());
        assert_eq!(s(0, None).as_deref(), Some("1970-01-01T00:00:00Z"));
        assert_eq!(s(1_796_541_926, None).as_deref(), Some("2026-12-06T07:25:26Z"));
        assert_eq!(s(951_782_400, None).as_deref(), Some("2000-02-29T00:00:00Z"));
        assert_eq!(s(-1, Some(5)).as_deref(), Some("1969-12-31T23:59:59.000005Z"));
        assert_eq!(s(1_796_541_926, Some(999_999)).as_deref(), Some("2026-12-06T07:25:26.999999Z"));
        assert_eq!(s(-62_135_596_800, None).as_deref(), Some("0001-01-01T00:00:00Z"));
        assert_eq!(s(253_402_300_799, None).as_deref(), Some("9999-12-31T23:59:59Z"));
        assert_eq!(s(253_402_300_800, None), None);
        assert_eq!(s(i64::MIN, None), None);
        assert_eq!(s(i64::MAX, None), None);
    }

    /// Expected values from Go's `time.Duration.String` (its `TestDurationString` table).
    #[test]
    fn go_duration_strings() {
        let cases: &[(i64, &str)] = &[
            (0, "0s"),
            (1, "1ns"),
            (1_100, "1.1µs"),
            (2_200_000, "2.2ms"),
            (3_300_000_000, "3.3s"),
            (4 * 60_000_000_000 + 5_000_000_000, "4m5s"),
            (4 * 60_000_000_000 + 5_001_000_000, "4m5.001s"),
            (5 * 3_600_000_000_000 + 6 * 60_000_000_000 + 7_001_000_000, "5h6m7.001s"),
            (8 * 60_000_000_000 + 1, "8m0.000000001s"),
            (i64::MAX, "2562047h47m16.854775807s"),
            (i64::MIN, "-2562047h47m16.854775808s"),
            (-1_100, "-1.1µs"),
        ];
        for (d, want) in cases {
            assert_eq!(go_duration(*d), *want, "{d}");
        }
    }
}
