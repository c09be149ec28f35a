//! `ApiListerWatcher::strip_managed_fields`, on by default: objects reach the store without
//! `metadata.managedFields`, by LIST, by watch-list and by live watch events, and nothing else of
//! them changes (Go users get the same cache from an informer transform, as kube-controller-manager
//! installs and controller-runtime's `TransformStripManagedFields` is); with `false` they keep them.

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
use kcache_reflector::ApiListerWatcher;
use kcache_testserver::TestServer;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::common::{Harness, Op, cm};

/// A ConfigMap carrying a managed-fields entry, as kube-apiserver would record for `manager`.
fn with_managed_fields(name: &str, value: &str, manager: &str) -> ConfigMap {
    let mut o = cm(name, value);
    o.metadata.labels = Some([("app".to_string(), "web".to_string())].into());
    o.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
        manager: Some(manager.into()),
        operation: Some("Update".into()),
        api_version: Some("v1".into()),
        fields_type: Some("FieldsV1".into()),
        fields_v1: Some(FieldsV1(
            json!({"f:data": {".": {}, "f:v": {}}, "f:metadata": {"f:labels": {"f:app": {}}}}),
        )),
        ..Default::default()
    }]);
    o
}

async fn create(api: &Api<ConfigMap>, name: &str, value: &str) {
    api.create(&PostParams::default(), &with_managed_fields(name, value, "creator")).await.expect("create");
}

/// Runs a reflector (watch-list or LIST + WATCH) over two objects created with managed fields,
/// then a live update of one; returns every stored object at the end. `strip` is passed to
/// `strip_managed_fields`, `None` leaves the lister-watcher's default.
async fn run(watch_list: bool, strip: Option<bool>) -> Vec<ConfigMap> {
    let server = TestServer::start().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    create(&api, "a", "1").await;
    create(&api, "b", "1").await;
    let lw = ApiListerWatcher::new(api.clone());
    let lw = match strip {
        Some(strip) => lw.strip_managed_fields(strip),
        None => lw,
    };
    let h = Harness::start_with(server, lw, |r| r.use_watch_list(watch_list));
    h.store.wait_until("initial sync", |s| s.ops().iter().any(|o| matches!(o, Op::Replace(..)))).await;

    let mut b = h.api.get("b").await.expect("get");
    b.data = Some([("v".to_string(), "2".to_string())].into());
    h.api.replace("b", &PostParams::default(), &b).await.expect("replace");
    h.store.wait_until("live update of b", |s| s.values().get("b").map(String::as_str) == Some("2")).await;

    let mut objects: Vec<ConfigMap> = h.store.store.list().iter().map(|o| (**o).clone()).collect();
    objects.sort_by(|x, y| x.metadata.name.cmp(&y.metadata.name));
    h.stop().await;
    objects
}

async fn strips_everywhere(watch_list: bool) {
    let kept = run(watch_list, Some(false)).await;
    // The server does send them: with `strip_managed_fields(false)` every object keeps its entry.
    assert!(
        kept.iter().all(|o| o.metadata.managed_fields.as_ref().is_some_and(|m| m.len() == 1)),
        "{kept:?}"
    );

    // Stripping is the default.
    let stripped = run(watch_list, None).await;
    assert_eq!(stripped.len(), 2);
    for (s, k) in stripped.iter().zip(&kept) {
        assert_eq!(s.metadata.managed_fields, None, "{:?}", s.metadata.name);
        let mut k = k.clone();
        k.metadata.managed_fields = None;
        // Everything else is what a full decode gives (resource versions differ between runs).
        assert_eq!(s.data, k.data);
        assert_eq!(s.metadata.labels, k.metadata.labels);
        assert_eq!(s.metadata.name, k.metadata.name);
        assert_eq!(s.metadata.namespace, k.metadata.namespace);
        assert!(s.metadata.resource_version.is_some());
    }
}

/// Initial list by LIST (one page), then the live watch.
#[tokio::test]
async fn list_and_watch_events_arrive_without_managed_fields() {
    strips_everywhere(false).await;
}

/// Initial list by watch-list (ADDED events into the temporary store), then the same stream.
#[tokio::test]
async fn watch_list_events_arrive_without_managed_fields() {
    strips_everywhere(true).await;
}
