//! The HTTP endpoint: `/healthz`, `/readyz`, `/metrics` for as long as the controller runs.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kcache_controller::{Action, Context, Controller, Watch};
use kcache_testserver::TestServer;
use kube::api::Api;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::{Running, Signal, cm, create};

/// One HTTP/1.1 GET; the status code and the body.
async fn get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let status = response.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    Ok((status, body))
}

/// One builder call serves liveness, readiness and metrics (controller-runtime's health probe
/// and metrics servers): 200 with the report while running, and the endpoint goes with the
/// controller.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoint_serves_healthz_readyz_and_metrics() {
    let server = TestServer::start().await;
    let cms = Api::<ConfigMap>::namespaced(server.client(), "default");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let signal = Signal::default();
    let controller = Controller::<ConfigMap>::new(server.client(), Watch::namespace("default"))
        .name("http-test")
        .http_listener(listener);
    #[cfg(feature = "prometheus")]
    let controller = controller.metrics(&kcache_controller::PrometheusMetrics::new());
    let controller = controller.context(signal.clone()).reconcile(
        |_cm: Arc<ConfigMap>, ctx: Context<Signal>| async move {
            ctx.record("reconciled");
            Ok::<_, Infallible>(Action::await_change())
        },
    );
    let running = Running::spawn(move |cancel| controller.run(cancel));
    create(&cms, &cm("a", &[], &[])).await;
    signal.wait_for("a reconcile", |e| !e.is_empty()).await;

    let (status, body) = get(addr, "/readyz").await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.starts_with("controller http-test: running"), "{body}");
    assert_eq!(get(addr, "/healthz").await.unwrap().0, 200);
    let (status, body) = get(addr, "/metrics").await.unwrap();
    if cfg!(feature = "prometheus") {
        assert_eq!(status, 200);
        assert!(body.contains(r#"workqueue_adds_total{name="http-test"}"#), "{body}");
    } else {
        assert_eq!(status, 404);
    }
    assert_eq!(get(addr, "/nothing").await.unwrap().0, 404);

    running.stop().await.unwrap();
    assert!(get(addr, "/readyz").await.is_err(), "the endpoint stops with the controller");
}
