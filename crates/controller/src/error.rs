//! The controller's errors.

use kcache_informer::{InformerError, InformerFailure};

/// Why [`Controller::run`](crate::Controller::run) returned an error. A run stopped by its
/// cancellation token returns `Ok(())`; reconcile errors are not here (they are retried, see
/// [`Retry`](crate::Retry)).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ControllerError {
    /// The workqueue could not be built: `run` was polled outside a Tokio runtime.
    #[error("cannot build the controller's workqueue")]
    Queue(#[source] kcache_workqueue::QueueError),
    /// An informer refused the controller's handler or its owner index (it had stopped, or a
    /// handler thread could not start).
    #[error("informer {informer:?} refused the controller")]
    Informer {
        /// The informer's name.
        informer: String,
        /// What it said.
        #[source]
        source: InformerError,
    },
    /// An informer the controller reads failed: its cache no longer follows the API server, so
    /// the controller stopped rather than reconcile from it (client-go's process would have
    /// crashed). Restart the process, or the controller with a new factory.
    #[error(transparent)]
    InformerFailed(InformerFailure),
    /// An informer the controller reads stopped before its initial list arrived (its factory
    /// was shut down).
    #[error("informer {informer:?} stopped before it synced")]
    InformerStopped {
        /// The informer's name.
        informer: String,
    },
    /// The leader election could not start: its configuration failed client-go's validation
    /// (feature `leaderelection`).
    #[cfg(feature = "leaderelection")]
    #[error("leader election")]
    LeaderElection(#[source] kcache_leaderelection::Error),
    /// This replica led and lost its lease (it could not renew it within the renew deadline):
    /// the workers were stopped and drained. controller-runtime's manager stops with "leader
    /// election lost" and client-go's examples exit the process; restart the process, or run
    /// the controller again to stand as a candidate anew (feature `leaderelection`).
    #[cfg(feature = "leaderelection")]
    #[error("leader election lost")]
    LeaderElectionLost,
    /// The shard coordinator failed (feature `sharding`): this replica no longer knows its share,
    /// so the workers were stopped and drained.
    #[cfg(feature = "sharding")]
    #[error("shard coordinator failed")]
    Sharding(#[source] kcache_sharding::Error),
    /// The shard coordinator stopped on its own (feature `sharding`); the workers were drained.
    #[cfg(feature = "sharding")]
    #[error("shard coordinator stopped")]
    ShardingStopped,
    /// The HTTP endpoint could not listen.
    #[error("cannot serve the health and metrics endpoint")]
    Http(#[source] std::io::Error),
}

/// `Result` with the controller's [`ControllerError`].
pub type Result<T, E = ControllerError> = std::result::Result<T, E>;
