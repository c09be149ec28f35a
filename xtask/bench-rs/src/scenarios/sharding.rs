//! Issue 34's sharding scenario (item 7): one replica of N, syncing its shard of the
//! collection, with server-side sharding, client-side filtering or no sharding at all. kcache
//! only: client-go has no sharding of its own to compare with (it passes `shardSelector`
//! through), so `cargo xtask bench` compares the modes with each other.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kcache_reflector::{Reflector, ReflectorMetrics, ShardMode};
use kcache_shard_selector::{ShardKey, ShardSelector};
use kube::Api;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::Outcome;
use super::informer::{kcache_client, kcache_lister_watcher};
use crate::measure::Timer;

/// How many shards the collection is split into (`KCACHE_BENCH_SHARDS`, default 1); the replica
/// measured is the first. `0` means no shard selector at all (unsharded).
fn shards() -> usize {
    std::env::var("KCACHE_BENCH_SHARDS").ok().and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// Bytes the process has read from file descriptors so far (`rchar` of `/proc/self/io`): the
/// response bodies (TLS records, so a little more than the bodies) and little else once the
/// client is built.
fn bytes_read() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|io| io.lines().find_map(|l| l.strip_prefix("rchar: ").and_then(|v| v.trim().parse().ok())))
        .unwrap_or(0)
}

/// Remembers the last [`ShardMode`] reported.
#[derive(Debug, Default)]
struct LastMode(std::sync::Mutex<Option<ShardMode>>);

impl ReflectorMetrics for LastMode {
    fn shard_mode(&self, _: &str, mode: ShardMode) {
        *self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(mode);
    }
}

/// sharding_sync_50k on kcache: timed, as `reflector_synced_list_50k`: a reflector (LIST +
/// WATCH, the `ApiListerWatcher` of every scenario, protobuf as `KCACHE_BENCH_PROTOBUF` says)
/// into a plain store, with the shard selector of shard 0 of `ShardSelector::split(Uid,
/// KCACHE_BENCH_SHARDS)` (none when unset), until its first `replace`. Whether the server filters
/// (server-side) or not (client-side) is the server's business: `cargo xtask bench` points the
/// scenario at a kube-apiserver with or without `ShardedListAndWatch`. ops = objects in the
/// store; extra: the bytes read while syncing, the mode the reflector ended in, the shards.
pub(super) fn kcache_sharded_sync(_n: usize, t: &mut Timer) -> Outcome {
    let shards = shards();
    let selector = (shards > 0).then(|| ShardSelector::split(ShardKey::Uid, shards).swap_remove(0));
    let (rt, client) = kcache_client();
    let modes = Arc::new(LastMode::default());
    let (items, bytes) = rt.block_on(async {
        let api: Api<ConfigMap> = Api::all(client);
        let cancel = CancellationToken::new();
        let read0 = bytes_read();
        t.start();
        let (store, [replaced, _, _]) = super::reflector::signalling_store();
        let lw = kcache_lister_watcher(api).shard_selector(selector.clone());
        let reflector = Reflector::new(lw, Arc::clone(&store))
            .use_watch_list(false)
            .metrics(Arc::clone(&modes) as Arc<dyn ReflectorMetrics>);
        let task = tokio::spawn(reflector.run(cancel.clone()));
        let synced = tokio::time::timeout(Duration::from_secs(120), replaced).await;
        t.stop();
        let bytes = bytes_read().saturating_sub(read0);
        cancel.cancel();
        let _ = task.await;
        match synced {
            Ok(Ok(())) => (store.len(), bytes),
            _ => panic!("reflector not synced within 120 s"),
        }
    });
    let mode = modes.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).map(ShardMode::as_str);
    Outcome {
        ops: items as u64,
        extra: json!({
            "items": items,
            "shards": shards,
            "selector": selector.map(|s| s.to_string()),
            "shard_mode": mode,
            "bytes_read": bytes,
        })
        .as_object()
        .cloned()
        .unwrap_or_default(),
    }
}
