//! Atomic relists (client-go's `AtomicFIFO` feature gate, on by default since 1.36, and
//! [`FifoKind::InOrder`]'s behaviour): a relist reaches the cache as one unit before any handler
//! hears of it, so a lister never sees part of it (controller.go `processReplacedAllInfo`:
//! "Replace the client state first so the store reflects the events handlers are given"), and
//! the handlers hear what they would hear from the in-order FIFO without it.

use crate::common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Ev, Harness, Recorder, create, delete, update};
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_informer::{FifoKind, Lister, ObjectOrTombstone, ResourceEventHandler};
use kcache_testserver::{RequestFault, TestServer, Verb};
use serde_json::json;

const N: usize = 10_000;

fn config_map(i: usize, v: &str) -> serde_json::Value {
    json!({"metadata": {"name": format!("cm-{i:05}"), "namespace": "default"}, "data": {"v": v}})
}

/// Objects `0..N` step 2 are the changed half.
fn changed(name: &str) -> bool {
    name.strip_prefix("cm-").and_then(|i| i.parse::<usize>().ok()).is_some_and(|i| i % 2 == 0)
}

/// How many objects of the changed half a snapshot of the cache shows in their new version, and
/// how many objects it holds.
fn count_new(lister: &Lister<ConfigMap>) -> (usize, usize) {
    let list = lister.list();
    let new = list.iter().filter(|o| changed(&common::name(o)) && common::value(o) == "new").count();
    (new, list.len())
}

/// Counts the relist's updates to the changed half; at the first one, records what the cache
/// shows at that moment.
struct FirstLook {
    lister: Lister<ConfigMap>,
    updates: Arc<Mutex<usize>>,
    at_first_update: Arc<Mutex<Option<(usize, usize)>>>,
    changed: Arc<tokio::sync::Notify>,
}

impl ResourceEventHandler<ConfigMap> for FirstLook {
    fn on_add(&self, _: &Arc<ConfigMap>, _: bool) {}
    fn on_update(&self, _: &Arc<ConfigMap>, new: &Arc<ConfigMap>) {
        if common::value(new) != "new" {
            return;
        }
        let mut first = self.at_first_update.lock().unwrap();
        if first.is_none() {
            *first = Some(count_new(&self.lister));
        }
        *self.updates.lock().unwrap() += 1;
        self.changed.notify_waiters();
    }
    fn on_delete(&self, _: &ObjectOrTombstone<ConfigMap>) {}
}

/// Drops the watch and refuses the re-watch with 410, so the informer relists after a backoff;
/// `changes` happen while it is disconnected and reach it only through that relist.
async fn relist_after(h: &Harness, changes: impl FnOnce()) {
    let faults = h.server.faults();
    faults.fail_requests(1, RequestFault::gone().verb(Verb::Watch));
    faults.restart();
    let backoff = h.clock.wait_for_sleep(|d| d < Duration::from_secs(60)).await;
    changes();
    h.clock.advance(backoff);
}

/// Mirrors client-go's `processReplacedAllInfo` (controller.go), which replaces the store's
/// contents in one step before telling the handlers: listers reading the cache in a loop on
/// another thread while a 10k-object relist that changes half of the objects is applied see
/// every changed object in its old version or every one in its new version, never a mix; and a
/// handler hearing of the first change finds the whole relist in the cache already.
///
/// Regression: the in-order FIFO applied a relist one object at a time, each under its own lock,
/// so a lister saw part of the relist (and the first handler notified saw only the objects
/// applied before it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listers_never_see_half_a_relist() {
    let server = TestServer::start().await;
    let objects = server.objects();
    assert_eq!(objects.bulk_insert("", "v1", "configmaps", (0..N).map(|i| config_map(i, "old"))), N);
    let mut h = Harness::on(server, Duration::ZERO);
    let look = FirstLook {
        lister: h.informer.lister(),
        updates: Arc::default(),
        at_first_update: Arc::default(),
        changed: Arc::default(),
    };
    let (updates, at_first_update, changed_signal) =
        (look.updates.clone(), look.at_first_update.clone(), look.changed.clone());
    h.informer.add_event_handler(look).unwrap();
    h.start();
    h.synced().await;
    assert_eq!(count_new(&h.informer.lister()), (0, N));

    // A reader on a thread of its own, listing until told to stop.
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (lister, stop) = (h.informer.lister(), stop.clone());
        std::thread::spawn(move || {
            let mut seen: HashMap<usize, u64> = HashMap::new();
            let mut bad_len = 0u64;
            while !stop.load(Ordering::Acquire) {
                let (new, len) = count_new(&lister);
                *seen.entry(new).or_default() += 1;
                bad_len += u64::from(len != N);
            }
            (seen, bad_len)
        })
    };

    relist_after(&h, || {
        let n = objects.bulk_insert("", "v1", "configmaps", (0..N).step_by(2).map(|i| config_map(i, "new")));
        assert_eq!(n, N / 2);
    })
    .await;
    let all_heard = async {
        loop {
            let notified = changed_signal.notified();
            if *updates.lock().unwrap() == N / 2 {
                return;
            }
            notified.await;
        }
    };
    tokio::time::timeout(Duration::from_secs(60), all_heard).await.expect("the handler hears every change");
    assert_eq!(count_new(&h.informer.lister()), (N / 2, N));
    stop.store(true, Ordering::Release);
    let (seen, bad_len) = reader.join().unwrap();

    let mixed: Vec<_> = seen.iter().filter(|(new, _)| **new != 0 && **new != N / 2).collect();
    assert!(mixed.is_empty(), "snapshots with part of the relist (new objects: snapshots): {mixed:?}");
    assert_eq!(bad_len, 0, "snapshots missing objects");
    assert!(seen.contains_key(&0), "the reader listed before the relist");
    assert_eq!(
        *at_first_update.lock().unwrap(),
        Some((N / 2, N)),
        "the first handler call saw the whole relist"
    );
    h.stop().await;
}

/// The events of the last `n` recorded, without resyncs (`on_update` of an unchanged object),
/// which depend on the handler's resync settings, not on the FIFO.
fn changes(rec: &Recorder) -> Vec<Ev> {
    rec.events().into_iter().filter(|e| !matches!(e, Ev::Update(.., true))).collect()
}

/// Runs one relist (missed: an update, a delete, a create) through an informer with `kind`;
/// returns what the handler heard after the initial list, and the names in the order the
/// relist's LIST returned them.
async fn relist_events(kind: FifoKind) -> (Vec<Ev>, Vec<String>) {
    let mut h = Harness::new(Duration::ZERO).await;
    h.informer.set_fifo(kind).unwrap();
    // LIST + WATCH: the relist's order is the LIST's, which the test reads back.
    h.informer
        .set_reflector_config(kcache_reflector::ReflectorConfig {
            use_watch_list: false,
            ..Default::default()
        })
        .unwrap();
    for n in ["a", "b", "c"] {
        create(&h.api, n, "1").await;
    }
    let rec = h.start_recording("initial", 3).await;
    let faults = h.server.faults();
    faults.fail_requests(1, RequestFault::gone().verb(Verb::Watch));
    faults.restart();
    let backoff = h.clock.wait_for_sleep(|d| d < Duration::from_secs(60)).await;
    update(&h.api, "a", "2").await;
    delete(&h.api, "b").await;
    create(&h.api, "d", "1").await;
    h.clock.advance(backoff);
    rec.wait_until("the relist's changes", |ev| {
        ev.iter().filter(|e| !matches!(e, Ev::Update(.., true))).count() == 6
    })
    .await;
    let mut cached: Vec<_> = h.informer.lister().list().iter().map(|o| common::name(o)).collect();
    cached.sort();
    assert_eq!(cached, ["a", "c", "d"]);
    let listed = h.api.list(&Default::default()).await.unwrap().items.iter().map(common::name).collect();
    h.stop().await;
    (changes(&rec).split_off(3), listed)
}

/// Mirrors `processReplacedAllInfo`'s order, "processing all deletions first matches behavior of
/// RealFIFO#Replace" and "processing adds/updates in order observed by reconcileReplacement
/// matches behavior of RealFIFO#Replace": an atomic relist tells the handlers what the in-order
/// FIFO without atomic events tells them, in the same order (the tombstone, then the listed
/// objects in list order).
#[tokio::test]
async fn an_atomic_relist_notifies_as_the_per_delta_one_does() {
    for kind in [FifoKind::InOrder, FifoKind::InOrderNonAtomic] {
        let (events, listed) = relist_events(kind).await;
        let mut expected = vec![Ev::Delete("b".into(), "1".into(), true)];
        for name in listed {
            match name.as_str() {
                "a" => expected.push(Ev::Update("a".into(), "1".into(), "2".into(), false)),
                "d" => expected.push(Ev::Add("d".into(), "1".into(), false)),
                _ => {}
            }
        }
        assert_eq!(expected.len(), 3);
        assert_eq!(events, expected, "{kind:?}");
    }
}
