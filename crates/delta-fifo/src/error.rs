//! The FIFOs' error type.

use kcache_store::BoxError;

/// Why a pop did not deliver an item.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FifoError {
    /// The FIFO was closed and has been drained (client-go's `ErrFIFOClosed`).
    #[error("fifo is closed")]
    Closed,
    /// The item was popped and handed to the process function, which failed. The item is not
    /// requeued (client-go 1.33 dropped `ErrRequeue`).
    #[error("process function failed")]
    Process(#[source] BoxError),
}
