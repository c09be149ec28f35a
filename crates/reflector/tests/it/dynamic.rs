//! Custom resources through `DynamicObject`: the reflector keeps a store of an untyped resource in
//! step (watch-list and LIST + WATCH), exactly as for typed k8s-openapi resources.

use std::sync::Arc;
use std::time::Duration;

use kcache_reflector::{ApiListerWatcher, FakeClock, Reflector};
use kcache_store::{ReflectorStore, Store, StoreError, meta_namespace_key_func};
use kcache_testserver::{ResourceDef, TestServer};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

fn widget(name: &str, size: i64, ar: &ApiResource) -> DynamicObject {
    DynamicObject::new(name, ar).data(json!({ "spec": { "size": size } }))
}

/// A store that wakes the test after every write, so waits need no polling.
#[derive(Clone)]
struct Notifying {
    store: Store<DynamicObject>,
    changed: Arc<Notify>,
}

impl Notifying {
    fn after<T>(&self, r: T) -> T {
        self.changed.notify_waiters();
        r
    }

    async fn wait_for(&self, what: &str, cond: impl Fn(&Store<DynamicObject>) -> bool) {
        let fut = async {
            loop {
                let notified = self.changed.notified();
                if cond(&self.store) {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(Duration::from_secs(20), fut)
            .await
            .unwrap_or_else(|_| panic!("timed out: {what}"));
    }
}

impl ReflectorStore<DynamicObject> for Notifying {
    fn add(&self, obj: Arc<DynamicObject>) -> Result<(), StoreError> {
        self.after(self.store.add(obj))
    }
    fn update(&self, obj: Arc<DynamicObject>) -> Result<(), StoreError> {
        self.after(self.store.update(obj))
    }
    fn delete(&self, obj: Arc<DynamicObject>) -> Result<(), StoreError> {
        self.after(ReflectorStore::delete(&self.store, obj))
    }
    fn replace(&self, list: Vec<Arc<DynamicObject>>, rv: &str) -> Result<(), StoreError> {
        self.after(self.store.replace(list, rv))
    }
    fn resync(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

async fn syncs_dynamic_objects(watch_list: bool) {
    let server = TestServer::start().await;
    server.register(ResourceDef::new("example.com", "v1", "widgets", "Widget", true));
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget"));
    let api: Api<DynamicObject> = Api::namespaced_with(server.client(), "default", &ar);
    api.create(&PostParams::default(), &widget("w1", 1, &ar)).await.unwrap();

    let store =
        Notifying { store: Store::new(meta_namespace_key_func::<DynamicObject>()), changed: Arc::default() };
    let reflector = Reflector::new(ApiListerWatcher::new(api.clone()), store.clone())
        .use_watch_list(watch_list)
        .clock(FakeClock::new());
    let cancel = CancellationToken::new();
    let task = tokio::spawn(reflector.run(cancel.clone()));
    store.wait_for("w1", |s| s.get_by_key("default/w1").is_some()).await;
    api.create(&PostParams::default(), &widget("w2", 2, &ar)).await.unwrap();
    store.wait_for("w2", |s| s.len() == 2).await;
    let w2: Arc<DynamicObject> = store.store.get_by_key("default/w2").unwrap();
    assert_eq!(w2.data["spec"]["size"], 2);
    cancel.cancel();
    task.await.unwrap();
}

#[tokio::test]
async fn dynamic_objects_by_watch_list() {
    syncs_dynamic_objects(true).await;
}

#[tokio::test]
async fn dynamic_objects_by_list_and_watch() {
    syncs_dynamic_objects(false).await;
}

/// `ApiListerWatcher::expect_type`: a watch event whose object is of another kind (here a
/// ConfigMap on the widgets watch, as a broken proxy or server could send) is a `Decode` error and
/// a relist, so it never reaches the store; without the check a `DynamicObject` accepts any kind.
/// Mirrors the expected-GVK check of client-go's watchHandler for unstructured objects (which
/// skips the event instead).
async fn foreign_kind_on_the_watch(expect: bool) -> (Vec<String>, Vec<kcache_reflector::ErrorKind>) {
    use kcache_testserver::WatchFault;
    let server = TestServer::start().await;
    server.register(ResourceDef::new("example.com", "v1", "widgets", "Widget", true));
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget"));
    let api: Api<DynamicObject> = Api::namespaced_with(server.client(), "default", &ar);
    api.create(&PostParams::default(), &widget("w1", 1, &ar)).await.unwrap();
    let foreign = r#"{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"intruder","namespace":"default","resourceVersion":"2"}}}"#;
    server.faults().next_watch(WatchFault::RawFrame { after: 0, bytes: format!("{foreign}\n").into_bytes() });

    let store =
        Notifying { store: Store::new(meta_namespace_key_func::<DynamicObject>()), changed: Arc::default() };
    let errors = Arc::new(std::sync::Mutex::new(Vec::new()));
    let lw = if expect {
        ApiListerWatcher::new(api.clone()).expect_type(&ar.api_version, &ar.kind)
    } else {
        ApiListerWatcher::new(api.clone())
    };
    let errs = Arc::clone(&errors);
    let clock = FakeClock::new();
    let reflector = Reflector::new(lw, store.clone())
        .use_watch_list(false)
        .clock(clock.clone())
        .watch_error_handler(move |_, e| errs.lock().unwrap().push(e.kind()));
    let cancel = CancellationToken::new();
    let task = tokio::spawn(reflector.run(cancel.clone()));
    store.wait_for("w1", |s| s.get_by_key("default/w1").is_some()).await;
    if expect {
        // The rejected frame ends the watch; the relist waits out the first backoff step.
        let d = tokio::time::timeout(
            Duration::from_secs(20),
            clock.wait_for_sleep(|d| d < Duration::from_secs(2)),
        )
        .await
        .expect("a backoff after the rejected frame");
        clock.advance(d);
    }
    // A later real event arrives either on the same watch or after the relist.
    api.create(&PostParams::default(), &widget("w2", 2, &ar)).await.unwrap();
    store.wait_for("w2", |s| s.get_by_key("default/w2").is_some()).await;
    cancel.cancel();
    task.await.unwrap();
    let mut keys: Vec<String> = store.store.list_keys().iter().map(ToString::to_string).collect();
    keys.sort();
    let kinds = errors.lock().unwrap().clone();
    (keys, kinds)
}

#[tokio::test]
async fn expected_type_rejects_a_foreign_kind_and_relists() {
    let (keys, kinds) = foreign_kind_on_the_watch(true).await;
    assert_eq!(keys, ["default/w1", "default/w2"]);
    // The rejected frame ended the watch: logged and relisted, not passed to the watch error
    // handler (no stream ending is, in client-go).
    assert!(kinds.is_empty(), "{kinds:?}");
}

#[tokio::test]
async fn without_an_expected_type_a_dynamic_object_of_any_kind_is_stored() {
    // The hazard the check closes: the ConfigMap lands in the widgets cache.
    let (keys, kinds) = foreign_kind_on_the_watch(false).await;
    assert_eq!(keys, ["default/intruder", "default/w1", "default/w2"]);
    assert!(kinds.is_empty(), "{kinds:?}");
}
