//! Fatal informer failures: what stops an informer on its own, how the failure is reported (the
//! error `run` returns, the health check, an error log line, a metric) and the policies that
//! turn it, or a handler's panic, into client-go's crash.

use std::fmt;
use std::sync::Arc;

use kcache_store::StoreError;

/// Why an informer failed (see [`InformerFailure`]).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum FailureCause {
    /// The cache could not apply a change: an index function failed for an object
    /// ([`StoreError::Index`] with [`IndexError::IndexFunc`](kcache_store::IndexError::IndexFunc),
    /// which names the object's key and the index). The cache kept the object's previous state
    /// and no handler heard of the change, so from here on the cache would silently differ from
    /// the API server: client-go panics in `storeIndex.updateSingleIndex` and the process dies.
    /// Make index functions total (an object they cannot index gets no values) to avoid it.
    #[error("the cache could not apply a change")]
    Cache(#[source] Arc<StoreError>),
    /// The reflector's task panicked, most likely in the transform set with
    /// [`set_transform`](crate::SharedIndexInformer::set_transform). The panic's message is kept
    /// here, but the error's `Display` leaves it out: a transform's message can quote the object
    /// it was given (a Secret's data, say), and errors end up in logs. Match the variant to read
    /// it.
    #[error("the reflector task panicked")]
    ReflectorPanicked(String),
    /// A handler registered with [`PanicPolicy::FailInformer`] panicked. As for
    /// [`ReflectorPanicked`](Self::ReflectorPanicked), the message is kept out of `Display`.
    #[error("event handler {handler:?} panicked")]
    HandlerPanicked {
        /// The handler's name ([`HandlerRegistration::name`](crate::HandlerRegistration::name)).
        handler: String,
        /// The panic's message.
        message: String,
    },
}

impl FailureCause {
    /// A short snake_case label for metrics: `cache`, `reflector_panic` or `handler_panic`.
    ///
    /// ```
    /// use kcache_informer::FailureCause;
    ///
    /// assert_eq!(FailureCause::ReflectorPanicked("boom".into()).label(), "reflector_panic");
    /// ```
    pub fn label(&self) -> &'static str {
        match self {
            Self::Cache(_) => "cache",
            Self::ReflectorPanicked(_) => "reflector_panic",
            Self::HandlerPanicked { .. } => "handler_panic",
        }
    }

    /// What the log line says besides the cause: for a cache failure the store's error (the
    /// object's key and the index; never the index function's own error, which could quote the
    /// object), nothing otherwise.
    pub(crate) fn detail(&self) -> Option<String> {
        match self {
            Self::Cache(e) => Some(match &**e {
                StoreError::Index(index) => index.to_string(),
                other => other.to_string(),
            }),
            Self::ReflectorPanicked(_) | Self::HandlerPanicked { .. } => None,
        }
    }
}

/// A failure that stopped an informer for good: its cache no longer follows the API server.
///
/// The informer stops as a cancel would stop it (reflector, handlers), and reports the failure
/// everywhere a caller looks: [`run`](crate::SharedIndexInformer::run) returns it
/// ([`InformerError::Failed`](crate::InformerError::Failed));
/// [`SharedInformerFactory::wait_for_failure`](crate::SharedInformerFactory::wait_for_failure)
/// resolves with it; the informer's, the registrations' and the listers' `failure()` return it;
/// [`health`](crate::SharedIndexInformer::health) reports it; and `has_synced` turns false for
/// the informer and every registration, so `wait_for_cache_sync` and readiness checks built on
/// [`HasSynced`](crate::HasSynced) see it. It is logged once at error level (never with the
/// object) and counted ([`InformerMetrics::informer_failed`](crate::InformerMetrics::informer_failed)). With [`FailurePolicy::Abort`]
/// the process aborts instead, as client-go's does.
///
/// Cheap to clone. Its `Display` names the informer and the cause, never an object or a panic
/// message; [`source`](std::error::Error::source) is the cause's (the [`StoreError`] of a cache
/// failure).
///
/// # Examples
///
/// ```no_run
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache_informer::{FailureCause, InformerError, SharedIndexInformer};
/// use tokio_util::sync::CancellationToken;
///
/// # async fn run(informer: SharedIndexInformer<ConfigMap>) {
/// match informer.run(CancellationToken::new()).await {
///     Err(InformerError::Failed(failure)) => {
///         eprintln!("{failure}"); // informer "ConfigMap" failed: the cache could not apply a change
///         if let FailureCause::Cache(e) = failure.cause() {
///             eprintln!("{:?}", std::error::Error::source(&**e)); // the key and the index
///         }
///         std::process::exit(1);
///     }
///     _ => {}
/// }
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct InformerFailure {
    informer: Arc<str>,
    cause: FailureCause,
}

impl InformerFailure {
    /// The failure of `informer`, for `cause`.
    pub(crate) fn new(informer: Arc<str>, cause: FailureCause) -> Self {
        Self { informer, cause }
    }

    /// The name of the informer that failed ([`SharedIndexInformer::name`](crate::SharedIndexInformer::name)).
    pub fn informer(&self) -> &str {
        &self.informer
    }

    /// Why it failed.
    pub fn cause(&self) -> &FailureCause {
        &self.cause
    }
}

impl fmt::Display for InformerFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "informer {:?} failed: {}", self.informer, self.cause)
    }
}

impl std::error::Error for InformerFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        // The cause's own text is in `Display` already; the chain goes on with what it wraps.
        std::error::Error::source(&self.cause)
    }
}

/// What an informer does when it fails (see [`InformerFailure`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FailurePolicy {
    /// Stop the informer and report the failure (the default): a library does not end the
    /// process, and the application decides, through the error `run` returns, the factory's
    /// [`wait_for_failure`](crate::SharedInformerFactory::wait_for_failure), or a readiness probe
    /// on [`health`](crate::SharedIndexInformer::health).
    #[default]
    Stop,
    /// Abort the process (`std::process::abort`) right after the error is logged and counted:
    /// client-go's behaviour, where the failure is a panic that `utilruntime.HandleCrash`
    /// re-raises (`ReallyCrash` is true by default) and the process dies. No destructor runs
    /// and nothing is flushed, so a logger that writes from a background thread may lose the
    /// last lines: use it with a synchronous log writer.
    Abort,
}

/// What a handler's panic does (per handler, [`HandlerOptions::on_panic`](crate::HandlerOptions::on_panic)).
///
/// Either way the panic is caught, counted ([`HandlerRegistration::panics`](crate::HandlerRegistration::panics),
/// [`InformerMetrics::handler_panicked`](crate::InformerMetrics::handler_panicked)) and logged at error level without its message (which
/// could quote the object).
///
/// client-go's `processorListener.run` calls the handler under `utilruntime.HandleCrash`, which
/// logs the panic and, with `utilruntime.ReallyCrash` true (its default), panics again: the
/// process dies. Only a program that sets `ReallyCrash = false` gets the other behaviour, in
/// which the notification is skipped and the listener goes on after a one-second sleep.
/// [`FailInformer`](Self::FailInformer) with [`FailurePolicy::Abort`] is the first;
/// [`Continue`](Self::Continue) is the second, without the sleep.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PanicPolicy {
    /// The default: the notification is dropped and the handler gets the next one. The
    /// handler's view of that object stays behind the cache until the object changes again,
    /// a relist re-announces it, or the handler's resync comes; with resync off and
    /// [`skip_unchanged_updates`](crate::HandlerOptions::skip_unchanged_updates) set, until
    /// the object changes. Right for handlers that only enqueue keys, where a panic is a bug
    /// in a rare path and stopping every controller of the process would be worse.
    #[default]
    Continue,
    /// The panic is a failure of the whole informer ([`FailureCause::HandlerPanicked`]): it
    /// stops, with every handler, and reports it as any other [`InformerFailure`]. For
    /// handlers whose state must never drift from the cache.
    FailInformer,
}
