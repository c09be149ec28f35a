//! Ranges as a deterministic function of the live member set: equal contiguous ranges over the
//! sorted members, or consistent hashing with virtual nodes (measured against each other in the
//! crate README; contiguous ranges are the default).

use std::collections::BTreeMap;

use kcache_shard_selector::{HASH_SPACE_END, fnv1a_64};

use crate::range_set::RangeSet;

/// How the hash space is divided among the live members. Every member computes the same
/// assignment from the same member set, so the strategy must be the same on every replica of a
/// group (it is published in each member Lease, and a member refuses a group whose members
/// disagree; see [`ShardCoordinator`](crate::ShardCoordinator)).
///
/// # Examples
///
/// ```
/// use kcache_sharding::{RangeSet, Strategy};
///
/// let members = ["b", "a", "c"];
/// let ranges = Strategy::ContiguousRanges.assign(&members);
/// // Sorted by identity: "a" gets the first third.
/// assert_eq!(ranges["a"].ranges()[0].0, 0);
/// let all = ranges.values().fold(RangeSet::empty(), |acc, r| acc.union(r));
/// assert!(all.is_full());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Strategy {
    /// N equal contiguous ranges, one per member, in the order of the sorted identities (member
    /// `i` of `n` gets `[i * 2^64 / n, (i + 1) * 2^64 / n)`). One `shardRange` term per
    /// member; about half the keys move when a member joins or leaves in the middle of the order.
    ContiguousRanges,
    /// Consistent hashing: each member places `vnodes` points on the ring, point `i` at
    /// SplitMix64's finalizer of `fnv1a64(identity) + (i + 1) * 0x9e3779b97f4a7c15` (FNV-1a alone
    /// puts the points of `"id#0"`, `"id#1"`, … next to each other); a point owns the hash values from it up to the next point.
    /// About `1/n` of the keys move when a member joins or leaves, but a member's share is a
    /// union of about `vnodes` ranges: that many `shardRange` terms in its selector.
    ConsistentHashing {
        /// Points per member (at least 1).
        vnodes: u16,
    },
}

/// Consistent hashing with 64 virtual nodes: few keys move when a member joins or leaves, and a
/// member that crashes hands over only its own share (see the crate README for the measurement).
impl Default for Strategy {
    fn default() -> Self {
        Strategy::ConsistentHashing { vnodes: 64 }
    }
}

impl Strategy {
    /// The ranges of each member, keyed by identity. Identities are deduplicated; the ranges of
    /// all members are disjoint and cover the whole hash space (empty input: empty map).
    pub fn assign<S: AsRef<str>>(&self, members: &[S]) -> BTreeMap<String, RangeSet> {
        let mut ids: Vec<&str> = members.iter().map(AsRef::as_ref).collect();
        ids.sort_unstable();
        ids.dedup();
        let mut out = BTreeMap::new();
        if ids.is_empty() {
            return out;
        }
        match *self {
            Strategy::ContiguousRanges => {
                for (i, id) in ids.iter().enumerate() {
                    let r = equal_range(i, ids.len());
                    out.insert((*id).to_owned(), RangeSet::from_range(r.0, r.1));
                }
            }
            Strategy::ConsistentHashing { vnodes } => {
                let mut points: Vec<(u64, &str)> = Vec::with_capacity(ids.len() * usize::from(vnodes.max(1)));
                for id in &ids {
                    let base = fnv1a_64(id.as_bytes());
                    for v in 0..vnodes.max(1) {
                        points.push((vnode_point(base, v), id));
                    }
                }
                // Ties (two points on one hash) are broken by identity, so the order is total.
                points.sort_unstable();
                points.dedup_by_key(|p| p.0);
                let mut parts: BTreeMap<&str, Vec<(u64, u128)>> = BTreeMap::new();
                for (i, (start, id)) in points.iter().enumerate() {
                    let end = points.get(i + 1).map_or(HASH_SPACE_END, |p| u128::from(p.0));
                    parts.entry(id).or_default().push((*start, end));
                }
                // The values below the first point belong to the last point's member (the ring wraps).
                if let (Some(first), Some(last)) = (points.first(), points.last()) {
                    parts.entry(last.1).or_default().push((0, u128::from(first.0)));
                }
                for id in &ids {
                    let ranges = parts.remove(id).unwrap_or_default();
                    out.insert((*id).to_owned(), RangeSet::from_ranges(ranges));
                }
            }
        }
        out
    }
}

/// Range `i` of `n` equal contiguous ranges: `[i * 2^64 / n, (i + 1) * 2^64 / n)`; the last ends
/// at `2^64`. `n >= 1`, `i < n`.
pub(crate) fn equal_range(i: usize, n: usize) -> (u64, u128) {
    let bound = |k: usize| HASH_SPACE_END * k as u128 / n as u128;
    (bound(i) as u64, bound(i + 1))
}

/// Point `v` of the member whose identity hashes to `base`: SplitMix64's output function, so
/// the points of one member spread over the whole ring.
fn vnode_point(base: u64, v: u16) -> u64 {
    let mut z = base.wrapping_add((u64::from(v) + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The share of the hash space whose owner differs between two assignments (a value owned by
/// nobody in one of them counts as moved).
///
/// # Examples
///
/// ```
/// use kcache_sharding::{moved_fraction, Strategy};
///
/// let before = Strategy::ContiguousRanges.assign(&["a", "b"]);
/// let after = Strategy::ContiguousRanges.assign(&["a", "b", "c"]);
/// // "a" keeps [0, 1/3), "b" keeps [1/2, 2/3): half of the space moves.
/// assert!((moved_fraction(&before, &after) - 0.5).abs() < 1e-9);
/// ```
pub fn moved_fraction(before: &BTreeMap<String, RangeSet>, after: &BTreeMap<String, RangeSet>) -> f64 {
    let kept: u128 =
        before.iter().filter_map(|(id, r)| after.get(id).map(|a| r.intersection(a).measure())).sum();
    1.0 - kept as f64 / HASH_SPACE_END as f64
}

/// The largest member's share divided by the ideal share `1/n` (1.0 is perfect balance).
pub fn imbalance(assignment: &BTreeMap<String, RangeSet>) -> f64 {
    let n = assignment.len() as f64;
    assignment.values().map(RangeSet::fraction).fold(0.0, f64::max) * n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("replica-{i}")).collect()
    }

    #[test]
    fn both_strategies_partition_the_space() {
        for strategy in [Strategy::ContiguousRanges, Strategy::ConsistentHashing { vnodes: 64 }] {
            for n in 1..=9 {
                let a = strategy.assign(&ids(n));
                let mut all = RangeSet::empty();
                for r in a.values() {
                    assert!(!all.overlaps(r), "{strategy:?} n={n}: overlapping assignment");
                    all = all.union(r);
                }
                assert!(all.is_full(), "{strategy:?} n={n}: not covered");
            }
        }
    }
}
