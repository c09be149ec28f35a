//! The optional HTTP endpoint (feature `http`): `/healthz`, `/readyz`, `/metrics`.

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio_util::sync::CancellationToken;

use crate::health::HealthCheck;
use crate::metrics::EncodeFn;

/// Where to listen.
#[derive(Debug)]
pub(crate) enum Endpoint {
    Addr(SocketAddr),
    Listener(std::net::TcpListener),
}

/// The running endpoint; stops when dropped.
pub(crate) struct Serving {
    stop: CancellationToken,
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Binds (unless bound already) and serves until the returned handle is dropped.
pub(crate) fn serve(
    endpoint: Endpoint,
    health: HealthCheck,
    metrics: Option<EncodeFn>,
) -> std::io::Result<Serving> {
    let listener = match endpoint {
        Endpoint::Addr(addr) => std::net::TcpListener::bind(addr)?,
        Endpoint::Listener(listener) => listener,
    };
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let stop = CancellationToken::new();
    let stopped = stop.clone();
    tokio::spawn(async move {
        loop {
            let stream = tokio::select! {
                () = stopped.cancelled() => return,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        tracing::debug!(error = %e, "health endpoint: accept failed");
                        continue;
                    }
                },
            };
            let (health, metrics, stopped) = (health.clone(), metrics.clone(), stopped.clone());
            tokio::spawn(async move {
                let service = service_fn(move |req| {
                    let response = respond(&req, &health, metrics.as_ref());
                    async move { Ok::<_, Infallible>(response) }
                });
                let connection = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service);
                tokio::select! {
                    () = stopped.cancelled() => {}
                    result = connection => {
                        if let Err(e) = result {
                            tracing::debug!(error = %e, "health endpoint: connection failed");
                        }
                    }
                }
            });
        }
    });
    Ok(Serving { stop })
}

fn respond(
    req: &Request<Incoming>,
    health: &HealthCheck,
    metrics: Option<&EncodeFn>,
) -> Response<Full<Bytes>> {
    let text = |status: StatusCode, body: String| {
        Response::builder()
            .status(status)
            .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
            .body(Full::new(Bytes::from(body + "\n")))
            .unwrap_or_default()
    };
    match req.uri().path() {
        "/healthz" | "/livez" => {
            let report = health.check();
            let status = if report.is_alive() { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
            text(status, report.to_string())
        }
        "/readyz" => {
            let report = health.check();
            let status = if report.is_ready() { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
            text(status, report.to_string())
        }
        "/metrics" => match metrics.map(|encode| encode()) {
            Some(Ok(body)) => Response::builder()
                .header(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")
                .body(Full::new(Bytes::from(body)))
                .unwrap_or_default(),
            Some(Err(_)) => text(StatusCode::INTERNAL_SERVER_ERROR, "cannot encode the metrics".into()),
            None => text(StatusCode::NOT_FOUND, "no metrics: the controller has no PrometheusMetrics".into()),
        },
        _ => text(StatusCode::NOT_FOUND, "not found; try /healthz, /readyz or /metrics".into()),
    }
}
