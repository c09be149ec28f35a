//! kcache-sharding's integration tests: one binary, a module per feature.

mod common;
mod coordinator;
mod simulation;
