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
    // The first add from the 5th and from the 150th notification on: a run delivers at least one
    // add per key (200), so some add always has a number of 150 or more and is lost. (From the
    // 400th on, a run whose relists merged events could end before any add got that far.)
    for lose in [5, 150] {
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

/// Leader election under chaos (`kcache_chaos::leader`): 200 seeded runs of three candidates on a
/// fake clock through kills, clean stops, freezes past the lease, partitions, server outages,
/// slow responses, conflict storms and clock skew. In every run no two candidates lead with
/// valid leases at once, and a leader is in office within the stated bound after the last fault.
#[test]
fn leader_election_chaos_200_seeds() {
    use kcache_chaos::leader::{LeConfig, le_replay_command, run_many};

    let config = LeConfig::default();
    let reports = run_many(1, 200, &config);
    assert_eq!(reports.len(), 200);
    let mut failures = Vec::new();
    for r in &reports {
        assert!(r.faults.values().sum::<u64>() > 0, "seed {}: no fault injected", r.seed);
        assert!(r.leaderships > 0, "seed {}: nobody ever led", r.seed);
        if !r.passed() {
            failures.push(format!(
                "seed {}: {:#?}\n  replay: {}",
                r.seed,
                r.violations,
                le_replay_command(r.seed, &config)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The checks can fail: a candidate that ignores the end of its leadership (keeps acting after
/// its token was cancelled) is caught leading together with its successor.
#[test]
fn a_candidate_that_ignores_its_token_fails_the_run() {
    use kcache_chaos::leader::{LeConfig, run_many};

    let config = LeConfig { broken_slot: Some(0), ..LeConfig::default() };
    let reports = run_many(1, 20, &config);
    let caught = reports.iter().filter(|r| r.violations.iter().any(|v| v.contains("lead at once"))).count();
    assert!(caught > 0, "no run noticed two leaders: {reports:#?}");
}
