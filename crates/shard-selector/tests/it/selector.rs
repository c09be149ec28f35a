//! Matching and formatting: apimachinery `selector_test.go` rewritten in Rust, plus split, union
//! and overlaps.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kcache_shard_selector::{
    HASH_SPACE_END, ShardKey, ShardRange, ShardSelector, ShardSelectorError, fnv1a_64,
};

fn meta() -> ObjectMeta {
    ObjectMeta {
        uid: Some("test-uid-123".into()),
        name: Some("test-name".into()),
        namespace: Some("test-namespace".into()),
        ..Default::default()
    }
}

fn sel(key: ShardKey, start: u64, end: u128) -> ShardSelector {
    ShardSelector::new(key, vec![ShardRange::new(start, end).unwrap()]).unwrap()
}

/// apimachinery `TestSelectorMatches`: full range, a range starting at the hash, a range above
/// it and one below it.
#[test]
fn selector_matches() {
    let hash = fnv1a_64(b"test-uid-123");
    let m = meta();
    assert!(sel(ShardKey::Uid, 0, HASH_SPACE_END).matches(&m), "full range");
    assert!(sel(ShardKey::Uid, hash, u128::from(hash) + 1).matches(&m), "hash in specific range");
    assert_eq!(
        sel(ShardKey::Uid, u64::MAX, HASH_SPACE_END).matches(&m),
        hash == u64::MAX,
        "hash below start"
    );
    assert_eq!(sel(ShardKey::Uid, 0, 1).matches(&m), hash == 0, "hash at or above end");
    assert!(!sel(ShardKey::Uid, 0, u128::from(hash)).matches(&m), "end is exclusive");
    let ns = fnv1a_64(b"test-namespace");
    assert!(sel(ShardKey::Namespace, ns, u128::from(ns) + 1).matches(&m), "namespace key");
    assert!(ShardSelector::split(ShardKey::Uid, 7).iter().filter(|s| s.matches_value("x")).count() == 1);
}

/// apimachinery `TestSelectorEmpty`: there is no empty selector here; building one is an error
/// (an unsharded request omits the parameter).
#[test]
fn no_empty_selector() {
    assert_eq!(ShardSelector::new(ShardKey::Uid, vec![]), Err(ShardSelectorError::Empty));
}

/// apimachinery `TestSelectorString`, on the canonical bounds (the parser accepts nothing else,
/// so Go's `'0x00'` example cannot occur on the wire).
#[test]
fn selector_string() {
    let s = ShardSelector::new(
        ShardKey::Namespace,
        vec![ShardRange::new(0, 0x80).unwrap(), ShardRange::new(0xff, HASH_SPACE_END).unwrap()],
    )
    .unwrap();
    assert_eq!(
        s.to_string(),
        "shardRange(object.metadata.namespace, '0x0000000000000000', '0x0000000000000080') || \
         shardRange(object.metadata.namespace, '0x00000000000000ff', '0x10000000000000000')"
    );
}

/// `ShardRange::new` rejects empty, inverted and out-of-space ranges with the server's message.
#[test]
fn range_bounds() {
    assert_eq!(
        ShardRange::new(8, 8).unwrap_err().to_string(),
        "shard range start 0x0000000000000008 must be less than end 0x0000000000000008"
    );
    assert!(matches!(ShardRange::new(0, HASH_SPACE_END + 1), Err(ShardSelectorError::EndOutOfRange { .. })));
    assert_eq!(ShardRange::full().width(), HASH_SPACE_END);
    assert_eq!(ShardRange::new(1, 3).unwrap().to_string(), "[0x0000000000000001, 0x0000000000000003)");
}

/// Union merges touching ranges and keeps disjoint ones; different keys cannot be united.
#[test]
fn union_and_overlaps() {
    let thirds = ShardSelector::split(ShardKey::Uid, 3);
    let outer = thirds[2].union(&thirds[0]).unwrap();
    assert_eq!(outer.ranges().len(), 2);
    assert!(!outer.overlaps(&thirds[1]));
    assert!(outer.overlaps(&thirds[0]));
    let all = outer.union(&thirds[1]).unwrap();
    assert_eq!(all.ranges(), &[ShardRange::full()]);
    let ns = ShardSelector::split(ShardKey::Namespace, 3);
    assert!(matches!(thirds[0].union(&ns[1]), Err(ShardSelectorError::MixedKeys { .. })));
    assert!(thirds[0].overlaps(&ns[1]), "different fields can select one object");
}

/// `split(0)` is empty; `split(1)` is the whole space.
#[test]
fn split_edges() {
    assert!(ShardSelector::split(ShardKey::Uid, 0).is_empty());
    assert_eq!(ShardSelector::split(ShardKey::Uid, 1)[0].ranges(), &[ShardRange::full()]);
    let thirds = ShardSelector::split(ShardKey::Uid, 3);
    assert_eq!(thirds[1].ranges()[0].start(), 0x5555555555555555);
    assert_eq!(thirds[2].ranges()[0].end(), HASH_SPACE_END);
}
