//! Health checks: an informer's state and a factory's, for readiness probes.

use std::fmt;

use crate::failure::InformerFailure;

/// Where an informer is in its life ([`InformerHealth::state`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum HealthState {
    /// [`run`](crate::SharedIndexInformer::run) has not been called.
    NotStarted,
    /// Running; the initial list is not in the cache yet.
    Syncing,
    /// Running, with the initial list in the cache: the only ready state.
    Synced,
    /// Stopped by its cancellation token (or its `run` future was dropped), without a failure.
    Stopped,
    /// Stopped by a failure: the cache no longer follows the API server.
    Failed(InformerFailure),
}

impl fmt::Display for HealthState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotStarted => f.write_str("not started"),
            Self::Syncing => f.write_str("syncing"),
            Self::Synced => f.write_str("synced"),
            Self::Stopped => f.write_str("stopped"),
            Self::Failed(failure) => write!(f, "failed: {}", failure.cause()),
        }
    }
}

/// One informer's health ([`SharedIndexInformer::health`](crate::SharedIndexInformer::health)).
/// Its `Display` is one line, `<name>: <state>`, fit for a probe's response body (a failure
/// shows its cause, never an object).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache_informer::{HealthState, SharedIndexInformer};
///
/// # fn f(client: kube::Client) {
/// let informer = SharedIndexInformer::from_api(kube::Api::<ConfigMap>::all(client), Duration::ZERO);
/// let health = informer.health();
/// assert!(matches!(health.state, HealthState::NotStarted));
/// assert!(!health.is_ready());
/// assert_eq!(health.to_string(), "ConfigMap: not started");
/// # }
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct InformerHealth {
    /// The informer's name ([`SharedIndexInformer::name`](crate::SharedIndexInformer::name)).
    pub name: String,
    /// Its state.
    pub state: HealthState,
}

impl InformerHealth {
    pub(crate) fn new(name: &str, state: HealthState) -> Self {
        Self { name: name.to_owned(), state }
    }

    /// Running and synced: the cache can be served.
    pub fn is_ready(&self) -> bool {
        matches!(self.state, HealthState::Synced)
    }

    /// The failure, if the informer failed.
    pub fn failure(&self) -> Option<&InformerFailure> {
        match &self.state {
            HealthState::Failed(f) => Some(f),
            _ => None,
        }
    }
}

impl fmt::Display for InformerHealth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.name, self.state)
    }
}

/// The health of every informer of a factory
/// ([`SharedInformerFactory::health`](crate::SharedInformerFactory::health)), sorted by name.
/// Its `Display` is one line per informer.
///
/// A readiness probe answers with [`is_ready`](Self::is_ready); a liveness probe, if the
/// application wants a restart on failure, with `failures().next().is_none()`.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct FactoryHealth {
    /// One entry per informer handed out, started or not.
    pub informers: Vec<InformerHealth>,
}

impl FactoryHealth {
    /// Whether every informer is [`Synced`](HealthState::Synced) (true for a factory that
    /// handed out none). An informer handed out but not started yet is not ready: call
    /// [`start`](crate::SharedInformerFactory::start) again after asking for it.
    pub fn is_ready(&self) -> bool {
        self.informers.iter().all(InformerHealth::is_ready)
    }

    /// The failures of the informers that failed.
    pub fn failures(&self) -> impl Iterator<Item = &InformerFailure> {
        self.informers.iter().filter_map(InformerHealth::failure)
    }
}

impl fmt::Display for FactoryHealth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, h) in self.informers.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{h}")?;
        }
        Ok(())
    }
}
