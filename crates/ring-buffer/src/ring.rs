//! `Ring`: a growing ring that shrinks back to its normal size once a read empties it.

use std::fmt;
use std::iter::FusedIterator;

use crate::RingGrowing;

/// Sizes for a [`Ring`] (k8s.io/utils `buffer.RingOptions`).
///
/// # Examples
///
/// ```
/// use kcache_ring_buffer::RingOptions;
///
/// let opts = RingOptions { initial_size: 4, normal_size: 64 };
/// assert_eq!(RingOptions::default(), RingOptions { initial_size: 0, normal_size: 0 });
/// # let _ = opts;
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct RingOptions {
    /// Capacity allocated when the ring is created.
    pub initial_size: usize,
    /// Capacity the ring returns to when a read leaves it empty while it is larger than this.
    pub normal_size: usize,
}

/// A FIFO ring that doubles when full, like [`RingGrowing`], and gives memory back once drained.
///
/// Counterpart of k8s.io/utils `buffer.Ring[T]`: when a read leaves the ring empty and its capacity
/// is above [`RingOptions::normal_size`], the storage is replaced by a fresh allocation of the normal
/// size, so a burst does not pin its peak allocation after the consumer catches up.
///
/// # Examples
///
/// ```
/// use kcache_ring_buffer::{Ring, RingOptions};
///
/// let mut ring = Ring::new(RingOptions { initial_size: 2, normal_size: 2 });
/// ring.extend(0..5); // grows 2 -> 4 -> 8
/// assert_eq!(ring.capacity(), 8);
/// while ring.read_one().is_some() {}
/// assert_eq!(ring.capacity(), 2); // back to normal once empty
/// ```
#[derive(Clone)]
pub struct Ring<T> {
    /// The growing ring doing the work.
    inner: RingGrowing<T>,
    /// Capacity restored when a read empties the ring while it is larger.
    normal_size: usize,
}

impl<T> Ring<T> {
    /// Creates an empty ring with `opts.initial_size` slots.
    pub fn new(opts: RingOptions) -> Self {
        Self { inner: RingGrowing::with_capacity(opts.initial_size), normal_size: opts.normal_size }
    }

    /// Appends an item at the back, doubling the capacity first if the ring is full.
    ///
    /// # Panics
    ///
    /// Panics if the doubled capacity overflows `usize`.
    #[inline]
    pub fn write_one(&mut self, item: T) {
        self.inner.write_one(item);
    }

    /// Removes and returns the oldest item, or `None` when empty.
    ///
    /// If the ring is empty after the read and larger than its normal size, it shrinks to the normal
    /// size (as upstream, this also happens on a read that finds the ring already empty).
    #[inline]
    pub fn read_one(&mut self) -> Option<T> {
        let item = self.inner.read_one();
        self.shrink_if_drained();
        item
    }

    /// Returns a reference to the oldest item without removing it.
    #[inline]
    pub fn peek(&self) -> Option<&T> {
        self.inner.peek()
    }

    /// Number of items waiting to be read.
    #[inline]
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// Returns `true` when there is nothing to read.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// The ring's current capacity under the doubling policy.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.inner.capacity()
    }

    /// The capacity the ring shrinks back to once drained.
    pub fn normal_size(&self) -> usize {
        self.normal_size
    }

    /// Iterates over the items, oldest first, without consuming them.
    pub fn iter(&self) -> crate::Iter<'_, T> {
        self.inner.iter()
    }

    /// Removes every item, oldest first; the ring shrinks to its normal size when the iterator is
    /// dropped. Items not yet yielded at that point are dropped.
    ///
    /// # Examples
    ///
    /// ```
    /// use kcache_ring_buffer::{Ring, RingOptions};
    ///
    /// let mut ring = Ring::new(RingOptions { initial_size: 1, normal_size: 1 });
    /// ring.extend(["a", "b", "c"]);
    /// assert_eq!(ring.drain().collect::<String>(), "abc");
    /// assert_eq!(ring.capacity(), 1);
    /// ```
    pub fn drain(&mut self) -> RingDrain<'_, T> {
        RingDrain { ring: self }
    }

    #[inline]
    fn shrink_if_drained(&mut self) {
        if self.inner.is_empty() && self.inner.capacity() > self.normal_size {
            self.inner.reset(self.normal_size);
        }
    }
}

impl<T> Default for Ring<T> {
    fn default() -> Self {
        Self::new(RingOptions::default())
    }
}

impl<T: fmt::Debug> fmt::Debug for Ring<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ring")
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .field("normal_size", &self.normal_size)
            .field("items", &self.inner.iter().collect::<Vec<_>>())
            .finish()
    }
}

impl<T> Extend<T> for Ring<T> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        self.inner.extend(iter);
    }
}

impl<T> FromIterator<T> for Ring<T> {
    /// Collects into a ring with default options (initial and normal size 0).
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut ring = Self::default();
        ring.extend(iter);
        ring
    }
}

impl<T> IntoIterator for Ring<T> {
    type Item = T;
    type IntoIter = crate::IntoIter<T>;

    fn into_iter(self) -> crate::IntoIter<T> {
        self.inner.into_iter()
    }
}

/// Draining iterator over a [`Ring`], oldest first. Created by [`Ring::drain`].
///
/// When dropped it drops the items it did not yield and shrinks the ring to its normal size.
#[derive(Debug)]
pub struct RingDrain<'a, T> {
    ring: &'a mut Ring<T>,
}

impl<T> Iterator for RingDrain<'_, T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        // Read through the growing ring so the shrink happens once, in Drop, not per item.
        self.ring.inner.read_one()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.ring.len();
        (n, Some(n))
    }
}

impl<T> ExactSizeIterator for RingDrain<'_, T> {}
impl<T> FusedIterator for RingDrain<'_, T> {}

impl<T> Drop for RingDrain<'_, T> {
    fn drop(&mut self) {
        self.ring.inner.clear();
        self.ring.shrink_if_drained();
    }
}
