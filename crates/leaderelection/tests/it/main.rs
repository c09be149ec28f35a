//! kcache-leaderelection's integration tests, one binary: a module per feature, each against
//! kcache-testserver's leases through its in-memory client on tokio's paused clock (so a test
//! that lets 15 s of lease pass takes no real time and runs the same way every time). Tests
//! rewritten from client-go's `tools/leaderelection` (leaderelection_test.go,
//! healthzadaptor_test.go, resourcelock/leaselock_test.go, leasecandidate_test.go) name the upstream test they mirror.

mod common;

mod acquire;
mod callbacks;
mod config;
mod coordinated;
mod faults;
mod health;
mod metrics;
mod release;
mod renew;
