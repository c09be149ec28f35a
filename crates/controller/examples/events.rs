//! kube-runtime's event `Recorder` inside a kcache reconcile: every reconcile of a ConfigMap
//! labelled `app=x` publishes an `events.k8s.io/v1` Event about it (`kubectl describe` shows
//! them); repeats of the same event become a series, as the Recorder does it. Test:
//! `tests/it/interop.rs`.
//!
//! `cargo run -p kcache-controller --example events` runs it against the cluster of your
//! kubeconfig until Ctrl-C.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kcache_controller::{Action, Context, Controller, Watch};
use kube::{Client, Resource};
use kube_runtime::events::{Event, EventType, Recorder, Reporter};
use tokio_util::sync::CancellationToken;

/// Runs the controller until `cancel` fires.
pub async fn run(client: Client, cancel: CancellationToken) -> kcache_controller::Result<()> {
    let reporter = Reporter { controller: "kcache-events-example".into(), instance: None };
    Controller::<ConfigMap>::new(client.clone(), Watch::all().labels("app=x"))
        .context(Recorder::new(client, reporter))
        .reconcile(reconcile)
        .run(cancel)
        .await
}

async fn reconcile(cm: Arc<ConfigMap>, recorder: Context<Recorder>) -> Result<Action, kube::Error> {
    let keys = cm.data.as_ref().map_or(0, |d| d.len());
    let event = Event {
        type_: EventType::Normal,
        reason: "Reconciled".into(),
        note: Some(format!("{keys} data keys")),
        action: "Reconcile".into(),
        secondary: None,
    };
    recorder.publish(&event, &cm.object_ref(&())).await?;
    Ok(Action::await_change())
}

#[allow(dead_code)] // the tests include this file for `run`
#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cancel = CancellationToken::new();
    tokio::spawn({
        let cancel = cancel.clone();
        async move { tokio::signal::ctrl_c().await.map(|()| cancel.cancel()) }
    });
    Ok(run(Client::try_default().await?, cancel).await?)
}
