//! The indexed, thread-safe object cache informers serve reads from: the Rust counterpart of client-go's Store, ThreadSafeStore and Indexer.
