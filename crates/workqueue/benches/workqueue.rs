//! Criterion benchmarks of the work queues, named after the comparison scenarios with client-go
//! and controller-runtime (`cargo xtask bench` maps the IDs):
//!
//! * `queue/add_get_done/1000`: 1000 adds, then 1000 get+done, one thread.
//! * `queue/contended_4p4w/<n>`: 4 producer threads, 4 worker threads, `n` distinct items.
//! * `queue/coalescing/<keys>x<adds>`: every key added `adds` times, then drained.
//! * `delaying/add_after_random/<n>`: `n` add_after calls with random delays up to 10 minutes
//!   (client-go's `BenchmarkDelayingQueue_AddAfter`); prints bytes per pending item.
//! * `delaying/add_after_then_drain/<n>`: the same, then time jumps and all items are taken.
//! * `ratelimiter/when/{exponential,bucket,default_controller}`: one `when` call.
//! * `priority/{add_get_done,add_only}/1000` and `priority/contended_4p4w/<n>`
//!   (controller-runtime's `BenchmarkAddGetDone`, `BenchmarkAddOnly`, `BenchmarkAddLockContended`).
//!
//! Set `KCACHE_BENCH_QUICK=1` for a short run with smaller sizes, e.g.
//! `KCACHE_BENCH_QUICK=1 cargo bench -p kcache-workqueue -- --warm-up-time 1 --measurement-time 2`.

#![allow(missing_docs)] // criterion_group! generates an undocumented public fn

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use kcache_test_support::alloc::{Counting, ENABLED as COUNTING, LIVE};
use kcache_workqueue::{
    AddOpts, BucketRateLimiter, DelayingQueue, ItemExponentialFailureRateLimiter, PriorityQueue, Queue,
    RateLimiter, default_controller_rate_limiter,
};
use rand::Rng;

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Small sizes when asked for, and when `cargo test --all-targets` runs the benches once as
/// smoke tests (cargo passes `--bench` only to real benchmark runs).
fn quick() -> bool {
    std::env::var_os("KCACHE_BENCH_QUICK").is_some() || !std::env::args().any(|a| a == "--bench")
}

fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap()
}

fn queue_benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("queue");

    g.throughput(Throughput::Elements(1000));
    g.bench_function(BenchmarkId::new("add_get_done", 1000), |b| {
        let q: Queue<u64> = Queue::new();
        b.iter(|| {
            for i in 0..1000 {
                q.add(i);
            }
            for _ in 0..1000 {
                let i = q.get_blocking().unwrap();
                q.done(&i);
            }
        });
    });

    let n: u64 = if quick() { 20_000 } else { 200_000 };
    g.throughput(Throughput::Elements(n));
    g.bench_function(BenchmarkId::new("contended_4p4w", n), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let q: Queue<u64> = Queue::new();
                let start = Instant::now();
                let workers: Vec<_> = (0..4)
                    .map(|_| {
                        let q = q.clone();
                        std::thread::spawn(move || {
                            while let Some(i) = q.get_blocking() {
                                q.done(&i);
                            }
                        })
                    })
                    .collect();
                let producers: Vec<_> = (0..4)
                    .map(|p| {
                        let q = q.clone();
                        std::thread::spawn(move || {
                            for i in 0..n / 4 {
                                q.add(p * n + i);
                            }
                        })
                    })
                    .collect();
                for p in producers {
                    p.join().unwrap();
                }
                q.shut_down(); // workers drain what is queued, then stop
                for w in workers {
                    w.join().unwrap();
                }
                total += start.elapsed();
            }
            total
        });
    });

    let (keys, adds) = if quick() { (1000u64, 100u64) } else { (1000, 1000) };
    g.throughput(Throughput::Elements(keys * adds));
    g.bench_function(BenchmarkId::new("coalescing", format!("{keys}x{adds}")), |b| {
        let q: Queue<u64> = Queue::new();
        b.iter(|| {
            for _ in 0..adds {
                for k in 0..keys {
                    q.add(k);
                }
            }
            for _ in 0..keys {
                let k = q.get_blocking().unwrap();
                q.done(&k);
            }
        });
    });
    g.finish();
}

fn random_delays(n: usize) -> Vec<Duration> {
    let mut rng = rand::rng();
    (0..n).map(|_| Duration::from_nanos(rng.random_range(1..600_000_000_000u64))).collect()
}

fn delaying_benches(c: &mut Criterion) {
    let n: usize = if quick() { 100_000 } else { 1_000_000 };
    let delays = random_delays(n);
    let rt = paused_runtime();

    // Bytes per pending item, measured once outside the timing loop.
    rt.block_on(async {
        let q = DelayingQueue::<u64>::new();
        tokio::task::yield_now().await;
        COUNTING.store(true, Ordering::SeqCst);
        let before = LIVE.load(Ordering::SeqCst);
        for (i, d) in delays.iter().enumerate() {
            q.add_after(i as u64, *d);
        }
        let after = LIVE.load(Ordering::SeqCst);
        COUNTING.store(false, Ordering::SeqCst);
        let per = (after - before) as f64 / n as f64 - std::mem::size_of::<u64>() as f64;
        eprintln!("delaying/add_after_random/{n}: {per:.1} bytes per pending item beyond the 8-byte item");
        q.shut_down();
    });

    let mut g = c.benchmark_group("delaying");
    g.sample_size(10);
    g.throughput(Throughput::Elements(n as u64));
    g.bench_function(BenchmarkId::new("add_after_random", n), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                total += rt.block_on(async {
                    let q = DelayingQueue::<u64>::new();
                    let start = Instant::now();
                    for (i, d) in delays.iter().enumerate() {
                        q.add_after(i as u64, *d);
                    }
                    let took = start.elapsed();
                    q.shut_down();
                    took
                });
            }
            total
        });
    });
    g.bench_function(BenchmarkId::new("add_after_then_drain", n), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                total += rt.block_on(async {
                    let q = DelayingQueue::<u64>::new();
                    let start = Instant::now();
                    for (i, d) in delays.iter().enumerate() {
                        q.add_after(i as u64, *d);
                    }
                    tokio::time::advance(Duration::from_secs(11 * 60)).await;
                    for _ in 0..n {
                        black_box(q.get().await);
                    }
                    let took = start.elapsed();
                    q.shut_down();
                    took
                });
            }
            total
        });
    });
    g.finish();
}

fn rate_limiter_benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("ratelimiter");
    g.throughput(Throughput::Elements(1));
    let keys: Vec<String> = (0..1000).map(|i| format!("default/object-{i}")).collect();

    let exp = ItemExponentialFailureRateLimiter::new(Duration::from_millis(5), Duration::from_secs(1000));
    let mut i = 0;
    g.bench_function("when/exponential", |b| {
        b.iter(|| {
            i = (i + 1) % keys.len();
            black_box(exp.when(&keys[i]))
        });
    });

    // A bucket that never runs dry, so every call measures the reservation path itself.
    let bucket = BucketRateLimiter::new(1e9, 1_000_000).unwrap();
    g.bench_function("when/bucket", |b| b.iter(|| black_box(RateLimiter::<String>::when(&bucket, &keys[0]))));

    let rt = paused_runtime();
    let _guard = rt.enter();
    let default = default_controller_rate_limiter::<String>();
    let mut j = 0;
    g.bench_function("when/default_controller", |b| {
        b.iter(|| {
            j = (j + 1) % keys.len();
            let d = default.when(&keys[j]);
            if j == 0 {
                // Keep the per-item failure counts bounded, like a controller that forgets.
                for k in &keys {
                    default.forget(k);
                }
            }
            black_box(d)
        });
    });
    g.finish();
}

fn priority_benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("priority");
    let rt = paused_runtime();

    g.throughput(Throughput::Elements(1000));
    g.bench_function(BenchmarkId::new("add_get_done", 1000), |b| {
        let q: PriorityQueue<u64> = rt.block_on(async { PriorityQueue::new() });
        b.iter(|| {
            rt.block_on(async {
                for i in 0..1000 {
                    q.add(i);
                }
                for _ in 0..1000 {
                    let i = q.get().await.unwrap();
                    q.done(&i);
                }
            })
        });
    });
    g.bench_function(BenchmarkId::new("add_only", 1000), |b| {
        let q: PriorityQueue<u64> = rt.block_on(async { PriorityQueue::new() });
        b.iter(|| {
            for i in 0..1000 {
                q.add_with_opts(AddOpts { priority: Some((i % 3) as i32), ..AddOpts::default() }, [i]);
            }
        });
    });

    let n: u64 = if quick() { 20_000 } else { 200_000 };
    let mt = tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build().unwrap();
    g.throughput(Throughput::Elements(n));
    g.bench_function(BenchmarkId::new("contended_4p4w", n), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                total += mt.block_on(async {
                    let q: PriorityQueue<u64> = PriorityQueue::new();
                    let processed = Arc::new(AtomicUsize::new(0));
                    let all_done = Arc::new(tokio::sync::Notify::new());
                    let start = Instant::now();
                    let workers: Vec<_> = (0..4)
                        .map(|_| {
                            let (q, processed, all_done) = (q.clone(), processed.clone(), all_done.clone());
                            tokio::spawn(async move {
                                while let Some(i) = q.get().await {
                                    q.done(&i);
                                    if processed.fetch_add(1, Ordering::Relaxed) + 1 == n as usize {
                                        all_done.notify_one();
                                    }
                                }
                            })
                        })
                        .collect();
                    let producers: Vec<_> = (0..4u64)
                        .map(|p| {
                            let q = q.clone();
                            tokio::spawn(async move {
                                for i in 0..n / 4 {
                                    q.add_with_opts(
                                        AddOpts { priority: Some((i % 4) as i32), ..AddOpts::default() },
                                        [p * n + i],
                                    );
                                    if i % 256 == 0 {
                                        tokio::task::yield_now().await;
                                    }
                                }
                            })
                        })
                        .collect();
                    for p in producers {
                        p.await.unwrap();
                    }
                    all_done.notified().await;
                    let took = start.elapsed();
                    q.shut_down();
                    for w in workers {
                        w.await.unwrap();
                    }
                    took
                });
            }
            total
        });
    });
    g.finish();
}

fn config() -> Criterion {
    // Count allocations only around the bytes-per-item figure, not in what is timed.
    COUNTING.store(false, Ordering::SeqCst);
    let c = Criterion::default();
    if quick() {
        c.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(1))
    } else {
        c
    }
}

criterion_group! {
    name = benches;
    config = config();
    targets = queue_benches, delaying_benches, rate_limiter_benches, priority_benches
}
criterion_main!(benches);
