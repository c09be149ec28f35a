//! Sharded informers (KEP-5866): `InformerScope::shard`, one shared informer per (resource,
//! scope including the shard), and caches and handlers that hold exactly their shard whether
//! the server filters or the reflector has to. client-go has no counterpart beyond passing
//! `ListOptions.ShardSelector` through `WithTweakListOptions`; the factory sharing mirrors
//! `TestSharedInformerFactory`-style sharing by (type, namespace, tweak) in
//! informers/factory_test.go.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kcache_informer::{InformerScope, SharedIndexInformer, SharedInformerFactory};
use kcache_reflector::{ReflectorConfig, ShardMode};
use kcache_shard_selector::{ShardKey, ShardSelector};
use kcache_testserver::{TestServer, Verb};
use kube::api::{Api, ApiResource};
use kube::core::PartialObjectMeta;

use crate::common::{Ev, Recorder, create, delete};

/// The names on the server whose uid `shard` admits.
async fn expected(api: &Api<ConfigMap>, shard: &ShardSelector) -> BTreeSet<String> {
    api.list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|o| shard.matches(&o.metadata))
        .filter_map(|o| o.metadata.name)
        .collect()
}

fn cached(informer: &SharedIndexInformer<ConfigMap>) -> BTreeSet<String> {
    informer.lister().list().iter().filter_map(|o| o.metadata.name.clone()).collect()
}

/// The factory shares an informer between callers asking for the same shard, never between
/// shards, and never between a shard and the whole collection; each is named after its
/// selector and sends it on its watch.
#[tokio::test]
async fn factory_shares_one_informer_per_shard() {
    let server = TestServer::start().await;
    let factory = SharedInformerFactory::new(server.client(), Duration::ZERO);
    let shards = ShardSelector::split(ShardKey::Uid, 3);
    let informers: Vec<_> = shards
        .iter()
        .map(|s| factory.informer::<ConfigMap>(&InformerScope::all().shard(s.clone())))
        .collect();
    let again = factory.informer::<ConfigMap>(&InformerScope::all().shard(shards[1].clone()));
    let whole = factory.informer::<ConfigMap>(&InformerScope::all());
    assert_eq!(factory.len(), 4, "three shards and the whole collection");
    assert_eq!(again.name(), informers[1].name());
    assert_eq!(informers[0].name(), format!("ConfigMap;shard={}", shards[0]));
    assert_eq!(whole.name(), "ConfigMap");
    assert_eq!(whole.shard_mode(), ShardMode::Unsharded);
    for (i, s) in informers.iter().zip(&shards) {
        assert_eq!(i.shard_selector().as_ref(), Some(s));
        assert_eq!(i.shard_mode(), ShardMode::ServerSide, "before start: what the reflector starts in");
    }
    // Metadata informers too: one per shard, apart from the full ones.
    let ar = ApiResource::erase::<ConfigMap>(&());
    let meta = factory.metadata_informer(&ar, &InformerScope::all().shard(shards[0].clone()));
    let meta_again = factory.metadata_informer(&ar, &InformerScope::all().shard(shards[0].clone()));
    let meta_whole = factory.metadata_informer(&ar, &InformerScope::all());
    assert_eq!(factory.len(), 6);
    assert_eq!(meta.name(), meta_again.name());
    assert_ne!(meta.name(), meta_whole.name());
    factory.start();
    assert!(tokio::time::timeout(Duration::from_secs(20), factory.wait_for_cache_sync()).await.unwrap());
    let watches = server.request_log().filter(|r| r.verb == Verb::Watch);
    assert_eq!(watches.len(), 6, "one watch per informer");
    let mut sent: Vec<_> = watches.iter().filter_map(|w| w.query_param("shardSelector")).collect();
    sent.sort();
    let mut want: Vec<_> =
        [&shards[0], &shards[0], &shards[1], &shards[2]].iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(sent, want);
    factory.shutdown().await;
}

/// Three shard informers of one factory: each cache and each handler holds exactly its shard
/// through the initial list and later creates and deletes, the caches are disjoint, and their
/// union is the server's list; on a server that filters (`gate`: kcache-testserver with
/// `ShardedListAndWatch`) each reports server-side sharding, on one that does not, client-side.
async fn three_shard_informers_partition_the_collection(gate: bool) {
    let server = TestServer::builder().sharded_list_and_watch(gate).start().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    for i in 0..30 {
        create(&api, &format!("a{i:02}"), "1").await;
    }
    let factory = SharedInformerFactory::new(server.client(), Duration::ZERO);
    let shards = ShardSelector::split(ShardKey::Uid, 3);
    let mut running = Vec::new();
    for s in &shards {
        let informer = factory.informer::<ConfigMap>(&InformerScope::namespace("default").shard(s.clone()));
        let recorder = Recorder::new();
        informer.add_event_handler(recorder.clone()).unwrap();
        running.push((s.clone(), informer, recorder));
    }
    factory.start();
    assert!(tokio::time::timeout(Duration::from_secs(20), factory.wait_for_cache_sync()).await.unwrap());
    for i in 0..15 {
        create(&api, &format!("b{i:02}"), "1").await;
    }
    // Every object there ever was, with its uid, before some are deleted.
    let ever = api.list(&Default::default()).await.unwrap().items;
    for i in 0..10 {
        delete(&api, &format!("a{i:02}")).await;
    }
    let mut union = BTreeSet::new();
    for (shard, informer, recorder) in &running {
        let want = expected(&api, shard).await;
        recorder.wait_until("this shard's cache", |_| cached(informer) == want).await;
        // Handlers heard of every object of this shard there ever was, and of no other.
        let mine: BTreeSet<String> = ever
            .iter()
            .filter(|o| shard.matches(&o.metadata))
            .filter_map(|o| o.metadata.name.clone())
            .collect();
        let heard: BTreeSet<String> = recorder.events().iter().map(|e| e.name().to_owned()).collect();
        let added: BTreeSet<String> = recorder
            .events()
            .iter()
            .filter(|e| matches!(e, Ev::Add(..)))
            .map(|e| e.name().to_owned())
            .collect();
        assert_eq!(heard, mine);
        assert_eq!(added, mine);
        assert!(union.is_disjoint(&want), "no object in two caches");
        union.extend(want);
        let mode = if gate { ShardMode::ServerSide } else { ShardMode::ClientSide };
        assert_eq!(informer.shard_mode(), mode);
    }
    let all: BTreeSet<String> = api
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|o| o.metadata.name)
        .collect();
    assert_eq!(union, all, "the union of the caches is the server's list");
    // Each object was added to exactly one shard's handler, once.
    let adds: usize =
        running.iter().map(|(_, _, r)| r.events().iter().filter(|e| matches!(e, Ev::Add(..))).count()).sum();
    assert_eq!(adds, ever.len());
    factory.shutdown().await;
}

#[tokio::test]
async fn three_shard_informers_partition_on_a_sharding_server() {
    three_shard_informers_partition_the_collection(true).await;
}

#[tokio::test]
async fn three_shard_informers_partition_by_client_side_filtering() {
    three_shard_informers_partition_the_collection(false).await;
}

/// A sharded metadata informer caches only its shard's `PartialObjectMeta`, whichever side
/// filters. kube-apiserver's `PartialObjectMetadataList` carries no `shardInfo` even when it
/// filtered (`asPartialObjectMetadataList`), so on a sharding server the informer must not take
/// its absence for a server that ignored the selector: it stays server-side.
async fn metadata_informer_caches_its_shard_only(gate: bool) {
    let server = TestServer::builder().sharded_list_and_watch(gate).start().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    for i in 0..20 {
        create(&api, &format!("a{i:02}"), "1").await;
    }
    let shard = ShardSelector::split(ShardKey::Uid, 2).swap_remove(1);
    let factory = SharedInformerFactory::new(server.client(), Duration::ZERO);
    let meta: SharedIndexInformer<PartialObjectMeta> = factory
        .metadata_informer(&ApiResource::erase::<ConfigMap>(&()), &InformerScope::all().shard(shard.clone()));
    // LIST + WATCH: a watch-list has no LIST whose metadata could mislead.
    meta.set_reflector_config(ReflectorConfig { use_watch_list: false, ..ReflectorConfig::default() })
        .unwrap();
    factory.start();
    assert!(tokio::time::timeout(Duration::from_secs(20), factory.wait_for_cache_sync()).await.unwrap());
    let got: BTreeSet<String> = meta.lister().list().iter().filter_map(|o| o.metadata.name.clone()).collect();
    assert_eq!(got, expected(&api, &shard).await);
    let mode = if gate { ShardMode::ServerSide } else { ShardMode::ClientSide };
    assert_eq!(meta.shard_mode(), mode);
    factory.shutdown().await;
}

#[tokio::test]
async fn metadata_informer_on_a_sharding_server_stays_server_side() {
    metadata_informer_caches_its_shard_only(true).await;
}

#[tokio::test]
async fn metadata_informer_filters_on_the_client_without_the_gate() {
    metadata_informer_caches_its_shard_only(false).await;
}
