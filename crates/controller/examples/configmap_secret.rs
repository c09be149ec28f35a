//! The ConfigMap -> Secret controller of issue #35: every ConfigMap labelled `app=x` gets a
//! Secret of the same name, owned by it, holding the same data; the Secret goes when the
//! ConfigMap is deleted or loses the label. Tests: `tests/it/configmap_secret.rs`.
//!
//! `cargo run -p kcache-controller --example configmap_secret` runs it against the cluster of
//! your kubeconfig (with a TLS feature of kube enabled) until Ctrl-C.

use std::sync::Arc;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kcache_controller::{Action, Context, Controller, ObjectKey, Watch};
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use kube::{Client, Resource, ResourceExt};
use tokio_util::sync::CancellationToken;

/// Runs the controller until `cancel` fires.
pub async fn run(client: Client, cancel: CancellationToken) -> kcache_controller::Result<()> {
    Controller::<ConfigMap>::new(client.clone(), Watch::all().labels("app=x"))
        .owns::<Secret>(Watch::all())
        .context(client)
        .reconcile(apply)
        .on_gone(cleanup)
        .run(cancel)
        .await
}

/// Creates or updates the Secret, unless the cached one is already right.
async fn apply(cm: Arc<ConfigMap>, ctx: Context<Client>) -> Result<Action, kube::Error> {
    let data = cm.data.iter().flatten().map(|(k, v)| (k.clone(), ByteString(v.clone().into_bytes())));
    let mut secret = Secret {
        metadata: ObjectMeta {
            name: cm.metadata.name.clone(),
            owner_references: cm.controller_owner_ref(&()).map(|owner| vec![owner]),
            ..ObjectMeta::default()
        },
        data: Some(data.collect()),
        ..Secret::default()
    };
    let api = Api::<Secret>::namespaced(Client::clone(&ctx), &cm.namespace().unwrap_or_default());
    match ctx.owned::<Secret>().into_iter().find(|s| s.metadata.name == secret.metadata.name) {
        None => drop(api.create(&PostParams::default(), &secret).await?),
        Some(old) if old.data != secret.data || old.owner_references() != secret.owner_references() => {
            secret.metadata.resource_version = old.resource_version();
            api.replace(&cm.name_any(), &PostParams::default(), &secret).await?;
        }
        Some(_) => {}
    }
    Ok(Action::await_change())
}

/// Deletes the Secrets of a ConfigMap that is gone (deleted, or no longer labelled).
async fn cleanup(cm: ObjectKey<ConfigMap>, ctx: Context<Client>) -> Result<Action, kube::Error> {
    let api = Api::<Secret>::namespaced(Client::clone(&ctx), cm.namespace().unwrap_or_default());
    for secret in ctx.owned::<Secret>() {
        match api.delete(&secret.name_any(), &DeleteParams::default()).await {
            Err(kube::Error::Api(status)) if status.code == 404 => {} // gone already
            result => drop(result?),
        }
    }
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
