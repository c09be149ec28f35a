//! `--metrics-addr`: the workqueue's metrics (through `PrometheusMetricsProvider`) plus gauges
//! for the informer and its listeners, served as OpenMetrics text by a tiny HTTP thread.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use anyhow::{Context, Result};
use kcache_workqueue::PrometheusMetricsProvider;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::display::Snapshot;

type Labels = Vec<(&'static str, String)>;

/// The demo's own metrics, updated from the display's snapshots.
#[derive(Debug, Clone)]
pub(crate) struct DemoMetrics {
    listener_pending: Family<Labels, Gauge>,
    listener_high_water: Family<Labels, Gauge>,
    listener_delivered: Family<Labels, Gauge>,
    cache_objects: Gauge,
    fifo_len: Gauge,
    last_sync_rv: Gauge,
    reconciles: Family<Labels, Gauge>,
    churn_ops: Gauge,
    /// Watch and list errors the informer reported.
    pub(crate) watch_errors: Counter<u64, AtomicU64>,
}

/// The registry being served, with the demo's metric handles.
#[derive(Debug)]
pub(crate) struct Metrics {
    pub(crate) demo: DemoMetrics,
    pub(crate) provider: PrometheusMetricsProvider,
    registry: Registry,
}

impl Metrics {
    /// Registers every metric.
    pub(crate) fn new() -> Self {
        let mut registry = Registry::default();
        let provider = PrometheusMetricsProvider::new(&mut registry);
        let demo = DemoMetrics {
            listener_pending: Family::default(),
            listener_high_water: Family::default(),
            listener_delivered: Family::default(),
            cache_objects: Gauge::default(),
            fifo_len: Gauge::default(),
            last_sync_rv: Gauge::default(),
            reconciles: Family::default(),
            churn_ops: Gauge::default(),
            watch_errors: Counter::default(),
        };
        let r = registry.sub_registry_with_prefix("kcache");
        r.register(
            "listener_pending",
            "Notifications waiting for an event handler (its listener's backlog)",
            demo.listener_pending.clone(),
        );
        r.register(
            "listener_pending_high_water",
            "Largest backlog an event handler has had",
            demo.listener_high_water.clone(),
        );
        r.register(
            "listener_delivered",
            "Notifications delivered to an event handler",
            demo.listener_delivered.clone(),
        );
        r.register("informer_cache_objects", "Objects in the informer's cache", demo.cache_objects.clone());
        r.register("informer_fifo_length", "Deltas waiting in the informer's FIFO", demo.fifo_len.clone());
        r.register(
            "informer_last_sync_resource_version",
            "The resourceVersion the reflector last synced to (when numeric)",
            demo.last_sync_rv.clone(),
        );
        r.register(
            "informer_watch_errors",
            "List and watch errors reported by the reflector",
            demo.watch_errors.clone(),
        );
        r.register(
            "demo_reconciles",
            "Reconcile attempts by outcome (ok, absent, failed)",
            demo.reconciles.clone(),
        );
        r.register("demo_churn_operations", "Successful churn operations", demo.churn_ops.clone());
        Self { demo, provider, registry }
    }

    /// Serves the registry at `addr` on a background thread; returns the bound address.
    pub(crate) fn serve(self, addr: &str) -> Result<(SocketAddr, DemoMetrics)> {
        let listener = TcpListener::bind(addr).with_context(|| format!("--metrics-addr {addr}"))?;
        let bound = listener.local_addr()?;
        let registry = Arc::new(self.registry);
        std::thread::Builder::new().name("kcache-demo-metrics".into()).spawn(move || {
            for stream in listener.incoming().flatten() {
                if let Err(e) = respond(stream, &registry) {
                    tracing::debug!(error = %e, "metrics request failed");
                }
            }
        })?;
        Ok((bound, self.demo))
    }
}

impl DemoMetrics {
    /// Copies a snapshot into the gauges.
    pub(crate) fn observe(&self, s: &Snapshot) {
        for l in &s.listeners {
            let labels = vec![("handler", l.name.clone())];
            self.listener_pending.get_or_create(&labels).set(gauge(l.pending as u64));
            self.listener_high_water.get_or_create(&labels).set(gauge(l.high_water as u64));
            self.listener_delivered.get_or_create(&labels).set(gauge(l.delivered));
        }
        self.cache_objects.set(gauge(s.cache_size as u64));
        self.fifo_len.set(gauge(s.fifo_len as u64));
        if let Ok(rv) = s.last_sync_rv.parse::<u64>() {
            self.last_sync_rv.set(gauge(rv));
        }
        for (outcome, v) in [("ok", s.reconciled), ("absent", s.reconciled_absent), ("failed", s.failures)] {
            self.reconciles.get_or_create(&vec![("outcome", outcome.to_owned())]).set(gauge(v));
        }
        self.churn_ops.set(gauge(s.churn_ops));
    }
}

fn gauge(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn respond(mut stream: TcpStream, registry: &Registry) -> Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    let mut buf = [0u8; 4096];
    let n = stream.read(&mut buf)?;
    let request = String::from_utf8_lossy(&buf[..n]);
    let path = request.split_whitespace().nth(1).unwrap_or("/");
    let (status, content_type, body) = if path == "/metrics" || path == "/" {
        let mut body = String::new();
        encode(&mut body, registry)?;
        ("200 OK", "application/openmetrics-text; version=1.0.0; charset=utf-8", body)
    } else {
        ("404 Not Found", "text/plain; charset=utf-8", "not found; try /metrics\n".to_owned())
    };
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    stream.flush()?;
    Ok(())
}
