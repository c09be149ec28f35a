//! Integration tests of kcache-testserver through `kube::Client` and raw HTTP, one module per
//! feature, in one test binary (one link instead of eleven).

mod auth;
mod common;
mod crd;
mod crud;
mod dynamic;
mod faults;
mod leases;
mod lifecycle;
mod list;
mod status;
mod validation;
mod watch;
mod watch_list;
