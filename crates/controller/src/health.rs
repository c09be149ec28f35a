//! Health and readiness of a controller: its informers, its state, its gate.

use std::fmt;
use std::sync::Arc;

use kcache_informer::InformerHealth;
use parking_lot::Mutex;

use crate::gate::WorkGate;

/// Where a controller is in its life ([`ControllerHealth::state`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ControllerState {
    /// [`run`](crate::Controller::run) has not been called.
    NotStarted,
    /// The informers are starting; their initial lists are not all in the caches yet.
    Syncing,
    /// Caches synced; the workers run (or wait for the gate to open).
    Running,
    /// Stopped by its cancellation token.
    Stopped,
    /// Stopped by an error (its `Display`; `run` returned the error itself).
    Failed(String),
}

impl fmt::Display for ControllerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotStarted => f.write_str("not started"),
            Self::Syncing => f.write_str("syncing"),
            Self::Running => f.write_str("running"),
            Self::Stopped => f.write_str("stopped"),
            Self::Failed(e) => write!(f, "failed: {e}"),
        }
    }
}

/// The state of a controller's [`WorkGate`] (leadership).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GateHealth {
    /// Whether the workers may run.
    pub open: bool,
    /// The gate's own check ([`WorkGate::check`]).
    pub check: Result<(), String>,
}

/// A controller's health ([`HealthCheck::check`]). Its `Display` is a few lines fit for a
/// probe's response body: the controller's state, then each informer's, then the gate's.
///
/// * **Ready** ([`is_ready`](Self::is_ready)): running, every informer it reads synced and
///   alive, the gate healthy. A replica that does not lead is ready: its caches are warm.
/// * **Alive** ([`is_alive`](Self::is_alive)): no informer failed, the controller did not
///   fail, the gate is healthy (client-go wires its leader election's `HealthzAdaptor` into
///   `/healthz`: a leader that cannot renew its lease is restarted).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ControllerHealth {
    /// The controller's name.
    pub name: String,
    /// Its state.
    pub state: ControllerState,
    /// The health of each informer it reads, in the order of the builder's steps.
    pub informers: Vec<InformerHealth>,
    /// Its gate's, if it has one.
    pub gate: Option<GateHealth>,
}

impl ControllerHealth {
    /// Running, every informer synced (hence alive), the gate healthy.
    pub fn is_ready(&self) -> bool {
        self.state == ControllerState::Running
            && self.informers.iter().all(InformerHealth::is_ready)
            && self.gate.as_ref().is_none_or(|g| g.check.is_ok())
    }

    /// No failure: of the controller, of an informer, of the gate's check.
    pub fn is_alive(&self) -> bool {
        !matches!(self.state, ControllerState::Failed(_))
            && self.informers.iter().all(|i| i.failure().is_none())
            && self.gate.as_ref().is_none_or(|g| g.check.is_ok())
    }
}

impl fmt::Display for ControllerHealth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "controller {}: {}", self.name, self.state)?;
        for i in &self.informers {
            write!(f, "\n  informer {i}")?;
        }
        if let Some(g) = &self.gate {
            let open = if g.open { "open" } else { "closed" };
            match &g.check {
                Ok(()) => write!(f, "\n  gate: {open}")?,
                Err(e) => write!(f, "\n  gate: {open}, unhealthy: {e}")?,
            }
        }
        Ok(())
    }
}

/// The keys a controller has yet to reconcile, at one moment ([`HealthCheck::backlog`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Backlog {
    /// Keys queued that a worker can take now (the workqueue's depth).
    pub ready: usize,
    /// Keys waiting for a delay: a requeue asked for, or a failed key's backoff.
    pub waiting: usize,
    /// Keys a worker has taken and not finished: being reconciled now, or checked just before
    /// (the workqueue's processing set).
    pub reconciling: usize,
}

/// Reads a running controller's backlog.
pub(crate) type BacklogFn = Box<dyn Fn() -> Backlog + Send + Sync>;

/// What reports an informer's health (one per source the controller registered).
pub(crate) type InformerHealthFn = Box<dyn Fn() -> InformerHealth + Send + Sync>;

/// The state a controller shares with its [`HealthCheck`]s.
pub(crate) struct HealthShared {
    pub(crate) name: Mutex<Arc<str>>,
    pub(crate) state: Mutex<ControllerState>,
    pub(crate) informers: Mutex<Vec<InformerHealthFn>>,
    pub(crate) gate: Mutex<Option<Arc<dyn WorkGate>>>,
    /// Set once `run` has built the queue.
    pub(crate) backlog: Mutex<Option<BacklogFn>>,
}

impl HealthShared {
    pub(crate) fn new(name: Arc<str>) -> Self {
        Self {
            name: Mutex::new(name),
            state: Mutex::new(ControllerState::NotStarted),
            informers: Mutex::new(Vec::new()),
            gate: Mutex::new(None),
            backlog: Mutex::new(None),
        }
    }

    pub(crate) fn set_state(&self, state: ControllerState) {
        *self.state.lock() = state;
    }
}

/// A handle on a controller's health, usable from anywhere (a probe handler of your own HTTP
/// server, a test) before, while and after the controller runs. Cheap to clone. From
/// [`Controller::health_check`](crate::Controller::health_check).
///
/// # Examples
///
/// ```no_run
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache_controller::{Controller, Watch};
///
/// # fn f(client: kube::Client) {
/// let controller = Controller::<ConfigMap>::new(client, Watch::all());
/// let health = controller.health_check();
/// // In a `/readyz` handler:
/// let report = health.check();
/// let status = if report.is_ready() { 200 } else { 503 };
/// # let _ = (status, report.to_string());
/// # }
/// ```
#[derive(Clone)]
pub struct HealthCheck {
    pub(crate) shared: Arc<HealthShared>,
}

impl fmt::Debug for HealthCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HealthCheck").field("controller", &*self.shared.name.lock()).finish_non_exhaustive()
    }
}

impl HealthCheck {
    /// The controller's health now.
    pub fn check(&self) -> ControllerHealth {
        let s = &self.shared;
        ControllerHealth {
            name: s.name.lock().to_string(),
            state: s.state.lock().clone(),
            informers: s.informers.lock().iter().map(|f| f()).collect(),
            gate: s.gate.lock().as_ref().map(|g| GateHealth { open: g.is_open(), check: g.check() }),
        }
    }

    /// The keys the controller has yet to reconcile: queued, waiting for a delay, being
    /// reconciled (all zero before [`run`](crate::Controller::run)). For dashboards, and to
    /// tell a quiet controller from a busy one.
    pub fn backlog(&self) -> Backlog {
        self.shared.backlog.lock().as_ref().map(|f| f()).unwrap_or_default()
    }
}
