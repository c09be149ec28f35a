//! Scenarios of client-go's `util/workqueue/delaying_queue_test.go`, rewritten for
//! [`DelayingQueue`] on Tokio's paused clock (the Go tests step a fake clock).

use std::time::Duration;

use kcache_workqueue::{DelayingQueue, Queue};
use tokio::time::{Instant, advance};

const MS: Duration = Duration::from_millis(1);

/// Lets the timer task run after the clock moved.
async fn settle() {
    for _ in 0..8 {
        tokio::task::yield_now().await;
    }
}

async fn step(d: Duration) {
    advance(d).await;
    settle().await;
}

/// Mirrors `TestSimpleQueue`: an item added with a delay appears once the delay has passed, and
/// nothing else appears afterwards.
#[tokio::test(start_paused = true)]
async fn simple_queue() {
    let q = DelayingQueue::new();
    q.add_after("foo", 50 * MS);
    settle().await;
    assert_eq!(q.pending_len(), 1);
    assert_eq!(q.len(), 0, "should not have added");

    step(60 * MS).await;
    assert_eq!(q.len(), 1, "should have added");
    assert_eq!(q.pending_len(), 0);
    let item = q.get().await.unwrap();
    q.done(&item);

    // Past client-go's 10 s heartbeat: nothing reappears.
    step(Duration::from_secs(10)).await;
    assert_eq!(q.len(), 0, "should not have added");
}

/// Mirrors `TestDeduping`: re-adding a pending item keeps the earlier ready time.
#[tokio::test(start_paused = true)]
async fn deduping() {
    let q = DelayingQueue::new();
    q.add_after("foo", 50 * MS);
    q.add_after("foo", 70 * MS);
    settle().await;
    assert_eq!(q.pending_len(), 1);
    assert_eq!(q.len(), 0);

    // Step past the first deadline: it fires.
    step(60 * MS).await;
    assert_eq!(q.len(), 1);
    assert_eq!(q.pending_len(), 0);
    let item = q.get().await.unwrap();
    q.done(&item);

    // Past the second add's deadline: nothing, it was merged into the first.
    step(20 * MS).await;
    assert_eq!(q.len(), 0);

    // Again, but now the later add comes first and the earlier one must override it.
    q.add_after("foo", 50 * MS);
    q.add_after("foo", 30 * MS);
    settle().await;
    assert_eq!(q.pending_len(), 1);
    assert_eq!(q.len(), 0);
    step(40 * MS).await;
    assert_eq!(q.len(), 1);
    let item = q.get().await.unwrap();
    q.done(&item);
    step(20 * MS).await;
    assert_eq!(q.len(), 0);
}

/// Mirrors `TestAddTwoFireEarly`: items fire in deadline order, including one added while
/// another is already waiting.
#[tokio::test(start_paused = true)]
async fn add_two_fire_early() {
    let q = DelayingQueue::new();
    q.add_after("foo", Duration::from_secs(1));
    q.add_after("bar", 50 * MS);
    settle().await;
    assert_eq!(q.pending_len(), 2);
    assert_eq!(q.len(), 0);

    step(60 * MS).await;
    assert_eq!(q.len(), 1);
    assert_eq!(q.pending_len(), 1);
    assert_eq!(q.get().await, Some("bar"));

    q.add_after("baz", Duration::from_secs(2));
    step(Duration::from_secs(1)).await;
    assert_eq!(q.len(), 1);
    assert_eq!(q.pending_len(), 1);
    assert_eq!(q.get().await, Some("foo"));

    step(Duration::from_secs(2)).await;
    assert_eq!(q.len(), 1);
    assert_eq!(q.pending_len(), 0);
    assert_eq!(q.get().await, Some("baz"));
}

/// Mirrors `TestCopyShifting`: three items added in reverse deadline order come out by deadline.
#[tokio::test(start_paused = true)]
async fn copy_shifting() {
    let q = DelayingQueue::new();
    q.add_after("foo", Duration::from_secs(1));
    q.add_after("bar", 500 * MS);
    q.add_after("baz", 250 * MS);
    settle().await;
    assert_eq!(q.pending_len(), 3);
    assert_eq!(q.len(), 0);

    step(Duration::from_secs(2)).await;
    assert_eq!(q.len(), 3);
    assert_eq!(q.pending_len(), 0);
    assert_eq!(q.get().await, Some("baz"));
    assert_eq!(q.get().await, Some("bar"));
    assert_eq!(q.get().await, Some("foo"));
}

/// A zero delay is a plain add (client-go: `duration <= 0`).
#[tokio::test(start_paused = true)]
async fn zero_delay_adds_at_once() {
    let q = DelayingQueue::new();
    q.add_after(1, Duration::ZERO);
    assert_eq!(q.len(), 1);
    assert_eq!(q.pending_len(), 0);
}

/// A getter parked on an empty queue receives the delayed item exactly at its deadline.
#[tokio::test(start_paused = true)]
async fn get_wakes_at_the_deadline() {
    let q = DelayingQueue::new();
    let start = Instant::now();
    q.add_after("x", Duration::from_secs(3));
    assert_eq!(q.get().await, Some("x"));
    assert_eq!(start.elapsed(), Duration::from_secs(3));
}

/// A new earlier deadline re-arms the single timer (the head moved earlier).
#[tokio::test(start_paused = true)]
async fn earlier_deadline_rearms_the_timer() {
    let q = DelayingQueue::new();
    let start = Instant::now();
    q.add_after("late", Duration::from_secs(60));
    settle().await;
    q.add_after("early", Duration::from_secs(1));
    assert_eq!(q.get().await, Some("early"));
    assert_eq!(start.elapsed(), Duration::from_secs(1));
    assert_eq!(q.get().await, Some("late"));
    assert_eq!(start.elapsed(), Duration::from_secs(60));
}

/// add_after never blocks, even with far more pending items than client-go's 1000-slot channel,
/// and a huge delay does not overflow.
#[tokio::test(start_paused = true)]
async fn many_pending_items_and_huge_delays() {
    let q = DelayingQueue::new();
    for i in 0..50_000u32 {
        q.add_after(i, Duration::from_millis(u64::from(i % 997) + 1));
    }
    q.add_after(u32::MAX, Duration::MAX);
    assert_eq!(q.pending_len(), 50_001);
    step(Duration::from_secs(1)).await;
    // The timer moves due items in batches and yields between them.
    for _ in 0..1000 {
        if q.len() == 50_000 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(q.len(), 50_000);
    assert_eq!(q.pending_len(), 1);
}

/// Misuse: add_after after shutdown is dropped, and shutdown discards pending items.
#[tokio::test(start_paused = true)]
async fn add_after_shut_down_is_dropped() {
    let q = DelayingQueue::new();
    q.add_after("pending", Duration::from_secs(1));
    q.shut_down();
    q.add_after("late", Duration::from_secs(1));
    q.add_after("now", Duration::ZERO);
    step(Duration::from_secs(2)).await;
    assert_eq!(q.len(), 0);
    assert_eq!(q.get().await, None);
}

/// Dropping every handle stops the timer task (it only holds a weak reference).
#[tokio::test(start_paused = true)]
async fn dropping_the_queue_stops_the_timer() {
    let q = DelayingQueue::<u8>::new();
    q.add_after(1, Duration::from_secs(1));
    let weak_probe: Queue<u8> = q.queue().clone();
    drop(q);
    step(Duration::from_secs(2)).await;
    // The queue handle we kept still works; the item was never moved in since the timer quit.
    assert_eq!(weak_probe.len(), 0);
}

/// Outside a runtime the builder reports an error instead of panicking.
#[test]
fn build_outside_runtime_is_an_error() {
    let r = Queue::<u8>::builder().build_delaying();
    assert!(matches!(r, Err(kcache_workqueue::QueueError::NoRuntime(_))));
}
