//! coordination.k8s.io/v1 Leases as kube-apiserver v1.36 serves them (kubernetes
//! `pkg/registry/coordination/lease`): namespaced CRUD and watch, optimistic concurrency on
//! `metadata.resourceVersion` with the generic registry's 409 and 422, create on update, the
//! spec's validation, and MicroTime fields kept as written.

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kcache_testserver::TestServer;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams, WatchEvent, WatchParams};
use serde_json::json;

use crate::common::status_of;

fn lease(name: &str, holder: &str) -> Lease {
    Lease {
        metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
        spec: Some(LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(15),
            lease_transitions: Some(0),
            ..Default::default()
        }),
    }
}

/// The generic registry's Create, Get, Update (PUT), List, Watch and Delete for leases, as
/// client-go's `LeaseLock` (resourcelock/leaselock.go) uses them: the MicroTime fields come back
/// exactly as written (RFC 3339 with microseconds) and every write bumps the resourceVersion.
#[tokio::test]
async fn leases_are_served_namespaced_with_create_get_update_list_watch_delete() {
    let server = TestServer::start().await;
    let leases: Api<Lease> = Api::namespaced(server.client(), "kube-system");
    let mut watch = leases.watch(&WatchParams::default().disable_bookmarks(), "0").await.unwrap().boxed();

    let mut l = lease("lock", "a");
    let renew: MicroTime = serde_json::from_value(json!("2026-12-07T10:11:12.123456Z")).unwrap();
    l.spec.as_mut().unwrap().renew_time = Some(renew.clone());
    let created = leases.create(&PostParams::default(), &l).await.unwrap();
    assert_eq!(created.metadata.namespace.as_deref(), Some("kube-system"));
    let raw = server.objects().get("coordination.k8s.io", "v1", "leases", "kube-system", "lock").unwrap();
    assert_eq!(raw["spec"]["renewTime"], "2026-12-07T10:11:12.123456Z", "stored as written");
    assert_eq!(
        (raw["apiVersion"].as_str(), raw["kind"].as_str()),
        (Some("coordination.k8s.io/v1"), Some("Lease"))
    );

    let mut got = leases.get("lock").await.unwrap();
    assert_eq!(got.spec.as_ref().unwrap().renew_time, Some(renew));
    got.spec.as_mut().unwrap().holder_identity = Some("b".into());
    let updated = leases.replace("lock", &PostParams::default(), &got).await.unwrap();
    assert_ne!(updated.metadata.resource_version, created.metadata.resource_version);
    assert_eq!(leases.list(&Default::default()).await.unwrap().items.len(), 1);
    let other_ns: Api<Lease> = Api::namespaced(server.client(), "default");
    assert!(other_ns.list(&Default::default()).await.unwrap().items.is_empty());

    let mut seen = Vec::new();
    while seen.len() < 2 {
        match watch.next().await.unwrap().unwrap() {
            WatchEvent::Added(l) | WatchEvent::Modified(l) => {
                seen.push(l.spec.unwrap().holder_identity.unwrap());
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(seen, ["a", "b"]);
    let deleted = leases.delete("lock", &DeleteParams::default()).await.unwrap();
    assert!(deleted.is_right(), "the built-in registry answers a Status");
    let s = status_of(leases.get("lock").await.unwrap_err());
    assert_eq!((s.code, s.message.as_str()), (404, "leases.coordination.k8s.io \"lock\" not found"));
}

/// An update carrying a resourceVersion that is no longer the stored one loses the race: the
/// storage layer's 409 with `OptimisticLockErrorMsg` (apiserver registry/generic/registry
/// store.go `Update`), what client-go's `tryAcquireOrRenew` gets when another candidate wrote
/// first.
#[tokio::test]
async fn a_stale_resource_version_is_a_409_conflict() {
    let server = TestServer::start().await;
    let leases: Api<Lease> = Api::default_namespaced(server.client());
    let first = leases.create(&PostParams::default(), &lease("lock", "a")).await.unwrap();
    let mut theirs = first.clone();
    theirs.spec.as_mut().unwrap().holder_identity = Some("b".into());
    leases.replace("lock", &PostParams::default(), &theirs).await.unwrap();

    let mut ours = first;
    ours.spec.as_mut().unwrap().holder_identity = Some("c".into());
    let s = status_of(leases.replace("lock", &PostParams::default(), &ours).await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        s.message,
        "Operation cannot be fulfilled on leases.coordination.k8s.io \"lock\": the object has been modified; \
         please apply your changes to the latest version and try again"
    );
    let details = s.details.unwrap();
    assert_eq!(
        (details.name.as_str(), details.group.as_str(), details.kind.as_str()),
        ("lock", "coordination.k8s.io", "leases")
    );
    assert_eq!(leases.get("lock").await.unwrap().spec.unwrap().holder_identity.as_deref(), Some("b"));
}

/// The lease strategy has `AllowUnconditionalUpdate() == false`: a PUT without a resourceVersion
/// is the generic registry's 422, which names the resource where a kind would be
/// (`schema.GroupKind{Group: qualifiedResource.Group, Kind: qualifiedResource.Resource}`).
#[tokio::test]
async fn an_update_without_resource_version_is_invalid() {
    let server = TestServer::start().await;
    let leases: Api<Lease> = Api::default_namespaced(server.client());
    leases.create(&PostParams::default(), &lease("lock", "a")).await.unwrap();
    let s = status_of(leases.replace("lock", &PostParams::default(), &lease("lock", "b")).await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        s.message,
        "leases.coordination.k8s.io \"lock\" is invalid: metadata.resourceVersion: Invalid value: 0: must be \
         specified for an update"
    );
}

/// `AllowCreateOnUpdate() == true` for leases: a PUT of a lease that does not exist (deleted
/// behind a leader's back, say) creates it and answers 201 (the generic registry's `Update` with
/// `ignoreNotFound`).
#[tokio::test]
async fn an_update_of_a_missing_lease_creates_it() {
    let server = TestServer::start().await;
    let leases: Api<Lease> = Api::default_namespaced(server.client());
    let mut gone = leases.create(&PostParams::default(), &lease("lock", "a")).await.unwrap();
    leases.delete("lock", &DeleteParams::default()).await.unwrap();
    gone.spec.as_mut().unwrap().holder_identity = Some("b".into());
    let recreated = leases.replace("lock", &PostParams::default(), &gone).await.unwrap();
    assert_eq!(recreated.spec.unwrap().holder_identity.as_deref(), Some("b"));
    assert_ne!(recreated.metadata.uid, gone.metadata.uid, "a new object");
    let puts = server.request_log().filter(|r| r.method == http::Method::PUT);
    assert_eq!(puts.iter().map(|r| r.status).collect::<Vec<_>>(), [201]);
}

/// `ValidateLeaseSpec` (kubernetes pkg/apis/coordination/validation): every field error in one
/// 422; and with the `CoordinatedLeaderElection` gate off (its default in v1.36), `strategy` and
/// `preferredHolder` are dropped on create (`PrepareForCreate`).
#[tokio::test]
async fn the_lease_spec_is_validated_like_kube_apiserver() {
    let server = TestServer::start().await;
    let leases: Api<Lease> = Api::default_namespaced(server.client());
    let mut bad = lease("lock", "a");
    bad.spec.as_mut().unwrap().lease_duration_seconds = Some(0);
    bad.spec.as_mut().unwrap().lease_transitions = Some(-1);
    let s = status_of(leases.create(&PostParams::default(), &bad).await.unwrap_err());
    assert_eq!(s.code, 422);
    assert_eq!(
        s.message,
        "Lease.coordination.k8s.io \"lock\" is invalid: [spec.leaseDurationSeconds: Invalid value: 0: must be \
         greater than 0, spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0]"
    );

    let mut coordinated = lease("lock", "a");
    coordinated.spec.as_mut().unwrap().strategy = Some("OldestEmulationVersion".into());
    coordinated.spec.as_mut().unwrap().preferred_holder = Some("b".into());
    let created = leases.create(&PostParams::default(), &coordinated).await.unwrap();
    let spec = created.spec.unwrap();
    assert_eq!((spec.strategy, spec.preferred_holder), (None, None), "cleared with the gate off");
}

/// With the `CoordinatedLeaderElection` gate on
/// ([`coordinated_leader_election`](kcache_testserver::Builder::coordinated_leader_election)),
/// `PrepareForCreate` and `PrepareForUpdate` keep `strategy` and `preferredHolder` (kubernetes
/// `pkg/registry/coordination/lease/strategy.go`, the gate's branch).
#[tokio::test]
async fn leases_keep_strategy_and_preferred_holder_with_the_gate_on() {
    let server = TestServer::builder().coordinated_leader_election(true).start().await;
    let leases: Api<Lease> = Api::default_namespaced(server.client());
    let mut coordinated = lease("lock", "a");
    coordinated.spec.as_mut().unwrap().strategy = Some("OldestEmulationVersion".into());
    let created = leases.create(&PostParams::default(), &coordinated).await.unwrap();
    assert_eq!(created.spec.as_ref().unwrap().strategy.as_deref(), Some("OldestEmulationVersion"));
    let mut marked = created.clone();
    marked.spec.as_mut().unwrap().preferred_holder = Some("b".into());
    let updated = leases.replace("lock", &PostParams::default(), &marked).await.unwrap();
    let mut unknown = updated.clone();
    unknown.spec.as_mut().unwrap().strategy = Some("Youngest".into());
    let s = status_of(leases.replace("lock", &PostParams::default(), &unknown).await.unwrap_err());
    assert_eq!(
        s.message,
        "Lease.coordination.k8s.io \"lock\" is invalid: spec.strategy.strategy: Unsupported value: \"Youngest\": \
         supported values: \"OldestEmulationVersion\""
    );
    let spec = updated.spec.unwrap();
    assert_eq!(
        (spec.strategy.as_deref(), spec.preferred_holder.as_deref()),
        (Some("OldestEmulationVersion"), Some("b")),
        "kept with the gate on"
    );
}

/// coordination.k8s.io/v1beta1 `leasecandidates` are served only with the gate on (kube-apiserver
/// needs `--runtime-config=coordination.k8s.io/v1beta1=true`), and validated as
/// `ValidateLeaseCandidateSpec` (pkg/apis/coordination/validation) validates them: leaseName,
/// binaryVersion and strategy required, versions semver, emulationVersion required by
/// `OldestEmulationVersion` and not above binaryVersion, leaseName immutable.
#[tokio::test]
async fn lease_candidates_are_served_with_the_gate_on_and_validated() {
    use k8s_openapi::api::coordination::v1beta1::LeaseCandidate;

    let off = TestServer::start().await;
    let candidates: Api<LeaseCandidate> = Api::default_namespaced(off.client());
    assert_eq!(status_of(candidates.list(&Default::default()).await.unwrap_err()).code, 404);

    let server = TestServer::builder().coordinated_leader_election(true).start().await;
    let candidates: Api<LeaseCandidate> = Api::default_namespaced(server.client());
    let candidate = |spec: serde_json::Value| -> LeaseCandidate {
        serde_json::from_value(json!({"metadata": {"name": "pod-a"}, "spec": spec})).unwrap()
    };
    let bad = candidate(
        json!({"leaseName": "", "binaryVersion": "1.30.0", "emulationVersion": "1.31.0", "strategy": "OldestEmulationVersion"}),
    );
    let s = status_of(candidates.create(&PostParams::default(), &bad).await.unwrap_err());
    assert_eq!(s.code, 422);
    assert_eq!(
        s.message,
        "LeaseCandidate.coordination.k8s.io \"pod-a\" is invalid: [spec.leaseName: Required value, \
         spec.binaryVersion: Invalid value: \"1.30.0\": must be greater than or equal to `emulationVersion`]"
    );
    let good = candidate(
        json!({"leaseName": "lock", "binaryVersion": "1.36.3", "emulationVersion": "1.36.0", "strategy": "OldestEmulationVersion"}),
    );
    let created = candidates.create(&PostParams::default(), &good).await.unwrap();
    let mut renamed = created.clone();
    renamed.spec.lease_name = "other".into();
    let s = status_of(candidates.replace("pod-a", &PostParams::default(), &renamed).await.unwrap_err());
    assert_eq!(s.code, 422);
    assert!(
        s.message.contains("spec.leaseName: Invalid value: \"other\": field is immutable"),
        "{}",
        s.message
    );
}
