//! The health check: a controller's state, its informers', its gate's; readiness and liveness.

use std::convert::Infallible;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kcache_controller::{Action, Context, Controller, ControllerState, GateFuture, Watch, WorkGate};
use kcache_informer::HealthState;
use kcache_testserver::TestServer;
use kube::api::Api;

use crate::common::{Running, Signal, cm, create};

/// Not started, then running (caches synced, every informer ready), then stopped: a readiness
/// probe's answers through a controller's life (controller-runtime's readyz checks
/// `mgr.GetCache().WaitForCacheSync`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_follows_the_controller_from_start_to_stop() {
    let server = TestServer::start().await;
    let cms = Api::<ConfigMap>::namespaced(server.client(), "default");
    let signal = Signal::default();
    let controller = Controller::<ConfigMap>::new(server.client(), Watch::namespace("default"))
        .name("health-test")
        .context(signal.clone())
        .reconcile(|_cm: Arc<ConfigMap>, ctx: Context<Signal>| async move {
            ctx.record("reconciled");
            Ok::<_, Infallible>(Action::await_change())
        });
    let health = controller.health_check();
    let report = health.check();
    assert_eq!(report.state, ControllerState::NotStarted);
    assert!(!report.is_ready() && report.is_alive());
    assert_eq!(report.to_string(), "controller health-test: not started");

    let running = Running::spawn(move |cancel| controller.run(cancel));
    create(&cms, &cm("a", &[], &[])).await;
    signal.wait_for("a reconcile", |e| !e.is_empty()).await;
    let report = health.check();
    assert!(report.is_ready() && report.is_alive(), "{report}");
    assert_eq!(report.informers.len(), 1);
    assert!(matches!(report.informers[0].state, HealthState::Synced));
    assert_eq!(report.to_string(), "controller health-test: running\n  informer ConfigMap/default: synced");

    running.stop().await.unwrap();
    let report = health.check();
    assert_eq!(report.state, ControllerState::Stopped);
    assert!(!report.is_ready() && report.is_alive(), "{report}");
}

/// A leader whose lease could not be renewed: open, unhealthy.
#[derive(Debug)]
struct ExpiredLease;

impl WorkGate for ExpiredLease {
    fn is_open(&self) -> bool {
        true
    }
    fn wait(&self, open: bool) -> GateFuture<'_> {
        Box::pin(async move {
            if !open {
                std::future::pending::<()>().await;
            }
        })
    }
    fn check(&self) -> Result<(), String> {
        Err("lease expired 30s ago".into())
    }
}

/// The gate's own check counts for readiness and liveness (client-go's leader election
/// `HealthzAdaptor`: unhealthy when leading on an expired lease), and shows in the report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unhealthy_gate_makes_the_controller_unready_and_not_alive() {
    let server = TestServer::start().await;
    let cms = Api::<ConfigMap>::namespaced(server.client(), "default");
    let signal = Signal::default();
    let controller = Controller::<ConfigMap>::new(server.client(), Watch::namespace("default"))
        .name("gate-health-test")
        .gate(ExpiredLease)
        .context(signal.clone())
        .reconcile(|_cm: Arc<ConfigMap>, ctx: Context<Signal>| async move {
            ctx.record("reconciled");
            Ok::<_, Infallible>(Action::await_change())
        });
    let health = controller.health_check();
    let running = Running::spawn(move |cancel| controller.run(cancel));
    create(&cms, &cm("a", &[], &[])).await;
    signal.wait_for("a reconcile", |e| !e.is_empty()).await;
    let report = health.check();
    assert!(!report.is_ready() && !report.is_alive(), "{report}");
    assert!(report.to_string().ends_with("\n  gate: open, unhealthy: lease expired 30s ago"), "{report}");
    running.stop().await.unwrap();
}
