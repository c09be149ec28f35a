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
