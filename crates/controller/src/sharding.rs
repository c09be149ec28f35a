//! Sharding for a controller (feature `sharding`): a kcache-sharding assignment (a
//! [`ShardCoordinator`]'s, or a fixed [`StaticShard`]'s) decides which primary objects this
//! replica acts on.
//!
//! - **Enqueue**: an event of the primary type enqueues its key only if this replica owns the
//!   object (its uid or namespace, hashed as the server hashes); a key mapped from an owned or
//!   watched object only if its primary is in the primary cache and owned (not in this replica's
//!   cache: not ours, dropped).
//! - **Dequeue**: a worker checks ownership again when it takes a key, on the cached object at
//!   that instant ([`ShardCoordinator::owns`] is judged on the process's clock): a key whose range
//!   was lost while it waited (queued, or waiting for a rate-limited retry) is forgotten and
//!   marked done, never reconciled.
//! - **Gained ranges**: when the assignment grows, the cached primary objects of the gained ranges
//!   are enqueued (as initial-list adds), as a relist would.
//! - The coordinator runs for the life of `run` and leaves gracefully (deletes its Lease) after
//!   the workers drained.

use std::sync::{Arc, OnceLock};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kcache_informer::Lister;
use kcache_shard_selector::ShardKey;
use kcache_sharding::{Assignment, RangeSet, ShardCoordinator, StaticShard};
use kcache_workqueue::{AddOpts, HandlerEvent, PriorityQueue};
use kube::Resource;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::error::ControllerError;
use crate::key::ObjectKey;
use crate::source::ShardFilter;
use crate::watch::Watch;

/// How a controller is sharded, before `run`.
#[derive(Debug, Clone)]
pub(crate) enum ShardSpec {
    /// Lease-coordinated ranges, changing as replicas join and leave.
    Coordinator(ShardCoordinator),
    /// Replica i of n, fixed; hashing the uid.
    Static(StaticShard),
}

impl ShardSpec {
    /// The selector the primary informer's scope carries from the start: the static shard's
    /// (the coordinator's share changes, so its primary cache stays whole and is filtered here).
    pub(crate) fn fixed_selector(&self) -> Option<kcache_shard_selector::ShardSelector> {
        match self {
            Self::Coordinator(_) => None,
            Self::Static(s) => Some(s.selector(ShardKey::Uid)),
        }
    }
}

/// This replica's shares of the hash space, now.
#[derive(Clone)]
pub(crate) enum Shares {
    Coordinator(ShardCoordinator),
    Fixed(Arc<Assignment>),
}

impl Shares {
    fn key(&self) -> ShardKey {
        match self {
            Self::Coordinator(c) => c.config().key,
            Self::Fixed(a) => a.key,
        }
    }

    /// Whether this replica owns the object now.
    pub(crate) fn owns(&self, meta: &ObjectMeta) -> bool {
        match self {
            Self::Coordinator(c) => c.owns(meta),
            Self::Fixed(a) => a.owns(meta),
        }
    }

    /// Whether this replica owns the key of an object missing from the primary cache (gone). By
    /// namespace that is known from the key; by uid it is not, and the key was enqueued because
    /// this replica owned its object then: its deletion is ours to handle.
    fn owns_gone<K>(&self, key: &ObjectKey<K>) -> bool {
        match (self.key(), self) {
            (ShardKey::Namespace, Self::Coordinator(c)) => {
                c.owns(&ObjectMeta { namespace: key.namespace().map(str::to_owned), ..ObjectMeta::default() })
            }
            (ShardKey::Namespace, Self::Fixed(a)) => a.owns_value(key.namespace().unwrap_or_default()),
            _ => true,
        }
    }
}

/// The ownership checks of one run, shared by the enqueueing handlers and the workers.
pub(crate) struct Ownership<K> {
    pub(crate) shares: Shares,
    /// The primary cache, set once the primary source is registered.
    pub(crate) primary: OnceLock<Lister<K>>,
}

impl<K: Resource + Send + Sync + 'static> Ownership<K> {
    /// Whether the primary object behind `key` is cached here and owned: the check for keys
    /// mapped from other types.
    pub(crate) fn owns_key(&self, key: &ObjectKey<K>) -> bool {
        let Some(lister) = self.primary.get() else { return false };
        lister.get(key.as_str()).is_some_and(|o| self.shares.owns(o.meta()))
    }

    /// The check at dequeue: on the cached object, or on the key when it is gone.
    pub(crate) fn owns_now(&self, key: &ObjectKey<K>, object: Option<&K>) -> bool {
        match object {
            Some(o) => self.shares.owns(o.meta()),
            None => self.shares.owns_gone(key),
        }
    }
}

impl<K: Resource + Send + Sync + 'static> ShardFilter<K> {
    pub(crate) fn new(ownership: &Arc<Ownership<K>>) -> Self {
        let by_object = Arc::clone(ownership);
        let by_key = Arc::clone(ownership);
        Self {
            object: Arc::new(move |meta| by_object.shares.owns(meta)),
            key: Arc::new(move |key| by_key.owns_key(key)),
        }
    }
}

/// A coordinator running for a controller, and the task enqueueing the objects of gained ranges.
#[derive(Default)]
pub(crate) struct Running {
    coordinator: Option<JoinHandle<kcache_sharding::Result<()>>>,
    follower: Option<JoinHandle<()>>,
    stop: CancellationToken,
}

impl Running {
    /// Starts the coordinator (if any) and returns the ownership checks.
    pub(crate) fn start(spec: ShardSpec) -> (Self, Shares) {
        let stop = CancellationToken::new();
        match spec {
            ShardSpec::Coordinator(c) => {
                let task = tokio::spawn({
                    let (c, stop) = (c.clone(), stop.clone());
                    async move { c.run(stop).await }
                });
                (Self { coordinator: Some(task), follower: None, stop }, Shares::Coordinator(c))
            }
            ShardSpec::Static(s) => {
                let shares = Shares::Fixed(Arc::new(s.assignment(ShardKey::Uid)));
                (Self { coordinator: None, follower: None, stop }, shares)
            }
        }
    }

    /// Follows the coordinator's assignments: on each gain, enqueues the cached primary objects of
    /// the gained ranges (selected by the primary watch), which were dropped when they arrived.
    pub(crate) fn follow<K: Resource + Send + Sync + 'static>(
        &mut self,
        shares: &Shares,
        lister: Lister<K>,
        primary: Watch,
        queue: PriorityQueue<ObjectKey<K>>,
    ) {
        let Shares::Coordinator(c) = shares else { return };
        let mut assignments = c.assignments();
        let stop = self.stop.clone();
        self.follower = Some(tokio::spawn(async move {
            let mut previous = RangeSet::empty();
            loop {
                let current = assignments.borrow_and_update().clone();
                let gained = current.serving.difference(&previous);
                if !gained.is_empty() {
                    let gained = Assignment::new(current.key, gained, Vec::new());
                    let keys: Vec<ObjectKey<K>> = lister
                        .list()
                        .into_iter()
                        .filter(|o| gained.owns(o.meta()) && primary.selects(&**o))
                        .map(|o| ObjectKey::from_object(&*o))
                        .collect();
                    tracing::debug!(keys = keys.len(), "shard range gained: its cached objects enqueued");
                    queue.add_with_opts(
                        AddOpts::for_event(HandlerEvent::Create { is_in_initial_list: true }),
                        keys,
                    );
                }
                previous = current.serving;
                tokio::select! {
                    () = stop.cancelled() => return,
                    changed = assignments.changed() => if changed.is_err() { return },
                }
            }
        }));
    }

    /// Completes when the coordinator ends on its own (it failed), with the error `run` returns;
    /// never while it runs.
    pub(crate) async fn failed(&mut self) -> ControllerError {
        let Some(task) = self.coordinator.as_mut() else {
            return std::future::pending().await;
        };
        let joined = task.await;
        self.coordinator = None;
        match joined {
            Ok(Err(e)) => ControllerError::Sharding(e),
            Ok(Ok(())) => ControllerError::ShardingStopped,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => ControllerError::ShardingStopped,
        }
    }

    /// Stops the coordinator (a graceful leave: it stops serving and deletes its Lease, so the
    /// others take its ranges over at their next round) and waits for it.
    pub(crate) async fn stop(mut self) {
        self.stop.cancel();
        if let Some(follower) = self.follower.take() {
            let _ = follower.await;
        }
        if let Some(task) = self.coordinator.take() {
            match task.await {
                Ok(Ok(())) => tracing::debug!("shard coordinator left its group"),
                Ok(Err(error)) => tracing::warn!(%error, "shard coordinator stopped with an error"),
                Err(_) => tracing::warn!("shard coordinator task panicked"),
            }
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // `run` dropped mid-way: the member must not keep renewing its Lease for nobody.
        self.stop.cancel();
    }
}
