//! Garbage collection and deletion propagation: kube-apiserver's half (DeleteOptions, the
//! `orphan` and `foregroundDeletion` finalizers) and kube-controller-manager's garbage
//! collector. The scenarios follow k8s.io/kubernetes
//! `test/integration/garbagecollector/garbage_collector_test.go` and the e2e
//! `test/e2e/apimachinery/garbage_collector.go`, with ConfigMaps as owners and dependents.

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_testserver::TestServer;
use kube::Resource;
use kube::api::{
    Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams, PropagationPolicy, WatchParams,
};
use kube::core::WatchEvent;
use serde_json::json;

use crate::common::cm;

async fn server(gc: bool) -> (TestServer, Api<ConfigMap>) {
    let server = TestServer::builder().garbage_collection(gc).start().await;
    let cms = Api::default_namespaced(server.client());
    (server, cms)
}

/// Creates `name` owned by `owners` (each `(object, blockOwnerDeletion)`), with `finalizers`.
async fn dependent(
    cms: &Api<ConfigMap>,
    name: &str,
    owners: &[(&ConfigMap, bool)],
    finalizers: &[&str],
) -> ConfigMap {
    let refs = owners
        .iter()
        .map(|(o, block)| {
            let mut r = o.owner_ref(&()).unwrap();
            r.block_owner_deletion = Some(*block);
            r
        })
        .collect();
    let c = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            owner_references: Some(refs),
            finalizers: (!finalizers.is_empty()).then(|| finalizers.iter().map(|f| f.to_string()).collect()),
            ..Default::default()
        },
        ..Default::default()
    };
    cms.create(&PostParams::default(), &c).await.unwrap()
}

async fn owner(cms: &Api<ConfigMap>, name: &str) -> ConfigMap {
    cms.create(&PostParams::default(), &cm(name, &[], "1")).await.unwrap()
}

fn with(policy: PropagationPolicy) -> DeleteParams {
    DeleteParams { propagation_policy: Some(policy), ..Default::default() }
}

async fn exists(cms: &Api<ConfigMap>, name: &str) -> Option<ConfigMap> {
    cms.get_opt(name).await.unwrap()
}

async fn drop_finalizers(cms: &Api<ConfigMap>, name: &str) {
    cms.patch(name, &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": null}})))
        .await
        .unwrap();
}

/// `TestCascadingDeletion`: deleting an owner (background, the default) deletes the dependents
/// whose only owner it was, through ordinary DELETED watch events after the owner's; a
/// dependent with another owner that still exists stays, without the reference to the deleted
/// one (`attemptToDeleteItem`: solid owners left, dangling references patched away).
#[tokio::test]
async fn background_deletion_removes_dependents_through_watch_events() {
    let (_server, cms) = server(true).await;
    let a = owner(&cms, "a").await;
    let b = owner(&cms, "b").await;
    dependent(&cms, "only-a", &[(&a, false)], &[]).await;
    dependent(&cms, "a-and-b", &[(&a, false), (&b, false)], &[]).await;
    let rv = cms.get("a-and-b").await.unwrap().metadata.resource_version.unwrap();
    let mut events = cms.watch(&WatchParams::default().disable_bookmarks(), &rv).await.unwrap().boxed();

    let status = cms.delete("a", &DeleteParams::default()).await.unwrap();
    assert!(status.is_right(), "configmaps answer a Status");
    let mut seen = Vec::new();
    while seen.len() < 3 {
        match events.next().await.unwrap().unwrap() {
            WatchEvent::Deleted(o) => seen.push(format!("DELETED {}", o.metadata.name.unwrap())),
            WatchEvent::Modified(o) => seen.push(format!("MODIFIED {}", o.metadata.name.unwrap())),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(seen, ["DELETED a", "MODIFIED a-and-b", "DELETED only-a"]);
    assert!(exists(&cms, "only-a").await.is_none());
    let kept = exists(&cms, "a-and-b").await.unwrap();
    let refs = kept.metadata.owner_references.unwrap();
    assert_eq!(refs.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["b"]);
}

/// `TestCreateWithNonExistentOwner`: an object whose owner does not exist (or exists with
/// another uid) is garbage: the collector deletes it.
#[tokio::test]
async fn a_dependent_of_a_missing_owner_is_deleted() {
    let (_server, cms) = server(true).await;
    let mut ghost = owner(&cms, "ghost").await;
    cms.delete("ghost", &DeleteParams::default()).await.unwrap();
    dependent(&cms, "orphan-at-birth", &[(&ghost, false)], &[]).await;
    assert!(exists(&cms, "orphan-at-birth").await.is_none());
    // Same name, other uid: still not its owner.
    owner(&cms, "ghost").await;
    ghost.metadata.resource_version = None;
    dependent(&cms, "wrong-uid", &[(&ghost, false)], &[]).await;
    assert!(exists(&cms, "wrong-uid").await.is_none());
}

/// `TestOrphaning`: DELETE with `propagationPolicy: Orphan` stores the owner with a
/// `deletionTimestamp` and the `orphan` finalizer (kube-apiserver's
/// `deletionFinalizersForGarbageCollection`); the collector removes the owner reference from
/// every dependent, then the finalizer, and the owner is gone; the dependents stay.
#[tokio::test]
async fn orphan_propagation_keeps_dependents_without_the_reference() {
    let (_server, cms) = server(true).await;
    let o = owner(&cms, "owner").await;
    dependent(&cms, "d1", &[(&o, true)], &[]).await;
    dependent(&cms, "d2", &[(&o, false)], &[]).await;
    let marked = cms.delete("owner", &with(PropagationPolicy::Orphan)).await.unwrap().left().unwrap();
    assert_eq!(marked.metadata.finalizers, Some(vec!["orphan".to_string()]));
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert!(exists(&cms, "owner").await.is_none());
    for d in ["d1", "d2"] {
        let d = exists(&cms, d).await.expect("orphaned dependents stay");
        assert_eq!(d.metadata.owner_references, None);
    }
}

/// `TestBlockingOwnerRefDoesBlock` and `TestNonBlockingOwnerRefDoesNotBlock`: with
/// `propagationPolicy: Foreground` the owner keeps its `foregroundDeletion` finalizer while a
/// dependent with `blockOwnerDeletion: true` exists; every dependent is deleted (one that has a
/// finalizer of its own stays, marked, until it is removed); a non-blocking one does not hold
/// the owner.
#[tokio::test]
async fn foreground_deletion_waits_for_blocking_dependents() {
    let (_server, cms) = server(true).await;
    let o = owner(&cms, "owner").await;
    dependent(&cms, "blocking", &[(&o, true)], &["example.com/hold"]).await;
    dependent(&cms, "free", &[(&o, false)], &[]).await;
    let marked = cms.delete("owner", &with(PropagationPolicy::Foreground)).await.unwrap().left().unwrap();
    assert_eq!(marked.metadata.finalizers, Some(vec!["foregroundDeletion".to_string()]));
    assert!(exists(&cms, "free").await.is_none(), "every dependent is deleted");
    let blocking = exists(&cms, "blocking").await.expect("held by its own finalizer");
    assert!(blocking.metadata.deletion_timestamp.is_some());
    let waiting = exists(&cms, "owner").await.expect("the owner waits for its blocking dependent");
    assert_eq!(waiting.metadata.finalizers, Some(vec!["foregroundDeletion".to_string()]));

    drop_finalizers(&cms, "blocking").await;
    assert!(exists(&cms, "blocking").await.is_none());
    assert!(exists(&cms, "owner").await.is_none(), "the owner goes once nothing blocks it");

    // A dependent that does not block its owner does not hold it.
    let o = owner(&cms, "owner2").await;
    dependent(&cms, "slow", &[(&o, false)], &["example.com/hold"]).await;
    cms.delete("owner2", &with(PropagationPolicy::Foreground)).await.unwrap();
    assert!(exists(&cms, "owner2").await.is_none());
    assert!(exists(&cms, "slow").await.unwrap().metadata.deletion_timestamp.is_some());
}

/// `TestSolidOwnerDoesNotBlockWaitingOwner` (and the e2e "should not delete dependents that have
/// both valid owner and owner that's waiting for dependents to be deleted"): a dependent of an
/// owner deleted in the foreground that has another, solid owner is kept; the reference to the
/// waiting owner is removed, so that owner goes.
#[tokio::test]
async fn a_solid_owner_keeps_a_dependent_of_a_foreground_deletion() {
    let (_server, cms) = server(true).await;
    let waiting = owner(&cms, "waiting").await;
    let solid = owner(&cms, "solid").await;
    dependent(&cms, "shared", &[(&waiting, true), (&solid, true)], &[]).await;
    cms.delete("waiting", &with(PropagationPolicy::Foreground)).await.unwrap();
    assert!(exists(&cms, "waiting").await.is_none());
    let kept = exists(&cms, "shared").await.unwrap();
    let names: Vec<_> = kept.metadata.owner_references.unwrap().into_iter().map(|r| r.name).collect();
    assert_eq!(names, ["solid"]);
}

/// Foreground deletion cascades: a dependent that has dependents of its own is deleted in the
/// foreground too (`attemptToDeleteItem`'s waiting-owner case), so the root waits for the whole
/// tree.
#[tokio::test]
async fn foreground_deletion_cascades_through_a_tree() {
    let (_server, cms) = server(true).await;
    let root = owner(&cms, "root").await;
    let mid = dependent(&cms, "mid", &[(&root, true)], &[]).await;
    dependent(&cms, "leaf", &[(&mid, true)], &["example.com/hold"]).await;
    cms.delete("root", &with(PropagationPolicy::Foreground)).await.unwrap();
    let mid = exists(&cms, "mid").await.expect("mid waits for its leaf");
    assert_eq!(mid.metadata.finalizers, Some(vec!["foregroundDeletion".to_string()]));
    assert!(exists(&cms, "root").await.is_some(), "root waits for mid");
    drop_finalizers(&cms, "leaf").await;
    for name in ["leaf", "mid", "root"] {
        assert!(exists(&cms, name).await.is_none(), "{name} is gone");
    }
}

/// With the collector off (a cluster without kube-controller-manager, envtest's default) the
/// apiserver's half still happens: the finalizers are added and stay; dependents stay.
#[tokio::test]
async fn without_the_collector_only_the_apiserver_part_happens() {
    let (_server, cms) = server(false).await;
    let o = owner(&cms, "owner").await;
    dependent(&cms, "d", &[(&o, true)], &[]).await;
    cms.delete("owner", &with(PropagationPolicy::Foreground)).await.unwrap();
    let waiting = exists(&cms, "owner").await.expect("nobody removes foregroundDeletion");
    assert_eq!(waiting.metadata.finalizers, Some(vec!["foregroundDeletion".to_string()]));
    assert!(exists(&cms, "d").await.is_some());
    // Deleting again with Orphan swaps the finalizer (the deletion is pending, but its grace
    // period is zero, so `BeforeDelete` lets the finalizers change).
    let marked = cms.delete("owner", &with(PropagationPolicy::Orphan)).await.unwrap().left().unwrap();
    assert_eq!(marked.metadata.finalizers, Some(vec!["orphan".to_string()]));
    // Background deletion of another owner leaves its dependent too.
    let o2 = owner(&cms, "owner2").await;
    dependent(&cms, "d2", &[(&o2, false)], &[]).await;
    cms.delete("owner2", &DeleteParams::default()).await.unwrap();
    assert!(exists(&cms, "d2").await.is_some());
}

/// `DeleteResource` answers 202 Accepted only for a deletion that did not complete and
/// `orphanDependents: false`; invalid options are 422 (`ValidateDeleteOptions`).
#[tokio::test]
async fn delete_options_codes_and_validation() {
    let (server, cms) = server(false).await;
    owner(&cms, "o").await;
    let mut fin = cm("f", &[], "1");
    fin.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    cms.create(&PostParams::default(), &fin).await.unwrap();
    let delete = |name: &str, body: serde_json::Value| {
        http::Request::delete(format!("/api/v1/namespaces/default/configmaps/{name}"))
            .header("content-type", "application/json")
            .body(kube::client::Body::from(serde_json::to_vec(&body).unwrap()))
            .unwrap()
    };
    let resp = server.client().send(delete("f", json!({"orphanDependents": false}))).await.unwrap();
    assert_eq!(resp.status().as_u16(), 202);
    let resp = server
        .client()
        .send(delete("o", json!({"propagationPolicy": "Foreground", "orphanDependents": true})))
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 422);
    let body = http_body_util::BodyExt::collect(resp.into_body()).await.unwrap().to_bytes();
    let s: kube::core::Status = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        s.message,
        "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Invalid value: \"Foreground\": \
         orphanDependents and deletionPropagation cannot be both set"
    );
}

/// An update that removes the last finalizer of an object being deleted deletes it with one
/// DELETED event carrying the last stored state (registry `Update`'s `ShouldDeleteDuringUpdate`
/// then `deleteWithoutFinalizers`); this server wrote a MODIFIED event first.
#[tokio::test(start_paused = true)]
async fn emptying_the_finalizers_of_a_deleting_object_is_one_deleted_event() {
    let (_server, cms) = server(true).await;
    let mut c = cm("f", &[], "1");
    c.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    cms.create(&PostParams::default(), &c).await.unwrap();
    let marked = cms.delete("f", &DeleteParams::default()).await.unwrap().left().unwrap();
    let rv = marked.metadata.resource_version.clone().unwrap();
    let mut events =
        cms.watch(&WatchParams::default().disable_bookmarks().timeout(1), &rv).await.unwrap().boxed();
    drop_finalizers(&cms, "f").await;
    let mut seen = Vec::new();
    while let Some(ev) = events.next().await {
        match ev.unwrap() {
            WatchEvent::Deleted(o) => seen.push(("DELETED", o.metadata.finalizers)),
            WatchEvent::Modified(o) => seen.push(("MODIFIED", o.metadata.finalizers)),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(seen, [("DELETED", Some(vec!["example.com/hold".to_string()]))]);
}
