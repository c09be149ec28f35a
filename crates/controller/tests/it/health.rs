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

/// Signals each finished reconcile (the queue has been told by then).
#[derive(Debug, Default)]
struct Finished(Signal);

impl kcache_controller::ControllerMetrics for Finished {
    fn reconcile_finished(
        &self,
        _: &str,
        outcome: kcache_controller::ReconcileOutcome,
        _: std::time::Duration,
    ) {
        self.0.record(outcome.label());
    }
}

/// The backlog: keys ready, waiting for a requeue's delay, being reconciled (the workqueue's
/// depth, its delayed adds and its processing set, as client-go's `workqueue_depth`,
/// `retries` and `unfinished_work` tell them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_backlog_counts_ready_waiting_and_reconciling_keys() {
    let server = TestServer::start().await;
    let cms = Api::<ConfigMap>::namespaced(server.client(), "default");
    for name in ["a", "b", "c"] {
        create(&cms, &cm(name, &[], &[])).await;
    }
    let release = Arc::new(tokio::sync::Notify::new());
    let first = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let started = Signal::default();
    let finished = Arc::new(Finished::default());
    let controller = Controller::<ConfigMap>::new(server.client(), Watch::namespace("default"))
        .controller_metrics(finished.clone())
        .context((started.clone(), Arc::clone(&release), first))
        .reconcile(|cm: Arc<ConfigMap>, ctx: Context<(Signal, Arc<tokio::sync::Notify>, Arc<std::sync::atomic::AtomicBool>)>| async move {
            ctx.0.record(cm.metadata.name.clone().unwrap_or_default());
            // The first key reconciled (one worker) holds it until released; the others ask
            // for a requeue in an hour.
            if ctx.2.swap(false, std::sync::atomic::Ordering::SeqCst) {
                ctx.1.notified().await;
                return Ok::<_, Infallible>(Action::await_change());
            }
            Ok(Action::requeue(std::time::Duration::from_secs(3600)))
        });
    let health = controller.health_check();
    assert_eq!(health.backlog(), kcache_controller::Backlog::default());
    let running = Running::spawn(move |cancel| controller.run(cancel));
    started.wait_for("the first reconcile started", |e| !e.is_empty()).await;
    let backlog = health.backlog();
    assert_eq!((backlog.ready, backlog.waiting, backlog.reconciling), (2, 0, 1), "{backlog:?}");
    release.notify_one();
    finished.0.wait_for("three reconciles", |e| e.len() == 3).await;
    let backlog = health.backlog();
    assert_eq!((backlog.ready, backlog.waiting, backlog.reconciling), (0, 2, 0), "{backlog:?}");
    running.stop().await.unwrap();
}
