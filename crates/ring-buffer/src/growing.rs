//! `RingGrowing`: a FIFO ring that doubles its capacity when full and never shrinks.

use std::collections::VecDeque;
use std::fmt;
use std::iter::FusedIterator;

use crate::DEFAULT_RING_SIZE;

/// A FIFO ring buffer that doubles its capacity whenever a write finds it full.
///
/// Counterpart of k8s.io/utils `buffer.TypedRingGrowing[T]`. Reads move values out, so the buffer
/// never keeps a consumed item alive. See the [crate documentation](crate) for the growth policy.
///
/// Storage is a [`VecDeque`]; what this type adds is the capacity policy (reported by
/// [`capacity`](Self::capacity) exactly as upstream computes it, independent of the allocator) and
/// its guarantees. Growth costs one copy of the backlog at each power of two, so writes are amortised
/// O(1) and peak memory is at most twice the backlog.
///
/// # Examples
///
/// ```
/// use kcache_ring_buffer::RingGrowing;
///
/// let mut ring = RingGrowing::new(); // capacity 0
/// ring.write_one(1);
/// assert_eq!(ring.capacity(), 16); // DEFAULT_RING_SIZE
/// assert_eq!(ring.read_one(), Some(1));
/// assert_eq!(ring.read_one(), None);
/// ```
pub struct RingGrowing<T> {
    /// The items, oldest first. Invariant: `buf.len() <= cap <= buf.capacity()`.
    buf: VecDeque<T>,
    /// The capacity under the doubling policy: the initial capacity times a power of two (or
    /// [`DEFAULT_RING_SIZE`] times a power of two when created empty). For sized items it equals
    /// `buf.capacity()` (allocations are made with `with_capacity` / `reserve_exact`); for
    /// zero-sized items, whose `VecDeque` never fills, it is tracked here alone.
    cap: usize,
}

impl<T> RingGrowing<T> {
    /// Creates an empty ring with capacity 0; the first write grows it to [`DEFAULT_RING_SIZE`].
    ///
    /// Does not allocate.
    ///
    /// # Examples
    ///
    /// ```
    /// let ring = kcache_ring_buffer::RingGrowing::<u8>::new();
    /// assert_eq!(ring.capacity(), 0);
    /// ```
    pub const fn new() -> Self {
        Self { buf: VecDeque::new(), cap: 0 }
    }

    /// Creates an empty ring with room for `capacity` items before it first grows.
    ///
    /// Informers use [`LISTENER_INITIAL_CAPACITY`](crate::LISTENER_INITIAL_CAPACITY).
    ///
    /// # Examples
    ///
    /// ```
    /// use kcache_ring_buffer::{RingGrowing, LISTENER_INITIAL_CAPACITY};
    ///
    /// let ring = RingGrowing::<u64>::with_capacity(LISTENER_INITIAL_CAPACITY);
    /// assert_eq!(ring.capacity(), 1024);
    /// ```
    pub fn with_capacity(capacity: usize) -> Self {
        let buf = VecDeque::with_capacity(capacity);
        let cap = if size_of::<T>() == 0 { capacity } else { buf.capacity() };
        Self { buf, cap }
    }

    /// Appends an item at the back, doubling the capacity first if the ring is full.
    ///
    /// # Panics
    ///
    /// Panics if the doubled capacity overflows `usize` or the allocation fails, as
    /// [`VecDeque::push_back`] does.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut ring = kcache_ring_buffer::RingGrowing::with_capacity(1);
    /// ring.write_one('x');
    /// ring.write_one('y');
    /// assert_eq!(ring.capacity(), 2);
    /// ```
    #[inline]
    pub fn write_one(&mut self, item: T) {
        // For sized items the allocation is kept at exactly `cap` slots (see `grow`), so this is
        // the test `VecDeque::push_back` makes itself. The hot path below is dominated by "not
        // full", which lets the optimiser drop `push_back`'s own check: the growth policy costs
        // nothing per write. Zero-sized items never fill a `VecDeque`; their logical capacity is
        // tracked through `cap` alone.
        let full = if size_of::<T>() == 0 {
            self.buf.len() == self.cap
        } else {
            self.buf.len() == self.buf.capacity()
        };
        if full {
            self.grow_and_write(item);
            return;
        }
        self.buf.push_back(item);
    }

    #[cold]
    #[inline(never)]
    fn grow_and_write(&mut self, item: T) {
        self.grow();
        self.buf.push_back(item);
    }

    /// Removes and returns the oldest item, or `None` when the ring is empty.
    ///
    /// The value is moved out: the ring keeps no reference to it.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut ring: kcache_ring_buffer::RingGrowing<_> = [1, 2].into_iter().collect();
    /// assert_eq!(ring.read_one(), Some(1));
    /// assert_eq!(ring.read_one(), Some(2));
    /// assert_eq!(ring.read_one(), None);
    /// ```
    #[inline]
    pub fn read_one(&mut self) -> Option<T> {
        self.buf.pop_front()
    }

    /// Returns a reference to the oldest item without removing it.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut ring = kcache_ring_buffer::RingGrowing::new();
    /// ring.write_one(7);
    /// assert_eq!(ring.peek(), Some(&7));
    /// assert_eq!(ring.len(), 1);
    /// ```
    #[inline]
    pub fn peek(&self) -> Option<&T> {
        self.buf.front()
    }

    /// Number of items waiting to be read (upstream `Len`).
    #[inline]
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Returns `true` when there is nothing to read.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The ring's capacity under the doubling policy (upstream `Cap`).
    ///
    /// This is the logical capacity: how many items fit before the next doubling. The allocation
    /// behind it may be slightly larger.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Drops every item. The capacity is unchanged.
    pub fn clear(&mut self) {
        self.buf.clear();
    }

    /// Iterates over the items, oldest first, without consuming them.
    ///
    /// # Examples
    ///
    /// ```
    /// let ring: kcache_ring_buffer::RingGrowing<_> = (1..=3).collect();
    /// assert_eq!(ring.iter().sum::<i32>(), 6);
    /// assert_eq!(ring.len(), 3);
    /// ```
    pub fn iter(&self) -> Iter<'_, T> {
        Iter { inner: self.buf.iter() }
    }

    /// Removes every item, returning them oldest first.
    ///
    /// Like [`Vec::drain`], items the iterator has not yielded when it is dropped are dropped too;
    /// the ring is empty afterwards and keeps its capacity.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut ring: kcache_ring_buffer::RingGrowing<_> = (0..4).collect();
    /// let firsts: Vec<_> = ring.drain().take(2).collect();
    /// assert_eq!(firsts, [0, 1]);
    /// assert!(ring.is_empty());
    /// ```
    pub fn drain(&mut self) -> Drain<'_, T> {
        Drain { inner: self.buf.drain(..) }
    }

    /// Replaces the storage with an empty allocation of `capacity` slots, dropping every item.
    pub(crate) fn reset(&mut self, capacity: usize) {
        *self = Self::with_capacity(capacity);
    }

    fn grow(&mut self) {
        let new_cap = if self.cap == 0 {
            DEFAULT_RING_SIZE
        } else {
            self.cap.checked_mul(2).expect("ring buffer capacity overflow")
        };
        // `reserve_exact` keeps the allocation at the policy's size rather than VecDeque's own
        // rounding, so peak memory is what the documentation promises. VecDeque copies the
        // wrapped-around tail into place, preserving FIFO order.
        self.buf.reserve_exact(new_cap - self.buf.len());
        // `reserve_exact` allocates exactly what was asked for today; should the standard library
        // ever round up, report the real capacity so `len == capacity()` keeps meaning "full".
        self.cap = if size_of::<T>() == 0 { new_cap } else { self.buf.capacity().max(new_cap) };
    }
}

impl<T: Clone> Clone for RingGrowing<T> {
    /// Clones the items into storage of the same logical capacity, so the clone reports the same
    /// [`capacity`](Self::capacity) and grows at the same write as the original.
    ///
    /// (A derived clone would copy `VecDeque`, which allocates only `len` slots: the clone would
    /// then find itself full, and double, long before the original.)
    fn clone(&self) -> Self {
        let mut ring = Self::with_capacity(self.cap);
        ring.buf.extend(self.buf.iter().cloned());
        ring
    }
}

impl<T> Default for RingGrowing<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: fmt::Debug> fmt::Debug for RingGrowing<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RingGrowing")
            .field("len", &self.len())
            .field("capacity", &self.cap)
            .field("items", &self.buf)
            .finish()
    }
}

impl<T> Extend<T> for RingGrowing<T> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        for item in iter {
            self.write_one(item);
        }
    }
}

impl<T> FromIterator<T> for RingGrowing<T> {
    /// Collects into a ring that started empty, so its capacity follows the doubling policy from
    /// [`DEFAULT_RING_SIZE`].
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut ring = Self::new();
        ring.extend(iter);
        ring
    }
}

impl<T> IntoIterator for RingGrowing<T> {
    type Item = T;
    type IntoIter = IntoIter<T>;

    fn into_iter(self) -> IntoIter<T> {
        IntoIter { inner: self.buf.into_iter() }
    }
}

impl<'a, T> IntoIterator for &'a RingGrowing<T> {
    type Item = &'a T;
    type IntoIter = Iter<'a, T>;

    fn into_iter(self) -> Iter<'a, T> {
        self.iter()
    }
}

/// Borrowing iterator over a ring's items, oldest first. Created by [`RingGrowing::iter`].
#[derive(Debug, Clone)]
pub struct Iter<'a, T> {
    inner: std::collections::vec_deque::Iter<'a, T>,
}

impl<'a, T> Iterator for Iter<'a, T> {
    type Item = &'a T;

    fn next(&mut self) -> Option<&'a T> {
        self.inner.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl<T> ExactSizeIterator for Iter<'_, T> {}
impl<T> FusedIterator for Iter<'_, T> {}

/// Draining iterator, oldest first. Created by [`RingGrowing::drain`].
#[derive(Debug)]
pub struct Drain<'a, T> {
    inner: std::collections::vec_deque::Drain<'a, T>,
}

impl<T> Iterator for Drain<'_, T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        self.inner.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl<T> ExactSizeIterator for Drain<'_, T> {}
impl<T> FusedIterator for Drain<'_, T> {}

/// Owning iterator, oldest first. Created by [`RingGrowing::into_iter`](IntoIterator::into_iter).
#[derive(Debug, Clone)]
pub struct IntoIter<T> {
    inner: std::collections::vec_deque::IntoIter<T>,
}

impl<T> Iterator for IntoIter<T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        self.inner.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl<T> ExactSizeIterator for IntoIter<T> {}
impl<T> FusedIterator for IntoIter<T> {}
