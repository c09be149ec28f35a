//! Reflector scenarios (issue 6) against `kcache-bench serve`, mirroring
//! `xtask/bench-go/reflector.go`: a reflector writing into a plain store, no informer, no
//! handlers. kube-runtime's counterpart of a reflector is `watcher` + `reflector` store, which is
//! also what its informer scenarios measure.

use std::sync::{Arc, Mutex};
use std::time::Duration;

#[cfg(feature = "kube-runtime")]
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_reflector::{ApiListerWatcher, Reflector};
use kcache_store::{KeyFunc, ReflectorStore, Store, StoreError, meta_namespace_key_func};
use kube::Api;
#[cfg(feature = "kube-runtime")]
use kube_runtime::{reflector, watcher};
use serde_json::json;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::Outcome;
use super::informer::kcache_client;
#[cfg(feature = "kube-runtime")]
use super::informer::kube_runtime_watcher;
use crate::measure::Timer;

type Once = Mutex<Option<oneshot::Sender<()>>>;

fn fire(signal: &Once) {
    let tx = signal.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
    if let Some(tx) = tx {
        let _ = tx.send(());
    }
}

fn once() -> (Once, oneshot::Receiver<()>) {
    let (tx, rx) = oneshot::channel();
    (Mutex::new(Some(tx)), rx)
}

/// A kcache `Store` (keyed namespace/name, no indexers: client-go's `cache.NewStore(
/// MetaNamespaceKeyFunc)`) that signals its first `replace` (the initial sync), its first update
/// and the add of `bench/sentinel`.
pub(super) struct SignallingStore {
    inner: Store<ConfigMap>,
    replaced: Once,
    first_update: Once,
    sentinel: Once,
}

impl ReflectorStore<ConfigMap> for SignallingStore {
    fn add(&self, obj: Arc<ConfigMap>) -> Result<(), StoreError> {
        let is_sentinel = obj.metadata.name.as_deref() == Some("sentinel");
        ReflectorStore::add(&self.inner, obj)?;
        if is_sentinel {
            fire(&self.sentinel);
        }
        Ok(())
    }
    fn update(&self, obj: Arc<ConfigMap>) -> Result<(), StoreError> {
        fire(&self.first_update);
        ReflectorStore::update(&self.inner, obj)
    }
    fn delete(&self, obj: Arc<ConfigMap>) -> Result<(), StoreError> {
        ReflectorStore::delete(&self.inner, obj)
    }
    fn replace(&self, list: Vec<Arc<ConfigMap>>, resource_version: &str) -> Result<(), StoreError> {
        let has_sentinel = list.iter().any(|o| o.metadata.name.as_deref() == Some("sentinel"));
        ReflectorStore::replace(&self.inner, list, resource_version)?;
        fire(&self.replaced);
        if has_sentinel {
            fire(&self.sentinel);
        }
        Ok(())
    }
    fn replace_keyed(
        &self,
        list: Vec<(Arc<str>, Arc<ConfigMap>)>,
        key_func: &KeyFunc<ConfigMap>,
        resource_version: &str,
    ) -> Result<(), StoreError> {
        let has_sentinel = list.iter().any(|(_, o)| o.metadata.name.as_deref() == Some("sentinel"));
        ReflectorStore::replace_keyed(&self.inner, list, key_func, resource_version)?;
        fire(&self.replaced);
        if has_sentinel {
            fire(&self.sentinel);
        }
        Ok(())
    }
    fn resync(&self) -> Result<(), StoreError> {
        ReflectorStore::resync(&self.inner)
    }
}

impl SignallingStore {
    /// Objects in the store.
    pub(super) fn len(&self) -> usize {
        self.inner.len()
    }
}

pub(super) fn signalling_store() -> (Arc<SignallingStore>, [oneshot::Receiver<()>; 3]) {
    let (replaced, r1) = once();
    let (first_update, r2) = once();
    let (sentinel, r3) = once();
    let store = SignallingStore {
        inner: Store::new(meta_namespace_key_func::<ConfigMap>()),
        replaced,
        first_update,
        sentinel,
    };
    (Arc::new(store), [r1, r2, r3])
}

/// reflector_synced_*_50k on kcache: timed: `Reflector::new(ApiListerWatcher::new(Api::<ConfigMap>
/// ::all), store)` (managed fields as `cargo xtask bench --managed-fields` asks, see
/// `informer::kcache_lister_watcher`) with `use_watch_list` false (a list, then a watch) or true (one watch with
/// sendInitialEvents), spawned on a Tokio task until the store's first `replace` returns (the
/// initial sync; no polling). ops = objects in the store (N loaded into the server).
fn kcache_synced(t: &mut Timer, watch_list: bool) -> Outcome {
    let (rt, client) = kcache_client();
    let items = rt.block_on(async {
        let api: Api<ConfigMap> = Api::all(client);
        let cancel = CancellationToken::new();
        t.start();
        let (store, [replaced, _, _]) = signalling_store();
        let lw = super::informer::kcache_lister_watcher(api);
        let reflector = Reflector::new(lw, store.clone()).use_watch_list(watch_list);
        let task = tokio::spawn(reflector.run(cancel.clone()));
        let synced = tokio::time::timeout(Duration::from_secs(60), replaced).await;
        t.stop();
        cancel.cancel();
        let _ = task.await;
        match synced {
            Ok(Ok(())) => store.inner.len(),
            _ => panic!("reflector not synced within 60 s"),
        }
    });
    Outcome {
        ops: items as u64,
        extra: json!({"items": items, "watch_list": watch_list}).as_object().cloned().unwrap_or_default(),
    }
}

/// reflector_synced_list_50k on kcache.
pub(super) fn kcache_synced_list(_n: usize, t: &mut Timer) -> Outcome {
    kcache_synced(t, false)
}

/// reflector_synced_watchlist_50k on kcache.
pub(super) fn kcache_synced_watchlist(_n: usize, t: &mut Timer) -> Outcome {
    kcache_synced(t, true)
}

/// reflector_event_throughput on kcache: against a fresh `kcache-bench serve --mutate --updates N`
/// (10k ConfigMaps; once watched, N updates written as fast as the server takes them, then
/// `bench/sentinel`). The reflector with its defaults (watch-list; protobuf on the side
/// `kcache-protobuf`) into the store above. Timed:
/// from the store's first update until the sentinel is added. ops = N updates.
pub(super) fn kcache_event_throughput(n: usize, t: &mut Timer) -> Outcome {
    let (rt, client) = kcache_client();
    let items = rt.block_on(async {
        let api: Api<ConfigMap> = Api::all(client);
        let cancel = CancellationToken::new();
        let (store, [_, first_update, sentinel]) = signalling_store();
        let lw = ApiListerWatcher::new(api).protobuf(super::informer::protobuf());
        let reflector = Reflector::new(lw, store.clone());
        let task = tokio::spawn(reflector.run(cancel.clone()));
        if tokio::time::timeout(Duration::from_secs(60), first_update).await.is_err() {
            panic!("no update within 60 s");
        }
        t.start();
        let seen = tokio::time::timeout(Duration::from_secs(120), sentinel).await;
        t.stop();
        cancel.cancel();
        let _ = task.await;
        match seen {
            Ok(Ok(())) => store.inner.len(),
            _ => panic!("the sentinel did not arrive within 120 s"),
        }
    });
    Outcome { ops: n as u64, extra: json!({"items": items}).as_object().cloned().unwrap_or_default() }
}

/// reflector_event_throughput on kube-runtime: `reflector(store writer, watcher(Api::<ConfigMap>
/// ::all, watcher::Config::default()).default_backoff())` on a Tokio task; timed from the first `Apply` event after
/// the initial list until the sentinel's `Apply` has been applied to the store. ops = N updates.
#[cfg(feature = "kube-runtime")]
pub(super) fn kube_runtime_event_throughput(n: usize, t: &mut Timer) -> Outcome {
    let (rt, client) = kcache_client();
    let items = rt.block_on(async {
        let api: Api<ConfigMap> = Api::all(client);
        let (reader, writer) = reflector::store();
        let (first_tx, first_rx) = once();
        let (sentinel_tx, sentinel_rx) = once();
        let stream = reflector(writer, kube_runtime_watcher(api, watcher::Config::default()));
        let task = tokio::spawn(stream.for_each(move |ev| {
            match &ev {
                Ok(watcher::Event::Apply(cm)) if cm.metadata.name.as_deref() == Some("sentinel") => {
                    fire(&sentinel_tx);
                }
                // After a relist the sentinel comes in the new initial list.
                Ok(watcher::Event::InitApply(cm)) if cm.metadata.name.as_deref() == Some("sentinel") => {
                    fire(&sentinel_tx);
                }
                Ok(watcher::Event::Apply(_)) => fire(&first_tx),
                _ => {}
            }
            async {}
        }));
        if tokio::time::timeout(Duration::from_secs(60), first_rx).await.is_err() {
            panic!("no update within 60 s");
        }
        t.start();
        let seen = tokio::time::timeout(Duration::from_secs(120), sentinel_rx).await;
        t.stop();
        task.abort();
        match seen {
            Ok(Ok(())) => reader.state().len(),
            _ => panic!("the sentinel did not arrive within 120 s"),
        }
    });
    Outcome { ops: n as u64, extra: json!({"items": items}).as_object().cloned().unwrap_or_default() }
}
