//! Informer metrics behind a provider trait that costs nothing when unused (the reflector's
//! `ReflectorMetrics` pattern).

use std::fmt;

use crate::failure::InformerFailure;

/// Receives an informer's failure and panic counts. Every method has an empty default, so an
/// implementation records only what it needs.
///
/// client-go has no metric for either (a failure there is a crash). Exported in client-go's
/// style (a subsystem prefix, `_total` counters, the informer's name in the label `name`, as
/// `reflector_*` and `workqueue_*` are), they are:
///
/// | method | metric | labels |
/// |---|---|---|
/// | [`informer_failed`](Self::informer_failed) | `informer_failures_total` | `name`, `cause` ([`FailureCause::label`](crate::FailureCause::label)) |
/// | [`handler_panicked`](Self::handler_panicked) | `informer_handler_panics_total` | `name`, `handler` |
///
/// Set it with [`SharedIndexInformer::set_metrics`](crate::SharedIndexInformer::set_metrics)
/// or, for every informer of a factory, [`SharedInformerFactory::metrics`](crate::SharedInformerFactory::metrics).
///
/// # Examples
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use kcache_informer::{InformerFailure, InformerMetrics};
///
/// #[derive(Debug, Default)]
/// struct Counts {
///     failures: AtomicU64,
///     panics: AtomicU64,
/// }
///
/// impl InformerMetrics for Counts {
///     fn informer_failed(&self, _failure: &InformerFailure) {
///         self.failures.fetch_add(1, Ordering::Relaxed);
///     }
///     fn handler_panicked(&self, _informer: &str, _handler: &str) {
///         self.panics.fetch_add(1, Ordering::Relaxed);
///     }
/// }
/// # let _ = Counts::default();
/// ```
pub trait InformerMetrics: Send + Sync + fmt::Debug {
    /// The informer failed (once per informer; `failure` names it and the cause).
    fn informer_failed(&self, failure: &InformerFailure) {
        let _ = failure;
    }

    /// A handler of `informer` panicked, whatever its [`PanicPolicy`](crate::PanicPolicy).
    fn handler_panicked(&self, informer: &str, handler: &str) {
        let _ = (informer, handler);
    }
}
