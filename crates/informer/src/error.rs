//! The informer's errors.

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
    /// The reflector's task panicked, most likely in the transform set with
    /// [`set_transform`](crate::SharedIndexInformer::set_transform). The informer stopped, with
    /// its handlers. The panic's message is kept here, but the error's `Display` leaves it out:
    /// a transform's message can quote the object it was given (a Secret's data, say), and
    /// errors end up in logs. Match the variant to read it.
    #[error("the reflector task panicked")]
    ReflectorPanicked(String),
    /// The operating system refused a handler's thread (each handler runs on its own): from
    /// [`add_event_handler`](crate::SharedIndexInformer::add_event_handler) nothing was
    /// registered; from [`run`](crate::SharedIndexInformer::run) the informer stopped.
    #[error("cannot start a handler thread")]
    HandlerThread(#[source] std::io::Error),
}
