//! kcache-shard-selector's integration tests, one module per feature, in one test binary.
//! `parse`, `selector`, `hash` and `key` are apimachinery's and apiserver's Go tests
//! (`pkg/sharding/*_test.go`) rewritten in Rust, plus the exact error messages; `properties`
//! are property tests; `conformance` checks the table Go's `hash/fnv` generated.

mod conformance;
mod hash;
mod key;
mod parse;
mod properties;
mod selector;
