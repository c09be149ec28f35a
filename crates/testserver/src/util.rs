//! Small helpers: `metav1.Time` timestamps, uids, `generateName` suffixes.

use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

/// `now` as `metav1.Time` writes it: RFC 3339 in UTC with second precision.
pub(crate) fn rfc3339_now() -> String {
    // jiff's `Timestamp::now` needs its `std` feature, which k8s-openapi does not turn on.
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    rfc3339(secs)
}

/// Seconds since the Unix epoch as RFC 3339 UTC, in k8s-openapi's own serialization of
/// `metav1.Time`, the one clients parse.
fn rfc3339(secs: u64) -> String {
    let t = i64::try_from(secs).ok().and_then(|s| Timestamp::from_second(s).ok()).unwrap_or(Timestamp::MAX);
    match serde_json::to_value(Time(t)) {
        Ok(Value::String(s)) => s,
        // Unreachable: `Time` serializes as a string for every `Timestamp`.
        _ => String::new(),
    }
}

/// A random RFC 4122 version-4 uid.
pub(crate) fn new_uid() -> String {
    let b: [u8; 16] = rand::random();
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{}-{}-4{}-a{}-{}", &h[0..8], &h[8..12], &h[13..16], &h[17..20], &h[20..32])
}

/// Five random lowercase alphanumerics, as `generateName` appends.
pub(crate) fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..5).map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_formats_known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(4_107_542_399), "2100-02-28T23:59:59Z");
    }

    #[test]
    fn uids_are_version_4() {
        let uid = new_uid();
        let parts: Vec<_> = uid.split('-').map(str::len).collect();
        assert_eq!(parts, [8, 4, 4, 4, 12]);
        assert_eq!(&uid[14..15], "4");
        assert_ne!(uid, new_uid());
        assert!(random_suffix().bytes().all(|b| b"bcdfghjklmnpqrstvwxz2456789".contains(&b)));
    }
}
