//! The `prometheus` feature's provider exports client-go's metric names with exact values.

#![cfg(feature = "prometheus")]

use std::sync::Arc;

use kcache_workqueue::{AddOpts, PriorityQueue, PrometheusMetricsProvider, Queue};
use prometheus_client::registry::Registry;

fn encode(registry: &Registry) -> String {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
    text
}

#[tokio::test(start_paused = true)]
async fn exports_client_go_names() {
    let mut registry = Registry::default();
    let provider = Arc::new(PrometheusMetricsProvider::new(&mut registry));
    let q: Queue<&str> = Queue::builder().name("pods").metrics_provider(provider.clone()).build();
    q.add("a");
    q.add("b");
    let a = q.get().await.unwrap();
    q.done(&a);

    let pq: PriorityQueue<&str> =
        PriorityQueue::builder().name("prio").metrics_provider(provider).build().unwrap();
    pq.add_with_opts(AddOpts { priority: Some(-100), ..AddOpts::default() }, ["x", "y"]);
    pq.add_after("z", std::time::Duration::from_secs(1));

    let text = encode(&registry);
    for line in [
        r#"workqueue_depth{name="pods",priority=""} 1"#,
        r#"workqueue_adds_total{name="pods"} 2"#,
        r#"workqueue_queue_duration_seconds_count{name="pods"} 1"#,
        r#"workqueue_work_duration_seconds_count{name="pods"} 1"#,
        r#"workqueue_depth{name="prio",priority="-100"} 2"#,
        r#"workqueue_retries_total{name="prio"} 1"#,
        "# TYPE workqueue_unfinished_work_seconds gauge",
        "# TYPE workqueue_longest_running_processor_seconds gauge",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
}
