//! Consumed items are released: the Rust meaning of upstream's "remove reference to help GC".
//!
//! Every test counts `Arc` strong references, so a ring that kept a clone or a reference to a
//! consumed item would fail.

use std::sync::Arc;

use kcache_ring_buffer::{Ring, RingGrowing, RingOptions};

/// A read moves the item out: once the consumer drops it, nothing else holds it.
#[test]
fn read_one_keeps_no_reference() {
    let item = Arc::new("pod");
    let mut ring = RingGrowing::with_capacity(2);
    ring.write_one(Arc::clone(&item));
    assert_eq!(Arc::strong_count(&item), 2);
    let out = ring.read_one().unwrap();
    assert_eq!(Arc::strong_count(&item), 2, "moved, not cloned");
    drop(out);
    assert_eq!(Arc::strong_count(&item), 1, "the ring must not pin a consumed item");
}

/// Growth moves items; it neither clones nor leaks them, including across the wrap-around.
#[test]
fn growth_neither_clones_nor_leaks() {
    let item = Arc::new(0u8);
    let mut ring = RingGrowing::with_capacity(3);
    ring.write_one(Arc::clone(&item));
    drop(ring.read_one());
    for _ in 0..10 {
        ring.write_one(Arc::clone(&item));
    }
    assert_eq!(Arc::strong_count(&item), 11);
    for remaining in (0..10).rev() {
        drop(ring.read_one().unwrap());
        assert_eq!(Arc::strong_count(&item), remaining + 1);
    }
}

/// Dropping the ring, clearing it, or dropping a drain early drops the items still in it.
#[test]
fn unread_items_are_dropped_with_the_ring() {
    let item = Arc::new(());
    let mut ring = RingGrowing::new();
    ring.extend(std::iter::repeat_with(|| Arc::clone(&item)).take(5));
    ring.clear();
    assert_eq!(Arc::strong_count(&item), 1);

    ring.extend(std::iter::repeat_with(|| Arc::clone(&item)).take(5));
    let first = ring.drain().next();
    assert_eq!(Arc::strong_count(&item), 2, "only the yielded item survives the drain");
    drop(first);

    ring.extend(std::iter::repeat_with(|| Arc::clone(&item)).take(5));
    drop(ring);
    assert_eq!(Arc::strong_count(&item), 1);
}

/// `Ring`'s shrink replaces the storage; nothing it held survives the shrink.
#[test]
fn ring_shrink_releases_everything() {
    let item = Arc::new(());
    let mut ring = Ring::new(RingOptions { initial_size: 1, normal_size: 1 });
    ring.extend(std::iter::repeat_with(|| Arc::clone(&item)).take(9));
    while let Some(x) = ring.read_one() {
        drop(x);
    }
    assert_eq!(ring.capacity(), 1);
    assert_eq!(Arc::strong_count(&item), 1);
}
