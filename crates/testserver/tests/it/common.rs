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
