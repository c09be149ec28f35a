//! Keeps a store in step with one collection on the Kubernetes API server: the Rust counterpart of
//! client-go's `tools/cache` Reflector (with `tools/pager`), over `kube::Client`.
//!
//! A [`Reflector`] lists (or watch-lists), then watches, for ever, writing every change into a
//! [`ReflectorStore`](kcache_store::ReflectorStore): a plain `kcache_store::Store`, or a FIFO from
//! `kcache-delta-fifo` that an informer pops from. (The crate asks kube for its client only and
//! picks no TLS stack: the application enables kube's `rustls-tls` or `openssl-tls`.) It follows
//! client-go's rules:
//!
//! * **Resource versions.** The first LIST is at "0" (servable from the watch cache), later ones
//!   at the last synced version, also after a watch ended with 410 Expired (client-go's "Don't
//!   set LastSyncResourceVersionUnavailable": a LIST at a version returns data at least that
//!   new). Only a LIST answered 410 Expired/Gone or "too large resource version" makes that
//!   version unusable: it is retried at once from "", and lists stay at "" until one succeeds.
//!   (kcache also does so for a 400 to a LIST at a specific version, such as a non-numeric one
//!   a watch event carried, which client-go would retry for ever.)
//! * **Earned resource versions.** A watch from "" or "0" begins with synthetic ADDED events in
//!   no resource-version order, so the reflector publishes a version only after the first
//!   MODIFIED, DELETED or BOOKMARK; from a known version, at once. The version is read from the
//!   event's object.
//! * **Pager.** Pages of 500; unpaginated when listing at a specific version (so the server can
//!   answer from its watch cache); paginated for ever once a list at "0" came back paginated;
//!   an expired continue token leads to one full list at the original version.
//! * **Watch-list** (on by default): one watch with `sendInitialEvents=true`; the initial events
//!   go to a temporary store swapped in by `replace` at the `k8s.io/initial-events-end`
//!   bookmark, and the same stream goes on as the live watch. A refused connection or a 429 is
//!   retried with backoff, an unusable resource version once at once from ""; any other
//!   failure, a stream closed before that bookmark included, falls back to LIST + WATCH for that
//!   cycle (never reported); the half-read stream is dropped, never reused.
//! * **Backoff** ([`Backoff`]: apimachinery's `wait.Backoff` behind client-go's
//!   `DelayWithReset`): 800 ms doubling to a 30 s cap, each sleep drawn from `[d, 2d)`, so up
//!   to 60 s. The sequence restarts at 800 ms at the first delay asked for more than 2 minutes
//!   after it last (re)started, counted from `run`, whether or not failures went on meanwhile.
//!   It is stepped after every list-and-watch attempt (client-go's sliding `Until`), and before
//!   re-opening a watch refused or throttled; the first attempt is immediate; a 429's
//!   Retry-After is honoured (up to [`MAX_RETRY_AFTER`]). A watch that ends within 1 s without
//!   events is an error ([`ReflectorError::VeryShortWatch`]), never a clean run.
//! * **Watch endings.** A normal close is re-watched at once from the last synced resource
//!   version; a refused or 429 watch request, or a 429 ERROR event, is retried from it after
//!   backoff; any other error ends the watch (410, other ERROR events, an undecodable frame, a
//!   very short watch), and the reflector backs off and relists. A watch InternalError is
//!   re-watched in place only within `max_internal_error_retry_duration` of the first one
//!   (default zero: relist).
//! * **Watch timeouts** uniform in [5 min, 10 min); a stream open past its timeout plus grace is
//!   hung and replaced by a watch from the last synced resource version. Bookmarks are always
//!   requested.
//! * **Resync**: one live timer at a time; a resync error ends the watch.
//! * **Errors** are classified ([`ReflectorError`], [`ErrorKind`]). The watch error handler gets what
//!   client-go's gets, the errors that end a list-and-watch attempt: a failed LIST (or one the
//!   store refused) and a watch that could not be opened. A watch that ended with an error is
//!   logged and reported to [`ReflectorMetrics::watch_ended`] instead (see
//!   [`Reflector::watch_error_handler`]). The reflector itself stops only when cancelled.
//!   Cancellation drops any request or stream in flight.
//!
//! * **Sharding** (KEP-5866): with [`Reflector::shard_selector`] every request carries
//!   `shardSelector`; a LIST without `metadata.shardInfo`, or any object outside the selector,
//!   shows that the server did not filter, and the reflector filters on the client from then on
//!   ([`ShardMode`]). Objects outside the selector never reach the store in any mode.
//!
//! Time comes from a [`Clock`]: tests drive a [`FakeClock`] and never sleep.
//!
//! # Decoding threads
//!
//! [`ApiListerWatcher`] decodes a list while the response arrives, one item at a time, so the
//! body is never held whole. On a multi-threaded tokio runtime it reads and decodes each list on
//! a thread of its own (`kcache-list-decode`, for one response) and each watch on another
//! (`kcache-watch-decode`, for the life of the watch), so decoding never occupies a runtime
//! worker and a watch-list's sync decodes beside the reflector; with glibc's per-thread malloc
//! arenas this also keeps a cache's objects in one arena. A watch's thread hands the reflector
//! batches of decoded events through a bounded channel and ends when the stream is dropped.
//! [`ApiListerWatcher::live_events_in_task`] keeps the thread for a watch-list's initial events
//! only: live events, and every event of a plain watch, are then decoded in the reflector's
//! task, where a chunk of the stream wakes no other thread. On a current-thread runtime
//! everything is decoded in the calling task.
//!
//! # Protobuf
//!
//! [`ApiListerWatcher::protobuf`]`(true)` (off by default) asks kube-apiserver for built-in
//! kinds in Kubernetes' protobuf encoding, as client-go does with `rest.Config.ContentType =
//! "application/vnd.kubernetes.protobuf"`; objects are decoded by kcache-protobuf straight into
//! the k8s-openapi type. JSON stays the fallback with nothing to configure: custom resources are
//! asked for in JSON, and every response is decoded by its `Content-Type`.
//!
//! # Example
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kcache_reflector::{ApiListerWatcher, Reflector};
//! use kcache_store::{Store, meta_namespace_key_func};
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn run(client: kube::Client) {
//! let store = Store::new(meta_namespace_key_func::<ConfigMap>());
//! let lw = ApiListerWatcher::new(kube::Api::<ConfigMap>::namespaced(client, "default"));
//! let reflector = Reflector::new(lw, store.clone()).name("configmaps");
//! let cancel = CancellationToken::new();
//! tokio::spawn(reflector.run(cancel.clone()));
//! // ... read from `store` ...
//! cancel.cancel();
//! # }
//! ```

mod api_lister_watcher;
mod backoff;
/// The clock lives in kcache-utils (so crates that do not depend on the reflector share it);
/// this module keeps the crate-internal path `crate::clock` the reflector's code uses.
mod clock {
    pub(crate) use kcache_utils::{Clock, Sleep, SystemClock};
}
mod config;
mod decode_thread;
mod error;
mod frame;
mod list_decode;
mod list_helpers;
mod lister_watcher;
mod metrics;
mod protobuf;
mod reflector;
mod shard;
mod shard_mode;
mod strip;
mod temp_store;
mod watch_decode;
mod watch_helpers;

/// Entry points for the fuzz targets in `xtask/fuzz`. Compiled only under `cfg(fuzzing)` (set by
/// cargo-fuzz), so the real public API does not grow; not covered by semver.
#[cfg(fuzzing)]
#[doc(hidden)]
pub mod __fuzz {
    use bytes::Bytes;
    use futures::{FutureExt, StreamExt};
    use serde::de::DeserializeOwned;

    use crate::{Result, WatchEvent};

    /// Feeds `chunks` as the body of a watch response through the frame splitter and the event
    /// decoder, exactly as a live watch stream does, and returns every item the stream yields.
    pub fn watch_events<K>(chunks: Vec<Bytes>) -> Vec<Result<WatchEvent<K>>>
    where
        K: DeserializeOwned + Send + Sync + 'static,
    {
        let data = futures::stream::iter(chunks.into_iter().map(Ok)).boxed();
        crate::decode_thread::events_from_chunks::<K>(data, Default::default(), false, false)
            .collect::<Vec<_>>()
            .now_or_never()
            .expect("an in-memory body is always ready")
    }

    /// Decodes a list response from `chunks` with the streaming list decoder, exactly as a list
    /// request does.
    pub fn list_page(chunks: &[&[u8]]) -> Result<crate::ListPage<serde_json::Value>> {
        crate::list_decode::ListDecoder::decode_chunks(chunks.iter().copied(), false)
    }

    /// Feeds `chunks` as the body of a protobuf watch response of `K` (a built-in kind)
    /// through the length-prefixed frame splitter and the protobuf event decoder, as a live
    /// watch with [`ApiListerWatcher::protobuf`](crate::ApiListerWatcher::protobuf) does.
    pub fn protobuf_watch_events<K>(chunks: Vec<Bytes>, strip: bool) -> Vec<Result<WatchEvent<K>>>
    where
        K: DeserializeOwned + kube::Resource<DynamicType = ()> + Send + Sync + 'static,
    {
        let data = futures::stream::iter(chunks.into_iter().map(Ok)).boxed();
        let decoding = crate::watch_decode::Decoding {
            strip_managed_fields: strip,
            protobuf: crate::protobuf::ProtobufKind::new(&K::api_version(&()), &K::kind(&()))
                .map(std::sync::Arc::new),
            ..Default::default()
        };
        crate::decode_thread::events_from_chunks::<K>(data, decoding, true, false)
            .collect::<Vec<_>>()
            .now_or_never()
            .expect("an in-memory body is always ready")
    }

    /// Decodes a protobuf list response of `K` (a built-in kind) from `chunks`, as a list
    /// request with protobuf on does.
    pub fn protobuf_list_page<K>(chunks: &[&[u8]], strip: bool) -> Result<crate::ListPage<K>>
    where
        K: DeserializeOwned + kube::Resource<DynamicType = ()> + Send + Sync + 'static,
    {
        protobuf_list_page_with_helpers(chunks, strip, 0, 1)
    }

    /// [`protobuf_list_page`] with up to `helpers` threads decoding the items, in batches of
    /// `batch` (a real list's batches are 256 items).
    pub fn protobuf_list_page_with_helpers<K>(
        chunks: &[&[u8]],
        strip: bool,
        helpers: usize,
        batch: usize,
    ) -> Result<crate::ListPage<K>>
    where
        K: DeserializeOwned + kube::Resource<DynamicType = ()> + Send + Sync + 'static,
    {
        let pb =
            crate::protobuf::ProtobufKind::new(&K::api_version(&()), &K::kind(&())).expect("a built-in kind");
        let mut d =
            crate::protobuf::ProtoListDecoder::<K>::new(std::sync::Arc::new(pb), strip, helpers, batch);
        for c in chunks {
            d.push(c)?;
        }
        d.finish()
    }

    /// The same list response decoded by serde in one pass over the whole body: the oracle.
    pub fn list_page_whole(body: &[u8]) -> Result<crate::ListPage<serde_json::Value>> {
        crate::list_decode::oracle::decode_list_whole(body, false)
    }
}

pub use api_lister_watcher::ApiListerWatcher;
pub use backoff::{Backoff, BackoffConfig};
pub use error::{ErrorKind, MAX_RETRY_AFTER, ReflectorError, Result};
// Defined in kcache-utils (feature `clock`), re-exported at the paths they always had.
pub use config::{DEFAULT_PAGE_SIZE, MIN_WATCH_TIMEOUT, ReflectorConfig, VERY_SHORT_WATCH};
pub use frame::MAX_FRAME_BYTES;
pub use kcache_utils::{Clock, FakeClock, Sleep, SystemClock};
pub use lister_watcher::{
    Bookmark, ListOptions, ListPage, ListerWatcher, WatchEvent, WatchOptions, WatchStream,
};
pub use metrics::{NoopMetrics, ReflectorMetrics, RelistReason};
pub use reflector::{
    Reflector, ReflectorHandle, ShouldResync, WatchErrorHandler, default_watch_error_handler,
};
pub use shard_mode::ShardMode;
