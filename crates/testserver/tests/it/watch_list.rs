//! Watch-list (`sendInitialEvents=true`): initial events, the initial-events-end bookmark, live
//! events on the same connection; the 422s for invalid combinations; and servers that predate
//! watch-list.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_testserver::{TestServer, Verb, WatchFault, WatchListSupport};
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use serde_json::json;

use crate::common::{cm, describe, drain, next_events, status_of};

async fn seeded() -> (TestServer, Api<ConfigMap>) {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    for n in ["a", "b", "c"] {
        cms.create(&PostParams::default(), &cm(n, &[], "1")).await.unwrap();
    }
    (server, cms)
}

#[tokio::test]
async fn streaming_list_sends_initial_events_then_the_end_bookmark_then_live_events() {
    let (server, cms) = seeded().await;
    let snapshot_rv = server.resource_version().to_string();
    let mut s = cms.watch(&WatchParams::streaming_lists(), "").await.unwrap().boxed();
    let mut initial = Vec::new();
    let end = loop {
        let d = describe(&s.next().await.unwrap().unwrap());
        match d.0.as_str() {
            "ADDED" => initial.push(d.1),
            "BOOKMARK-END" => break d,
            other => panic!("unexpected {other} before the end bookmark"),
        }
    };
    initial.sort();
    assert_eq!(initial, ["a", "b", "c"]);
    assert_eq!(end.2, snapshot_rv, "the end bookmark carries the snapshot resourceVersion");

    cms.create(&PostParams::default(), &cm("d", &[], "1")).await.unwrap();
    assert_eq!(next_events(&mut s, 1).await[0].1, "d");
    let log = server.request_log().filter(|r| r.verb == Verb::Watch || r.verb == Verb::List);
    assert_eq!(log.len(), 1, "one request for the whole sync: {log:?}");
    assert!(log[0].watch);
    assert_eq!(log[0].query_param("sendInitialEvents").as_deref(), Some("true"));
}

/// A watch-list from a resourceVersion the server has reached sends the current state
/// (`resourceVersionMatch=NotOlderThan`, k8s.io/apiserver/pkg/storage/cacher/cacher.go `Watch`).
#[tokio::test]
async fn streaming_list_from_a_resource_version_is_not_older_than_it() {
    let (server, cms) = seeded().await;
    let rv = server.resource_version();
    let mut s = cms.watch(&WatchParams::streaming_lists(), &rv.to_string()).await.unwrap().boxed();
    let evs = next_events(&mut s, 4).await;
    assert_eq!(evs.iter().filter(|e| e.0 == "ADDED").count(), 3);
    assert_eq!(evs[3].0, "BOOKMARK-END");
}

/// A watch-list from a resourceVersion the server has not reached is answered 200 with a single
/// ERROR event carrying the 504 "Too large resource version" Status, then the stream ends:
/// kube-apiserver's cacher (k8s.io/apiserver/pkg/storage/cacher/cacher.go `Watch`) fails
/// `waitUntilWatchCacheFreshAndForceAllEvents` with `storage.NewTooLargeResourceVersionError`
/// and wraps it in `newErrWatcher` rather than failing the request.
#[tokio::test]
async fn streaming_list_from_a_future_resource_version_gets_one_error_event() {
    let (server, cms) = seeded().await;
    let current = server.resource_version();
    let future = current + 10;
    server.faults().next_watch(WatchFault::CloseAfter(1));
    let mut s = cms.watch(&WatchParams::streaming_lists(), &future.to_string()).await.unwrap().boxed();
    let first = tokio::time::timeout(Duration::from_secs(10), s.next()).await.expect("guard");
    let Some(Ok(WatchEvent::Error(status))) = first else { panic!("expected an ERROR event, got {first:?}") };
    assert_eq!((status.code, status.reason.as_str()), (504, "Timeout"));
    assert_eq!(status.message, format!("Timeout: Too large resource version: {future}, current: {current}"));
    let details = status.details.expect("details");
    assert_eq!(details.causes[0].reason, "ResourceVersionTooLarge");
    assert_eq!(details.causes[0].message, "Too large resource version");
    assert_eq!(details.retry_after_seconds, 1);
    let rest = tokio::time::timeout(Duration::from_secs(10), drain(&mut s)).await.expect("guard");
    assert!(rest.is_empty(), "the stream ends after the ERROR event: {rest:?}");

    let log = server.request_log().filter(|r| r.verb == Verb::Watch);
    assert_eq!(log.last().map(|r| r.status), Some(200), "the watch itself succeeds: {log:?}");
    // The ERROR-only watch leaves the injected watch fault to the next real stream.
    let mut s = cms.watch(&WatchParams::streaming_lists(), &current.to_string()).await.unwrap().boxed();
    let evs = tokio::time::timeout(Duration::from_secs(10), drain(&mut s)).await.expect("guard");
    assert_eq!(evs.len(), 1, "CloseAfter(1) applies to this watch: {evs:?}");
}

#[tokio::test]
async fn a_plain_watch_from_zero_is_defaulted_to_a_watch_list_on_current_servers() {
    let (_server, cms) = seeded().await;
    let mut s = cms.watch(&WatchParams::default(), "0").await.unwrap().boxed();
    let evs = next_events(&mut s, 4).await;
    assert_eq!(evs[3].0, "BOOKMARK-END");
}

/// A raw GET through the kube client, returning the status code and the body.
async fn raw_get(server: &TestServer, query: &str) -> (u16, serde_json::Value) {
    let req = http::Request::get(format!("/api/v1/namespaces/default/configmaps?{query}"))
        .body(Vec::new())
        .unwrap();
    let client = server.client();
    let resp = client.send(req.map(kube::client::Body::from)).await.unwrap();
    let code = resp.status().as_u16();
    let body = http_body_util::BodyExt::collect(resp.into_body()).await.unwrap().to_bytes();
    (code, serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null))
}

/// Invalid watch-list options get the 422 of apimachinery's
/// pkg/apis/meta/internalversion/validation/validation.go `ValidateListOptions`, rendered by
/// `errors.NewInvalid` (pkg/api/errors/errors.go) with no `details.name` (omitempty).
#[tokio::test]
async fn invalid_watch_list_combinations_get_the_422_kube_apiserver_returns() {
    let server = TestServer::start().await;
    let (code, body) = raw_get(&server, "watch=true&sendInitialEvents=true").await;
    assert_eq!(code, 422);
    assert_eq!(body["reason"], "Invalid");
    assert_eq!(
        body["message"],
        "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires \
         setting resourceVersionMatch to NotOlderThan"
    );
    assert_eq!(body["details"]["causes"][0]["field"], "resourceVersionMatch");
    assert_eq!(body["details"]["causes"][0]["reason"], "FieldValueForbidden");
    // StatusDetails.name is omitempty: the ListOptions error has none.
    assert_eq!(body["details"].get("name"), None, "{body}");
    assert_eq!(
        (&body["details"]["kind"], &body["details"]["group"]),
        (&json!("ListOptions"), &json!("meta.k8s.io"))
    );

    let (code, body) =
        raw_get(&server, "watch=true&resourceVersion=5&resourceVersionMatch=NotOlderThan").await;
    assert_eq!(code, 422);
    assert_eq!(
        body["message"],
        "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is \
         forbidden for watch unless sendInitialEvents is provided"
    );

    let (code, body) =
        raw_get(&server, "watch=true&sendInitialEvents=true&resourceVersionMatch=Exact&resourceVersion=1")
            .await;
    assert_eq!(code, 422);
    assert_eq!(
        body["message"],
        "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden: sendInitialEvents requires \
         setting resourceVersionMatch to NotOlderThan, resourceVersionMatch: Unsupported value: \"Exact\": \
         supported values: \"NotOlderThan\"]"
    );

    // sendInitialEvents on a list.
    let (code, body) = raw_get(&server, "sendInitialEvents=true").await;
    assert_eq!(code, 422);
    assert!(body["message"].as_str().unwrap().ends_with("sendInitialEvents is forbidden for list"));
}

#[tokio::test]
async fn a_server_with_the_gate_off_rejects_send_initial_events() {
    let (server, cms) = seeded().await;
    server.faults().set_watch_list_support(WatchListSupport::GateDisabled);
    let err = cms.watch(&WatchParams::streaming_lists(), "").await.err().expect("rejected");
    let s = status_of(err);
    assert_eq!(s.code, 422);
    assert_eq!(
        s.message,
        "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden \
         for watch unless the WatchList feature gate is enabled"
    );
    // A plain watch from "0" is not defaulted: synthetic ADDED and no end bookmark.
    let mut s = cms.watch(&WatchParams::default().timeout(1), "0").await.unwrap().boxed();
    let evs = drain(&mut s).await;
    assert!(evs.iter().all(|e| e.0 != "BOOKMARK-END"), "{evs:?}");
    assert_eq!(evs.iter().filter(|e| e.0 == "ADDED").count(), 3);
}

#[tokio::test]
async fn a_1_26_server_rejects_resource_version_match_on_watch() {
    let (server, cms) = seeded().await;
    server.faults().set_watch_list_support(WatchListSupport::Legacy);
    let s = status_of(cms.watch(&WatchParams::streaming_lists(), "").await.err().expect("rejected"));
    assert_eq!(s.code, 422);
    assert_eq!(
        s.message,
        "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden: resourceVersionMatch is \
         forbidden for watch, resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless \
         resourceVersion is provided]"
    );
}

#[tokio::test(start_paused = true)]
async fn a_server_without_watch_list_ignores_send_initial_events() {
    let (server, cms) = seeded().await;
    server.faults().set_watch_list_support(WatchListSupport::Ignored);
    let wp = WatchParams::streaming_lists().timeout(3);
    let mut s = cms.watch(&wp, "").await.unwrap().boxed();
    let evs = drain(&mut s).await;
    let added = evs.iter().filter(|e| e.0 == "ADDED").count();
    assert_eq!(added, 3, "synthetic ADDED events of a plain watch: {evs:?}");
    assert!(evs.iter().all(|e| e.0 != "BOOKMARK-END"), "no end bookmark: {evs:?}");
}
