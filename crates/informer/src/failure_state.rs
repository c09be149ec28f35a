//! `FailureState`: an informer's failure, once: recorded, counted, logged, waited for.

use crate::metrics::InformerMetrics;
use crate::sync::SyncSignal;
use parking_lot::Mutex;
use std::fmt;
use std::sync::{Arc, OnceLock};
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

use crate::failure::{FailureCause, FailurePolicy, InformerFailure};

/// A hook the factory installs to hear of its informers' failures.
type FailureHook = Box<dyn Fn(&InformerFailure) + Send + Sync>;

/// One informer's failure state, shared by the informer, its listeners and its listers.
pub(crate) struct FailureState {
    informer: Arc<str>,
    /// The first failure; set once.
    failure: OnceLock<InformerFailure>,
    /// Cancelled by the first failure, so that `run` stops everything.
    stopping: CancellationToken,
    /// Set only before start (through the informer's settings guard).
    policy: Mutex<FailurePolicy>,
    metrics: Mutex<Option<Arc<dyn InformerMetrics>>>,
    hooks: Mutex<Vec<FailureHook>>,
    /// Bumped on failure: `has_synced` turns false, so waiters must look again.
    sync_signal: Arc<SyncSignal>,
}

impl fmt::Debug for FailureState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FailureState").field("failure", &self.failure.get()).finish_non_exhaustive()
    }
}

impl FailureState {
    pub(crate) fn new(informer: &str, sync_signal: Arc<SyncSignal>) -> Self {
        Self {
            informer: Arc::from(informer),
            failure: OnceLock::new(),
            stopping: CancellationToken::new(),
            policy: Mutex::new(FailurePolicy::default()),
            metrics: Mutex::new(None),
            hooks: Mutex::new(Vec::new()),
            sync_signal,
        }
    }

    pub(crate) fn set_policy(&self, policy: FailurePolicy) {
        *self.policy.lock() = policy;
    }

    pub(crate) fn set_metrics(&self, metrics: Arc<dyn InformerMetrics>) {
        *self.metrics.lock() = Some(metrics);
    }

    pub(crate) fn add_hook(&self, hook: impl Fn(&InformerFailure) + Send + Sync + 'static) {
        self.hooks.lock().push(Box::new(hook));
    }

    pub(crate) fn get(&self) -> Option<&InformerFailure> {
        self.failure.get()
    }

    pub(crate) fn is_failed(&self) -> bool {
        self.failure.get().is_some()
    }

    /// Completes once the informer has failed.
    pub(crate) fn stopping(&self) -> WaitForCancellationFuture<'_> {
        self.stopping.cancelled()
    }

    /// Records the informer's failure (only the first counts): logs and counts it, aborts the
    /// process under [`FailurePolicy::Abort`], tells the hooks, and wakes `run` (which stops
    /// everything) and every sync waiter. Never blocks on the informer's locks: it is called
    /// from the pop loop, under the FIFO's lock, and from handler threads.
    pub(crate) fn fail(&self, cause: FailureCause) {
        let failure = InformerFailure::new(Arc::clone(&self.informer), cause);
        if self.failure.set(failure).is_err() {
            return;
        }
        let failure = self.failure.get().expect("just set");
        let cause = failure.cause();
        tracing::error!(
            informer = %self.informer,
            cause = cause.label(),
            detail = cause.detail().as_deref(),
            error = %failure,
            "informer failed: it stops with its handlers, and its cache no longer follows the API server"
        );
        let metrics = self.metrics.lock().clone();
        if let Some(m) = metrics {
            m.informer_failed(failure);
        }
        if *self.policy.lock() == FailurePolicy::Abort {
            tracing::error!(informer = %self.informer, "aborting the process (FailurePolicy::Abort)");
            std::process::abort();
        }
        for hook in self.hooks.lock().iter() {
            hook(failure);
        }
        self.stopping.cancel();
        self.sync_signal.bump();
    }

    /// Counts a handler's panic.
    pub(crate) fn handler_panicked(&self, handler: &str) {
        let metrics = self.metrics.lock().clone();
        if let Some(m) = metrics {
            m.handler_panicked(&self.informer, handler);
        }
    }

    pub(crate) fn informer(&self) -> &str {
        &self.informer
    }
}
