//! One half-open range `[start, end)` of the 64-bit hash space: a `shardRange(...)` term's
//! bounds (apimachinery's `ShardRangeRequirement.Start` / `End`, kept as numbers here).

use std::fmt;

use crate::error::ShardSelectorError;

/// 2^64: the exclusive end of the hash space, the only bound written with 17 hex digits
/// (`0x10000000000000000`).
pub const HASH_SPACE_END: u128 = 1 << 64;

/// A half-open range `[start, end)` of FNV-1a hashes, `start < end <= 2^64`.
///
/// Displays as the two literals of a `shardRange` term, `'0x0000000000000000', '0x8000000000000000'`
/// being rendered by [`ShardSelector`](crate::ShardSelector); `{}` on a range alone gives
/// `[0x0000000000000000, 0x8000000000000000)`.
///
/// # Examples
///
/// ```
/// use kcache_shard_selector::ShardRange;
///
/// let low = ShardRange::new(0, 1 << 63)?;
/// assert!(low.contains(0) && !low.contains(1 << 63));
/// assert!(low.overlaps(&ShardRange::full()));
/// assert!(ShardRange::new(5, 5).is_err());
/// # Ok::<(), kcache_shard_selector::ShardSelectorError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShardRange {
    /// Inclusive lower bound.
    start: u64,
    /// Exclusive upper bound; `start < end <= 2^64` (checked by `new`).
    end: u128,
}

impl ShardRange {
    /// The range `[start, end)`.
    ///
    /// # Errors
    ///
    /// [`ShardSelectorError::StartNotBeforeEnd`] unless `start < end` (the server's message),
    /// [`ShardSelectorError::EndOutOfRange`] if `end > 2^64`.
    pub fn new(start: u64, end: u128) -> Result<ShardRange, ShardSelectorError> {
        if end > HASH_SPACE_END {
            return Err(ShardSelectorError::EndOutOfRange { end });
        }
        if u128::from(start) >= end {
            return Err(ShardSelectorError::StartNotBeforeEnd {
                start: format_bound(start.into()),
                end: format_bound(end),
            });
        }
        Ok(ShardRange { start, end })
    }

    /// The whole hash space, `[0, 2^64)`.
    ///
    /// # Examples
    ///
    /// ```
    /// use kcache_shard_selector::ShardRange;
    ///
    /// assert!(ShardRange::full().contains(u64::MAX));
    /// ```
    pub const fn full() -> ShardRange {
        ShardRange { start: 0, end: HASH_SPACE_END }
    }

    /// The inclusive lower bound.
    pub const fn start(&self) -> u64 {
        self.start
    }

    /// The exclusive upper bound, at most 2^64.
    pub const fn end(&self) -> u128 {
        self.end
    }

    /// The number of hashes in the range, `end - start` (at least 1, at most 2^64).
    pub const fn width(&self) -> u128 {
        self.end - self.start as u128
    }

    /// Whether `start <= hash < end`: the server's test for one term.
    pub fn contains(&self, hash: u64) -> bool {
        self.start <= hash && u128::from(hash) < self.end
    }

    /// Whether some hash lies in both ranges.
    pub fn overlaps(&self, other: &ShardRange) -> bool {
        u128::from(self.start) < other.end && u128::from(other.start) < self.end
    }
}

impl fmt::Display for ShardRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}, {})", format_bound(self.start.into()), format_bound(self.end))
    }
}

/// A bound as the wire writes it: `0x` and 16 lowercase hex digits, or `0x10000000000000000`
/// for 2^64.
pub(crate) fn format_bound(value: u128) -> String {
    format!("0x{value:016x}")
}
