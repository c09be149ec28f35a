//! The health check: client-go's `HealthzAdaptor` and `LeaderElector.Check`.

use std::time::Duration;

use kcache_leaderelection::{Error, HealthzAdaptor, Outcome};
use kcache_testserver::RequestMatch;

use crate::common::{self, Candidate, config, pass};

/// client-go's `TestLeaderElectionHealthChecker`: healthy before an elector is tied to the
/// adaptor; healthy while not leading; healthy while leading and renewing; and, for a process
/// whose last seen record names it but has not changed for longer than LeaseDuration plus the
/// tolerance (here: a leader cut off from the server, which stepped down but keeps running),
/// unhealthy, with client-go's message.
#[tokio::test(start_paused = true)]
async fn unhealthy_when_leading_without_renewal_past_the_lease_plus_tolerance() {
    let server = common::server().await;
    let health = HealthzAdaptor::new(Duration::from_secs(5));
    assert_eq!(health.name(), "leaderElection");
    assert!(health.check().is_ok(), "no elector yet");
    let b_health = HealthzAdaptor::new(Duration::from_secs(5));
    let mut a = Candidate::start_with(&server, config("a"), |b| b.watchdog(&health));
    pass(Duration::from_millis(500)).await;
    let _b = Candidate::start_with(&server, config("b"), |b| b.watchdog(&b_health));
    pass(Duration::from_secs(4)).await;
    assert!(health.check().is_ok(), "leading and renewing");
    assert!(b_health.check().is_ok(), "not leading");

    // Cut off after the renewal at 4 s; it steps down at 16 s.
    let last_renewal = a.started_at().unwrap() + Duration::from_secs(4);
    server.faults().unreachable(RequestMatch::all().user("a"));
    assert_eq!(a.join().await, Outcome::LeaseLost { released: false });
    // LeaseDuration 15 s + tolerance 5 s after the last renewal: healthy up to 20 s.
    let healthy_until = last_renewal + Duration::from_secs(20);
    tokio::time::sleep_until(healthy_until).await;
    assert!(health.check().is_ok(), "within the tolerance");
    pass(Duration::from_millis(1)).await;
    let err = health.check().unwrap_err();
    assert!(matches!(err, Error::LeaseNotRenewed { .. }));
    assert_eq!(err.to_string(), "failed election to renew leadership on lease my-controller");
    assert!(b_health.check().is_ok());
}
