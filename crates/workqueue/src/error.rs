//! The crate's error type.

/// Errors from building queues and rate limiters. Queue operations themselves never fail:
/// misuse (an add after shutdown, `done` for an item never handed out, `forget` for an unknown
/// item) is a documented no-op.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QueueError {
    /// A queue that runs a timer task was built outside a Tokio runtime.
    #[error("workqueue needs a tokio runtime for its timer task")]
    NoRuntime(#[source] tokio::runtime::TryCurrentError),
    /// A token bucket was configured with a rate that is not a positive, finite number.
    #[error("token bucket rate must be positive and finite, got {0}")]
    InvalidRate(f64),
    /// A token bucket was configured with a burst of zero.
    #[error("token bucket burst must be at least 1")]
    ZeroBurst,
    /// A token bucket so slow that `burst` tokens take longer than about 70 years to refill
    /// (`2^61` ns): its arithmetic would overflow.
    #[error("token bucket of {burst} tokens at {qps} per second refills too slowly")]
    BucketTooSlow {
        /// The configured rate.
        qps: f64,
        /// The configured burst.
        burst: u32,
    },
}

/// `Result` with this crate's [`QueueError`].
pub type Result<T, E = QueueError> = std::result::Result<T, E>;
