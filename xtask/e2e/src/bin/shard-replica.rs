//! `shard-replica`: one replica of a sharded controller as a process, for the e2e suite's
//! multi-process sharding test: a `ShardCoordinator` (kcache-sharding) on member Leases and a
//! `ShardedInformer` over the ConfigMaps of one namespace, restarted with each new selector.
//!
//! ```text
//! shard-replica -kubeconfig PATH -namespace NS -group G -identity ID \
//!     [-lease-ms 4000] [-renew-ms 2000] [-retry-ms 500]
//! ```
//!
//! It prints a JSON line whenever what it serves, its cache or its sync state changes (checked
//! every 50 ms): `{"t":<unix nanos>,"id":ID,"event":"state","serving":"<ranges>","synced":B,
//! "keys":[names]}`, with the ranges in the member Lease's annotation form; `ready` at start and
//! `exit` after a SIGTERM's graceful leave.

use std::collections::BTreeSet;
use std::io::Write;
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_informer::{InformerScope, ResourceEventHandler, SharedInformerFactory};
use kcache_sharding::{ShardCoordinator, ShardedEventHandler, ShardedInformer, ShardingConfig};
use kube::ResourceExt;
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio_util::sync::CancellationToken;

struct Quiet;
impl ResourceEventHandler<ConfigMap> for Quiet {}
impl ShardedEventHandler<ConfigMap> for Quiet {}

fn line(id: &str, event: &str, rest: serde_json::Value) {
    let t = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos()) as u64;
    let mut v = serde_json::json!({"t": t, "id": id, "event": event});
    if let (Some(o), serde_json::Value::Object(r)) = (v.as_object_mut(), rest) {
        o.extend(r);
    }
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{v}");
    let _ = out.flush();
}

#[tokio::main]
async fn main() -> Result<()> {
    // Logs (RUST_LOG, e.g. `kcache_sharding=debug`) go to stderr, which the suite keeps per replica.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
    let mut args = std::env::args().skip(1);
    let (mut kubeconfig, mut ns, mut group, mut id) = (None, "default".to_string(), None, None);
    let (mut lease_ms, mut renew_ms, mut retry_ms) = (4000u64, 2000u64, 500u64);
    while let Some(a) = args.next() {
        let mut value = || args.next().with_context(|| format!("{a} needs a value"));
        match a.trim_start_matches('-') {
            "kubeconfig" => kubeconfig = Some(value()?),
            "namespace" => ns = value()?,
            "group" => group = Some(value()?),
            "identity" => id = Some(value()?),
            "lease-ms" => lease_ms = value()?.parse()?,
            "renew-ms" => renew_ms = value()?.parse()?,
            "retry-ms" => retry_ms = value()?.parse()?,
            other => bail!("unknown flag -{other}"),
        }
    }
    let kubeconfig = kubeconfig.context("-kubeconfig is required")?;
    let (group, id) = (group.context("-group is required")?, id.context("-identity is required")?);
    let kc = Kubeconfig::read_from(&kubeconfig).with_context(|| format!("reading {kubeconfig}"))?;
    let client = kube::Client::try_from(
        kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?,
    )?;

    let config = ShardingConfig::new(&ns, group, &id).durations(
        Duration::from_millis(lease_ms),
        Duration::from_millis(renew_ms),
        Duration::from_millis(retry_ms),
    );
    let coordinator = ShardCoordinator::new(client.clone(), config.clone())?;
    let informer = ShardedInformer::new(config.key, {
        let (client, ns) = (client.clone(), ns.clone());
        move |selector| {
            SharedInformerFactory::new(client.clone(), Duration::ZERO)
                .informer::<ConfigMap>(&InformerScope::namespace(&ns).shard(selector))
        }
    });
    informer.add_event_handler(Quiet);

    let cancel = CancellationToken::new();
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::spawn({
        let cancel = cancel.clone();
        async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            cancel.cancel();
        }
    });
    line(&id, "ready", serde_json::json!({}));
    let run_coordinator = tokio::spawn({
        let (c, stop) = (coordinator.clone(), cancel.clone());
        async move { c.run(stop).await }
    });
    let run_informer = tokio::spawn({
        let (i, rx, stop) = (informer.clone(), coordinator.assignments(), cancel.clone());
        async move { i.run(rx, stop).await }
    });
    let mut last = None;
    while !cancel.is_cancelled() {
        let serving = coordinator.assignment().serving;
        let current = informer.current();
        let synced = current.as_ref().is_some_and(|i| i.has_synced());
        let keys: BTreeSet<String> =
            current.map(|i| i.indexer().list().iter().map(|o| o.name_any()).collect()).unwrap_or_default();
        let state = (serving.to_annotation(), synced, keys);
        if last.as_ref() != Some(&state) {
            line(&id, "state", serde_json::json!({"serving": state.0, "synced": state.1, "keys": state.2}));
            last = Some(state);
        }
        tokio::select! {
            _ = cancel.cancelled() => {}
            _ = tokio::time::sleep(Duration::from_millis(50)) => {}
        }
    }
    run_coordinator.await??;
    run_informer.await?;
    line(&id, "exit", serde_json::json!({}));
    Ok(())
}
