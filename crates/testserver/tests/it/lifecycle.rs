//! The server handle: public types cross threads, a single-object watch path, and dropping the
//! server stops it.

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

#[tokio::test]
async fn dropping_the_server_closes_the_listener_and_every_connection() {
    use futures::StreamExt;
    let server = TestServer::start().await;
    let addr = server.addr();
    let client = server.client();
    let cms: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = kube::Api::default_namespaced(client.clone());
    let mut s = cms.watch(&kube::api::WatchParams::default().disable_bookmarks(), "0").await.unwrap().boxed();
    drop(server);
    let end = s.next().await;
    assert!(!matches!(end, Some(Ok(_))), "the watch ends: {end:?}");
    // The accept loop stops with the listener; wait for the socket to be closed.
    loop {
        match tokio::net::TcpStream::connect(addr).await {
            Err(_) => break,
            Ok(_) => tokio::task::yield_now().await,
        }
    }
    assert!(cms.list(&Default::default()).await.is_err());
}

#[tokio::test]
async fn builder_port_serves_on_that_port_and_try_start_reports_a_taken_one() {
    let first = TestServer::start().await;
    let port = first.addr().port();
    assert_eq!(first.url(), format!("http://127.0.0.1:{port}"));
    let taken = TestServer::builder().port(port).try_start().await.unwrap_err();
    assert_eq!(taken.kind(), std::io::ErrorKind::AddrInUse);

    // A port that was free a moment ago (the window for a race is tiny).
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let second = TestServer::builder().port(free).start().await;
    assert_eq!(second.addr(), std::net::SocketAddr::from(([127, 0, 0, 1], free)));
    let cms: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::default_namespaced(second.client());
    assert!(cms.list(&Default::default()).await.unwrap().items.is_empty());
}

/// Dropping the server closes every connection, idle keep-alive ones included (a restart keeps
/// an idle connection for one more request; a drop does not).
#[tokio::test]
async fn dropping_the_server_closes_idle_connections() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = kcache_testserver::TestServer::start().await;
    let mut tcp = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    tcp.write_all(b"GET /api/v1/namespaces/default/configmaps HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tcp.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    drop(server);
    let mut rest = Vec::new();
    let read = tokio::time::timeout(std::time::Duration::from_secs(10), tcp.read_to_end(&mut rest)).await;
    assert!(read.is_ok(), "the idle connection stayed open after the server was dropped");
}
