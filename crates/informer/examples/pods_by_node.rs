//! An index lookup: pods by the node they run on, through a custom indexer and the lister.
//!
//! `cargo run -p kcache-informer --example pods_by_node` (in-process test server, no cluster).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use kcache_informer::{SharedIndexInformer, wait_for_cache_sync};
use kcache_store::index_func;
use kcache_testserver::TestServer;
use kube::api::{Api, ObjectMeta, PostParams};
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let server = TestServer::start().await;
    let api: Api<Pod> = Api::namespaced(server.client(), "default");
    for (name, node) in [("web-1", "node-a"), ("web-2", "node-b"), ("db-1", "node-a")] {
        let pod = Pod {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            spec: Some(PodSpec { node_name: Some(node.into()), ..Default::default() }),
            ..Default::default()
        };
        api.create(&PostParams::default(), &pod).await?;
    }

    let informer = SharedIndexInformer::from_api(Api::<Pod>::all(server.client()), Duration::ZERO);
    informer.add_indexers(
        [(
            "by-node".to_string(),
            index_func(|pod: &Pod| {
                Ok(pod.spec.as_ref().and_then(|s| s.node_name.clone()).into_iter().collect())
            }),
        )]
        .into(),
    )?;
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let (informer, cancel) = (informer.clone(), cancel.clone());
        async move { informer.run(cancel).await }
    });
    wait_for_cache_sync(&cancel, &[&informer]).await;

    for node in ["node-a", "node-b", "node-c"] {
        let mut names: Vec<_> = informer
            .lister()
            .by_index("by-node", node)?
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        names.sort();
        println!("{node}: {names:?}");
    }
    cancel.cancel();
    run.await??;
    Ok(())
}
