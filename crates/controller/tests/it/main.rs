//! kcache-controller's integration tests, one binary: a module per feature, helpers in
//! `common.rs`. Every test runs against an in-process kcache-testserver over HTTP.

mod async_handler;
mod builder;
mod common;
mod configmap_secret;
mod health;
#[cfg(feature = "http")]
mod http;
mod interop;
mod keys;
#[cfg(feature = "leaderelection")]
mod leader_election;
#[cfg(feature = "prometheus")]
mod prometheus;
#[cfg(feature = "sharding")]
mod sharding;
