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

/// A deliberate difference from client-go's `MetaNamespaceKeyFunc` (which keys a nameless object
/// `"prod/"`, or `""` when cluster-scoped, through `ObjectName.String`): Go cannot tell an empty
/// `metadata.name` from an absent one (`omitempty`), so an empty name is no name either, and a
/// key error (docs/testing.md says why).
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

fn owned(name: &str, labels: &[(&str, &str)], owners: &[(&str, bool)]) -> Arc<ConfigMap> {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    let owner = |(uid, controller): &(&str, bool)| OwnerReference {
        uid: (*uid).into(),
        controller: controller.then_some(true),
        ..Default::default()
    };
    Arc::new(ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            labels: Some(labels.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect()),
            owner_references: Some(owners.iter().map(owner).collect()),
            ..Default::default()
        },
        ..Default::default()
    })
}

/// The label index follows an object's label through updates and deletes, as an index
/// function over `ObjectMeta.Labels` does in client-go's `threadSafeMap.updateIndices`
/// (`TestThreadSafeStoreIndexingFunctionsWithMultipleValues` covers the store's side).
#[test]
fn label_index_follows_the_label() {
    use kcache_store::{Indexers, label_index_func, meta_namespace_key_func};
    let store = Store::with_indexers(
        meta_namespace_key_func::<ConfigMap>(),
        Indexers::from([("app".to_owned(), label_index_func::<ConfigMap>("app"))]),
    );
    store.add(owned("a", &[("app", "web")], &[])).unwrap();
    store.add(owned("b", &[("app", "web"), ("tier", "x")], &[])).unwrap();
    store.add(owned("c", &[("tier", "x")], &[])).unwrap();
    assert_eq!(store.index_keys("app", "web").unwrap(), ["ns/a".into(), "ns/b".into()] as [Arc<str>; 2]);
    assert_eq!(store.list_index_func_values("app"), ["web"]);
    store.update(owned("b", &[("app", "db")], &[])).unwrap();
    assert_eq!(store.index_keys("app", "web").unwrap(), [Arc::<str>::from("ns/a")]);
    assert_eq!(store.index_keys("app", "db").unwrap(), [Arc::<str>::from("ns/b")]);
    store.delete(&owned("a", &[], &[])).unwrap();
    assert!(store.index_keys("app", "web").unwrap().is_empty());
}

/// The owner index files an object under every owner's uid; the controller index under its
/// controller's only (apimachinery's `GetControllerOf`, which kube-controller-manager's
/// `controllerUIDIndex` uses).
#[test]
fn owner_and_controller_indexes() {
    use kcache_store::{
        CONTROLLER_UID_INDEX, Indexers, OWNER_UID_INDEX, controller_uid_index_func, meta_namespace_key_func,
        owner_uid_index_func,
    };
    let store = Store::with_indexers(
        meta_namespace_key_func::<ConfigMap>(),
        Indexers::from([
            (OWNER_UID_INDEX.to_owned(), owner_uid_index_func::<ConfigMap>()),
            (CONTROLLER_UID_INDEX.to_owned(), controller_uid_index_func::<ConfigMap>()),
        ]),
    );
    store.add(owned("a", &[], &[("u1", true), ("u2", false)])).unwrap();
    store.add(owned("b", &[], &[("u2", false)])).unwrap();
    store.add(owned("c", &[], &[])).unwrap();
    let keys = |index: &str, v: &str| store.index_keys(index, v).unwrap();
    assert_eq!(keys(OWNER_UID_INDEX, "u1"), [Arc::<str>::from("ns/a")]);
    assert_eq!(keys(OWNER_UID_INDEX, "u2"), ["ns/a".into(), "ns/b".into()] as [Arc<str>; 2]);
    assert_eq!(keys(CONTROLLER_UID_INDEX, "u1"), [Arc::<str>::from("ns/a")]);
    assert!(keys(CONTROLLER_UID_INDEX, "u2").is_empty());
    // Losing its controller takes an object out of the controller index.
    store.update(owned("a", &[], &[("u1", false)])).unwrap();
    assert!(keys(CONTROLLER_UID_INDEX, "u1").is_empty());
    assert_eq!(keys(OWNER_UID_INDEX, "u1"), [Arc::<str>::from("ns/a")]);
}

/// The store's `ReflectorStore::replace_keyed` (what a reflector's watch-list calls at its end
/// bookmark) files the objects under the keys given when the key function is its own, and
/// computes every key again under any other. `meta_namespace_key_func` hands out one `Arc` per
/// type, so a reflector and a store made apart share it. Mirrors the `Replace` of client-go
/// reflector.go `watchList` (`r.store.Replace(temporaryStore.List(), ..)`), whose store keys
/// every object again; kcache only skips computing the same keys twice.
#[test]
fn replace_keyed_uses_the_keys_under_its_own_key_function() {
    use kcache_store::{ReflectorStore, key_func, meta_namespace_key_func};
    use std::sync::atomic::{AtomicUsize, Ordering};

    assert!(Arc::ptr_eq(&meta_namespace_key_func::<ConfigMap>(), &meta_namespace_key_func::<ConfigMap>()));
    let store = Store::new(meta_namespace_key_func::<ConfigMap>());
    store.add(cm("old", "gone")).unwrap();
    // Keys that are not the objects' own show which were used (never do this outside a test).
    let list = || vec![(Arc::from("given/a"), cm("ns", "a")), (Arc::from("given/b"), cm("ns", "b"))];
    ReflectorStore::replace_keyed(&store, list(), &meta_namespace_key_func::<ConfigMap>(), "7").unwrap();
    let mut keys = store.list_keys();
    keys.sort();
    assert_eq!(keys, [Arc::from("given/a"), Arc::from("given/b")]);
    assert_eq!(store.last_sync_resource_version(), "7");

    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let other = key_func(move |o: &ConfigMap| {
        counted.fetch_add(1, Ordering::SeqCst);
        resource_key(o)
    });
    ReflectorStore::replace_keyed(&store, list(), &other, "8").unwrap();
    let mut keys = store.list_keys();
    keys.sort();
    assert_eq!(keys, [Arc::from("ns/a"), Arc::from("ns/b")], "another key function: the keys are computed");
    assert_eq!(calls.load(Ordering::SeqCst), 0, "by the store's own key function");
}

/// `meta_namespace_index_func` hands out one `Arc` per type, which a store recognises to build
/// the namespace index of a relist without calling it per object: the index it builds is
/// client-go's `MetaNamespaceIndexFunc` index (`index.go`), cluster-scoped objects under `""`,
/// after a replace, after later adds and deletes, and after another replace.
#[test]
fn namespace_index_built_in_place_by_replace() {
    use k8s_openapi::api::core::v1::Namespace;
    assert!(Arc::ptr_eq(
        &meta_namespace_index_func::<ConfigMap>(),
        &meta_namespace_index_func::<ConfigMap>()
    ));
    let store = Store::<ConfigMap>::for_resource();
    store.replace(vec![cm("a", "1"), cm("a", "2"), cm("b", "1"), cm("", "c")], "1").unwrap();
    let names = |ns: &str| {
        let mut v: Vec<_> = store
            .by_index(NAMESPACE_INDEX, ns)
            .unwrap()
            .iter()
            .map(|o| o.metadata.name.clone().unwrap_or_default())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names("a"), ["1", "2"]);
    assert_eq!(names("b"), ["1"]);
    assert_eq!(names(""), ["c"]);
    store.add(cm("b", "2")).unwrap();
    store.delete(&cm("a", "1")).unwrap();
    assert_eq!(names("a"), ["2"]);
    assert_eq!(names("b"), ["1", "2"]);
    store.replace(vec![cm("c", "1")], "2").unwrap();
    assert!(names("a").is_empty() && names("b").is_empty());
    assert_eq!(names("c"), ["1"]);
    let mut values = store.list_index_func_values(NAMESPACE_INDEX);
    values.sort();
    assert_eq!(values, ["c"]);

    let ns_store = Store::<Namespace>::for_resource();
    let ns = Namespace {
        metadata: ObjectMeta { name: Some("prod".into()), ..Default::default() },
        ..Default::default()
    };
    ns_store.replace(vec![Arc::new(ns)], "1").unwrap();
    assert_eq!(ns_store.by_index(NAMESPACE_INDEX, "").unwrap().len(), 1);
}
