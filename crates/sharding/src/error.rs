//! The crate's one error type.

/// What went wrong.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use kcache_sharding::{Error, ShardingConfig};
///
/// let s = Duration::from_secs;
/// let config = ShardingConfig::new("default", "my-controller", "pod-a").durations(s(15), s(20), s(2));
/// assert!(matches!(config.validate(), Err(Error::Config(_))));
/// let static_shard = kcache_sharding::StaticShard::new(3, 3);
/// assert!(matches!(static_shard, Err(Error::ReplicaOutOfRange { index: 3, replicas: 3 })));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The durations or the identity were refused by the leader election's validation (the
    /// member Lease is renewed as a leader's is, under the same rules).
    #[error("invalid sharding configuration: {0}")]
    Config(#[source] kcache_leaderelection::Error),
    /// The group name is empty, or the Lease name `<group>-<identity>` is not a valid object name.
    #[error("invalid group {group:?}: the member Lease name must be a DNS subdomain")]
    InvalidGroup {
        /// The configured group.
        group: String,
    },
    /// [`ShardCoordinator::run`](crate::ShardCoordinator::run) was called while another run of
    /// the same coordinator had not returned.
    #[error("the shard coordinator is already running")]
    AlreadyRunning,
    /// Static mode: the replica index is not below the replica count.
    #[error("replica index {index} is not below the replica count {replicas}")]
    ReplicaOutOfRange {
        /// The index given.
        index: usize,
        /// The replica count given.
        replicas: usize,
    },
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
