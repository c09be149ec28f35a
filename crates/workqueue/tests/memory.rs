//! Memory per pending delayed item, measured with a counting global allocator: the issue's
//! budget is 64 bytes per pending item beyond the item itself.

use std::sync::atomic::Ordering;
use std::time::Duration;

use kcache_test_support::alloc::{Counting, LIVE};
use kcache_workqueue::DelayingQueue;

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Bytes per pending `u64` item beyond the item's own 8 bytes, after `n` `add_after`s.
fn overhead_per_item(rt: &tokio::runtime::Runtime, n: u64) -> f64 {
    rt.block_on(async {
        let q = DelayingQueue::<u64>::new();
        tokio::task::yield_now().await;
        let before = LIVE.load(Ordering::Relaxed);
        for i in 0..n {
            // Distinct pseudo-random delays up to ten minutes, like client-go's benchmark.
            let d = Duration::from_millis(i.wrapping_mul(2_654_435_761) % 600_000 + 1);
            q.add_after(i, d);
        }
        let after = LIVE.load(Ordering::Relaxed);
        assert_eq!(q.pending_len() as u64, n);
        (after - before) as f64 / n as f64 - std::mem::size_of::<u64>() as f64
    })
}

#[test]
fn pending_item_overhead() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap();
    for n in [100_000u64, 700_000, 1_000_000] {
        let per = overhead_per_item(&rt, n);
        eprintln!("add_after: {n} pending items, {per:.1} bytes per item beyond the item");
        assert!(per <= 64.0, "{per:.1} bytes per pending item is over the 64-byte budget");
    }
}
