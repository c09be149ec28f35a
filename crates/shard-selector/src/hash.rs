//! The shard hash: 64-bit FNV-1a over a field value's bytes, as apimachinery's `HashField`
//! (`pkg/sharding/hash.go`, Go's `hash/fnv` `New64a`).

/// FNV-1a's 64-bit offset basis.
const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
/// FNV-1a's 64-bit prime.
const PRIME: u64 = 0x0000_0100_0000_01b3;

/// The 64-bit FNV-1a hash of `bytes`: the hash kube-apiserver places objects in shards by.
///
/// # Examples
///
/// ```
/// use kcache_shard_selector::fnv1a_64;
///
/// // FNV-1a of the empty input is the offset basis.
/// assert_eq!(fnv1a_64(b""), 0xcbf29ce484222325);
/// assert_eq!(fnv1a_64(b"a"), 0xaf63dc4c8601ec8c);
/// ```
pub fn fnv1a_64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(OFFSET_BASIS, |hash, &b| (hash ^ u64::from(b)).wrapping_mul(PRIME))
}

/// The hash of `value` as apimachinery's `HashField` renders it: 16 lowercase hex digits, no
/// `0x` prefix.
///
/// # Examples
///
/// ```
/// use kcache_shard_selector::hash_hex;
///
/// assert_eq!(hash_hex(""), "cbf29ce484222325");
/// assert_eq!(hash_hex("a"), "af63dc4c8601ec8c");
/// ```
pub fn hash_hex(value: &str) -> String {
    format!("{:016x}", fnv1a_64(value.as_bytes()))
}
