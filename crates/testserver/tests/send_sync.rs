//! Every public type can cross threads: handles are shared between a test and the tasks it
//! spawns.

use kcache_testserver::{
    Builder, DirectError, Faults, Objects, RequestFault, RequestLog, RequestRecord, ResourceDef, TestServer,
    Verb, WatchFault, WatchListSupport,
};

fn send_sync<T: Send + Sync + 'static>() {}

#[test]
fn public_types_are_send_and_sync() {
    send_sync::<TestServer>();
    send_sync::<Builder>();
    send_sync::<Faults>();
    send_sync::<RequestLog>();
    send_sync::<RequestRecord>();
    send_sync::<Objects>();
    send_sync::<ResourceDef>();
    send_sync::<RequestFault>();
    send_sync::<WatchFault>();
    send_sync::<WatchListSupport>();
    send_sync::<Verb>();
    send_sync::<DirectError>();
}

#[tokio::test]
async fn a_single_object_watch_path_filters_by_name() {
    use futures::TryStreamExt;
    let server = TestServer::start().await;
    let client = server.client();
    let objects = server.objects();
    for name in ["a", "b"] {
        objects.upsert("", "v1", "configmaps", serde_json::json!({"metadata": {"name": name}})).unwrap();
    }
    let req = http::Request::get(
        "/api/v1/namespaces/default/configmaps/b?watch=true&resourceVersion=0&timeoutSeconds=1",
    )
    .body(Vec::new())
    .unwrap();
    let s = client.request_events::<k8s_openapi::api::core::v1::ConfigMap>(req).await.unwrap();
    let mut s = std::pin::pin!(s);
    let mut names = Vec::new();
    while let Some(ev) = s.try_next().await.unwrap() {
        if let kube::api::WatchEvent::Added(c) = ev {
            names.push(c.metadata.name.unwrap());
        }
    }
    assert_eq!(names, ["b"]);
}
