//! Bad input where the cache matters: an informer (both FIFOs) whose watch carries a bad frame
//! ends with a cache equal to the server and handlers whose last word on every key is the
//! server's, and no injected object ever reaches the cache or a handler. The reflector-level
//! corpus (`kcache-reflector`'s `tests/bad_input.rs`) checks the error kinds and relists; this
//! checks what a controller sees. client-go's behaviour per frame is documented there.

use crate::common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Ev, Harness, Recorder, create, delete, update};
use kcache_informer::FifoKind;
use kcache_reflector::{ErrorKind, ReflectorConfig};
use kcache_testserver::{TestServer, WatchFault};

/// name, frame, whether the watch ends with an error (and a relist after backoff).
fn corpus() -> Vec<(&'static str, String, bool)> {
    let cm = |meta: &str| {
        format!(r#"{{"kind":"ConfigMap","apiVersion":"v1","metadata":{{{meta}}},"data":{{"v":"injected"}}}}"#)
    };
    vec![
        (
            "truncated JSON",
            r#"{"type":"MODIFIED","object":{"kind":"ConfigMap","metadata":{"name":"a""#.into(),
            true,
        ),
        (
            "wrong kind",
            r#"{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"pod","namespace":"default","resourceVersion":"3"}}}"#.to_owned(),
            true,
        ),
        (
            "no resourceVersion",
            format!(r#"{{"type":"ADDED","object":{}}}"#, cm(r#""name":"norv","namespace":"default""#)),
            true,
        ),
        ("bookmark without resourceVersion", r#"{"type":"BOOKMARK","object":{"metadata":{}}}"#.into(), true),
        ("unknown event type", format!(r#"{{"type":"SURPRISE","object":{}}}"#, cm(r#""name":"s""#)), true),
        ("ERROR with an odd Status", r#"{"type":"ERROR","object":{"code":"x"}}"#.into(), true),
        (
            "duplicate ADDED",
            r#"{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"default","resourceVersion":"3"},"data":{"v":"2"}}}"#.to_owned(),
            false,
        ),
        (
            "DELETED for an unknown key",
            format!(
                r#"{{"type":"DELETED","object":{}}}"#,
                cm(r#""name":"ghost","namespace":"default","resourceVersion":"3""#)
            ),
            false,
        ),
        (
            "object without metadata.name",
            format!(
                r#"{{"type":"ADDED","object":{}}}"#,
                cm(r#""namespace":"default","resourceVersion":"3""#)
            ),
            false,
        ),
    ]
}

/// name -> value on the server.
async fn server_values(api: &kube::Api<k8s_openapi::api::core::v1::ConfigMap>) -> BTreeMap<String, String> {
    let list = api.list(&Default::default()).await.unwrap();
    list.items.iter().map(|o| (common::name(o), common::value(o))).collect()
}

/// Each handler's last notification per key: `Some(value)` for add/update, `None` for delete.
fn last_word(events: &[Ev]) -> BTreeMap<String, Option<String>> {
    let mut m = BTreeMap::new();
    for e in events {
        match e {
            Ev::Add(n, v, _) | Ev::Update(n, _, v, _) => m.insert(n.clone(), Some(v.clone())),
            Ev::Delete(n, _, _) => m.insert(n.clone(), None),
        };
    }
    m
}

async fn case(fifo: FifoKind, name: &str, frame: &str, relists: bool) {
    let server = TestServer::start().await;
    let api = kube::Api::namespaced(server.client(), "default");
    create(&api, "a", "1").await;
    create(&api, "b", "1").await;
    server.faults().next_watch(WatchFault::RawFrame { after: 1, bytes: format!("{frame}\n").into_bytes() });
    let mut h = Harness::on(server, Duration::ZERO);
    h.informer.set_fifo(fifo).unwrap();
    h.informer
        .set_reflector_config(ReflectorConfig { use_watch_list: false, ..ReflectorConfig::default() })
        .unwrap();
    let errors = Arc::new(Mutex::new(Vec::new()));
    h.informer
        .set_watch_error_handler({
            let errors = errors.clone();
            move |_, e| errors.lock().unwrap().push(e.kind())
        })
        .unwrap();
    let rec = Recorder::new();
    h.informer.add_event_handler(rec.clone()).unwrap();
    h.start();
    h.synced().await;
    update(&h.api, "a", "2").await; // the one good event (rv 3), then the frame
    delete(&h.api, "b").await; // on the same watch, or missed while backing off
    create(&h.api, "c", "1").await;
    if relists {
        let d = h.clock.wait_for_sleep(|d| d < Duration::from_secs(100)).await;
        h.clock.advance(d);
    }
    let want = server_values(&h.api).await;
    rec.wait_until("handlers caught up with the server", |ev| {
        last_word(ev).into_iter().filter_map(|(k, v)| Some((k, v?))).collect::<BTreeMap<_, _>>() == want
    })
    .await;
    let cache: BTreeMap<_, _> =
        h.informer.indexer().list().iter().map(|o| (common::name(o), common::value(o))).collect();
    assert_eq!(cache, want, "{fifo:?} {name}: cache equals server");
    let events = rec.events();
    let added: Vec<_> = events.iter().filter(|e| !matches!(e, Ev::Delete(..))).map(Ev::name).collect();
    assert!(
        added.iter().all(|n| ["a", "b", "c"].contains(n)),
        "{fifo:?} {name}: an injected object reached a handler: {added:?}"
    );
    // A DELETED for a key nobody knows: DeltaFIFO drops it; the in-order FIFO passes it on as
    // client-go's RealFIFO does (its `Delete` queues unconditionally), so handlers get an
    // `on_delete` for an object they never saw (and must treat it as a no-op).
    let ghosts = events.iter().filter(|e| matches!(e, Ev::Delete(n, ..) if n == "ghost")).count();
    let expected = usize::from(name == "DELETED for an unknown key" && fifo == FifoKind::InOrder);
    assert_eq!(ghosts, expected, "{fifo:?} {name}: {events:?}");
    assert!(
        rec.events()
            .iter()
            .all(|e| !matches!(e, Ev::Add(_, v, _) | Ev::Update(_, _, v, _) if v == "injected"))
    );
    let kinds = errors.lock().unwrap().clone();
    // A watch that ended with an error is not a list-and-watch error: the handler hears of none
    // (client-go's `watch` returns nil after logging it).
    assert!(kinds.is_empty(), "{fifo:?} {name}: {kinds:?}");
    assert!(!kinds.contains(&ErrorKind::Store), "{fifo:?} {name}");
    h.stop().await;
}

/// Every frame of the corpus, through the in-order FIFO (the default) and DeltaFIFO.
#[tokio::test]
async fn bad_frames_leave_cache_and_handlers_equal_to_the_server() {
    for fifo in [FifoKind::InOrder, FifoKind::DeltaFifo] {
        for (name, frame, relists) in corpus() {
            case(fifo, name, &frame, relists).await;
        }
    }
}
