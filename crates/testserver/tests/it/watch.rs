//! Plain watches through `kube::Api::watch`: synthetic ADDED from "" and "0", replay from a
//! resourceVersion, 410 for a compacted one, bookmarks, timeouts, namespaces and selectors.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_testserver::{TestServer, WatchListSupport};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, WatchParams};
use serde_json::json;

use crate::common::{cm, describe, drain, next_events};

/// Three objects created in order a, b, c; returns their resourceVersions.
async fn three(cms: &Api<ConfigMap>) -> Vec<String> {
    let mut rvs = Vec::new();
    for n in ["a", "b", "c"] {
        let c = cms.create(&PostParams::default(), &cm(n, &[], "1")).await.unwrap();
        rvs.push(c.metadata.resource_version.unwrap());
    }
    rvs
}

#[tokio::test]
async fn watch_from_zero_sends_synthetic_added_not_in_rv_order_then_live_events() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let rvs = three(&cms).await;
    for from in ["0", ""] {
        let wp = WatchParams::default().disable_bookmarks();
        let mut s = cms.watch(&wp, from).await.unwrap().boxed();
        let initial = next_events(&mut s, 3).await;
        // Newest first: the order a client must not trust.
        let want: Vec<_> = [("c", &rvs[2]), ("b", &rvs[1]), ("a", &rvs[0])]
            .iter()
            .map(|(n, rv)| ("ADDED".to_string(), n.to_string(), rv.to_string()))
            .collect();
        assert_eq!(initial, want, "from {from:?}");
    }
    let wp = WatchParams::default().disable_bookmarks();
    let mut s = cms.watch(&wp, "0").await.unwrap().boxed();
    next_events(&mut s, 3).await;
    cms.patch("a", &PatchParams::default(), &Patch::Merge(json!({"data": {"v": "2"}}))).await.unwrap();
    cms.delete("b", &DeleteParams::default()).await.unwrap();
    let live = next_events(&mut s, 2).await;
    assert_eq!(live[0].0, "MODIFIED");
    assert_eq!(live[1].0, "DELETED");
    assert_eq!(live[1].1, "b");
    assert_eq!(live[1].2, server.resource_version().to_string(), "DELETED carries the deletion's rv");
}

#[tokio::test]
async fn watch_from_a_resource_version_replays_exactly_the_later_events() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let rvs = three(&cms).await;
    cms.delete("a", &DeleteParams::default()).await.unwrap();
    let wp = WatchParams::default().disable_bookmarks().timeout(1);
    let mut s = cms.watch(&wp, &rvs[1]).await.unwrap().boxed();
    let evs = next_events(&mut s, 2).await;
    assert_eq!(
        evs.iter().map(|e| (e.0.as_str(), e.1.as_str())).collect::<Vec<_>>(),
        vec![("ADDED", "c"), ("DELETED", "a")]
    );
}

#[tokio::test]
async fn watch_from_a_compacted_resource_version_gets_one_410_error_then_close() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let rvs = three(&cms).await;
    server.compact();
    let mut s = cms.watch(&WatchParams::default(), &rvs[0]).await.unwrap().boxed();
    let ev = s.next().await.unwrap().unwrap();
    let kube::api::WatchEvent::Error(status) = ev else { panic!("expected ERROR, got {ev:?}") };
    assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
    assert_eq!(status.message, format!("too old resource version: {} ({})", rvs[0], rvs[2]));
    assert!(s.next().await.is_none(), "the stream closes after the error");
}

#[tokio::test]
async fn bounded_history_expires_old_resource_versions() {
    let server = TestServer::builder().history_size(2).start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let rvs = three(&cms).await;
    // History holds b and c: watching from a's rv still works (events after it are b, c).
    let wp = WatchParams::default().disable_bookmarks();
    let mut s = cms.watch(&wp, &rvs[0]).await.unwrap().boxed();
    assert_eq!(next_events(&mut s, 2).await.iter().map(|e| e.1.clone()).collect::<Vec<_>>(), ["b", "c"]);
    // From the rv before a, the ADDED of a is gone.
    let before: u64 = rvs[0].parse::<u64>().unwrap() - 1;
    let mut s = cms.watch(&wp, &before.to_string()).await.unwrap().boxed();
    assert_eq!(describe(&s.next().await.unwrap().unwrap()).0, "ERROR");
}

#[tokio::test]
async fn set_history_size_trims_the_history_at_once_and_bounds_it_from_then_on() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let rvs = three(&cms).await;
    let before_a = (rvs[0].parse::<u64>().unwrap() - 1).to_string();
    let wp = WatchParams::default().disable_bookmarks();
    let names = |evs: Vec<(String, String, String)>| evs.into_iter().map(|e| e.1).collect::<Vec<_>>();
    // The default history holds all three.
    let mut s = cms.watch(&wp, &before_a).await.unwrap().boxed();
    assert_eq!(names(next_events(&mut s, 3).await), ["a", "b", "c"]);

    server.set_history_size(2);
    let mut s = cms.watch(&wp, &before_a).await.unwrap().boxed();
    assert_eq!(describe(&s.next().await.unwrap().unwrap()).2, "410", "a's event is gone");
    let mut s = cms.watch(&wp, &rvs[0]).await.unwrap().boxed();
    assert_eq!(names(next_events(&mut s, 2).await), ["b", "c"]);

    // Two events from then on: one more write drops b's.
    cms.create(&PostParams::default(), &cm("d", &[], "1")).await.unwrap();
    let mut s = cms.watch(&wp, &rvs[0]).await.unwrap().boxed();
    assert_eq!(describe(&s.next().await.unwrap().unwrap()).2, "410", "b's event is gone");
    let mut s = cms.watch(&wp, &rvs[1]).await.unwrap().boxed();
    assert_eq!(names(next_events(&mut s, 2).await), ["c", "d"]);
}

#[tokio::test]
async fn set_bookmark_interval_applies_to_watches_opened_afterwards() {
    // An hour: no watch below would see a bookmark before its timeout at this interval.
    let server = TestServer::builder().bookmark_interval(Duration::from_secs(3600)).start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let rv = server.resource_version().to_string();
    let mut before = cms.watch(&WatchParams::default().timeout(1), &rv).await.unwrap().boxed();
    server.set_bookmark_interval(Duration::from_millis(10));
    let mut after = cms.watch(&WatchParams::default().timeout(10), &rv).await.unwrap().boxed();
    // With the new interval a bookmark comes long before the timeout ends the stream.
    let ev = after.next().await.expect("a bookmark before the timeout").unwrap();
    assert_eq!(describe(&ev), ("BOOKMARK".into(), String::new(), rv));
    // The watch opened before keeps the hour: nothing until its timeout.
    assert_eq!(drain(&mut before).await, []);
}

#[tokio::test]
async fn bookmarks_arrive_periodically_with_only_the_resource_version() {
    let server = TestServer::builder().bookmark_interval(Duration::from_millis(20)).start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let rvs = three(&cms).await;
    let mut s = cms.watch(&WatchParams::default(), &rvs[2]).await.unwrap().boxed();
    let ev = s.next().await.unwrap().unwrap();
    let kube::api::WatchEvent::Bookmark(b) = ev else { panic!("expected a bookmark, got {ev:?}") };
    assert_eq!(b.metadata.resource_version, rvs[2]);
    assert_eq!((b.types.kind.as_str(), b.types.api_version.as_str()), ("ConfigMap", "v1"));
    assert!(b.metadata.annotations.is_empty());
    // A later bookmark moves with writes.
    cms.create(&PostParams::default(), &cm("d", &[], "1")).await.unwrap();
    loop {
        let d = describe(&s.next().await.unwrap().unwrap());
        if d.0 == "BOOKMARK" && d.2 == server.resource_version().to_string() {
            break;
        }
    }
}

#[tokio::test]
async fn no_bookmarks_unless_allowed() {
    let server = TestServer::builder().bookmark_interval(Duration::from_millis(1)).start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    three(&cms).await;
    let wp = WatchParams::default().disable_bookmarks().timeout(1);
    let mut s = cms.watch(&wp, &server.resource_version().to_string()).await.unwrap().boxed();
    cms.create(&PostParams::default(), &cm("d", &[], "1")).await.unwrap();
    let evs = drain(&mut s).await;
    assert_eq!(evs.iter().map(|e| e.0.as_str()).collect::<Vec<_>>(), ["ADDED"]);
}

#[tokio::test(start_paused = true)]
async fn timeout_seconds_ends_the_stream_cleanly() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    three(&cms).await;
    let start = tokio::time::Instant::now();
    let wp = WatchParams::default().disable_bookmarks().timeout(5);
    let mut s = cms.watch(&wp, "0").await.unwrap().boxed();
    let evs = drain(&mut s).await;
    assert_eq!(evs.len(), 3);
    assert!(start.elapsed() >= Duration::from_secs(5), "the stream ends at the timeout, not before");
}

/// `timeoutSeconds` as k8s.io/apiserver/pkg/endpoints/handlers/watch.go `handleWatch` reads it:
/// 0 means the default (the request timeout), while a negative value gives an already expired
/// context and timer, so the stream ends right after the 200 headers.
#[tokio::test(start_paused = true)]
async fn zero_timeout_seconds_is_the_default_and_a_negative_one_ends_at_once() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    three(&cms).await;
    let watch = |timeout: i64| {
        let client = server.client();
        async move {
            let start = tokio::time::Instant::now();
            let req = http::Request::get(format!(
                "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=0&timeoutSeconds={timeout}"
            ))
            .body(kube::client::Body::from(Vec::new()))
            .unwrap();
            let resp = client.send(req).await.unwrap();
            let code = resp.status().as_u16();
            let body = http_body_util::BodyExt::collect(resp.into_body()).await.unwrap().to_bytes();
            (code, body.split(|b| *b == b'\n').filter(|l| !l.is_empty()).count(), start.elapsed())
        }
    };
    let (code, events, elapsed) = watch(-1).await;
    assert_eq!((code, events), (200, 0));
    assert!(elapsed < Duration::from_secs(1), "ended at once: {elapsed:?}");
    let (code, events, elapsed) = watch(0).await;
    assert_eq!((code, events), (200, 3), "the three synthetic ADDED events");
    assert!(elapsed >= Duration::from_secs(1800), "the default timeout: {elapsed:?}");
}

#[tokio::test]
async fn namespaced_and_all_namespace_watches() {
    let server = TestServer::start().await;
    let client = server.client();
    let ns1: Api<ConfigMap> = Api::namespaced(client.clone(), "one");
    let ns2: Api<ConfigMap> = Api::namespaced(client.clone(), "two");
    let all: Api<ConfigMap> = Api::all(client);
    let rv = server.resource_version().to_string();
    let wp = WatchParams::default().disable_bookmarks();
    let mut w1 = ns1.watch(&wp, &rv).await.unwrap().boxed();
    let mut wall = all.watch(&wp, &rv).await.unwrap().boxed();
    ns2.create(&PostParams::default(), &cm("x", &[], "1")).await.unwrap();
    ns1.create(&PostParams::default(), &cm("y", &[], "1")).await.unwrap();
    assert_eq!(next_events(&mut w1, 1).await[0].1, "y");
    let both = next_events(&mut wall, 2).await;
    assert_eq!((both[0].1.as_str(), both[1].1.as_str()), ("x", "y"));
}

#[tokio::test]
async fn objects_entering_and_leaving_a_label_selector_are_added_and_deleted() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let wp = WatchParams::default().disable_bookmarks().labels("app=web");
    let mut s = cms.watch(&wp, &server.resource_version().to_string()).await.unwrap().boxed();
    cms.create(&PostParams::default(), &cm("other", &[("app", "db")], "1")).await.unwrap();
    cms.create(&PostParams::default(), &cm("a", &[("app", "web")], "1")).await.unwrap();
    cms.patch("a", &PatchParams::default(), &Patch::Merge(json!({"data": {"v": "2"}}))).await.unwrap();
    cms.patch("a", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"app": "db"}}})))
        .await
        .unwrap();
    let left_rv = server.resource_version().to_string();
    cms.patch(
        "other",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "web"}}})),
    )
    .await
    .unwrap();
    let evs = next_events(&mut s, 4).await;
    assert_eq!(
        evs.iter().map(|e| (e.0.as_str(), e.1.as_str())).collect::<Vec<_>>(),
        vec![("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a"), ("ADDED", "other")]
    );
    assert_eq!(evs[2].2, left_rv, "the DELETED for leaving the selector has the change's rv");
}

#[tokio::test]
async fn field_selector_on_name_filters_watch_and_initial_events() {
    let server = TestServer::start().await;
    server.faults().set_watch_list_support(WatchListSupport::Ignored);
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    three(&cms).await;
    let wp = WatchParams::default().disable_bookmarks().fields("metadata.name=b");
    let mut s = cms.watch(&wp, "0").await.unwrap().boxed();
    assert_eq!(next_events(&mut s, 1).await[0].1, "b");
    cms.patch("a", &PatchParams::default(), &Patch::Merge(json!({"data": {"v": "2"}}))).await.unwrap();
    cms.patch("b", &PatchParams::default(), &Patch::Merge(json!({"data": {"v": "2"}}))).await.unwrap();
    assert_eq!(
        next_events(&mut s, 1).await[0],
        ("MODIFIED".into(), "b".into(), server.resource_version().to_string())
    );
}

#[tokio::test]
async fn watch_metadata_streams_the_same_events() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    three(&cms).await;
    let wp = WatchParams::default().disable_bookmarks();
    let mut s = cms.watch_metadata(&wp, "0").await.unwrap().boxed();
    let mut names = Vec::new();
    while names.len() < 3 {
        if let kube::api::WatchEvent::Added(m) = s.next().await.unwrap().unwrap() {
            let types = m.types.expect("typed");
            assert_eq!(
                (types.kind.as_str(), types.api_version.as_str()),
                ("PartialObjectMetadata", "meta.k8s.io/v1")
            );
            names.push(m.metadata.name.unwrap());
        }
    }
    assert_eq!(names, ["c", "b", "a"]);

    let list = cms.list_metadata(&Default::default()).await.unwrap();
    assert_eq!(list.items.len(), 3);
    assert_eq!(list.types.kind, "PartialObjectMetadataList");
    let one = cms.get_metadata("a").await.unwrap();
    assert_eq!(one.metadata.name.as_deref(), Some("a"));
}
