//! Fixtures shared by kcache's tests, benches and fuzz targets (not published).
//!
//! Each module is behind a feature so a crate takes only what it needs, and so a crate's
//! `--no-default-features` test stays free of kube:
//!
//! | module | feature | what |
//! |---|---|---|
//! | [`alloc`] | (always) | a counting global allocator for memory tests and benches |
//! | `capture` | `capture` | `Captured`, a writer that collects a tracing subscriber's lines |
//! | `fifo_model` | `fifo` | reference models of DeltaFIFO and the in-order FIFO, and their checkers |
//! | `objects` | `objects` | the benchmark `ConfigMap`s, the same as the Go side's |
//! | [`rng`] | (always) | SplitMix64, the seeded generator of chaos schedules and benchmark workloads |
//!
//! Test helpers used by one crate only stay in that crate's `tests/it/common.rs`.

pub mod alloc;
#[cfg(feature = "capture")]
pub mod capture;
#[cfg(feature = "fifo")]
pub mod fifo_model;
#[cfg(feature = "objects")]
pub mod objects;
pub mod rng;
