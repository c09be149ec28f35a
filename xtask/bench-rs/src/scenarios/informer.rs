//! Informer scenarios against the shared server of `kcache-bench serve` (URL from `--server`),
//! mirroring `xtask/bench-go/informer.go`: the kcache side (kcache-informer's
//! `SharedIndexInformer`) and the kube-runtime side (`watcher` + `reflector` store, kube-runtime's
//! informer).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[cfg(feature = "kube-runtime")]
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_informer::{EventHandlerFuncs, SharedIndexInformer, wait_for_cache_sync};
use kcache_reflector::{ApiListerWatcher, ReflectorConfig};
use kube::Api;
#[cfg(feature = "kube-runtime")]
use kube_runtime::{WatchStreamExt as _, reflector, watcher};
use serde_json::json;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::Outcome;
use crate::measure::Timer;

/// What `cargo xtask bench --managed-fields` asked every side to do with
/// `metadata.managedFields` (environment `KCACHE_BENCH_STRIP_MANAGED_FIELDS`): `Some(true)` drop
/// them (`1`), `Some(false)` keep them (`0`), `None` (unset) each library's default.
pub(super) fn strip_managed_fields() -> Option<bool> {
    match std::env::var("KCACHE_BENCH_STRIP_MANAGED_FIELDS").ok()?.as_str() {
        "1" => Some(true),
        "0" => Some(false),
        other => panic!("KCACHE_BENCH_STRIP_MANAGED_FIELDS={other}: expected 0 or 1"),
    }
}

/// Whether kcache speaks protobuf (`ApiListerWatcher::protobuf(true)`): the side
/// `kcache-protobuf` of `cargo xtask bench`, which runs this binary with
/// `KCACHE_BENCH_PROTOBUF=1`.
pub(super) fn protobuf() -> bool {
    std::env::var("KCACHE_BENCH_PROTOBUF").is_ok_and(|v| v == "1")
}

/// `ApiListerWatcher::new(api)`, speaking protobuf with one decoding helper as [`protobuf`] says
/// (`.protobuf(true).decode_helpers(1)`), with `strip_managed_fields` set as [`strip_managed_fields`] asks (left at kcache's default, which
/// skips them while decoding, when unset).
pub(super) fn kcache_lister_watcher(api: Api<ConfigMap>) -> ApiListerWatcher<ConfigMap> {
    let lw = ApiListerWatcher::new(api).protobuf(protobuf()).decode_helpers(usize::from(protobuf()));
    match strip_managed_fields() {
        Some(strip) => lw.strip_managed_fields(strip),
        None => lw,
    }
}

/// The kcache informer of every scenario: `SharedIndexInformer::new(kcache_lister_watcher(api),
/// no resync)`.
fn kcache_informer(api: Api<ConfigMap>) -> SharedIndexInformer<ConfigMap> {
    SharedIndexInformer::new(kcache_lister_watcher(api), Duration::ZERO)
}

/// kube-runtime's watcher of every scenario: `watcher(api, config).default_backoff()` (kube-runtime's
/// documented usage: without a backoff a failing watch is retried in a loop that never yields, so
/// the task cannot even be aborted), clearing each object's managed fields (after the full decode,
/// as `WatchStreamExt::modify` does) when [`strip_managed_fields`] says `Some(true)` (kube-runtime
/// keeps them by default).
#[cfg(feature = "kube-runtime")]
pub(super) fn kube_runtime_watcher(
    api: Api<ConfigMap>,
    config: watcher::Config,
) -> impl futures::Stream<Item = watcher::Result<watcher::Event<ConfigMap>>> + Send {
    let strip = strip_managed_fields() == Some(true);
    watcher(api, config)
        .default_backoff()
        .map(move |ev| if strip { ev.map(|e| e.modify(|o| o.metadata.managed_fields = None)) } else { ev })
}

/// Time to synced on kube-runtime: with a `kube::Client` for the server URL made untimed (no auth,
/// library defaults otherwise), timed: `reflector(store writer, watcher(Api::<ConfigMap>::all,
/// config))` driven on a Tokio task until the store's `wait_until_ready` returns, where config is
/// `watcher::Config::default()` (paginated list, then watch) or with `.streaming_lists()`
/// (watch-list). ops = objects in the store when synced (N loaded into the server);
/// `extra.watch_list` tells which.
#[cfg(feature = "kube-runtime")]
fn synced(t: &mut Timer, watch_list: bool) -> Outcome {
    let (rt, client) = kcache_client();
    let items = rt.block_on(async {
        let api: Api<ConfigMap> = Api::all(client);
        let config = if watch_list {
            watcher::Config::default().streaming_lists()
        } else {
            watcher::Config::default()
        };
        t.start();
        let (reader, writer) = reflector::store();
        let stream = reflector(writer, kube_runtime_watcher(api, config));
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
#[cfg(feature = "kube-runtime")]
pub(super) fn kube_runtime_synced_list(_n: usize, t: &mut Timer) -> Outcome {
    synced(t, false)
}

/// informer_synced_watchlist_*: [`synced`] by watch-list (`streaming_lists`).
#[cfg(feature = "kube-runtime")]
pub(super) fn kube_runtime_synced_watchlist(_n: usize, t: &mut Timer) -> Outcome {
    synced(t, true)
}

/// informer_memory_kube_rs (kube-rs's memory scenario): against a fresh `kcache-bench serve
/// --mutate` loaded with N ConfigMaps (default 10k) that, once the client watches, updates N/2 of
/// them, deletes N/10 and creates `bench/sentinel`. kube-runtime with its defaults
/// (`watcher::Config::default()`: list, then watch) feeding a reflector store; timed from starting
/// the watcher until the sentinel's event has been applied to the store. The figure to compare is
/// peak_rss_bytes. ops = N; `extra.items` = objects in the store at the end (N - N/10 + 1).
#[cfg(feature = "kube-runtime")]
pub(super) fn kube_runtime_memory(n: usize, t: &mut Timer) -> Outcome {
    let (rt, client) = kcache_client();
    let items = rt.block_on(async {
        let api: Api<ConfigMap> = Api::all(client);
        t.start();
        let (reader, writer) = reflector::store();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let mut tx = Some(tx);
        let stream = reflector(writer, kube_runtime_watcher(api, watcher::Config::default()));
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

/// The Tokio runtime and the `kube::Client` for the server (both made untimed; see
/// [`crate::client`]).
pub(super) fn kcache_client() -> (tokio::runtime::Runtime, kube::Client) {
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => panic!("runtime: {e}"),
    };
    let client = rt.block_on(crate::client());
    (rt, client)
}

/// The sending half of a one-shot "done" signal, shared with a handler thread that fires it once.
type Signal = Arc<Mutex<Option<oneshot::Sender<()>>>>;

/// A one-shot "done" signal a handler thread fires once; the scenario awaits the receiver.
fn done_signal() -> (Signal, oneshot::Receiver<()>) {
    let (tx, rx) = oneshot::channel();
    (Arc::new(Mutex::new(Some(tx))), rx)
}

/// Fires `signal` (the first call only).
fn fire(signal: &Mutex<Option<oneshot::Sender<()>>>) {
    let tx = signal.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
    if let Some(tx) = tx {
        let _ = tx.send(());
    }
}

/// Time to synced on kcache: with a `kube::Client` for the server URL made untimed (no auth,
/// library defaults otherwise), timed: [`kcache_informer()`]`(Api::<ConfigMap>::all)` (keyed by namespace/name, indexed by namespace, as client-go's) with
/// `ReflectorConfig::use_watch_list` false (a list, then a watch) or true (one watch with
/// sendInitialEvents), run on a Tokio task until `wait_for_cache_sync` on the informer returns (no
/// polling). ops = objects in the store when synced (N loaded into the server); `extra.watch_list`
/// tells which.
fn kcache_synced(t: &mut Timer, watch_list: bool) -> Outcome {
    let (rt, client) = kcache_client();
    let items = rt.block_on(async {
        let api: Api<ConfigMap> = Api::all(client);
        let cancel = CancellationToken::new();
        t.start();
        let informer = kcache_informer(api);
        informer
            .set_reflector_config(ReflectorConfig { use_watch_list: watch_list, ..Default::default() })
            .unwrap_or_else(|e| panic!("reflector config: {e}"));
        let task = tokio::spawn({
            let i = informer.clone();
            let c = cancel.clone();
            async move { i.run(c).await }
        });
        let synced =
            tokio::time::timeout(Duration::from_secs(60), wait_for_cache_sync(&cancel, &[&informer])).await;
        t.stop();
        let items = informer.indexer().len();
        cancel.cancel();
        let _ = task.await;
        match synced {
            Ok(true) => items,
            Ok(false) => panic!("informer stopped before synced"),
            Err(_) => panic!("informer not synced within 60 s"),
        }
    });
    Outcome {
        ops: items as u64,
        extra: json!({"items": items, "watch_list": watch_list}).as_object().cloned().unwrap_or_default(),
    }
}

/// informer_synced_list_*: [`kcache_synced`] by list + watch. N is what the server was loaded with.
pub(super) fn kcache_synced_list(_n: usize, t: &mut Timer) -> Outcome {
    kcache_synced(t, false)
}

/// informer_synced_watchlist_*: [`kcache_synced`] by watch-list (the reflector's default).
pub(super) fn kcache_synced_watchlist(_n: usize, t: &mut Timer) -> Outcome {
    kcache_synced(t, true)
}

/// event_fanout_3_handlers on kcache: a `SharedIndexInformer` as in [`kcache_synced`] with the
/// reflector's defaults (watch-list on) and 3 event handlers registered before it runs, each
/// counting its Add notifications and signalling at the N-th (N = ConfigMaps loaded into the
/// server, default 100k). Timed: from spawning `run` until every handler has been handed all N
/// objects as Adds (no polling). ops = 3N notifications delivered.
pub(super) fn kcache_event_fanout(n: usize, t: &mut Timer) -> Outcome {
    let (rt, client) = kcache_client();
    rt.block_on(async {
        let api: Api<ConfigMap> = Api::all(client);
        let informer = kcache_informer(api);
        let mut receivers = Vec::with_capacity(3);
        for _ in 0..3 {
            let (signal, rx) = done_signal();
            let seen = AtomicUsize::new(0);
            informer
                .add_event_handler(EventHandlerFuncs::new().on_add(move |_: &Arc<ConfigMap>, _| {
                    if seen.fetch_add(1, Ordering::Relaxed) + 1 == n {
                        fire(&signal);
                    }
                }))
                .unwrap_or_else(|e| panic!("add handler: {e}"));
            receivers.push(rx);
        }
        let cancel = CancellationToken::new();
        t.start();
        let task = tokio::spawn({
            let i = informer.clone();
            let c = cancel.clone();
            async move { i.run(c).await }
        });
        let all = tokio::time::timeout(Duration::from_secs(60), futures::future::join_all(receivers)).await;
        t.stop();
        cancel.cancel();
        let _ = task.await;
        match all {
            Ok(r) if r.iter().all(Result::is_ok) => {}
            _ => panic!("handlers did not see every object within 60 s"),
        }
    });
    Outcome {
        ops: 3 * n as u64,
        extra: json!({"handlers": 3, "objects": n}).as_object().cloned().unwrap_or_default(),
    }
}

/// informer_memory_kube_rs on kcache: against a fresh `kcache-bench serve --mutate` loaded with N
/// ConfigMaps (default 10k) that, once the client watches, updates N/2 of them, deletes N/10 and
/// creates `bench/sentinel`. A `SharedIndexInformer` as in [`kcache_synced`] with the reflector's
/// defaults (watch-list on) and one handler that signals when `bench/sentinel` is added; timed from
/// building the informer until that Add. The figure to compare is peak_rss_bytes. ops = N;
/// `extra.items` = objects in the store at the end (N - N/10 + 1).
pub(super) fn kcache_memory(n: usize, t: &mut Timer) -> Outcome {
    let (rt, client) = kcache_client();
    let items = rt.block_on(async {
        let api: Api<ConfigMap> = Api::all(client);
        let cancel = CancellationToken::new();
        t.start();
        let informer = kcache_informer(api);
        let (signal, rx) = done_signal();
        informer
            .add_event_handler(EventHandlerFuncs::new().on_add(move |cm: &Arc<ConfigMap>, _| {
                if cm.metadata.namespace.as_deref() == Some("bench")
                    && cm.metadata.name.as_deref() == Some("sentinel")
                {
                    fire(&signal);
                }
            }))
            .unwrap_or_else(|e| panic!("add handler: {e}"));
        let task = tokio::spawn({
            let i = informer.clone();
            let c = cancel.clone();
            async move { i.run(c).await }
        });
        let seen = tokio::time::timeout(Duration::from_secs(60), rx).await;
        t.stop();
        let items = informer.indexer().len();
        cancel.cancel();
        let _ = task.await;
        match seen {
            Ok(Ok(())) => items,
            _ => panic!("the sentinel did not arrive within 60 s"),
        }
    });
    Outcome { ops: n as u64, extra: json!({"items": items}).as_object().cloned().unwrap_or_default() }
}
