//! The sample controller: a kcache-controller `Controller` (its handler enqueues keys, its
//! workers reconcile them) next to two plain event handlers on the same shared informer, and the
//! reconciler the workers run.
//!
//! Nothing here logs or keeps object contents: only keys, resourceVersions and counts.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Result, anyhow};
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_controller::{Action, Context, ObjectKey};
use kcache_informer::{ObjectOrTombstone, ResourceEventHandler};
use kcache_store::{NAMESPACE_INDEX, meta_namespace_key};
use kube::ResourceExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Mutex;

/// The label the churn puts on every object: objects are spread over a few groups.
pub(crate) const GROUP_LABEL: &str = "demo.kcache.io/group";
/// The name of the informer index over [`GROUP_LABEL`].
pub(crate) const GROUP_INDEX: &str = "group";

/// The name of the controller: its workqueue's (metrics label `name`) and its handler's prefix.
pub(crate) const CONTROLLER: &str = "configmaps";
/// The name the summary and the display give the controller's handler (it enqueues keys).
pub(crate) const ENQUEUE_HANDLER: &str = "enqueue";

fn key_of(cm: &ConfigMap) -> String {
    meta_namespace_key(&cm.namespace().unwrap_or_default(), &cm.name_any())
}

fn key_of_deleted(obj: &ObjectOrTombstone<ConfigMap>) -> String {
    match obj.tombstone() {
        Some(t) => t.key.clone(),
        None => key_of(obj.object()),
    }
}

/// What the statistics handler counted.
#[derive(Debug, Default)]
pub(crate) struct EventStats {
    pub(crate) adds: AtomicU64,
    pub(crate) initial_adds: AtomicU64,
    pub(crate) updates: AtomicU64,
    pub(crate) deletes: AtomicU64,
    pub(crate) tombstones: AtomicU64,
    deletes_by_key: Mutex<HashMap<String, u64>>,
}

impl EventStats {
    /// Every notification counted so far.
    pub(crate) fn total(&self) -> u64 {
        self.adds.load(Ordering::Relaxed)
            + self.updates.load(Ordering::Relaxed)
            + self.deletes.load(Ordering::Relaxed)
    }

    /// Deletes seen per key.
    pub(crate) fn deletes_by_key(&self) -> HashMap<String, u64> {
        lock(&self.deletes_by_key).clone()
    }
}

/// Handler (b): statistics.
#[derive(Debug)]
pub(crate) struct StatsHandler {
    pub(crate) stats: Arc<EventStats>,
}

impl ResourceEventHandler<ConfigMap> for StatsHandler {
    fn on_add(&self, _obj: &Arc<ConfigMap>, initial: bool) {
        self.stats.adds.fetch_add(1, Ordering::Relaxed);
        if initial {
            self.stats.initial_adds.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn on_update(&self, _old: &Arc<ConfigMap>, _new: &Arc<ConfigMap>) {
        self.stats.updates.fetch_add(1, Ordering::Relaxed);
    }

    fn on_delete(&self, obj: &ObjectOrTombstone<ConfigMap>) {
        *lock(&self.stats.deletes_by_key).entry(key_of_deleted(obj)).or_insert(0) += 1;
        if obj.is_tombstone() {
            self.stats.tombstones.fetch_add(1, Ordering::Relaxed);
        }
        self.stats.deletes.fetch_add(1, Ordering::Relaxed);
    }
}

/// Handler (c): deliberately slow. It blocks its own listener thread for `delay` per
/// notification; its backlog grows while the others keep up.
#[derive(Debug)]
pub(crate) struct SlowHandler {
    pub(crate) delay: Duration,
}

impl SlowHandler {
    fn work(&self) {
        if !self.delay.is_zero() {
            std::thread::sleep(self.delay);
        }
    }
}

impl ResourceEventHandler<ConfigMap> for SlowHandler {
    fn on_add(&self, _obj: &Arc<ConfigMap>, _initial: bool) {
        self.work();
    }

    fn on_update(&self, _old: &Arc<ConfigMap>, _new: &Arc<ConfigMap>) {
        self.work();
    }

    fn on_delete(&self, _obj: &ObjectOrTombstone<ConfigMap>) {
        self.work();
    }
}

/// The reconciler's state and what it has done: the controller's context.
#[derive(Debug)]
pub(crate) struct Reconciler {
    namespace: String,
    failure_rate: f64,
    rng: Mutex<StdRng>,
    /// Reconcile attempts.
    pub(crate) attempts: AtomicU64,
    /// Injected failures (each one is a rate-limited retry).
    pub(crate) failures: AtomicU64,
    /// Successful reconciles of an existing object.
    pub(crate) reconciled: AtomicU64,
    /// Successful reconciles of a key that is gone (its delete).
    pub(crate) reconciled_absent: AtomicU64,
    /// Reconciles running now.
    pub(crate) in_flight: AtomicI64,
    /// The largest number of consecutive failures of one key (its backoff exponent).
    pub(crate) max_requeues: AtomicUsize,
    /// Objects seen in the namespace index by the last reconcile.
    pub(crate) last_namespace_count: AtomicUsize,
    versions: Mutex<HashMap<String, HashSet<String>>>,
    absent: Mutex<HashSet<String>>,
}

impl Reconciler {
    pub(crate) fn new(namespace: &str, failure_rate: f64, seed: u64) -> Self {
        Self {
            namespace: namespace.to_owned(),
            failure_rate,
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
            attempts: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            reconciled: AtomicU64::new(0),
            reconciled_absent: AtomicU64::new(0),
            in_flight: AtomicI64::new(0),
            max_requeues: AtomicUsize::new(0),
            last_namespace_count: AtomicUsize::new(0),
            versions: Mutex::new(HashMap::new()),
            absent: Mutex::new(HashSet::new()),
        }
    }

    /// The controller's reconcile: an object in the cache. Reads the namespace and group
    /// indexes, fails a configured fraction of attempts (a rate-limited retry), and records the
    /// resourceVersion it acted on.
    pub(crate) async fn reconcile(cm: Arc<ConfigMap>, ctx: Context<Reconciler>) -> Result<Action> {
        let _running = ctx.start(&ctx)?;
        let lister = ctx.lister::<ConfigMap>();
        let in_namespace = lister.by_index(NAMESPACE_INDEX, &ctx.namespace)?;
        ctx.last_namespace_count.store(in_namespace.len(), Ordering::Relaxed);
        // A real controller would compare the object with its group here.
        if let Some(group) = cm.labels().get(GROUP_LABEL) {
            let _siblings = lister.by_index(GROUP_INDEX, group)?.len();
        }
        let rv = cm.resource_version().unwrap_or_default();
        lock(&ctx.versions).entry(ctx.key().to_owned()).or_default().insert(rv);
        ctx.reconciled.fetch_add(1, Ordering::Relaxed);
        Ok(Action::await_change())
    }

    /// The controller's `on_gone`: a key whose object was deleted.
    pub(crate) async fn gone(key: ObjectKey<ConfigMap>, ctx: Context<Reconciler>) -> Result<Action> {
        let _running = ctx.start(&ctx)?;
        lock(&ctx.absent).insert(key.to_string());
        ctx.reconciled_absent.fetch_add(1, Ordering::Relaxed);
        Ok(Action::await_change())
    }

    /// Counts an attempt (and the key's retry streak) and fails the configured fraction; the
    /// guard counts the reconcile as in flight until it ends.
    fn start<'a>(&'a self, ctx: &Context<Reconciler>) -> Result<InFlight<'a>> {
        let running = InFlight::new(&self.in_flight);
        self.attempts.fetch_add(1, Ordering::Relaxed);
        self.max_requeues.fetch_max(ctx.requeues(), Ordering::Relaxed);
        if self.failure_rate > 0.0 && lock(&self.rng).random_bool(self.failure_rate) {
            self.failures.fetch_add(1, Ordering::Relaxed);
            return Err(anyhow!("injected failure (--failure-rate)"));
        }
        Ok(running)
    }

    /// Whether `key` was reconciled at resourceVersion `rv`.
    pub(crate) fn reconciled_at(&self, key: &str, rv: &str) -> bool {
        lock(&self.versions).get(key).is_some_and(|v| v.contains(rv))
    }

    /// Whether `key` was reconciled while absent from the cache.
    pub(crate) fn reconciled_absent_key(&self, key: &str) -> bool {
        lock(&self.absent).contains(key)
    }
}

/// Counts a reconcile as in flight while it lives.
struct InFlight<'a>(&'a AtomicI64);

impl<'a> InFlight<'a> {
    fn new(counter: &'a AtomicI64) -> Self {
        counter.fetch_add(1, Ordering::AcqRel);
        Self(counter)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Locks a std mutex, ignoring poisoning (a panicking handler is caught by the informer).
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
