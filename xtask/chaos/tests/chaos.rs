//! The short chaos suite that runs in `cargo test`: a few seeds on a smaller key universe.
//! `cargo xtask chaos --runs 1000 --seed 1` is the long one (docs/reliability.md).

use std::time::Duration;

use kcache_chaos::{Config, replay_command, run_blocking};

#[test]
fn seeded_chaos_runs_converge() {
    let config = Config::with_keys(300);
    let mut failures = Vec::new();
    for seed in 1..=6 {
        let report = run_blocking(seed, &config);
        assert!(report.writes >= 900, "seed {seed}: the churn made only {} writes", report.writes);
        assert!(report.events > 0, "seed {seed}: no handler saw anything");
        assert!(report.faults.values().sum::<u64>() > 0, "seed {seed}: no fault injected");
        if !report.passed() {
            failures.push(format!(
                "seed {seed} ({}): {:#?}\n  replay: {}",
                report.violations,
                report.failures,
                replay_command(seed, &config)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The checks can fail: a handler that misses one notification makes the run fail.
#[test]
fn a_lost_notification_fails_the_run() {
    for lose in [5, 400] {
        let config = Config {
            lose_notification: Some(lose),
            converge_timeout: Duration::from_secs(3),
            ..Config::with_keys(200)
        };
        let report = run_blocking(3, &config);
        assert!(!report.passed(), "losing notification {lose} went unnoticed");
        assert!(
            report.failures.iter().any(|f| f.contains("a/enqueue")),
            "the failure does not name the handler: {:#?}",
            report.failures
        );
    }
}
