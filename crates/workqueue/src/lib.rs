//! Fair, stingy work queues with delaying, rate-limited and priority variants: the Rust
//! counterpart of client-go's `util/workqueue` and controller-runtime's priority queue.
//!
//! # The model
//!
//! A controller puts a work queue between "an event happened" and "reconcile". The whole
//! concurrency model is client-go's: a FIFO, a *dirty* set and a *processing* set under one lock.
//!
//! * [`add`](Queue::add) marks an item dirty and queues it once; more adds before a worker takes
//!   it collapse into that one entry.
//! * [`get`](Queue::get) moves it from dirty to processing: no other worker can get it now.
//! * An add while it is processing only marks it dirty; [`done`](Queue::done) queues it again.
//!
//! So an item is never processed by two workers at once, a burst of adds becomes one or two
//! runs, and an add during processing is never lost.
//!
//! | kcache-workqueue | client-go / controller-runtime |
//! |---|---|
//! | [`Queue`] | `workqueue.NewTyped` (`TypedInterface`) |
//! | [`QueueStorage`], [`FifoStorage`] | `workqueue.Queue[T]` (`Touch`, `Push`, `Len`, `Pop`) |
//! | [`DelayingQueue`] | `NewTypedDelayingQueue` (`AddAfter`) |
//! | [`RateLimitingQueue`] | `NewTypedRateLimitingQueue` (`AddRateLimited`, `Forget`, `NumRequeues`) |
//! | [`RateLimiter`] and friends | `default_rate_limiters.go` |
//! | [`PriorityQueue`] | controller-runtime `priorityqueue.New` |
//! | [`AddOpts::for_event`], [`HandlerEvent`] | controller-runtime `handler.WithLowPriorityWhenUnchanged` (what `TypedFuncs` does on a priority queue) |
//! | [`MetricsProvider`] | `workqueue.MetricsProvider` |
//! | [`run_workers`] | the `processNextWorkItem` loop every controller writes |
//! | [`parallelize_until`] | `workqueue.ParallelizeUntil` |
//!
//! Differences worth knowing: `get` is an `async fn` and is cancel safe, with
//! [`get_blocking`](Queue::get_blocking) for plain threads; [`done`](Queue::done) takes `&T`;
//! `add_after` never blocks (client-go's 1000-slot hand-off channel does); timers use Tokio's
//! clock, so tests pause and advance time instead of sleeping. `get` is not literally an
//! `async fn`: it returns the nameable [`Get`] future.
//!
//! Queues that run a timer ([`DelayingQueue`], [`RateLimitingQueue`], [`PriorityQueue`]) are
//! built inside a Tokio runtime; the plain [`Queue`] needs none.
//!
//! # Metrics and features
//!
//! Give a queue a [`MetricsProvider`] through its builder to get client-go's metrics (`depth`,
//! `adds_total`, `queue_duration_seconds`, `work_duration_seconds`, `unfinished_work_seconds`,
//! `longest_running_processor_seconds`, `retries_total`, all labelled by queue `name`). Without
//! one, the queue keeps no timestamps and pays one branch per operation. The `prometheus` cargo
//! feature adds `PrometheusMetricsProvider`, backed by the `prometheus-client` crate.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use kcache_workqueue::{RateLimitingQueue, default_controller_rate_limiter};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let queue = RateLimitingQueue::new(default_controller_rate_limiter());
//!
//! // An informer's event handler only enqueues keys.
//! for key in ["default/a", "default/b", "default/a"] {
//!     queue.add(key.to_string());
//! }
//! assert_eq!(queue.len(), 2);
//!
//! // A worker: the standard processNextWorkItem loop.
//! let worker = {
//!     let queue = queue.clone();
//!     tokio::spawn(async move {
//!         let mut runs = 0;
//!         while let Some(key) = queue.get().await {
//!             runs += 1;
//!             let result: Result<(), ()> = if runs == 1 { Err(()) } else { Ok(()) };
//!             match result {
//!                 Ok(()) => queue.forget(&key),
//!                 Err(()) => queue.add_rate_limited(key.clone()), // retried in 5 ms
//!             }
//!             queue.done(&key);
//!         }
//!         runs
//!     })
//! };
//!
//! tokio::time::sleep(Duration::from_secs(1)).await;
//! queue.shut_down_with_drain().await;
//! assert_eq!(worker.await.unwrap(), 3); // a failed once, then a and b succeeded
//! # }
//! ```

mod delaying;
mod error;
mod item;
mod metrics;
mod pending;
mod priority;
#[cfg(feature = "prometheus")]
mod prometheus;
mod queue;
mod rate_limiters;
mod rate_limiting_queue;
mod runner;
mod slot_table;
mod waiters;

pub use delaying::DelayingQueue;
pub use error::{QueueError, Result};
pub use item::Item;
pub use metrics::{
    CounterMetric, GaugeMetric, HistogramMetric, MetricsProvider, NoopMetric, SettableGaugeMetric,
};
pub use priority::{AddOpts, HandlerEvent, LOW_PRIORITY, PriorityGet, PriorityQueue, PriorityQueueBuilder};
#[cfg(feature = "prometheus")]
pub use prometheus::PrometheusMetricsProvider;
pub use queue::{FifoStorage, Get, Queue, QueueBuilder, QueueStorage};
pub use rate_limiters::{
    BucketRateLimiter, ItemExponentialFailureRateLimiter, ItemFastSlowRateLimiter, MaxOfRateLimiter,
    RateLimiter, WithMaxWaitRateLimiter, default_controller_rate_limiter, default_item_based_rate_limiter,
};
pub use rate_limiting_queue::RateLimitingQueue;
pub use runner::{Requeue, WorkQueue, parallelize_until, run_workers};
