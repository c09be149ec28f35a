//! The std traits the buffers implement, and their auto traits (`Send`, `Sync`, `Unpin`).

use kcache_ring_buffer::{Drain, IntoIter, Iter, Ring, RingDrain, RingGrowing, RingOptions};

fn assert_send_sync_unpin<T: Send + Sync + Unpin>() {}

#[test]
fn auto_traits() {
    assert_send_sync_unpin::<RingGrowing<String>>();
    assert_send_sync_unpin::<Ring<String>>();
    assert_send_sync_unpin::<RingOptions>();
    assert_send_sync_unpin::<IntoIter<String>>();
    assert_send_sync_unpin::<Iter<'static, String>>();
    assert_send_sync_unpin::<Drain<'static, String>>();
    assert_send_sync_unpin::<RingDrain<'static, String>>();
}

#[test]
fn default_debug_clone() {
    let mut ring: RingGrowing<i32> = RingGrowing::default();
    ring.write_one(3);
    let copy = ring.clone();
    assert_eq!(format!("{copy:?}"), "RingGrowing { len: 1, capacity: 16, items: [3] }");
    let ring2: Ring<i32> = Ring::default();
    assert_eq!(format!("{ring2:?}"), "Ring { len: 0, capacity: 0, normal_size: 0, items: [] }");
}

#[test]
fn extend_collect_and_iterate() {
    let mut ring: RingGrowing<u8> = (0..3).collect();
    ring.extend([3, 4]);
    assert_eq!((&ring).into_iter().copied().collect::<Vec<_>>(), [0, 1, 2, 3, 4]);
    assert_eq!(ring.iter().len(), 5);
    assert_eq!(ring.into_iter().map(u32::from).sum::<u32>(), 10);

    let ring: Ring<u8> = (0..4).collect();
    assert_eq!(ring.into_iter().collect::<Vec<_>>(), [0, 1, 2, 3]);
}

/// A clone behaves exactly like the original: same reported capacity and the same growth point.
///
/// Go's `TypedRingGrowing` / `Ring` have no clone; the upstream rule a clone must keep is
/// `TypedRingGrowing.WriteOne` (buffer/ring_growing.go) growing only when `readable == n`.
#[test]
fn clone_keeps_capacity_and_growth_point() {
    let mut ring = RingGrowing::with_capacity(1024);
    ring.extend(0..10);
    let mut copy = ring.clone();
    assert_eq!(copy.capacity(), 1024);
    copy.write_one(10);
    assert_eq!(copy.capacity(), 1024, "11 items fit in 1024 slots: no doubling");
    copy.extend(11..1024);
    assert_eq!(copy.capacity(), 1024);
    copy.write_one(1024);
    assert_eq!(copy.capacity(), 2048);
    assert!(copy.iter().copied().eq(0..1025));

    let mut empty = RingGrowing::<u64>::with_capacity(4).clone();
    empty.extend(0..4);
    assert_eq!(empty.capacity(), 4, "an empty clone must not double on its first write");

    let mut ring = Ring::new(RingOptions { initial_size: 8, normal_size: 8 });
    ring.write_one(1);
    let mut copy = ring.clone();
    copy.extend(2..=8);
    assert_eq!(copy.capacity(), 8);
}
