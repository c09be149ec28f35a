//! kcache-informer's integration tests: one binary, a module per feature (each module's
//! doc says what it covers and which client-go scenario it mirrors).

mod atomic_relist;
mod auth;
mod bad_input;
mod cache;
mod cache_representation;
mod common;
mod failures;
mod handlers;
mod metadata;
mod relist;
mod resync;
mod secrets;
mod sharding;
mod slow_consumers;
mod unchanged_updates;
