//! kcache-sharding's integration tests: one binary, a module per feature.

mod common;
mod coordinator;
mod informer;
mod simulation;
