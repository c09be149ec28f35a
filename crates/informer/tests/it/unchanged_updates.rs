//! Updates that did not change an object's resourceVersion: the handler call sequences of
//! client-go's informer for a relist after a mid-stream 410, a 410 on the first watch, and a
//! watch event repeating the cached version (shared_informer.go `sharedProcessor.addListener`,
//! which starts every listener in the syncing set, and `sharedIndexInformer.OnUpdate`, which
//! makes an update whose resourceVersion did not change a sync), and the opt-in
//! `HandlerOptions::skip_unchanged_updates`, which keeps them from a handler until its own
//! resync. ConfigMaps, resync 0, a server that refuses watch-list (so LIST + WATCH), both FIFOs.
//!
//! The exact resourceVersions are scripted through kcache-testserver: the server has one global
//! resourceVersion, so writes to a namespace the informer does not watch move it to the version
//! the next write of a scenario must get (`write_at`). The one exception is a delete that the
//! scenario does not number (c's, while the informer is disconnected): it takes a version of its
//! own, so d is created at 104 where the script says 103 (no handler call shows it).

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::Harness;
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_informer::{FifoKind, HandlerOptions, ObjectOrTombstone, ResourceEventHandler};
use kcache_testserver::{TestServer, WatchFault, WatchListSupport};
use serde_json::json;
use tokio::sync::Notify;

/// Records each call as text: `add a@10 initial`, `update a@10->101`, `delete c@30 tombstone`
/// (name and resourceVersion of the object or objects passed).
#[derive(Clone, Default)]
struct Calls {
    calls: Arc<Mutex<Vec<String>>>,
    changed: Arc<Notify>,
}

fn rv(o: &ConfigMap) -> String {
    o.metadata.resource_version.clone().unwrap_or_default()
}

impl Calls {
    fn push(&self, call: String) {
        self.calls.lock().unwrap().push(call);
        self.changed.notify_waiters();
    }

    fn get(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }

    /// Waits (no sleeping) until `call` has been recorded.
    async fn wait_for(&self, call: &str) {
        let fut = async {
            loop {
                let notified = self.changed.notified();
                if self.get().iter().any(|c| c == call) {
                    return;
                }
                notified.await;
            }
        };
        if tokio::time::timeout(Duration::from_secs(20), fut).await.is_err() {
            panic!("timed out waiting for {call:?}; calls: {:#?}", self.get());
        }
    }
}

impl ResourceEventHandler<ConfigMap> for Calls {
    fn on_add(&self, obj: &Arc<ConfigMap>, initial: bool) {
        let tail = if initial { " initial" } else { "" };
        self.push(format!("add {}@{}{tail}", common::name(obj), rv(obj)));
    }
    fn on_update(&self, old: &Arc<ConfigMap>, new: &Arc<ConfigMap>) {
        self.push(format!("update {}@{}->{}", common::name(new), rv(old), rv(new)));
    }
    fn on_delete(&self, obj: &ObjectOrTombstone<ConfigMap>) {
        let o = obj.object();
        let tail = if obj.is_tombstone() { " tombstone" } else { "" };
        self.push(format!("delete {}@{}{tail}", common::name(o), rv(o)));
    }
}

/// Moves the server's resourceVersion with writes to namespace `padding` (which the informer
/// does not watch) so that its next write gets `rv`.
fn pad_to(server: &TestServer, rv: u64) {
    let mut current = server.resource_version();
    assert!(current < rv, "the server is at {current} already, past {rv}");
    while current + 1 < rv {
        let pad = json!({"metadata": {"name": format!("pad-{current}"), "namespace": "padding"}});
        current = server.objects().upsert("", "v1", "configmaps", pad).unwrap();
    }
}

/// Creates or replaces ConfigMap `default/name` so that it gets resourceVersion `rv`.
fn write_at(server: &TestServer, name: &str, rv: u64) {
    pad_to(server, rv);
    let cm = json!({"metadata": {"name": name, "namespace": "default"}, "data": {"v": rv.to_string()}});
    assert_eq!(server.objects().upsert("", "v1", "configmaps", cm).unwrap(), rv);
}

/// An informer on `default` (resync 0, `kind`, watch-list refused by the server) with two
/// handlers: one with default options (client-go's behaviour) and one that skips unchanged
/// updates. Not started.
async fn scenario(kind: FifoKind) -> (Harness, Calls, Calls) {
    let h = Harness::new(Duration::ZERO).await;
    h.server.faults().set_watch_list_support(WatchListSupport::GateDisabled);
    h.informer.set_fifo(kind).unwrap();
    let (default, skipping) = (Calls::default(), Calls::default());
    h.informer.add_event_handler(default.clone()).unwrap();
    h.informer
        .add_event_handler_with_options(
            skipping.clone(),
            HandlerOptions { skip_unchanged_updates: true, ..HandlerOptions::default() },
        )
        .unwrap();
    (h, default, skipping)
}

/// Creates `default/zz` and waits until both handlers have heard of it. Called once the default
/// handler has heard the scenario's last call: every notification is handed to all handlers at
/// once, so zz is a live event after everything the scenario delivered to either, and (in
/// per-handler order) nothing of the scenario is still to come. Returns the call it makes.
async fn sentinel(h: &Harness, handlers: [&Calls; 2]) -> String {
    let rv = h.server.resource_version() + 1;
    write_at(&h.server, "zz", rv);
    let call = format!("add zz@{rv}");
    for c in handlers {
        c.wait_for(&call).await;
    }
    call
}

/// The fake clock's next backoff (a sleep under a minute, unlike watch timeouts).
async fn backoff(h: &Harness) -> Duration {
    h.clock.wait_for_sleep(|d| d < Duration::from_secs(60)).await
}

/// Mirrors client-go shared_informer.go `sharedProcessor.addListener` and
/// `sharedIndexInformer.OnUpdate` on a relist after a watch ended with a 410 ERROR event: LIST
/// a(10) b(20) c(30) at resourceVersion 100; the watch sends MODIFIED a(101), DELETED b(102) and
/// ERROR 410; while the informer backs off, c is deleted and d created; the relist returns
/// a(101), d(104). Every handler hears: the three initial adds, update a 10->101, delete b, c's
/// tombstone (its last known state, 30), update a 101->101 (unchanged: a sync, delivered because
/// a handler of an informer without resync stays in the syncing set) and add d, not initial.
/// The in-order FIFO (client-go's RealFIFO, its informer default since 1.33), atomic or not, delivers the
/// relist's tombstones first, DeltaFIFO after the listed objects. A handler that skips unchanged
/// updates hears the same without update a 101->101.
#[tokio::test]
async fn a_relist_after_a_mid_stream_410_reaches_every_handler() {
    for kind in [FifoKind::InOrder, FifoKind::InOrderNonAtomic, FifoKind::DeltaFifo] {
        let (mut h, default, skipping) = scenario(kind).await;
        write_at(&h.server, "a", 10);
        write_at(&h.server, "b", 20);
        write_at(&h.server, "c", 30);
        pad_to(&h.server, 101);
        assert_eq!(h.server.resource_version(), 100);
        h.server.faults().next_watch(WatchFault::Error {
            after: 2,
            code: 410,
            reason: "Expired".into(),
            message: "too old resource version: 100 (101)".into(),
        });
        h.start();
        h.synced().await;
        write_at(&h.server, "a", 101);
        assert!(h.server.objects().delete("", "v1", "configmaps", "default", "b"));
        assert_eq!(h.server.resource_version(), 102);

        let sleep = backoff(&h).await;
        for c in [&default, &skipping] {
            c.wait_for("delete b@102").await;
        }
        assert!(h.server.objects().delete("", "v1", "configmaps", "default", "c"));
        write_at(&h.server, "d", 104);
        h.clock.advance(sleep);
        let relisted: &[&str] = match kind {
            FifoKind::InOrder | FifoKind::InOrderNonAtomic => {
                &["delete c@30 tombstone", "update a@101->101", "add d@104"]
            }
            FifoKind::DeltaFifo => &["update a@101->101", "add d@104", "delete c@30 tombstone"],
        };
        default.wait_for(relisted[2]).await;
        let zz = sentinel(&h, [&default, &skipping]).await;

        let initial = ["add a@10 initial", "add b@20 initial", "add c@30 initial"];
        let watched = ["update a@10->101", "delete b@102"];
        let expected: Vec<_> =
            initial.iter().chain(&watched).chain(relisted).map(|c| (*c).to_owned()).chain([zz]).collect();
        assert_eq!(default.get(), expected, "{kind:?}, default handler");
        let without_sync: Vec<_> = expected.iter().filter(|c| *c != "update a@101->101").cloned().collect();
        assert_eq!(skipping.get(), without_sync, "{kind:?}, handler skipping unchanged updates");
        h.stop().await;
    }
}

/// Mirrors client-go shared_informer.go `sharedProcessor.addListener` and
/// `sharedIndexInformer.OnUpdate` when the first watch ends with ERROR 410 at once: LIST a(10)
/// b(20); while the informer backs off, a is updated to 150; the relist returns a(150), b(20).
/// Every handler hears update a 10->150 and update b 20->20 (unchanged, a sync); a handler that
/// skips unchanged updates only the first. Both FIFOs.
#[tokio::test]
async fn a_410_on_the_first_watch_re_announces_unchanged_objects() {
    for kind in [FifoKind::InOrder, FifoKind::InOrderNonAtomic, FifoKind::DeltaFifo] {
        let (mut h, default, skipping) = scenario(kind).await;
        write_at(&h.server, "a", 10);
        write_at(&h.server, "b", 20);
        h.server.faults().next_watch(WatchFault::Error {
            after: 0,
            code: 410,
            reason: "Expired".into(),
            message: "too old resource version: 20 (21)".into(),
        });
        h.start();
        h.synced().await;
        let sleep = backoff(&h).await;
        write_at(&h.server, "a", 150);
        h.clock.advance(sleep);
        default.wait_for("update b@20->20").await;
        let zz = sentinel(&h, [&default, &skipping]).await;

        let expected = ["add a@10 initial", "add b@20 initial", "update a@10->150", "update b@20->20", &zz];
        assert_eq!(default.get(), expected, "{kind:?}, default handler");
        let without_sync = ["add a@10 initial", "add b@20 initial", "update a@10->150", &zz];
        assert_eq!(skipping.get(), without_sync, "{kind:?}, handler skipping unchanged updates");
        h.stop().await;
    }
}

/// Mirrors client-go shared_informer.go `sharedIndexInformer.OnUpdate` ("Events that didn't
/// change resourceVersion are treated as resync events") with `sharedProcessor.addListener`'s
/// syncing set: a watch MODIFIED event carrying a's cached resourceVersion (10) reaches a
/// default handler as update a 10->10, and not a handler that skips unchanged updates. Both
/// FIFOs.
#[tokio::test]
async fn a_watch_event_repeating_the_cached_version_is_a_sync() {
    for kind in [FifoKind::InOrder, FifoKind::InOrderNonAtomic, FifoKind::DeltaFifo] {
        let (mut h, default, skipping) = scenario(kind).await;
        write_at(&h.server, "a", 10);
        let frame = json!({
            "type": "MODIFIED",
            "object": {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "a", "namespace": "default", "resourceVersion": "10"},
                "data": {"v": "10"},
            },
        });
        h.server
            .faults()
            .next_watch(WatchFault::RawFrame { after: 0, bytes: format!("{frame}\n").into_bytes() });
        h.start();
        h.synced().await;
        default.wait_for("update a@10->10").await;
        let zz = sentinel(&h, [&default, &skipping]).await;

        assert_eq!(default.get(), ["add a@10 initial", "update a@10->10", &zz], "{kind:?}, default handler");
        assert_eq!(skipping.get(), ["add a@10 initial", &zz], "{kind:?}, handler skipping unchanged updates");
        h.stop().await;
    }
}
