//! kcache-protobuf's integration tests: decoding what kube-apiserver v1.36.3 sent, encoding as
//! it does, and bad input.

mod common;
mod errors;
mod partial;
mod real_server;
mod round_trip;
