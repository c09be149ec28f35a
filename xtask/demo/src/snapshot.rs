//! The pipeline's counters at one moment ([`Snapshot`]) and the [`Probe`] that reads them: the
//! live display, the metrics gauges and the final verification all work from snapshots.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kcache_controller::HealthCheck;
use kcache_informer::SharedIndexInformer;
use tokio::time::Instant;

use crate::churn::ChurnStats;
use crate::controller::{CONTROLLER, ENQUEUE_HANDLER, EventStats, Reconciler};

/// One handler's backlog.
#[derive(Debug, Clone, Default)]
pub(crate) struct ListenerSnap {
    pub(crate) name: String,
    pub(crate) pending: usize,
    pub(crate) high_water: usize,
    pub(crate) delivered: u64,
}

/// The pipeline's counters at one moment.
#[derive(Debug, Clone, Default)]
pub(crate) struct Snapshot {
    pub(crate) elapsed: Duration,
    pub(crate) churn_ops: u64,
    pub(crate) churn_errors: u64,
    pub(crate) events: u64,
    pub(crate) cache_size: usize,
    pub(crate) fifo_len: usize,
    pub(crate) last_sync_rv: String,
    pub(crate) queue_len: usize,
    pub(crate) queue_delayed: usize,
    pub(crate) attempts: u64,
    pub(crate) failures: u64,
    pub(crate) reconciled: u64,
    pub(crate) reconciled_absent: u64,
    pub(crate) in_flight: i64,
    pub(crate) max_requeues: usize,
    pub(crate) listeners: Vec<ListenerSnap>,
}

/// Everything a snapshot reads.
#[derive(Debug)]
pub(crate) struct Probe {
    pub(crate) start: Instant,
    pub(crate) informer: SharedIndexInformer<ConfigMap>,
    /// The controller's health check, for its backlog.
    pub(crate) controller: HealthCheck,
    pub(crate) reconciler: Arc<Reconciler>,
    pub(crate) events: Arc<EventStats>,
    pub(crate) churn: Arc<ChurnStats>,
}

impl Probe {
    /// Reads every counter.
    pub(crate) fn snapshot(&self) -> Snapshot {
        let r = &self.reconciler;
        let backlog = self.controller.backlog();
        Snapshot {
            elapsed: self.start.elapsed(),
            churn_ops: self.churn.ops(),
            churn_errors: self.churn.errors.load(Ordering::Relaxed),
            events: self.events.total(),
            cache_size: self.informer.indexer().len(),
            fifo_len: self.informer.fifo_len(),
            last_sync_rv: self.informer.last_sync_resource_version(),
            queue_len: backlog.ready,
            queue_delayed: backlog.waiting,
            attempts: r.attempts.load(Ordering::Relaxed),
            failures: r.failures.load(Ordering::Relaxed),
            reconciled: r.reconciled.load(Ordering::Relaxed),
            reconciled_absent: r.reconciled_absent.load(Ordering::Relaxed),
            in_flight: r.in_flight.load(Ordering::Acquire),
            max_requeues: r.max_requeues.load(Ordering::Relaxed),
            listeners: self.listeners(),
        }
    }

    /// Every handler of the informer, the controller's first (named [`ENQUEUE_HANDLER`]), then
    /// the others in the order they were added.
    fn listeners(&self) -> Vec<ListenerSnap> {
        let mut listeners: Vec<ListenerSnap> = self
            .informer
            .handler_stats()
            .into_iter()
            .map(|h| ListenerSnap {
                name: if h.name.starts_with(&format!("{CONTROLLER}/")) {
                    ENQUEUE_HANDLER.to_owned()
                } else {
                    h.name
                },
                pending: h.pending,
                high_water: h.pending_high_water,
                delivered: h.delivered,
            })
            .collect();
        listeners.sort_by_key(|l| l.name != ENQUEUE_HANDLER);
        listeners
    }
}
