//! Shard assignment without configuration.

mod assignment;
mod range_set;

pub use assignment::{Strategy, imbalance, moved_fraction};
pub use range_set::{HASH_SPACE_END, RangeSet};
mod protocol;
pub use protocol::{MemberState, MemberView};
