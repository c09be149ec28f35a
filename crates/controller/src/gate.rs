//! `WorkGate`: run the workers only while a gate is open (where leader election plugs in).

use std::fmt;
use std::future::Future;
use std::pin::Pin;

/// A boxed future borrowing the gate.
pub type GateFuture<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// Opens and closes a controller's workers ([`Controller::gate`](crate::Controller::gate)):
/// while it is closed the informers stay synced and the handlers keep enqueueing (so a replica
/// that opens its gate starts with warm caches and every key queued), but no worker takes a
/// key. Closing lets the reconciles that are running finish.
///
/// This is the hook for leader election: open while this replica leads (client-go's
/// `OnStartedLeading` / `OnStoppedLeading`, controller-runtime's `LeaderElectionRunnable`),
/// and, through [`check`](Self::check), unhealthy when the lease could not be renewed in time
/// (client-go's `HealthzAdaptor`). A `tokio::sync::watch::Receiver<bool>` is a gate (open
/// while `true`).
///
/// # Examples
///
/// ```
/// use kcache_controller::WorkGate;
///
/// let (leading, gate) = tokio::sync::watch::channel(false);
/// assert!(!gate.is_open());
/// leading.send_replace(true); // OnStartedLeading
/// assert!(gate.is_open());
/// ```
pub trait WorkGate: Send + Sync + fmt::Debug + 'static {
    /// Whether workers may take keys now.
    fn is_open(&self) -> bool;

    /// Completes once the gate is open (`open == true`) or closed (`false`); at once if it is
    /// already. A gate that can no longer change never completes into the other state.
    ///
    /// # Cancel safety
    ///
    /// Must be cancel safe: the controller drops it when it stops.
    fn wait(&self, open: bool) -> GateFuture<'_>;

    /// The gate's own health for readiness: `Err(reason)` when unhealthy (a leader whose lease
    /// expired long ago). Healthy by default.
    fn check(&self) -> Result<(), String> {
        Ok(())
    }
}

impl WorkGate for tokio::sync::watch::Receiver<bool> {
    fn is_open(&self) -> bool {
        *self.borrow()
    }

    fn wait(&self, open: bool) -> GateFuture<'_> {
        let mut rx = self.clone();
        Box::pin(async move {
            // `wait_for` looks at the current value first, so no change is missed between a
            // check and the wait. If the sender is gone the value can no longer change.
            if rx.wait_for(|v| *v == open).await.is_err() {
                std::future::pending::<()>().await;
            }
        })
    }
}

/// A [`WorkGate`] from a `watch::Receiver<bool>` (open while `true`) and a health check: the
/// glue for a leader elector whose callbacks set the channel and whose own check says whether
/// its lease is renewed in time.
///
/// # Examples
///
/// ```
/// use kcache_controller::{WatchGate, WorkGate};
///
/// let (leading, rx) = tokio::sync::watch::channel(false);
/// // With a leader elector: on_started_leading -> send_replace(true), on_stopped_leading ->
/// // send_replace(false), and the check is the elector's (lease renewed within a tolerance).
/// let gate = WatchGate::new(rx).with_check(|| Err("lease expired 30s ago".to_owned()));
/// leading.send_replace(true);
/// assert!(gate.is_open());
/// assert_eq!(gate.check(), Err("lease expired 30s ago".to_owned()));
/// ```
pub struct WatchGate {
    rx: tokio::sync::watch::Receiver<bool>,
    check: Option<Box<dyn Fn() -> Result<(), String> + Send + Sync>>,
}

impl fmt::Debug for WatchGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WatchGate")
            .field("open", &*self.rx.borrow())
            .field("check", &self.check.is_some())
            .finish()
    }
}

impl WatchGate {
    /// A gate open while `rx` holds `true`, always healthy.
    pub fn new(rx: tokio::sync::watch::Receiver<bool>) -> Self {
        Self { rx, check: None }
    }

    /// Adds the gate's health check ([`WorkGate::check`]).
    #[must_use]
    pub fn with_check(mut self, check: impl Fn() -> Result<(), String> + Send + Sync + 'static) -> Self {
        self.check = Some(Box::new(check));
        self
    }
}

impl WorkGate for WatchGate {
    fn is_open(&self) -> bool {
        WorkGate::is_open(&self.rx)
    }

    fn wait(&self, open: bool) -> GateFuture<'_> {
        WorkGate::wait(&self.rx, open)
    }

    fn check(&self) -> Result<(), String> {
        self.check.as_ref().map_or(Ok(()), |f| f())
    }
}
