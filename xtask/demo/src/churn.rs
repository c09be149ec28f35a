//! The churn generator: creates, updates and deletes ConfigMaps through the API at a steady
//! rate, and remembers which deletes it made.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Result;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_store::meta_namespace_key;
use kube::Api;
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::{Instant, MissedTickBehavior};

use crate::controller::{GROUP_LABEL, lock};

/// Number of groups the objects are spread over (the group index's values).
const GROUPS: usize = 8;
/// Concurrent churn tasks; each owns a disjoint set of names, so operations on one name stay
/// in order.
const TASKS: usize = 4;

/// What the churn did.
#[derive(Debug, Default)]
pub(crate) struct ChurnStats {
    pub(crate) creates: AtomicU64,
    pub(crate) updates: AtomicU64,
    pub(crate) deletes: AtomicU64,
    pub(crate) errors: AtomicU64,
    deletes_by_key: Mutex<HashMap<String, u64>>,
}

impl ChurnStats {
    /// Successful operations.
    pub(crate) fn ops(&self) -> u64 {
        self.creates.load(Ordering::Relaxed)
            + self.updates.load(Ordering::Relaxed)
            + self.deletes.load(Ordering::Relaxed)
    }

    /// Successful deletes per `namespace/name` key.
    pub(crate) fn deletes_by_key(&self) -> HashMap<String, u64> {
        lock(&self.deletes_by_key).clone()
    }
}

/// The name of object `i`.
pub(crate) fn object_name(i: usize) -> String {
    format!("demo-{i:05}")
}

fn new_object(i: usize) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(object_name(i)),
            labels: Some(BTreeMap::from([
                ("app.kubernetes.io/part-of".to_owned(), "kcache-demo".to_owned()),
                (GROUP_LABEL.to_owned(), format!("g{}", i % GROUPS)),
            ])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("generation".to_owned(), "0".to_owned())])),
        ..ConfigMap::default()
    }
}

/// Creates objects `0..n` (not counted as churn). Returns how many were created.
pub(crate) async fn precreate(api: &Api<ConfigMap>, n: usize) -> Result<usize> {
    let results: Vec<_> = futures::stream::iter(0..n)
        .map(|i| async move { api.create(&PostParams::default(), &new_object(i)).await })
        .buffer_unordered(8)
        .collect()
        .await;
    let mut created = 0;
    for r in results {
        match r {
            Ok(_) => created += 1,
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(created)
}

/// What to churn.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// Names `0..objects` are used.
    pub(crate) objects: usize,
    /// Names `0..existing` exist at the start.
    pub(crate) existing: usize,
    /// Operations per second.
    pub(crate) rate: f64,
    /// How long.
    pub(crate) duration: Duration,
    /// Seed of the choices.
    pub(crate) seed: u64,
}

impl Plan {
    /// The plan the flags ask for, with names `0..existing` already created.
    pub(crate) fn from_args(args: &crate::args::Args, existing: usize) -> Self {
        Self { objects: args.objects, existing, rate: args.rate, duration: args.duration, seed: args.seed }
    }
}

/// Runs the churn in `namespace` as `plan` says.
pub(crate) async fn run(api: Api<ConfigMap>, namespace: &str, plan: Plan, stats: Arc<ChurnStats>) {
    let Plan { objects, existing, rate, duration, seed } = plan;
    let tasks = TASKS.min(objects);
    let deadline = Instant::now() + duration;
    let mut set = tokio::task::JoinSet::new();
    for t in 0..tasks {
        let names: Vec<usize> = (t..objects).step_by(tasks).collect();
        let task = Task {
            api: api.clone(),
            namespace: namespace.to_owned(),
            exists: names.iter().map(|&i| i < existing).collect(),
            names,
            generation: 0,
            rng: StdRng::seed_from_u64(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(t as u64)),
            stats: Arc::clone(&stats),
        };
        let period = Duration::from_secs_f64(tasks as f64 / rate);
        set.spawn(task.run(period, deadline));
    }
    while set.join_next().await.is_some() {}
}

struct Task {
    api: Api<ConfigMap>,
    namespace: String,
    names: Vec<usize>,
    exists: Vec<bool>,
    generation: u64,
    rng: StdRng,
    stats: Arc<ChurnStats>,
}

impl Task {
    async fn run(mut self, period: Duration, deadline: Instant) {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if Instant::now() >= deadline {
                return;
            }
            self.step().await;
        }
    }

    /// One operation on a random name: create it if absent; else update it (3 in 4) or delete it.
    async fn step(&mut self) {
        let slot = self.rng.random_range(0..self.names.len());
        let i = self.names[slot];
        let name = object_name(i);
        let stats = &self.stats;
        if !self.exists[slot] {
            match self.api.create(&PostParams::default(), &new_object(i)).await {
                Ok(_) => {
                    stats.creates.fetch_add(1, Ordering::Relaxed);
                    self.exists[slot] = true;
                }
                Err(e) => self.error("create", &name, &e, 409),
            }
        } else if self.rng.random_bool(0.75) {
            self.generation += 1;
            let patch = serde_json::json!({ "data": { "generation": self.generation.to_string() } });
            match self.api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                Ok(_) => {
                    stats.updates.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => self.error("update", &name, &e, 404),
            }
        } else {
            match self.api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {
                    stats.deletes.fetch_add(1, Ordering::Relaxed);
                    let key = meta_namespace_key(&self.namespace, &name);
                    *lock(&stats.deletes_by_key).entry(key).or_insert(0) += 1;
                    self.exists[slot] = false;
                }
                Err(e) => self.error("delete", &name, &e, 404),
            }
        }
    }

    /// Counts a failed operation. A 409 on create means the object exists, a 404 on update or
    /// delete that it does not (someone else changed the namespace): the local view follows.
    fn error(&mut self, op: &str, name: &str, e: &kube::Error, flips_existence: u16) {
        self.stats.errors.fetch_add(1, Ordering::Relaxed);
        if let kube::Error::Api(s) = e {
            if s.code == flips_existence
                && let Some(slot) = self.names.iter().position(|&i| object_name(i) == name)
            {
                self.exists[slot] = flips_existence == 409;
            }
            tracing::warn!(op, name, code = s.code, reason = %s.reason, "churn operation failed");
        } else {
            tracing::warn!(op, name, error = %e, "churn operation failed");
        }
    }
}
