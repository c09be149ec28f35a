//! Shutdown: stopping a queue or the worker runner mid-flight leaves no task behind (counted with
//! the runtime's `num_alive_tasks`), loses no item a worker took, and cannot deadlock whatever the
//! drop order (client-go's `TestDrainOnShutdown`-era shutdown tests of `util/workqueue`, and the
//! controller pattern's `defer queue.ShutDown()`). Every wait is under a timeout that fails the
//! test instead of hanging it; time is tokio's paused clock.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use kcache_workqueue::{
    DelayingQueue, PriorityQueue, Queue, RateLimitingQueue, Requeue, default_controller_rate_limiter,
    run_workers,
};
use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::common::TestProvider;

/// Tasks alive on the current runtime.
fn alive_tasks() -> usize {
    tokio::runtime::Handle::current().metrics().num_alive_tasks()
}

/// Lets the (current-thread) runtime run everything that is ready, so aborted tasks are reaped;
/// then checks the count. A bounded number of yields, not a sleep.
async fn settle_to(expected: usize) {
    for _ in 0..1000 {
        if alive_tasks() == expected {
            return;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(alive_tasks(), expected, "tasks alive after shutdown");
}

/// Yields until `cond` holds; a bounded number of yields (the paused clock does not move while
/// the runtime is busy, so a timeout could not fire), never a sleep.
async fn yield_until(what: &str, cond: impl Fn() -> bool) {
    for _ in 0..100_000 {
        if cond() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("never happened: {what}");
}

/// Fails the test instead of hanging it.
async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(Duration::from_secs(3600), fut).await {
        Ok(v) => v,
        Err(_) => panic!("deadlock or lost wake-up: {what} did not finish"),
    }
}

/// What each key went through.
#[derive(Default, Clone)]
struct Ledger(Arc<Mutex<BTreeMap<String, (usize, usize)>>>);

impl Ledger {
    fn started(&self, k: &str) {
        self.0.lock().entry(k.to_owned()).or_default().0 += 1;
    }
    fn completed(&self, k: &str) {
        self.0.lock().entry(k.to_owned()).or_default().1 += 1;
    }
    fn get(&self, k: &str) -> (usize, usize) {
        self.0.lock().get(k).copied().unwrap_or_default()
    }
    fn all(&self) -> BTreeMap<String, (usize, usize)> {
        self.0.lock().clone()
    }
}

/// Regression: aborting the runner while a reconcile is in progress used to leave the item in the
/// processing set for ever: it was never handed out again, and `shut_down_with_drain` waited for
/// it for ever. Now the item goes back on the queue, a new runner processes it, and the drain
/// completes; every worker task is gone after the abort.
#[tokio::test(start_paused = true)]
async fn aborting_the_runner_mid_reconcile_loses_no_item() {
    let q: RateLimitingQueue<String> = RateLimitingQueue::new(default_controller_rate_limiter());
    let baseline = alive_tasks(); // the test itself and the queue's timer task
    let ledger = Ledger::default();
    let entered = Arc::new(Notify::new());
    let runner = tokio::spawn(run_workers(q.clone(), 3, {
        let (ledger, entered) = (ledger.clone(), entered.clone());
        move |key: String| {
            let (ledger, entered) = (ledger.clone(), entered.clone());
            async move {
                ledger.started(&key);
                if key == "stuck" {
                    entered.notify_one();
                    std::future::pending::<()>().await;
                }
                ledger.completed(&key);
                Ok::<_, Infallible>(Requeue::Never)
            }
        }
    }));
    q.add("stuck".to_owned());
    within("the stuck reconcile starts", entered.notified()).await;
    runner.abort();
    assert!(runner.await.unwrap_err().is_cancelled());
    settle_to(baseline).await;
    assert_eq!(ledger.get("stuck"), (1, 0));
    assert_eq!(q.len(), 1, "the item cut short is back on the queue");

    // A new runner takes it up; the drain then completes.
    let runner = tokio::spawn(run_workers(q.clone(), 3, {
        let ledger = ledger.clone();
        move |key: String| {
            let ledger = ledger.clone();
            async move {
                ledger.started(&key);
                ledger.completed(&key);
                Ok::<_, Infallible>(Requeue::Never)
            }
        }
    }));
    for i in 0..10 {
        q.add(format!("k{i}"));
    }
    yield_until("the re-added item is processed", || ledger.get("stuck").1 == 1).await;
    within("drain", q.shut_down_with_drain()).await;
    within("runner", runner).await.unwrap();
    for (key, (started, completed)) in ledger.all() {
        let expected = if key == "stuck" { (2, 1) } else { (1, 1) };
        assert_eq!((started, completed), expected, "{key}");
    }
    settle_to(baseline - 1).await; // the timer task ends with the shutdown
}

/// `shut_down` while every worker is blocked in `get`: all of them return, the runner ends, and
/// the delaying queue's timer task ends too.
#[tokio::test(start_paused = true)]
async fn shut_down_releases_workers_blocked_in_get() {
    let before_queue = alive_tasks();
    let q: RateLimitingQueue<String> = RateLimitingQueue::new(default_controller_rate_limiter());
    q.add_after("later".to_owned(), Duration::from_secs(3600)); // a pending delayed item
    assert_eq!(alive_tasks(), before_queue + 1, "one timer task per delaying queue");
    let runner =
        tokio::spawn(run_workers(q.clone(), 8, |_key: String| async { Ok::<_, Infallible>(Requeue::Never) }));
    settle_to(before_queue + 2 + 8).await; // the runner and its 8 workers, all parked in get
    q.shut_down();
    within("runner", runner).await.unwrap();
    settle_to(before_queue).await;
    assert_eq!(q.pending_len(), 0, "delayed items are dropped at shutdown");
}

/// `shut_down_with_drain` mid-flight: every item a worker took completes exactly once, the items
/// still queued are handed out and completed too, and re-adds after the shutdown are dropped.
#[tokio::test(start_paused = true)]
async fn drain_mid_flight_completes_every_taken_item_once() {
    let q: RateLimitingQueue<String> = RateLimitingQueue::new(default_controller_rate_limiter());
    let baseline = alive_tasks();
    let ledger = Ledger::default();
    let runner = tokio::spawn(run_workers(q.clone(), 3, {
        let (ledger, q) = (ledger.clone(), q.clone());
        move |key: String| {
            let (ledger, q) = (ledger.clone(), q.clone());
            async move {
                ledger.started(&key);
                // Simulated work on the paused clock.
                tokio::time::sleep(Duration::from_millis(10)).await;
                q.add(format!("{key}-again")); // dropped once the queue shuts down
                ledger.completed(&key);
                Ok::<_, Infallible>(Requeue::Never)
            }
        }
    }));
    for i in 0..30 {
        q.add(format!("k{i}"));
    }
    // Three items are in flight (one per worker).
    yield_until("workers busy", || ledger.all().len() == 3).await;
    within("drain", q.shut_down_with_drain()).await;
    within("runner", runner).await.unwrap();
    let all = ledger.all();
    for i in 0..30 {
        assert_eq!(all.get(&format!("k{i}")), Some(&(1, 1)), "k{i}");
    }
    assert!(all.iter().all(|(_, (s, c))| s == c), "every item handed to a worker completed: {all:?}");
    assert!(q.is_empty());
    q.add("after".to_owned());
    assert!(q.is_empty(), "adds after shutdown are dropped");
    settle_to(baseline - 1).await;
}

/// Dropping the runner's future while its workers are parked in `get` aborts them all; the queue
/// is unaffected and a later `get` still works.
#[tokio::test(start_paused = true)]
async fn dropping_the_runner_while_workers_wait_in_get() {
    let q: Queue<String> = Queue::new();
    let baseline = alive_tasks();
    let dq = DelayingQueue::<String>::new();
    let runner = tokio::spawn(run_workers(
        RateLimitingQueue::new(default_controller_rate_limiter()),
        4,
        |_key: String| async { Ok::<_, Infallible>(Requeue::Never) },
    ));
    settle_to(baseline + 1 + 1 + 1 + 4).await; // dq's timer, the rate-limiting queue's, runner, workers
    runner.abort();
    let _ = runner.await;
    drop(dq);
    settle_to(baseline).await; // the dropped queues' timer tasks end with their last handle
    q.add("x".to_owned());
    assert_eq!(within("get", q.get()).await.as_deref(), Some("x"));
}

/// Drop order: the last handle of a delaying queue or a priority queue dropped with delayed items
/// pending, without a shutdown, ends its timer task; a queue built with metrics also ends its
/// unfinished-work task within one update period of the shutdown.
#[tokio::test(start_paused = true)]
async fn dropped_queues_leave_no_task_behind() {
    let baseline = alive_tasks();
    let dq = DelayingQueue::<u32>::new();
    dq.add_after(1, Duration::from_secs(60));
    let pq = PriorityQueue::<u32>::new();
    pq.add_after(1, Duration::from_secs(60));
    settle_to(baseline + 2).await;
    drop(dq);
    drop(pq);
    settle_to(baseline).await;

    let provider = Arc::new(TestProvider::default());
    let q: Queue<u32> = Queue::builder().name("metered").metrics_provider(provider.clone()).build();
    let pq = PriorityQueue::<u32>::builder().name("metered-pq").metrics_provider(provider).build().unwrap();
    settle_to(baseline + 3).await; // two unfinished-work loops and the priority queue's timer
    q.shut_down();
    pq.shut_down();
    tokio::time::advance(Duration::from_millis(500)).await; // one update period
    settle_to(baseline).await;
}

/// A thread blocked in `get_blocking` and an async getter are both released by a `shut_down`
/// from a third handle, which is then dropped first: no deadlock, whatever the order.
#[tokio::test(start_paused = true)]
async fn blocked_getters_are_released_by_shut_down_from_any_handle() {
    let q: Queue<u32> = Queue::new();
    let (tx, rx) = std::sync::mpsc::channel();
    let thread_q = q.clone();
    let thread = std::thread::spawn(move || tx.send(thread_q.get_blocking()).unwrap());
    let async_q = q.clone();
    let getter = tokio::spawn(async move { async_q.get().await });
    tokio::task::yield_now().await;
    let stopper = q.clone();
    drop(q);
    stopper.shut_down();
    drop(stopper);
    assert_eq!(within("async getter", getter).await.unwrap(), None);
    let got = rx.recv_timeout(Duration::from_secs(60)).expect("blocking getter released");
    assert_eq!(got, None);
    thread.join().unwrap();
}
