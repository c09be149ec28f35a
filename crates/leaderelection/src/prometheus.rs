//! A [`MetricsProvider`] backed by the `prometheus-client` crate (cargo feature `prometheus`).

use std::fmt;
use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::metrics::{LeaderMetric, MetricsProvider};

/// Label set: `name`.
type Labels = Vec<(&'static str, String)>;

/// Registers client-go's leader-election metrics (component-base's names and help texts;
/// prometheus-client ends each help text with the period) in a
/// `prometheus-client` [`Registry`]: `leader_election_master_status{name}` (gauge),
/// `leader_election_slowpath_total{name}` (counter), and kcache's
/// `leader_election_conflicts_total{name}` (updates that lost an optimistic-concurrency race).
///
/// # Examples
///
/// ```
/// use kcache_leaderelection::{LeaderMetric, MetricsProvider, PrometheusMetricsProvider};
/// use prometheus_client::registry::Registry;
///
/// let mut registry = Registry::default();
/// let provider = PrometheusMetricsProvider::new(&mut registry);
/// let metric = provider.new_leader_metric();
/// metric.on("my-controller");
///
/// let mut text = String::new();
/// prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
/// assert!(text.contains(r#"leader_election_master_status{name="my-controller"} 1"#));
/// ```
#[derive(Clone)]
pub struct PrometheusMetricsProvider {
    master_status: Family<Labels, Gauge>,
    slowpath: Family<Labels, Counter>,
    conflicts: Family<Labels, Counter>,
}

impl fmt::Debug for PrometheusMetricsProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PrometheusMetricsProvider").finish_non_exhaustive()
    }
}

impl PrometheusMetricsProvider {
    /// Registers the metric families under the `leader_election` prefix of `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        let this = Self {
            master_status: Family::default(),
            slowpath: Family::default(),
            conflicts: Family::default(),
        };
        let r = registry.sub_registry_with_prefix("leader_election");
        r.register(
            "master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates \
             master. 'name' is the string used to identify the lease. Please make sure to group by name",
            this.master_status.clone(),
        );
        r.register(
            "slowpath",
            "Total number of slow path exercised in renewing leader leases. 'name' is the string used to \
             identify the lease. Please make sure to group by name",
            this.slowpath.clone(),
        );
        r.register(
            "conflicts",
            "Total number of lease updates that lost an optimistic-concurrency race (409 Conflict). 'name' is \
             the string used to identify the lease",
            this.conflicts.clone(),
        );
        this
    }
}

fn labels(name: &str) -> Labels {
    vec![("name", name.to_string())]
}

impl LeaderMetric for PrometheusMetricsProvider {
    fn on(&self, name: &str) {
        self.master_status.get_or_create(&labels(name)).set(1);
    }

    fn off(&self, name: &str) {
        self.master_status.get_or_create(&labels(name)).set(0);
    }

    fn slowpath_exercised(&self, name: &str) {
        self.slowpath.get_or_create(&labels(name)).inc();
    }

    fn conflict(&self, name: &str) {
        self.conflicts.get_or_create(&labels(name)).inc();
    }
}

impl MetricsProvider for PrometheusMetricsProvider {
    fn new_leader_metric(&self) -> Arc<dyn LeaderMetric> {
        Arc::new(self.clone())
    }
}
