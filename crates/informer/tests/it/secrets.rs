//! Secrets stay secret: with a tracing subscriber at TRACE capturing every target, every event
//! and every span with its fields (and `log` records), informers on Secrets and on ConfigMaps run
//! through adds, updates, deletes, malformed frames that contain the secret value, a decode error
//! on a field holding it, a relist after 410, and a panicking handler; the secret value (raw and
//! base64-encoded) never appears in the captured output. client-go's counterpart is a convention
//! (klog never formats objects at any verbosity in `tools/cache`); here it is a test.

use crate::common;

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kcache_informer::{ObjectOrTombstone, ResourceEventHandler, SharedIndexInformer};
use kcache_reflector::{ErrorKind, FakeClock, default_watch_error_handler};
use kcache_testserver::{TestServer, WatchFault};
use kube::Resource;
use kube::api::{Api, ObjectMeta, PostParams};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The value that must never be logged.
const SECRET: &str = "kcache-s3cr3t-Zq7vX2pW";

/// Logged at TRACE from the handler threads on purpose: proves the capture sees them.
const CONTROL: &str = "capture-control-Hn4k";

fn base64(s: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in s.as_bytes().chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Counts notifications; optionally panics in every update.
struct Handler {
    seen: Arc<AtomicU64>,
    changed: Arc<Notify>,
    panic_on_update: bool,
}

impl<K: Send + Sync + 'static> ResourceEventHandler<K> for Handler {
    fn on_add(&self, _: &Arc<K>, _: bool) {
        tracing::trace!(control = CONTROL, "handler called");
        self.seen.fetch_add(1, Ordering::SeqCst);
        self.changed.notify_waiters();
    }
    fn on_update(&self, _: &Arc<K>, _: &Arc<K>) {
        self.seen.fetch_add(1, Ordering::SeqCst);
        self.changed.notify_waiters();
        if self.panic_on_update {
            panic!("handler asked to panic");
        }
    }
    fn on_delete(&self, _: &ObjectOrTombstone<K>) {
        self.seen.fetch_add(1, Ordering::SeqCst);
        self.changed.notify_waiters();
    }
}

/// What a secret-holding resource needs for this test: how to build one and read its value.
trait Holder:
    Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
    + Clone
    + Debug
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
    fn with_value(name: &str, value: &str) -> Self;
    fn value(&self) -> String;
}

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta { name: Some(name.into()), namespace: Some("default".into()), ..Default::default() }
}

impl Holder for Secret {
    fn with_value(name: &str, value: &str) -> Self {
        Secret {
            metadata: meta(name),
            data: Some(BTreeMap::from([("password".to_owned(), ByteString(value.as_bytes().to_vec()))])),
            ..Default::default()
        }
    }
    fn value(&self) -> String {
        let data = self.data.as_ref().and_then(|d| d.get("password"));
        data.map(|b| String::from_utf8_lossy(&b.0).into_owned()).unwrap_or_default()
    }
}

impl Holder for ConfigMap {
    fn with_value(name: &str, value: &str) -> Self {
        ConfigMap {
            metadata: meta(name),
            data: Some(BTreeMap::from([("password".to_owned(), value.to_owned())])),
            ..Default::default()
        }
    }
    fn value(&self) -> String {
        self.data.as_ref().and_then(|d| d.get("password")).cloned().unwrap_or_default()
    }
}

/// name -> value, of the server and of the informer's cache.
async fn server_state<K: Holder>(api: &Api<K>) -> BTreeMap<String, String> {
    let list = api.list(&Default::default()).await.unwrap();
    list.items.iter().map(|o| (o.meta().name.clone().unwrap(), o.value())).collect()
}

fn cache_state<K: Holder>(informer: &SharedIndexInformer<K>) -> BTreeMap<String, String> {
    informer.indexer().list().iter().map(|o| (o.meta().name.clone().unwrap(), o.value())).collect()
}

/// Drives the fake clock through the reflector's backoffs (never its watch timers) until the
/// cache equals the server.
async fn converge<K: Holder>(
    informer: &SharedIndexInformer<K>,
    api: &Api<K>,
    clock: &FakeClock,
    changed: &Notify,
) {
    let fut = async {
        loop {
            let notified = changed.notified();
            let want = server_state(api).await;
            if cache_state(informer) == want && informer.has_synced() {
                return;
            }
            tokio::select! {
                d = clock.wait_for_sleep(|d| d < Duration::from_secs(100)) => clock.advance(d),
                () = notified => {}
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), fut).await.expect("cache converges on the server");
}

/// Runs one informer on `K` through every path that could log an object, each carrying the
/// secret.
async fn scenario<K: Holder>(resource: &str, kind: &str) {
    let captured = common::capture();
    let server = TestServer::start().await;
    let api: Api<K> = Api::namespaced(server.client(), "default");
    let secret_2 = format!("{SECRET}-2");
    api.create(&PostParams::default(), &K::with_value("s1", SECRET)).await.unwrap();

    // The first watch (a watch-list) gets a truncated frame holding the secret; the second (the
    // plain watch after the fallback LIST) a frame whose `data` has the wrong type and holds it.
    let faults = server.faults();
    let truncated = format!(
        "{{\"type\":\"ADDED\",\"object\":{{\"kind\":\"{kind}\",\"apiVersion\":\"v1\",\"metadata\":{{\"name\":\"x\"}},\"data\":{{\"password\":\"{SECRET}\""
    );
    faults.next_watch(WatchFault::RawFrame { after: 0, bytes: format!("{truncated}\n").into_bytes() });
    let wrong_type = format!(
        "{{\"type\":\"MODIFIED\",\"object\":{{\"kind\":\"{kind}\",\"apiVersion\":\"v1\",\"metadata\":{{\"name\":\"s1\",\"namespace\":\"default\",\"resourceVersion\":\"999\"}},\"data\":\"{SECRET}\"}}}}\n"
    );
    faults.next_watch(WatchFault::RawFrame { after: 0, bytes: wrong_type.into_bytes() });

    let informer = SharedIndexInformer::from_api(api.clone(), Duration::ZERO);
    let clock = FakeClock::new();
    informer.set_clock(clock.clone()).unwrap();
    let errors = Arc::new(Mutex::new(Vec::new()));
    informer
        .set_watch_error_handler({
            let errors = errors.clone();
            move |name, e| {
                default_watch_error_handler(name, e);
                errors.lock().unwrap().push(e.kind());
            }
        })
        .unwrap();
    let changed = Arc::new(Notify::new());
    let seen = Arc::new(AtomicU64::new(0));
    let handler = |panic_on_update| Handler { seen: seen.clone(), changed: changed.clone(), panic_on_update };
    informer.add_event_handler(handler(false)).unwrap();
    let panicking = informer.add_event_handler(handler(true)).unwrap();
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let (informer, cancel) = (informer.clone(), cancel.clone());
        async move { informer.run(cancel).await.unwrap() }
    });

    converge(&informer, &api, &clock, &changed).await;

    // Update, create, delete: every notification path, with the panicking handler.
    let mut s1 = api.get("s1").await.unwrap();
    s1 = K::with_value("s1", &secret_2).tap_rv(s1.meta().resource_version.clone());
    api.replace("s1", &PostParams::default(), &s1).await.unwrap();
    api.create(&PostParams::default(), &K::with_value("s2", SECRET)).await.unwrap();
    api.create(&PostParams::default(), &K::with_value("s3", SECRET)).await.unwrap();
    api.delete("s3", &Default::default()).await.unwrap();
    converge(&informer, &api, &clock, &changed).await;

    // A restart, and the re-watch gets 410 Expired: the reflector relists from "" (inside the
    // watch-list attempt, as client-go; not reported), and the changes made meanwhile arrive.
    faults.next_watch(WatchFault::Error {
        after: 0,
        code: 410,
        reason: "Expired".into(),
        message: "too old resource version".into(),
    });
    faults.restart();
    api.delete("s2", &Default::default()).await.unwrap();
    api.create(&PostParams::default(), &K::with_value("s4", &secret_2)).await.unwrap();
    converge(&informer, &api, &clock, &changed).await;
    // The panic is counted just after the handler returns: wait for it (yielding, bounded).
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while panicking.panics() == 0 {
        assert!(std::time::Instant::now() < deadline, "the panicking handler ran");
        tokio::task::yield_now().await;
    }
    // The decode errors ended watches: logged by the reflector (checked below), not passed to
    // the watch error handler, as client-go's `watch` passes no stream ending on.
    let kinds = errors.lock().unwrap().clone();
    assert!(!kinds.contains(&ErrorKind::Decode), "{kinds:?}");

    cancel.cancel();
    task.await.unwrap();
    let text = captured.text();
    assert!(text.contains("TRACE") || text.contains("DEBUG"), "the subscriber captured verbose output");
    assert!(text.contains(&format!("/{resource}")), "the test server's requests are in the capture");
    assert!(text.contains("decode error"), "the decode errors were logged (without the payload)");
    assert!(text.contains("event handler panicked"));
    assert!(text.contains(CONTROL), "TRACE events from handler threads are captured");
    for needle in [SECRET.to_owned(), base64(SECRET), base64(&secret_2)] {
        if let Some(at) = text.find(&needle) {
            let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
            let end = text[at..].find('\n').map_or(text.len(), |i| at + i);
            panic!("{needle:?} was logged: {}", &text[start..end]);
        }
    }
}

/// Sets the resource version for an optimistic-concurrency replace.
trait TapRv {
    fn tap_rv(self, rv: Option<String>) -> Self;
}

impl<K: Holder> TapRv for K {
    fn tap_rv(mut self, rv: Option<String>) -> Self {
        self.meta_mut().resource_version = rv;
        self
    }
}

/// Secrets: the value never appears in TRACE output, raw or base64.
#[tokio::test]
async fn secret_data_is_never_logged() {
    scenario::<Secret>("secrets", "Secret").await;
}

/// ConfigMaps may hold credentials too: same guarantee.
#[tokio::test]
async fn configmap_data_is_never_logged() {
    scenario::<ConfigMap>("configmaps", "ConfigMap").await;
}
