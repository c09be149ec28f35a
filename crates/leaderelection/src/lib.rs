//! Lease-based leader election: the Rust counterpart of client-go's `tools/leaderelection`
//! (`LeaderElector`, `LeaseLock`, `HealthzAdaptor`, the leader metrics), written to share a
//! `coordination.k8s.io/v1` Lease safely with client-go candidates.
//!
//! # Concepts
//!
//! A controller runs as two or three replicas; one leads and runs the workers, the others wait
//! to take over. They agree through one Lease: its `holderIdentity` names the leader, which
//! renews the lease every [`retry_period`](LeaderElectionConfig::retry_period). The others read
//! it as often and take it over once they have seen no change for `leaseDurationSeconds`.
//!
//! Everything on the wire and in time is client-go v0.37's, so a kcache replica and a Go replica
//! (client-go's `LeaderElector` with a `LeaseLock`) can contend for one Lease:
//!
//! - **Config** ([`LeaderElectionConfig`]): lease namespace and name, identity, `LeaseDuration`,
//!   `RenewDeadline`, `RetryPeriod`, `ReleaseOnCancel`, a name for the metrics; client-go's
//!   validation as typed [`Error`]s; controller-runtime's defaults (15 s, 10 s, 2 s).
//! - **Acquire**: try at once, then every `retry_period * (1 + 1.2 r)` (jittered, factor 1.2).
//! - **Renew**: the leader updates optimistically from the record it wrote last (the fast path)
//!   and falls back to read-then-write (the slow path); it steps down when `RenewDeadline`
//!   passes without a renewal.
//! - **Expiry** is judged by the *local* time this process last saw the record change, plus
//!   `leaseDurationSeconds`; the remote `renewTime` is never compared with the local clock, so
//!   skew between machines does not matter.
//! - **Optimistic concurrency**: every write carries the resourceVersion last read; a 409
//!   Conflict is a race lost to another candidate: counted, logged at debug level, tried again
//!   at the next period (never retried in a loop).
//! - **The record**: `leaseTransitions` grows by one when the holder changes; `acquireTime` is
//!   kept while the holder renews; MicroTime timestamps as kube-apiserver stores them
//!   (`2026-12-07T10:11:12.123456Z`).
//! - **Release** ([`release_on_cancel`](LeaderElectionConfig::release_on_cancel)): a clean stop
//!   writes an empty holder and `leaseDurationSeconds: 1`, so a successor takes over at its next
//!   try, about a second later, instead of after a whole lease duration.
//!
//! The API is async: [`LeaderElector::run`] returns when leadership ends; the token that
//! `on_started_leading` gets ([`LeaderCallbacks`]) is cancelled the moment leadership is lost or
//! given up. [`LeaderElector::is_leader`], [`LeaderElector::leader`], a health check
//! ([`HealthzAdaptor`], [`LeaderElector::check`]) and the metrics
//! `leader_election_master_status{name}` and `leader_election_slowpath_total{name}` through a
//! [`MetricsProvider`] (a `prometheus-client` one behind the `prometheus` feature) complete it.
//! Time comes from a [`Clock`](kcache_utils::Clock) (`kcache-utils`), so tests run on a fake
//! clock and never sleep.
//!
//! **Coordinated leader election** (KEP-4355, client-go's `leasecandidate.go` and `Coordinated`):
//! with [`LeaderElectionConfig::coordinated`] the API server's coordinator picks the leader among
//! the [`LeaseCandidate`]s that name the Lease (the oldest emulation version, then binary version)
//! and writes it as holder; the candidate it names renews the Lease, the others only read it, and a
//! holder asked to step down (`preferredHolder`) stops renewing. kube-apiserver v1.36 serves it with
//! `--feature-gates=CoordinatedLeaderElection=true` and
//! `--runtime-config=coordination.k8s.io/v1beta1=true`; see [`LeaseCandidate`] for an example.
//!
//! Like client-go's, this election does not fence: a process that is frozen (a stopped process, a
//! long pause) while it acts on the lease acts again when it wakes, before it can notice anything.
//! The elector narrows that: its renew deadline counts from when the last renewal was *sent*, so a
//! leader that wakes past it, or whose answers come late, stops believing before anyone else may
//! take over (client-go counts from the answer; see the README's differences). Work that must
//! never overlap needs a fencing token from the resource it writes.
//!
//! # Example
//!
//! Two replicas of a controller on one Lease; only the leader runs its workers.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> anyhow::Result<()> {
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use std::time::Duration;
//! use kcache_leaderelection::{LeaderCallbacks, LeaderElectionConfig, LeaderElector, Outcome};
//! use tokio_util::sync::CancellationToken;
//!
//! let server = kcache_testserver::TestServer::start().await;
//! let leaders = Arc::new(AtomicUsize::new(0));
//! let replica = |identity: &str| {
//!     let config = LeaderElectionConfig::new("default", "my-controller", identity)
//!         .lease_duration(Duration::from_secs(4))
//!         .renew_deadline(Duration::from_secs(2))
//!         .retry_period(Duration::from_millis(500))
//!         .release_on_cancel(true);
//!     let leaders = leaders.clone();
//!     let callbacks = LeaderCallbacks::new(
//!         move |leading: CancellationToken| {
//!             leaders.fetch_add(1, Ordering::SeqCst);
//!             // The workers would start here and stop when `leading` is cancelled.
//!         },
//!         || {},
//!     );
//!     LeaderElector::new(server.in_memory_client(), config, callbacks)
//! };
//! let (a, b) = (replica("replica-a")?, replica("replica-b")?);
//! let stop_a = CancellationToken::new();
//! let run_a = tokio::spawn({ let (a, stop) = (a.clone(), stop_a.clone()); async move { a.run(stop).await } });
//! tokio::time::sleep(Duration::from_secs(1)).await;
//! let run_b = tokio::spawn({ let b = b.clone(); async move { b.run(CancellationToken::new()).await } });
//! tokio::time::sleep(Duration::from_secs(10)).await;
//! assert!(a.is_leader() && !b.is_leader(), "the first replica leads, the second waits");
//! assert_eq!(b.leader().as_deref(), Some("replica-a"));
//!
//! stop_a.cancel(); // a clean stop: the lease is released and replica-b takes over
//! assert_eq!(run_a.await??, Outcome::Cancelled { released: true });
//! tokio::time::sleep(Duration::from_secs(2)).await;
//! assert!(b.is_leader());
//! assert_eq!(leaders.load(Ordering::SeqCst), 2);
//! # run_b.abort(); Ok(()) }
//! ```

mod candidate;
mod config;
mod elector;
mod error;
mod healthz;
mod lock;
mod metrics;
#[cfg(feature = "prometheus")]
mod prometheus;
mod record;

pub use candidate::{
    CANDIDATE_RENEW_INTERVAL, LeaseCandidate, LeaseCandidateConfig, OLDEST_EMULATION_VERSION,
};
pub use config::{
    DEFAULT_LEASE_DURATION, DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD, JITTER_FACTOR, LeaderElectionConfig,
};
pub use elector::{Builder, LeaderCallbacks, LeaderElector, Outcome};
pub use error::{Error, Result};
pub use healthz::HealthzAdaptor;
pub use metrics::{LeaderMetric, MetricsProvider};
#[cfg(feature = "prometheus")]
pub use prometheus::PrometheusMetricsProvider;
pub use record::{LeaderElectionRecord, micro_timestamp};

// The README's example is compiled as a doctest here, so it cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct Readme;
