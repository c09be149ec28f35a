//! Ring buffer throughput beside `std::collections::VecDeque`, measured in the same run.
//!
//! Two workloads, for N from 1e3 to 1e7 (1e3..1e5 only with `KCACHE_BENCH_QUICK=1`):
//! * `write_read`: write N items, then read N (a burst absorbed, then drained);
//! * `interleaved`: with a standing backlog of 1024 items (the listener's initial size), N rounds
//!   of one write and one read (a handler that keeps up but is behind).
//!
//! Both sides start from the same initial capacity (1024) so they grow through the same sizes.

#![allow(missing_docs)] // criterion_group! generates an undocumented public fn

use std::collections::VecDeque;
use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use kcache_ring_buffer::{LISTENER_INITIAL_CAPACITY, RingGrowing};

const BACKLOG: u64 = 1024;

fn sizes() -> Vec<u64> {
    if std::env::var_os("KCACHE_BENCH_QUICK").is_some() {
        vec![1_000, 10_000, 100_000]
    } else {
        vec![1_000, 10_000, 100_000, 1_000_000, 10_000_000]
    }
}

fn write_read(c: &mut Criterion) {
    let mut group = c.benchmark_group("write_read");
    for n in sizes() {
        group.throughput(Throughput::Elements(n));
        if n >= 1_000_000 {
            group.sample_size(10).measurement_time(Duration::from_secs(4));
        }
        group.bench_with_input(BenchmarkId::new("RingGrowing", n), &n, |b, &n| {
            b.iter(|| {
                let mut ring = RingGrowing::with_capacity(LISTENER_INITIAL_CAPACITY);
                for i in 0..n {
                    ring.write_one(black_box(i));
                }
                let mut sum = 0u64;
                while let Some(v) = ring.read_one() {
                    sum = sum.wrapping_add(v);
                }
                black_box(sum)
            })
        });
        group.bench_with_input(BenchmarkId::new("VecDeque", n), &n, |b, &n| {
            b.iter(|| {
                let mut deque = VecDeque::with_capacity(LISTENER_INITIAL_CAPACITY);
                for i in 0..n {
                    deque.push_back(black_box(i));
                }
                let mut sum = 0u64;
                while let Some(v) = deque.pop_front() {
                    sum = sum.wrapping_add(v);
                }
                black_box(sum)
            })
        });
    }
    group.finish();
}

fn interleaved(c: &mut Criterion) {
    let mut group = c.benchmark_group("interleaved");
    for n in sizes() {
        group.throughput(Throughput::Elements(n));
        if n >= 1_000_000 {
            group.sample_size(10).measurement_time(Duration::from_secs(4));
        }
        group.bench_with_input(BenchmarkId::new("RingGrowing", n), &n, |b, &n| {
            let mut ring = RingGrowing::with_capacity(LISTENER_INITIAL_CAPACITY);
            ring.extend(0..BACKLOG);
            b.iter(|| {
                let mut sum = 0u64;
                for i in 0..n {
                    ring.write_one(black_box(i));
                    sum = sum.wrapping_add(ring.read_one().unwrap_or(0));
                }
                black_box(sum)
            })
        });
        group.bench_with_input(BenchmarkId::new("VecDeque", n), &n, |b, &n| {
            let mut deque = VecDeque::with_capacity(LISTENER_INITIAL_CAPACITY);
            deque.extend(0..BACKLOG);
            b.iter(|| {
                let mut sum = 0u64;
                for i in 0..n {
                    deque.push_back(black_box(i));
                    sum = sum.wrapping_add(deque.pop_front().unwrap_or(0));
                }
                black_box(sum)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, write_read, interleaved);
criterion_main!(benches);
