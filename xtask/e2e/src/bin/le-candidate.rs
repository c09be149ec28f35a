//! `le-candidate`: one kcache-leaderelection candidate as a process, the Rust counterpart of
//! `xtask/leaderelection-go` (client-go's LeaderElector): same flags, same JSON lines on stdout,
//! so the e2e suite can run both on one Lease, kill either (SIGKILL) or stop it (SIGTERM, a
//! clean stop that releases with `-release-on-cancel`), and compare their logs.
//!
//! ```text
//! le-candidate -kubeconfig PATH -namespace NS -name LEASE -identity ID \
//!     [-lease-duration 3s] [-renew-deadline 1s] [-retry-period 500ms] [-release-on-cancel] \
//!     [-coordinated [-binary-version 1.36.3] [-emulation-version 1.36.0]]
//! ```
//!
//! `-coordinated`: coordinated leader election (KEP-4355), as the Go side's: a `LeaseCandidate`
//! named after the identity, and the elector with `coordinated(true)`.
//!
//! Lines: `{"t":<unix nanos>,"id":ID,"lang":"rust","event":E}` with E one of `ready`,
//! `new_leader` (with `leader`), `started_leading`, `cancel` (a signal is about to cancel the
//! run), `stopped_leading` (the leading token was cancelled: from then on this process no longer
//! believes it leads), `on_stopped_leading`, `exit` (with `outcome`).

use std::io::Write;
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result, bail};
use kcache_leaderelection::{
    LeaderCallbacks, LeaderElectionConfig, LeaderElector, LeaseCandidate, LeaseCandidateConfig,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio_util::sync::CancellationToken;

/// Prints one event line; stdout is locked for the line, so lines never interleave.
fn emit(id: &str, event: &str, extra: &[(&str, &str)]) {
    let t = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let mut line = serde_json::json!({"t": t as u64, "id": id, "lang": "rust", "event": event});
    for (k, v) in extra {
        line[*k] = serde_json::Value::String((*v).to_string());
    }
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Go's `time.ParseDuration` for the forms the suite passes: `3s`, `500ms`, `1.5s`.
fn duration(s: &str) -> Result<Duration> {
    let (num, unit) = s.split_at(s.find(|c: char| c.is_ascii_alphabetic()).context("duration without unit")?);
    let n: f64 = num.parse().with_context(|| format!("duration {s}"))?;
    Ok(Duration::from_secs_f64(match unit {
        "s" => n,
        "ms" => n / 1000.0,
        "m" => n * 60.0,
        other => bail!("unknown duration unit {other}"),
    }))
}

#[tokio::main]
async fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let (mut kubeconfig, mut ns, mut name, mut id) = (None, "default".to_string(), None, None);
    let (mut ld, mut rd, mut rp, mut release) =
        (Duration::from_secs(3), Duration::from_secs(1), Duration::from_millis(500), false);
    let (mut coordinated, mut binary_version, mut emulation_version) =
        (false, "1.36.3".to_string(), "1.36.0".to_string());
    while let Some(a) = args.next() {
        let mut value = || args.next().with_context(|| format!("{a} needs a value"));
        match a.trim_start_matches('-') {
            "kubeconfig" => kubeconfig = Some(value()?),
            "namespace" => ns = value()?,
            "name" => name = Some(value()?),
            "identity" => id = Some(value()?),
            "lease-duration" => ld = duration(&value()?)?,
            "renew-deadline" => rd = duration(&value()?)?,
            "retry-period" => rp = duration(&value()?)?,
            "release-on-cancel" => release = true,
            "coordinated" => coordinated = true,
            "binary-version" => binary_version = value()?,
            "emulation-version" => emulation_version = value()?,
            other => bail!("unknown flag -{other}"),
        }
    }
    let (kubeconfig, name, id) = (
        kubeconfig.context("-kubeconfig is required")?,
        name.context("-name is required")?,
        id.context("-identity is required")?,
    );
    let kc = Kubeconfig::read_from(&kubeconfig).with_context(|| format!("reading {kubeconfig}"))?;
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
    let client = kube::Client::try_from(config)?;

    let le_config = LeaderElectionConfig::new(ns, name, id.clone())
        .lease_duration(ld)
        .renew_deadline(rd)
        .retry_period(rp)
        .release_on_cancel(release)
        .coordinated(coordinated);
    let (id1, id2, id3) = (id.clone(), id.clone(), id.clone());
    let watcher: std::sync::Arc<parking_lot::Mutex<Option<tokio::task::JoinHandle<()>>>> = Default::default();
    let watcher_slot = watcher.clone();
    let callbacks = LeaderCallbacks::new(
        move |leading: CancellationToken| {
            emit(&id1, "started_leading", &[]);
            let id = id1.clone();
            // The token fires at the moment leadership ends: log it then, from a task, as the Go
            // side logs from OnStartedLeading's goroutine when its context is done.
            *watcher_slot.lock() = Some(tokio::spawn(async move {
                leading.cancelled().await;
                emit(&id, "stopped_leading", &[]);
            }));
        },
        move || emit(&id2, "on_stopped_leading", &[]),
    )
    .on_new_leader(move |leader| emit(&id3, "new_leader", &[("leader", leader)]));
    let cancel = CancellationToken::new();
    if coordinated {
        let candidate = LeaseCandidate::new(
            client.clone(),
            LeaseCandidateConfig::for_election(&le_config, binary_version, emulation_version),
        );
        let stop = cancel.clone();
        tokio::spawn(async move { candidate.run(stop).await });
    }
    let elector = LeaderElector::new(client, le_config, callbacks)?;

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::spawn({
        let (cancel, id) = (cancel.clone(), id.clone());
        async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            // Cancelling `cancel` cancels the leading token at once (a child token): from this
            // line on, this process no longer believes it leads.
            emit(&id, "cancel", &[]);
            cancel.cancel();
        }
    });
    emit(&id, "ready", &[]);
    let outcome = elector.run(cancel).await?;
    // The `stopped_leading` line comes first.
    let pending = watcher.lock().take();
    if let Some(w) = pending {
        let _ = w.await;
    }
    emit(&id, "exit", &[("outcome", &format!("{outcome:?}"))]);
    Ok(())
}
