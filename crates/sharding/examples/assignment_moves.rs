//! Measures the two assignment strategies: the share of keys that move when one member joins or
//! leaves, the imbalance (largest share over the ideal), and the selector each member sends
//! (`shardRange` terms and characters). Deterministic: identities are drawn from SplitMix64 with
//! fixed seeds. `cargo run -p kcache-sharding --example assignment_moves`.

use kcache_sharding::{RangeSet, Strategy, imbalance, moved_fraction};
use kcache_test_support::rng::SplitMix64;

/// Trials per member count: each draws fresh pod-like identities.
const TRIALS: u64 = 200;
/// One `shardRange(object.metadata.uid, '0x…', '0x…')` term and its ` || ` separator.
const TERM_CHARS: usize = 75 + 4;

fn main() {
    let strategies = [
        ("contiguous", Strategy::ContiguousRanges),
        ("vnodes=16", Strategy::ConsistentHashing { vnodes: 16 }),
        ("vnodes=64", Strategy::ConsistentHashing { vnodes: 64 }),
        ("vnodes=128", Strategy::ConsistentHashing { vnodes: 128 }),
    ];
    println!(
        "| N | strategy | moved on join (mean / max) | moved on leave (mean / max) | imbalance (mean / max) | terms per member (max) | selector chars (max) |"
    );
    println!("|---|---|---|---|---|---|---|");
    for n in 2..=16usize {
        for (name, strategy) in strategies {
            let (mut join, mut leave, mut imb) = (Stats::default(), Stats::default(), Stats::default());
            let mut max_terms = 0;
            for trial in 0..TRIALS {
                let mut rng = SplitMix64::new(n as u64 * 1_000_003 + trial);
                let ids: Vec<String> =
                    (0..=n).map(|_| format!("controller-{:010x}", rng.next_u64() >> 24)).collect();
                let (before, joined) = (&ids[..n], &ids[..=n]);
                let a = strategy.assign(before);
                let b = strategy.assign(joined);
                join.add(moved_fraction(&a, &b));
                // A random member of the n leaves.
                let gone = rng.below(n as u64) as usize;
                let left: Vec<&String> =
                    before.iter().enumerate().filter(|(i, _)| *i != gone).map(|(_, s)| s).collect();
                leave.add(moved_fraction(&a, &strategy.assign(&left)));
                imb.add(imbalance(&a));
                max_terms = max_terms.max(a.values().map(|r: &RangeSet| r.ranges().len()).max().unwrap_or(0));
            }
            println!(
                "| {n} | {name} | {:.3} / {:.3} | {:.3} / {:.3} | {:.2} / {:.2} | {max_terms} | {} |",
                join.mean(),
                join.max,
                leave.mean(),
                leave.max,
                imb.mean(),
                imb.max,
                max_terms * TERM_CHARS - 4
            );
        }
    }
}

#[derive(Default)]
struct Stats {
    sum: f64,
    max: f64,
    count: u32,
}

impl Stats {
    fn add(&mut self, x: f64) {
        self.sum += x;
        self.max = self.max.max(x);
        self.count += 1;
    }
    fn mean(&self) -> f64 {
        self.sum / f64::from(self.count)
    }
}
