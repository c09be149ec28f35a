//! Helpers shared by the integration tests: object builders and event shorthands.

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ObjectMeta, WatchEvent};

/// A ConfigMap named `name` with the given labels and `data.v = value`.
pub fn cm(name: &str, labels: &[(&str, &str)], value: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: (!labels.is_empty()).then(|| {
                labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>()
            }),
            ..Default::default()
        },
        data: Some([("v".to_string(), value.to_string())].into()),
        ..Default::default()
    }
}

/// A compact description of an event: `("ADDED", name, rv)`; bookmarks give `("BOOKMARK", "", rv)`
/// (with `"BOOKMARK-END"` for the initial-events-end bookmark); errors `("ERROR", reason, code)`.
pub fn describe(ev: &WatchEvent<ConfigMap>) -> (String, String, String) {
    let meta = |c: &ConfigMap| {
        (c.metadata.name.clone().unwrap_or_default(), c.metadata.resource_version.clone().unwrap_or_default())
    };
    match ev {
        WatchEvent::Added(c) => ("ADDED".into(), meta(c).0, meta(c).1),
        WatchEvent::Modified(c) => ("MODIFIED".into(), meta(c).0, meta(c).1),
        WatchEvent::Deleted(c) => ("DELETED".into(), meta(c).0, meta(c).1),
        WatchEvent::Bookmark(b) => {
            let end = b.metadata.annotations.get("k8s.io/initial-events-end").is_some_and(|v| v == "true");
            (
                if end { "BOOKMARK-END" } else { "BOOKMARK" }.into(),
                String::new(),
                b.metadata.resource_version.clone(),
            )
        }
        WatchEvent::Error(s) => ("ERROR".into(), s.reason.clone(), s.code.to_string()),
    }
}

/// The next `n` non-bookmark events of a stream, described.
pub async fn next_events<S>(stream: &mut S, n: usize) -> Vec<(String, String, String)>
where
    S: Stream<Item = kube::Result<WatchEvent<ConfigMap>>> + Unpin,
{
    let mut out = Vec::new();
    while out.len() < n {
        let ev = stream.next().await.expect("stream ended early").expect("watch error");
        let d = describe(&ev);
        if d.0 != "BOOKMARK" {
            out.push(d);
        }
    }
    out
}

/// Drains a stream to its end, returning every event described (bookmarks included).
pub async fn drain<S>(stream: &mut S) -> Vec<(String, String, String)>
where
    S: Stream<Item = kube::Result<WatchEvent<ConfigMap>>> + Unpin,
{
    let mut out = Vec::new();
    while let Some(ev) = stream.next().await {
        out.push(describe(&ev.expect("watch error")));
    }
    out
}

/// The Status of a kube API error.
pub fn status_of(err: kube::Error) -> kube::core::Status {
    match err {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Sends a request through the server's kube client with the given headers and body; returns
/// the status code, the response headers and the body parsed as JSON (`Null` when it is not).
pub async fn raw(
    server: &kcache_testserver::TestServer,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, http::HeaderMap, serde_json::Value) {
    let mut req = http::Request::builder().method(method).uri(path);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(kube::client::Body::from(body.to_vec())).unwrap();
    let resp = server.client().send(req).await.unwrap();
    let (code, headers) = (resp.status().as_u16(), resp.headers().clone());
    let bytes = http_body_util::BodyExt::collect(resp.into_body()).await.unwrap().to_bytes();
    (code, headers, serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null))
}
