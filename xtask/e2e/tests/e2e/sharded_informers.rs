//! Sharded informers (issue 34, KEP-5866) against a real kube-apiserver: three static shards
//! (`ShardSelector::split(Uid, 3)`) on the main server, which has `ShardedListAndWatch` on and
//! filters, and on a server of the same cluster without the gate, where each reflector detects
//! that nothing was filtered and filters on the client. Either way the three caches partition
//! the collection while it changes.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_e2e::{Cluster, ClusterKind, Recorder, Target, cache_state, server_state, skip};
use kcache_informer::{InformerScope, SharedInformerFactory};
use kcache_reflector::ShardMode;
use kcache_shard_selector::{ShardKey, ShardSelector};
use kube::api::{Api, DeleteParams, PostParams};

use crate::{configmap, synced};

/// Whether `target` filters a LIST by `shardSelector`: its answer carries
/// `metadata.shardInfo` (kube-apiserver with `ShardedListAndWatch` on).
async fn filters_by_shard(target: &Target, ns: &str) -> Result<bool> {
    let selector = ShardSelector::split(ShardKey::Uid, 2).swap_remove(0).to_string();
    let query: String =
        form_urlencoded::Serializer::new(String::new()).append_pair("shardSelector", &selector).finish();
    let req = http::Request::get(format!("/api/v1/namespaces/{ns}/configmaps?{query}"))
        .header("accept", "application/json")
        .body(kube::client::Body::empty())?;
    let resp = target.client().send(req).await?;
    ensure!(resp.status().is_success(), "LIST with a shardSelector: {}", resp.status());
    let body: serde_json::Value = serde_json::from_slice(&resp.into_body().collect().await?.to_bytes())?;
    Ok(body["metadata"]["shardInfo"]["selector"].as_str() == Some(selector.as_str()))
}

/// Three informers of one factory, one per shard of `ShardSelector::split(Uid, 3)`, on
/// `target`, while ConfigMaps are created and deleted: at quiescence each cache is exactly the
/// server's objects of its shard, no object is in two caches, the union is the server's list,
/// and each informer reports `mode`.
async fn three_shards_partition(c: &Cluster, target: &Target, prefix: &str, mode: ShardMode) -> Result<()> {
    let ns = c.namespace(target, prefix).await?;
    let api: Api<ConfigMap> = Api::namespaced(target.client(), &ns.name);
    for i in 0..60 {
        api.create(&PostParams::default(), &configmap(&format!("a-{i}"), "0")).await?;
    }
    let factory = SharedInformerFactory::new(target.client(), Duration::ZERO);
    let shards = ShardSelector::split(ShardKey::Uid, 3);
    let mut running = Vec::new();
    for s in &shards {
        let informer = factory.informer::<ConfigMap>(&InformerScope::namespace(&ns.name).shard(s.clone()));
        let rec = Recorder::new();
        informer.add_event_handler(rec.handler())?;
        running.push((s.clone(), informer, rec));
    }
    factory.start();
    let synced_informers: Vec<&dyn kcache_informer::HasSynced> =
        running.iter().map(|(_, i, _)| i as &dyn kcache_informer::HasSynced).collect();
    synced(&synced_informers).await?;
    for i in 0..30 {
        api.create(&PostParams::default(), &configmap(&format!("b-{i}"), "0")).await?;
    }
    for i in 0..20 {
        api.delete(&format!("a-{i}"), &DeleteParams::default()).await?;
    }
    let all = server_state(&api).await?;
    let items = api.list(&Default::default()).await?.items;
    let mut owner: BTreeMap<String, usize> = BTreeMap::new();
    for (n, (shard, informer, rec)) in running.iter().enumerate() {
        let mine: BTreeMap<String, String> = items
            .iter()
            .filter(|o| shard.matches(&o.metadata))
            .map(|o| (kcache_e2e::key_of(o), kcache_e2e::rv_of(o)))
            .collect();
        rec.wait_for(&format!("shard {n} converges"), || {
            cache_state(&informer.lister().list()) == mine && rec.matches(&mine)
        })
        .await?;
        for key in mine.keys() {
            ensure!(owner.insert(key.clone(), n).is_none(), "{key} is cached by two shards");
        }
        let got = informer.shard_mode();
        ensure!(got == mode, "shard {n}: mode {got:?}, expected {mode:?}");
        eprintln!("{prefix}: shard {n} ({shard}) holds {} objects, mode {got:?}", mine.len());
    }
    let union: Vec<&String> = owner.keys().collect();
    let all: Vec<&String> = all.keys().collect();
    ensure!(union == all, "the union of the caches is not the server's list");
    factory.shutdown().await;
    Ok(())
}

/// Server-side sharding: the main server (`--feature-gates=ShardedListAndWatch=true` on
/// `local`; kcache-testserver with the gate on `embedded`) filters, and each shard informer
/// stays in `ShardMode::ServerSide`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_static_shards_partition_on_a_sharding_server() -> Result<()> {
    let c = Cluster::connect().await?;
    let probe = c.namespace(&c.main, "shard-probe").await?;
    if !filters_by_shard(&c.main, &probe.name).await? {
        ensure!(
            !matches!(c.kind, ClusterKind::Local | ClusterKind::Embedded),
            "the main server of `local` and `embedded` runs with ShardedListAndWatch on"
        );
        skip(
            "three_static_shards_partition_on_a_sharding_server",
            "the server does not filter by shardSelector",
        );
        return Ok(());
    }
    three_shards_partition(&c, &c.main, "shard-on", ShardMode::ServerSide).await
}

/// Client-side fallback: a server of the same cluster without the gate ignores `shardSelector`
/// (every LIST without `shardInfo`); each shard informer detects it, switches to
/// `ShardMode::ClientSide`, and the caches partition the collection all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_static_shards_partition_by_client_side_filtering() -> Result<()> {
    let c = Cluster::connect().await?;
    // The coordinated server: the harness names it `unsharded` (ShardedListAndWatch off).
    let Some(target) = c.unsharded.as_ref() else {
        skip("three_static_shards_partition_by_client_side_filtering", "no server without the gate");
        return Ok(());
    };
    let probe = c.namespace(target, "shard-probe").await?;
    ensure!(!filters_by_shard(target, &probe.name).await.context("probe")?, "the second server filters");
    three_shards_partition(&c, target, "shard-off", ShardMode::ClientSide).await
}
