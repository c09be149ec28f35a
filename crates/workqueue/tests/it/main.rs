//! kcache-workqueue's integration tests, one module per feature, in one test binary (one link
//! instead of one per file). Two suites keep binaries of their own: `tests/memory.rs` installs a
//! counting `#[global_allocator]`, which would count every other test's allocations too, and
//! `tests/loom.rs` only builds under `cfg(loom)`.

mod common;

mod async_send_sync;
mod delaying;
mod metrics;
mod parallelizer;
mod priority_queue;
mod prometheus;
mod queue;
mod rate_limiters;
mod rate_limiting_queue;
mod runner;
mod shutdown;
mod stress;
