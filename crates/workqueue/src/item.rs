//! `Item`: the bounds every queue puts on its items.

use std::hash::Hash;

/// Shorthand for the bounds every queue puts on its items: client-go's `comparable`, plus what
/// it takes to share items between tasks and threads.
pub trait Item: Eq + Hash + Clone + Send + Sync + 'static {}
impl<T: Eq + Hash + Clone + Send + Sync + 'static> Item for T {}
