//! The informer's errors.

use crate::failure::InformerFailure;

/// What can go wrong when configuring or running an informer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InformerError {
    /// The informer has stopped: handlers can no longer be added.
    #[error("the informer has stopped")]
    Stopped,
    /// The informer has started: this setting can only be changed before.
    #[error("the informer has already started")]
    AlreadyStarted,
    /// Indexers could not be added (name conflict or a failing index function).
    #[error("cannot add indexers")]
    Index(#[from] kcache_store::IndexError),
    /// The cache could not change its representation (an object already in it could not be
    /// encoded, or indexed again).
    #[error("cannot change the cache's representation")]
    Store(#[from] kcache_store::StoreError),
    /// The informer failed and stopped, with its handlers: its cache no longer follows the API
    /// server. The [`InformerFailure`] names the informer and the [`FailureCause`](crate::FailureCause):
    /// an index function that failed for an object, a panic in the reflector's task (a
    /// transform, say) or in a handler whose policy makes panics fatal.
    #[error(transparent)]
    Failed(#[from] InformerFailure),
    /// The operating system refused a handler's thread (each handler runs on its own): from
    /// [`add_event_handler`](crate::SharedIndexInformer::add_event_handler) nothing was
    /// registered; from [`run`](crate::SharedIndexInformer::run) the informer stopped.
    #[error("cannot start a handler thread")]
    HandlerThread(#[source] std::io::Error),
}
