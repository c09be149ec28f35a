//! The rate-limiting queue: client-go's `TypedRateLimitingInterface` (`AddRateLimited`,
//! `Forget`, `NumRequeues`) on top of the delaying queue.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::delaying::{DelayingQueue, forward_queue_methods};
use crate::error::QueueError;
use crate::item::Item;
use crate::queue::{FifoStorage, Queue, QueueBuilder, QueueStorage};
use crate::rate_limiters::RateLimiter;

/// A [`DelayingQueue`] whose retries are paced by a [`RateLimiter`].
///
/// The standard controller loop: `get` a key, reconcile it, then on success
/// [`forget`](RateLimitingQueue::forget) it (resetting its backoff) and on failure
/// [`add_rate_limited`](RateLimitingQueue::add_rate_limited) it; call `done` either way.
///
/// # Examples
///
/// ```
/// use kcache_workqueue::{RateLimitingQueue, default_controller_rate_limiter};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let q = RateLimitingQueue::new(default_controller_rate_limiter());
/// q.add("ns/name".to_string());
/// while let Some(key) = q.get().await {
///     let failed = q.num_requeues(&key) < 2; // pretend the first two attempts fail
///     if failed {
///         q.add_rate_limited(key.clone());
///     } else {
///         q.forget(&key);
///         q.shut_down();
///     }
///     q.done(&key);
/// }
/// # }
/// ```
pub struct RateLimitingQueue<T, S = FifoStorage<T>> {
    delaying: DelayingQueue<T, S>,
    limiter: Arc<dyn RateLimiter<T>>,
}

impl<T, S> Clone for RateLimitingQueue<T, S> {
    fn clone(&self) -> Self {
        Self { delaying: self.delaying.clone(), limiter: self.limiter.clone() }
    }
}

impl<T, S> fmt::Debug for RateLimitingQueue<T, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitingQueue").field("queue", &self.delaying).finish_non_exhaustive()
    }
}

impl<T: Item> RateLimitingQueue<T> {
    /// Creates an unnamed rate-limiting queue without metrics.
    ///
    /// # Panics
    ///
    /// Panics outside a Tokio runtime; use [`QueueBuilder::build_rate_limiting`] for an error
    /// instead.
    pub fn new(limiter: impl RateLimiter<T> + 'static) -> Self {
        match Queue::builder().build_rate_limiting(limiter) {
            Ok(q) => q,
            Err(e) => panic!("{e}"),
        }
    }
}

impl<T: Item, S: QueueStorage<T>> QueueBuilder<T, S> {
    /// Builds a [`RateLimitingQueue`] using `limiter`.
    ///
    /// # Errors
    ///
    /// [`QueueError::NoRuntime`] when called outside a Tokio runtime.
    pub fn build_rate_limiting(
        self,
        limiter: impl RateLimiter<T> + 'static,
    ) -> Result<RateLimitingQueue<T, S>, QueueError> {
        Ok(RateLimitingQueue { delaying: self.build_delaying()?, limiter: Arc::new(limiter) })
    }
}

impl<T: Item, S: QueueStorage<T>> RateLimitingQueue<T, S> {
    forward_queue_methods!(delaying.inner.queue);

    /// Adds `item` after the delay the rate limiter chooses for it (client-go's
    /// `AddRateLimited`). The limiter records the attempt even after shutdown, as in client-go;
    /// the add itself is then dropped.
    pub fn add_rate_limited(&self, item: T) {
        let after = self.limiter.when(&item);
        self.delaying.add_after(item, after);
    }

    /// Adds `item` after `after`; see [`DelayingQueue::add_after`].
    pub fn add_after(&self, item: T, after: Duration) {
        self.delaying.add_after(item, after);
    }

    /// Resets the limiter's history for `item` (call it when the item succeeded). A no-op for
    /// an item the limiter never saw.
    pub fn forget(&self, item: &T) {
        self.limiter.forget(item);
    }

    /// How many times `item` has been rate limited since it was last forgotten.
    pub fn num_requeues(&self, item: &T) -> usize {
        self.limiter.num_requeues(item)
    }

    /// Number of items waiting for their delay to pass.
    pub fn pending_len(&self) -> usize {
        self.delaying.pending_len()
    }

    /// Shuts down without waiting; see [`Queue::shut_down`].
    pub fn shut_down(&self) {
        self.delaying.shut_down();
    }

    /// Shuts down and waits for in-flight items; see [`Queue::shut_down_with_drain`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the queue is shut down on first poll; dropping the future only stops waiting.
    pub async fn shut_down_with_drain(&self) {
        self.delaying.shut_down_with_drain().await;
    }

    /// Blocking twin of [`shut_down_with_drain`](RateLimitingQueue::shut_down_with_drain).
    pub fn shut_down_with_drain_blocking(&self) {
        self.delaying.shut_down_with_drain_blocking();
    }

    /// The underlying delaying queue, for what only it offers (its pending count, say).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use kcache_workqueue::{ItemExponentialFailureRateLimiter, RateLimitingQueue};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let limiter = ItemExponentialFailureRateLimiter::new(Duration::from_millis(5), Duration::from_secs(1));
    /// let q = RateLimitingQueue::<&str>::new(limiter);
    /// q.add_rate_limited("a"); // waits 5 ms before it is queued
    /// assert_eq!(q.delaying_queue().pending_len(), 1);
    /// assert_eq!(q.len(), 0);
    /// # }
    /// ```
    pub fn delaying_queue(&self) -> &DelayingQueue<T, S> {
        &self.delaying
    }
}
