//! Static mode: replica `i` of `n` (a StatefulSet's ordinal), no Leases.

use kcache_shard_selector::{ShardKey, ShardSelector};

use crate::assignment::equal_range;
use crate::coordinator::Assignment;
use crate::error::{Error, Result};
use crate::range_set::RangeSet;

/// Replica `index` of `replicas`: the `index`-th of `replicas` equal contiguous ranges
/// ([`ShardSelector::split`]'s), fixed for the life of the process. No Leases and no hand-off:
/// the deployment guarantees that two processes never have the same index (a StatefulSet's
/// ordinal), and a replica that is down leaves its range unserved until it is back.
///
/// # Examples
///
/// ```
/// use kcache_sharding::StaticShard;
/// use kcache_shard_selector::{ShardKey, ShardSelector};
///
/// // From a StatefulSet pod name such as "my-controller-2".
/// let shard = StaticShard::from_pod_name("my-controller-2", 3)?;
/// assert_eq!(shard.index(), 2);
/// assert_eq!(shard.selector(ShardKey::Uid), ShardSelector::split(ShardKey::Uid, 3)[2]);
/// # Ok::<(), kcache_sharding::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StaticShard {
    /// `index < replicas`.
    index: usize,
    replicas: usize,
}

impl StaticShard {
    /// Replica `index` of `replicas`.
    ///
    /// # Errors
    ///
    /// [`Error::ReplicaOutOfRange`] unless `index < replicas`.
    pub fn new(index: usize, replicas: usize) -> Result<Self> {
        if index >= replicas {
            return Err(Error::ReplicaOutOfRange { index, replicas });
        }
        Ok(Self { index, replicas })
    }

    /// The ordinal at the end of a StatefulSet pod name (`<name>-<ordinal>`).
    ///
    /// # Errors
    ///
    /// [`Error::ReplicaOutOfRange`] when the name has no ordinal (index reported as `usize::MAX`)
    /// or it is not below `replicas`.
    pub fn from_pod_name(pod: &str, replicas: usize) -> Result<Self> {
        let ordinal = pod.rsplit_once('-').and_then(|(_, n)| n.parse().ok()).unwrap_or(usize::MAX);
        Self::new(ordinal, replicas)
    }

    /// The replica index.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The replica count.
    pub fn replicas(&self) -> usize {
        self.replicas
    }

    /// The hash values this replica serves.
    pub fn ranges(&self) -> RangeSet {
        let (s, e) = equal_range(self.index, self.replicas);
        RangeSet::from_range(s, e)
    }

    /// The selector for this replica's informer.
    pub fn selector(&self, key: ShardKey) -> ShardSelector {
        self.ranges().to_selector(key).expect("a replica's range is never empty")
    }

    /// The assignment, as a [`ShardCoordinator`](crate::ShardCoordinator) would report it
    /// (members named by index).
    pub fn assignment(&self, key: ShardKey) -> Assignment {
        Assignment::new(key, self.ranges(), (0..self.replicas).map(|i| i.to_string()).collect())
    }
}
