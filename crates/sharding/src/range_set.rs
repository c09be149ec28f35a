//! A set of 64-bit hash values as sorted, disjoint, non-adjacent half-open ranges: what a member
//! is assigned, publishes and serves, and the union of `shardRange` terms a selector sends.

use std::fmt;

use kcache_shard_selector::{HASH_SPACE_END, ShardKey, ShardRange, ShardSelector};

/// A set of FNV-1a 64 hash values, kept as sorted, disjoint half-open ranges `[start, end)`
/// with `end <= 2^64`; adjacent ranges are merged, so two equal sets have equal representations.
///
/// # Examples
///
/// ```
/// use kcache_sharding::RangeSet;
///
/// let a = RangeSet::from_range(0, 1 << 63);
/// let b = RangeSet::from_range(1 << 62, 1 << 64);
/// assert_eq!(a.union(&b), RangeSet::full());
/// assert_eq!(a.intersection(&b), RangeSet::from_range(1 << 62, 1 << 63));
/// assert!(a.contains(5) && !b.contains(5));
/// assert_eq!(a.measure(), 1 << 63);
/// ```
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct RangeSet {
    /// Sorted by start; `start < end`; each range ends strictly before the next starts
    /// (`end < next.start`: adjacent ranges are merged).
    ranges: Vec<(u64, u128)>,
}

impl fmt::Debug for RangeSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut list = f.debug_list();
        for (s, e) in &self.ranges {
            list.entry(&format_args!("{s:#018x}..{e:#018x}"));
        }
        list.finish()
    }
}

impl RangeSet {
    /// The empty set.
    pub fn empty() -> Self {
        Self::default()
    }

    /// The whole hash space, `[0, 2^64)`.
    pub fn full() -> Self {
        Self { ranges: vec![(0, HASH_SPACE_END)] }
    }

    /// `[start, end)`; empty when `start >= end`. `end` is clamped to `2^64`.
    pub fn from_range(start: u64, end: u128) -> Self {
        let end = end.min(HASH_SPACE_END);
        if u128::from(start) >= end { Self::empty() } else { Self { ranges: vec![(start, end)] } }
    }

    /// The union of any ranges (each `[start, end)`, empty ones ignored).
    pub fn from_ranges(ranges: impl IntoIterator<Item = (u64, u128)>) -> Self {
        let mut v: Vec<(u64, u128)> = ranges
            .into_iter()
            .map(|(s, e)| (s, e.min(HASH_SPACE_END)))
            .filter(|(s, e)| u128::from(*s) < *e)
            .collect();
        v.sort_unstable();
        let mut out: Vec<(u64, u128)> = Vec::with_capacity(v.len());
        for (s, e) in v {
            match out.last_mut() {
                // Overlapping or adjacent: merge, so equal sets compare equal.
                Some(last) if u128::from(s) <= last.1 => last.1 = last.1.max(e),
                _ => out.push((s, e)),
            }
        }
        Self { ranges: out }
    }

    /// The ranges, sorted, disjoint and non-adjacent.
    pub fn ranges(&self) -> &[(u64, u128)] {
        &self.ranges
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Whether the set is the whole hash space.
    pub fn is_full(&self) -> bool {
        self.ranges == [(0, HASH_SPACE_END)]
    }

    /// How many hash values the set holds (`2^64` for the full set).
    pub fn measure(&self) -> u128 {
        self.ranges.iter().map(|(s, e)| e - u128::from(*s)).sum()
    }

    /// The share of the hash space the set holds, in `[0, 1]`.
    pub fn fraction(&self) -> f64 {
        self.measure() as f64 / HASH_SPACE_END as f64
    }

    /// Whether `hash` is in the set.
    pub fn contains(&self, hash: u64) -> bool {
        let h = u128::from(hash);
        // The last range starting at or before `hash` is the only candidate.
        let i = self.ranges.partition_point(|(s, _)| *s <= hash);
        i > 0 && h < self.ranges[i - 1].1
    }

    /// Whether the two sets share a hash value.
    pub fn overlaps(&self, other: &RangeSet) -> bool {
        !self.intersection(other).is_empty()
    }

    /// Whether every value of `self` is in `other`.
    pub fn is_subset(&self, other: &RangeSet) -> bool {
        self.difference(other).is_empty()
    }

    /// Values in either set.
    pub fn union(&self, other: &RangeSet) -> RangeSet {
        RangeSet::from_ranges(self.ranges.iter().chain(&other.ranges).copied())
    }

    /// Values in both sets.
    pub fn intersection(&self, other: &RangeSet) -> RangeSet {
        let (mut i, mut j, mut out) = (0, 0, Vec::new());
        while i < self.ranges.len() && j < other.ranges.len() {
            let (a, b) = (self.ranges[i], other.ranges[j]);
            let start = a.0.max(b.0);
            let end = a.1.min(b.1);
            if u128::from(start) < end {
                out.push((start, end));
            }
            if a.1 < b.1 { i += 1 } else { j += 1 }
        }
        RangeSet::from_ranges(out)
    }

    /// Values in `self` but not in `other`.
    pub fn difference(&self, other: &RangeSet) -> RangeSet {
        self.intersection(&other.complement())
    }

    /// Values not in the set.
    pub fn complement(&self) -> RangeSet {
        let mut out = Vec::with_capacity(self.ranges.len() + 1);
        let mut next: u128 = 0;
        for (s, e) in &self.ranges {
            if next < u128::from(*s) {
                out.push((next as u64, u128::from(*s)));
            }
            next = *e;
        }
        if next < HASH_SPACE_END {
            out.push((next as u64, HASH_SPACE_END));
        }
        RangeSet { ranges: out }
    }

    /// The selector a member sends to serve this set: one `shardRange` term per range, on `key`;
    /// `None` for the empty set (a selector cannot be empty: serve nothing instead).
    ///
    /// # Examples
    ///
    /// ```
    /// use kcache_sharding::RangeSet;
    /// use kcache_shard_selector::ShardKey;
    ///
    /// let half = RangeSet::from_range(0, 1 << 63);
    /// assert_eq!(
    ///     half.to_selector(ShardKey::Uid).unwrap().to_string(),
    ///     "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"
    /// );
    /// assert!(RangeSet::empty().to_selector(ShardKey::Uid).is_none());
    /// ```
    pub fn to_selector(&self, key: ShardKey) -> Option<ShardSelector> {
        let ranges = self
            .ranges
            .iter()
            .map(|(s, e)| ShardRange::new(*s, *e).expect("a RangeSet keeps start < end <= 2^64"))
            .collect();
        ShardSelector::new(key, ranges).ok()
    }

    /// The hash values a selector matches.
    pub fn from_selector(selector: &ShardSelector) -> RangeSet {
        RangeSet::from_ranges(selector.ranges().iter().map(|r| (r.start(), r.end())))
    }

    /// The canonical text a member publishes in its Lease: `start-end` pairs in lowercase hex
    /// (16 digits, `end` 17 digits when it is `2^64`) separated by commas; empty for the empty
    /// set. Read back with [`RangeSet::parse_annotation`].
    pub fn to_annotation(&self) -> String {
        let mut s = String::with_capacity(self.ranges.len() * 36);
        for (i, (a, b)) in self.ranges.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            s.push_str(&format!("{a:016x}-{b:016x}"));
        }
        s
    }

    /// Parses [`RangeSet::to_annotation`]'s text; `None` when it is malformed (a member whose
    /// annotation cannot be read is treated as serving everything: the safe reading).
    pub fn parse_annotation(text: &str) -> Option<RangeSet> {
        let text = text.trim();
        if text.is_empty() {
            return Some(RangeSet::empty());
        }
        let mut v = Vec::new();
        for part in text.split(',') {
            let (a, b) = part.trim().split_once('-')?;
            let a = u64::from_str_radix(a, 16).ok()?;
            let b = u128::from_str_radix(b, 16).ok()?;
            if u128::from(a) >= b || b > HASH_SPACE_END {
                return None;
            }
            v.push((a, b));
        }
        Some(RangeSet::from_ranges(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complement_of_empty_is_full_and_back() {
        assert_eq!(RangeSet::empty().complement(), RangeSet::full());
        assert_eq!(RangeSet::full().complement(), RangeSet::empty());
        let a = RangeSet::from_ranges([(5, 10), (20, 30)]);
        assert_eq!(a.complement().complement(), a);
        assert_eq!(a.union(&a.complement()), RangeSet::full());
    }

    #[test]
    fn adjacent_ranges_merge_and_contains_respects_ends() {
        let a = RangeSet::from_ranges([(10, 20), (0, 10), (30, 40)]);
        assert_eq!(a.ranges(), &[(0, 20), (30, 40)]);
        assert!(a.contains(0) && a.contains(19) && !a.contains(20) && a.contains(39) && !a.contains(40));
        assert!(RangeSet::full().contains(u64::MAX));
    }

    #[test]
    fn annotation_round_trips_and_rejects_garbage() {
        let a = RangeSet::from_ranges([(0, 10), (1 << 63, HASH_SPACE_END)]);
        assert_eq!(a.to_annotation(), "0000000000000000-000000000000000a,8000000000000000-10000000000000000");
        assert_eq!(RangeSet::parse_annotation(&a.to_annotation()), Some(a));
        assert_eq!(RangeSet::parse_annotation(""), Some(RangeSet::empty()));
        assert_eq!(RangeSet::parse_annotation("zz-1"), None);
        assert_eq!(RangeSet::parse_annotation("10-5"), None);
    }
}
