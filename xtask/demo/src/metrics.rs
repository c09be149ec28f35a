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

use crate::snapshot::Snapshot;

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

/// The reflector's metrics (lists, watches, events by type, relists by reason, and the time of
/// the last published resource version, from which the age is read), fed by the informer's
/// reflector through `kcache_reflector::ReflectorMetrics`.
#[derive(Debug, Clone, Default)]
pub(crate) struct ReflectorPrometheus {
    lists: Counter<u64, AtomicU64>,
    list_failures: Family<Labels, Counter<u64, AtomicU64>>,
    watches: Family<Labels, Counter<u64, AtomicU64>>,
    watch_ends: Family<Labels, Counter<u64, AtomicU64>>,
    events: Family<Labels, Counter<u64, AtomicU64>>,
    relists: Family<Labels, Counter<u64, AtomicU64>>,
    last_sync_unix_seconds: Gauge,
}

impl kcache_reflector::ReflectorMetrics for ReflectorPrometheus {
    fn list_completed(&self, _: &str, _: usize, _: Duration) {
        self.lists.inc();
    }
    fn list_failed(&self, _: &str, kind: kcache_reflector::ErrorKind) {
        self.list_failures.get_or_create(&vec![("kind", kind.as_str().to_owned())]).inc();
    }
    fn watch_started(&self, _: &str, watch_list: bool) {
        self.watches.get_or_create(&vec![("watch_list", watch_list.to_string())]).inc();
    }
    fn watch_ended(&self, _: &str, error: Option<kcache_reflector::ErrorKind>) {
        let how = error.map_or("clean", |k| k.as_str());
        self.watch_ends.get_or_create(&vec![("end", how.to_owned())]).inc();
    }
    fn event_received(&self, _: &str, event_type: &'static str) {
        self.events.get_or_create(&vec![("type", event_type.to_owned())]).inc();
    }
    fn relist(&self, _: &str, reason: kcache_reflector::RelistReason) {
        self.relists.get_or_create(&vec![("reason", reason.as_str().to_owned())]).inc();
    }
    fn last_sync_resource_version(&self, _: &str, _: &str) {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        self.last_sync_unix_seconds.set(gauge(now.as_secs()));
    }
}

/// The registry being served, with the demo's metric handles.
#[derive(Debug)]
pub(crate) struct Metrics {
    pub(crate) demo: DemoMetrics,
    pub(crate) provider: PrometheusMetricsProvider,
    pub(crate) reflector: ReflectorPrometheus,
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
        let reflector = ReflectorPrometheus::default();
        let rr = r.sub_registry_with_prefix("reflector");
        rr.register("lists", "Completed LISTs (all pages)", reflector.lists.clone());
        rr.register("list_failures", "Failed LISTs by error kind", reflector.list_failures.clone());
        rr.register(
            "watches",
            "Watches opened (watch_list: a watch-list attempt)",
            reflector.watches.clone(),
        );
        rr.register("watch_ends", "Watches ended, cleanly or by error kind", reflector.watch_ends.clone());
        rr.register("watch_events", "Watch events received by type", reflector.events.clone());
        rr.register("relists", "Relists by reason", reflector.relists.clone());
        rr.register(
            "last_sync_timestamp_seconds",
            "When the reflector last published a resource version (Unix time; age = now - this)",
            reflector.last_sync_unix_seconds.clone(),
        );
        Self { demo, provider, reflector, registry }
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
