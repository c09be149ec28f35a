//! Informer scenarios against the shared server of `kcache-bench serve` (URL from `--server`),
//! mirroring `xtask/bench-go/informer.go`. The kcache side waits for kcache-informer; this module
//! holds the kube-runtime side: `watcher` + `reflector` store, kube-runtime's informer.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube_runtime::{reflector, watcher};
use serde_json::json;

use super::Outcome;
use crate::measure::Timer;

/// Time to synced on kube-runtime: with a `kube::Client` for the server URL made untimed (no auth,
/// library defaults otherwise), timed: `reflector(store writer, watcher(Api::<ConfigMap>::all,
/// config))` driven on a Tokio task until the store's `wait_until_ready` returns, where config is
/// `watcher::Config::default()` (paginated list, then watch) or with `.streaming_lists()`
/// (watch-list). ops = objects in the store when synced (N loaded into the server);
/// `extra.watch_list` tells which.
fn synced(t: &mut Timer, watch_list: bool) -> Outcome {
    let Some(url) = crate::server_url() else {
        panic!("informer scenarios need --server URL (of `kcache-bench serve`)");
    };
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => panic!("runtime: {e}"),
    };
    let items = rt.block_on(async {
        let uri = url.parse().unwrap_or_else(|e| panic!("server URL {url}: {e}"));
        let client = kube::Client::try_from(kube::Config::new(uri)).unwrap_or_else(|e| panic!("client: {e}"));
        let api: Api<ConfigMap> = Api::all(client);
        let config = if watch_list {
            watcher::Config::default().streaming_lists()
        } else {
            watcher::Config::default()
        };
        t.start();
        let (reader, writer) = reflector::store();
        let stream = reflector(writer, watcher(api, config));
        let task = tokio::spawn(stream.for_each(|_| async {}));
        let ready = tokio::time::timeout(Duration::from_secs(60), reader.wait_until_ready()).await;
        t.stop();
        task.abort();
        match ready {
            Ok(Ok(())) => reader.state().len(),
            Ok(Err(e)) => panic!("store writer dropped before ready: {e}"),
            Err(_) => panic!("not synced within 60 s"),
        }
    });
    Outcome {
        ops: items as u64,
        extra: json!({"items": items, "watch_list": watch_list}).as_object().cloned().unwrap_or_default(),
    }
}

/// informer_synced_list_*: [`synced`] by list + watch. N is what the server was loaded with.
pub(super) fn kube_runtime_synced_list(_n: usize, t: &mut Timer) -> Outcome {
    synced(t, false)
}

/// informer_synced_watchlist_*: [`synced`] by watch-list (`streaming_lists`).
pub(super) fn kube_runtime_synced_watchlist(_n: usize, t: &mut Timer) -> Outcome {
    synced(t, true)
}

/// informer_memory_kube_rs (kube-rs's memory scenario): against a fresh `kcache-bench serve
/// --mutate` loaded with N ConfigMaps (default 10k) that, once the client watches, updates N/2 of
/// them, deletes N/10 and creates `bench/sentinel`. kube-runtime with its defaults
/// (`watcher::Config::default()`: list, then watch) feeding a reflector store; timed from starting
/// the watcher until the sentinel's event has been applied to the store. The figure to compare is
/// peak_rss_bytes. ops = N; `extra.items` = objects in the store at the end (N - N/10 + 1).
pub(super) fn kube_runtime_memory(n: usize, t: &mut Timer) -> Outcome {
    let Some(url) = crate::server_url() else {
        panic!("informer scenarios need --server URL (of `kcache-bench serve`)");
    };
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => panic!("runtime: {e}"),
    };
    let items = rt.block_on(async {
        let uri = url.parse().unwrap_or_else(|e| panic!("server URL {url}: {e}"));
        let client = kube::Client::try_from(kube::Config::new(uri)).unwrap_or_else(|e| panic!("client: {e}"));
        let api: Api<ConfigMap> = Api::all(client);
        t.start();
        let (reader, writer) = reflector::store();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let mut tx = Some(tx);
        let stream = reflector(writer, watcher(api, watcher::Config::default()));
        let task = tokio::spawn(stream.for_each(move |ev| {
            // After a relist the sentinel comes as part of the new initial list.
            if let Ok(watcher::Event::Apply(cm) | watcher::Event::InitApply(cm)) = &ev
                && cm.metadata.name.as_deref() == Some("sentinel")
                && let Some(tx) = tx.take()
            {
                let _ = tx.send(());
            }
            async {}
        }));
        let seen = tokio::time::timeout(Duration::from_secs(60), rx).await;
        t.stop();
        task.abort();
        match seen {
            Ok(Ok(())) => reader.state().len(),
            _ => panic!("the sentinel did not arrive within 60 s"),
        }
    });
    Outcome { ops: n as u64, extra: json!({"items": items}).as_object().cloned().unwrap_or_default() }
}
