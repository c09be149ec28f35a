//! Compile-time checks that the public types are `Send`, `Sync` and `Unpin` where users need
//! them to be (tokio's `tests/async_send_sync.rs` habit).

#![allow(dead_code)]

use kcache_workqueue::*;

fn require_send<T: Send>() {}
fn require_sync<T: Sync>() {}
fn require_unpin<T: Unpin>() {}

fn all<T: Send + Sync + Unpin>() {
    require_send::<T>();
    require_sync::<T>();
    require_unpin::<T>();
}

#[test]
fn public_types_are_send_sync_unpin() {
    all::<Queue<String>>();
    all::<Queue<u64, FifoStorage<u64>>>();
    all::<QueueBuilder<String>>();
    all::<FifoStorage<String>>();
    all::<DelayingQueue<String>>();
    all::<RateLimitingQueue<String>>();
    all::<PriorityQueue<String>>();
    all::<PriorityQueueBuilder<String>>();
    all::<AddOpts>();
    all::<Requeue>();
    all::<QueueError>();
    all::<ItemExponentialFailureRateLimiter<String>>();
    all::<ItemFastSlowRateLimiter<String>>();
    all::<BucketRateLimiter>();
    all::<MaxOfRateLimiter<String>>();
    all::<WithMaxWaitRateLimiter<BucketRateLimiter>>();
    all::<NoopMetric>();
}

#[test]
fn futures_are_send_and_unpin() {
    fn get_future(q: &Queue<String>) -> impl Send + Unpin + '_ {
        q.get()
    }
    fn priority_get_future(q: &PriorityQueue<String>) -> impl Send + Unpin + '_ {
        q.get_with_priority()
    }
    fn drain_future(q: &Queue<String>) -> impl Send + '_ {
        q.shut_down_with_drain()
    }
    fn rl_drain_future(q: &RateLimitingQueue<String>) -> impl Send + '_ {
        q.shut_down_with_drain()
    }
    fn pq_get(q: &PriorityQueue<String>) -> impl Send + '_ {
        q.get()
    }
    fn runner(q: RateLimitingQueue<String>) -> impl Send {
        run_workers(q, 2, |_k: String| async { Ok::<_, String>(Requeue::Never) })
    }
    let _ = (get_future, priority_get_future, drain_future, rl_drain_future, pq_get, runner);
    require_send::<Get<'static, String, FifoStorage<String>>>();
    require_sync::<Get<'static, String, FifoStorage<String>>>();
    require_send::<PriorityGet<'static, String>>();
}

#[test]
fn trait_objects_are_usable_across_threads() {
    require_send::<Box<dyn RateLimiter<String>>>();
    require_sync::<Box<dyn RateLimiter<String>>>();
    require_send::<std::sync::Arc<dyn MetricsProvider>>();
    require_sync::<std::sync::Arc<dyn MetricsProvider>>();
}
