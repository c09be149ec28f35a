//! What the pipeline under test did: recording handlers (per-key logs of every notification)
//! and the workqueue controller's reconciler (the state each reconcile read from the lister).
//!
//! Both wake the quiescence waiter through [`Progress`] after every change, so the run waits on
//! notifications, never by polling the wall clock.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use k8s_openapi::api::core::v1::ConfigMap;
use kcache_informer::{Lister, ObjectOrTombstone, ResourceEventHandler};
use kcache_store::meta_namespace_key;
use kcache_test_support::rng::SplitMix64;
use kcache_workqueue::{RateLimitingQueue, Requeue};
use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::checker::{Allow, Seen};

/// The controller's workqueue of `namespace/name` keys.
pub(crate) type KeyQueue = RateLimitingQueue<String>;

/// Signalled by every handler notification and every reconcile.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    /// Woken (all waiters) after each change.
    pub(crate) notify: Notify,
    /// Handler notifications so far.
    pub(crate) events: AtomicU64,
    /// The largest resourceVersion any handler has been told about.
    pub(crate) max_rv: AtomicU64,
}

impl Progress {
    fn bump(&self, rv: u64) {
        self.events.fetch_add(1, Ordering::Relaxed);
        self.max_rv.fetch_max(rv, Ordering::AcqRel);
        self.notify.notify_waiters();
    }
}

/// The parsed resourceVersion of an object (0 when missing or not a number, which the checker
/// then reports as a version the key never had).
pub(crate) fn rv_of(cm: &ConfigMap) -> u64 {
    cm.metadata.resource_version.as_deref().and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// The informer key of an object.
pub(crate) fn key_of(cm: &ConfigMap) -> String {
    meta_namespace_key(
        cm.metadata.namespace.as_deref().unwrap_or_default(),
        cm.metadata.name.as_deref().unwrap_or_default(),
    )
}

/// A handler's record.
#[derive(Debug, Default)]
struct LogState {
    /// Every notification, per key, in delivery order.
    logs: HashMap<String, Vec<Seen>>,
    /// The handler's believed state per present key (resourceVersion), for the quiescence check.
    current: HashMap<String, u64>,
}

/// Everything one handler was told.
#[derive(Debug)]
pub(crate) struct HandlerLog {
    /// `informer/handler`, for reports.
    pub(crate) name: String,
    /// What the checker allows this handler beyond the strict rules.
    pub(crate) allow: Allow,
    /// The namespace its informer watches (`None`: all).
    pub(crate) namespace: Option<String>,
    state: Mutex<LogState>,
}

impl HandlerLog {
    pub(crate) fn new(name: String, allow: Allow, namespace: Option<String>) -> Arc<Self> {
        Arc::new(Self { name, allow, namespace, state: Mutex::new(LogState::default()) })
    }

    fn record(&self, key: String, seen: Seen) {
        let mut s = self.state.lock();
        match seen {
            Seen::Add(rv) | Seen::Update { new: rv, .. } => {
                s.current.insert(key.clone(), rv);
            }
            Seen::Delete { .. } => {
                s.current.remove(&key);
            }
        }
        s.logs.entry(key).or_default().push(seen);
    }

    /// Whether the believed state equals `expected`; otherwise the first difference.
    pub(crate) fn mismatch(&self, expected: &HashMap<String, u64>) -> Option<String> {
        let s = self.state.lock();
        diff(&s.current, expected)
    }

    /// The per-key logs.
    pub(crate) fn logs(&self) -> HashMap<String, Vec<Seen>> {
        self.state.lock().logs.clone()
    }
}

/// The first difference between an observed and an expected key -> resourceVersion map.
pub(crate) fn diff(observed: &HashMap<String, u64>, expected: &HashMap<String, u64>) -> Option<String> {
    for (k, rv) in expected {
        match observed.get(k) {
            Some(o) if o == rv => {}
            other => return Some(format!("{k}: has {other:?}, server {rv}")),
        }
    }
    if observed.len() != expected.len() {
        let extra = observed.keys().find(|k| !expected.contains_key(*k));
        return Some(format!("{extra:?} present, absent on the server"));
    }
    None
}

/// A handler that records every notification, and optionally enqueues the key.
pub(crate) struct RecordingHandler {
    pub(crate) log: Arc<HandlerLog>,
    pub(crate) progress: Arc<Progress>,
    pub(crate) queue: Option<KeyQueue>,
    /// Harness self-test: do not record the first add notification whose (1-based) number is
    /// at least this. An add, because its loss is always visible to the checker: the key's next
    /// notification is an update or a delete of a state the handler never had, or its log ends
    /// without the object the server has. (A lost update followed by the key's delete is not:
    /// the delete carries the final state, which the checker accepts, so which notification gets
    /// lost would otherwise depend on how the run's events interleave.)
    pub(crate) lose: Option<u64>,
    /// Whether the notification to lose was lost.
    pub(crate) lost: std::sync::atomic::AtomicBool,
    /// Notifications received.
    pub(crate) received: AtomicU64,
}

impl RecordingHandler {
    fn seen(&self, key: String, seen: Seen, rv: u64) {
        if let Some(q) = &self.queue {
            q.add(key.clone());
        }
        let n = self.received.fetch_add(1, Ordering::Relaxed) + 1;
        let lose = self.lose.is_some_and(|at| n >= at)
            && matches!(seen, Seen::Add(_))
            && !self.lost.swap(true, Ordering::Relaxed);
        if !lose {
            self.log.record(key, seen);
        }
        self.progress.bump(rv);
    }
}

impl ResourceEventHandler<ConfigMap> for RecordingHandler {
    fn on_add(&self, obj: &Arc<ConfigMap>, _initial: bool) {
        let rv = rv_of(obj);
        self.seen(key_of(obj), Seen::Add(rv), rv);
    }

    fn on_update(&self, old: &Arc<ConfigMap>, new: &Arc<ConfigMap>) {
        let (old, rv) = (rv_of(old), rv_of(new));
        self.seen(key_of(new), Seen::Update { old, new: rv }, rv);
    }

    fn on_delete(&self, obj: &ObjectOrTombstone<ConfigMap>) {
        let rv = rv_of(obj.object());
        let key = obj.tombstone().map(|t| t.key.clone()).unwrap_or_else(|| key_of(obj.object()));
        self.seen(key, Seen::Delete { rv, tombstone: obj.is_tombstone() }, rv);
    }
}

/// The workqueue controller's reconciler: reads each key through the lister and records the
/// state it acted on. The first attempt of about one key in sixteen (chosen by the seed) fails
/// on purpose, so rate-limited retries are part of every run.
pub(crate) struct Reconciler {
    pub(crate) lister: Lister<ConfigMap>,
    pub(crate) progress: Arc<Progress>,
    pub(crate) seed: u64,
    /// The state the last successful reconcile of each key read: `Some(rv)` or `None` (absent).
    observed: Mutex<HashMap<String, Option<u64>>>,
    failed_once: Mutex<HashSet<String>>,
    /// Reconcile attempts.
    pub(crate) attempts: AtomicU64,
    /// Injected failures.
    pub(crate) failures: AtomicU64,
}

impl Reconciler {
    pub(crate) fn new(lister: Lister<ConfigMap>, progress: Arc<Progress>, seed: u64) -> Arc<Self> {
        Arc::new(Self {
            lister,
            progress,
            seed,
            observed: Mutex::new(HashMap::new()),
            failed_once: Mutex::new(HashSet::new()),
            attempts: AtomicU64::new(0),
            failures: AtomicU64::new(0),
        })
    }

    /// Reconciles `key`.
    ///
    /// # Errors
    ///
    /// The injected failure (the runner retries it rate-limited).
    pub(crate) fn reconcile(&self, key: &str) -> Result<Requeue, String> {
        self.attempts.fetch_add(1, Ordering::Relaxed);
        if self.should_fail(key) && self.failed_once.lock().insert(key.to_owned()) {
            self.failures.fetch_add(1, Ordering::Relaxed);
            return Err(format!("injected failure for {key}"));
        }
        let state = self.lister.get(key).map(|cm| rv_of(&cm));
        self.observed.lock().insert(key.to_owned(), state);
        self.progress.notify.notify_waiters();
        Ok(Requeue::Never)
    }

    fn should_fail(&self, key: &str) -> bool {
        // FNV-1a of the key, mixed with the seed.
        let h = key
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
        SplitMix64::new(h ^ self.seed).next_u64().is_multiple_of(16)
    }

    /// What the last reconcile of each key read.
    pub(crate) fn observed(&self) -> HashMap<String, Option<u64>> {
        self.observed.lock().clone()
    }

    /// Whether the last reconcile of every key read its final state; otherwise the first key that
    /// did not. Keys absent at the end must have been reconciled as absent if ever reconciled.
    pub(crate) fn mismatch(&self, expected: &HashMap<String, u64>) -> Option<String> {
        let observed = self.observed.lock();
        for (k, rv) in expected {
            match observed.get(k) {
                Some(Some(o)) if o == rv => {}
                other => return Some(format!("controller: {k} last reconciled at {other:?}, server {rv}")),
            }
        }
        observed
            .iter()
            .find(|(k, v)| v.is_some() && !expected.contains_key(*k))
            .map(|(k, v)| format!("controller: {k} last reconciled at {v:?}, absent on the server"))
    }
}
