//! Scenarios of controller-runtime's `pkg/controller/priorityqueue/priorityqueue_test.go` (the
//! ginkgo cases and the Go tests), rewritten for [`PriorityQueue`] on Tokio's paused clock
//! (controller-runtime uses `synctest` and a fake `now`/`tick`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use kcache_workqueue::{
    AddOpts, HandlerEvent, ItemExponentialFailureRateLimiter, LOW_PRIORITY, PriorityQueue, RateLimiter,
};
use parking_lot::Mutex;
use rand::Rng;
use tokio::time::{Instant, advance};

use crate::common::{TestProvider, settle};

fn new_queue() -> (PriorityQueue<String>, Arc<TestProvider>) {
    let metrics = Arc::new(TestProvider::default());
    let q = PriorityQueue::builder().name("test").metrics_provider(metrics.clone()).build().unwrap();
    (q, metrics)
}

fn s(x: &str) -> String {
    x.to_string()
}

fn prio(p: i32) -> AddOpts {
    AddOpts { priority: Some(p), ..AddOpts::default() }
}

fn after(d: Duration) -> AddOpts {
    AddOpts { after: d, ..AddOpts::default() }
}

fn depths(pairs: &[(i32, i64)]) -> BTreeMap<i32, i64> {
    pairs.iter().copied().collect()
}

/// Mirrors "returns an item".
#[tokio::test(start_paused = true)]
async fn returns_an_item() {
    let (q, m) = new_queue();
    q.add_with_opts(AddOpts::default(), [s("foo")]);
    assert_eq!(q.get_with_priority().await, Some((s("foo"), 0)));
    assert_eq!(m.depths(), depths(&[(0, 0)]));
    assert_eq!(m.adds(), 1);
    assert_eq!(m.retries(), 0);
}

/// Mirrors "returns items in order".
#[tokio::test(start_paused = true)]
async fn returns_items_in_order() {
    let (q, m) = new_queue();
    q.add(s("foo"));
    q.add(s("bar"));
    assert_eq!(q.get().await, Some(s("foo")));
    assert_eq!(q.get().await, Some(s("bar")));
    assert_eq!(m.depths(), depths(&[(0, 0)]));
    assert_eq!(m.adds(), 2);
}

/// Mirrors "doesn't return an item that is currently locked".
#[tokio::test(start_paused = true)]
async fn does_not_return_a_locked_item() {
    let (q, m) = new_queue();
    q.add(s("foo"));
    assert_eq!(q.get().await, Some(s("foo")));
    q.add(s("foo"));
    q.add(s("bar"));
    assert_eq!(q.get().await, Some(s("bar")));
    assert_eq!(m.depths(), depths(&[(0, 1)]));
    assert_eq!(m.adds(), 3);
}

/// Mirrors "returns an item as soon as its unlocked".
#[tokio::test(start_paused = true)]
async fn returns_an_item_as_soon_as_it_is_unlocked() {
    let (q, m) = new_queue();
    q.add(s("foo"));
    assert_eq!(q.get().await, Some(s("foo")));
    q.add(s("foo"));
    q.add(s("bar"));
    assert_eq!(q.get().await, Some(s("bar")));
    q.add(s("baz"));
    q.done(&s("foo"));
    assert_eq!(q.get().await, Some(s("foo")));
    assert_eq!(m.depths(), depths(&[(0, 1)]));
    assert_eq!(m.adds(), 4);
}

/// Mirrors "de-duplicates items".
#[tokio::test(start_paused = true)]
async fn de_duplicates_items() {
    let (q, m) = new_queue();
    q.add(s("foo"));
    q.add(s("foo"));
    assert_eq!(q.len(), 1);
    assert_eq!(m.depths(), depths(&[(0, 1)]));
    assert_eq!(m.adds(), 1);
}

/// Mirrors "enqueues a locked item".
#[tokio::test(start_paused = true)]
async fn enqueues_a_locked_item() {
    let (q, m) = new_queue();
    q.add(s("foo"));
    assert_eq!(q.len(), 1);
    assert_eq!(q.get_with_priority().await, Some((s("foo"), 0)));
    q.add(s("foo"));
    assert_eq!(q.len(), 1);
    q.done(&s("foo"));
    assert_eq!(q.get_with_priority().await, Some((s("foo"), 0)));
    assert_eq!(m.depths(), depths(&[(0, 0)]));
    assert_eq!(m.adds(), 2);
}

/// Mirrors "retains the highest priority".
#[tokio::test(start_paused = true)]
async fn retains_the_highest_priority() {
    let (q, m) = new_queue();
    q.add_with_opts(prio(1), [s("foo")]);
    q.add_with_opts(prio(2), [s("foo")]);
    assert_eq!(q.get_with_priority().await, Some((s("foo"), 2)));
    assert_eq!(q.len(), 0);
    assert_eq!(m.depths(), depths(&[(1, 0), (2, 0)]));
    assert_eq!(m.adds(), 1);
}

/// Mirrors "will not decrease the priority".
#[tokio::test(start_paused = true)]
async fn will_not_decrease_the_priority() {
    let (q, m) = new_queue();
    q.add_with_opts(prio(2), [s("foo")]);
    q.add_with_opts(prio(1), [s("foo")]);
    assert_eq!(q.get_with_priority().await, Some((s("foo"), 2)));
    assert_eq!(q.len(), 0);
    assert_eq!(m.depths(), depths(&[(2, 0)]));
    assert_eq!(m.adds(), 1);
}

/// Mirrors "gets pushed to the front if the priority increases".
#[tokio::test(start_paused = true)]
async fn gets_pushed_to_the_front_if_the_priority_increases() {
    let (q, m) = new_queue();
    q.add(s("foo"));
    q.add(s("bar"));
    q.add(s("baz"));
    q.add_with_opts(prio(1), [s("baz")]);
    assert_eq!(q.get_with_priority().await, Some((s("baz"), 1)));
    assert_eq!(q.len(), 2);
    assert_eq!(m.depths(), depths(&[(0, 2), (1, 0)]));
    assert_eq!(m.adds(), 3);
}

/// Mirrors "retains the lowest after duration".
#[tokio::test(start_paused = true)]
async fn retains_the_lowest_after_duration() {
    let (q, m) = new_queue();
    q.add_with_opts(after(Duration::ZERO), [s("foo")]);
    q.add_with_opts(after(Duration::from_secs(3600)), [s("foo")]);
    assert_eq!(q.get_with_priority().await, Some((s("foo"), 0)));
    assert_eq!(q.len(), 0);
    assert_eq!(m.depths(), depths(&[(0, 0)]));
    assert_eq!(m.adds(), 1);
}

/// Mirrors "doesn't include non-ready items in Len()".
#[tokio::test(start_paused = true)]
async fn len_excludes_non_ready_items() {
    let (q, m) = new_queue();
    q.add_with_opts(after(Duration::from_secs(60)), [s("foo")]);
    q.add(s("baz"));
    q.add_with_opts(after(Duration::from_secs(60)), [s("bar")]);
    q.add(s("bal"));
    assert_eq!(q.len(), 2);
    assert_eq!(m.depths(), depths(&[(0, 2)]));
}

/// Mirrors "Get from priority queue might get stuck when the priority queue is shut down"
/// (controller-runtime issue 3239): after shutdown, get returns at once, twice.
#[tokio::test(start_paused = true)]
async fn get_after_shut_down_returns_at_once() {
    let (q, _) = new_queue();
    q.add(s("baz"));
    q.shut_down();
    q.add_with_opts(after(Duration::from_secs(1)), [s("foo")]);
    assert_eq!(q.get_with_priority().await, None);
    assert_eq!(q.get_with_priority().await, None);
}

/// Mirrors "returns many items": a large mixed queue drains without trouble, 20 times.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn returns_many_items() {
    let q: PriorityQueue<String> = PriorityQueue::new();
    for _ in 0..20 {
        for i in 0..1000 {
            let rn = rand::rng().random_range(0..100);
            if rn < 10 {
                q.add_with_opts(after(Duration::from_millis(rn as u64)), [format!("foo{i}")]);
            } else {
                q.add_with_opts(prio(rn), [format!("foo{i}")]);
            }
        }
        let workers: Vec<_> = (0..100)
            .map(|_| {
                let q = q.clone();
                tokio::spawn(async move {
                    for _ in 0..10 {
                        let item = q.get().await.unwrap();
                        q.done(&item);
                    }
                })
            })
            .collect();
        for w in workers {
            w.await.unwrap();
        }
    }
}

/// Mirrors "updates metrics correctly for an item that gets initially added with after and then
/// without".
#[tokio::test(start_paused = true)]
async fn metrics_for_item_added_with_after_then_without() {
    let (q, m) = new_queue();
    q.add_with_opts(after(Duration::from_secs(3600)), [s("foo")]);
    assert_eq!(q.len(), 0);
    assert_eq!(m.depths(), depths(&[]));
    q.add(s("foo"));
    assert_eq!(q.len(), 1);
    assert_eq!(m.depths(), depths(&[(0, 1)]));
    assert_eq!(q.get().await, Some(s("foo")));
    assert_eq!(q.len(), 0);
    assert_eq!(m.depths(), depths(&[(0, 0)]));
}

/// Mirrors "updates metrics correctly when an item with after is re-added with higher priority
/// and no after".
#[tokio::test(start_paused = true)]
async fn metrics_for_waiting_item_re_added_with_higher_priority() {
    let (q, m) = new_queue();
    q.add_with_opts(
        AddOpts { after: Duration::from_secs(3600), priority: Some(0), ..AddOpts::default() },
        [s("foo")],
    );
    assert_eq!(q.len(), 0);
    assert_eq!(m.depths(), depths(&[]));
    q.add_with_opts(prio(1), [s("foo")]);
    assert_eq!(q.len(), 1);
    assert_eq!(m.depths(), depths(&[(1, 1)]));
    assert_eq!(q.get_with_priority().await, Some((s("foo"), 1)));
    assert_eq!(q.len(), 0);
    assert!(m.depths().values().all(|d| *d == 0));
}

/// Mirrors "follows FIFO order in the new priority queue when item priority changes".
#[tokio::test(start_paused = true)]
async fn fifo_within_new_priority_after_raise() {
    let (q, _) = new_queue();
    q.add_with_opts(prio(0), [s("foo")]);
    q.add_with_opts(prio(1), [s("bar")]);
    q.add_with_opts(prio(1), [s("foo")]);
    assert_eq!(q.len(), 2);
    assert_eq!(q.get_with_priority().await, Some((s("bar"), 1)));
    assert_eq!(q.len(), 1);
    assert_eq!(q.get_with_priority().await, Some((s("foo"), 1)));
    assert_eq!(q.len(), 0);
}

/// Mirrors `lockedAddWithOpts` (`newPriority := ptr.Deref(o.Priority, 0)`) and the model of
/// `TestFuzzPriorityQueue`: an add without a priority counts as priority 0, so it raises an
/// item queued at [`LOW_PRIORITY`] (an initial-list event) to 0, behind the items already at 0;
/// for a ready, a waiting and a locked (held) item alike. The depth moves with a ready item.
#[tokio::test(start_paused = true)]
async fn add_without_priority_raises_a_low_priority_item_to_zero() {
    let (q, m) = new_queue();
    q.add_with_opts(prio(LOW_PRIORITY), [s("initial-1"), s("initial-2")]);
    q.add(s("changed"));
    q.add(s("initial-2")); // a real update of an object from the initial list
    assert_eq!(m.depths(), depths(&[(LOW_PRIORITY, 1), (0, 2)]));
    assert_eq!(q.get_with_priority().await, Some((s("changed"), 0)));
    assert_eq!(q.get_with_priority().await, Some((s("initial-2"), 0)));
    assert_eq!(q.get_with_priority().await, Some((s("initial-1"), LOW_PRIORITY)));
    assert_eq!(m.depths(), depths(&[(LOW_PRIORITY, 0), (0, 0)]));

    // Waiting: the raise happens while it waits, and it becomes ready at 0.
    q.add_with_opts(
        AddOpts { after: Duration::from_secs(1), priority: Some(LOW_PRIORITY), ..AddOpts::default() },
        [s("waiting")],
    );
    q.add_after(s("waiting"), Duration::from_secs(2));
    advance(Duration::from_secs(1)).await;
    settle().await;
    assert_eq!(q.get_with_priority().await, Some((s("waiting"), 0)));

    // Locked: a low-priority re-add of a handed-out item is raised by a plain add.
    q.add_with_opts(prio(LOW_PRIORITY), [s("waiting")]);
    q.add(s("waiting"));
    q.done(&s("waiting"));
    assert_eq!(q.get_with_priority().await, Some((s("waiting"), 0)));
}

/// Mirrors `TestHighPriorityItemsAreReturnedBeforeLowPriorityItemMultipleTimes` for after = 0
/// and after = 1 s (a negative `After` is not expressible with `Duration`; it means "now" in Go,
/// like zero).
#[tokio::test(start_paused = true)]
async fn high_priority_items_are_returned_before_low_priority_items() {
    for delay in [Duration::ZERO, Duration::from_secs(1)] {
        let (q, m) = new_queue();
        const PER: usize = 1000;
        let levels = [("high", 10), ("upperMiddle", 5), ("middle", 0), ("lowMiddle", -5), ("low", -10)];
        for i in 0..PER {
            for (name, p) in levels {
                q.add_with_opts(
                    AddOpts { priority: Some(p), after: delay, ..AddOpts::default() },
                    [format!("{name}-{i}")],
                );
            }
        }
        if !delay.is_zero() {
            advance(delay).await;
            settle().await;
        }
        for (name, p) in levels {
            for i in 0..PER {
                assert_eq!(q.get_with_priority().await, Some((format!("{name}-{i}"), p)));
            }
        }
        assert_eq!(m.depths(), depths(&[(-10, 0), (-5, 0), (0, 0), (5, 0), (10, 0)]));
        assert_eq!(m.adds(), (PER * 5) as i64);
        assert_eq!(m.retries(), if delay.is_zero() { 0 } else { (PER * 5) as i64 });
    }
}

/// Mirrors `TestItemIsOnlyReturnedAfterAfterHasPassed`.
#[tokio::test(start_paused = true)]
async fn item_is_only_returned_after_after_has_passed() {
    let (q, m) = new_queue();
    let getter = tokio::spawn({
        let q = q.clone();
        async move {
            let start = Instant::now();
            let item = q.get_with_priority().await;
            (item, start.elapsed())
        }
    });
    settle().await;
    q.add_with_opts(after(Duration::from_secs(1)), [s("foo")]);
    settle().await;
    assert!(!getter.is_finished());
    advance(Duration::from_secs(1)).await;
    settle().await;
    let (item, waited) = getter.await.unwrap();
    assert_eq!(item, Some((s("foo"), 0)));
    assert_eq!(waited, Duration::from_secs(1));
    assert_eq!(m.depths(), depths(&[(0, 0)]));
    assert_eq!(m.adds(), 1);
    assert_eq!(m.retries(), 1);
}

/// Mirrors `TestHighPriorityItemThatBecameReadyIsReturnedBeforeLowPriorityItem`.
#[tokio::test(start_paused = true)]
async fn high_priority_item_that_became_ready_beats_low_priority_item() {
    let (q, m) = new_queue();
    q.add_with_opts(prio(LOW_PRIORITY), [s("foo")]);
    q.add_with_opts(
        AddOpts { after: Duration::from_secs(1), priority: Some(0), ..AddOpts::default() },
        [s("prio")],
    );
    advance(Duration::from_secs(1)).await;
    settle().await;
    assert_eq!(q.get_with_priority().await, Some((s("prio"), 0)));
    assert_eq!(m.depths(), depths(&[(-100, 1), (0, 0)]));
    assert_eq!(m.adds(), 2);
    assert_eq!(m.retries(), 1);
}

/// Mirrors `TestItemIsReturnedAsSoonAsPossible`.
#[tokio::test(start_paused = true)]
async fn item_is_returned_as_soon_as_possible() {
    let (q, m) = new_queue();
    let getter = tokio::spawn({
        let q = q.clone();
        async move { q.get_with_priority().await }
    });
    settle().await;
    q.add(s("foo"));
    settle().await;
    assert!(getter.is_finished());
    assert_eq!(getter.await.unwrap(), Some((s("foo"), 0)));
    assert_eq!(m.depths(), depths(&[(0, 0)]));
    assert_eq!(m.adds(), 1);
}

/// Mirrors `TestWaitingItemIsReturnedRightAfterReadWithoutAfter`.
#[tokio::test(start_paused = true)]
async fn waiting_item_is_returned_right_after_re_add_without_after() {
    let (q, m) = new_queue();
    let getter = tokio::spawn({
        let q = q.clone();
        async move { q.get_with_priority().await }
    });
    settle().await;
    q.add_with_opts(after(Duration::from_secs(60)), [s("foo")]);
    settle().await;
    assert!(!getter.is_finished());
    q.add(s("foo"));
    settle().await;
    assert!(getter.is_finished());
    assert_eq!(getter.await.unwrap(), Some((s("foo"), 0)));
    assert_eq!(m.depths(), depths(&[(0, 0)]));
    assert_eq!(m.adds(), 1);
}

/// Mirrors `TestMultipleItemsWithAfterAreReturnedInCorrectOrder`.
#[tokio::test(start_paused = true)]
async fn multiple_items_with_after_are_returned_in_order() {
    let (q, m) = new_queue();
    let getter = tokio::spawn({
        let q = q.clone();
        async move { (q.get().await, q.get().await) }
    });
    q.add_with_opts(after(Duration::from_secs(1)), [s("foo")]);
    q.add_with_opts(after(Duration::from_millis(200)), [s("bar")]);
    settle().await;
    assert!(!getter.is_finished());
    advance(Duration::from_secs(1)).await;
    settle().await;
    assert_eq!(getter.await.unwrap(), (Some(s("bar")), Some(s("foo"))));
    assert_eq!(m.depths(), depths(&[(0, 0)]));
    assert_eq!(m.adds(), 2);
}

/// Mirrors `TestGetFromPriorityQueueIsUnblockedOnShutdown`.
#[tokio::test(start_paused = true)]
async fn get_is_unblocked_on_shut_down() {
    let (q, _) = new_queue();
    let getter = tokio::spawn({
        let q = q.clone();
        async move { q.get_with_priority().await }
    });
    settle().await;
    assert!(!getter.is_finished());
    q.shut_down();
    settle().await;
    assert!(getter.is_finished());
    assert_eq!(getter.await.unwrap(), None);
}

/// Mirrors `TestItemsAreInludedInLenAndMetricsOnceTheyAreReady`, twice, as upstream does.
#[tokio::test(start_paused = true)]
async fn items_count_in_len_and_metrics_once_ready() {
    let (q, m) = new_queue();
    for _ in 0..2 {
        q.add_with_opts(after(Duration::from_millis(500)), [s("foo")]);
        q.add(s("baz"));
        q.add_with_opts(after(Duration::from_millis(500)), [s("bar")]);
        q.add(s("bal"));
        settle().await;
        assert_eq!(q.len(), 2);
        assert_eq!(m.depths(), depths(&[(0, 2)]));
        advance(Duration::from_secs(1)).await;
        settle().await;
        assert_eq!(q.len(), 4);
        assert_eq!(m.depths(), depths(&[(0, 4)]));
        for _ in 0..4 {
            let item = q.get().await.unwrap();
            q.done(&item);
        }
        assert_eq!(q.len(), 0);
        assert_eq!(m.depths(), depths(&[(0, 0)]));
    }
}

/// Mirrors `TestMetricsAreUpdatedForItemWhoseRequeueAfterExpiredThatGetsAddedAgainWithoutRequeueAfter`.
#[tokio::test(start_paused = true)]
async fn metrics_for_expired_waiting_item_re_added_without_after() {
    let (q, m) = new_queue();
    q.add_with_opts(after(Duration::from_millis(50)), [s("foo")]);
    settle().await;
    advance(Duration::from_millis(50)).await;
    settle().await;
    assert_eq!(q.len(), 1);
    assert_eq!(m.depths(), depths(&[(0, 1)]));
    q.add(s("foo"));
    assert_eq!(q.len(), 1);
    assert_eq!(m.depths(), depths(&[(0, 1)]));
    assert_eq!(q.get().await, Some(s("foo")));
    assert_eq!(q.len(), 0);
    assert_eq!(m.depths(), depths(&[(0, 0)]));
}

/// Mirrors `TestWhenAddingMultipleItemsWithRatelimitTrueTheyDontAffectEachOther`.
#[tokio::test(start_paused = true)]
async fn rate_limited_items_do_not_affect_each_other() {
    let limiter =
        Arc::new(ItemExponentialFailureRateLimiter::new(Duration::from_millis(5), Duration::from_secs(1000)));
    let metrics = Arc::new(TestProvider::default());
    let q = PriorityQueue::builder()
        .name("test")
        .rate_limiter(limiter.clone())
        .metrics_provider(metrics.clone())
        .build()
        .unwrap();
    // After seven failures the next delay for "bar" is 640 ms.
    for _ in 0..7 {
        limiter.when(&s("bar"));
    }
    let start = Instant::now();
    q.add_with_opts(AddOpts { rate_limited: true, ..AddOpts::default() }, [s("foo"), s("bar")]);
    assert_eq!(q.get().await, Some(s("foo")));
    assert_eq!(start.elapsed(), Duration::from_millis(5));
    assert_eq!(q.get().await, Some(s("bar")));
    assert_eq!(start.elapsed(), Duration::from_millis(640));
    assert_eq!(metrics.depths(), depths(&[(0, 0)]));
    assert_eq!(metrics.adds(), 2);
    assert_eq!(metrics.retries(), 2);
}

/// Mirrors `TestPriorityQueueDoesNotDeadlockOnShutdownWhileHandingOutItems`
/// (controller-runtime issue 3538): workers adding and getting while the queue shuts down all
/// return.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn does_not_deadlock_on_shut_down_while_handing_out_items() {
    for _ in 0..50 {
        let q: PriorityQueue<String> = PriorityQueue::new();
        let workers: Vec<_> = (0..20)
            .map(|_| {
                let q = q.clone();
                tokio::spawn(async move {
                    loop {
                        let (p, k) = {
                            let mut rng = rand::rng();
                            (rng.random_range(0..100), rng.random_range(0..1000))
                        };
                        q.add_with_opts(prio(p), [k.to_string()]);
                        match q.get_with_priority().await {
                            Some((item, _)) => q.done(&item),
                            None => return,
                        }
                    }
                })
            })
            .collect();
        tokio::task::yield_now().await;
        q.shut_down();
        for w in workers {
            tokio::time::timeout(Duration::from_secs(10), w).await.expect("deadlock").unwrap();
        }
    }
}

/// Mirrors `TestFuzzPriorityQueue`: random adds from 10 producers and 100 consumers; an item is
/// never handed out twice at once, items are de-duplicated, and the priority handed out is the
/// maximum added.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fuzz_priority_queue() {
    let q: PriorityQueue<String> = PriorityQueue::new();
    let in_queue: Arc<Mutex<HashMap<String, i32>>> = Arc::default();
    let handed_out: Arc<Mutex<HashSet<String>>> = Arc::default();

    let producers: Vec<_> = (0..10)
        .map(|_| {
            let (q, in_queue) = (q.clone(), in_queue.clone());
            tokio::spawn(async move {
                for _ in 0..1000 {
                    let (opts, item) = {
                        let mut rng = rand::rng();
                        let p = rng.random_range(-5..5);
                        let after = if rng.random_bool(0.2) {
                            Duration::from_millis(rng.random_range(0..10))
                        } else {
                            Duration::ZERO
                        };
                        let priority = rng.random_bool(0.8).then_some(p);
                        (
                            AddOpts { priority, after, rate_limited: false },
                            rng.random_range(0..200).to_string(),
                        )
                    };
                    let mut map = in_queue.lock();
                    q.add_with_opts(opts, [item.clone()]);
                    // Upstream's model: `ptr.Deref(opts.Priority, 0)`, for new and queued items.
                    let new = opts.priority.unwrap_or(0);
                    map.entry(item).and_modify(|p| *p = (*p).max(new)).or_insert(new);
                }
            })
        })
        .collect();
    for p in producers {
        p.await.unwrap();
    }

    let consumers: Vec<_> = (0..100)
        .map(|_| {
            let (q, in_queue, handed_out) = (q.clone(), in_queue.clone(), handed_out.clone());
            tokio::spawn(async move {
                loop {
                    let (item, priority) = {
                        if in_queue.lock().is_empty() {
                            return;
                        }
                        let Ok(Some(got)) =
                            tokio::time::timeout(Duration::from_millis(200), q.get_with_priority()).await
                        else {
                            continue;
                        };
                        got
                    };
                    let expected = in_queue.lock().remove(&item);
                    assert_eq!(expected, Some(priority), "priority of {item}");
                    assert!(handed_out.lock().insert(item.clone()), "{item} handed out twice");
                    tokio::task::yield_now().await;
                    handed_out.lock().remove(&item);
                    q.done(&item);
                }
            })
        })
        .collect();
    for c in consumers {
        c.await.unwrap();
    }
    assert!(q.is_empty());
}

/// Misuse: done on an unlocked item and forget on an unknown one are no-ops.
#[tokio::test(start_paused = true)]
async fn misuse_is_a_no_op() {
    let (q, _) = new_queue();
    q.done(&s("never"));
    q.forget(&s("never"));
    assert_eq!(q.num_requeues(&s("never")), 0);
    q.add(s("a"));
    q.done(&s("a"));
    assert_eq!(q.get().await, Some(s("a")));
}

/// Cancel safety: a dropped get loses nothing.
#[tokio::test(start_paused = true)]
async fn get_is_cancel_safe() {
    let (q, _) = new_queue();
    assert!(tokio::time::timeout(Duration::from_millis(5), q.get()).await.is_err());
    q.add(s("x"));
    assert_eq!(q.len(), 1);
    assert_eq!(q.get().await, Some(s("x")));
}

/// Mirrors controller-runtime handler/eventhandler_test.go, `WithLowPriorityWhenUnchanged`
/// (`TypedFuncs.Create` / `Update` on a priority queue): "should lower the priority of a create
/// request for an object that was part of the initial list", "should not lower the priority of a
/// create request for an object that was not part of the initial list", "should lower the
/// priority of an update request with unchanged RV" (there both objects have no resource
/// version: "" == ""), "should not lower the priority of an update request with changed RV" (""
/// then "1"). Deletes and generic events keep the default priority.
#[test]
fn for_event_lowers_only_what_changed_nothing() {
    let update = |old, new| HandlerEvent::Update { old_resource_version: old, new_resource_version: new };
    let cases = [
        (HandlerEvent::Create { is_in_initial_list: true }, Some(LOW_PRIORITY)),
        (HandlerEvent::Create { is_in_initial_list: false }, None),
        (update(None, None), Some(LOW_PRIORITY)),
        (update(None, Some("")), Some(LOW_PRIORITY)),
        (update(Some("42"), Some("42")), Some(LOW_PRIORITY)),
        (update(None, Some("1")), None),
        (update(Some("42"), Some("43")), None),
        // Opaque strings: "010" is not "10".
        (update(Some("10"), Some("010")), None),
        (HandlerEvent::Delete, None),
        (HandlerEvent::Generic, None),
    ];
    for (event, priority) in cases {
        assert_eq!(AddOpts::for_event(event), AddOpts { priority, ..AddOpts::default() }, "{event:?}");
    }
}

/// What `for_event` is for: a relist (or resync) re-delivers every cached object as an update
/// with an unchanged resource version; queued at low priority, those wait behind the one object
/// that really changed, however many of them were queued first
/// (`TestHighPriorityItemsAreReturnedBeforeLowPriorityItemMultipleTimes`, driven by events).
#[tokio::test(start_paused = true)]
async fn a_relists_unchanged_updates_wait_behind_a_real_change() {
    let (q, _) = new_queue();
    for i in 0..100 {
        let rv = format!("{i}");
        let resync =
            HandlerEvent::Update { old_resource_version: Some(&rv), new_resource_version: Some(&rv) };
        q.add_with_opts(AddOpts::for_event(resync), [format!("unchanged-{i}")]);
    }
    let changed = HandlerEvent::Update { old_resource_version: Some("7"), new_resource_version: Some("200") };
    q.add_with_opts(AddOpts::for_event(changed), [s("changed")]);
    assert_eq!(q.get_with_priority().await, Some((s("changed"), 0)));
    assert_eq!(q.get_with_priority().await, Some((s("unchanged-0"), LOW_PRIORITY)));
}

/// Drain waits for locked items.
#[tokio::test(start_paused = true)]
async fn shut_down_with_drain_waits_for_done() {
    let (q, _) = new_queue();
    q.add(s("a"));
    let a = q.get().await.unwrap();
    let drain = tokio::spawn({
        let q = q.clone();
        async move { q.shut_down_with_drain().await }
    });
    settle().await;
    assert!(!drain.is_finished());
    q.done(&a);
    drain.await.unwrap();
}

/// `pending_len` counts the items waiting for their delay, which `len` leaves out
/// (controller-runtime's "Len counts ready items only"): delayed and rate-limited adds count
/// until their time comes, and an item whose time has come counts as ready even before the
/// timer task moved it. kcache's counterpart of `RateLimitingQueue::pending_len`, for a
/// controller reporting its retries waiting for backoff.
#[tokio::test(start_paused = true)]
async fn pending_len_counts_the_waiting_items() {
    let (q, _) = new_queue();
    q.add_after(s("later"), Duration::from_secs(10));
    q.add_rate_limited(s("retry"));
    q.add(s("now"));
    assert_eq!((q.len(), q.pending_len()), (1, 2));
    advance(Duration::from_millis(5)).await;
    assert_eq!(q.pending_len(), 1, "the rate-limited retry's 5 ms have passed");
    assert_eq!(q.len(), 2);
    advance(Duration::from_secs(10)).await;
    assert_eq!((q.len(), q.pending_len()), (3, 0));
}
