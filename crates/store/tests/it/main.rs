//! kcache-store's integration tests: one binary, a module per feature (each module's
//! doc says what it covers and which client-go scenario it mirrors).

mod common;
mod concurrency;
mod index;
mod keys;
mod kube;
mod model;
mod send_sync;
mod serialized;
mod store;
mod thread_safe_store;
