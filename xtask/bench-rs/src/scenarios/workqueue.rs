//! Work queue scenarios on kcache-workqueue, mirroring `xtask/bench-go/workqueue.go`.
//!
//! Items are `Arc<str>` keys `key(i) = "ns-<i mod 100>/cm-<i>"` built before the timed section,
//! so adding one copies a pointer as adding a Go string does. Queues are unnamed: no metrics, like
//! the unnamed client-go queues. Where a Tokio runtime is needed it is a multi-thread runtime with
//! its default worker count (one per CPU, as GOMAXPROCS), built before the timed section.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use kcache_workqueue::{AddOpts, DelayingQueue, PriorityQueue, Queue, RateLimiter};
use serde_json::{Map, Value, json};
use tokio::runtime::Runtime;

use super::Outcome;
use crate::measure::Timer;
use crate::workload;

type Key = Arc<str>;

fn keys(n: usize) -> Vec<Key> {
    workload::keys(n).into_iter().map(Key::from).collect()
}

fn runtime() -> Runtime {
    match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => panic!("building the Tokio runtime: {e}"),
    }
}

fn extra(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

/// workqueue_single: on one thread, `add` the N distinct keys `key(0..N)` to a fresh
/// `Queue::new()`, then N times `get_blocking` + `done`. ops = N; `extra.processed` = items got.
pub(super) fn single(n: usize, t: &mut Timer) -> Outcome {
    let ks = keys(n);
    t.start();
    let q: Queue<Key> = Queue::new();
    for k in &ks {
        q.add(k.clone());
    }
    let mut processed = 0u64;
    for _ in 0..n {
        let Some(item) = q.get_blocking() else { break };
        q.done(&item);
        processed += 1;
    }
    t.stop();
    q.shut_down();
    Outcome { ops: n as u64, extra: extra(json!({"processed": processed})) }
}

/// The queue operations the contended scenarios need (kcache's `Queue` and `PriorityQueue`).
trait AsyncQueue: Clone + Send + Sync + 'static {
    /// Adds `key(i)` (with its priority, for the priority queue).
    fn add_index(&self, i: usize, k: &Key);
    fn get(&self) -> impl Future<Output = Option<Key>> + Send;
    fn done(&self, k: &Key);
    fn shut_down(&self);
}

impl AsyncQueue for Queue<Key> {
    fn add_index(&self, _i: usize, k: &Key) {
        self.add(k.clone());
    }
    async fn get(&self) -> Option<Key> {
        Queue::get(self).await
    }
    fn done(&self, k: &Key) {
        Queue::done(self, k);
    }
    fn shut_down(&self) {
        Queue::shut_down(self);
    }
}

/// Priority of item `i` in the priority queue scenarios: `i mod 4`.
fn priority(i: usize) -> i32 {
    (i % 4) as i32
}

impl AsyncQueue for PriorityQueue<Key> {
    fn add_index(&self, i: usize, k: &Key) {
        self.add_with_opts(AddOpts { priority: Some(priority(i)), ..AddOpts::default() }, [k.clone()]);
    }
    async fn get(&self) -> Option<Key> {
        PriorityQueue::get(self).await
    }
    fn done(&self, k: &Key) {
        PriorityQueue::done(self, k);
    }
    fn shut_down(&self) {
        PriorityQueue::shut_down(self);
    }
}

/// 4 producer tasks and 4 worker tasks on `rt`: producer p adds `key(i)` for i = p, p+4, ...;
/// each worker loops `get().await` + `done`; the worker that completes the N-th item shuts the
/// queue down. Returns the items processed.
fn contended<Q: AsyncQueue>(rt: &Runtime, q: Q, ks: &Arc<Vec<Key>>) -> u64 {
    const PRODUCERS: usize = 4;
    const WORKERS: usize = 4;
    let n = ks.len() as u64;
    let processed = Arc::new(AtomicU64::new(0));
    rt.block_on(async {
        let mut tasks = Vec::new();
        for p in 0..PRODUCERS {
            let (q, ks) = (q.clone(), ks.clone());
            tasks.push(tokio::spawn(async move {
                for i in (p..ks.len()).step_by(PRODUCERS) {
                    q.add_index(i, &ks[i]);
                }
            }));
        }
        for _ in 0..WORKERS {
            let (q, processed) = (q.clone(), processed.clone());
            tasks.push(tokio::spawn(async move {
                while let Some(item) = q.get().await {
                    q.done(&item);
                    if processed.fetch_add(1, Ordering::Relaxed) + 1 == n {
                        q.shut_down();
                        return;
                    }
                }
            }));
        }
        for task in tasks {
            if let Err(e) = task.await {
                panic!("benchmark task failed: {e}");
            }
        }
    });
    processed.load(Ordering::Relaxed)
}

/// workqueue_contended: 4 producers x 4 workers (Tokio tasks on the multi-thread runtime) on one
/// `Queue::new()`; producer p adds `key(i)` for i = p, p+4, p+8, ... < N (all distinct); each
/// worker loops `get().await` + `done`. Timed from creating the queue until every task has ended
/// after the N-th `done`. ops = N.
pub(super) fn workqueue_contended(n: usize, t: &mut Timer) -> Outcome {
    let ks = Arc::new(keys(n));
    let rt = runtime();
    t.start();
    let processed = contended(&rt, Queue::<Key>::new(), &ks);
    t.stop();
    Outcome { ops: n as u64, extra: extra(json!({"processed": processed, "producers": 4, "workers": 4})) }
}

/// workqueue_coalesce: N = number of keys (default 1000). On one thread, N rounds each adding
/// `key(0..N)` to a fresh `Queue::new()` with `add_ref` (the keys are held by the caller, as a
/// handler holds them; N*N adds, all but the first N coalescing, so cloned only N times), then
/// `get_blocking` + `done` until the queue is empty. ops = N*N adds; `extra.processed` = items got.
pub(super) fn coalesce(n: usize, t: &mut Timer) -> Outcome {
    let ks = keys(n);
    t.start();
    let q: Queue<Key> = Queue::new();
    for _ in 0..n {
        for k in &ks {
            q.add_ref(k);
        }
    }
    let mut processed = 0u64;
    while !q.is_empty() {
        let Some(item) = q.get_blocking() else { break };
        q.done(&item);
        processed += 1;
    }
    t.stop();
    q.shut_down();
    Outcome { ops: (n * n) as u64, extra: extra(json!({"processed": processed})) }
}

/// workqueue_add_after: a fresh `DelayingQueue::new()` on the multi-thread runtime; one worker task
/// loops `get().await` + `done` from the start; the runtime's main future calls
/// `add_after(key(i), delay(i))` for i in 0..N with the delays of
/// [`workload::add_after_delays_ms`] (1..=1000 ms). Timed until the N-th `done` (so at least the
/// longest delay, 1 s: compare CPU seconds and peak RSS). ops = N; `extra.add_seconds` = wall time
/// of the add_after loop alone.
pub(super) fn add_after(n: usize, t: &mut Timer) -> Outcome {
    let ks = keys(n);
    let delays: Vec<Duration> =
        workload::add_after_delays_ms(n).into_iter().map(Duration::from_millis).collect();
    let rt = runtime();
    t.start();
    let (processed, add_seconds) = rt.block_on(async {
        let q: DelayingQueue<Key> = DelayingQueue::new();
        let worker = {
            let q = q.clone();
            tokio::spawn(async move {
                let mut processed = 0u64;
                while processed < n as u64 {
                    let Some(item) = q.get().await else { break };
                    q.done(&item);
                    processed += 1;
                }
                processed
            })
        };
        let t0 = Instant::now();
        for (k, d) in ks.iter().zip(&delays) {
            q.add_after(k.clone(), *d);
        }
        let add_seconds = t0.elapsed().as_secs_f64();
        let processed = worker.await.unwrap_or_else(|e| panic!("worker failed: {e}"));
        q.shut_down();
        (processed, add_seconds)
    });
    t.stop();
    Outcome { ops: n as u64, extra: extra(json!({"processed": processed, "add_seconds": add_seconds})) }
}

/// workqueue_add_after on kube-runtime's delay queue, `kube_runtime::scheduler::scheduler` (what
/// its `Controller` schedules requeues with): a task drives the scheduler stream, fed by an
/// unbounded Tokio channel, until it has emitted N keys; the runtime's main future sends
/// `ScheduleRequest { message: key(i), run_at: now + delay(i) }` for i in 0..N with the same
/// delays. The scheduler has no get/done (no processing set): an emitted key is simply handed
/// out. Timed until the N-th key is emitted. ops = N; `extra.add_seconds` = wall time of the send
/// loop alone.
#[cfg(feature = "kube-runtime")]
pub(super) fn kube_runtime_add_after(n: usize, t: &mut Timer) -> Outcome {
    use futures::StreamExt;
    use kube_runtime::scheduler::{ScheduleRequest, scheduler};

    let ks = keys(n);
    let delays: Vec<Duration> =
        workload::add_after_delays_ms(n).into_iter().map(Duration::from_millis).collect();
    let rt = runtime();
    t.start();
    let (processed, add_seconds) = rt.block_on(async {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<ScheduleRequest<Key>>();
        let consumer = tokio::spawn(async move {
            let requests = futures::stream::poll_fn(move |cx| rx.poll_recv(cx));
            let mut emitted = std::pin::pin!(scheduler(requests));
            let mut processed = 0u64;
            while processed < n as u64 {
                if emitted.next().await.is_none() {
                    break;
                }
                processed += 1;
            }
            processed
        });
        let t0 = Instant::now();
        for (k, d) in ks.iter().zip(&delays) {
            let run_at = tokio::time::Instant::now() + *d;
            if tx.send(ScheduleRequest { message: k.clone(), run_at }).is_err() {
                break;
            }
        }
        let add_seconds = t0.elapsed().as_secs_f64();
        let processed = consumer.await.unwrap_or_else(|e| panic!("scheduler task failed: {e}"));
        (processed, add_seconds)
    });
    t.stop();
    Outcome { ops: n as u64, extra: extra(json!({"processed": processed, "add_seconds": add_seconds})) }
}

/// rate_limiter_when: `default_controller_rate_limiter()` (max of per-item exponential 5 ms..1000 s
/// and a 10 qps / burst 100 token bucket); N calls `when(key(i mod 1000))`, no `forget`. ops = N;
/// `extra.delay_seconds_sum` = sum of the returned delays in whole seconds (depends on the wall
/// clock through the bucket: informative only).
pub(super) fn rate_limiter_when(n: usize, t: &mut Timer) -> Outcome {
    let ks = keys(1000);
    let rt = runtime();
    let _guard = rt.enter();
    let rl = kcache_workqueue::default_controller_rate_limiter::<Key>();
    let mut sum = 0u64;
    t.start();
    for i in 0..n {
        sum += rl.when(&ks[i % 1000]).as_secs();
    }
    t.stop();
    Outcome { ops: n as u64, extra: extra(json!({"delay_seconds_sum": sum})) }
}

/// priorityqueue_single: workqueue_single on `PriorityQueue::new()` (no metrics), each `key(i)`
/// added with `add_with_opts(priority: i mod 4)`; run as one future on the runtime's `block_on`
/// thread with `get().await`. ops = N.
pub(super) fn priorityqueue_single(n: usize, t: &mut Timer) -> Outcome {
    let ks = keys(n);
    let rt = runtime();
    t.start();
    let processed = rt.block_on(async {
        let q: PriorityQueue<Key> = PriorityQueue::new();
        for (i, k) in ks.iter().enumerate() {
            q.add_index(i, k);
        }
        let mut processed = 0u64;
        for _ in 0..n {
            let Some(item) = q.get().await else { break };
            q.done(&item);
            processed += 1;
        }
        q.shut_down();
        processed
    });
    t.stop();
    Outcome { ops: n as u64, extra: extra(json!({"processed": processed})) }
}

/// priorityqueue_contended: workqueue_contended (4 producers x 4 workers) on `PriorityQueue::new()`,
/// priorities as in priorityqueue_single. ops = N.
pub(super) fn priorityqueue_contended(n: usize, t: &mut Timer) -> Outcome {
    let ks = Arc::new(keys(n));
    let rt = runtime();
    t.start();
    let processed = {
        let _guard = rt.enter();
        let q = PriorityQueue::<Key>::new();
        contended(&rt, q, &ks)
    };
    t.stop();
    Outcome { ops: n as u64, extra: extra(json!({"processed": processed, "producers": 4, "workers": 4})) }
}
