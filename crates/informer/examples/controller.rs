//! A controller: an informer's handler enqueues keys into a rate-limited workqueue drained by
//! workers that reconcile through the lister; failures are retried with per-key backoff.
//!
//! Runs against an in-process kcache-testserver, so it needs no cluster:
//! `cargo run -p kcache-informer --example controller`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kcache_informer::{EventHandlerFuncs, SharedIndexInformer, wait_for_cache_sync};
use kcache_store::meta_namespace_key;
use kcache_testserver::TestServer;
use kcache_workqueue::{RateLimitingQueue, Requeue, default_controller_rate_limiter, run_workers};
use kube::api::{Api, ObjectMeta, PostParams};
use tokio_util::sync::CancellationToken;

fn key(cm: &ConfigMap) -> String {
    meta_namespace_key(
        cm.metadata.namespace.as_deref().unwrap_or(""),
        cm.metadata.name.as_deref().unwrap_or(""),
    )
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let server = TestServer::start().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");

    let informer = SharedIndexInformer::from_api(api.clone(), Duration::ZERO);
    let queue = RateLimitingQueue::new(default_controller_rate_limiter());
    // The handler only enqueues keys and returns: the workqueue coalesces bursts per key.
    let q = queue.clone();
    let q2 = queue.clone();
    informer.add_event_handler(
        EventHandlerFuncs::new()
            .on_add(move |cm: &Arc<ConfigMap>, _| q.add(key(cm)))
            .on_update(move |_, cm: &Arc<ConfigMap>| q2.add(key(cm))),
    )?;

    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let (informer, cancel) = (informer.clone(), cancel.clone());
        async move { informer.run(cancel).await }
    });
    wait_for_cache_sync(&cancel, &[&informer]).await;

    // Reconcile: read through the lister; the first attempt for each key fails, to show retries.
    let lister = informer.lister();
    let attempts = Arc::new(AtomicUsize::new(0));
    let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let workers = tokio::spawn(run_workers(queue.clone(), 2, {
        let attempts = Arc::clone(&attempts);
        move |key: String| {
            let lister = lister.clone();
            let (attempts, done_tx) = (Arc::clone(&attempts), done_tx.clone());
            async move {
                if attempts.fetch_add(1, Ordering::SeqCst) % 2 == 0 {
                    return Err(format!("transient failure for {key}"));
                }
                let Some(cm) = lister.get(&key) else { return Ok(Requeue::Never) };
                println!("reconciled {key} at resourceVersion {:?}", cm.metadata.resource_version);
                let _ = done_tx.send(key);
                Ok(Requeue::Never)
            }
        }
    }));

    for i in 0..5 {
        let cm = ConfigMap {
            metadata: ObjectMeta { name: Some(format!("app-{i}")), ..Default::default() },
            ..Default::default()
        };
        api.create(&PostParams::default(), &cm).await?;
    }
    let mut done = std::collections::BTreeSet::new();
    while done.len() < 5 {
        done.insert(done_rx.recv().await.expect("workers are running"));
    }
    println!("{} attempts for 5 objects (failures retried with backoff)", attempts.load(Ordering::SeqCst));

    queue.shut_down_with_drain().await;
    workers.await?;
    cancel.cancel();
    run.await??;
    Ok(())
}
