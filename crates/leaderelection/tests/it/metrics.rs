//! Metrics through a provider, as client-go's `leaderelection/metrics.go`:
//! `leader_election_master_status{name}` and `leader_election_slowpath_total{name}`.

use std::sync::Arc;
use std::time::Duration;

use kcache_leaderelection::{LeaderMetric, MetricsProvider};
use kcache_testserver::{RequestFault, Verb};
use parking_lot::Mutex;

use crate::common::{self, Candidate, config, pass};

/// A provider that records every call.
#[derive(Debug, Clone, Default)]
pub(crate) struct Recorded(Arc<Mutex<Vec<(String, &'static str)>>>);

impl Recorded {
    pub(crate) fn calls(&self) -> Vec<&'static str> {
        self.0.lock().iter().map(|(_, c)| *c).collect()
    }

    pub(crate) fn conflicts(&self) -> usize {
        self.calls().iter().filter(|c| **c == "conflict").count()
    }
}

impl LeaderMetric for Recorded {
    fn on(&self, name: &str) {
        self.0.lock().push((name.to_string(), "on"));
    }
    fn off(&self, name: &str) {
        self.0.lock().push((name.to_string(), "off"));
    }
    fn slowpath_exercised(&self, name: &str) {
        self.0.lock().push((name.to_string(), "slowpath"));
    }
    fn conflict(&self, name: &str) {
        self.0.lock().push((name.to_string(), "conflict"));
    }
}

impl MetricsProvider for Recorded {
    fn new_leader_metric(&self) -> Arc<dyn LeaderMetric> {
        Arc::new(self.clone())
    }
}

/// client-go's metrics calls over a leader's life: `off` when the elector is made
/// (`NewLeaderElector`), `on` when it acquires, `slowpath` when a renewal had to read first (after
/// a conflict), `off` when leadership ends; every call labelled with the config's name.
#[tokio::test(start_paused = true)]
async fn master_status_and_slowpath_follow_the_leader() {
    let server = common::server().await;
    let recorded = Recorded::default();
    let mut a = Candidate::start_with(&server, config("a").name("ctrl"), |b| {
        b.metrics_provider(Arc::new(recorded.clone()))
    });
    pass(Duration::from_millis(500)).await;
    server.faults().fail_requests(
        1,
        RequestFault::conflict("leases.coordination.k8s.io", common::LEASE).verb(Verb::Update).user("a"),
    );
    pass(Duration::from_secs(3)).await;
    a.stop().await;
    assert_eq!(recorded.calls(), ["off", "on", "conflict", "slowpath", "off"]);
    assert!(recorded.0.lock().iter().all(|(n, _)| n == "ctrl"));
}

/// The prometheus-client provider exports client-go's names, with the `name` label.
#[cfg(feature = "prometheus")]
#[tokio::test(start_paused = true)]
async fn the_prometheus_provider_exports_client_gos_names() {
    let server = common::server().await;
    let mut registry = prometheus_client::registry::Registry::default();
    let provider = kcache_leaderelection::PrometheusMetricsProvider::new(&mut registry);
    let mut a = Candidate::start_with(&server, config("a"), |b| b.metrics_provider(Arc::new(provider)));
    pass(Duration::from_millis(500)).await;
    let text = || {
        let mut s = String::new();
        prometheus_client::encoding::text::encode(&mut s, &registry).unwrap();
        s
    };
    assert!(text().contains(r#"leader_election_master_status{name="my-controller"} 1"#), "{}", text());
    server.faults().fail_requests(
        1,
        RequestFault::conflict("leases.coordination.k8s.io", common::LEASE).verb(Verb::Update).user("a"),
    );
    pass(Duration::from_secs(3)).await;
    assert!(text().contains(r#"leader_election_slowpath_total{name="my-controller"} 1"#), "{}", text());
    assert!(text().contains(r#"leader_election_conflicts_total{name="my-controller"} 1"#), "{}", text());
    a.stop().await;
    assert!(text().contains(r#"leader_election_master_status{name="my-controller"} 0"#));
}
