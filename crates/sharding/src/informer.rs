//! `ShardedInformer`: an informer that follows an assignment, restarted with the new selector
//! whenever what this replica serves changes; its handlers hear which ranges were lost (and the
//! objects that left the cache with them) and gained.

use std::sync::Arc;

use kcache_informer::{ObjectOrTombstone, ResourceEventHandler, SharedIndexInformer};
use kcache_shard_selector::{ShardKey, ShardSelector, fnv1a_64};
use kube::Resource;
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::coordinator::Assignment;
use crate::range_set::RangeSet;

/// A handler of a [`ShardedInformer`]: the informer's events, plus changes of the served ranges.
///
/// **A lost range is not a deletion.** Its objects still exist on the server; another replica
/// serves them now. So they are not announced through `on_delete` (a controller would run its
/// deletion logic, or a tombstone-driven cleanup, for objects that were not deleted): they are
/// handed to [`on_range_lost`](Self::on_range_lost) instead, after the old informer stopped and
/// before the new one starts, so that a workqueue can drop their keys.
///
/// After every change the new informer replays its whole share as initial adds
/// (`is_in_initial_list`), also the objects of ranges kept across the change, as a relist does.
pub trait ShardedEventHandler<K>: ResourceEventHandler<K> {
    /// This replica stopped serving `lost`; `objects` were cached in it and have left the cache.
    fn on_range_lost(&self, lost: &RangeSet, objects: &[Arc<K>]) {
        let _ = (lost, objects);
    }

    /// This replica started serving `gained`; its objects arrive as adds of the new informer.
    fn on_range_gained(&self, gained: &RangeSet) {
        let _ = gained;
    }
}

/// Forwards one informer's events to a shared handler.
struct Forward<K>(Arc<dyn ShardedEventHandler<K>>);

impl<K: Send + Sync + 'static> ResourceEventHandler<K> for Forward<K> {
    fn on_add(&self, obj: &Arc<K>, is_in_initial_list: bool) {
        self.0.on_add(obj, is_in_initial_list);
    }
    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        self.0.on_update(old, new);
    }
    fn on_delete(&self, obj: &ObjectOrTombstone<K>) {
        self.0.on_delete(obj);
    }
}

type Build<K> = Box<dyn Fn(ShardSelector) -> SharedIndexInformer<K> + Send + Sync>;

/// The informer of the current assignment.
struct Running<K> {
    ranges: RangeSet,
    informer: SharedIndexInformer<K>,
    stop: CancellationToken,
    run: JoinHandle<()>,
}

/// An informer over this replica's share: built with the assignment's selector by a function you
/// give (so any informer setup works: a factory scope, a reflector config, indexers), and
/// rebuilt whenever the served ranges change. Follows a [`ShardCoordinator`](crate::ShardCoordinator)'s
/// [`assignments`](crate::ShardCoordinator::assignments), or a fixed one (static mode).
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> anyhow::Result<()> {
/// use std::sync::Arc;
/// use std::time::Duration;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache_informer::{InformerScope, ResourceEventHandler, SharedInformerFactory};
/// use kcache_sharding::{ShardedEventHandler, ShardedInformer, StaticShard};
/// use kcache_shard_selector::ShardKey;
/// use tokio_util::sync::CancellationToken;
///
/// struct Log;
/// impl ResourceEventHandler<ConfigMap> for Log {}
/// impl ShardedEventHandler<ConfigMap> for Log {}
///
/// let server = kcache_testserver::TestServer::start().await;
/// let client = server.in_memory_client();
/// let informer = ShardedInformer::new(ShardKey::Uid, move |selector| {
///     SharedInformerFactory::new(client.clone(), Duration::ZERO)
///         .informer::<ConfigMap>(&InformerScope::all().shard(selector))
/// });
/// informer.add_event_handler(Log);
/// // Replica 0 of 2, fixed: no Leases.
/// let (_tx, rx) = tokio::sync::watch::channel(StaticShard::new(0, 2)?.assignment(ShardKey::Uid));
/// let stop = CancellationToken::new();
/// let run = tokio::spawn({ let (i, s) = (informer.clone(), stop.clone()); async move { i.run(rx, s).await } });
/// # tokio::time::sleep(Duration::from_millis(50)).await;
/// stop.cancel();
/// run.await?;
/// # Ok(()) }
/// ```
pub struct ShardedInformer<K> {
    inner: Arc<Inner<K>>,
}

impl<K> Clone for ShardedInformer<K> {
    fn clone(&self) -> Self {
        Self { inner: self.inner.clone() }
    }
}

impl<K> std::fmt::Debug for ShardedInformer<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ranges = self.inner.current.lock().as_ref().map(|r| r.ranges.clone());
        f.debug_struct("ShardedInformer").field("key", &self.inner.key).field("serving", &ranges).finish()
    }
}

struct Inner<K> {
    key: ShardKey,
    build: Build<K>,
    handlers: Mutex<Vec<Arc<dyn ShardedEventHandler<K>>>>,
    current: Mutex<Option<Running<K>>>,
}

impl<K> ShardedInformer<K>
where
    K: Resource + DeserializeOwned + Clone + Send + Sync + 'static,
{
    /// A sharded informer hashing `key`, whose informers `build` makes for a selector.
    pub fn new(
        key: ShardKey,
        build: impl Fn(ShardSelector) -> SharedIndexInformer<K> + Send + Sync + 'static,
    ) -> Self {
        let inner = Inner {
            key,
            build: Box::new(build),
            handlers: Mutex::new(Vec::new()),
            current: Mutex::new(None),
        };
        Self { inner: Arc::new(inner) }
    }

    /// Adds a handler: it is registered on every informer this one builds, from the next change
    /// on (add handlers before [`run`](Self::run)).
    pub fn add_event_handler(&self, handler: impl ShardedEventHandler<K>) {
        self.inner.handlers.lock().push(Arc::new(handler));
    }

    /// The informer of the current share (`None` while serving nothing): its lister and
    /// `has_synced`.
    pub fn current(&self) -> Option<SharedIndexInformer<K>> {
        self.inner.current.lock().as_ref().map(|r| r.informer.clone())
    }

    /// The ranges the current informer covers.
    pub fn serving(&self) -> RangeSet {
        self.inner.current.lock().as_ref().map(|r| r.ranges.clone()).unwrap_or_default()
    }

    /// Follows `assignments` until `cancel`: on each change of the served ranges, stops the
    /// current informer, announces the lost ranges with their cached objects, and starts an
    /// informer for the new selector.
    ///
    /// # Cancel safety
    ///
    /// Cancel through `cancel`, which stops the current informer; dropping the future leaves it
    /// running until the informer's own task ends.
    pub async fn run(&self, mut assignments: watch::Receiver<Assignment>, cancel: CancellationToken) {
        loop {
            let serving = assignments.borrow_and_update().serving.clone();
            self.switch(serving).await;
            tokio::select! {
                _ = cancel.cancelled() => break,
                changed = assignments.changed() => if changed.is_err() { break },
            }
        }
        self.switch(RangeSet::empty()).await;
    }

    async fn switch(&self, next: RangeSet) {
        let old = {
            let current = self.inner.current.lock();
            if current.as_ref().map(|r| &r.ranges).unwrap_or(&RangeSet::empty()) == &next {
                return;
            }
            drop(current);
            self.inner.current.lock().take()
        };
        let handlers = self.inner.handlers.lock().clone();
        let old_ranges = old.as_ref().map(|r| r.ranges.clone()).unwrap_or_default();
        if let Some(old) = old {
            // Stop first: nothing of a lost range reaches a handler after its announcement.
            old.stop.cancel();
            let _ = old.run.await;
            let lost = old.ranges.difference(&next);
            if !lost.is_empty() {
                let key = self.inner.key;
                let objects: Vec<Arc<K>> = old
                    .informer
                    .indexer()
                    .list()
                    .into_iter()
                    .filter(|o| lost.contains(fnv1a_64(key.value(o.meta()).as_bytes())))
                    .collect();
                tracing::info!(
                    objects = objects.len(),
                    share = format_args!("{:.3}", lost.fraction()),
                    "shard range lost"
                );
                for h in &handlers {
                    h.on_range_lost(&lost, &objects);
                }
            }
        }
        let gained = next.difference(&old_ranges);
        if !gained.is_empty() {
            for h in &handlers {
                h.on_range_gained(&gained);
            }
        }
        let Some(selector) = next.to_selector(self.inner.key) else { return };
        let informer = (self.inner.build)(selector);
        for h in handlers {
            if let Err(e) = informer.add_event_handler(Forward(h)) {
                tracing::warn!(error = %e, "could not add a handler to the shard's informer");
            }
        }
        let stop = CancellationToken::new();
        let run = tokio::spawn({
            let (informer, stop) = (informer.clone(), stop.clone());
            async move {
                if let Err(e) = informer.run(stop).await {
                    tracing::warn!(error = %e, "the shard's informer ended with an error");
                }
            }
        });
        *self.inner.current.lock() = Some(Running { ranges: next, informer, stop, run });
    }
}
