//! Configuration: client-go's `NewLeaderElector` validation as typed errors, in its order, and
//! controller-runtime's defaults.

use std::time::Duration;

use kcache_leaderelection::{Error, LeaderCallbacks, LeaderElectionConfig, LeaderElector};

use crate::common::{self, LEASE, NS};

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// client-go's `TestLeaderElectionConfigValidation` (a valid config, then an empty identity) and
/// every other check of `NewLeaderElector`, in its order: the first failing check wins.
#[tokio::test]
async fn validation_is_client_gos_with_typed_errors() {
    let base = LeaderElectionConfig::new(NS, LEASE, "baz")
        .lease_duration(secs(15.0))
        .renew_deadline(secs(2.0))
        .retry_period(secs(1.0))
        .release_on_cancel(true);
    assert_eq!(base.validate(), Ok(()));

    let cases: Vec<(LeaderElectionConfig, Error)> = vec![
        (
            base.clone().lease_duration(secs(2.0)),
            Error::LeaseDurationNotGreaterThanRenewDeadline {
                lease_duration: secs(2.0),
                renew_deadline: secs(2.0),
            },
        ),
        (
            // 1.2 * 1 s = 1.2 s is not below 1.2 s
            base.clone().renew_deadline(secs(1.2)),
            Error::RenewDeadlineNotGreaterThanJitteredRetryPeriod {
                renew_deadline: secs(1.2),
                retry_period: secs(1.0),
            },
        ),
        (
            // All zero: the first check already fails, as in client-go.
            base.clone()
                .lease_duration(Duration::ZERO)
                .renew_deadline(Duration::ZERO)
                .retry_period(Duration::ZERO),
            Error::LeaseDurationNotGreaterThanRenewDeadline {
                lease_duration: Duration::ZERO,
                renew_deadline: Duration::ZERO,
            },
        ),
        (base.clone().retry_period(Duration::ZERO), Error::RetryPeriodNotPositive),
        (with(&base, |c| c.identity.clear()), Error::EmptyIdentity),
        (with(&base, |c| c.lease_name.clear()), Error::EmptyLeaseName),
        (
            base.clone().lease_duration(secs(0.9)).renew_deadline(secs(0.5)).retry_period(secs(0.1)),
            Error::LeaseDurationUnderOneSecond { lease_duration: secs(0.9) },
        ),
    ];
    for (config, want) in cases {
        assert_eq!(config.validate(), Err(want.clone()), "{config:?}");
        let server = common::server().await;
        let built =
            LeaderElector::new(server.in_memory_client(), config, LeaderCallbacks::new(|_| {}, || {}));
        assert_eq!(built.unwrap_err(), want, "the constructor validates too");
    }
    assert_eq!(
        with(&base, |c| c.identity.clear()).validate().unwrap_err().to_string(),
        "lock identity is empty"
    );
}

fn with(base: &LeaderElectionConfig, change: impl FnOnce(&mut LeaderElectionConfig)) -> LeaderElectionConfig {
    let mut c = base.clone();
    change(&mut c);
    c
}

/// controller-runtime's defaults (`pkg/manager/internal.go`): 15 s, 10 s, 2 s; its request
/// timeout `max(RenewDeadline / 2, 1 s)` (`pkg/leaderelection/leader_election.go`).
#[test]
fn defaults_are_controller_runtimes() {
    let c = LeaderElectionConfig::new(NS, LEASE, "a");
    assert_eq!((c.lease_duration, c.renew_deadline, c.retry_period), (secs(15.0), secs(10.0), secs(2.0)));
    assert!(!c.release_on_cancel);
    assert_eq!(c.effective_request_timeout(), secs(5.0));
    assert_eq!(c.clone().renew_deadline(secs(1.5)).effective_request_timeout(), secs(1.0));
    assert_eq!(c.request_timeout(secs(3.0)).effective_request_timeout(), secs(3.0));
}
