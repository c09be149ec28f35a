//! Ring buffer scenarios: kcache's `RingGrowing` and std's `VecDeque` (the floor), mirroring
//! `xtask/bench-go/ring.go` (client-go's side is k8s.io/utils `buffer.TypedRingGrowing[uint64]`).

use std::collections::VecDeque;
use std::hint::black_box;

use kcache_ring_buffer::{LISTENER_INITIAL_CAPACITY, RingGrowing};
use serde_json::json;

use super::Outcome;
use crate::measure::Timer;

/// The operations both rings need.
trait Fifo: Sized {
    fn with_capacity(cap: usize) -> Self;
    fn write(&mut self, v: u64);
    fn read(&mut self) -> Option<u64>;
}

impl Fifo for RingGrowing<u64> {
    fn with_capacity(cap: usize) -> Self {
        RingGrowing::with_capacity(cap)
    }
    #[inline]
    fn write(&mut self, v: u64) {
        self.write_one(v);
    }
    #[inline]
    fn read(&mut self) -> Option<u64> {
        self.read_one()
    }
}

impl Fifo for VecDeque<u64> {
    fn with_capacity(cap: usize) -> Self {
        VecDeque::with_capacity(cap)
    }
    #[inline]
    fn write(&mut self, v: u64) {
        self.push_back(v);
    }
    #[inline]
    fn read(&mut self) -> Option<u64> {
        self.pop_front()
    }
}

/// How many times ring_write_read repeats its burst, so that the timed section lasts tens of
/// milliseconds instead of a few (shorter ones measure the scheduler of a shared machine).
const ROUNDS: usize = 10;

/// ring_write_read: 10 rounds, each creating a ring of initial capacity 1024 (client-go's listener
/// buffer size), writing the values `0..N`, then reading N values (a burst absorbed, then
/// drained), all inside the timed section. ops = 20N; `extra.checksum` = wrapping sum of all values
/// read (10 N(N-1)/2).
fn write_read<R: Fifo>(n: usize, t: &mut Timer) -> Outcome {
    let mut sum = 0u64;
    t.start();
    for _ in 0..ROUNDS {
        let mut ring = R::with_capacity(LISTENER_INITIAL_CAPACITY);
        for i in 0..n as u64 {
            ring.write(black_box(i));
        }
        while let Some(v) = ring.read() {
            sum = sum.wrapping_add(v);
        }
        black_box(&ring);
    }
    t.stop();
    Outcome {
        ops: (ROUNDS * 2 * n) as u64,
        extra: json!({"checksum": sum, "rounds": ROUNDS}).as_object().cloned().unwrap_or_default(),
    }
}

/// ring_interleaved: a ring of initial capacity 1024 holding a standing backlog of the values
/// `0..1024` (written untimed), then N rounds of one write (value `1024 + i`) and one read (a
/// listener that keeps up but is behind). ops = 2N; `extra.checksum` = wrapping sum of the N values
/// read (`0..N`).
fn interleaved<R: Fifo>(n: usize, t: &mut Timer) -> Outcome {
    let backlog = LISTENER_INITIAL_CAPACITY as u64;
    let mut ring = R::with_capacity(LISTENER_INITIAL_CAPACITY);
    for i in 0..backlog {
        ring.write(i);
    }
    let mut sum = 0u64;
    t.start();
    for i in 0..n as u64 {
        ring.write(black_box(backlog + i));
        sum = sum.wrapping_add(ring.read().unwrap_or(0));
    }
    t.stop();
    black_box(&ring);
    Outcome { ops: 2 * n as u64, extra: json!({"checksum": sum}).as_object().cloned().unwrap_or_default() }
}

/// [`write_read`] on kcache's `RingGrowing<u64>`.
pub(super) fn kcache_write_read(n: usize, t: &mut Timer) -> Outcome {
    write_read::<RingGrowing<u64>>(n, t)
}

/// [`write_read`] on `VecDeque<u64>`.
pub(super) fn vecdeque_write_read(n: usize, t: &mut Timer) -> Outcome {
    write_read::<VecDeque<u64>>(n, t)
}

/// [`interleaved`] on kcache's `RingGrowing<u64>`.
pub(super) fn kcache_interleaved(n: usize, t: &mut Timer) -> Outcome {
    interleaved::<RingGrowing<u64>>(n, t)
}

/// [`interleaved`] on `VecDeque<u64>`.
pub(super) fn vecdeque_interleaved(n: usize, t: &mut Timer) -> Outcome {
    interleaved::<VecDeque<u64>>(n, t)
}
