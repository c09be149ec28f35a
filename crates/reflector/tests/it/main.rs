//! The reflector's integration tests, one binary: a module per feature, each against
//! kcache-testserver over real HTTP (or a scripted lister-watcher) on a fake clock, each naming
//! the client-go tests it mirrors. One binary links the test server and kube once, not once per
//! feature.

mod common;

mod backoff;
mod bad_input;
mod cancellation;
mod compact;
mod dynamic;
mod hung;
mod list_watch;
mod managed_fields;
mod metadata;
mod metrics;
mod protobuf;
mod relist;
mod resource_version;
mod resync;
mod sharding;
mod watch_error_handler;
mod watch_list;
