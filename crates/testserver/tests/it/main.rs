//! Integration tests of kcache-testserver through `kube::Client` and raw HTTP, one module per
//! feature, in one test binary (one link instead of eleven).

mod apply;
mod auth;
mod common;
mod content_types;
mod controller;
mod crd;
mod crud;
mod dynamic;
mod faults;
mod gc;
mod leases;
mod lifecycle;
mod list;
mod partial_metadata;
mod protobuf;
mod sharding;
mod status;
mod type_meta;
mod validation;
mod watch;
mod watch_list;
