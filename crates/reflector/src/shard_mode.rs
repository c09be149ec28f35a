//! [`ShardMode`]: who keeps a sharded reflector's cache to its shard selector, and the cell a
//! reflector and its handles share it through.

use std::sync::atomic::{AtomicU8, Ordering};

use kcache_shard_selector::ShardSelector;

/// Who keeps a sharded reflector's cache to its [`ShardSelector`] (see
/// [`Reflector::shard_selector`](crate::Reflector::shard_selector)).
///
/// Reported by [`ReflectorHandle::shard_mode`](crate::ReflectorHandle::shard_mode) and to
/// [`ReflectorMetrics::shard_mode`](crate::ReflectorMetrics::shard_mode). client-go has no such notion: it passes `shardSelector`
/// through and trusts the server.
///
/// ```
/// use kcache_reflector::ShardMode;
///
/// assert_eq!(ShardMode::ClientSide.as_str(), "client_side");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ShardMode {
    /// No shard selector: the reflector caches the whole collection.
    Unsharded,
    /// A shard selector is sent and, as far as the reflector can tell, the server applies it
    /// (every LIST page carried `metadata.shardInfo` and no object outside the selector has
    /// arrived). This is also the mode of a sharded reflector that has not listed yet, and of
    /// one that syncs by watch-list only, until an object proves otherwise.
    ServerSide,
    /// The server was shown not to filter (a LIST page without `metadata.shardInfo`, or an
    /// object outside the selector): the reflector receives and decodes the whole collection
    /// and drops what is outside its selector. Kept for the life of the reflector.
    ClientSide,
}

impl ShardMode {
    /// A short snake_case label: `unsharded`, `server_side`, `client_side`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unsharded => "unsharded",
            Self::ServerSide => "server_side",
            Self::ClientSide => "client_side",
        }
    }

    /// Every mode, in the order of their labels above (for a gauge per mode).
    ///
    /// ```
    /// use kcache_reflector::ShardMode;
    ///
    /// assert_eq!(ShardMode::ALL.len(), 3);
    /// ```
    pub const ALL: [ShardMode; 3] = [Self::Unsharded, Self::ServerSide, Self::ClientSide];

    fn to_u8(self) -> u8 {
        match self {
            Self::Unsharded => 0,
            Self::ServerSide => 1,
            Self::ClientSide => 2,
        }
    }

    fn from_u8(v: u8) -> Self {
        match v {
            1 => Self::ServerSide,
            2 => Self::ClientSide,
            _ => Self::Unsharded,
        }
    }

    /// The mode a reflector starts in.
    pub(crate) fn initial(selector: Option<&ShardSelector>) -> Self {
        if selector.is_some() { Self::ServerSide } else { Self::Unsharded }
    }
}

/// The mode, shared between a reflector and its handles.
#[derive(Debug, Default)]
pub(crate) struct ShardModeCell(AtomicU8);

impl ShardModeCell {
    pub(crate) fn get(&self) -> ShardMode {
        ShardMode::from_u8(self.0.load(Ordering::Acquire))
    }

    pub(crate) fn set(&self, mode: ShardMode) {
        self.0.store(mode.to_u8(), Ordering::Release);
    }

    /// Moves from server-side to client-side; true only for the call that made the move, so
    /// the switch is logged and reported once.
    pub(crate) fn switch_to_client_side(&self) -> bool {
        self.0
            .compare_exchange(
                ShardMode::ServerSide.to_u8(),
                ShardMode::ClientSide.to_u8(),
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
    }
}
