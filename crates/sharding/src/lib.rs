//! Shard assignment without configuration, for kube-apiserver's sharded list and watch
//! (KEP-5866): the replicas of a controller find each other through member Leases, split the
//! hash space among themselves, hand ranges over safely when one joins, leaves or dies, and
//! restart their informers with each new selector. client-go has no counterpart (it passes the
//! `shardSelector` string through); the member Leases are renewed as client-go's leader election
//! renews its lease (`kcache-leaderelection`).
//!
//! # Concepts
//!
//! - A **group** is one sharded controller; each replica is a **member** holding its own Lease,
//!   `<group>-<identity>`, labelled [`GROUP_LABEL`]. Live members are those whose Lease this
//!   replica saw change less than `leaseDurationSeconds` ago.
//! - The **assignment** is a deterministic function of the live members ([`Strategy`]:
//!   consistent hashing with 64 virtual nodes by default, or equal contiguous ranges).
//! - The **hand-off**: each member publishes what it serves and claims ([`SERVING_ANNOTATION`]);
//!   it starts serving only what no other live member publishes, and stops when it cannot renew
//!   (the argument is on [`MemberState`]). At no instant do two live replicas serve one key.
//! - Consumers follow [`ShardCoordinator::assignments`]; a [`ShardedInformer`] restarts with the
//!   new selector and tells its handlers which ranges were lost (with the objects that left the
//!   cache) and gained. [`StaticShard`] is replica i of N without Leases.
//!
//! The crate README has the measurement behind the default strategy and the liveness bound.
//!
//! # Example
//!
//! Three replicas on the embedded test server split the hash space between them.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> anyhow::Result<()> {
//! use std::time::Duration;
//! use kcache_sharding::{RangeSet, ShardCoordinator, ShardingConfig};
//! use tokio_util::sync::CancellationToken;
//!
//! let server = kcache_testserver::TestServer::start().await;
//! let stop = CancellationToken::new();
//! let mut replicas = Vec::new();
//! for id in ["a", "b", "c"] {
//!     let c = ShardCoordinator::new(server.in_memory_client(), ShardingConfig::new("default", "my-controller", id))?;
//!     tokio::spawn({ let (c, stop) = (c.clone(), stop.clone()); async move { c.run(stop).await } });
//!     replicas.push(c);
//! }
//! tokio::time::sleep(Duration::from_secs(20)).await;
//! let mut all = RangeSet::empty();
//! for r in &replicas {
//!     let serving = r.assignment().serving;
//!     assert!(!all.overlaps(&serving), "never two owners");
//!     all = all.union(&serving);
//! }
//! assert!(all.is_full(), "every key has an owner");
//! stop.cancel();
//! # Ok(()) }
//! ```

mod assignment;
mod config;
mod coordinator;
mod error;
mod informer;
mod protocol;
mod range_set;
mod static_shard;

pub use assignment::{Strategy, imbalance, moved_fraction};
pub use config::{GROUP_LABEL, SERVING_ANNOTATION, ShardingConfig};
pub use coordinator::{Assignment, ShardCoordinator};
pub use error::{Error, Result};
pub use informer::{ShardedEventHandler, ShardedInformer};
pub use kcache_shard_selector::HASH_SPACE_END;
pub use protocol::{MemberState, MemberView};
pub use range_set::RangeSet;
pub use static_shard::StaticShard;

// The README's example is compiled as a doctest here, so it cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct Readme;
