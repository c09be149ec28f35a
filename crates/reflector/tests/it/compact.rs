//! `ApiListerWatcher::compact_objects`: decoded objects reallocated at their exact size. No
//! client-go counterpart (Go's decoder sizes slices differently); the memory it saves is
//! measured by `cargo xtask bench`'s `scale_full` (docs/benchmarks.md, "Where the bytes go").

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kcache_reflector::{ApiListerWatcher, ListOptions, ListerWatcher, WatchEvent, WatchOptions};
use kcache_testserver::TestServer;
use kube::Api;
use serde_json::json;

/// A Pod with three volumes, three containers and five env vars in the first: lengths serde's
/// doubling growth does not hit exactly.
fn pod(name: &str) -> serde_json::Value {
    let env: Vec<_> = (0..5).map(|i| json!({"name": format!("V{i}"), "value": "x"})).collect();
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"namespace": "default", "name": name},
        "spec": {
            "containers": [
                {"name": "a", "image": "i", "env": env},
                {"name": "b", "image": "i"},
                {"name": "c", "image": "i"},
            ],
            "volumes": [
                {"name": "v1", "emptyDir": {}},
                {"name": "v2", "emptyDir": {}},
                {"name": "v3", "emptyDir": {}},
            ],
        },
    })
}

/// (containers, volumes, first container's env) as (len, capacity) pairs.
fn shape(p: &Pod) -> [(usize, usize); 3] {
    let spec = p.spec.as_ref().unwrap();
    let volumes = spec.volumes.as_ref().unwrap();
    let env = spec.containers[0].env.as_ref().unwrap();
    [
        (spec.containers.len(), spec.containers.capacity()),
        (volumes.len(), volumes.capacity()),
        (env.len(), env.capacity()),
    ]
}

/// Listed and watched objects hold no `Vec` growth slack with `compact_objects(true)`; without
/// it they keep what serde's growth left (the default, unchanged).
#[tokio::test]
async fn compacted_objects_hold_vectors_at_their_length() {
    let server = TestServer::start().await;
    server.objects().upsert("", "v1", "pods", pod("p0")).unwrap();
    for compact in [false, true] {
        let lw = ApiListerWatcher::new(Api::<Pod>::namespaced(server.client(), "default"))
            .compact_objects(compact);
        let page = lw.list(ListOptions::default()).await.unwrap();
        let listed = shape(&page.items[0]);
        let mut events = lw
            .watch(WatchOptions {
                resource_version: page.resource_version.clone(),
                timeout_seconds: 300,
                ..WatchOptions::default()
            })
            .await
            .unwrap();
        let name = format!("p{}", u8::from(compact) + 1);
        server.objects().upsert("", "v1", "pods", pod(&name)).unwrap();
        let watched = match events.next().await {
            Some(Ok(WatchEvent::Added(p))) => shape(&p),
            other => panic!("expected {name} added, got {other:?}"),
        };
        for shape in [listed, watched] {
            assert_eq!(shape.map(|(len, _)| len), [3, 3, 5]);
            if compact {
                assert!(shape.iter().all(|(len, cap)| len == cap), "compacted: {shape:?}");
            } else {
                assert!(shape.iter().any(|(len, cap)| len != cap), "serde's growth slack: {shape:?}");
            }
        }
    }
}
