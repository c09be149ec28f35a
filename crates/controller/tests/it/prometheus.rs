//! `PrometheusMetrics`: one registry for the workqueue, reflector, informer and reconcile
//! metrics, wired by one builder call.

use std::convert::Infallible;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kcache_controller::{Action, Context, Controller, PrometheusMetrics, Watch};
use kcache_testserver::TestServer;
use kube::api::Api;

use crate::common::{Running, Signal, cm, create};

/// After one reconcile, the registry holds client-go's workqueue metrics (named after the
/// controller), the reflector's and the informer's (named after the informer, each handler's
/// backlog included) and controller-runtime-style reconcile counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_registry_has_the_workqueue_reflector_informer_and_reconcile_metrics() {
    let server = TestServer::start().await;
    let cms = Api::<ConfigMap>::namespaced(server.client(), "default");
    let metrics = PrometheusMetrics::new();
    let signal = Signal::default();
    let controller = Controller::<ConfigMap>::new(server.client(), Watch::namespace("default"))
        .name("metrics-test")
        .metrics(&metrics)
        .context(signal.clone())
        .reconcile(|_cm: Arc<ConfigMap>, ctx: Context<Signal>| async move {
            ctx.record("reconciled");
            Ok::<_, Infallible>(Action::await_change())
        });
    let running = Running::spawn(move |cancel| controller.run(cancel));
    create(&cms, &cm("a", &[], &[])).await;
    signal.wait_for("a reconcile", |e| !e.is_empty()).await;
    running.stop().await.unwrap();

    let text = metrics.encode().unwrap();
    for expected in [
        r#"workqueue_adds_total{name="metrics-test"} 1"#,
        r#"reflector_watches_total{name="ConfigMap/default",watch_list="true"} 1"#,
        r#"reflector_watch_events_total{name="ConfigMap/default",type="ADDED"} 1"#,
        // Issue 34's mode gauge: 1 for the mode in effect (an unsharded watch here), 0 for others.
        r#"reflector_shard_mode{name="ConfigMap/default",mode="unsharded"} 1"#,
        r#"reflector_shard_mode{name="ConfigMap/default",mode="client_side"} 0"#,
        r#"informer_cache_objects{name="ConfigMap/default"} 1"#,
        r#"informer_synced{name="ConfigMap/default"} 1"#,
        r#"controller_reconcile_total{controller="metrics-test",result="success"} 1"#,
        r#"controller_active_workers{controller="metrics-test"} 0"#,
        "# TYPE informer_handler_pending gauge",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
    // The controller removed its handler on the way out; a handler of the informer's shows its
    // backlog while registered (see `informer_handler_pending`'s test below).
}

/// Every handler of an observed informer has a backlog series, whoever registered it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_handler_of_an_observed_informer_reports_its_backlog() {
    let server = TestServer::start().await;
    let cms = Api::<ConfigMap>::namespaced(server.client(), "default");
    let informer = kcache_informer::SharedIndexInformer::from_api(cms, std::time::Duration::ZERO);
    let options = kcache_informer::HandlerOptions { name: Some("mine".into()), ..Default::default() };
    informer.add_event_handler_with_options(kcache_informer::EventHandlerFuncs::new(), options).unwrap();
    let metrics = PrometheusMetrics::new();
    metrics.observe_informer(&informer);
    metrics.observe_informer(&informer);
    let text = metrics.encode().unwrap();
    assert!(text.contains(r#"informer_handler_pending{name="ConfigMap",handler="mine"} 0"#), "{text}");
    assert!(
        text.contains(r#"informer_handler_delivered_total{name="ConfigMap",handler="mine"} 0"#),
        "{text}"
    );
    assert_eq!(text.matches("informer_handler_pending{").count(), 1, "observed once:\n{text}");
}
