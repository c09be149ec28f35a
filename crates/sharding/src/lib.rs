//! Shard assignment without configuration.

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
