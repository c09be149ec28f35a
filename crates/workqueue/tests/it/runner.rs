//! The worker runner: the standard reconcile pattern (controller-runtime's reconcileHandler and
//! client-go's processNextWorkItem), panic recovery and graceful shutdown.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kcache_workqueue::{
    ItemExponentialFailureRateLimiter, PriorityQueue, RateLimitingQueue, Requeue, run_workers,
};
use parking_lot::Mutex;
use tokio::time::Instant;

const MS: Duration = Duration::from_millis(1);

fn queue() -> RateLimitingQueue<&'static str> {
    RateLimitingQueue::new(ItemExponentialFailureRateLimiter::new(5 * MS, Duration::from_secs(1000)))
}

/// Records when each key ran (paused-clock offsets).
#[derive(Default, Clone)]
struct Log(Arc<Mutex<HashMap<&'static str, Vec<Duration>>>>);

impl Log {
    fn record(&self, key: &'static str, start: Instant) -> usize {
        let mut map = self.0.lock();
        let runs = map.entry(key).or_default();
        runs.push(start.elapsed());
        runs.len()
    }
    fn runs(&self, key: &str) -> Vec<Duration> {
        self.0.lock().get(key).cloned().unwrap_or_default()
    }
}

/// Err -> add_rate_limited + done (5 ms, then 10 ms); Ok(Done) -> forget + done.
#[tokio::test(start_paused = true)]
async fn errors_are_retried_with_rate_limit_and_success_forgets() {
    let q = queue();
    let log = Log::default();
    let start = Instant::now();
    let runner = tokio::spawn(run_workers(q.clone(), 2, {
        let log = log.clone();
        move |key: &'static str| {
            let log = log.clone();
            async move {
                let n = log.record(key, start);
                if n <= 2 { Err(format!("attempt {n} failed")) } else { Ok(Requeue::Never) }
            }
        }
    }));
    q.add("a");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(log.runs("a"), vec![Duration::ZERO, 5 * MS, 15 * MS]);
    assert_eq!(q.num_requeues(&"a"), 0, "success forgot the failures");
    q.shut_down_with_drain().await;
    runner.await.unwrap();
}

/// Ok(RequeueAfter(d)) -> forget + add_after(d) + done.
#[tokio::test(start_paused = true)]
async fn requeue_after_re_adds_after_the_delay() {
    let q = queue();
    let log = Log::default();
    let start = Instant::now();
    let runner = tokio::spawn(run_workers(q.clone(), 1, {
        let log = log.clone();
        move |key: &'static str| {
            let log = log.clone();
            async move {
                let n = log.record(key, start);
                if n == 1 {
                    return Err("fail once");
                }
                Ok(if n < 4 { Requeue::After(Duration::from_secs(30)) } else { Requeue::Never })
            }
        }
    }));
    q.add("a");
    tokio::time::sleep(Duration::from_secs(120)).await;
    let s = Duration::from_secs(30);
    assert_eq!(log.runs("a"), vec![Duration::ZERO, 5 * MS, 5 * MS + s, 5 * MS + 2 * s]);
    assert_eq!(q.num_requeues(&"a"), 0);
    q.shut_down_with_drain().await;
    runner.await.unwrap();
}

/// A panicking reconcile is caught, the item retried with rate limit, and the pool keeps
/// serving other items.
#[tokio::test(start_paused = true)]
async fn panics_are_caught_and_retried() {
    let q = queue();
    let log = Log::default();
    let start = Instant::now();
    let runner = tokio::spawn(run_workers(q.clone(), 1, {
        let log = log.clone();
        move |key: &'static str| {
            // A panic before the future exists is caught too.
            if key == "panic-sync" && log.runs(key).is_empty() {
                log.record(key, start);
                panic!("panicked before returning a future");
            }
            let log = log.clone();
            async move {
                let n = log.record(key, start);
                if key == "panic-async" && n == 1 {
                    panic!("reconcile exploded");
                }
                Ok::<_, String>(Requeue::Never)
            }
        }
    }));
    q.add("panic-async");
    q.add("panic-sync");
    q.add("fine");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(log.runs("panic-async"), vec![Duration::ZERO, 5 * MS]);
    assert_eq!(log.runs("panic-sync").len(), 2, "one recorded by the panicking call, one real run");
    assert_eq!(log.runs("fine"), vec![Duration::ZERO]);
    q.shut_down_with_drain().await;
    runner.await.unwrap();
}

/// Graceful shutdown: in-flight reconciles finish before the drain returns, and the runner
/// returns once every worker stopped.
#[tokio::test(start_paused = true)]
async fn drain_waits_for_in_flight_reconciles() {
    let q = queue();
    let finished = Arc::new(AtomicUsize::new(0));
    let started = Arc::new(AtomicUsize::new(0));
    let runner = tokio::spawn(run_workers(q.clone(), 4, {
        let (finished, started) = (finished.clone(), started.clone());
        move |_key: &'static str| {
            let (finished, started) = (finished.clone(), started.clone());
            async move {
                started.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_secs(10)).await;
                finished.fetch_add(1, Ordering::SeqCst);
                Ok::<_, String>(Requeue::Never)
            }
        }
    }));
    for k in ["a", "b", "c", "d"] {
        q.add(k);
    }
    tokio::time::sleep(MS).await;
    assert_eq!(started.load(Ordering::SeqCst), 4);
    q.shut_down_with_drain().await;
    assert_eq!(finished.load(Ordering::SeqCst), 4, "drain returned before in-flight work finished");
    runner.await.unwrap();
}

/// The runner works on the priority queue too: higher priority first with one worker.
#[tokio::test(start_paused = true)]
async fn runs_on_a_priority_queue() {
    let q: PriorityQueue<&'static str> = PriorityQueue::new();
    let order = Arc::new(Mutex::new(Vec::new()));
    let initial = kcache_workqueue::HandlerEvent::Create { is_in_initial_list: true };
    q.add_with_opts(kcache_workqueue::AddOpts::for_event(initial), ["low"]);
    q.add("normal");
    let runner = tokio::spawn(run_workers(q.clone(), 1, {
        let order = order.clone();
        move |key: &'static str| {
            let order = order.clone();
            async move {
                order.lock().push(key);
                Ok::<_, String>(Requeue::Never)
            }
        }
    }));
    tokio::time::sleep(MS).await;
    assert_eq!(*order.lock(), vec!["normal", "low"]);
    q.shut_down_with_drain().await;
    runner.await.unwrap();
}
