//! Property tests: Display/parse round trip, split covers the space exactly once, union and
//! overlaps agree with matching.

use kcache_shard_selector::{HASH_SPACE_END, ShardKey, ShardRange, ShardSelector};
use proptest::prelude::*;

fn key() -> impl Strategy<Value = ShardKey> {
    prop_oneof![Just(ShardKey::Uid), Just(ShardKey::Namespace)]
}

/// A range with bounds biased to the edges of the space (0, 2^64, neighbours) as well as anywhere.
fn range() -> impl Strategy<Value = ShardRange> {
    let bound =
        prop_oneof![Just(0u128), Just(1), Just(HASH_SPACE_END - 1), Just(HASH_SPACE_END), 0..=HASH_SPACE_END];
    (bound.clone(), bound).prop_filter_map("empty range", |(a, b)| {
        let (lo, hi) = (a.min(b), a.max(b));
        (lo < hi).then(|| ShardRange::new(lo as u64, hi).unwrap())
    })
}

fn selector() -> impl Strategy<Value = ShardSelector> {
    (key(), prop::collection::vec(range(), 1..5)).prop_map(|(k, r)| ShardSelector::new(k, r).unwrap())
}

proptest! {
    /// `parse(s.to_string()) == s`, and the rendering is a fixed point.
    #[test]
    fn display_parse_round_trip(s in selector()) {
        let text = s.to_string();
        let back = ShardSelector::parse(&text).unwrap();
        prop_assert_eq!(&back, &s);
        prop_assert_eq!(back.to_string(), text);
    }

    /// Union matches exactly what either side matches; overlaps is true exactly when some hash
    /// matches both (probed at every range edge, where a mistake would show).
    #[test]
    fn union_and_overlaps_agree_with_matching(a in selector(), b in selector(), probes in prop::collection::vec(any::<u64>(), 16)) {
        let b = ShardSelector::new(a.key(), b.ranges().to_vec()).unwrap();
        let u = a.union(&b).unwrap();
        let edges = a.ranges().iter().chain(b.ranges()).flat_map(|r| {
            let end = (r.end().min(u64::MAX as u128)) as u64;
            [r.start(), r.start().saturating_sub(1), end, end.saturating_sub(1)]
        });
        let mut any_both = false;
        for h in probes.into_iter().chain(edges) {
            prop_assert_eq!(u.matches_hash(h), a.matches_hash(h) || b.matches_hash(h), "hash {:#x}", h);
            any_both |= a.matches_hash(h) && b.matches_hash(h);
        }
        // Two ranges overlap iff max(start) is in both, which is one of the probed edges.
        prop_assert_eq!(a.overlaps(&b), any_both);
        // Union's ranges are sorted, disjoint and not touching.
        for w in u.ranges().windows(2) {
            prop_assert!(w[0].end() < u128::from(w[1].start()));
        }
    }

    /// Each hash is matched by exactly the one shard whose range holds it.
    #[test]
    fn split_has_one_owner_per_hash(n in 1usize..=64, h in any::<u64>()) {
        let shards = ShardSelector::split(ShardKey::Uid, n);
        prop_assert_eq!(shards.iter().filter(|s| s.matches_hash(h)).count(), 1);
    }
}

/// `split(n)` for every n in 1..=64: contiguous from 0 to 2^64 (so each hash is covered exactly
/// once), widths equal to within one.
#[test]
fn split_covers_the_space_exactly_once() {
    for n in 1..=64 {
        let shards = ShardSelector::split(ShardKey::Namespace, n);
        assert_eq!(shards.len(), n);
        let mut next = 0u128;
        let (mut min, mut max) = (u128::MAX, 0);
        for s in &shards {
            assert_eq!(s.key(), ShardKey::Namespace);
            let [r] = s.ranges() else { panic!("one range per shard") };
            assert_eq!(u128::from(r.start()), next, "n={n}: gap or overlap");
            next = r.end();
            min = min.min(r.width());
            max = max.max(r.width());
        }
        assert_eq!(next, HASH_SPACE_END, "n={n}");
        assert!(max - min <= 1, "n={n}: widths {min}..={max}");
    }
}
