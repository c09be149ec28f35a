//! `cargo xtask e2e --cluster <local|kind|embedded|kubeconfig=PATH> [-- TEST-ARGS]`: the
//! cross-crate suite (`xtask/e2e`, one test binary) against a real or embedded API server.
//!
//! The harness owns the cluster; the suite takes its clients from the environment it sets:
//! `KCACHE_E2E_CLUSTER`, `KCACHE_E2E_KUBECONFIG`, and where the cluster offers them
//! `KCACHE_E2E_LIMITED_KUBECONFIG`/`KCACHE_E2E_LIMITED_USER` (a user without RBAC bindings),
//! `KCACHE_E2E_LEGACY_KUBECONFIG` (a server without watch-list or watch cache),
//! `KCACHE_E2E_UNSHARDED_KUBECONFIG` (a server without `ShardedListAndWatch`; the main one has it),
//! `KCACHE_E2E_ETCD` (etcd's client URL, for compaction) and `KCACHE_E2E_AUDIT_LOG`; with Go
//! installed, on every cluster, `KCACHE_E2E_LEADERELECTION_GO` (client-go's leader elector as a
//! process, `xtask/leaderelection-go`, for the leader-election interop tests).
//!
//! `--cluster local` starts its control plane through `control_plane.rs`, the code behind
//! `cargo xtask cluster up`, in a fresh temp state directory, and stops it when the suite ends; it
//! never reuses a running `cargo xtask cluster` (see `local_spec`).

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::Instant;

use anyhow::{Context, Result, bail};

use crate::control_plane::{self, ControlPlane, INTERRUPTED, ServerSpec, Spec};

/// The suite's main kube-apiserver: default features plus server-side sharded list and watch
/// (`ShardedListAndWatch`, alpha in v1.36, KEP-5866), and an audit log of ConfigMap requests.
const MAIN_SERVER: &str = "kube-apiserver";
/// The same etcd through a kube-apiserver with `WatchList=false` and no watch cache.
const LEGACY_SERVER: &str = "kube-apiserver-legacy";
/// The server with coordinated leader election (KEP-4355): the `CoordinatedLeaderElection` gate
/// (beta, off by default in v1.36) and coordination.k8s.io/v1beta1 (LeaseCandidates) on. Its
/// `ShardedListAndWatch` gate is off (the default): it is also the suite's server without
/// server-side sharding (`KCACHE_E2E_UNSHARDED_KUBECONFIG`).
const COORDINATED_SERVER: &str = "kube-apiserver-coordinated";

/// Which API server the suite runs against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Cluster {
    /// etcd + kube-apiserver built from Go modules, on loopback.
    Local,
    /// A throwaway kind cluster (needs the kind CLI and a Docker engine).
    Kind,
    /// kcache-testserver, in the test process.
    Embedded,
    /// An existing cluster.
    Kubeconfig(PathBuf),
}

impl Cluster {
    fn parse(s: &str) -> Result<Self> {
        Ok(match s {
            "local" => Self::Local,
            "kind" => Self::Kind,
            "embedded" => Self::Embedded,
            other => match other.strip_prefix("kubeconfig=") {
                Some(path) if !path.is_empty() => Self::Kubeconfig(PathBuf::from(path)),
                _ => bail!("unknown cluster `{other}`: expected local, kind, embedded or kubeconfig=PATH"),
            },
        })
    }

    fn name(&self) -> &'static str {
        match self {
            Self::Local => "local",
            Self::Kind => "kind",
            Self::Embedded => "embedded",
            Self::Kubeconfig(_) => "kubeconfig",
        }
    }
}

pub(crate) fn run(args: &[String]) -> Result<()> {
    let mut cluster = None;
    let mut test_args = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--cluster" => cluster = Some(Cluster::parse(it.next().context("--cluster needs a value")?)?),
            s if s.starts_with("--cluster=") => cluster = Some(Cluster::parse(&s["--cluster=".len()..])?),
            "--" => test_args.extend(it.by_ref().cloned()),
            other => bail!("unknown e2e option `{other}`"),
        }
    }
    let cluster = cluster.unwrap_or(Cluster::Embedded);
    // Ctrl-C reaches the suite (same process group), which exits; the flag makes xtask wait for
    // that and tear the cluster down instead of dying first.
    control_plane::install_interrupt_handler();
    run_cluster(&cluster, &test_args, &[])
}

/// What `--cluster local` starts, through the same code as `cargo xtask cluster up`, in a state
/// directory of its own: three kube-apiservers on one etcd (main, legacy, coordinated), in xtask's process group (so a signal
/// to the group stops them even if xtask cannot).
fn local_spec() -> Spec {
    Spec {
        servers: vec![
            ServerSpec {
                audit: true,
                feature_gates: [("ShardedListAndWatch".to_owned(), true)].into(),
                ..ServerSpec::new(MAIN_SERVER)
            },
            ServerSpec { legacy: true, ..ServerSpec::new(LEGACY_SERVER) },
            ServerSpec {
                feature_gates: [("CoordinatedLeaderElection".to_owned(), true)].into(),
                runtime_config: vec!["coordination.k8s.io/v1beta1=true".to_owned()],
                ..ServerSpec::new(COORDINATED_SERVER)
            },
        ],
        detach: false,
        logs_on_failure: crate::project_root().join("target/e2e-logs"),
    }
}

/// Runs the suite against `cluster`; used by `cargo xtask e2e` and by `cargo xtask ci`.
/// `cargo_env` is set on the harness's cargo commands (CI passes its RUSTFLAGS).
pub(crate) fn run_cluster(cluster: &Cluster, test_args: &[String], cargo_env: &[(&str, &str)]) -> Result<()> {
    let start = Instant::now();
    // Compile first, so the cluster is not kept waiting by the build.
    let status = Command::new("cargo")
        .current_dir(crate::project_root())
        .envs(cargo_env.iter().copied())
        .args(["test", "--locked", "-p", "kcache-e2e", "--test", "e2e", "--no-run"])
        .status()?;
    if !status.success() {
        bail!("building the e2e suite failed");
    }
    let mut env: Vec<(String, String)> = vec![("KCACHE_E2E_CLUSTER".into(), cluster.name().into())];
    // The client-go side of the leader-election interop tests; without Go they say SKIPPED.
    if control_plane::go_available() {
        let bin = crate::leaderelection_go::ensure_binary()?;
        env.push(("KCACHE_E2E_LEADERELECTION_GO".into(), bin.display().to_string()));
    }
    let mut _plane = None;
    let mut _kind = None;
    match cluster {
        Cluster::Embedded => {}
        Cluster::Kubeconfig(path) => {
            let path =
                std::fs::canonicalize(path).with_context(|| format!("kubeconfig {}", path.display()))?;
            env.push(("KCACHE_E2E_KUBECONFIG".into(), path.display().to_string()));
        }
        Cluster::Local => {
            let t = Instant::now();
            let bins = control_plane::ensure_binaries()?;
            eprintln!("xtask e2e: binaries ready in {:.1}s", t.elapsed().as_secs_f64());
            let t = Instant::now();
            // Always a fresh control plane, never one `cargo xtask cluster up` left running: the
            // suite needs the legacy server and the audit log, and reads that log from its start.
            let dir = std::env::temp_dir().join(format!("kcache-e2e-{}", std::process::id()));
            let plane = ControlPlane::start(&bins, &dir, &local_spec())?;
            eprintln!("xtask e2e: control plane started in {:.1}s", t.elapsed().as_secs_f64());
            let cp = plane.instance();
            let (main, legacy) = (cp.server(MAIN_SERVER)?, cp.server(LEGACY_SERVER)?);
            let path = |p: &PathBuf| p.display().to_string();
            env.push(("KCACHE_E2E_KUBECONFIG".into(), path(&main.kubeconfig)));
            env.push(("KCACHE_E2E_LIMITED_KUBECONFIG".into(), path(&main.limited_kubeconfig)));
            env.push(("KCACHE_E2E_LIMITED_USER".into(), control_plane::LIMITED_USER.into()));
            env.push(("KCACHE_E2E_LEGACY_KUBECONFIG".into(), path(&legacy.kubeconfig)));
            let coordinated = cp.server(COORDINATED_SERVER)?;
            env.push(("KCACHE_E2E_COORDINATED_KUBECONFIG".into(), path(&coordinated.kubeconfig)));
            // The same cluster without server-side sharding (the gate is off on that server).
            env.push(("KCACHE_E2E_UNSHARDED_KUBECONFIG".into(), path(&coordinated.kubeconfig)));
            env.push(("KCACHE_E2E_ETCD".into(), cp.etcd_url.clone()));
            let audit_log = main.audit_log.as_ref().context("the main server writes an audit log")?;
            env.push(("KCACHE_E2E_AUDIT_LOG".into(), path(audit_log)));
            env.push(("KCACHE_E2E_SERVER_VERSION".into(), cp.kube_version.clone()));
            _plane = Some(plane);
        }
        Cluster::Kind => {
            let kind = KindCluster::create()?;
            env.push(("KCACHE_E2E_KUBECONFIG".into(), kind.kubeconfig.display().to_string()));
            _kind = Some(kind);
        }
    }
    if INTERRUPTED.load(Ordering::SeqCst) {
        bail!("interrupted");
    }
    let t = Instant::now();
    let mut cmd = Command::new("cargo");
    cmd.current_dir(crate::project_root())
        .envs(cargo_env.iter().copied())
        .args(["test", "--locked", "-p", "kcache-e2e", "--test", "e2e", "--"])
        .args(test_args);
    for (k, v) in &env {
        cmd.env(k, v);
    }
    let status = cmd.status()?;
    if INTERRUPTED.load(Ordering::SeqCst) {
        bail!("interrupted; the cluster was torn down");
    }
    eprintln!(
        "xtask e2e: suite on `{}` {} in {:.1}s ({:.1}s in total)",
        cluster.name(),
        if status.success() { "passed" } else { "FAILED" },
        t.elapsed().as_secs_f64(),
        start.elapsed().as_secs_f64()
    );
    if !status.success() {
        if let Some(plane) = _plane.as_mut() {
            plane.keep_logs();
        }
        bail!("e2e suite failed on `{}`", cluster.name());
    }
    Ok(())
}

/// A kind cluster named for this run; deleted on drop.
#[derive(Debug)]
struct KindCluster {
    name: String,
    kubeconfig: PathBuf,
}

impl KindCluster {
    fn create() -> Result<Self> {
        let name = format!("kcache-e2e-{}", std::process::id());
        let kubeconfig = std::env::temp_dir().join(format!("{name}.kubeconfig"));
        let status = Command::new("kind")
            .args(["create", "cluster", "--name", &name, "--wait", "180s", "--kubeconfig"])
            .arg(&kubeconfig)
            .status()
            .context("running `kind` (the kind CLI and a Docker engine are needed for --cluster kind)")?;
        // Guard before checking: a half-created cluster is deleted too.
        let guard = KindCluster { name, kubeconfig };
        if !status.success() {
            bail!("kind create cluster failed ({status})");
        }
        Ok(guard)
    }
}

impl Drop for KindCluster {
    fn drop(&mut self) {
        let _ = Command::new("kind").args(["delete", "cluster", "--name", &self.name]).status();
        let _ = std::fs::remove_file(&self.kubeconfig);
    }
}
