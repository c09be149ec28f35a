//! A lister-watcher that can expire a continue token on demand: it compacts the server's
//! history just before sending the next continuation-page request, so the server answers that
//! page with its real "continue parameter is too old" 410.
//!
//! Compaction between two pages of a list is a matter of timing on a real cluster; this makes
//! it a scheduled fault instead.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_reflector::{
    ApiListerWatcher, ListOptions, ListPage, ListerWatcher, Result, WatchOptions, WatchStream,
};
use kcache_testserver::Faults;

/// Wraps an [`ApiListerWatcher`]; each unit of `armed` expires one continue token.
pub(crate) struct ContinueExpiringLw {
    pub(crate) inner: ApiListerWatcher<ConfigMap>,
    pub(crate) faults: Faults,
    /// Continue tokens still to expire.
    pub(crate) armed: Arc<AtomicU64>,
    /// Continue tokens expired so far.
    pub(crate) fired: Arc<AtomicU64>,
}

impl ListerWatcher<ConfigMap> for ContinueExpiringLw {
    fn list(&self, opts: ListOptions) -> BoxFuture<'static, Result<ListPage<ConfigMap>>> {
        if opts.continue_token.is_some()
            && self.armed.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1)).is_ok()
        {
            self.faults.compact();
            self.fired.fetch_add(1, Ordering::Relaxed);
        }
        self.inner.list(opts)
    }

    fn watch(&self, opts: WatchOptions) -> BoxFuture<'static, Result<WatchStream<ConfigMap>>> {
        self.inner.watch(opts)
    }
}
