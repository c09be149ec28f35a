//! Helpers shared by the reflector's integration tests: a recording store, a harness that runs a
//! reflector against a kcache-testserver, and condition waits that never sleep.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kcache_reflector::{
    ApiListerWatcher, ErrorKind, FakeClock, Reflector, ReflectorHandle, ReflectorMetrics,
};
use kcache_store::{ReflectorStore, Store, StoreError, meta_namespace_key_func};
use kcache_testserver::{TestServer, Verb};
use kube::api::{Api, ObjectMeta, PostParams};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// One call the reflector made on its store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Op {
    Add(String),
    Update(String),
    Delete(String),
    Replace(Vec<String>, String),
    Resync,
    ResourceVersion(String),
}

/// A `ReflectorStore` that applies every call to a real `Store` and records it.
#[derive(Clone)]
pub(crate) struct RecordingStore {
    pub(crate) store: Store<ConfigMap>,
    pub(crate) ops: Arc<Mutex<Vec<Op>>>,
    pub(crate) changed: Arc<Notify>,
    pub(crate) fail_resync: Arc<std::sync::atomic::AtomicBool>,
    /// While set, `replace` fails (and changes nothing).
    pub(crate) fail_replace: Arc<std::sync::atomic::AtomicBool>,
}

fn name(o: &ConfigMap) -> String {
    o.metadata.name.clone().unwrap_or_default()
}

impl RecordingStore {
    pub(crate) fn new() -> Self {
        Self {
            store: Store::new(meta_namespace_key_func::<ConfigMap>()),
            ops: Arc::default(),
            changed: Arc::new(Notify::new()),
            fail_resync: Arc::default(),
            fail_replace: Arc::default(),
        }
    }

    fn record(&self, op: Op) {
        self.ops.lock().unwrap().push(op);
        self.changed.notify_waiters();
    }

    pub(crate) fn ops(&self) -> Vec<Op> {
        self.ops.lock().unwrap().clone()
    }

    /// Names currently in the store, sorted.
    pub(crate) fn names(&self) -> Vec<String> {
        let mut v: Vec<_> = self.store.list().iter().map(|o| name(o)).collect();
        v.sort();
        v
    }

    /// `name -> data.v` of everything in the store.
    pub(crate) fn values(&self) -> BTreeMap<String, String> {
        self.store
            .list()
            .iter()
            .map(|o| (name(o), o.data.as_ref().and_then(|d| d.get("v")).cloned().unwrap_or_default()))
            .collect()
    }

    /// Waits (without sleeping) until `cond` holds, with a generous real-time safety net.
    pub(crate) async fn wait_until(&self, what: &str, cond: impl Fn(&Self) -> bool) {
        let fut = async {
            loop {
                let notified = self.changed.notified();
                if cond(self) {
                    return;
                }
                notified.await;
            }
        };
        if tokio::time::timeout(Duration::from_secs(20), fut).await.is_err() {
            panic!("timed out waiting for: {what}; ops so far: {:?}", self.ops());
        }
    }
}

impl ReflectorStore<ConfigMap> for RecordingStore {
    fn add(&self, obj: Arc<ConfigMap>) -> Result<(), StoreError> {
        let n = name(&obj);
        self.store.add(obj)?;
        self.record(Op::Add(n));
        Ok(())
    }
    fn update(&self, obj: Arc<ConfigMap>) -> Result<(), StoreError> {
        let n = name(&obj);
        self.store.update(obj)?;
        self.record(Op::Update(n));
        Ok(())
    }
    fn delete(&self, obj: Arc<ConfigMap>) -> Result<(), StoreError> {
        let n = name(&obj);
        self.store.delete(&obj)?;
        self.record(Op::Delete(n));
        Ok(())
    }
    fn replace(&self, list: Vec<Arc<ConfigMap>>, resource_version: &str) -> Result<(), StoreError> {
        let mut names: Vec<_> = list.iter().map(|o| name(o)).collect();
        names.sort();
        if self.fail_replace.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(StoreError::Transform("replace refused by the test".into()));
        }
        self.store.replace(list, resource_version)?;
        self.record(Op::Replace(names, resource_version.to_owned()));
        Ok(())
    }
    fn resync(&self) -> Result<(), StoreError> {
        self.record(Op::Resync);
        if self.fail_resync.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(StoreError::Transform("resync refused by the test".into()));
        }
        Ok(())
    }
    fn update_resource_version(&self, resource_version: &str) {
        self.store.update_resource_version(resource_version);
        self.record(Op::ResourceVersion(resource_version.to_owned()));
    }
}

/// Errors by kind: those the reflector reported to its watch error handler (`Harness::errors`),
/// or those its watches ended with (`Harness::ended`, from `ReflectorMetrics::watch_ended`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Errors {
    pub(crate) kinds: Arc<Mutex<Vec<ErrorKind>>>,
    pub(crate) messages: Arc<Mutex<Vec<String>>>,
    pub(crate) changed: Arc<Notify>,
}

impl Errors {
    pub(crate) fn kinds(&self) -> Vec<ErrorKind> {
        self.kinds.lock().unwrap().clone()
    }

    fn push(&self, kind: ErrorKind, message: String) {
        self.kinds.lock().unwrap().push(kind);
        self.messages.lock().unwrap().push(message);
        self.changed.notify_waiters();
    }

    /// Waits until at least `n` errors were reported.
    pub(crate) async fn wait_for_count(&self, n: usize) {
        let fut = async {
            loop {
                let notified = self.changed.notified();
                if self.kinds().len() >= n {
                    return;
                }
                notified.await;
            }
        };
        if tokio::time::timeout(Duration::from_secs(20), fut).await.is_err() {
            panic!("timed out waiting for {n} errors; got {:?}", self.kinds());
        }
    }

    pub(crate) async fn wait_for(&self, kind: ErrorKind) {
        let fut = async {
            loop {
                let notified = self.changed.notified();
                if self.kinds().contains(&kind) {
                    return;
                }
                notified.await;
            }
        };
        if tokio::time::timeout(Duration::from_secs(20), fut).await.is_err() {
            panic!("timed out waiting for error {kind:?}; got {:?}", self.kinds());
        }
    }
}

/// Records the error of every watch that ended with one (the watch error handler sees only the
/// errors that end a list-and-watch attempt; these are how a test waits for the others).
#[derive(Debug, Clone, Default)]
pub(crate) struct WatchEnds(pub(crate) Errors);

impl ReflectorMetrics for WatchEnds {
    fn watch_ended(&self, _: &str, error: Option<ErrorKind>) {
        if let Some(kind) = error {
            self.0.push(kind, kind.as_str().to_owned());
        }
    }
}

/// A running reflector against a test server.
pub(crate) struct Harness {
    pub(crate) server: TestServer,
    pub(crate) api: Api<ConfigMap>,
    pub(crate) store: RecordingStore,
    pub(crate) clock: FakeClock,
    pub(crate) errors: Errors,
    /// The errors watches ended with (unless `configure` installed other metrics).
    pub(crate) ended: Errors,
    pub(crate) handle: ReflectorHandle,
    pub(crate) cancel: CancellationToken,
    pub(crate) task: tokio::task::JoinHandle<()>,
}

impl Harness {
    /// Starts a reflector on namespace `default` of `server`, configured by `configure`.
    pub(crate) fn start(
        server: TestServer,
        configure: impl FnOnce(Reflector<ConfigMap>) -> Reflector<ConfigMap>,
    ) -> Self {
        let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
        let lw = ApiListerWatcher::new(api.clone());
        Self::start_with(server, lw, configure)
    }

    /// As [`start`](Self::start) with a custom lister-watcher.
    pub(crate) fn start_with(
        server: TestServer,
        lw: impl kcache_reflector::ListerWatcher<ConfigMap>,
        configure: impl FnOnce(Reflector<ConfigMap>) -> Reflector<ConfigMap>,
    ) -> Self {
        Self::start_with_clock(server, lw, FakeClock::new(), configure)
    }

    /// As [`start_with`](Self::start_with) on a clock the caller already holds (a lister-watcher
    /// may move it, as client-go's tests step their fake clock from inside `WatchFunc`).
    pub(crate) fn start_with_clock(
        server: TestServer,
        lw: impl kcache_reflector::ListerWatcher<ConfigMap>,
        clock: FakeClock,
        configure: impl FnOnce(Reflector<ConfigMap>) -> Reflector<ConfigMap>,
    ) -> Self {
        let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
        let store = RecordingStore::new();
        let errors = Errors::default();
        let errs = errors.clone();
        let ended = WatchEnds::default();
        let reflector = Reflector::new(lw, store.clone())
            .name("test")
            .clock(clock.clone())
            .metrics(Arc::new(ended.clone()))
            .watch_error_handler(move |_, e| errs.push(e.kind(), e.to_string()));
        let reflector = configure(reflector);
        let handle = reflector.handle();
        let cancel = CancellationToken::new();
        let task = tokio::spawn(reflector.run(cancel.clone()));
        Self { server, api, store, clock, errors, ended: ended.0, handle, cancel, task }
    }

    pub(crate) async fn stop(self) {
        self.cancel.cancel();
        tokio::time::timeout(Duration::from_secs(10), self.task).await.expect("reflector stops").unwrap();
    }

    pub(crate) fn requests(&self, verb: Verb) -> Vec<kcache_testserver::RequestRecord> {
        self.server.request_log().filter(|r| r.verb == verb)
    }
}

/// A ConfigMap in `default` with `data.v = value`.
pub(crate) fn cm(name: &str, value: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        data: Some([("v".to_string(), value.to_string())].into()),
        ..Default::default()
    }
}

/// A ConfigMap in `default` at resource version `rv` (for lister-watchers that answer without
/// a server).
pub(crate) fn cm_at(name: &str, rv: &str) -> ConfigMap {
    let mut o = cm(name, "1");
    o.metadata.resource_version = Some(rv.into());
    o
}

/// Creates `name` and returns its resource version.
pub(crate) async fn create(api: &Api<ConfigMap>, name: &str, value: &str) -> String {
    let o = api.create(&PostParams::default(), &cm(name, value)).await.expect("create");
    o.metadata.resource_version.unwrap()
}

/// Replaces `data.v` of `name` and returns the new resource version.
pub(crate) async fn update(api: &Api<ConfigMap>, name: &str, value: &str) -> String {
    let mut o = api.get(name).await.expect("get");
    o.data = Some([("v".to_string(), value.to_string())].into());
    let o = api.replace(name, &PostParams::default(), &o).await.expect("replace");
    o.metadata.resource_version.unwrap()
}

/// Deletes `name`.
pub(crate) async fn delete(api: &Api<ConfigMap>, name: &str) {
    api.delete(name, &Default::default()).await.expect("delete");
}

/// The names on the server, sorted.
pub(crate) async fn server_names(api: &Api<ConfigMap>) -> Vec<String> {
    server_names_where(api, |_| true).await
}

/// The names on the server of the objects `keep` keeps, sorted.
pub(crate) async fn server_names_where(
    api: &Api<ConfigMap>,
    keep: impl Fn(&ConfigMap) -> bool,
) -> Vec<String> {
    let mut v: Vec<_> = api
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|o| keep(o))
        .filter_map(|o| o.metadata.name)
        .collect();
    v.sort();
    v
}

/// A watch fault that writes `frames` (one or more JSON lines, without their final newline)
/// after `after` events, as the server would send them.
pub(crate) fn raw_frames(after: usize, frames: &str) -> kcache_testserver::WatchFault {
    kcache_testserver::WatchFault::RawFrame { after, bytes: format!("{frames}\n").into_bytes() }
}

/// The JSON of a ConfigMap with the given `kind`, `apiVersion` and metadata members (already
/// JSON, without their braces) and `data.v = "x"`.
pub(crate) fn object_json(kind: &str, api_version: &str, metadata: &str) -> String {
    format!(
        r#"{{"kind":"{kind}","apiVersion":"{api_version}","metadata":{{{metadata}}},"data":{{"v":"x"}}}}"#
    )
}

pub(crate) use kcache_test_support::capture::Captured;
