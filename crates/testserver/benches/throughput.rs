//! Throughput of the test server: a 50k-object list and a 200k-event watch stream, read by a
//! raw hyper client (so the figures are the server's, not a typed decoder's).
//!
//! `cargo bench -p kcache-testserver --bench throughput`

use std::time::Duration;

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_main};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kcache_testserver::TestServer;
use serde_json::json;

/// Full sizes under `cargo bench`; small ones when `cargo test --all-targets` runs this once as a
/// smoke test (no `--bench` argument).
fn sizes() -> (usize, usize) {
    if std::env::args().any(|a| a == "--bench") { (50_000, 200_000) } else { (2_000, 5_000) }
}

/// A ConfigMap of roughly the size of a small real one (~400 bytes of JSON).
fn object(i: usize) -> serde_json::Value {
    json!({
        "metadata": {
            "name": format!("cm-{i:06}"),
            "namespace": format!("ns-{}", i % 10),
            "labels": {"app": "bench", "shard": (i % 16).to_string()},
            "annotations": {"example.com/owner": "kcache-testserver-bench"},
        },
        "data": {"key": format!("value-{i}"), "other": "x".repeat(64)},
    })
}

type Http = Client<HttpConnector, Empty<Bytes>>;

/// GETs `url` and returns the number of body bytes and of newlines.
async fn fetch(client: &Http, url: &str, stop_after_lines: usize) -> (usize, usize) {
    let resp = client.get(url.parse().expect("url")).await.expect("request");
    assert_eq!(resp.status(), 200);
    let mut body = resp.into_body();
    let (mut bytes, mut lines) = (0, 0);
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.expect("body").into_data() {
            bytes += data.len();
            lines += data.iter().filter(|&&b| b == b'\n').count();
            if stop_after_lines > 0 && lines >= stop_after_lines {
                break;
            }
        }
    }
    (bytes, lines)
}

fn bench(c: &mut Criterion) {
    let (list_objects, watch_events) = sizes();
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let (server, start_rv) = rt.block_on(async {
        let server = TestServer::builder().history_size(watch_events + 10).start().await;
        let start_rv = server.resource_version();
        let n = server.objects().bulk_insert("", "v1", "configmaps", (0..watch_events).map(object));
        assert_eq!(n, watch_events);
        (server, start_rv)
    });
    let client: Http = Client::builder(TokioExecutor::new()).build_http();

    let mut group = c.benchmark_group("testserver");
    group.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(8));

    // The first 50k objects (in key order) of the all-namespaces list: one page of 50k.
    let list_url = format!("{}/api/v1/configmaps?limit={list_objects}", server.url());
    group.throughput(Throughput::Elements(list_objects as u64));
    group.bench_function(format!("list_{list_objects}_objects"), |b| {
        b.to_async(&rt).iter(|| async {
            let (bytes, _) = fetch(&client, &list_url, 0).await;
            assert!(bytes > list_objects * 100);
        })
    });

    // Replay of 200k events from the history to one watcher.
    let watch_url = format!(
        "{}/api/v1/configmaps?watch=true&resourceVersion={start_rv}&timeoutSeconds=600",
        server.url()
    );
    group.throughput(Throughput::Elements(watch_events as u64));
    group.bench_function(format!("watch_{watch_events}_events"), |b| {
        b.to_async(&rt).iter(|| async {
            let (_, lines) = fetch(&client, &watch_url, watch_events).await;
            assert_eq!(lines, watch_events);
        })
    });
    group.finish();
    drop(server);
}

// criterion_group! generates an undocumented function.
#[allow(missing_docs)]
mod group {
    criterion::criterion_group!(benches, super::bench);
}
use group::benches;
criterion_main!(benches);
