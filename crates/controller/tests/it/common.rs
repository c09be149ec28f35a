//! Helpers shared by the controller tests: objects, an observer that waits (without sleeping)
//! for what a controller wrote, and a running controller's handle.

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kcache_informer::{EventHandlerFuncs, Lister, SharedIndexInformer, wait_for_cache_sync};
use kube::Resource;
use kube::api::{Api, ObjectMeta, PostParams};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// How long any wait may take before the test fails (never reached when things work).
pub const TIMEOUT: Duration = Duration::from_secs(20);

/// A ConfigMap in `default` with `labels` and `data`.
pub fn cm(name: &str, labels: &[(&str, &str)], data: &[(&str, &str)]) -> ConfigMap {
    let map = |kv: &[(&str, &str)]| {
        kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>()
    };
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            labels: (!labels.is_empty()).then(|| map(labels)),
            ..Default::default()
        },
        data: Some(map(data)),
        ..Default::default()
    }
}

pub async fn create<K>(api: &Api<K>, obj: &K) -> K
where
    K: Resource + Clone + DeserializeOwned + serde::Serialize + Debug,
{
    api.create(&PostParams::default(), obj).await.expect("create")
}

/// Watches `K` in namespace `default` through a kcache informer of its own, so a test can wait
/// for a condition on the server's state without sleeping.
pub struct Observer<K> {
    pub informer: SharedIndexInformer<K>,
    changed: Arc<Notify>,
    cancel: CancellationToken,
}

impl<K> Observer<K>
where
    K: Resource + DeserializeOwned + Clone + Debug + Send + Sync + 'static,
{
    pub async fn start(api: Api<K>) -> Self {
        let informer = SharedIndexInformer::from_api(api, Duration::ZERO);
        let changed = Arc::new(Notify::new());
        let (a, u, d) = (Arc::clone(&changed), Arc::clone(&changed), Arc::clone(&changed));
        informer
            .add_event_handler(
                EventHandlerFuncs::new()
                    .on_add(move |_: &Arc<K>, _| a.notify_waiters())
                    .on_update(move |_, _| u.notify_waiters())
                    .on_delete(move |_| d.notify_waiters()),
            )
            .unwrap();
        let cancel = CancellationToken::new();
        tokio::spawn({
            let (informer, cancel) = (informer.clone(), cancel.clone());
            async move { informer.run(cancel).await }
        });
        let synced = tokio::time::timeout(TIMEOUT, wait_for_cache_sync(&cancel, &[&informer])).await;
        assert!(matches!(synced, Ok(true)), "the observer's informer syncs");
        Self { informer, changed, cancel }
    }

    pub fn lister(&self) -> Lister<K> {
        self.informer.lister()
    }

    pub fn get(&self, name: &str) -> Option<Arc<K>> {
        self.informer.lister().get(&format!("default/{name}"))
    }

    /// Waits until `cond` holds on the observed objects; fails the test after [`TIMEOUT`].
    pub async fn wait_for(&self, what: &str, cond: impl Fn(&Lister<K>) -> bool) {
        let lister = self.lister();
        let wait = async {
            loop {
                let notified = self.changed.notified();
                if cond(&lister) {
                    return;
                }
                notified.await;
            }
        };
        if tokio::time::timeout(TIMEOUT, wait).await.is_err() {
            let names: Vec<_> =
                lister.list().iter().map(|o| o.meta().name.clone().unwrap_or_default()).collect();
            panic!("timed out waiting for: {what}; objects: {names:?}");
        }
    }
}

impl<K> Drop for Observer<K> {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// A controller running on its own task.
pub struct Running {
    pub cancel: CancellationToken,
    task: tokio::task::JoinHandle<kcache_controller::Result<()>>,
}

impl Running {
    pub fn spawn<F>(run: impl FnOnce(CancellationToken) -> F) -> Self
    where
        F: std::future::Future<Output = kcache_controller::Result<()>> + Send + 'static,
    {
        let cancel = CancellationToken::new();
        let task = tokio::spawn(run(cancel.clone()));
        Self { cancel, task }
    }

    /// Cancels the controller and returns what `run` returned.
    pub async fn stop(self) -> kcache_controller::Result<()> {
        self.cancel.cancel();
        self.join().await
    }

    /// Waits for `run` to return by itself.
    pub async fn join(self) -> kcache_controller::Result<()> {
        tokio::time::timeout(TIMEOUT, self.task).await.expect("the controller stops").expect("no panic")
    }
}

/// A `Notify` turned into a counter a test can wait on.
#[derive(Clone, Default)]
pub struct Signal {
    notify: Arc<Notify>,
    events: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Signal {
    pub fn record(&self, event: impl Into<String>) {
        self.events.lock().unwrap().push(event.into());
        self.notify.notify_waiters();
    }

    pub fn events(&self) -> Vec<String> {
        self.events.lock().unwrap().clone()
    }

    pub async fn wait_for(&self, what: &str, cond: impl Fn(&[String]) -> bool) {
        let wait = async {
            loop {
                let notified = self.notify.notified();
                if cond(&self.events()) {
                    return;
                }
                notified.await;
            }
        };
        if tokio::time::timeout(TIMEOUT, wait).await.is_err() {
            panic!("timed out waiting for: {what}; events: {:?}", self.events());
        }
    }
}

impl std::fmt::Debug for Signal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.events()).finish()
    }
}

/// Everything the subscriber wrote, from every thread and every test in this binary.
pub use kcache_test_support::capture::Captured;

/// Installs the capturing subscriber (DEBUG, every target, the global default so that worker
/// tasks and handler threads are captured) once for the binary, and returns it. The text holds
/// every test's lines: a test looks for its own by a name no other test uses.
pub fn capture() -> Captured {
    static CAPTURED: std::sync::OnceLock<Captured> = std::sync::OnceLock::new();
    CAPTURED
        .get_or_init(|| {
            let captured = Captured::default();
            tracing_subscriber::fmt()
                .with_max_level(tracing::Level::DEBUG)
                .with_writer(captured.clone())
                .with_ansi(false)
                .try_init()
                .expect("the only subscriber in this binary");
            captured
        })
        .clone()
}

/// The value of data key `v` of a ConfigMap.
pub fn value(cm: &ConfigMap) -> String {
    cm.data.as_ref().and_then(|d| d.get("v")).cloned().unwrap_or_default()
}
