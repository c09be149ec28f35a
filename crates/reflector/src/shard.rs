//! Sharded list and watch (KEP-5866): the [`ShardMode`] a reflector is in, and the filter that
//! keeps every object outside its [`ShardSelector`] out of the store, whatever the server did.
//!
//! kube-apiserver v1.36+ with the `ShardedListAndWatch` gate filters lists and watches by
//! `shardSelector` and says so on a LIST with `metadata.shardInfo`; a server without the gate
//! ignores the parameter silently and sends everything. The reflector sends the selector
//! whatever the mode, and hashes every object it receives in every mode (64-bit FNV-1a of the
//! uid or namespace: a few nanoseconds, against the microseconds of decoding the object), so:
//!
//! * a LIST page without `metadata.shardInfo` proves the server did not filter;
//! * a watch-list cannot be verified by its end bookmark (which carries no `shardInfo`), nor a
//!   watch by anything at all: an object outside the selector proves the server did not filter;
//! * either proof switches the reflector to [`ShardMode::ClientSide`], once, for its life
//!   (logged once at info), and objects outside the selector are dropped before the store in
//!   every mode, so the cache is the same whichever side filtered.

use std::sync::atomic::{AtomicU8, Ordering};

use kcache_shard_selector::ShardSelector;
use kube::Resource;

use crate::metrics::ReflectorMetrics;

/// Who keeps a sharded reflector's cache to its [`ShardSelector`] (see
/// [`Reflector::shard_selector`](crate::Reflector::shard_selector)).
///
/// Reported by [`ReflectorHandle::shard_mode`](crate::ReflectorHandle::shard_mode) and to
/// [`ReflectorMetrics::shard_mode`]. client-go has no such notion: it passes `shardSelector`
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
    fn switch_to_client_side(&self) -> bool {
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

/// Why the reflector concluded that the server does not filter.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Unfiltered {
    /// A LIST page came without `metadata.shardInfo`.
    ListWithoutShardInfo,
    /// An object outside the selector arrived (in a list, a watch-list or a watch).
    ObjectOutOfRange(&'static str),
}

/// The reflector's shard filter: its selector, and the mode it reports.
#[derive(Debug)]
pub(crate) struct ShardFilter<'a> {
    pub(crate) selector: &'a ShardSelector,
    pub(crate) mode: &'a ShardModeCell,
    pub(crate) metrics: &'a dyn ReflectorMetrics,
    pub(crate) reflector: &'a str,
}

impl ShardFilter<'_> {
    /// Whether `obj` belongs to this shard. One outside it proves the server did not filter
    /// (`source` names where it arrived: `list`, `watch-list`, `watch`).
    pub(crate) fn admits<K: Resource>(&self, obj: &K, source: &'static str) -> bool {
        let inside = self.selector.matches(obj.meta());
        if !inside {
            self.server_did_not_filter(Unfiltered::ObjectOutOfRange(source));
        }
        inside
    }

    /// Keeps the listed objects that belong to this shard; `shard_info` says whether every page
    /// carried `metadata.shardInfo`.
    pub(crate) fn filter_list<K: Resource>(&self, items: &mut Vec<std::sync::Arc<K>>, shard_info: bool) {
        if !shard_info {
            self.server_did_not_filter(Unfiltered::ListWithoutShardInfo);
        }
        let before = items.len();
        items.retain(|o| self.selector.matches(o.meta()));
        if items.len() != before {
            self.server_did_not_filter(Unfiltered::ObjectOutOfRange("list"));
        }
    }

    /// Switches to [`ShardMode::ClientSide`] (once: logged and reported only by the switch).
    fn server_did_not_filter(&self, why: Unfiltered) {
        if self.mode.switch_to_client_side() {
            let reason = match why {
                Unfiltered::ListWithoutShardInfo => "a LIST response without metadata.shardInfo".to_owned(),
                Unfiltered::ObjectOutOfRange(source) => format!("an object outside the selector in a {source}"),
            };
            // Names the selector and the evidence, never an object (it may be a Secret).
            tracing::info!(reflector = %self.reflector, selector = %self.selector, evidence = %reason,
                "the server does not filter by shardSelector (ShardedListAndWatch off, or an \
                 older server); filtering on the client from now on");
            self.metrics.shard_mode(self.reflector, ShardMode::ClientSide);
        }
    }
}
