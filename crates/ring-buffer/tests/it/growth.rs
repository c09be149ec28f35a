//! Growth, emptiness and wrap-around: the scenarios of k8s.io/utils `buffer/ring_growing_test.go`
//! (`TestGrowthGrowing`, `TestGrowth`, `TestEmpty`), rewritten fresh in Rust, plus the shrink rule
//! of `buffer.Ring`.

use kcache_ring_buffer::{DEFAULT_RING_SIZE, Ring, RingGrowing, RingOptions};

/// What upstream's growth tests do with either ring type.
trait TestRing {
    fn len(&self) -> usize;
    fn capacity(&self) -> usize;
    fn write_one(&mut self, v: usize);
    fn read_one(&mut self) -> Option<usize>;
}

impl TestRing for RingGrowing<usize> {
    fn len(&self) -> usize {
        RingGrowing::len(self)
    }
    fn capacity(&self) -> usize {
        RingGrowing::capacity(self)
    }
    fn write_one(&mut self, v: usize) {
        RingGrowing::write_one(self, v);
    }
    fn read_one(&mut self) -> Option<usize> {
        RingGrowing::read_one(self)
    }
}

impl TestRing for Ring<usize> {
    fn len(&self) -> usize {
        Ring::len(self)
    }
    fn capacity(&self) -> usize {
        Ring::capacity(self)
    }
    fn write_one(&mut self, v: usize) {
        Ring::write_one(self, v);
    }
    fn read_one(&mut self) -> Option<usize> {
        Ring::read_one(self)
    }
}

/// Upstream's growth loop: a ring of capacity `initial` takes the writes 0..10, one at a time,
/// ends at capacity 16, and reads them back in order until it is empty.
fn write_ten_read_back(name: &str, ring: &mut impl TestRing, initial: usize) {
    assert_eq!(ring.len(), 0, "{name}");
    assert_eq!(ring.capacity(), initial, "{name}");
    for i in 0..10 {
        assert_eq!(ring.len(), i, "{name}");
        ring.write_one(i);
    }
    assert_eq!(ring.len(), 10, "{name}");
    assert_eq!(ring.capacity(), 16, "{name}");
    let mut read = 0;
    while ring.len() > 0 {
        assert_eq!(ring.read_one(), Some(read), "{name}");
        read += 1;
    }
    assert_eq!(read, 10, "{name}");
    assert_eq!(ring.len(), 0, "{name}");
}

/// Mirrors upstream `TestGrowthGrowing` (buffer/ring_growing_test.go), all three cases:
/// "implicit-zero" (the zero value: [`RingGrowing::new`] / `Default`), "explicit-zero"
/// (`with_capacity(0)`) and "nonzero" (`with_capacity(1)`). Each takes 10 writes, reads them back in
/// order and reports capacity 16 afterwards (0 -> 16, or 1 -> 2 -> 4 -> 8 -> 16).
#[test]
fn growth_growing_reads_back_in_order() {
    let cases: [(&str, RingGrowing<usize>, usize); 3] = [
        ("implicit-zero", RingGrowing::default(), 0),
        ("explicit-zero", RingGrowing::with_capacity(0), 0),
        ("nonzero", RingGrowing::with_capacity(1), 1),
    ];
    for (name, mut ring, initial) in cases {
        write_ten_read_back(name, &mut ring, initial);
        assert_eq!(ring.capacity(), 16, "{name}: a growing ring never shrinks");
    }
}

/// Mirrors upstream `TestGrowth` (buffer/ring_growing_test.go), which tests `Ring`, all four cases:
/// "implicit-zero" (`Default`), "explicit-zero" (initial 0, normal 0), "smaller-initial-size"
/// (initial 1, normal 2) and "smaller-normal-size" (initial 2, normal 1). Ten writes grow each to
/// 16; reading them all back in order leaves the ring at exactly its normal size.
#[test]
fn ring_growth_shrinks_to_normal_size() {
    let cases: [(&str, Ring<usize>, usize, usize); 4] = [
        ("implicit-zero", Ring::default(), 0, 0),
        ("explicit-zero", Ring::new(RingOptions { initial_size: 0, normal_size: 0 }), 0, 0),
        ("smaller-initial-size", Ring::new(RingOptions { initial_size: 1, normal_size: 2 }), 1, 2),
        ("smaller-normal-size", Ring::new(RingOptions { initial_size: 2, normal_size: 1 }), 2, 1),
    ];
    for (name, mut ring, initial, normal) in cases {
        write_ten_read_back(name, &mut ring, initial);
        assert_eq!(ring.capacity(), normal, "{name}");
    }
}

/// Mirrors upstream `TestEmpty` (buffer/ring_growing_test.go): reading an empty ring returns
/// nothing. Upstream uses a zero-sized item type (`struct{}`) with initial size 1; sized items and
/// the zero value are checked too.
#[test]
fn empty_ring_reads_nothing() {
    let mut unit = RingGrowing::<()>::with_capacity(1);
    assert_eq!(unit.read_one(), None);
    assert_eq!(unit.capacity(), 1);
    let mut ring = RingGrowing::<u32>::with_capacity(1);
    assert_eq!(ring.read_one(), None);
    assert!(ring.is_empty());
    let mut zero = RingGrowing::<u32>::new();
    assert_eq!(zero.read_one(), None);
    assert_eq!(zero.capacity(), 0);
}

/// Upstream `Ring.ReadOne` (buffer/ring_growing.go) checks the shrink rule on every read, including
/// one that finds the ring empty: a fresh ring whose initial size is above its normal size shrinks on
/// that read. With normal size 0 the ring drops to capacity 0 and regrows to the default size, 16.
#[test]
fn ring_read_on_empty_applies_shrink_rule() {
    let mut ring = Ring::<u8>::new(RingOptions { initial_size: 8, normal_size: 2 });
    assert_eq!(ring.read_one(), None);
    assert_eq!(ring.capacity(), 2);
    let mut ring = Ring::new(RingOptions { initial_size: 4, normal_size: 0 });
    ring.write_one(1u8);
    assert_eq!(ring.read_one(), Some(1));
    assert_eq!(ring.capacity(), 0);
    ring.write_one(2);
    assert_eq!(ring.capacity(), DEFAULT_RING_SIZE);
}

/// Upstream's default-size rule: a ring created with capacity 0 grows to 16 on its first write.
#[test]
fn zero_capacity_grows_to_default_size() {
    let mut ring = RingGrowing::with_capacity(0);
    ring.write_one(());
    assert_eq!(ring.capacity(), DEFAULT_RING_SIZE);
    ring.extend(std::iter::repeat_n((), 15));
    assert_eq!(ring.capacity(), 16);
    ring.write_one(());
    assert_eq!(ring.capacity(), 32);
}

/// Wrap-around during growth, at every offset. Upstream has no test of its own for this; it covers
/// the `to > r.n` branch of `TypedRingGrowing.WriteOne` (buffer/ring_growing.go): the readable region
/// starts at each possible position of the backing array when the ring grows, and order survives
/// the copy.
#[test]
fn growth_with_wrap_around_at_every_offset() {
    for initial in [1usize, 2, 3, 7, 16, 33] {
        for offset in 0..initial {
            let mut ring = RingGrowing::with_capacity(initial);
            // Move the read position to `offset` by writing and consuming `offset` items.
            for i in 0..offset {
                ring.write_one(i);
                assert_eq!(ring.read_one(), Some(i));
            }
            // Fill completely, so the region wraps unless offset == 0, then write one more to grow.
            let values: Vec<usize> = (100..100 + initial + 1).collect();
            for &v in &values {
                ring.write_one(v);
            }
            assert_eq!(ring.capacity(), initial * 2, "initial={initial} offset={offset}");
            assert_eq!(ring.len(), initial + 1);
            let out: Vec<usize> = ring.drain().collect();
            assert_eq!(out, values, "initial={initial} offset={offset}");
        }
    }
}

/// The doubling sequence an informer listener goes through: 1024, 2048, 4096, ...
#[test]
fn listener_capacity_doubles_from_1024() {
    let mut ring = RingGrowing::with_capacity(kcache_ring_buffer::LISTENER_INITIAL_CAPACITY);
    let mut seen = vec![ring.capacity()];
    for i in 0..5000 {
        ring.write_one(i);
        if *seen.last().unwrap() != ring.capacity() {
            seen.push(ring.capacity());
        }
    }
    assert_eq!(seen, [1024, 2048, 4096, 8192]);
}

/// A growing ring never shrinks: draining leaves it at its high-water mark, as upstream.
#[test]
fn growing_ring_keeps_its_high_water_mark() {
    let mut ring = RingGrowing::with_capacity(4);
    ring.extend(0..20);
    assert_eq!(ring.capacity(), 32);
    ring.drain().for_each(drop);
    assert_eq!(ring.capacity(), 32);
    ring.clear();
    assert_eq!(ring.capacity(), 32);
}

/// `buffer.Ring`: grows past its normal size under a burst, and shrinks back to exactly the normal
/// size once a read empties it, but not while items remain.
#[test]
fn ring_shrinks_to_normal_size_when_emptied() {
    let mut ring = Ring::new(RingOptions { initial_size: 1, normal_size: 4 });
    assert_eq!(ring.capacity(), 1);
    ring.extend(0..10);
    assert_eq!(ring.capacity(), 16);
    for i in 0..9 {
        assert_eq!(ring.read_one(), Some(i));
        assert_eq!(ring.capacity(), 16, "must not shrink while items remain");
    }
    assert_eq!(ring.read_one(), Some(9));
    assert_eq!(ring.capacity(), 4);
    // Growth starts again from the normal size.
    ring.extend(0..5);
    assert_eq!(ring.capacity(), 8);
}

/// `buffer.Ring`: a ring at or below its normal size is left alone when emptied.
#[test]
fn ring_at_normal_size_does_not_reallocate() {
    let mut ring = Ring::new(RingOptions { initial_size: 8, normal_size: 8 });
    ring.extend(0..8);
    ring.drain().for_each(drop);
    assert_eq!(ring.capacity(), 8);
    let mut small = Ring::new(RingOptions { initial_size: 2, normal_size: 8 });
    small.write_one(1);
    assert_eq!(small.read_one(), Some(1));
    assert_eq!(small.capacity(), 2, "smaller than normal: unchanged");
}

/// `buffer.Ring`: a dropped, partly consumed drain still empties and shrinks the ring.
#[test]
fn ring_drain_dropped_early_shrinks() {
    let mut ring = Ring::new(RingOptions { initial_size: 1, normal_size: 2 });
    ring.extend(0..6);
    assert_eq!(ring.drain().next(), Some(0));
    assert!(ring.is_empty());
    assert_eq!(ring.capacity(), 2);
}
