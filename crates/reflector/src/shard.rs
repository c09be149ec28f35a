//! Sharded list and watch (KEP-5866): the [`ShardMode`] a reflector is in, and the filter that
//! keeps every object outside its [`ShardSelector`] out of the store, whatever the server did.
//!
//! kube-apiserver v1.36+ with the `ShardedListAndWatch` gate filters lists and watches by
//! `shardSelector` and says so on a LIST with `metadata.shardInfo`; a server without the gate
//! ignores the parameter silently and sends everything. The reflector sends the selector
//! whatever the mode, and hashes every object it receives in every mode (64-bit FNV-1a of the
//! uid or namespace: a few nanoseconds, against the microseconds of decoding the object), so:
//!
//! * a LIST page without `metadata.shardInfo` proves the server did not filter (not a
//!   metadata-only one: kube-apiserver's `PartialObjectMetadataList` never carries it, see
//!   [`ListerWatcher::lists_carry_shard_info`](crate::ListerWatcher::lists_carry_shard_info));
//! * a watch-list cannot be verified by its end bookmark (which carries no `shardInfo`), nor a
//!   watch by anything at all: an object outside the selector proves the server did not filter;
//! * either proof switches the reflector to [`ShardMode::ClientSide`], once, for its life
//!   (logged once at info), and objects outside the selector are dropped before the store in
//!   every mode, so the cache is the same whichever side filtered.

use kcache_shard_selector::ShardSelector;
use kube::Resource;

use crate::metrics::ReflectorMetrics;
use crate::shard_mode::{ShardMode, ShardModeCell};

/// Why the reflector concluded that the server does not filter.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Unfiltered {
    /// A LIST page came without `metadata.shardInfo`, or with one naming another selector.
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
                Unfiltered::ListWithoutShardInfo => {
                    "a LIST response without metadata.shardInfo naming this selector".to_owned()
                }
                Unfiltered::ObjectOutOfRange(source) => {
                    format!("an object outside the selector in a {source}")
                }
            };
            // Names the selector and the evidence, never an object (it may be a Secret).
            tracing::info!(reflector = %self.reflector, selector = %self.selector, evidence = %reason,
                "the server does not filter by shardSelector (ShardedListAndWatch off, or an \
                 older server); filtering on the client from now on");
            self.metrics.shard_mode(self.reflector, ShardMode::ClientSide);
        }
    }
}
