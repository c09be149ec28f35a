//! Waiting for caches to sync without polling: every change that can make something synced bumps
//! a watch channel.

use std::future::Future;
use std::pin::Pin;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// A counter bumped whenever an informer or one of its handlers may have become synced.
#[derive(Debug)]
pub(crate) struct SyncSignal {
    tx: watch::Sender<u64>,
}

impl SyncSignal {
    pub(crate) fn new() -> Self {
        Self { tx: watch::channel(0).0 }
    }

    pub(crate) fn bump(&self) {
        self.tx.send_modify(|v| *v = v.wrapping_add(1));
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.tx.subscribe()
    }
}

/// Something whose cache can be synced: an informer, or one handler's registration.
pub trait HasSynced: Send + Sync {
    /// Whether it is synced now.
    fn has_synced(&self) -> bool;

    /// Completes once [`has_synced`](HasSynced::has_synced) is true, or once it can no longer
    /// become true (its informer has stopped or failed).
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it only observes.
    fn wait_synced(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;
}

/// Waits until every item has synced, or `cancel` fires (client-go's `WaitForCacheSync`).
/// Returns whether all synced. An item whose informer stopped before it synced (its `run` future
/// was dropped, say) or failed ([`InformerFailure`](crate::InformerFailure)) ends the wait too,
/// since it never will: the result is then false.
///
/// # Cancel safety
///
/// Cancel-safe: it only observes.
pub async fn wait_for_cache_sync(cancel: &CancellationToken, items: &[&dyn HasSynced]) -> bool {
    let all = async {
        for item in items {
            item.wait_synced().await;
        }
    };
    tokio::select! {
        () = cancel.cancelled() => items.iter().all(|i| i.has_synced()),
        () = all => items.iter().all(|i| i.has_synced()),
    }
}

/// Waits on `signal` until `check` holds.
pub(crate) async fn wait_until(signal: &SyncSignal, check: impl Fn() -> bool) {
    let mut rx = signal.subscribe();
    loop {
        if check() {
            return;
        }
        if rx.changed().await.is_err() {
            return;
        }
    }
}
