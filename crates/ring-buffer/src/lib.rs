//! Growing ring buffers: the buffer between a shared informer's distributor and each event handler.
//!
//! This crate is the Rust counterpart of k8s.io/utils `buffer.RingGrowing` and `buffer.Ring`, which
//! client-go's `processorListener` uses to hold the notifications a handler has not consumed yet.
//!
//! # The growth policy
//!
//! * [`RingGrowing`] starts at the capacity it is given (informers use
//!   [`LISTENER_INITIAL_CAPACITY`] = 1024) and **doubles** whenever a write finds it full. A ring
//!   created with capacity 0 grows to [`DEFAULT_RING_SIZE`] (16) on its first write. It never shrinks:
//!   a burst leaves the ring at its high-water mark, exactly as upstream.
//! * [`Ring`] grows the same way but shrinks back to its *normal size* as soon as a read empties it,
//!   so a one-off burst does not pin its peak allocation forever.
//!
//! Both are FIFO: items come out in the order they went in, including across the wrap-around of the
//! backing storage when it grows.
//!
//! # Consumed items are released
//!
//! client-go zeroes a slot after reading it ("remove reference to help GC"), because a Go slice would
//! otherwise keep the consumed object alive. Here [`RingGrowing::read_one`] *moves* the value out:
//! the buffer keeps no copy and no reference, so the item's `Drop` runs as soon as the consumer drops
//! it, never later.
//!
//! # Example
//!
//! ```
//! use kcache_ring_buffer::RingGrowing;
//!
//! let mut ring = RingGrowing::with_capacity(2);
//! ring.write_one("a");
//! ring.write_one("b");
//! ring.write_one("c"); // full: capacity doubles from 2 to 4
//! assert_eq!(ring.capacity(), 4);
//! assert_eq!(ring.read_one(), Some("a"));
//! assert_eq!(ring.len(), 2);
//! assert_eq!(ring.drain().collect::<Vec<_>>(), ["b", "c"]);
//! assert!(ring.is_empty());
//! ```
//!
//! Neither type is synchronised: like upstream, a ring is owned by one task (the listener's pump) and
//! callers wrap it in a lock if they need to share it.

mod growing;
mod ring;

pub use growing::{Drain, IntoIter, Iter, RingGrowing};
pub use ring::{Ring, RingDrain, RingOptions};

/// Capacity a [`RingGrowing`] grows to when it was created with capacity 0 (k8s.io/utils `defaultRingSize`).
pub const DEFAULT_RING_SIZE: usize = 16;

/// Initial capacity of each informer listener's notification buffer (client-go `initialBufferSize`).
///
/// It is a starting size, not a limit: the ring doubles from here.
pub const LISTENER_INITIAL_CAPACITY: usize = 1024;

// The workspace README's example is compiled and run as a doctest here, so it cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct WorkspaceReadme;
