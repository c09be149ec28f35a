//! A kube-runtime controller run unmodified against the test server: `examples/kube_runtime_controller.rs`
//! (server-side apply with a field manager, `kube::runtime::finalizer`, an owner reference),
//! with the garbage collector deleting what it owned. The scenario is kube-rs's
//! `examples/configmapgen_controller.rs` and `secret_syncer.rs`, and what envtest users check
//! against a real kube-apiserver (plus kube-controller-manager for the collection).

use std::collections::BTreeMap;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_testserver::TestServer;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams, ResourceExt};
use kube_runtime::wait::{await_condition, conditions};
use kube_runtime::watcher;
use serde_json::json;

#[path = "../../examples/kube_runtime_controller.rs"]
mod example;

/// Fails rather than hangs: each condition is awaited on watch events, bounded.
async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(Duration::from_secs(30), fut).await {
        Ok(v) => v,
        Err(_) => panic!("timed out waiting for {what}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kube_runtime_controller_runs_unmodified() {
    let server = TestServer::start().await;
    let client = server.client();
    let controller = tokio::spawn(example::run(client.clone(), "default"));
    let cms: Api<ConfigMap> = Api::default_namespaced(client);

    let source = ConfigMap {
        metadata: ObjectMeta {
            name: Some("bob".into()),
            labels: Some(BTreeMap::from([("kcache.dev/greeting".into(), "true".into())])),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("name".into(), "Bob".into())])),
        ..Default::default()
    };
    let created = cms.create(&PostParams::default(), &source).await.unwrap();

    // The greeting is applied, owned by the source, and its fields are the controller's.
    let greeting = within(
        "the greeting",
        await_condition(cms.clone(), "bob-greeting", |o: Option<&ConfigMap>| o.is_some()),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(greeting.data.as_ref().unwrap()["greeting"], "hello, Bob");
    let owner = &greeting.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.name.as_str(), owner.uid.as_str(), owner.controller),
        ("bob", created.uid().unwrap().as_str(), Some(true))
    );
    let entries = greeting.metadata.managed_fields.clone().unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(
        (entries[0].manager.as_deref(), entries[0].operation.as_deref()),
        (Some(example::MANAGER), Some("Apply"))
    );
    let fields = serde_json::to_value(&entries[0].fields_v1).unwrap();
    assert_eq!(fields["f:data"], json!({"f:greeting": {}}), "the controller owns what it applied: {fields}");
    // The finalizer helper added its finalizer to the source.
    let source = within(
        "the finalizer",
        await_condition(cms.clone(), "bob", |o: Option<&ConfigMap>| {
            o.is_some_and(|o| o.finalizers().iter().any(|f| f == example::FINALIZER))
        }),
    )
    .await
    .unwrap()
    .unwrap();

    // A change to the source is applied again (the same manager, no conflict).
    cms.patch("bob", &PatchParams::default(), &Patch::Merge(json!({"data": {"name": "Robert"}})))
        .await
        .unwrap();
    within(
        "the new greeting",
        await_condition(cms.clone(), "bob-greeting", |o: Option<&ConfigMap>| {
            o.and_then(|o| o.data.as_ref()).is_some_and(|d| d["greeting"] == "hello, Robert")
        }),
    )
    .await
    .unwrap();

    // Deleting the source: the finalizer's cleanup runs, the source goes, and the garbage
    // collector deletes the greeting, seen as a DELETED event by an ordinary watch.
    let rv = cms.get("bob-greeting").await.unwrap().resource_version().unwrap();
    let mut events = cms
        .watch(&kube::api::WatchParams::default().fields("metadata.name=bob-greeting"), &rv)
        .await
        .unwrap()
        .boxed();
    let marked = cms.delete("bob", &DeleteParams::default()).await.unwrap().left().unwrap();
    assert!(marked.metadata.deletion_timestamp.is_some(), "held by the finalizer");
    within(
        "the source's deletion",
        await_condition(cms.clone(), "bob", conditions::is_deleted(&source.uid().unwrap())),
    )
    .await
    .unwrap();
    let deleted = within("the greeting's DELETED event", async {
        loop {
            match events.try_next().await.unwrap() {
                Some(kube::api::WatchEvent::Deleted(o)) => break o,
                Some(_) => {}
                None => panic!("the watch ended"),
            }
        }
    })
    .await;
    assert_eq!(deleted.name_any(), "bob-greeting");
    assert!(cms.get_opt("bob-greeting").await.unwrap().is_none());
    // The watcher the controller runs saw the same: nothing is left.
    let left: Vec<_> = watcher(cms.clone(), watcher::Config::default()).boxed().take(1).collect().await;
    assert_eq!(left.len(), 1);
    controller.abort();
}
