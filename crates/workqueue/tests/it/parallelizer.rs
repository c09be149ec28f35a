//! Scenarios of client-go's `util/workqueue/parallelizer_test.go`, rewritten for
//! [`parallelize_until`], plus cancellation.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use kcache_workqueue::parallelize_until;
use tokio_util::sync::CancellationToken;

/// Mirrors `TestParallelizeUntil`: every piece is visited exactly once, for the upstream cases.
#[test]
fn parallelize_until_visits_every_piece_once() {
    for (pieces, workers, chunk_size) in [(1000, 10, 1), (1000, 10, 10), (1000, 10, 100), (999, 10, 13)] {
        let seen: Vec<AtomicU32> = (0..pieces).map(|_| AtomicU32::new(0)).collect();
        parallelize_until(None, workers, pieces, chunk_size, |p| {
            seen[p].fetch_add(1, Ordering::Relaxed);
        });
        assert!(
            seen.iter().all(|s| s.load(Ordering::Relaxed) == 1),
            "pieces:{pieces},workers:{workers},chunkSize:{chunk_size}"
        );
    }
}

/// Edge cases: no pieces, zero chunk size and zero workers still behave.
#[test]
fn degenerate_arguments() {
    parallelize_until(None, 4, 0, 1, |_| panic!("no pieces to run"));
    let n = AtomicUsize::new(0);
    parallelize_until(None, 0, 10, 0, |_| {
        n.fetch_add(1, Ordering::Relaxed);
    });
    assert_eq!(n.load(Ordering::Relaxed), 10);
}

/// Cancellation stops handing out pieces (client-go's `ctx.Done()`).
#[test]
fn cancellation_stops_work() {
    let token = CancellationToken::new();
    token.cancel();
    let n = AtomicUsize::new(0);
    parallelize_until(Some(&token), 4, 1000, 1, |_| {
        n.fetch_add(1, Ordering::Relaxed);
    });
    assert_eq!(n.load(Ordering::Relaxed), 0);

    let token = CancellationToken::new();
    let n = AtomicUsize::new(0);
    parallelize_until(Some(&token), 1, 1000, 10, |p| {
        n.fetch_add(1, Ordering::Relaxed);
        if p == 99 {
            token.cancel();
        }
    });
    assert_eq!(n.load(Ordering::Relaxed), 100, "one worker stops right after the cancelling piece");
}
