//! Fair, stingy work queues with delaying, rate-limited and priority variants: the Rust counterpart of client-go util/workqueue.
