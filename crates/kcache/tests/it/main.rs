//! The umbrella crate's integration tests, one binary: a module per feature.

mod prelude;
