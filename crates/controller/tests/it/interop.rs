//! kube-runtime inside a kcache reconcile, not reinvented: its `finalizer()` and its event
//! `Recorder`, each through its example (`examples/finalizer.rs`, `examples/events.rs`), run
//! unmodified against kcache-testserver.

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kcache_testserver::TestServer;
use kube::api::{Api, DeleteParams, PostParams};

use crate::common::{Observer, Running, cm, create};

#[allow(unreachable_pub)] // `pub` in the example crate
#[path = "../../examples/finalizer.rs"]
mod finalizer_example;

#[allow(unreachable_pub)] // `pub` in the example crate
#[path = "../../examples/events.rs"]
mod events_example;

/// kube-runtime's `finalizer()` in a kcache reconcile, through its expected flow (kube-runtime
/// finalizer.rs "Expected Flow"): the finalizer is added (JSON patch), a delete only marks the
/// object, the cleanup runs, the finalizer is removed (JSON patch with its `test` operation) and
/// the object goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_runtime_finalizer_works_inside_a_kcache_reconcile() {
    let server = TestServer::start().await;
    let cms = Api::<ConfigMap>::namespaced(server.client(), "default");
    let observed = Observer::start(cms.clone()).await;
    let client = server.client();
    let controller = Running::spawn(move |cancel| finalizer_example::run(client, cancel));

    create(&cms, &cm("web", &[("audit", "yes")], &[("v", "1")])).await;
    let has_finalizer = |c: &ConfigMap| {
        c.metadata.finalizers.as_ref().is_some_and(|f| f.iter().any(|f| f == finalizer_example::FINALIZER))
    };
    observed
        .wait_for("the finalizer added", |l| l.get("default/web").is_some_and(|c| has_finalizer(&c)))
        .await;
    assert!(observed.get("web-audit").is_none(), "no cleanup before the delete");

    cms.delete("web", &DeleteParams::default()).await.unwrap();
    observed
        .wait_for("the cleanup's audit record, then the ConfigMap gone", |l| {
            l.get("default/web-audit").is_some() && l.get("default/web").is_none()
        })
        .await;
    let audit = observed.get("web-audit").unwrap();
    assert_eq!(audit.data.as_ref().unwrap()["deleted"], "web");
    controller.stop().await.unwrap();
}

/// kube-runtime's `Recorder` in a kcache reconcile publishes `events.k8s.io/v1` Events about
/// the object (kube-runtime events.rs `event_recorder_attaches_events`, against the test
/// server instead of a cluster): the first reconcile creates one, the next (after an update)
/// turns it into a series of two with a merge patch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_runtime_recorder_works_inside_a_kcache_reconcile() {
    let server = TestServer::start().await;
    let cms = Api::<ConfigMap>::namespaced(server.client(), "default");
    let events = Observer::start(Api::<Event>::namespaced(server.client(), "default")).await;
    let client = server.client();
    let controller = Running::spawn(move |cancel| events_example::run(client, cancel));

    let created = create(&cms, &cm("web", &[("app", "x")], &[("v", "1")])).await;
    events.wait_for("an Event about the ConfigMap", |l| !l.list().is_empty()).await;
    let event = events.lister().list().pop().unwrap();
    let regarding = event.regarding.as_ref().unwrap();
    assert_eq!((regarding.kind.as_deref(), regarding.name.as_deref()), (Some("ConfigMap"), Some("web")));
    assert_eq!(regarding.uid, created.metadata.uid);
    assert_eq!((event.reason.as_deref(), event.note.as_deref()), (Some("Reconciled"), Some("1 data keys")));
    assert_eq!(event.reporting_controller.as_deref(), Some("kcache-events-example"));

    let mut current = cms.get("web").await.unwrap();
    current.data.as_mut().unwrap().insert("w".into(), "2".into());
    cms.replace("web", &PostParams::default(), &current).await.unwrap();
    events
        .wait_for("the Event's series of two", |l| {
            l.list().iter().any(|e| e.series.as_ref().is_some_and(|s| s.count == 2))
        })
        .await;
    assert_eq!(events.lister().list().len(), 1, "a series, not a second Event");
    controller.stop().await.unwrap();
}
