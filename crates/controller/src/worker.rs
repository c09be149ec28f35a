//! The workers: take a key, look the object up in the cache, reconcile it (or its absence),
//! apply the outcome to the queue.

use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use kcache_informer::Lister;
use kcache_workqueue::PriorityQueue;
use kube::Resource;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::action::{Action, Retry, requeue_after};
use crate::context::{Context, ContextShared};
use crate::gate::WorkGate;
use crate::key::ObjectKey;
use crate::metrics::{ControllerMetrics, ReconcileOutcome};
use crate::watch::Watch;

/// A reconcile's future, boxed.
pub(crate) type ReconcileFuture<E> = Pin<Box<dyn Future<Output = Result<Action, E>> + Send>>;
/// The reconcile of an object in the cache.
pub(crate) type ReconcileFn<K, T, E> = Arc<dyn Fn(Arc<K>, Context<T>) -> ReconcileFuture<E> + Send + Sync>;
/// The reconcile of a key whose object is gone.
pub(crate) type GoneFn<K, T, E> = Arc<dyn Fn(ObjectKey<K>, Context<T>) -> ReconcileFuture<E> + Send + Sync>;
/// The error policy.
pub(crate) type PolicyFn<K, T, E> = Arc<dyn Fn(&ObjectKey<K>, &E, &Context<T>) -> Retry + Send + Sync>;

/// The reconcile functions of a controller (the builder's `reconcile`, `on_gone`,
/// `error_policy`).
pub struct Reconciler<K, T, E> {
    pub(crate) reconcile: ReconcileFn<K, T, E>,
    pub(crate) on_gone: Option<GoneFn<K, T, E>>,
    pub(crate) error_policy: Option<PolicyFn<K, T, E>>,
}

impl<K, T, E> Clone for Reconciler<K, T, E> {
    fn clone(&self) -> Self {
        Self {
            reconcile: Arc::clone(&self.reconcile),
            on_gone: self.on_gone.clone(),
            error_policy: self.error_policy.clone(),
        }
    }
}

impl<K, T, E> fmt::Debug for Reconciler<K, T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reconciler")
            .field("on_gone", &self.on_gone.is_some())
            .field("error_policy", &self.error_policy.is_some())
            .finish_non_exhaustive()
    }
}

/// What every worker of one controller shares.
pub(crate) struct Workers<K, T, E> {
    pub(crate) name: Arc<str>,
    pub(crate) queue: PriorityQueue<ObjectKey<K>>,
    pub(crate) primary: Watch,
    pub(crate) lister: Lister<K>,
    pub(crate) data: Arc<T>,
    pub(crate) context: Arc<ContextShared>,
    pub(crate) reconciler: Reconciler<K, T, E>,
    pub(crate) gate: Option<Arc<dyn WorkGate>>,
    pub(crate) metrics: Option<Arc<dyn ControllerMetrics>>,
    /// Cancelled when the controller stops: workers waiting for the gate give up.
    pub(crate) stop: CancellationToken,
    /// The assignment's checks (feature `sharding`).
    #[cfg(feature = "sharding")]
    pub(crate) ownership: Option<Arc<crate::sharding::Ownership<K>>>,
}

impl<K, T, E> Workers<K, T, E>
where
    K: Resource + Send + Sync + 'static,
    T: Send + Sync + 'static,
    E: fmt::Display + Send + 'static,
{
    /// One worker: until the queue shuts down, take a key (only while the gate is open) and
    /// process it.
    pub(crate) async fn run(self: Arc<Self>) {
        loop {
            let key = match &self.gate {
                None => match self.queue.get().await {
                    Some(key) => key,
                    None => return,
                },
                Some(gate) => {
                    if !gate.is_open() {
                        tokio::select! {
                            () = gate.wait(true) => {}
                            () = self.stop.cancelled() => return,
                        }
                    }
                    tokio::select! {
                        // A closed gate wins over a ready key: `get` is cancel safe, so a key
                        // it did not return stays queued for the next leader.
                        biased;
                        () = gate.wait(false) => continue,
                        key = self.queue.get() => match key {
                            Some(key) => key,
                            None => return,
                        },
                    }
                }
            };
            self.process(key).await;
        }
    }

    /// Reconciles one key and applies the outcome: forget and maybe requeue on success, the
    /// error policy on error, a rate-limited retry on a panic; then `done`.
    async fn process(&self, key: ObjectKey<K>) {
        let mut in_flight = InFlight { queue: &self.queue, key: Some(key.clone()) };
        let requeues = self.queue.num_requeues(&key);
        let context = Context::new(
            Arc::clone(&self.data),
            Arc::clone(&self.context),
            Arc::clone(key.shared_str()),
            requeues,
        );
        // The cache decides: an object filtered out by the primary watch's label filter is as
        // gone as a deleted one.
        let object = self.lister.get(key.as_str()).filter(|o| self.primary.selects(&**o));
        let gone = object.is_none();
        // Sharded: a key whose range this replica does not own at this instant (lost while it
        // waited, queued or for a retry) is dropped, never reconciled.
        #[cfg(feature = "sharding")]
        if let Some(ownership) = &self.ownership
            && !ownership.owns_now(&key, object.as_deref())
        {
            tracing::debug!(controller = %self.name, key = %key, "not this replica's shard: dropped");
            self.queue.forget(&key);
            in_flight.key = None;
            self.queue.done(&key);
            return;
        }
        let call = || match object {
            Some(object) => Some((self.reconciler.reconcile)(object, context.clone())),
            None => self.reconciler.on_gone.as_ref().map(|f| f(key.clone(), context.clone())),
        };
        let span = tracing::info_span!("reconcile", controller = %self.name, key = %key, gone);
        if let Some(m) = &self.metrics {
            m.worker_busy(&self.name, true);
        }
        let started = std::time::Instant::now();
        // Catch panics both in the call that creates the future and in its polls.
        let outcome = match std::panic::catch_unwind(AssertUnwindSafe(call)) {
            Ok(Some(future)) => {
                AssertUnwindSafe(future).catch_unwind().instrument(span).await.map_err(|_| ())
            }
            Ok(None) => {
                // kube-runtime's Controller does not reconcile an object missing from its store
                // either (`ObjectNotFound`); without `on_gone` there is nothing to do.
                tracing::debug!(controller = %self.name, key = %key, "object gone and no on_gone: nothing to reconcile");
                if let Some(m) = &self.metrics {
                    m.worker_busy(&self.name, false);
                }
                self.queue.forget(&key);
                in_flight.key = None;
                self.queue.done(&key);
                return;
            }
            Err(_) => Err(()),
        };
        let took = started.elapsed();
        let result = match outcome {
            Ok(Ok(action)) => {
                self.queue.forget(&key);
                match requeue_after(&action) {
                    Some(after) => {
                        self.queue.add_after(key.clone(), after);
                        ReconcileOutcome::RequeueAfter
                    }
                    None => ReconcileOutcome::Success,
                }
            }
            Ok(Err(error)) => {
                let retry = match &self.reconciler.error_policy {
                    Some(policy) => policy(&key, &error, &context),
                    None => Retry::RateLimited,
                };
                tracing::warn!(
                    controller = %self.name,
                    key = %key,
                    %error,
                    requeues,
                    retry = ?retry,
                    "reconcile failed"
                );
                match retry {
                    Retry::RateLimited => self.queue.add_rate_limited(key.clone()),
                    Retry::After(after) => self.queue.add_after(key.clone(), after),
                    Retry::Never => self.queue.forget(&key),
                }
                ReconcileOutcome::Error
            }
            Err(_) => {
                // Not the panic's message: it may quote the object (a Secret's data, say).
                tracing::error!(
                    controller = %self.name,
                    key = %key,
                    requeues,
                    "reconcile panicked; requeued with the rate limiter"
                );
                self.queue.add_rate_limited(key.clone());
                ReconcileOutcome::Panic
            }
        };
        // Done before the metrics: the backlog counts a key as reconciling while it is in the
        // queue's processing set, so once `reconcile_finished` is seen the key no longer is.
        in_flight.key = None;
        self.queue.done(&key);
        if let Some(m) = &self.metrics {
            m.reconcile_finished(&self.name, result, took);
            m.worker_busy(&self.name, false);
        }
    }
}

/// A key a worker took and has not finished. If the worker is dropped mid-reconcile (the run
/// future was dropped, aborting the workers), the key is re-added and marked done, as
/// `kcache_workqueue::run_workers` does: neither lost nor stuck in the processing set.
struct InFlight<'a, K: 'static> {
    queue: &'a PriorityQueue<ObjectKey<K>>,
    /// `None` once the worker finished with the key normally.
    key: Option<ObjectKey<K>>,
}

impl<K: 'static> Drop for InFlight<'_, K> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            // A zero delay is a plain add: no timer, so this works while the runtime shuts down.
            self.queue.add_after(key.clone(), Duration::ZERO);
            self.queue.done(&key);
        }
    }
}
