//! A kube-runtime controller, written as for a real cluster, run unmodified against
//! kcache-testserver: server-side apply with a field manager, `kube::runtime::finalizer`, owner
//! references, and the garbage collector deleting what the controller owned.
//!
//! `cargo run -p kcache-testserver --example kube_runtime_controller`
//!
//! For every ConfigMap labelled `kcache.dev/greeting=true`, the controller applies a ConfigMap
//! `<name>-greeting` owned by it (`controller_owner_ref`), holding a greeting for its
//! `data.name`. A finalizer lets it clean up before its source goes; once the source is
//! deleted, the garbage collector deletes the greeting, through an ordinary DELETED watch
//! event. The integration test `controller` in `tests/it` runs this same file.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, ResourceExt};
use kube::{Client, Resource};
use kube_runtime::controller::{Action, Controller};
use kube_runtime::finalizer::{Event, finalizer};
use kube_runtime::watcher;

/// The controller's finalizer on each source.
pub(crate) const FINALIZER: &str = "kcache.dev/greeting-cleanup";
/// The field manager of its server-side applies.
pub(crate) const MANAGER: &str = "greeting-controller";
/// The label that selects sources.
pub(crate) const SELECTOR: &str = "kcache.dev/greeting=true";

/// What the reconciler needs.
struct Ctx {
    client: Client,
}

/// The error of a reconcile: the finalizer helper's, around kube's.
type Error = kube_runtime::finalizer::Error<kube::Error>;

/// The greeting a source asks for, as the controller applies it: only the fields it owns.
pub(crate) fn greeting_for(source: &ConfigMap) -> ConfigMap {
    let name = source.data.as_ref().and_then(|d| d.get("name")).cloned().unwrap_or_else(|| "world".into());
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(format!("{}-greeting", source.name_any())),
            owner_references: source.controller_owner_ref(&()).map(|r| vec![r]),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("greeting".to_string(), format!("hello, {name}"))])),
        ..Default::default()
    }
}

async fn reconcile(source: Arc<ConfigMap>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let ns = source.namespace().unwrap_or_else(|| "default".into());
    let cms: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ns);
    finalizer(&cms, FINALIZER, source, |event| async {
        match event {
            Event::Apply(source) => {
                let greeting = greeting_for(&source);
                let name = greeting.name_any();
                cms.patch(&name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&greeting)).await?;
                Ok(Action::requeue(Duration::from_secs(300)))
            }
            // Nothing outside the cluster to clean up here; the owner reference lets the
            // garbage collector delete the greeting once the source is gone.
            Event::Cleanup(_) => Ok(Action::await_change()),
        }
    })
    .await
}

fn error_policy(_: Arc<ConfigMap>, _: &Error, _: Arc<Ctx>) -> Action {
    Action::requeue(Duration::from_secs(1))
}

/// Runs the controller on the sources of `namespace` until the future is dropped.
pub(crate) async fn run(client: Client, namespace: &str) {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    Controller::new(cms.clone(), watcher::Config::default().labels(SELECTOR))
        .owns(cms, watcher::Config::default())
        .run(reconcile, error_policy, Arc::new(Ctx { client }))
        .for_each(|_| async {})
        .await;
}

#[allow(dead_code)] // the integration test includes this file for `run`
#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    use kube_runtime::wait::{await_condition, conditions};

    let server = kcache_testserver::TestServer::start().await;
    let client = server.client();
    tokio::spawn(run(client.clone(), "default"));

    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let source = ConfigMap {
        metadata: ObjectMeta {
            name: Some("alice".into()),
            labels: Some(BTreeMap::from([("kcache.dev/greeting".into(), "true".into())])),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("name".into(), "Alice".into())])),
        ..Default::default()
    };
    cms.create(&Default::default(), &source).await?;
    let within = |secs| tokio::time::timeout(Duration::from_secs(secs), std::future::pending::<()>());
    let greeting = tokio::select! {
        g = await_condition(cms.clone(), "alice-greeting", |o: Option<&ConfigMap>| o.is_some()) => g?,
        _ = within(30) => anyhow::bail!("no greeting after 30 s"),
    };
    let greeting = greeting.expect("the condition holds");
    println!("{}: {:?}", greeting.name_any(), greeting.data.unwrap_or_default());
    println!(
        "managed by {:?}",
        greeting.metadata.managed_fields.unwrap_or_default().iter().map(|m| &m.manager).collect::<Vec<_>>()
    );

    let uid = greeting.metadata.uid.unwrap_or_default();
    cms.delete("alice", &Default::default()).await?;
    tokio::select! {
        r = await_condition(cms.clone(), "alice-greeting", conditions::is_deleted(&uid)) => { r?; }
        _ = within(30) => anyhow::bail!("the greeting outlived its source"),
    }
    println!("alice and alice-greeting deleted");
    Ok(())
}
