//! `ShardSelector`: a field and one or more hash ranges, matched, formatted and combined as
//! apimachinery's `pkg/sharding` `shardSelector` (`selector.go`).

use std::fmt;
use std::str::FromStr;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::error::ShardSelectorError;
use crate::range::{HASH_SPACE_END, ShardRange, format_bound};
use crate::{ShardKey, fnv1a_64};

/// A shard selector: objects whose [`ShardKey`] hashes into one of its ranges.
///
/// The value of the `shardSelector` list/watch parameter (KEP-5866). Parse it with
/// [`parse`](Self::parse) (exactly kube-apiserver's grammar and errors), format it with `{}`
/// (exactly apimachinery's `String()`, which kube-apiserver echoes in `metadata.shardInfo`), match
/// objects with [`matches`](Self::matches). There is no "everything" selector: an unsharded
/// request omits the parameter (use `Option<ShardSelector>`).
///
/// # Examples
///
/// ```
/// use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
/// use kcache_shard_selector::{ShardKey, ShardSelector};
///
/// let halves = ShardSelector::split(ShardKey::Uid, 2);
/// assert_eq!(
///     halves[1].to_string(),
///     "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')"
/// );
/// let meta = ObjectMeta { uid: Some("a".into()), ..Default::default() }; // fnv1a("a") = 0xaf63...
/// assert!(halves[1].matches(&meta) && !halves[0].matches(&meta));
///
/// let parsed: ShardSelector = halves[1].to_string().parse()?;
/// assert_eq!(parsed, halves[1]);
/// # Ok::<(), kcache_shard_selector::ShardSelectorError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ShardSelector {
    /// The field every range hashes (the grammar allows one field per selector).
    key: ShardKey,
    /// Non-empty, in the order written (the order `Display` renders).
    ranges: Vec<ShardRange>,
}

impl ShardSelector {
    /// A selector on `key` matching any of `ranges`, kept in the given order.
    ///
    /// # Errors
    ///
    /// [`ShardSelectorError::Empty`] if `ranges` is empty.
    pub fn new(key: ShardKey, ranges: Vec<ShardRange>) -> Result<Self, ShardSelectorError> {
        if ranges.is_empty() {
            return Err(ShardSelectorError::Empty);
        }
        Ok(ShardSelector { key, ranges })
    }

    /// Parses a selector as kube-apiserver v1.36 does: a CEL expression of
    /// `shardRange(<path>, '<start>', '<end>')` terms joined by `||` (parentheses, either quote
    /// style and free whitespace allowed), paths `object.metadata.uid` or
    /// `object.metadata.namespace` (one per selector), bounds `0x` and 16 lowercase hex digits
    /// or `0x10000000000000000`, start < end.
    ///
    /// # Errors
    ///
    /// The [`ShardSelectorError`] whose message is the server's for the same input (see
    /// [`ShardSelectorError::Syntax`] for the one exception).
    ///
    /// # Examples
    ///
    /// ```
    /// use kcache_shard_selector::{ShardKey, ShardSelector};
    ///
    /// let s = ShardSelector::parse(r#"(shardRange(object.metadata.namespace,"0x0000000000000000","0x4000000000000000"))"#)?;
    /// assert_eq!(s.key(), ShardKey::Namespace);
    /// assert_eq!(s.ranges()[0].end(), 0x4000000000000000);
    /// assert_eq!(
    ///     ShardSelector::parse("shardRange(object.metadata.uid, '0x0', '0x8000000000000000')").unwrap_err().to_string(),
    ///     r#"hexStart must be a 0x-prefixed 16-digit hex value, got "0x0" (did you mean "0x0000000000000000"?)"#,
    /// );
    /// # Ok::<(), kcache_shard_selector::ShardSelectorError>(())
    /// ```
    pub fn parse(s: &str) -> Result<Self, ShardSelectorError> {
        crate::parse::parse(s)
    }

    /// The field the selector hashes.
    pub fn key(&self) -> ShardKey {
        self.key
    }

    /// The ranges, in the order written; never empty.
    pub fn ranges(&self) -> &[ShardRange] {
        &self.ranges
    }

    /// Whether `hash` lies in one of the ranges.
    pub fn matches_hash(&self, hash: u64) -> bool {
        self.ranges.iter().any(|r| r.contains(hash))
    }

    /// Whether the FNV-1a hash of `value` (a uid or namespace) lies in one of the ranges.
    pub fn matches_value(&self, value: &str) -> bool {
        self.matches_hash(fnv1a_64(value.as_bytes()))
    }

    /// Whether the object with this metadata is selected: its uid or namespace (an unset one is
    /// `""`, as apimachinery's accessor returns) hashes into one of the ranges.
    ///
    /// # Examples
    ///
    /// ```
    /// use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    /// use kcache_shard_selector::{ShardKey, ShardSelector};
    ///
    /// let all = ShardSelector::split(ShardKey::Namespace, 1).remove(0);
    /// assert!(all.matches(&ObjectMeta::default())); // cluster-scoped: namespace ""
    /// ```
    pub fn matches(&self, meta: &ObjectMeta) -> bool {
        self.matches_value(self.key.value(meta))
    }

    /// `n` selectors of one range each, equal contiguous ranges covering `[0, 2^64)` exactly
    /// once in order (widths differ by at most one): shard `i` of `n` is `split(key, n)[i]`.
    /// `n == 0` gives an empty vector.
    ///
    /// # Examples
    ///
    /// ```
    /// use kcache_shard_selector::{ShardKey, ShardSelector};
    ///
    /// let quarters = ShardSelector::split(ShardKey::Uid, 4);
    /// assert_eq!(quarters[1].ranges()[0].start(), 0x4000000000000000);
    /// assert!(ShardSelector::split(ShardKey::Uid, 0).is_empty());
    /// ```
    pub fn split(key: ShardKey, n: usize) -> Vec<ShardSelector> {
        let n = n as u128;
        let bound = |i: u128| i * HASH_SPACE_END / n;
        (0..n)
            .map(|i| {
                // bound(i) < bound(i + 1) since n <= usize::MAX < 2^64, so every width is >= 1.
                let range =
                    ShardRange::new(bound(i) as u64, bound(i + 1)).expect("non-empty range within the space");
                ShardSelector { key, ranges: vec![range] }
            })
            .collect()
    }

    /// The selector matching what either matches, its ranges sorted and merged where they
    /// overlap or touch (so `[0,a) ∪ [a,b)` is written `[0,b)`).
    ///
    /// # Errors
    ///
    /// [`ShardSelectorError::MixedKeys`] if the two hash different fields.
    ///
    /// # Examples
    ///
    /// ```
    /// use kcache_shard_selector::{ShardKey, ShardSelector};
    ///
    /// let q = ShardSelector::split(ShardKey::Uid, 4);
    /// let half = q[0].union(&q[1])?;
    /// assert_eq!(half, ShardSelector::split(ShardKey::Uid, 2)[0]);
    /// let ends = q[3].union(&q[0])?;
    /// assert_eq!(ends.ranges().len(), 2);
    /// # Ok::<(), kcache_shard_selector::ShardSelectorError>(())
    /// ```
    pub fn union(&self, other: &ShardSelector) -> Result<Self, ShardSelectorError> {
        if self.key != other.key {
            return Err(ShardSelectorError::MixedKeys { first: self.key, other: other.key });
        }
        let mut all: Vec<ShardRange> = self.ranges.iter().chain(&other.ranges).copied().collect();
        all.sort();
        let mut merged: Vec<ShardRange> = Vec::with_capacity(all.len());
        for r in all {
            match merged.last_mut() {
                Some(last) if u128::from(r.start()) <= last.end() => {
                    let end = last.end().max(r.end());
                    *last = ShardRange::new(last.start(), end).expect("wider than a valid range");
                }
                _ => merged.push(r),
            }
        }
        Ok(ShardSelector { key: self.key, ranges: merged })
    }

    /// Whether some object can match both. Selectors on different fields always can (an
    /// object's uid and namespace hash independently), so they overlap; on one field, whether
    /// some range of each overlaps.
    pub fn overlaps(&self, other: &ShardSelector) -> bool {
        self.key != other.key || self.ranges.iter().any(|a| other.ranges.iter().any(|b| a.overlaps(b)))
    }
}

impl fmt::Display for ShardSelector {
    /// apimachinery's `String()`: `shardRange(<path>, '<start>', '<end>')` terms joined by
    /// ` || `, bounds as `0x` and 16 lowercase hex digits (`0x10000000000000000` for 2^64).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(" || ")?;
            }
            write!(
                f,
                "shardRange({}, '{}', '{}')",
                self.key,
                format_bound(r.start().into()),
                format_bound(r.end())
            )?;
        }
        Ok(())
    }
}

impl FromStr for ShardSelector {
    type Err = ShardSelectorError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ShardSelector::parse(s)
    }
}
