//! Reflector metrics behind a provider trait that costs nothing when unused.

use std::fmt;
use std::time::Duration;

use crate::error::ErrorKind;
use crate::shard_mode::ShardMode;

/// Why the reflector relisted (a label of the relist counter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RelistReason {
    /// The watch ended with 410 Expired / Gone.
    Expired,
    /// The watch ended with another error.
    WatchError,
    /// The resource version to list at was unusable; retried from "".
    ResourceVersionUnavailable,
    /// A continue token expired; one full list followed.
    ContinueExpired,
    /// Watch-list failed; LIST + WATCH followed.
    WatchListFallback,
}

impl RelistReason {
    /// A short snake_case label.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Expired => "expired",
            Self::WatchError => "watch_error",
            Self::ResourceVersionUnavailable => "resource_version_unavailable",
            Self::ContinueExpired => "continue_expired",
            Self::WatchListFallback => "watch_list_fallback",
        }
    }
}

/// Receives the reflector's measurements. Every method has an empty default, so an
/// implementation records only what it needs and [`NoopMetrics`] compiles to nothing.
///
/// The age of the last synced resource version is derived by the provider from the time of the
/// last [`last_sync_resource_version`](ReflectorMetrics::last_sync_resource_version) call.
pub trait ReflectorMetrics: Send + Sync + fmt::Debug {
    /// A LIST (all pages) finished and was applied to the store.
    fn list_completed(&self, reflector: &str, items: usize, duration: Duration) {
        let _ = (reflector, items, duration);
    }
    /// A LIST failed.
    fn list_failed(&self, reflector: &str, kind: ErrorKind) {
        let _ = (reflector, kind);
    }
    /// A watch (or watch-list) request is being opened.
    fn watch_started(&self, reflector: &str, watch_list: bool) {
        let _ = (reflector, watch_list);
    }
    /// A watch ended, cleanly (`None`) or with an error: one refused when opened (which the
    /// watch error handler also gets), or a stream ended by one (which it does not, as in
    /// client-go: this is where those are seen).
    fn watch_ended(&self, reflector: &str, error: Option<ErrorKind>) {
        let _ = (reflector, error);
    }
    /// A watch event arrived (`ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK`).
    fn event_received(&self, reflector: &str, event_type: &'static str) {
        let _ = (reflector, event_type);
    }
    /// The reflector is going to relist.
    fn relist(&self, reflector: &str, reason: RelistReason) {
        let _ = (reflector, reason);
    }
    /// The reflector published a new resource version.
    fn last_sync_resource_version(&self, reflector: &str, resource_version: &str) {
        let _ = (reflector, resource_version);
    }
    /// The [`ShardMode`] in effect: reported when `run` starts, then on the switch to
    /// [`ShardMode::ClientSide`] (at most once). client-go has no such metric; kcache-controller's
    /// Prometheus provider exports it as the gauge `shard_mode{name, mode}`, 1 for the mode in
    /// effect and 0 for the others (as `leader_election_master_status` is a 0/1 gauge).
    fn shard_mode(&self, reflector: &str, mode: ShardMode) {
        let _ = (reflector, mode);
    }
}

/// Records nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopMetrics;

impl ReflectorMetrics for NoopMetrics {}
