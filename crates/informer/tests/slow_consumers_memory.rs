//! Slow consumers under event volume: in default mode a stalled handler's backlog grows with the
//! events; in coalescing mode its memory is bounded by distinct keys, not events (the seed's "The
//! Informer Will OOM If You Are Too Slow", done better). The behavioural slow-consumer tests are in
//! the `it` binary's `slow_consumers` module.
//!
//! The event-volume tests (`*_events`) feed the informer from an in-memory `ListerWatcher` (the
//! public seam between the reflector and its transport) so that a million events go through the
//! real reflector, FIFO, indexer, processor and listeners without HTTP. This binary counts every
//! allocation (`kcache_test_support::alloc`) to measure peak live bytes; the tests take
//! one lock so that no other test's allocations are counted. `cargo test` runs them with
//! [`EVENTS_QUICK`] events; the 1M figures come from the `#[ignore]`d variants:
//! `cargo test --release -p kcache-informer --test slow_consumers_memory -- --ignored --nocapture`.
#[path = "it/common.rs"]
mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use common::Gate;
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_informer::{
    HandlerOptions, HandlerRegistration, ListenerMode, ObjectOrTombstone, ResourceEventHandler,
    SharedIndexInformer,
};
use kcache_reflector::{
    FakeClock, ListOptions, ListPage, ListerWatcher, ReflectorConfig, WatchEvent, WatchOptions, WatchStream,
};
use kcache_test_support::alloc::{Counting, LIVE, PEAK, reset_peak};
use kube::api::ObjectMeta;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

#[global_allocator]
static ALLOC: Counting = Counting;

/// Every test in this binary holds this lock, so allocation counts are one test's alone.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Events per volume test in `cargo test` (a debug build).
const EVENTS_QUICK: u64 = 20_000;
/// Events per volume test in the `#[ignore]`d release runs.
const EVENTS_FULL: u64 = 1_000_000;

// ---------------------------------------------------------------------------------------------
// Event volume: an in-memory watch stream of `total` events over `keys` distinct ConfigMaps.
// ---------------------------------------------------------------------------------------------

/// Most deltas the in-memory stream lets wait in the FIFO. A real watch stream is paced by the
/// network and by the informer's pop loop; this keeps the FIFO (which is not what is measured)
/// small so the figures are the listeners'.
const FIFO_PACE: usize = 256;

/// A `ListerWatcher` whose list is empty and whose first watch delivers `total` events: event `i`
/// is about key `k{i % keys}`, an ADDED the first time the key appears, then MODIFIED, with
/// `data.v = i` and resourceVersion `i + 2`. After `pause_after` events the stream waits for
/// `resume`. Then it stays open, silent.
struct Burst {
    total: u64,
    keys: u64,
    pause_after: u64,
    paused: Arc<Notify>,
    resume: Arc<Notify>,
    informer: Arc<OnceLock<SharedIndexInformer<ConfigMap>>>,
    watched: AtomicBool,
}

fn burst_object(i: u64, keys: u64) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(format!("k{}", i % keys)),
            namespace: Some("default".into()),
            resource_version: Some((i + 2).to_string()),
            ..Default::default()
        },
        data: Some([("v".to_string(), i.to_string())].into()),
        ..Default::default()
    }
}

impl ListerWatcher<ConfigMap> for Burst {
    fn list(&self, _: ListOptions) -> BoxFuture<'static, kcache_reflector::Result<ListPage<ConfigMap>>> {
        futures::future::ready(Ok(ListPage {
            items: Vec::new(),
            resource_version: "1".into(),
            continue_token: None,
            shard_info: None,
        }))
        .boxed()
    }

    fn watch(&self, _: WatchOptions) -> BoxFuture<'static, kcache_reflector::Result<WatchStream<ConfigMap>>> {
        if self.watched.swap(true, Ordering::SeqCst) {
            // Only one watch is expected; a second one stays silent.
            return futures::future::ready(Ok(futures::stream::pending().boxed())).boxed();
        }
        let (total, keys, pause_after) = (self.total, self.keys, self.pause_after);
        let (paused, resume, informer) = (self.paused.clone(), self.resume.clone(), self.informer.clone());
        let events = futures::stream::unfold(0u64, move |i| {
            let (paused, resume, informer) = (paused.clone(), resume.clone(), informer.clone());
            async move {
                if i == total {
                    return None;
                }
                if i == pause_after {
                    let resumed = resume.notified();
                    paused.notify_one();
                    resumed.await;
                }
                while informer.get().is_some_and(|inf| inf.fifo_len() > FIFO_PACE) {
                    tokio::task::yield_now().await;
                }
                let obj = Arc::new(burst_object(i, keys));
                let ev = if i < keys { WatchEvent::Added(obj) } else { WatchEvent::Modified(obj) };
                Some((Ok(ev), i + 1))
            }
        })
        .chain(futures::stream::pending());
        futures::future::ready(Ok(events.boxed())).boxed()
    }
}

/// Counts what a handler receives and remembers the last `data.v` per key (bounded by keys);
/// optionally blocks inside its first notification until the gate opens.
#[derive(Clone, Default)]
struct Counter {
    received: Arc<AtomicU64>,
    last: Arc<std::sync::Mutex<HashMap<String, u64>>>,
    changed: Arc<Notify>,
    entered: Arc<Notify>,
    gate: Option<Gate>,
}

impl Counter {
    fn stalled(gate: Gate) -> Self {
        Self { gate: Some(gate), ..Self::default() }
    }

    fn seen(&self, obj: &ConfigMap) {
        if let Some(g) = &self.gate {
            if self.received.load(Ordering::SeqCst) == 0 {
                self.entered.notify_one();
            }
            g.wait();
        }
        let v = common::value(obj).parse().unwrap();
        self.last.lock().unwrap().insert(common::name(obj), v);
        self.received.fetch_add(1, Ordering::SeqCst);
        self.changed.notify_waiters();
    }

    fn received(&self) -> u64 {
        self.received.load(Ordering::SeqCst)
    }

    /// Waits (no sleeping) until `cond` holds.
    async fn wait_until(&self, what: &str, cond: impl Fn(&Self) -> bool) {
        let fut = async {
            loop {
                let notified = self.changed.notified();
                if cond(self) {
                    return;
                }
                notified.await;
            }
        };
        if tokio::time::timeout(Duration::from_secs(600), fut).await.is_err() {
            panic!("timed out waiting for: {what}; received {}", self.received());
        }
    }

    /// Whether every key's last seen value is its final one.
    fn has_final_states(&self, total: u64, keys: u64) -> bool {
        let last = self.last.lock().unwrap();
        (0..keys).all(|k| {
            let final_i = total - 1 - (total - 1 - k) % keys;
            last.get(&format!("k{k}")) == Some(&final_i)
        })
    }
}

impl ResourceEventHandler<ConfigMap> for Counter {
    fn on_add(&self, obj: &Arc<ConfigMap>, _: bool) {
        self.seen(obj);
    }
    fn on_update(&self, _: &Arc<ConfigMap>, new: &Arc<ConfigMap>) {
        self.seen(new);
    }
    fn on_delete(&self, obj: &ObjectOrTombstone<ConfigMap>) {
        self.seen(obj.object());
    }
}

/// An informer over a [`Burst`], with one stalled handler in `stalled_mode` and one handler that
/// keeps up (in `fast_mode`).
struct Volume {
    informer: SharedIndexInformer<ConfigMap>,
    stalled: Counter,
    stalled_reg: HandlerRegistration<ConfigMap>,
    fast: Counter,
    gate: Gate,
    paused: Arc<Notify>,
    resume: Arc<Notify>,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Volume {
    fn start(
        total: u64,
        keys: u64,
        pause_after: u64,
        stalled_mode: ListenerMode,
        fast_mode: ListenerMode,
    ) -> Self {
        let (paused, resume) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        let slot = Arc::new(OnceLock::new());
        let lw = Burst {
            total,
            keys,
            pause_after,
            paused: paused.clone(),
            resume: resume.clone(),
            informer: slot.clone(),
            watched: AtomicBool::new(false),
        };
        let informer = SharedIndexInformer::new(lw, Duration::ZERO);
        informer.set_clock(FakeClock::new()).unwrap();
        informer
            .set_reflector_config(ReflectorConfig { use_watch_list: false, ..ReflectorConfig::default() })
            .unwrap();
        let _ = slot.set(informer.clone());
        let gate = Gate::closed();
        let stalled = Counter::stalled(gate.clone());
        let stalled_reg = informer
            .add_event_handler_with_options(
                stalled.clone(),
                HandlerOptions { mode: stalled_mode, ..HandlerOptions::default() },
            )
            .unwrap();
        let fast = Counter::default();
        informer
            .add_event_handler_with_options(
                fast.clone(),
                HandlerOptions { mode: fast_mode, ..HandlerOptions::default() },
            )
            .unwrap();
        let cancel = CancellationToken::new();
        let task = tokio::spawn({
            let (informer, cancel) = (informer.clone(), cancel.clone());
            async move { informer.run(cancel).await.unwrap() }
        });
        Self { informer, stalled, stalled_reg, fast, gate, paused, resume, cancel, task }
    }

    async fn stop(self) {
        self.gate.open();
        self.cancel.cancel();
        tokio::time::timeout(Duration::from_secs(60), self.task).await.expect("informer stops").unwrap();
    }
}

fn mib(bytes: isize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Default (client-go) mode under `total` events over 1000 keys: the stalled handler's backlog
/// gauge reads 1 as soon as one notification waits behind the one it is stuck in, and N - 1 at the
/// end; the other handler receives all N while the stalled one is still blocked; the stalled one
/// then catches up. Memory grows with events here (client-go's documented behaviour, mirrored
/// from `processorListener`'s unbounded buffer): the figure is reported.
async fn default_mode_events(total: u64) {
    let _serial = SERIAL.lock().await;
    let keys = 1000;
    let base = LIVE.load(Ordering::SeqCst);
    reset_peak();
    let v = Volume::start(total, keys, 2, ListenerMode::Unbounded, ListenerMode::Unbounded);
    // Two events are out: the stalled handler is inside the first, the second waits.
    tokio::time::timeout(Duration::from_secs(60), async {
        v.paused.notified().await;
        v.stalled.entered.notified().await;
    })
    .await
    .expect("first events delivered");
    v.fast.wait_until("fast got the first two", |c| c.received() == 2).await;
    assert_eq!(v.stalled_reg.pending(), 1, "the gauge counts from the first pending notification");
    v.resume.notify_one();

    v.fast.wait_until("fast got every event", |c| c.received() == total).await;
    assert_eq!(v.stalled.received(), 0, "the stalled handler is still blocked");
    assert_eq!(v.stalled_reg.pending() as u64, total - 1, "every later event is pending, and counted");
    assert!(v.fast.has_final_states(total, keys));
    let peak = PEAK.load(Ordering::SeqCst) - base;
    let held = LIVE.load(Ordering::SeqCst) - base;

    v.gate.open();
    v.stalled.wait_until("stalled caught up", |c| c.received() == total).await;
    assert_eq!(v.stalled_reg.pending(), 0);
    assert_eq!(v.stalled_reg.pending_high_water() as u64, total - 1);
    assert!(v.stalled.has_final_states(total, keys));
    eprintln!(
        "default mode, {total} events over {keys} keys: peak {:.1} MiB above baseline, {:.1} MiB held while \
         stalled ({} bytes per pending notification)",
        mib(peak),
        mib(held),
        held / total as isize
    );
    // The pending notifications keep their objects alive: memory follows events, not keys.
    assert!(held as u64 > (total - 1) * std::mem::size_of::<ConfigMap>() as u64 / 2);
    v.stop().await;
}

/// Coalescing mode under `total` events over `keys` keys: while its handler is stalled for the
/// whole run, the listener keeps at most one pending notification per key, and peak live bytes
/// above the baseline stay under a per-key bound independent of the number of events; after the
/// release the handler sees every key's final state.
async fn coalescing_mode_events(total: u64, keys: u64) {
    let _serial = SERIAL.lock().await;
    // Per key: the cached object, the pending notification's old and new objects, the key and the
    // hash map entries, with slack for allocator rounding. Plus a fixed allowance for the FIFO's
    // paced window, the runtime, the threads' buffers and the maps' growth steps.
    const PER_KEY: isize = 6 * 1024;
    const FIXED: isize = 4 * 1024 * 1024;
    let base = LIVE.load(Ordering::SeqCst);
    reset_peak();
    let v = Volume::start(total, keys, 0, ListenerMode::Coalescing, ListenerMode::Coalescing);
    tokio::time::timeout(Duration::from_secs(60), v.paused.notified()).await.expect("stream opened");
    v.resume.notify_one();
    v.fast.wait_until("fast handler saw every final state", |c| c.has_final_states(total, keys)).await;
    assert_eq!(v.stalled.received(), 0, "the stalled handler is still blocked");
    assert!(v.stalled_reg.pending() as u64 <= keys, "backlog bounded by keys: {}", v.stalled_reg.pending());
    assert_eq!(v.informer.indexer().list().len() as u64, keys);
    let peak = PEAK.load(Ordering::SeqCst) - base;
    eprintln!(
        "coalescing mode, {total} events over {keys} keys: peak {:.2} MiB above baseline ({} bytes per key), \
         bound {:.2} MiB",
        mib(peak),
        peak / keys as isize,
        mib(PER_KEY * keys as isize + FIXED)
    );
    assert!(peak < PER_KEY * keys as isize + FIXED, "peak {peak} bytes is not bounded by keys");

    v.gate.open();
    v.stalled.wait_until("stalled handler saw every final state", |c| c.has_final_states(total, keys)).await;
    assert!(v.stalled.received() <= keys + 1, "coalesced: {} notifications", v.stalled.received());
    v.stop().await;
}

/// A stalled handler in the default mode under 20k events (see [`default_mode_1m_events`]).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_mode_stalled_handler_under_many_events() {
    default_mode_events(EVENTS_QUICK).await;
}

/// A stalled handler in coalescing mode under 20k events over 1000 keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coalescing_mode_memory_is_bounded_by_keys_not_events() {
    coalescing_mode_events(EVENTS_QUICK, 1000).await;
}

/// The 1M-event run of the default mode (release build; see the module docs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "1M events: run in release with --ignored"]
async fn default_mode_1m_events() {
    default_mode_events(EVENTS_FULL).await;
}

/// The 1M-event run of coalescing mode, over 1000 and over 10000 keys (release build).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "1M events: run in release with --ignored"]
async fn coalescing_mode_1m_events() {
    coalescing_mode_events(EVENTS_FULL, 1000).await;
    coalescing_mode_events(EVENTS_FULL, 10_000).await;
}
