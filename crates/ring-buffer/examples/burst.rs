//! A burst of notifications absorbed by a listener's growing ring, then drained by a slow handler.
//!
//! Shows the doubling policy an informer listener goes through (1024, 2048, ...) and that a
//! `Ring` gives its memory back once the backlog drains. Run with
//! `cargo run -p kcache-ring-buffer --example burst`.

use kcache_ring_buffer::{LISTENER_INITIAL_CAPACITY, Ring, RingGrowing, RingOptions};

fn main() {
    let mut pending = RingGrowing::with_capacity(LISTENER_INITIAL_CAPACITY);
    let mut last_cap = pending.capacity();
    println!("listener ring starts at capacity {last_cap}");

    // The distributor delivers 10 000 notifications while the handler is stalled.
    for n in 0..10_000u32 {
        pending.write_one(format!("update #{n}"));
        if pending.capacity() != last_cap {
            println!("  backlog {:>5}: capacity {} -> {}", pending.len(), last_cap, pending.capacity());
            last_cap = pending.capacity();
        }
    }
    // The handler catches up, in order.
    let first = pending.read_one().expect("backlog is not empty");
    let handled = 1 + pending.drain().count();
    println!("handled {handled} notifications, first was {first:?}; capacity stays {}", pending.capacity());

    let mut ring = Ring::new(RingOptions {
        initial_size: LISTENER_INITIAL_CAPACITY,
        normal_size: LISTENER_INITIAL_CAPACITY,
    });
    ring.extend(0..10_000u32);
    println!("Ring under the same burst: capacity {}", ring.capacity());
    while ring.read_one().is_some() {}
    println!("Ring after draining: capacity {} (back to normal size)", ring.capacity());
}
