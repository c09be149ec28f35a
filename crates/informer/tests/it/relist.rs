//! Deletes missed during a disconnection arrive after the relist as tombstones carrying the last
//! known state; missed updates arrive as updates, never flagged as initial; deletes come first and
//! the cache is current when a handler hears of a change; handlers in the syncing set (every
//! handler until the first resync check, then those due for a resync) also hear of unchanged
//! objects, unless they skip unchanged updates; the cache's resource version follows lists as
//! well as events
//! (controller_test.go `TestHammerController`'s convergence, `TestResetWatch`, `TestReplaceEvents`,
//! `TestStoreResourceVersion`; shared_informer_test.go `TestSharedInformerWatchDisruption`), for
//! both FIFOs where client-go has both.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Ev, Harness, Recorder, create, delete, update};
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_informer::{FifoKind, HandlerOptions, ObjectOrTombstone, ResourceEventHandler};
use kcache_testserver::{RequestFault, Verb, WatchFault};

/// How the informer learns that its resource version is gone.
#[derive(Clone, Copy)]
enum Gone {
    /// The re-watch request is answered 410.
    OnWatchRequest,
    /// The re-watch is accepted (200), then its stream carries a 410 ERROR event.
    MidStream,
}

async fn missed_changes_after_relist(kind: FifoKind, gone: Gone) {
    let mut h = Harness::new(Duration::ZERO).await;
    h.informer.set_fifo(kind).unwrap();
    create(&h.api, "a", "1").await;
    create(&h.api, "b", "1").await;
    let rec = h.start_recording("initial", 2).await;

    // Disconnect; the re-watch fails with 410, so the reflector backs off on the fake clock.
    let faults = h.server.faults();
    match gone {
        Gone::OnWatchRequest => faults.fail_requests(1, RequestFault::gone().verb(Verb::Watch)),
        Gone::MidStream => faults.next_watch(WatchFault::Error {
            after: 0,
            code: 410,
            reason: "Expired".into(),
            message: "too old resource version".into(),
        }),
    }
    faults.restart();
    let backoff = h.clock.wait_for_sleep(|d| d.as_secs() < 60).await;
    // Changes while disconnected.
    update(&h.api, "a", "2").await;
    delete(&h.api, "b").await;
    create(&h.api, "c", "1").await;
    h.clock.advance(backoff);

    rec.wait_until("relist deliveries", |ev| ev.len() == 5).await;
    let ev = rec.events();
    assert!(
        ev.contains(&Ev::Delete("b".into(), "1".into(), true)),
        "tombstone with the last known state: {ev:#?}"
    );
    assert!(ev.contains(&Ev::Update("a".into(), "1".into(), "2".into(), false)), "{ev:#?}");
    assert!(
        ev.contains(&Ev::Add("c".into(), "1".into(), false))
            || ev.contains(&Ev::Add("c".into(), "1".into(), true))
    );
    let mut cached: Vec<_> = h.informer.lister().list().iter().map(|o| common::name(o)).collect();
    cached.sort();
    assert_eq!(cached, ["a", "c"]);
    if let Gone::MidStream = gone {
        let watches = h.server.request_log().filter(|r| r.verb == Verb::Watch);
        assert!(watches.iter().all(|w| w.status == 200), "the 410 came inside a stream");
    }
    h.stop().await;
}

#[tokio::test]
async fn in_order_fifo_delivers_missed_deletes_as_tombstones() {
    missed_changes_after_relist(FifoKind::InOrder, Gone::OnWatchRequest).await;
}

#[tokio::test]
async fn delta_fifo_delivers_missed_deletes_as_tombstones() {
    missed_changes_after_relist(FifoKind::DeltaFifo, Gone::OnWatchRequest).await;
}

/// As above, with the 410 as an ERROR event inside an accepted watch stream (what
/// kube-apiserver sends when the watch cache no longer holds the requested version).
#[tokio::test]
async fn a_mid_stream_410_leads_to_tombstones_for_missed_deletes() {
    missed_changes_after_relist(FifoKind::InOrder, Gone::MidStream).await;
    missed_changes_after_relist(FifoKind::DeltaFifo, Gone::MidStream).await;
}

/// Drops the watch and refuses the re-watch with 410, so the informer relists after a backoff;
/// `changes` happen while it is disconnected and are seen only through that relist.
async fn disrupt(
    h: &Harness,
    backoff: impl Fn(Duration) -> bool,
    changes: impl std::future::Future<Output = ()>,
) {
    let faults = h.server.faults();
    faults.fail_requests(1, RequestFault::gone().verb(Verb::Watch));
    faults.restart();
    let sleep = h.clock.wait_for_sleep(backoff).await;
    changes.await;
    h.clock.advance(sleep);
}

/// Mirrors client-go shared_informer_test.go `TestSharedInformerWatchDisruption`: after a watch
/// disruption during which one object changed and one was created, a handler without resync
/// hears exactly those two changes, while a handler that was due for a resync also hears the
/// unchanged object again (as `on_update(o, o)`).
#[tokio::test]
async fn watch_disruption_with_and_without_resync() {
    let mut h = Harness::new(Duration::from_secs(1)).await;
    // A backoff no resync timer can be mistaken for.
    let backoff = kcache_reflector::BackoffConfig {
        initial: Duration::from_secs(10),
        jitter: 0.0,
        ..kcache_reflector::BackoffConfig::default()
    };
    h.informer
        .set_reflector_config(kcache_reflector::ReflectorConfig { backoff, ..Default::default() })
        .unwrap();
    create(&h.api, "pod1", "1").await;
    create(&h.api, "pod2", "1").await;
    let plain = Recorder::new();
    let resyncing = Recorder::new();
    h.informer.add_event_handler_with_resync_period(plain.clone(), Duration::ZERO).unwrap();
    h.informer.add_event_handler_with_resync_period(resyncing.clone(), Duration::from_secs(1)).unwrap();
    h.start();
    h.synced().await;
    for r in [&plain, &resyncing] {
        r.wait_until("initial adds", |ev| ev.len() == 2).await;
    }
    // One resync: the resyncing handler is due, the plain one is not.
    let resync = h.clock.wait_for_sleep(|d| d <= Duration::from_secs(1)).await;
    h.clock.advance(resync);
    resyncing.wait_until("a resync of both", |ev| ev.len() == 4).await;

    disrupt(&h, |d| d == Duration::from_secs(10), async {
        update(&h.api, "pod2", "2").await;
        create(&h.api, "pod3", "1").await;
    })
    .await;

    plain.wait_until("the missed changes", |ev| ev.len() == 4).await;
    resyncing
        .wait_until("the missed changes and pod1 again", |ev| {
            ev[4..].contains(&Ev::Update("pod2".into(), "1".into(), "2".into(), false))
                && ev[4..].contains(&Ev::Add("pod3".into(), "1".into(), false))
                && ev[4..].contains(&Ev::Update("pod1".into(), "1".into(), "1".into(), true))
        })
        .await;
    let after: Vec<_> = plain.events()[2..].to_vec();
    assert!(after.contains(&Ev::Update("pod2".into(), "1".into(), "2".into(), false)), "{after:?}");
    assert!(after.contains(&Ev::Add("pod3".into(), "1".into(), false)), "{after:?}");
    assert!(
        !plain.events().iter().any(|e| matches!(e, Ev::Update(_, _, _, true))),
        "the plain handler never hears an unchanged object again: {:?}",
        plain.events()
    );
    h.stop().await;
}

/// The premise of client-go shared_informer_test.go `TestSharedInformerWatchDisruption` ("This
/// calls shouldSync, which deletes noResync from the list of syncingListeners"): client-go's
/// `sharedProcessor.addListener` puts every new listener, added before start or after, in the
/// syncing set until a resync check takes it out, so on an informer without resync (which never
/// checks) a relist re-announces every unchanged object to every handler as `on_update(o, o)`.
/// A handler added with `HandlerOptions::skip_unchanged_updates` starts outside that set and
/// hears only of what changed. Four handlers (default and skipping, added before start and
/// after), both FIFOs.
#[tokio::test]
async fn without_resync_a_relist_reaches_every_handler_unless_it_skips_unchanged_updates() {
    let skip = HandlerOptions { skip_unchanged_updates: true, ..HandlerOptions::default() };
    for kind in [FifoKind::InOrder, FifoKind::DeltaFifo] {
        let mut h = Harness::new(Duration::ZERO).await;
        h.informer.set_fifo(kind).unwrap();
        create(&h.api, "pod1", "1").await;
        create(&h.api, "pod2", "1").await;
        let early_skipping = Recorder::new();
        h.informer.add_event_handler_with_options(early_skipping.clone(), skip.clone()).unwrap();
        let early = h.start_recording("initial adds", 2).await;
        early_skipping.wait_until("initial adds", |ev| ev.len() == 2).await;
        let (late, late_skipping) = (Recorder::new(), Recorder::new());
        h.informer.add_event_handler(late.clone()).unwrap();
        h.informer.add_event_handler_with_options(late_skipping.clone(), skip.clone()).unwrap();
        for r in [&late, &late_skipping] {
            r.wait_until("replayed adds", |ev| ev.len() == 2).await;
        }

        disrupt(&h, |d| d < Duration::from_secs(60), update(&h.api, "pod2", "2")).await;

        let pod1 = Ev::Update("pod1".into(), "1".into(), "1".into(), true);
        let pod2 = Ev::Update("pod2".into(), "1".into(), "2".into(), false);
        for r in [&early, &late, &early_skipping, &late_skipping] {
            r.wait_until("the relist's update", |ev| ev.contains(&pod2)).await;
        }
        // A live event after the relist: per-handler order puts it after everything the relist
        // delivered, so once it arrives nothing of the relist is still to come.
        create(&h.api, "pod3", "1").await;
        let pod3 = Ev::Add("pod3".into(), "1".into(), false);
        for (who, r, expected) in [
            ("early", &early, vec![pod1.clone(), pod2.clone(), pod3.clone()]),
            ("late", &late, vec![pod1.clone(), pod2.clone(), pod3.clone()]),
            ("early skipping", &early_skipping, vec![pod2.clone(), pod3.clone()]),
            ("late skipping", &late_skipping, vec![pod2.clone(), pod3.clone()]),
        ] {
            r.wait_until("the live add after the relist", |ev| ev.iter().any(|e| e.name() == "pod3")).await;
            // The relist is a watch-list, whose initial events come in no particular order.
            let mut got = r.events()[2..].to_vec();
            got[..expected.len() - 1].sort_by(|a, b| a.name().cmp(b.name()));
            assert_eq!(got, expected, "{kind:?}, {who} handler");
        }
        h.stop().await;
    }
}

/// Mirrors client-go controller_test.go `TestResetWatch`: after a watch reset that hid an update
/// and a creation, the relist delivers an update and an add, neither flagged as part of the
/// initial list (only the first list is). For both FIFOs.
#[tokio::test]
async fn relist_after_a_reset_is_not_the_initial_list() {
    for kind in [FifoKind::InOrder, FifoKind::DeltaFifo] {
        let mut h = Harness::new(Duration::ZERO).await;
        h.informer.set_fifo(kind).unwrap();
        create(&h.api, "pod-1", "1").await;
        let rec = h.start_recording("initial add", 1).await;
        assert_eq!(rec.events(), [Ev::Add("pod-1".into(), "1".into(), true)]);

        disrupt(&h, |d| d < Duration::from_secs(60), async {
            update(&h.api, "pod-1", "2").await;
            create(&h.api, "pod-2", "1").await;
        })
        .await;
        rec.wait_until("the relist", |ev| ev.len() == 3).await;
        let mut relisted = rec.events()[1..].to_vec();
        relisted.sort_by(|a, b| a.name().cmp(b.name()));
        assert_eq!(
            relisted,
            [
                Ev::Update("pod-1".into(), "1".into(), "2".into(), false),
                Ev::Add("pod-2".into(), "1".into(), false)
            ],
            "{kind:?}"
        );
        h.stop().await;
    }
}

/// What a handler saw, with the cache's state of the same key when it was told.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    /// "add", "update" or "delete".
    action: &'static str,
    name: String,
    /// `data.v` of the notified (new) object.
    value: String,
    /// `data.v` of the cached object when the handler ran, if cached.
    cached: Option<String>,
}

/// Records [`Seen`] for every notification.
#[derive(Clone)]
struct CacheProbe {
    cache: kcache_store::Store<ConfigMap>,
    seen: Arc<Mutex<Vec<Seen>>>,
    changed: Arc<tokio::sync::Notify>,
}

impl CacheProbe {
    fn record(&self, action: &'static str, obj: &ConfigMap) {
        let cached = self.cache.get(obj).unwrap().map(|o| common::value(&o));
        self.seen.lock().unwrap().push(Seen {
            action,
            name: common::name(obj),
            value: common::value(obj),
            cached,
        });
        self.changed.notify_waiters();
    }

    /// Waits (no sleeping) for `n` records, then takes them.
    async fn take(&self, n: usize) -> Vec<Seen> {
        let wait = async {
            loop {
                let notified = self.changed.notified();
                if self.seen.lock().unwrap().len() >= n {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(Duration::from_secs(20), wait).await.expect("notifications");
        std::mem::take(&mut *self.seen.lock().unwrap())
    }
}

impl ResourceEventHandler<ConfigMap> for CacheProbe {
    fn on_add(&self, obj: &Arc<ConfigMap>, _: bool) {
        self.record("add", obj);
    }
    fn on_update(&self, _: &Arc<ConfigMap>, new: &Arc<ConfigMap>) {
        self.record("update", new);
    }
    fn on_delete(&self, obj: &ObjectOrTombstone<ConfigMap>) {
        assert!(obj.is_tombstone(), "a delete found by a relist is a tombstone");
        self.record("delete", obj.object());
    }
}

fn seen(action: &'static str, name: &str, value: &str, cached: Option<&str>) -> Seen {
    Seen { action, name: name.into(), value: value.into(), cached: cached.map(Into::into) }
}

/// Mirrors client-go controller_test.go `TestReplaceEvents` through a real relist (the in-order
/// FIFO, client-go's RealFIFO): the objects gone from the list are deleted first (tombstones with
/// the last known state), then each listed object is an update or an add; when a
/// handler is told, the cache already holds that state (or no longer holds the deleted object).
/// A second relist that lists nothing deletes everything.
#[tokio::test]
async fn relist_events_delete_first_and_follow_the_cache() {
    let mut h = Harness::new(Duration::ZERO).await;
    for n in ["pod-1", "pod-2", "pod-3"] {
        create(&h.api, n, "1").await;
    }
    let probe =
        CacheProbe { cache: h.informer.indexer().clone(), seen: Arc::default(), changed: Arc::default() };
    h.informer.add_event_handler(probe.clone()).unwrap();
    h.start();
    h.synced().await;
    assert_eq!(probe.take(3).await.len(), 3);

    disrupt(&h, |d| d < Duration::from_secs(60), async {
        delete(&h.api, "pod-3").await;
        update(&h.api, "pod-1", "2").await;
        update(&h.api, "pod-2", "2").await;
        create(&h.api, "pod-4", "1").await;
    })
    .await;
    let mut got = probe.take(4).await;
    assert_eq!(got[0], seen("delete", "pod-3", "1", None), "deletes first: {got:?}");
    // Then the listed objects, in the order the server listed them.
    got[1..].sort_by(|a, b| a.name.cmp(&b.name));
    assert_eq!(
        got[1..],
        [
            seen("update", "pod-1", "2", Some("2")),
            seen("update", "pod-2", "2", Some("2")),
            seen("add", "pod-4", "1", Some("1")),
        ]
    );

    disrupt(&h, |d| d < Duration::from_secs(60), async {
        for n in ["pod-1", "pod-2", "pod-4"] {
            delete(&h.api, n).await;
        }
    })
    .await;
    let mut deletes = probe.take(3).await;
    deletes.sort_by(|a, b| a.name.cmp(&b.name));
    assert_eq!(
        deletes,
        [
            seen("delete", "pod-1", "2", None),
            seen("delete", "pod-2", "2", None),
            seen("delete", "pod-4", "1", None)
        ]
    );
    assert!(h.informer.indexer().is_empty());
    h.stop().await;
}

/// The server's resource version after the last write.
fn server_rv(h: &Harness) -> String {
    h.server.resource_version().to_string()
}

/// Yields until the cache reports `rv` as its resource version, or fails after a deadline. The
/// version is published right after the change's handlers were handed their notification, so a
/// handler may hear of it a moment before.
async fn cache_reaches(h: &Harness, rv: &str, what: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while h.informer.indexer().last_sync_resource_version() != rv {
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: the cache reports {:?}, not {rv:?}",
            h.informer.indexer().last_sync_resource_version()
        );
        tokio::task::yield_now().await;
    }
}

/// Mirrors client-go controller_test.go `TestStoreResourceVersion` (and the relist half of
/// `TestStoreResourceVersionWithNonMetaTransform`): the cache reports as its resource version the
/// initial list's, then each update's and delete's once applied, and a relist's.
///
/// Regression: the cache's version stayed empty after a list (only events and bookmarks set it).
#[tokio::test]
async fn cache_resource_version_follows_lists_and_events() {
    // No bookmarks: they would set the version too, hiding whether lists do.
    let server =
        kcache_testserver::TestServer::builder().bookmark_interval(Duration::from_secs(3600)).start().await;
    let mut h = Harness::on(server, Duration::ZERO);
    h.informer
        .set_reflector_config(kcache_reflector::ReflectorConfig {
            use_watch_list: false,
            ..Default::default()
        })
        .unwrap();
    create(&h.api, "pod-1", "1").await;
    let listed = server_rv(&h);
    let rec = h.start_recording("initial add", 1).await;
    cache_reaches(&h, &listed, "after the initial list").await;

    update(&h.api, "pod-1", "2").await;
    rec.wait_until("update", |ev| ev.len() == 2).await;
    cache_reaches(&h, &server_rv(&h), "after the update").await;

    delete(&h.api, "pod-1").await;
    rec.wait_until("delete", |ev| ev.len() == 3).await;
    cache_reaches(&h, &server_rv(&h), "after the delete").await;

    disrupt(&h, |d| d < Duration::from_secs(60), async {
        create(&h.api, "pod-2", "1").await;
    })
    .await;
    rec.wait_until("relisted add", |ev| ev.len() == 4).await;
    cache_reaches(&h, &server_rv(&h), "after the relist").await;
    h.stop().await;
}
