//! The hash: apimachinery's `hash_test.go`, plus published FNV-1a vectors.

use kcache_shard_selector::{fnv1a_64, hash_hex};

/// apimachinery `TestHashField`: 16 lowercase hex digits, deterministic, distinct for distinct
/// inputs.
#[test]
fn hash_field_renders_16_lowercase_hex_digits() {
    for input in ["", "abc", "test-uid-12345", "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"] {
        let h = hash_hex(input);
        assert_eq!(h.len(), 16, "{input:?} -> {h}");
        assert!(h.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')), "{input:?} -> {h}");
    }
    assert_eq!(hash_hex("test"), hash_hex("test"));
    assert_ne!(hash_hex("test"), hash_hex("different"));
}

/// The FNV-1a reference vectors (Fowler, Noll and Vo's test suite), as Go's `hash/fnv` passes
/// them (`fnv_test.go`'s `golden64a`).
#[test]
fn fnv1a_64_matches_the_reference_vectors() {
    for (input, want) in [
        (&b""[..], 0xcbf29ce484222325u64),
        (b"a", 0xaf63dc4c8601ec8c),
        (b"ab", 0x089c4407b545986a),
        (b"abc", 0xe71fa2190541574b),
    ] {
        assert_eq!(fnv1a_64(input), want, "{input:?}");
    }
    assert_eq!(hash_hex("a"), "af63dc4c8601ec8c");
}
