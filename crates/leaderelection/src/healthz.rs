//! A health check tied to an elector (client-go's `HealthzAdaptor`): unhealthy when this process
//! believes it leads but has not renewed for longer than the lease duration plus a tolerance.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::elector::{Builder, LeaderElector};
use crate::error::Result;

/// Associates a health endpoint with a [`LeaderElector`] that may not exist yet when the
/// endpoint is set up (client-go's `HealthzAdaptor`). Cheap to clone.
///
/// Serve [`check`](Self::check) from a liveness probe: a leader that could not renew and did not
/// step down (a deadlock, a starved runtime) then gets its process restarted, the only remedy
/// client-go's design leaves for it.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use kcache_leaderelection::HealthzAdaptor;
///
/// let health = HealthzAdaptor::new(Duration::from_secs(20));
/// assert_eq!(health.name(), "leaderElection");
/// assert!(health.check().is_ok(), "healthy until an elector is tied to it");
/// // LeaderElector::builder(..).watchdog(&health).build()?
/// ```
#[derive(Clone)]
pub struct HealthzAdaptor {
    elector: Arc<Mutex<Option<LeaderElector>>>,
    timeout: Duration,
}

impl fmt::Debug for HealthzAdaptor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HealthzAdaptor")
            .field("timeout", &self.timeout)
            .field("elector", &self.elector.lock().is_some())
            .finish()
    }
}

impl HealthzAdaptor {
    /// An adaptor that tolerates `timeout` beyond the lease duration before it reports
    /// unhealthy (client-go's `NewLeaderHealthzAdaptor`).
    pub fn new(timeout: Duration) -> Self {
        Self { elector: Arc::default(), timeout }
    }

    /// The check's name, `leaderElection`.
    pub fn name(&self) -> &'static str {
        "leaderElection"
    }

    /// Ties the adaptor to `elector` (client-go's `SetLeaderElection`);
    /// [`Builder::watchdog`](crate::Builder::watchdog) does it when building.
    pub fn set_leader_election(&self, elector: &LeaderElector) {
        *self.elector.lock() = Some(elector.clone());
    }

    /// Healthy without an elector; otherwise [`LeaderElector::check`] with the adaptor's
    /// tolerance.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseNotRenewed`](crate::Error::LeaseNotRenewed).
    pub fn check(&self) -> Result<()> {
        match &*self.elector.lock() {
            None => Ok(()),
            Some(e) => e.check(self.timeout),
        }
    }
}

impl Builder {
    /// Ties a [`HealthzAdaptor`] to the elector (client-go's `WatchDog`).
    pub fn watchdog(self, adaptor: &HealthzAdaptor) -> Self {
        let adaptor = adaptor.clone();
        self.on_built(move |elector| adaptor.set_leader_election(elector))
    }
}
