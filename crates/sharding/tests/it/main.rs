//! kcache-sharding's integration tests: one binary, a module per feature.

mod simulation;
