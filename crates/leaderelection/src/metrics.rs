//! Leader-election metrics through a provider, as client-go's `leaderelection/metrics.go`:
//! `leader_election_master_status{name}` (1 while leading, else 0) and
//! `leader_election_slowpath_total{name}` (renewals that had to read the lease first).
//!
//! An elector built without a provider records nothing and allocates nothing for metrics.

use std::fmt;
use std::sync::Arc;

/// The metrics of leader election, as client-go's `LeaderMetric`. Every method gets the
/// election's [`name`](crate::LeaderElectionConfig::name).
pub trait LeaderMetric: Send + Sync {
    /// This process now leads: `leader_election_master_status{name} = 1`.
    fn on(&self, name: &str);
    /// This process does not lead: `leader_election_master_status{name} = 0`. Also called once
    /// when the elector is created, as client-go's `NewLeaderElector` does.
    fn off(&self, name: &str);
    /// A renewal took the slow path (the optimistic update failed, so the lease was read
    /// first): `leader_election_slowpath_total{name} += 1`.
    fn slowpath_exercised(&self, name: &str);
    /// An update of the lease lost an optimistic-concurrency race (409 Conflict). Not a
    /// client-go metric: kcache counts lost races here instead of logging them as errors. Does
    /// nothing unless implemented.
    fn conflict(&self, name: &str) {
        let _ = name;
    }
}

/// Creates the [`LeaderMetric`] of each elector, as client-go's `MetricsProvider`.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicI64, Ordering};
/// use kcache_leaderelection::{LeaderMetric, MetricsProvider};
///
/// #[derive(Debug, Default)]
/// struct Gauge(AtomicI64);
/// impl LeaderMetric for Gauge {
///     fn on(&self, _name: &str) { self.0.store(1, Ordering::Relaxed); }
///     fn off(&self, _name: &str) { self.0.store(0, Ordering::Relaxed); }
///     fn slowpath_exercised(&self, _name: &str) {}
/// }
///
/// #[derive(Debug, Default)]
/// struct Provider(Arc<Gauge>);
/// impl MetricsProvider for Provider {
///     fn new_leader_metric(&self) -> Arc<dyn LeaderMetric> { self.0.clone() }
/// }
/// // LeaderElector::new(..)?.metrics_provider(Arc::new(Provider::default()))
/// ```
pub trait MetricsProvider: Send + Sync {
    /// The metric an elector reports to.
    fn new_leader_metric(&self) -> Arc<dyn LeaderMetric>;
}

/// The elector's handle on its metric: nothing at all without a provider.
#[derive(Clone, Default)]
pub(crate) struct Metrics {
    metric: Option<Arc<dyn LeaderMetric>>,
    name: Arc<str>,
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics").field("enabled", &self.metric.is_some()).field("name", &self.name).finish()
    }
}

impl Metrics {
    /// The metric of `provider`, reported as `off` at once (client-go's `NewLeaderElector`).
    pub(crate) fn new(provider: &dyn MetricsProvider, name: &str) -> Self {
        let metric = provider.new_leader_metric();
        metric.off(name);
        Self { metric: Some(metric), name: name.into() }
    }

    pub(crate) fn on(&self) {
        if let Some(m) = &self.metric {
            m.on(&self.name);
        }
    }

    pub(crate) fn off(&self) {
        if let Some(m) = &self.metric {
            m.off(&self.name);
        }
    }

    pub(crate) fn slowpath_exercised(&self) {
        if let Some(m) = &self.metric {
            m.slowpath_exercised(&self.name);
        }
    }

    pub(crate) fn conflict(&self) {
        if let Some(m) = &self.metric {
            m.conflict(&self.name);
        }
    }
}
