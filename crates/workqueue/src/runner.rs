//! Worker runner: N async workers applying the standard controller pattern to a queue, and
//! client-go's `ParallelizeUntil`.

use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::FutureExt;
use kcache_utils::panic_message;
use tokio_util::sync::CancellationToken;

use crate::item::Item;
use crate::priority::PriorityQueue;
use crate::queue::QueueStorage;
use crate::rate_limiting_queue::RateLimitingQueue;

/// What a successful reconcile asks for next: [`run_workers`]' counterpart of
/// controller-runtime's `reconcile.Result`.
///
/// Not called `Action`, though it plays the part of kube-runtime's `controller::Action`: the two
/// are different types (kube-runtime's is a struct made by `Action::requeue(d)` and
/// `Action::await_change()`), and a controller that uses both crates would have two `Action`s in
/// scope. kcache-controller's reconciles return kube-runtime's `Action` itself.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use kcache_workqueue::Requeue;
///
/// // kube-runtime: Action::await_change() / Action::requeue(Duration::from_secs(300)).
/// let done = Requeue::Never;
/// let later = Requeue::After(Duration::from_secs(300));
/// # let _ = (done, later);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requeue {
    /// Finished: forget the item's retry history; it comes back only when added again
    /// (kube-runtime's `Action::await_change()`).
    Never,
    /// Finished for now, look again after this delay (controller-runtime's `RequeueAfter`,
    /// kube-runtime's `Action::requeue`): the retry history is forgotten and the item re-added
    /// with `add_after`.
    After(Duration),
}

/// The queue operations [`run_workers`] needs; implemented by [`RateLimitingQueue`] and
/// [`PriorityQueue`].
pub trait WorkQueue<T>: Clone + Send + Sync + 'static {
    /// Waits for the next item; `None` once the queue is shut down (and, for queues that drain,
    /// empty).
    fn next(&self) -> impl Future<Output = Option<T>> + Send + '_;
    /// Marks `item` finished.
    fn done(&self, item: &T);
    /// Resets `item`'s retry history.
    fn forget(&self, item: &T);
    /// Re-adds `item` after the rate limiter's delay.
    fn add_rate_limited(&self, item: T);
    /// Re-adds `item` after `after`.
    fn add_after(&self, item: T, after: Duration);
}

impl<T: Item, S: QueueStorage<T>> WorkQueue<T> for RateLimitingQueue<T, S> {
    fn next(&self) -> impl Future<Output = Option<T>> + Send + '_ {
        self.get()
    }
    fn done(&self, item: &T) {
        RateLimitingQueue::done(self, item)
    }
    fn forget(&self, item: &T) {
        RateLimitingQueue::forget(self, item)
    }
    fn add_rate_limited(&self, item: T) {
        RateLimitingQueue::add_rate_limited(self, item)
    }
    fn add_after(&self, item: T, after: Duration) {
        RateLimitingQueue::add_after(self, item, after)
    }
}

impl<T: Item> WorkQueue<T> for PriorityQueue<T> {
    fn next(&self) -> impl Future<Output = Option<T>> + Send + '_ {
        self.get()
    }
    fn done(&self, item: &T) {
        PriorityQueue::done(self, item)
    }
    fn forget(&self, item: &T) {
        PriorityQueue::forget(self, item)
    }
    fn add_rate_limited(&self, item: T) {
        PriorityQueue::add_rate_limited(self, item)
    }
    fn add_after(&self, item: T, after: Duration) {
        PriorityQueue::add_after(self, item, after)
    }
}

/// Runs `workers` concurrent Tokio tasks that take items from `queue` and call `reconcile`,
/// applying the standard pattern:
///
/// * `Ok(Requeue::Never)`: `forget`, then `done`;
/// * `Ok(Requeue::After(d))`: `forget`, `add_after(item, d)`, then `done`;
/// * `Err(e)`: logged, `add_rate_limited`, then `done`;
/// * a panic in `reconcile` (while creating or polling its future): caught, reported with
///   `tracing::error!`, the item re-added with `add_rate_limited`, and the worker carries on.
///
/// Returns once the queue is shut down and every worker has finished its current item. To stop
/// gracefully call `shut_down_with_drain` on the queue: in-flight reconciles complete first.
/// Re-adds after shutdown are dropped, as in client-go.
///
/// # Cancel safety
///
/// Dropping the future aborts the workers. An item whose reconcile was cut short is re-added to
/// the queue (unless it is shut down) and marked done, so it is neither lost nor left in the
/// processing set.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use kcache_workqueue::{Requeue, RateLimitingQueue, default_controller_rate_limiter, run_workers};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let queue = RateLimitingQueue::new(default_controller_rate_limiter());
/// let seen = Arc::new(AtomicUsize::new(0));
/// let runner = tokio::spawn(run_workers(queue.clone(), 4, {
///     let seen = seen.clone();
///     move |key: String| {
///         let seen = seen.clone();
///         async move {
///             seen.fetch_add(1, Ordering::SeqCst);
///             Ok::<_, std::convert::Infallible>(Requeue::Never)
///         }
///     }
/// }));
/// for i in 0..10 {
///     queue.add(format!("ns/{i}"));
/// }
/// tokio::time::sleep(std::time::Duration::from_millis(10)).await;
/// queue.shut_down_with_drain().await;
/// runner.await.unwrap();
/// assert_eq!(seen.load(Ordering::SeqCst), 10);
/// # }
/// ```
///
/// # Panics
///
/// Panics when called outside a Tokio runtime (it spawns the workers).
pub async fn run_workers<T, Q, F, Fut, E>(queue: Q, workers: usize, reconcile: F)
where
    T: Item,
    Q: WorkQueue<T>,
    F: Fn(T) -> Fut + Send + Sync + Clone + 'static,
    Fut: Future<Output = Result<Requeue, E>> + Send + 'static,
    E: fmt::Display + Send + 'static,
{
    let workers = workers.max(1);
    tracing::debug!(workers, "workqueue: starting workers");
    let mut set = tokio::task::JoinSet::new();
    for worker in 0..workers {
        let (queue, reconcile) = (queue.clone(), reconcile.clone());
        set.spawn(async move {
            while let Some(item) = queue.next().await {
                process(&queue, &reconcile, item, worker).await;
            }
        });
    }
    while let Some(joined) = set.join_next().await {
        if let Err(e) = joined {
            // Workers catch reconcile panics, so this is only a cancelled runtime.
            tracing::error!(error = %e, "workqueue: worker task ended abnormally");
        }
    }
    tracing::debug!("workqueue: all workers stopped");
}

async fn process<T, Q, F, Fut, E>(queue: &Q, reconcile: &F, item: T, worker: usize)
where
    T: Item,
    Q: WorkQueue<T>,
    F: Fn(T) -> Fut,
    Fut: Future<Output = Result<Requeue, E>>,
    E: fmt::Display,
{
    let mut in_flight = InFlight { queue, item: Some(item.clone()) };
    // Catch panics both in the call that creates the future and in its polls.
    let outcome = match std::panic::catch_unwind(AssertUnwindSafe(|| reconcile(item.clone()))) {
        Ok(fut) => AssertUnwindSafe(fut).catch_unwind().await,
        Err(panic) => Err(panic),
    };
    match outcome {
        Ok(Ok(Requeue::Never)) => queue.forget(&item),
        Ok(Ok(Requeue::After(after))) => {
            queue.forget(&item);
            queue.add_after(item.clone(), after);
        }
        Ok(Err(error)) => {
            tracing::warn!(worker, %error, "workqueue: reconcile failed, requeueing with rate limit");
            queue.add_rate_limited(item.clone());
        }
        Err(panic) => {
            let message = panic_message(&*panic).unwrap_or("non-string panic payload");
            tracing::error!(worker, panic = %message, "workqueue: reconcile panicked, requeueing with rate limit");
            queue.add_rate_limited(item.clone());
        }
    }
    in_flight.item = None;
    queue.done(&item);
}

/// An item a worker took from the queue and has not finished. If the worker is dropped before it
/// finishes (the runner's future or task was cancelled mid-reconcile), the item is re-added and
/// marked done: it is handed out again instead of being lost, and it does not stay in the
/// processing set for ever (where `shut_down_with_drain` would wait for it for ever). After a
/// shutdown the re-add is dropped, as every add is.
struct InFlight<'a, T: Item, Q: WorkQueue<T>> {
    queue: &'a Q,
    /// `None` once the worker finished with the item normally.
    item: Option<T>,
}

impl<T: Item, Q: WorkQueue<T>> Drop for InFlight<'_, T, Q> {
    fn drop(&mut self) {
        if let Some(item) = self.item.take() {
            tracing::debug!("workqueue: worker cancelled mid-reconcile; re-adding its item");
            // A zero delay is a plain add: no timer, so this works while the runtime shuts down.
            self.queue.add_after(item.clone(), Duration::ZERO);
            self.queue.done(&item);
        }
    }
}

/// Runs `work(piece)` for every piece in `0..pieces` on up to `workers` threads, handing out
/// `chunk_size` consecutive pieces at a time; stops handing out pieces once `cancel` is
/// cancelled. client-go's `workqueue.ParallelizeUntil` with `WithChunkSize`.
///
/// The calling thread is one of the workers; the function returns when every started piece has
/// finished. A `chunk_size` of 0 is treated as 1.
///
/// # Examples
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use kcache_workqueue::parallelize_until;
///
/// let sum = AtomicU64::new(0);
/// parallelize_until(None, 4, 1000, 10, |p| {
///     sum.fetch_add(p as u64, Ordering::Relaxed);
/// });
/// assert_eq!(sum.load(Ordering::Relaxed), 999 * 1000 / 2);
/// ```
pub fn parallelize_until<F>(
    cancel: Option<&CancellationToken>,
    workers: usize,
    pieces: usize,
    chunk_size: usize,
    work: F,
) where
    F: Fn(usize) + Sync,
{
    if pieces == 0 {
        return;
    }
    let chunk_size = chunk_size.max(1);
    let chunks = pieces.div_ceil(chunk_size);
    let workers = workers.clamp(1, chunks);
    let next_chunk = AtomicUsize::new(0);
    let stopped = || cancel.is_some_and(CancellationToken::is_cancelled);
    let run = || {
        loop {
            let chunk = next_chunk.fetch_add(1, Ordering::Relaxed);
            if chunk >= chunks {
                return;
            }
            let start = chunk * chunk_size;
            let end = (start + chunk_size).min(pieces);
            for piece in start..end {
                if stopped() {
                    return;
                }
                work(piece);
            }
        }
    };
    std::thread::scope(|scope| {
        for _ in 1..workers {
            scope.spawn(run);
        }
        run();
    });
}
