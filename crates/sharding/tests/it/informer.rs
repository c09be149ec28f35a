//! `ShardedInformer` following a `ShardCoordinator`: each replica caches exactly its share, with
//! the server filtering (`ShardedListAndWatch` on) and with the reflector filtering client-side
//! (gate off); when a replica joins, the other announces the objects of the range it lost
//! through `on_range_lost` (not as deletions) and they leave its cache. No client-go counterpart
//! (client-go has no sharded informer); the restart mirrors what a controller-runtime manager does
//! when a sharded cache's selector changes: a new cache.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kcache_informer::{InformerScope, ObjectOrTombstone, ResourceEventHandler, SharedInformerFactory};
use kcache_shard_selector::{ShardKey, fnv1a_64};
use kcache_sharding::{RangeSet, ShardedEventHandler, ShardedInformer};
use kcache_testserver::TestServer;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::common::{Member, pass_checking};

#[derive(Default)]
struct Record {
    deleted: Vec<String>,
    lost: Vec<(RangeSet, Vec<String>)>,
    gained: Vec<RangeSet>,
}

#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Record>>);

impl ResourceEventHandler<ConfigMap> for Recorder {
    fn on_delete(&self, obj: &ObjectOrTombstone<ConfigMap>) {
        self.0.lock().deleted.push(obj.object().name_any());
    }
}

impl ShardedEventHandler<ConfigMap> for Recorder {
    fn on_range_lost(&self, lost: &RangeSet, objects: &[Arc<ConfigMap>]) {
        self.0.lock().lost.push((lost.clone(), objects.iter().map(|o| o.name_any()).collect()));
    }
    fn on_range_gained(&self, gained: &RangeSet) {
        self.0.lock().gained.push(gained.clone());
    }
}

struct Replica {
    member: Member,
    informer: ShardedInformer<ConfigMap>,
    record: Recorder,
}

fn replica(server: &TestServer, id: &str) -> Replica {
    let member = Member::start(server, id);
    let client = server.in_memory_client();
    let informer = ShardedInformer::new(ShardKey::Uid, move |selector| {
        SharedInformerFactory::new(client.clone(), Duration::ZERO)
            .informer::<ConfigMap>(&InformerScope::namespace("default").shard(selector))
    });
    let record = Recorder::default();
    informer.add_event_handler(record.clone());
    let rx = member.coordinator.assignments();
    tokio::spawn({
        let informer = informer.clone();
        async move { informer.run(rx, CancellationToken::new()).await }
    });
    Replica { member, informer, record }
}

fn cached(r: &Replica) -> BTreeSet<String> {
    r.informer
        .current()
        .map(|i| i.indexer().list().iter().map(|o| o.name_any()).collect())
        .unwrap_or_default()
}

fn owned_by(objects: &[ConfigMap], ranges: &RangeSet) -> BTreeSet<String> {
    objects
        .iter()
        .filter(|o| ranges.contains(fnv1a_64(o.uid().unwrap().as_bytes())))
        .map(|o| o.name_any())
        .collect()
}

async fn two_replicas_share_the_objects(gate: bool) {
    let server = TestServer::builder()
        .sharded_list_and_watch(gate)
        .token("a", "a", &["system:masters"])
        .token("b", "b", &["system:masters"])
        .start()
        .await;
    let api: Api<ConfigMap> = Api::namespaced(server.in_memory_client(), "default");
    let mut objects = Vec::new();
    for i in 0..40 {
        let cm = ConfigMap {
            metadata: kube::api::ObjectMeta { name: Some(format!("cm-{i}")), ..Default::default() },
            ..Default::default()
        };
        objects.push(api.create(&PostParams::default(), &cm).await.unwrap());
    }
    let a = replica(&server, "a");
    pass_checking(&[&a.member], Duration::from_secs(5)).await;
    assert_eq!(cached(&a).len(), 40, "alone, a caches everything");

    let b = replica(&server, "b");
    assert!(pass_checking(&[&a.member, &b.member], Duration::from_secs(20)).await.is_some());
    let (sa, sb) = (a.member.serving(), b.member.serving());
    assert_eq!(cached(&a), owned_by(&objects, &sa), "a caches exactly its share");
    assert_eq!(cached(&b), owned_by(&objects, &sb), "b caches exactly its share");
    assert!(cached(&a).is_disjoint(&cached(&b)));
    assert_eq!(cached(&a).len() + cached(&b).len(), 40);

    let rec = a.record.0.lock();
    assert!(rec.deleted.is_empty(), "a lost range is not announced as deletions");
    let lost: BTreeSet<String> = rec.lost.iter().flat_map(|(_, names)| names.iter().cloned()).collect();
    assert_eq!(lost, owned_by(&objects, &sb), "a announced b's share as lost, with its objects");
    assert!(
        b.record
            .0
            .lock()
            .gained
            .iter()
            .fold(RangeSet::empty(), |acc, g| acc.union(g))
            .is_subset(&RangeSet::full())
    );
}

/// The server filters (`ShardedListAndWatch` on): each replica's informer asks for its share.
#[tokio::test(start_paused = true)]
async fn replicas_cache_disjoint_shares_with_server_side_sharding() {
    two_replicas_share_the_objects(true).await;
}

/// The server ignores `shardSelector` (gate off): the reflector filters client-side, and the
/// caches are the same.
#[tokio::test(start_paused = true)]
async fn replicas_cache_disjoint_shares_with_client_side_filtering() {
    two_replicas_share_the_objects(false).await;
}
