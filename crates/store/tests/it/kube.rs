//! The `kube` feature: key and namespace-index functions on real k8s-openapi types, as
//! client-go's `MetaNamespaceKeyFunc` and `MetaNamespaceIndexFunc` (`tools/cache/store.go`,
//! `index.go`).
#![cfg(feature = "kube")]

use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kcache_store::{KeyError, NAMESPACE_INDEX, Store, StoreError, meta_namespace_index_func, resource_key};

fn cm(ns: &str, name: &str) -> Arc<ConfigMap> {
    Arc::new(ConfigMap {
        metadata: ObjectMeta { name: Some(name.into()), namespace: Some(ns.into()), ..Default::default() },
        ..Default::default()
    })
}

/// Mirrors `TestMetaNamespaceKeyFunc`-style cases: namespaced, cluster-scoped, and nameless.
#[test]
fn resource_keys() {
    assert_eq!(resource_key(&*cm("prod", "cfg")).unwrap(), "prod/cfg");
    let ns = Namespace {
        metadata: ObjectMeta { name: Some("prod".into()), ..Default::default() },
        ..Default::default()
    };
    assert_eq!(resource_key(&ns).unwrap(), "prod");
    assert!(matches!(resource_key(&ConfigMap::default()), Err(KeyError::MissingName)));
}

/// The namespace index returns `""` for cluster-scoped objects, like `MetaNamespaceIndexFunc`.
#[test]
fn namespace_index_func() {
    let f = meta_namespace_index_func::<Namespace>();
    assert_eq!(f(&Namespace::default()).unwrap(), [""]);
}

/// `Store::for_resource` is client-go's default informer indexer.
#[test]
fn for_resource_store() {
    let store = Store::<ConfigMap>::for_resource();
    store.add(cm("a", "1")).unwrap();
    store.add(cm("a", "2")).unwrap();
    store.add(cm("b", "1")).unwrap();
    assert_eq!(store.by_index(NAMESPACE_INDEX, "a").unwrap().len(), 2);
    assert!(store.get_by_key("b/1").is_some());
    assert!(matches!(store.add(Arc::new(ConfigMap::default())), Err(StoreError::Key(_))));
}

/// Mirrors the nameless case of `TestMetaNamespaceKeyFunc`-style checks: Go cannot tell an empty
/// `metadata.name` from an absent one (`omitempty`), so an empty name is no name either, and a
/// key error rather than the key `""` (cluster-scoped) or `"prod/"`.
#[test]
fn empty_name_is_a_key_error() {
    let mut nameless = cm("prod", "");
    assert!(matches!(resource_key(&*nameless), Err(KeyError::MissingName)));
    Arc::make_mut(&mut nameless).metadata.namespace = None;
    assert!(matches!(resource_key(&*nameless), Err(KeyError::MissingName)));
    let ns = Namespace {
        metadata: ObjectMeta { name: Some(String::new()), ..Default::default() },
        ..Default::default()
    };
    assert!(matches!(resource_key(&ns), Err(KeyError::MissingName)));
    let store = Store::<ConfigMap>::for_resource();
    assert!(matches!(store.add(cm("prod", "")), Err(StoreError::Key(KeyError::MissingName))));
    assert!(store.is_empty());
}
