//! The transport seam: the [`ListerWatcher`] trait and the requests and results it deals in.

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use kcache_shard_selector::ShardSelector;
use kube::core::Status;

use crate::error::Result;

/// Parameters of one list request (one page).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListOptions {
    /// `resourceVersion`: "" (consistent read), "0" (any, e.g. from the watch cache) or N (not
    /// older than N). Never sent on continuation pages.
    pub resource_version: String,
    /// `limit`: page size; `None` asks for everything in one response.
    pub limit: Option<u32>,
    /// `continue`: the token from the previous page.
    pub continue_token: Option<String>,
    /// `shardSelector` (KEP-5866): the shard to list. The reflector sets it on every page from
    /// its [`shard_selector`](crate::Reflector::shard_selector).
    pub shard_selector: Option<ShardSelector>,
}

/// One page of a list response.
#[derive(Debug, Clone)]
pub struct ListPage<K> {
    /// The objects, each in the `Arc` the stores keep. [`ApiListerWatcher`] decodes every item
    /// straight into its `Arc`, so a large list never also sits in a `Vec<K>` of its own.
    ///
    /// [`ApiListerWatcher`]: crate::ApiListerWatcher
    pub items: Vec<Arc<K>>,
    /// `metadata.resourceVersion` of the list.
    pub resource_version: String,
    /// `metadata.continue`: present when more pages follow.
    pub continue_token: Option<String>,
    /// `metadata.shardInfo.selector`: present when the server filtered the list by a shard
    /// selector (KEP-5866; kube-apiserver echoes the selector it applied). A page without it,
    /// asked for with a selector, comes from a server that did not filter.
    pub shard_info: Option<String>,
}

/// Parameters of one watch request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchOptions {
    /// `resourceVersion` to start from ("" or "0" produce synthetic ADDED events first).
    pub resource_version: String,
    /// `timeoutSeconds`: the server ends the watch cleanly after this long.
    pub timeout_seconds: u64,
    /// `allowWatchBookmarks`.
    pub allow_bookmarks: bool,
    /// `sendInitialEvents=true` with `resourceVersionMatch=NotOlderThan` (watch-list).
    pub send_initial_events: bool,
    /// `shardSelector` (KEP-5866): the shard to watch, as for [`ListOptions::shard_selector`].
    pub shard_selector: Option<ShardSelector>,
}

/// A BOOKMARK event: the server's position, and whether it ends a watch-list's initial events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bookmark {
    /// `metadata.resourceVersion` of the bookmark object.
    pub resource_version: String,
    /// The bookmark carries the annotation `k8s.io/initial-events-end: "true"`.
    pub initial_events_end: bool,
}

/// One decoded watch event.
///
/// Objects come in an [`Arc`], allocated where they were decoded, and go into the store as they
/// are.
#[derive(Debug, Clone)]
pub enum WatchEvent<K> {
    /// ADDED.
    Added(Arc<K>),
    /// MODIFIED.
    Modified(Arc<K>),
    /// DELETED, carrying the object's last state.
    Deleted(Arc<K>),
    /// BOOKMARK.
    Bookmark(Bookmark),
    /// ERROR, with the Status the server sent.
    Error(Box<Status>),
}

/// A stream of watch events. It ends when the server closes the watch; an `Err` item means the
/// watch is broken and the caller should stop reading it.
pub type WatchStream<K> = BoxStream<'static, Result<WatchEvent<K>>>;

/// Lists and watches one collection: the reflector's only view of the API server.
///
/// [`ApiListerWatcher`] implements it over `kube::Api`; tests and other transports can plug in
/// their own. Selectors and namespace belong to the implementation, not to the options, exactly
/// as client-go's `ListWatch` closes over them.
///
/// [`ApiListerWatcher`]: crate::ApiListerWatcher
pub trait ListerWatcher<K>: Send + Sync + 'static {
    /// Lists one page.
    fn list(&self, opts: ListOptions) -> BoxFuture<'static, Result<ListPage<K>>>;
    /// Opens a watch.
    fn watch(&self, opts: WatchOptions) -> BoxFuture<'static, Result<WatchStream<K>>>;
    /// The shard selector this lister-watcher was built with, if any
    /// ([`ApiListerWatcher::shard_selector`](crate::ApiListerWatcher::shard_selector)): a
    /// reflector without a selector of its own adopts it, so that an informer built on a sharded
    /// lister-watcher filters and reports its [`ShardMode`](crate::ShardMode). `None` by default.
    fn shard_selector(&self) -> Option<ShardSelector> {
        None
    }
    /// Whether a list page from a server that filtered by `shardSelector` carries
    /// [`ListPage::shard_info`], so that a page without it proves the server did not filter.
    /// True by default. [`ApiListerWatcher`](crate::ApiListerWatcher) says false for
    /// metadata-only lists: kube-apiserver builds a `PartialObjectMetadataList` with the
    /// resource version, continue token and remaining count of the list and nothing else
    /// (`asPartialObjectMetadataList`), so its `shardInfo` is lost; the reflector then judges by
    /// the objects alone, as for a watch-list.
    fn lists_carry_shard_info(&self) -> bool {
        true
    }
}

impl<K, T: ListerWatcher<K> + ?Sized> ListerWatcher<K> for std::sync::Arc<T> {
    fn list(&self, opts: ListOptions) -> BoxFuture<'static, Result<ListPage<K>>> {
        (**self).list(opts)
    }

    fn watch(&self, opts: WatchOptions) -> BoxFuture<'static, Result<WatchStream<K>>> {
        (**self).watch(opts)
    }

    fn shard_selector(&self) -> Option<ShardSelector> {
        (**self).shard_selector()
    }

    fn lists_carry_shard_info(&self) -> bool {
        (**self).lists_carry_shard_info()
    }
}
