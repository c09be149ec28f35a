//! The scale scenarios (issue #37), mirroring `xtask/bench-go/scale.go`: one informer each for
//! Pods, Secrets and ConfigMaps, all namespaces, against `kcache-bench serve --pods N` (N Pods
//! shaped like a real cluster's, N/5 Secrets, N/10 ConfigMaps; see `crate::scale`), with whole
//! objects (`scale_full`) or metadata only (`scale_metadata`: `PartialObjectMetadata`).
//!
//! Timed: from building the informers until all three are synced. Reported besides the usual
//! figures: `peak_rss_bytes` (ru_maxrss), and `extra.steady_rss_bytes`, the resident set once
//! synced, after one second idle and once the allocator has returned what is free to the OS
//! (`malloc_trim(0)` here; `runtime.GC()` and `debug.FreeOSMemory()` on the Go side): what the
//! caches hold, not how lazily each allocator gives memory back.

use std::time::Duration;

#[cfg(feature = "kube-runtime")]
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kcache_informer::{CacheRepr, SharedIndexInformer, wait_for_cache_sync};
use kcache_reflector::ApiListerWatcher;
use kube::Api;
use kube::core::PartialObjectMeta;
#[cfg(feature = "kube-runtime")]
use kube_runtime::{WatchStreamExt as _, reflector, watcher};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::Outcome;
use super::informer::{kcache_client, strip_managed_fields};
use crate::measure::{Timer, peak_rss_bytes};

/// The resident set now, in bytes (`/proc/self/statm`'s second field, in pages).
#[allow(unsafe_code)]
fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * u64::try_from(page).unwrap_or(4096)
}

/// What the process holds once synced: the steady resident set (one second idle, then freed
/// memory handed back to the OS) and how it splits.
struct Steady {
    /// RSS after the idle second, before `malloc_trim(0)`.
    before_trim: u64,
    /// RSS after `malloc_trim(0)`: the figure the target is on.
    rss: u64,
    /// glibc's bytes in use (`mallinfo2`: `uordblks + hblkhd`, every arena): the live heap.
    heap_in_use: u64,
    /// glibc's free bytes still inside its arenas after the trim (`fordblks`).
    heap_free: u64,
    /// What reading the Pod cache costs (kcache only): see [`read_costs`].
    reads: Option<serde_json::Value>,
}

/// This thread's CPU time, in nanoseconds (`CLOCK_THREAD_CPUTIME_ID`): read costs on a shared,
/// busy machine, where wall time mostly measures waiting for a core.
#[allow(unsafe_code)]
fn thread_cpu_ns() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given and nothing else.
    unsafe {
        libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts);
    }
    ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64
}

/// Times reads of the synced Pod cache through its lister, after the steady figures: 10k
/// `get`s (every tenth key) and one `list` of the whole cache, in nanoseconds of this thread's
/// CPU time (and of wall time). The cost a serialized cache (`CacheRepr::Serialized`) pays on
/// every read, beside the default's.
fn read_costs<K>(informer: &SharedIndexInformer<K>) -> serde_json::Value
where
    K: kube::Resource + k8s_openapi::serde::de::DeserializeOwned + Send + Sync + 'static,
{
    let lister = informer.lister();
    let keys: Vec<_> = informer.indexer().list_keys().into_iter().step_by(10).take(10_000).collect();
    let (wall, cpu) = (std::time::Instant::now(), thread_cpu_ns());
    for k in &keys {
        std::hint::black_box(lister.get(k));
    }
    let n = keys.len().max(1) as f64;
    let (get_cpu, get_wall) = ((thread_cpu_ns() - cpu) / n, wall.elapsed().as_nanos() as f64 / n);
    let (wall, cpu) = (std::time::Instant::now(), thread_cpu_ns());
    let listed = std::hint::black_box(lister.list()).len();
    let (list_cpu, list_wall) = (thread_cpu_ns() - cpu, wall.elapsed().as_nanos() as f64);
    json!({"get_cpu_ns_per_op": get_cpu, "get_ns_per_op": get_wall, "list_cpu_ns": list_cpu,
        "list_ns": list_wall, "listed": listed})
}

/// The steady resident set: one second idle, then freed memory handed back to the OS.
#[allow(unsafe_code)]
async fn steady_rss() -> Steady {
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before_trim = rss_bytes();
    // SAFETY: malloc_trim only releases free memory of glibc's heap; no pointer is involved.
    unsafe {
        libc::malloc_trim(0);
    }
    let rss = rss_bytes();
    // SAFETY: mallinfo2 only reads glibc's counters.
    let mi = unsafe { libc::mallinfo2() };
    Steady {
        before_trim,
        rss,
        heap_in_use: (mi.uordblks + mi.hblkhd) as u64,
        heap_free: mi.fordblks as u64,
        reads: None,
    }
}

/// The figures every side reports.
fn outcome(items: usize, peak: u64, steady: Steady, metadata: bool) -> Outcome {
    Outcome {
        ops: items as u64,
        extra: json!({"items": items, "peak_rss_at_synced_bytes": peak, "steady_rss_bytes": steady.rss,
            "rss_before_trim_bytes": steady.before_trim, "heap_in_use_bytes": steady.heap_in_use,
            "heap_free_bytes": steady.heap_free, "reads": steady.reads, "metadata_only": metadata})
        .as_object()
        .cloned()
        .unwrap_or_default(),
    }
}

/// A kcache informer of `lw` (no resync, namespace index, the reflector's defaults: watch-list
/// on, managed fields skipped) running on a task; its cache serialized
/// (`CacheRepr::Serialized`) when the environment says `KCACHE_BENCH_CACHE=serialized` (the
/// harness's `kcache-serialized` side), zstd-compressed (`CacheRepr::Compressed`) with
/// `compressed` (`kcache-compressed`), kcache's default otherwise.
fn start<K>(
    lw: ApiListerWatcher<K>,
    cancel: &CancellationToken,
) -> (SharedIndexInformer<K>, tokio::task::JoinHandle<()>)
where
    K: kube::Resource
        + k8s_openapi::serde::Serialize
        + k8s_openapi::serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
    ApiListerWatcher<K>: kcache_reflector::ListerWatcher<K>,
{
    let informer = SharedIndexInformer::new(lw, Duration::ZERO);
    match std::env::var("KCACHE_BENCH_CACHE").as_deref() {
        Ok("serialized") => informer.set_cache_representation(CacheRepr::Serialized).expect("not started"),
        Ok("compressed") => informer.set_cache_representation(CacheRepr::Compressed).expect("not started"),
        _ => {}
    }
    let task = tokio::spawn({
        let i = informer.clone();
        let c = cancel.clone();
        async move {
            let _ = i.run(c).await;
        }
    });
    (informer, task)
}

/// `ApiListerWatcher::new(api)`, with `compact_objects(true)` when the environment says
/// `KCACHE_BENCH_COMPACT=1` (the harness's `kcache-compact` side; off, kcache's default,
/// otherwise), and `strip_managed_fields` as `--managed-fields` asks (see
/// [`strip_managed_fields`]; kcache's default, skipping them, when unset).
fn lister_watcher<K>(api: Api<K>) -> ApiListerWatcher<K>
where
    K: kube::Resource + Clone + 'static,
{
    let mut lw = ApiListerWatcher::new(api);
    if std::env::var("KCACHE_BENCH_COMPACT").is_ok_and(|v| v == "1") {
        lw = lw.compact_objects(true);
    }
    match strip_managed_fields() {
        Some(strip) => lw.strip_managed_fields(strip),
        None => lw,
    }
}

/// Waits (240 s at most) for the Pod, Secret and ConfigMap informers to sync, stops the timer,
/// and measures: the objects cached, the peak RSS, and the steady figures with the Pod cache's
/// read costs.
async fn synced_and_measured<P, S, C>(
    t: &mut Timer,
    cancel: &CancellationToken,
    p: &SharedIndexInformer<P>,
    s: &SharedIndexInformer<S>,
    c: &SharedIndexInformer<C>,
) -> (usize, u64, Steady)
where
    P: kube::Resource + k8s_openapi::serde::de::DeserializeOwned + Send + Sync + 'static,
    S: kube::Resource + k8s_openapi::serde::de::DeserializeOwned + Send + Sync + 'static,
    C: kube::Resource + k8s_openapi::serde::de::DeserializeOwned + Send + Sync + 'static,
{
    let synced = tokio::time::timeout(Duration::from_secs(240), async {
        wait_for_cache_sync(cancel, &[p]).await
            && wait_for_cache_sync(cancel, &[s]).await
            && wait_for_cache_sync(cancel, &[c]).await
    })
    .await;
    t.stop();
    assert!(matches!(synced, Ok(true)), "not synced within 240 s");
    let peak = peak_rss_bytes();
    let mut steady = steady_rss().await;
    steady.reads = Some(read_costs(p));
    (p.indexer().len() + s.indexer().len() + c.indexer().len(), peak, steady)
}

/// kcache: three `SharedIndexInformer`s, of whole objects or of `PartialObjectMeta`.
fn kcache(t: &mut Timer, metadata: bool) -> Outcome {
    let (rt, client) = kcache_client();
    let (items, peak, steady) = rt.block_on(async {
        let cancel = CancellationToken::new();
        t.start();
        let (items, peak, steady, tasks) = if metadata {
            let (p, tp) = start(lister_watcher(Api::<PartialObjectMeta<Pod>>::all(client.clone())), &cancel);
            let (s, ts) =
                start(lister_watcher(Api::<PartialObjectMeta<Secret>>::all(client.clone())), &cancel);
            let (c, tc) = start(lister_watcher(Api::<PartialObjectMeta<ConfigMap>>::all(client)), &cancel);
            let (items, peak, steady) = synced_and_measured(t, &cancel, &p, &s, &c).await;
            (items, peak, steady, [tp, ts, tc])
        } else {
            let (p, tp) = start(lister_watcher(Api::<Pod>::all(client.clone())), &cancel);
            let (s, ts) = start(lister_watcher(Api::<Secret>::all(client.clone())), &cancel);
            let (c, tc) = start(lister_watcher(Api::<ConfigMap>::all(client)), &cancel);
            let (items, peak, steady) = synced_and_measured(t, &cancel, &p, &s, &c).await;
            (items, peak, steady, [tp, ts, tc])
        };
        cancel.cancel();
        for task in tasks {
            let _ = task.await;
        }
        (items, peak, steady)
    });
    outcome(items, peak, steady, metadata)
}

/// scale_full on kcache: whole Pods, Secrets and ConfigMaps.
pub(super) fn kcache_full(_n: usize, t: &mut Timer) -> Outcome {
    kcache(t, false)
}

/// scale_metadata on kcache: `metadata_informer`'s lister-watcher, `PartialObjectMeta<K>`.
pub(super) fn kcache_metadata(_n: usize, t: &mut Timer) -> Outcome {
    kcache(t, true)
}

/// kube-runtime: `reflector(store, watcher(...))` per resource, of `Api<K>` or, for metadata
/// only, `Api<PartialObjectMeta<K>>` (what kube 5 has `metadata_watcher` do), with
/// `watcher::Config::default()`, each on a task, until every store is ready.
#[cfg(feature = "kube-runtime")]
fn kube_runtime(t: &mut Timer, metadata: bool) -> Outcome {
    let (rt, client) = kcache_client();
    let (items, peak, steady) = rt.block_on(async {
        t.start();
        macro_rules! spawn {
            ($k:ty) => {{
                let (reader, writer) = reflector::store();
                // With `--managed-fields strip`, cleared after decoding as kube-runtime users do
                // (`WatchStreamExt::modify`); kept otherwise (kube-runtime's default).
                let strip = strip_managed_fields() == Some(true);
                let stream = reflector(
                    writer,
                    watcher(Api::<$k>::all(client.clone()), watcher::Config::default())
                        .default_backoff()
                        .map(move |ev| {
                            if strip {
                                ev.map(|e| e.modify(|o| o.metadata.managed_fields = None))
                            } else {
                                ev
                            }
                        }),
                );
                (reader, tokio::spawn(stream.for_each(|_| async {})))
            }};
        }
        // Waits (240 s at most) for the three stores, stops the timer, counts what they hold.
        macro_rules! synced {
            ($p:ty, $s:ty, $c:ty) => {{
                let (p, tp) = spawn!($p);
                let (s, ts) = spawn!($s);
                let (c, tc) = spawn!($c);
                let ready = tokio::time::timeout(Duration::from_secs(240), async {
                    p.wait_until_ready().await.is_ok()
                        && s.wait_until_ready().await.is_ok()
                        && c.wait_until_ready().await.is_ok()
                })
                .await;
                t.stop();
                assert!(matches!(ready, Ok(true)), "not ready within 240 s");
                (p.state().len() + s.state().len() + c.state().len(), [tp, ts, tc])
            }};
        }
        let (items, tasks) = if metadata {
            synced!(PartialObjectMeta<Pod>, PartialObjectMeta<Secret>, PartialObjectMeta<ConfigMap>)
        } else {
            synced!(Pod, Secret, ConfigMap)
        };
        let peak = peak_rss_bytes();
        let steady = steady_rss().await;
        for task in tasks {
            task.abort();
        }
        (items, peak, steady)
    });
    outcome(items, peak, steady, metadata)
}

/// scale_full on kube-runtime: `watcher` into reflector stores.
#[cfg(feature = "kube-runtime")]
pub(super) fn kube_runtime_full(_n: usize, t: &mut Timer) -> Outcome {
    kube_runtime(t, false)
}

/// scale_metadata on kube-runtime: `watcher` of `PartialObjectMeta<K>` (kube's
/// `metadata_watcher`) into reflector stores.
#[cfg(feature = "kube-runtime")]
pub(super) fn kube_runtime_metadata(_n: usize, t: &mut Timer) -> Outcome {
    kube_runtime(t, true)
}
