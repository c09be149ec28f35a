//! kube-runtime's `finalizer()` inside a kcache reconcile: ConfigMaps labelled `audit=yes` get a
//! finalizer, and their deletion waits until the cleanup has written an audit record (a
//! ConfigMap `<name>-audit`). The reconcile returns `finalizer()`'s result as is: kcache's
//! `Action` is kube-runtime's. Test: `tests/it/interop.rs`.
//!
//! `cargo run -p kcache-controller --example finalizer` runs it against the cluster of your
//! kubeconfig until Ctrl-C.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kcache_controller::{Action, Context, Controller, Watch};
use kube::api::{Api, ObjectMeta, PostParams};
use kube::{Client, ResourceExt};
use kube_runtime::finalizer::{Error, Event, finalizer};
use tokio_util::sync::CancellationToken;

/// The finalizer this controller owns.
pub const FINALIZER: &str = "audit.kcache.io/cleanup";

/// Runs the controller until `cancel` fires.
pub async fn run(client: Client, cancel: CancellationToken) -> kcache_controller::Result<()> {
    Controller::<ConfigMap>::new(client.clone(), Watch::all().labels("audit=yes"))
        .context(client)
        .reconcile(reconcile)
        .run(cancel)
        .await
}

async fn reconcile(cm: Arc<ConfigMap>, ctx: Context<Client>) -> Result<Action, Error<kube::Error>> {
    let api = Api::<ConfigMap>::namespaced(Client::clone(&ctx), &cm.namespace().unwrap_or_default());
    finalizer(&api, FINALIZER, cm, |event| async {
        match event {
            // Adding the finalizer is finalizer()'s job; nothing else to do here.
            Event::Apply(_) => Ok(Action::await_change()),
            // The ConfigMap is being deleted: record it before the finalizer goes.
            Event::Cleanup(cm) => {
                let audit = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(format!("{}-audit", cm.name_any())),
                        ..ObjectMeta::default()
                    },
                    data: Some([("deleted".to_owned(), cm.name_any())].into()),
                    ..ConfigMap::default()
                };
                match api.create(&PostParams::default(), &audit).await {
                    Err(kube::Error::Api(status)) if status.code == 409 => {} // recorded by an earlier attempt
                    result => drop(result?),
                }
                Ok(Action::await_change())
            }
        }
    })
    .await
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
