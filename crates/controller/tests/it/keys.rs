//! keys tests.

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kcache_controller::{
    AsyncHandler, Context, Controller, ControllerError, ControllerHealth, HealthCheck, Notification,
    ObjectKey, Retry, Watch,
};

fn send_sync<T: Send + Sync>() {}

/// Every public type can cross threads (tokio's `async_send_sync.rs`).
#[test]
fn public_types_are_send_and_sync() {
    send_sync::<ObjectKey<ConfigMap>>();
    send_sync::<Context<kube::Client>>();
    send_sync::<Controller<ConfigMap>>();
    send_sync::<Watch>();
    send_sync::<Retry>();
    send_sync::<ControllerError>();
    send_sync::<HealthCheck>();
    send_sync::<ControllerHealth>();
    send_sync::<Notification<ConfigMap>>();
    send_sync::<AsyncHandler<ConfigMap, fn(Notification<ConfigMap>) -> std::future::Ready<()>>>();
}

/// A key of a cluster-scoped kind has no namespace, and `Some("")` means none (client-go's
/// `NamespaceAll` and `MetaNamespaceKeyFunc`).
#[test]
fn keys_of_cluster_scoped_objects_have_no_namespace() {
    let ns = ObjectKey::<Namespace>::new(Some(""), "kube-system");
    assert_eq!((ns.namespace(), ns.name(), ns.as_str()), (None, "kube-system", "kube-system"));
    assert_eq!(ObjectKey::<Namespace>::from_cache_key("kube-system"), ns);
}

/// Keys compare, hash and sort by `namespace/name`, whatever their kind; `cast` keeps both
/// (controller-runtime's `types.NamespacedName` as a workqueue item; kube-runtime's `ObjectRef`
/// equality without its dynamic type).
#[test]
fn keys_compare_by_namespace_and_name() {
    let a = ObjectKey::<ConfigMap>::new(Some("ns"), "a");
    let b = ObjectKey::<ConfigMap>::from_cache_key("ns/b");
    assert!(a < b);
    assert_eq!(a.cast::<Secret>().cast::<ConfigMap>(), a);
    let set: std::collections::HashSet<_> = [a.clone(), a.clone(), b].into_iter().collect();
    assert_eq!(set.len(), 2);
    assert_eq!(format!("{a:?}"), r#"ObjectKey<ConfigMap>("ns/a")"#);
}
