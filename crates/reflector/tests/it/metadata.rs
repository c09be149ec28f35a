//! Metadata only: an `ApiListerWatcher` of kube's `PartialObjectMeta` lists and watches
//! `PartialObjectMetadata` (client-go's `metadata` client `List` and `Watch`, as its
//! `metadatainformer` uses them), through the same decoders: continue pages, watch events,
//! the watch-list's end bookmark, `managedFields` skipped or kept.

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
use kcache_reflector::{ApiListerWatcher, ListOptions, ListerWatcher, Reflector, WatchEvent, WatchOptions};
use kcache_store::{ReflectorStore, Store, StoreError};
use kcache_testserver::TestServer;
use kube::api::{Api, PostParams};
use kube::core::{PartialObjectMeta, TypeMeta};
use tokio_util::sync::CancellationToken;

use crate::common::cm;

type Meta = PartialObjectMeta<ConfigMap>;

fn partial_types() -> Option<TypeMeta> {
    Some(TypeMeta { api_version: "meta.k8s.io/v1".into(), kind: "PartialObjectMetadata".into() })
}

/// A server with ConfigMaps `a`..`e` in `default`, each with a managed-fields entry and data.
async fn server_with_five() -> TestServer {
    let server = TestServer::start().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    for name in ["a", "b", "c", "d", "e"] {
        let mut o = cm(name, "1");
        o.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
            manager: Some("creator".into()),
            operation: Some("Update".into()),
            fields_type: Some("FieldsV1".into()),
            fields_v1: Some(FieldsV1(serde_json::json!({"f:data": {"f:v": {}}}))),
            ..Default::default()
        }]);
        api.create(&PostParams::default(), &o).await.unwrap();
    }
    server
}

/// A store that says when a `replace` (the initial sync) went in.
#[derive(Clone)]
struct Replaced {
    store: Store<Meta>,
    replaced: std::sync::Arc<tokio::sync::Semaphore>,
}

impl ReflectorStore<Meta> for Replaced {
    fn add(&self, obj: std::sync::Arc<Meta>) -> Result<(), StoreError> {
        self.store.add(obj)
    }
    fn update(&self, obj: std::sync::Arc<Meta>) -> Result<(), StoreError> {
        self.store.update(obj)
    }
    fn delete(&self, obj: std::sync::Arc<Meta>) -> Result<(), StoreError> {
        self.store.delete(&obj).map(|_| ())
    }
    fn replace(&self, list: Vec<std::sync::Arc<Meta>>, resource_version: &str) -> Result<(), StoreError> {
        self.store.replace(list, resource_version)?;
        self.replaced.add_permits(1);
        Ok(())
    }
    fn resync(&self) -> Result<(), StoreError> {
        Ok(())
    }
    fn update_resource_version(&self, resource_version: &str) {
        self.store.update_resource_version(resource_version);
    }
}

fn names(items: &[std::sync::Arc<Meta>]) -> Vec<String> {
    items.iter().map(|o| o.metadata.name.clone().unwrap()).collect()
}

/// client-go's pager over the metadata client's `List` (`TestReflectorListAndWatch`'s pages,
/// `ListPager` with a limit): each page of a consistent list is a `PartialObjectMetadataList`
/// carrying a continue token, and its items are metadata only; a watch from the list's version
/// then sends `PartialObjectMetadata` events.
#[tokio::test]
async fn metadata_lists_page_through_continue_tokens() {
    let server = server_with_five().await;
    let lw = ApiListerWatcher::new(Api::<Meta>::namespaced(server.client(), "default"));
    assert!(lw.is_metadata_only());
    let mut opts = ListOptions {
        resource_version: String::new(),
        limit: Some(2),
        continue_token: None,
        shard_selector: None,
    };
    let mut pages = Vec::new();
    let mut list_rv = None;
    loop {
        let page = lw.list(opts.clone()).await.unwrap();
        assert!(page.items.iter().all(|o| o.types == partial_types()));
        assert!(page.items.iter().all(|o| o.metadata.managed_fields.is_none()), "stripped by default");
        list_rv.get_or_insert(page.resource_version.clone());
        pages.push(names(&page.items));
        match page.continue_token {
            Some(t) => opts.continue_token = Some(t),
            None => break,
        }
    }
    assert_eq!(pages, [vec!["a", "b"], vec!["c", "d"], vec!["e"]]);

    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    api.create(&PostParams::default(), &cm("f", "1")).await.unwrap();
    let watch =
        WatchOptions { resource_version: list_rv.unwrap(), timeout_seconds: 300, ..WatchOptions::default() };
    let mut events = lw.watch(watch).await.unwrap();
    match events.next().await {
        Some(Ok(WatchEvent::Added(o))) => {
            assert_eq!(o.metadata.name.as_deref(), Some("f"));
            assert_eq!(o.types, partial_types());
        }
        other => panic!("expected f added, got {other:?}"),
    }
}

/// client-go metadatainformer `TestWatchListSemanticsSimple`: a watch-list of metadata ends its
/// initial events with a `PartialObjectMetadata` bookmark carrying `k8s.io/initial-events-end`,
/// and the reflector syncs a store from it alone; `strip_managed_fields(false)` keeps the
/// managed fields the server sends in the metadata too.
#[tokio::test]
async fn a_metadata_watch_list_syncs_a_store() {
    for strip in [true, false] {
        let server = server_with_five().await;
        let lw = ApiListerWatcher::new(Api::<Meta>::namespaced(server.client(), "default"))
            .strip_managed_fields(strip);
        let store = Replaced {
            store: Store::for_resource(),
            replaced: std::sync::Arc::new(tokio::sync::Semaphore::new(0)),
        };
        let reflector = Reflector::new(lw, store.clone()).name("metadata");
        let cancel = CancellationToken::new();
        let task = tokio::spawn(reflector.run(cancel.clone()));
        let synced = store.replaced.acquire();
        tokio::time::timeout(std::time::Duration::from_secs(20), synced)
            .await
            .expect("synced")
            .unwrap()
            .forget();
        let mut cached = store.store.list();
        cached.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        assert_eq!(names(&cached), ["a", "b", "c", "d", "e"]);
        assert!(cached.iter().all(|o| o.types == partial_types()));
        assert!(
            cached.iter().all(|o| o.metadata.managed_fields.is_some() != strip),
            "strip_managed_fields({strip})"
        );
        let log = server.request_log();
        assert!(log.filter(|r| r.verb == kcache_testserver::Verb::List).is_empty(), "no LIST: watch-list");
        cancel.cancel();
        task.await.unwrap();
    }
}
