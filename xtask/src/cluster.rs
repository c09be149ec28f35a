//! `cargo xtask cluster up | status | down`: a real control plane (etcd + kube-apiserver v1.36.3,
//! built from Go modules) on loopback that outlives the command, for `cargo xtask demo
//! --kubeconfig`, for tests that run several processes against one server, and for trying kcache
//! by hand. Starting, tracking and stopping are `control_plane.rs`'s, the code that
//! `cargo xtask e2e --cluster local` runs too.
//!
//! The state directory (pid files, logs, kubeconfigs, etcd's data) is `--state-dir`, else
//! `$KCACHE_CLUSTER_DIR`, else `<cache root>/cluster` (`~/.cache/kcache/cluster`): one cluster per
//! user, found by `status` and `down` from any checkout, next to the binaries it runs.
//!
//! `up` prints what it did on stderr and one `export KUBECONFIG=...` line on stdout, so
//! `eval "$(cargo xtask cluster up)"` points the shell at it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};

use crate::control_plane::{self, ControlPlane, Instance, Liveness, ServerSpec, Spec, State, Tracked};

const USAGE: &str = "\
cargo xtask cluster <up|status|down> [options]

  up [--feature-gates G=true,...] [--legacy]
          build etcd and kube-apiserver if needed, start them on loopback in the background, wait
          for /readyz and print `export KUBECONFIG=...`; a cluster already running with the same
          options is reused, one with other options is replaced
  status  whether it runs, with which feature gates, where its kubeconfig and logs are
  down    stop it and remove its state directory

  --feature-gates G=B,...  kube-apiserver feature gates (e.g. ShardedListAndWatch=true)
  --legacy                 the legacy server: WatchList=false and no watch cache
  --state-dir DIR          the state directory (default: $KCACHE_CLUSTER_DIR, else
                           ~/.cache/kcache/cluster)
";

/// The name of the one kube-apiserver of `cargo xtask cluster`.
pub(crate) const SERVER: &str = "kube-apiserver";

/// What `up` is asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct UpOptions {
    pub(crate) legacy: bool,
    pub(crate) feature_gates: BTreeMap<String, bool>,
}

impl UpOptions {
    fn server_spec(&self) -> ServerSpec {
        ServerSpec {
            legacy: self.legacy,
            feature_gates: self.feature_gates.clone(),
            ..ServerSpec::new(SERVER)
        }
    }

    /// Whether a running server is what these options would start.
    fn matches(&self, server: &ServerSpec) -> bool {
        server.legacy == self.legacy && server.feature_gates == self.feature_gates
    }
}

/// What `up` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UpOutcome {
    /// Nothing ran: started.
    Started,
    /// A cluster with the same options ran: reused as it is.
    Reused,
    /// A cluster with other options ran: stopped, and started as asked.
    Replaced,
    /// A stale state was found: cleaned up, then started.
    Recovered,
}

pub(crate) fn run(args: &[String]) -> Result<()> {
    let mut it = args.iter();
    let Some(command) = it.next() else { bail!("which one?\n\n{USAGE}") };
    let mut opts = UpOptions::default();
    let mut state_dir = None;
    while let Some(a) = it.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_owned())),
            _ => (a.as_str(), None),
        };
        let mut value = || -> Result<String> {
            inline.clone().or_else(|| it.next().cloned()).with_context(|| format!("{flag} needs a value"))
        };
        match flag {
            "--state-dir" => state_dir = Some(PathBuf::from(value()?)),
            "--feature-gates" if command == "up" => opts.feature_gates = parse_feature_gates(&value()?)?,
            "--legacy" if command == "up" && inline.is_none() => opts.legacy = true,
            "-h" | "--help" => {
                print!("{USAGE}");
                return Ok(());
            }
            other => bail!("unknown option `{other}` for `cluster {command}`\n\n{USAGE}"),
        }
    }
    if opts.legacy && opts.feature_gates.get("WatchList") == Some(&true) {
        bail!("--legacy turns WatchList off; --feature-gates WatchList=true contradicts it");
    }
    let dir = state_dir.unwrap_or_else(default_state_dir);
    match command.as_str() {
        "up" => {
            control_plane::install_interrupt_handler();
            let (_, instance) = up(&dir, &opts)?;
            let server = instance.server(SERVER)?;
            eprintln!("kubeconfig: {}", server.kubeconfig.display());
            println!("export KUBECONFIG={}", server.kubeconfig.display());
            Ok(())
        }
        "status" => {
            print!("{}", status(&dir)?);
            Ok(())
        }
        "down" => {
            eprintln!("{}", down(&dir)?);
            Ok(())
        }
        "-h" | "--help" | "help" => {
            print!("{USAGE}");
            Ok(())
        }
        other => bail!("unknown cluster command `{other}`\n\n{USAGE}"),
    }
}

/// `$KCACHE_CLUSTER_DIR`, else `<cache root>/cluster`.
pub(crate) fn default_state_dir() -> PathBuf {
    std::env::var_os("KCACHE_CLUSTER_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| control_plane::cache_root().join("cluster"))
}

/// `Name=true,Other=false` (kube-apiserver's `--feature-gates` syntax).
pub(crate) fn parse_feature_gates(s: &str) -> Result<BTreeMap<String, bool>> {
    let mut gates = BTreeMap::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, value) = part
            .split_once('=')
            .with_context(|| format!("feature gate `{part}`: expected Name=true|false"))?;
        let value = match value.trim() {
            "true" => true,
            "false" => false,
            other => bail!("feature gate `{name}`: `{other}` is neither true nor false"),
        };
        let name = name.trim();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric()) {
            bail!("feature gate `{name}`: a name is letters and digits (e.g. ShardedListAndWatch)");
        }
        if gates.insert(name.to_owned(), value).is_some() {
            bail!("feature gate `{name}` given twice");
        }
    }
    if gates.is_empty() {
        bail!("--feature-gates needs at least one Name=true|false");
    }
    Ok(gates)
}

/// Starts a cluster in `dir`, or reuses the one running there with the same options.
pub(crate) fn up(dir: &Path, opts: &UpOptions) -> Result<(UpOutcome, Instance)> {
    let mut outcome = UpOutcome::Started;
    match control_plane::inspect(dir)? {
        State::Stopped => {}
        State::Running { instance, processes } => {
            let server = instance.server(SERVER)?;
            if opts.matches(&server.spec) {
                eprintln!(
                    "cluster: already running in {} ({}; feature gates {}): reusing it",
                    instance.dir.display(),
                    pids(&processes),
                    control_plane::gates_to_string(&server.spec.effective_gates())
                );
                return Ok((UpOutcome::Reused, instance));
            }
            eprintln!(
                "cluster: running with feature gates {}, asked for {}: replacing it",
                control_plane::gates_to_string(&server.spec.effective_gates()),
                control_plane::gates_to_string(&opts.server_spec().effective_gates())
            );
            control_plane::stop(dir)?;
            outcome = UpOutcome::Replaced;
        }
        State::Stale { reason, .. } => {
            eprintln!("cluster: stale state in {}: {reason}; cleaning it up", dir.display());
            control_plane::stop(dir)?;
            outcome = UpOutcome::Recovered;
        }
    }
    let t = Instant::now();
    let bins = control_plane::ensure_binaries()?;
    eprintln!("cluster: binaries ready in {:.1}s", t.elapsed().as_secs_f64());
    let spec = Spec {
        servers: vec![opts.server_spec()],
        detach: true,
        logs_on_failure: crate::project_root().join("target/cluster-logs"),
    };
    let t = Instant::now();
    let plane = ControlPlane::start(&bins, dir, &spec)?;
    let instance = plane.leave_running();
    let server = instance.server(SERVER)?;
    eprintln!(
        "cluster: kube-apiserver {} ready at {} in {:.1}s (feature gates {}); etcd at {}",
        instance.kube_version,
        server.url,
        t.elapsed().as_secs_f64(),
        control_plane::gates_to_string(&server.spec.effective_gates()),
        instance.etcd_url
    );
    eprintln!("cluster: state and logs in {}; `cargo xtask cluster down` stops it", instance.dir.display());
    Ok((outcome, instance))
}

fn pids(processes: &[Tracked]) -> String {
    processes.iter().map(|p| format!("{} pid {}", p.name, p.pid)).collect::<Vec<_>>().join(", ")
}

/// The status report. A state whose processes are all gone is cleaned up here; one with
/// survivors is left to `up` or `down`.
pub(crate) fn status(dir: &Path) -> Result<String> {
    let shown = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_owned());
    Ok(match control_plane::inspect(dir)? {
        State::Stopped => format!("cluster: not running (state directory {})\n", shown.display()),
        State::Stale { processes, reason } if processes.iter().all(|p| p.liveness != Liveness::Ours) => {
            control_plane::stop(dir)?;
            format!("cluster: not running; stale state cleaned up ({reason})\n")
        }
        State::Stale { reason, .. } => format!(
            "cluster: broken: {reason}\n  `cargo xtask cluster down` stops what is left; `cargo xtask cluster up` starts afresh\n  logs: {}\n",
            shown.display()
        ),
        State::Running { instance, processes } => {
            let mut out = String::new();
            let server = instance.server(SERVER)?;
            let ready = match control_plane::cached_binaries() {
                Some(bins) => {
                    match control_plane::get(
                        &bins,
                        &format!("{}/readyz", server.url),
                        control_plane::ADMIN_TOKEN,
                    ) {
                        Ok(Some((200, _))) => "ready",
                        Ok(Some(_)) => "running, not ready (/readyz)",
                        _ => "running, not answering",
                    }
                }
                None => "running",
            };
            let pid = |name: &str| processes.iter().find(|p| p.name == name).map_or(0, |p| p.pid);
            out += &format!("cluster: {ready} (state directory {})\n", instance.dir.display());
            out += &format!(
                "  kube-apiserver {} at {} (pid {})\n",
                instance.kube_version,
                server.url,
                pid(SERVER)
            );
            out += &format!(
                "    feature gates: {}{}\n",
                control_plane::gates_to_string(&server.spec.effective_gates()),
                if server.spec.legacy { " (legacy: no watch-list, no watch cache)" } else { "" }
            );
            out += &format!(
                "  etcd {} at {} (pid {})\n",
                control_plane::ETCD_VERSION,
                instance.etcd_url,
                pid(control_plane::ETCD)
            );
            out += &format!("  kubeconfig: {} (admin)\n", server.kubeconfig.display());
            out += &format!(
                "              {} ({}, no RBAC bindings)\n",
                server.limited_kubeconfig.display(),
                control_plane::LIMITED_USER
            );
            out += &format!(
                "  logs: {}, {}\n",
                instance.log(SERVER).display(),
                instance.log(control_plane::ETCD).display()
            );
            out
        }
    })
}

/// Stops the cluster in `dir` and removes its state; says what it did.
pub(crate) fn down(dir: &Path) -> Result<String> {
    let t = Instant::now();
    let shown = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_owned());
    let processes = control_plane::stop(dir)?;
    let stopped: Vec<&Tracked> = processes.iter().filter(|p| p.liveness == Liveness::Ours).collect();
    let stale: Vec<String> =
        processes.iter().filter(|p| p.liveness != Liveness::Ours).map(ToString::to_string).collect();
    let mut out = if stopped.is_empty() {
        "cluster: nothing was running".to_owned()
    } else {
        format!(
            "cluster: stopped {} in {:.1}s",
            stopped.iter().map(|p| format!("{} (pid {})", p.name, p.pid)).collect::<Vec<_>>().join(", "),
            t.elapsed().as_secs_f64()
        )
    };
    if !stale.is_empty() {
        out += &format!("; stale pid files cleaned up: {}", stale.join(", "));
    }
    if !processes.is_empty() {
        out += &format!("; removed {}", shown.display());
    }
    Ok(out)
}
