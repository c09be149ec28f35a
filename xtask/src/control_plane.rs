//! The local control plane: etcd and kube-apiserver built from the Go module proxy (wrapper modules
//! under `xtask/control-plane/`), cached by version, started envtest-style on loopback and tracked
//! by pid files in a state directory, so that a later command can find, check and stop them.
//!
//! One code path for every user: `cargo xtask cluster up | status | down` (a control plane that
//! outlives the command, in `~/.cache/kcache/cluster` by default), `cargo xtask e2e --cluster local`
//! and `cargo xtask bench --cluster local` (each its own control plane in a fresh temp directory,
//! stopped when the run ends) and the tests of `cluster.rs`.
//!
//! A state directory holds:
//! * `kcache-control-plane`: a marker; a directory without it is never cleaned or removed;
//! * `<process>.pid` (`etcd`, `kube-apiserver`, ...), written as soon as the process is spawned;
//! * `cluster.json`: what was started (versions, URLs, feature gates, kubeconfigs), written once
//!   every server is ready, so its presence means the start completed;
//! * `<process>.log`, `<server>.kubeconfig` (admin), `<server>.limited.kubeconfig` (a user without
//!   RBAC bindings), `pki/`, `etcd/` (the data directory).
//!
//! A pid file is believed only while `/proc/<pid>/cmdline` is etcd or kube-apiserver with an
//! argument inside this state directory: after a reboot or a crash its pid may be free, a zombie,
//! or reused by any other program. Such a pid file is stale: [`inspect`] reports it and [`stop`]
//! cleans it up (stopping whatever of ours survives).
//!
//! Each server is a kube-apiserver on the one etcd, with RBAC, token users and
//! `--endpoint-reconciler-type=none`, plus what its [`ServerSpec`] asks for:
//! * feature gates (`--feature-gates`), e.g. `ShardedListAndWatch=true` (alpha in 1.36);
//! * `legacy`: `--feature-gates=WatchList=false` and `--watch-cache=false`, so a watch-list request is
//!   refused (the reflector must fall back) and watches are served straight from etcd (so a
//!   compaction makes an old resource version answer 410 Gone, as on a server whose watch cache has
//!   moved on);
//! * `audit`: an audit log of ConfigMap requests;
//! * API versions off by default (`--runtime-config`), e.g. `coordination.k8s.io/v1beta1=true`
//!   for coordinated leader election's LeaseCandidates.

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

/// The Kubernetes release kube-apiserver is built from (`xtask/control-plane/kube-apiserver/go.mod`).
pub(crate) const KUBE_VERSION: &str = "v1.36.3";
/// The etcd release (`xtask/control-plane/etcd/go.mod`).
pub(crate) const ETCD_VERSION: &str = "v3.6.5";

/// Token of the `system:masters` user written to the token file.
pub(crate) const ADMIN_TOKEN: &str = "kcache-e2e-admin-token";
/// Token of a user with no RBAC bindings at all.
pub(crate) const LIMITED_TOKEN: &str = "kcache-e2e-limited-token";
/// Name of that user.
pub(crate) const LIMITED_USER: &str = "kcache-e2e-limited";

/// The file that marks a directory as a control plane's state directory.
const MARKER: &str = "kcache-control-plane";
/// What was started; written last.
const STATE_FILE: &str = "cluster.json";
/// The process name of etcd (its pid file, its log).
pub(crate) const ETCD: &str = "etcd";

/// How long a server may take from spawn to `/readyz` (a cold start on a loaded 2-core machine
/// took 40 s once; the deadline is generous because failing here fails CI).
const SERVER_START_LIMIT: Duration = Duration::from_secs(180);
/// How long etcd may take to answer `/health`.
const ETCD_START_LIMIT: Duration = Duration::from_secs(60);
/// After SIGTERM, how long a process has to exit before it gets SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(20);

/// Set by the Ctrl-C handler; long waits check it so cleanup still runs.
pub(crate) static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Processes this xtask spawned, with their state directories. A child is ours until it has
/// exited: `/proc/<pid>/cmdline` reads empty while it is still in `exec` and again while it exits,
/// so it cannot tell. And an exited child must be reaped (`try_wait`), or it lingers as a zombie
/// until xtask exits.
static CHILDREN: Mutex<Vec<(PathBuf, Child)>> = Mutex::new(Vec::new());

/// Ctrl-C and SIGTERM set a flag instead of killing xtask, so what it started is always torn
/// down: the waits below give up, and the guards' `Drop` stop the processes.
pub(crate) fn install_interrupt_handler() {
    let _ = ctrlc::set_handler(|| {
        INTERRUPTED.store(true, Ordering::SeqCst);
        eprintln!("xtask: interrupted, cleaning up");
    });
}

/// Paths of the built binaries.
#[derive(Debug, Clone)]
pub(crate) struct Binaries {
    etcd: PathBuf,
    kube_apiserver: PathBuf,
    keygen: PathBuf,
    /// One HTTPS GET to a server (`xtask/control-plane/kube-apiserver/probe`), so xtask needs no
    /// TLS client of its own.
    probe: PathBuf,
}

/// The cache root: `$KCACHE_CACHE_DIR`, else `$XDG_CACHE_HOME/kcache`, else `~/.cache/kcache`.
pub(crate) fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("KCACHE_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(dir).join("kcache");
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
    home.join(".cache").join("kcache")
}

/// FNV-1a over the files' bytes, in order: a changed pin or source is a new cache entry.
pub(crate) fn files_hash(files: &[PathBuf]) -> Result<String> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for f in files {
        let bytes = fs::read(f).with_context(|| format!("reading {}", f.display()))?;
        for b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    Ok(format!("{:08x}", h >> 32))
}

/// Whether a Go toolchain is on PATH.
pub(crate) fn go_available() -> bool {
    Command::new("go")
        .arg("version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// One binary: where it is cached and how to build it.
struct Target {
    module: PathBuf,
    package: &'static str,
    ldflags: String,
    bin: PathBuf,
}

/// Where each binary lives in the cache. kube-apiserver and etcd are keyed by their wrapper
/// module's go.mod and go.sum; the two small helpers also by their own source, so editing one
/// rebuilds it (a second or two) without touching the big ones.
fn targets() -> Result<[Target; 4]> {
    let modules = crate::project_root().join("xtask/control-plane");
    let apiserver_mod = modules.join("kube-apiserver");
    let etcd_mod = modules.join("etcd");
    let module_files = |m: &Path| vec![m.join("go.mod"), m.join("go.sum")];
    let minor = KUBE_VERSION.split('.').nth(1).context("kube version")?;
    let ldflags = format!(
        "-X k8s.io/component-base/version.gitVersion={KUBE_VERSION} \
         -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor={minor}"
    );
    let apiserver_dir = cache_root().join(format!(
        "control-plane/kube-apiserver-{KUBE_VERSION}-{}",
        files_hash(&module_files(&apiserver_mod))?
    ));
    let etcd_dir = cache_root()
        .join(format!("control-plane/etcd-{ETCD_VERSION}-{}", files_hash(&module_files(&etcd_mod))?));
    let helper = |name: &str| -> Result<PathBuf> {
        let src = apiserver_mod.join(name).join("main.go");
        Ok(apiserver_dir.join(format!("{name}-{}", files_hash(&[src])?)))
    };
    let (keygen, probe) = (helper("keygen")?, helper("probe")?);
    Ok([
        Target {
            module: apiserver_mod.clone(),
            package: "k8s.io/kubernetes/cmd/kube-apiserver",
            ldflags,
            bin: apiserver_dir.join("kube-apiserver"),
        },
        Target { module: apiserver_mod.clone(), package: "./keygen", ldflags: String::new(), bin: keygen },
        Target { module: apiserver_mod, package: "./probe", ldflags: String::new(), bin: probe },
        Target {
            module: etcd_mod,
            package: "go.etcd.io/etcd/server/v3",
            ldflags: String::new(),
            bin: etcd_dir.join("etcd"),
        },
    ])
}

fn binaries_from(t: &[Target; 4]) -> Binaries {
    Binaries {
        kube_apiserver: t[0].bin.clone(),
        keygen: t[1].bin.clone(),
        probe: t[2].bin.clone(),
        etcd: t[3].bin.clone(),
    }
}

/// The binaries if every one is already in the cache; never builds (`cluster status` uses it).
pub(crate) fn cached_binaries() -> Option<Binaries> {
    let t = targets().ok()?;
    t.iter().all(|t| t.bin.is_file()).then(|| binaries_from(&t))
}

/// Builds (or finds in the cache) etcd, kube-apiserver and the two helpers.
pub(crate) fn ensure_binaries() -> Result<Binaries> {
    if !go_available() {
        bail!(
            "the local control plane builds etcd and kube-apiserver from Go modules, but `go` is not on PATH"
        );
    }
    let t = targets()?;
    let mut built = false;
    for target in &t {
        built |= build(target)?;
    }
    if !built {
        eprintln!(
            "xtask: etcd and kube-apiserver from cache ({})",
            cache_root().join("control-plane").display()
        );
    }
    Ok(binaries_from(&t))
}

/// Builds one binary unless it is in the cache; says whether it built.
fn build(t: &Target) -> Result<bool> {
    let name = t.bin.file_name().context("binary name")?.to_string_lossy().into_owned();
    if t.bin.is_file() {
        return Ok(false);
    }
    let dir = t.bin.parent().context("binary directory")?;
    fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".{name}.partial.{}", std::process::id()));
    // kube-apiserver and etcd: a cold build downloads their modules and takes minutes.
    let minutes =
        if t.ldflags.is_empty() && t.package.starts_with("./") { "" } else { "; a cold build takes minutes" };
    eprintln!("xtask: building {name} ({}){minutes}", t.package);
    let start = Instant::now();
    let mut cmd = Command::new("go");
    cmd.current_dir(&t.module).env("CGO_ENABLED", "0").args(["build", "-trimpath"]);
    if !t.ldflags.is_empty() {
        cmd.args(["-ldflags", &t.ldflags]);
    }
    let status = cmd.arg("-o").arg(&tmp).arg(t.package).status().context("running go build")?;
    if !status.success() {
        let _ = fs::remove_file(&tmp);
        bail!("go build {} failed ({status})", t.package);
    }
    // Rename is atomic: a concurrent or interrupted build never leaves a half-written binary.
    fs::rename(&tmp, &t.bin)?;
    eprintln!("xtask: built {name} in {:.1}s ({})", start.elapsed().as_secs_f64(), t.bin.display());
    Ok(true)
}

/// A free loopback port (bound, read and released; the window for a race is small, and a start
/// that loses it is retried with new ports).
fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// One kube-apiserver to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServerSpec {
    /// The process name: its pid file, log, certificate directory and kubeconfigs carry it.
    pub(crate) name: String,
    /// `WatchList=false` and no watch cache.
    pub(crate) legacy: bool,
    /// Feature gates asked for explicitly, by name.
    pub(crate) feature_gates: BTreeMap<String, bool>,
    /// Write an audit log of ConfigMap requests (`<name>.audit.log`).
    pub(crate) audit: bool,
    /// `--runtime-config` entries (`group/version=true`), in order; none by default.
    pub(crate) runtime_config: Vec<String>,
}

impl ServerSpec {
    /// A server with default features and no audit log.
    pub(crate) fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            legacy: false,
            feature_gates: BTreeMap::new(),
            audit: false,
            runtime_config: Vec::new(),
        }
    }

    /// Every gate the server runs with: the explicit ones, and `WatchList=false` when legacy.
    pub(crate) fn effective_gates(&self) -> BTreeMap<String, bool> {
        let mut gates = self.feature_gates.clone();
        if self.legacy {
            gates.insert("WatchList".to_owned(), false);
        }
        gates
    }
}

/// `A=true,B=false`, or "none".
pub(crate) fn gates_to_string(gates: &BTreeMap<String, bool>) -> String {
    if gates.is_empty() {
        return "none".to_owned();
    }
    gates.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
}

/// What to start.
#[derive(Debug, Clone)]
pub(crate) struct Spec {
    /// The kube-apiservers, all on one etcd; the first one's URL is the service-account issuer.
    pub(crate) servers: Vec<ServerSpec>,
    /// A process group of their own, so the processes outlive the terminal's Ctrl-C and xtask
    /// itself (`cargo xtask cluster up`). Otherwise they stay in xtask's group, so a signal to the
    /// group (Ctrl-C, a CI job being killed) reaches them too, even if xtask cannot clean up.
    pub(crate) detach: bool,
    /// Where the logs are copied when the start fails (or the caller calls
    /// [`ControlPlane::keep_logs`]), before the state directory is removed.
    pub(crate) logs_on_failure: PathBuf,
}

/// A started kube-apiserver, as `cluster.json` records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Server {
    pub(crate) spec: ServerSpec,
    pub(crate) url: String,
    /// Admin user (`system:masters`).
    pub(crate) kubeconfig: PathBuf,
    /// A user without RBAC bindings ([`LIMITED_USER`]).
    pub(crate) limited_kubeconfig: PathBuf,
    pub(crate) audit_log: Option<PathBuf>,
}

/// A started control plane, as `cluster.json` records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Instance {
    /// The state directory (canonical).
    pub(crate) dir: PathBuf,
    pub(crate) kube_version: String,
    pub(crate) etcd_url: String,
    pub(crate) servers: Vec<Server>,
}

impl Instance {
    /// The server called `name`.
    pub(crate) fn server(&self, name: &str) -> Result<&Server> {
        self.servers.iter().find(|s| s.spec.name == name).with_context(|| format!("no server `{name}`"))
    }

    /// The log of a process (`etcd` or a server's name).
    pub(crate) fn log(&self, process: &str) -> PathBuf {
        self.dir.join(format!("{process}.log"))
    }

    fn to_json(&self) -> Value {
        let path = |p: &Path| p.display().to_string();
        json!({
            "kube_version": self.kube_version,
            "etcd_version": ETCD_VERSION,
            "etcd": { "url": self.etcd_url },
            "servers": self.servers.iter().map(|s| json!({
                "name": s.spec.name,
                "url": s.url,
                "legacy": s.spec.legacy,
                "feature_gates": s.spec.feature_gates,
                "runtime_config": s.spec.runtime_config,
                "audit_log": s.audit_log.as_deref().map(path),
                "kubeconfig": path(&s.kubeconfig),
                "limited_kubeconfig": path(&s.limited_kubeconfig),
            })).collect::<Vec<_>>(),
        })
    }

    fn from_json(dir: &Path, v: &Value) -> Result<Self> {
        let text = |v: &Value, what: &str| -> Result<String> {
            v.as_str().map(str::to_owned).with_context(|| format!("{STATE_FILE}: `{what}` missing"))
        };
        let mut servers = Vec::new();
        for s in v["servers"].as_array().with_context(|| format!("{STATE_FILE}: `servers` missing"))? {
            let mut feature_gates = BTreeMap::new();
            if let Some(gates) = s["feature_gates"].as_object() {
                for (k, v) in gates {
                    feature_gates.insert(k.clone(), v.as_bool().context("feature gate value")?);
                }
            }
            servers.push(Server {
                spec: ServerSpec {
                    name: text(&s["name"], "name")?,
                    legacy: s["legacy"].as_bool().unwrap_or(false),
                    feature_gates,
                    audit: !s["audit_log"].is_null(),
                    runtime_config: s["runtime_config"]
                        .as_array()
                        .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
                        .unwrap_or_default(),
                },
                url: text(&s["url"], "url")?,
                kubeconfig: text(&s["kubeconfig"], "kubeconfig")?.into(),
                limited_kubeconfig: text(&s["limited_kubeconfig"], "limited_kubeconfig")?.into(),
                audit_log: s["audit_log"].as_str().map(PathBuf::from),
            });
        }
        Ok(Self {
            dir: dir.to_owned(),
            kube_version: text(&v["kube_version"], "kube_version")?,
            etcd_url: text(&v["etcd"]["url"], "etcd.url")?,
            servers,
        })
    }
}

/// Whether a pid file's process is ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Liveness {
    /// Alive, and etcd or kube-apiserver of this state directory.
    Ours,
    /// No such process (or a zombie).
    Gone,
    /// Alive, but another program: the pid was reused.
    Foreign,
}

/// A process named by a pid file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Tracked {
    pub(crate) name: String,
    pub(crate) pid: u32,
    pub(crate) liveness: Liveness,
}

impl std::fmt::Display for Tracked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.liveness {
            Liveness::Ours => "is running",
            Liveness::Gone => "is gone",
            Liveness::Foreign => "is another program now",
        };
        write!(f, "{} (pid {}) {what}", self.name, self.pid)
    }
}

/// What a state directory holds.
#[derive(Debug)]
pub(crate) enum State {
    /// No pid file: nothing runs.
    Stopped,
    /// A completed start whose processes all run.
    Running { instance: Instance, processes: Vec<Tracked> },
    /// Pid files of processes that are gone or not ours, or of a start that never completed.
    /// Survivors of ours are among `processes` with [`Liveness::Ours`].
    Stale { processes: Vec<Tracked>, reason: String },
}

/// The canonical state directory, if it exists. Canonical because a process is recognised by its
/// arguments naming this exact path.
fn canonical(dir: &Path) -> Option<PathBuf> {
    fs::canonicalize(dir).ok()
}

/// Reads the pid files of `dir`, servers first and etcd last (the order to stop them in).
fn tracked(dir: &Path) -> Result<Vec<Tracked>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_none_or(|e| e != "pid") {
            continue;
        }
        let name = path.file_stem().context("pid file name")?.to_string_lossy().into_owned();
        let text = fs::read_to_string(&path)?;
        // A truncated or garbled pid file names no process: it is stale like one whose process died.
        let (pid, liveness) = match text.trim().parse::<u32>() {
            Ok(pid) if pid > 0 => (pid, liveness(pid, dir)),
            _ => (0, Liveness::Gone),
        };
        out.push(Tracked { name, pid, liveness });
    }
    // etcd last: a kube-apiserver that loses etcd first spends its shutdown logging errors.
    out.sort_by(|a, b| (a.name == ETCD, &a.name).cmp(&(b.name == ETCD, &b.name)));
    Ok(out)
}

/// Whether `pid` is a process of the control plane in `dir`.
pub(crate) fn liveness(pid: u32, dir: &Path) -> Liveness {
    let mut child = None;
    CHILDREN.lock().unwrap_or_else(|e| e.into_inner()).retain_mut(|(d, c)| {
        if c.id() != pid {
            return true;
        }
        // Exited (and now reaped by `try_wait`), or no longer ours to wait for: forget it.
        let running = matches!(c.try_wait(), Ok(None));
        child = Some(if !running {
            Liveness::Gone
        } else if d == dir {
            Liveness::Ours
        } else {
            Liveness::Foreign
        });
        running
    });
    if let Some(liveness) = child {
        return liveness;
    }
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    let Ok(stat) = fs::read_to_string(proc_dir.join("stat")) else { return Liveness::Gone };
    // `pid (comm) S ...`: comm may hold spaces and parentheses; the state follows the last `)`.
    // A zombie has exited: only its parent's wait is missing.
    if stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])) {
        return Liveness::Gone;
    }
    match fs::read(proc_dir.join("cmdline")) {
        Ok(cmdline) if is_ours(&cmdline, dir) => Liveness::Ours,
        // Empty: a kernel thread, or a process in `exec` or exiting. Another xtask's child in
        // `exec` (the only one of ours that could be) already runs our binary.
        Ok(cmdline) if cmdline.is_empty() => match fs::read_link(proc_dir.join("exe")) {
            Ok(exe) if exe.file_name().is_some_and(|n| n == ETCD || n == "kube-apiserver") => Liveness::Ours,
            _ => Liveness::Foreign,
        },
        Ok(_) => Liveness::Foreign,
        Err(_) => Liveness::Gone,
    }
}

/// A `/proc/<pid>/cmdline` of ours: etcd or kube-apiserver (by file name), with an argument
/// inside `dir` (etcd's `--data-dir`, a server's `--cert-dir`).
fn is_ours(cmdline: &[u8], dir: &Path) -> bool {
    let args: Vec<String> =
        cmdline.split(|&b| b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    let Some((exe, rest)) = args.split_first() else { return false };
    let exe_ok = Path::new(exe).file_name().is_some_and(|n| n == ETCD || n == "kube-apiserver");
    let inside = format!("{}/", dir.display());
    exe_ok && rest.iter().any(|a| a.contains(&inside))
}

/// What `dir` holds. Reads only: a stale state is reported, not cleaned (see [`stop`]).
pub(crate) fn inspect(dir: &Path) -> Result<State> {
    let Some(dir) = canonical(dir) else { return Ok(State::Stopped) };
    let processes = tracked(&dir)?;
    if processes.is_empty() {
        return Ok(State::Stopped);
    }
    let not_ours: Vec<String> =
        processes.iter().filter(|p| p.liveness != Liveness::Ours).map(ToString::to_string).collect();
    if !not_ours.is_empty() {
        return Ok(State::Stale { processes, reason: not_ours.join(", ") });
    }
    let instance = match fs::read_to_string(dir.join(STATE_FILE)) {
        Ok(text) => Instance::from_json(&dir, &serde_json::from_str(&text)?)?,
        Err(_) => {
            let reason =
                format!("its start never completed (no {STATE_FILE}: interrupted, or still under way)");
            return Ok(State::Stale { processes, reason });
        }
    };
    let missing: Vec<&str> = std::iter::once(ETCD)
        .chain(instance.servers.iter().map(|s| s.spec.name.as_str()))
        .filter(|n| !processes.iter().any(|p| p.name == *n))
        .collect();
    if !missing.is_empty() {
        return Ok(State::Stale { processes, reason: format!("no pid file for {}", missing.join(", ")) });
    }
    Ok(State::Running { instance, processes })
}

/// Stops every process of `dir` that is still ours (servers first, then etcd: the reverse of
/// start-up), SIGTERM then SIGKILL after [`TERM_GRACE`], and removes the state directory.
/// Returns every pid file's process as it was found. A directory that does not exist is fine.
pub(crate) fn stop(dir: &Path) -> Result<Vec<Tracked>> {
    let Some(dir) = canonical(dir) else { return Ok(Vec::new()) };
    let processes = tracked(&dir)?;
    let (etcd, servers): (Vec<&Tracked>, Vec<&Tracked>) =
        processes.iter().filter(|p| p.liveness == Liveness::Ours).partition(|p| p.name == ETCD);
    terminate(&servers, &dir)?;
    terminate(&etcd, &dir)?;
    remove_state(&dir)?;
    Ok(processes)
}

fn signal(pid: u32, sig: &str) {
    // `kill` (procps, or any shell's builtin) rather than libc: xtask has no unsafe code.
    let _ = Command::new("kill")
        .args(["-s", sig, &pid.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

fn terminate(procs: &[&Tracked], dir: &Path) -> Result<()> {
    for p in procs {
        signal(p.pid, "TERM");
    }
    let alive = |dir: &Path| -> Vec<&Tracked> {
        procs.iter().copied().filter(|p| liveness(p.pid, dir) == Liveness::Ours).collect()
    };
    let deadline = Instant::now() + TERM_GRACE;
    while !alive(dir).is_empty() && Instant::now() < deadline {
        // The processes are not ours to wait on (another xtask may have started them): poll.
        std::thread::sleep(Duration::from_millis(50));
    }
    let left = alive(dir);
    if left.is_empty() {
        return Ok(());
    }
    for p in &left {
        eprintln!("xtask: {} (pid {}) still runs {TERM_GRACE:?} after SIGTERM: SIGKILL", p.name, p.pid);
        signal(p.pid, "KILL");
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while !alive(dir).is_empty() {
        if Instant::now() > deadline {
            bail!("could not stop {:?}", alive(dir).iter().map(|p| p.pid).collect::<Vec<_>>());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// Removes a state directory, only if it carries the marker (or is empty): `--state-dir` may
/// name any directory, and only ours may be deleted.
fn remove_state(dir: &Path) -> Result<()> {
    if dir.join(MARKER).is_file() {
        return fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()));
    }
    if fs::read_dir(dir)?.next().is_none() {
        return Ok(fs::remove_dir(dir)?);
    }
    bail!("{} is not a control-plane state directory (no {MARKER} file): not removing it", dir.display())
}

/// A control plane this process started. Dropping it stops the processes and removes the state
/// directory, unless [`ControlPlane::leave_running`] handed them over to a later
/// `cargo xtask cluster down`.
#[derive(Debug)]
pub(crate) struct ControlPlane {
    instance: Instance,
    guard: StopGuard,
}

impl ControlPlane {
    /// Starts etcd, waits for `/health`, then every server, and waits for each server's `/readyz`
    /// and namespace `default`. `dir` must hold no running control plane; anything else in it
    /// (a stale state) is cleaned up. A start that loses a port race is retried with new ports.
    pub(crate) fn start(bins: &Binaries, dir: &Path, spec: &Spec) -> Result<Self> {
        let mut attempt = 1;
        loop {
            match start_once(bins, dir, spec) {
                Err(e) if attempt < 3 && e.downcast_ref::<PortTaken>().is_some() => {
                    eprintln!("xtask: {e:#}; starting again on other ports");
                    attempt += 1;
                }
                result => return result,
            }
        }
    }

    pub(crate) fn instance(&self) -> &Instance {
        &self.instance
    }

    /// Keep the logs (copied to the spec's `logs_on_failure`) when the processes are stopped.
    pub(crate) fn keep_logs(&mut self) {
        self.guard.keep_logs = true;
    }

    /// Leaves the processes running (tracked by their pid files) and returns what was started.
    pub(crate) fn leave_running(mut self) -> Instance {
        self.guard.armed = false;
        self.instance.clone()
    }
}

/// Stops what a state directory's pid files name, on drop, unless disarmed.
#[derive(Debug)]
struct StopGuard {
    dir: PathBuf,
    armed: bool,
    keep_logs: bool,
    logs_on_failure: PathBuf,
}

impl Drop for StopGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if self.keep_logs {
            let _ = fs::create_dir_all(&self.logs_on_failure);
            for entry in fs::read_dir(&self.dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.extension().is_some_and(|e| e == "log") {
                    let _ = fs::copy(&path, self.logs_on_failure.join(entry.file_name()));
                }
            }
            eprintln!("xtask: control-plane logs kept in {}", self.logs_on_failure.display());
        }
        if let Err(e) = stop(&self.dir) {
            eprintln!("xtask: stopping the control plane in {}: {e:#}", self.dir.display());
        }
    }
}

/// A process exited during start-up because its port was taken after [`free_port`] released it.
#[derive(Debug)]
struct PortTaken(String);

impl std::fmt::Display for PortTaken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} could not bind its port (taken since it was chosen)", self.0)
    }
}

impl std::error::Error for PortTaken {}

fn start_once(bins: &Binaries, dir: &Path, spec: &Spec) -> Result<ControlPlane> {
    if spec.servers.is_empty() {
        bail!("a control plane needs at least one kube-apiserver");
    }
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let dir = fs::canonicalize(dir)?;
    match inspect(&dir)? {
        State::Stopped => {}
        State::Running { .. } => bail!("a control plane already runs in {}", dir.display()),
        State::Stale { processes, .. } if processes.iter().any(|p| p.liveness == Liveness::Ours) => {
            bail!("{} holds a control plane that is partly running; stop it first", dir.display())
        }
        State::Stale { .. } => {}
    }
    // A stale state (nothing of it runs): its files go, so no old pid file or log misleads.
    if fs::read_dir(&dir)?.next().is_some() {
        remove_state(&dir)?;
        fs::create_dir_all(&dir)?;
    }
    fs::write(
        dir.join(MARKER),
        "State directory of a local control plane (etcd + kube-apiserver) started by `cargo xtask`.\n\
         `cargo xtask cluster down --state-dir <this directory>` stops it and removes the directory.\n",
    )?;
    // From here on every spawned process is stopped again if the start fails.
    let mut guard = StopGuard {
        dir: dir.clone(),
        armed: true,
        keep_logs: false,
        logs_on_failure: spec.logs_on_failure.clone(),
    };
    match start_processes(bins, &dir, spec) {
        Ok(instance) => Ok(ControlPlane { instance, guard }),
        Err(e) => {
            // A lost port race is retried at once; anything else leaves its logs for a post-mortem.
            guard.keep_logs = e.downcast_ref::<PortTaken>().is_none();
            Err(e)
        }
    }
}

fn start_processes(bins: &Binaries, dir: &Path, spec: &Spec) -> Result<Instance> {
    let started = Instant::now();
    fs::create_dir_all(dir.join("pki"))?;
    let sa_key = dir.join("pki/sa.key");
    let status = Command::new(&bins.keygen).arg(&sa_key).status().context("running keygen")?;
    if !status.success() {
        bail!("keygen failed ({status})");
    }
    let tokens = dir.join("pki/tokens.csv");
    fs::write(
        &tokens,
        format!(
            "{ADMIN_TOKEN},kcache-e2e-admin,kcache-e2e-admin-uid,\"system:masters\"\n\
             {LIMITED_TOKEN},{LIMITED_USER},kcache-e2e-limited-uid\n"
        ),
    )?;
    let audit_policy = dir.join("audit-policy.yaml");
    fs::write(
        &audit_policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [\"RequestReceived\"]\nrules:\n\
         - level: Metadata\n  resources:\n  - group: \"\"\n    resources: [\"configmaps\"]\n- level: None\n",
    )?;

    let (client_port, peer_port) = (free_port()?, free_port()?);
    let etcd_url = format!("http://127.0.0.1:{client_port}");
    let peer = format!("http://127.0.0.1:{peer_port}");
    let mut etcd = Command::new(&bins.etcd);
    etcd.arg(format!("--data-dir={}", dir.join("etcd").display()))
        .arg(format!("--listen-client-urls={etcd_url}"))
        .arg(format!("--advertise-client-urls={etcd_url}"))
        .arg(format!("--listen-peer-urls={peer}"))
        .arg(format!("--initial-advertise-peer-urls={peer}"))
        .arg(format!("--initial-cluster=default={peer}"))
        .arg("--unsafe-no-fsync=true");
    let pid = spawn(dir, ETCD, etcd, spec.detach)?;
    wait_until(dir, ETCD, pid, ETCD_START_LIMIT, || http_ok(client_port, "/health"))?;

    let ports: Vec<u16> = spec.servers.iter().map(|_| free_port()).collect::<Result<_>>()?;
    let issuer = format!("https://127.0.0.1:{}/", ports[0]);
    let mut servers = Vec::new();
    let mut pids = Vec::new();
    for (s, port) in spec.servers.iter().zip(&ports) {
        let mut c = Command::new(&bins.kube_apiserver);
        c.arg(format!("--etcd-servers={etcd_url}"))
            .arg("--bind-address=127.0.0.1")
            .arg("--advertise-address=127.0.0.1")
            .arg(format!("--secure-port={port}"))
            .arg(format!("--cert-dir={}", dir.join("pki").join(&s.name).display()))
            .arg("--authorization-mode=RBAC")
            .arg("--service-cluster-ip-range=10.0.0.0/24")
            .arg(format!("--service-account-issuer={issuer}"))
            .arg(format!("--service-account-key-file={}", sa_key.display()))
            .arg(format!("--service-account-signing-key-file={}", sa_key.display()))
            .arg("--disable-admission-plugins=ServiceAccount")
            .arg("--allow-privileged=true")
            .arg("--endpoint-reconciler-type=none")
            .arg(format!("--token-auth-file={}", tokens.display()));
        let gates = s.effective_gates();
        if !gates.is_empty() {
            c.arg(format!("--feature-gates={}", gates_to_string(&gates)));
        }
        if s.legacy {
            c.arg("--watch-cache=false");
        }
        if !s.runtime_config.is_empty() {
            c.arg(format!("--runtime-config={}", s.runtime_config.join(",")));
        }
        let audit_log = s.audit.then(|| dir.join(format!("{}.audit.log", s.name)));
        if let Some(log) = &audit_log {
            c.arg(format!("--audit-log-path={}", log.display()))
                .arg(format!("--audit-policy-file={}", audit_policy.display()));
        }
        pids.push(spawn(dir, &s.name, c, spec.detach)?);
        let server = Server {
            spec: s.clone(),
            url: format!("https://127.0.0.1:{port}"),
            kubeconfig: dir.join(format!("{}.kubeconfig", s.name)),
            limited_kubeconfig: dir.join(format!("{}.limited.kubeconfig", s.name)),
            audit_log,
        };
        servers.push(server);
    }
    // The servers start in parallel; wait for each in turn.
    for (server, pid) in servers.iter().zip(pids) {
        let readyz = format!("{}/readyz", server.url);
        let default_ns = format!("{}/api/v1/namespaces/default", server.url);
        // `/readyz` first, then namespace `default` (created by a post-start hook just after):
        // a client that starts at once must not find it missing.
        wait_until(dir, &server.spec.name, pid, SERVER_START_LIMIT, || {
            [&readyz, &default_ns].iter().all(|u| matches!(get(bins, u, ADMIN_TOKEN), Ok(Some((200, _)))))
        })?;
        // The server wrote its self-signed serving pair at start-up; clients verify against its CA.
        let ca = server_ca(&dir.join("pki").join(&server.spec.name))?;
        write_kubeconfig(&server.kubeconfig, &server.url, &ca, ADMIN_TOKEN)?;
        write_kubeconfig(&server.limited_kubeconfig, &server.url, &ca, LIMITED_TOKEN)?;
    }
    let instance = Instance { dir: dir.to_owned(), kube_version: KUBE_VERSION.to_owned(), etcd_url, servers };
    // Written last, atomically: its presence says the start completed.
    let tmp = dir.join(format!(".{STATE_FILE}.partial"));
    fs::write(&tmp, serde_json::to_string_pretty(&instance.to_json())?)?;
    fs::rename(&tmp, dir.join(STATE_FILE))?;
    eprintln!("xtask: control plane ready in {:.1}s ({})", started.elapsed().as_secs_f64(), dir.display());
    Ok(instance)
}

/// Spawns a process with its output in `<name>.log` and writes `<name>.pid`.
fn spawn(dir: &Path, name: &str, mut cmd: Command, detach: bool) -> Result<u32> {
    let log = fs::File::create(dir.join(format!("{name}.log")))?;
    cmd.stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log);
    if detach {
        cmd.process_group(0);
    }
    let child = cmd.spawn().with_context(|| format!("starting {name}"))?;
    let pid = child.id();
    CHILDREN.lock().unwrap_or_else(|e| e.into_inner()).push((dir.to_owned(), child));
    fs::write(dir.join(format!("{name}.pid")), format!("{pid}\n"))?;
    Ok(pid)
}

/// Polls `ready` until it holds, failing early when the process exits (with the tail of its log)
/// or when `limit` passes.
fn wait_until(
    dir: &Path,
    name: &str,
    pid: u32,
    limit: Duration,
    mut ready: impl FnMut() -> bool,
) -> Result<()> {
    let start = Instant::now();
    loop {
        if INTERRUPTED.load(Ordering::SeqCst) {
            bail!("interrupted");
        }
        if ready() {
            eprintln!("xtask: {name} ready after {:.1}s", start.elapsed().as_secs_f64());
            return Ok(());
        }
        let log = fs::read_to_string(dir.join(format!("{name}.log"))).unwrap_or_default();
        if liveness(pid, dir) != Liveness::Ours {
            if log.contains("address already in use") {
                return Err(PortTaken(name.to_owned()).into());
            }
            bail!("{name} exited during start-up; the end of its log:\n{}", tail(&log, 25));
        }
        if start.elapsed() > limit {
            bail!("{name} not ready after {limit:?}; the end of its log:\n{}", tail(&log, 25));
        }
        // Polling a process we do not control: there is no event to wait on.
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Whether plain-HTTP `GET path` on a loopback port answers 200 (etcd's `/health`).
fn http_ok(port: u16, path: &str) -> bool {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let Ok(mut conn) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else { return false };
    let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
    let req = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    let mut resp = String::new();
    conn.write_all(req.as_bytes()).is_ok()
        && conn.read_to_string(&mut resp).is_ok()
        && resp.starts_with("HTTP/1.1 200")
}

/// One HTTPS GET through the probe helper, with a bearer token: the status code and body, or
/// `None` when the server could not be reached.
pub(crate) fn get(bins: &Binaries, url: &str, token: &str) -> Result<Option<(u16, String)>> {
    let out = Command::new(&bins.probe)
        .arg(url)
        .env("KCACHE_PROBE_TOKEN", token)
        .stdin(Stdio::null())
        .output()
        .context("running the probe helper")?;
    match out.status.code() {
        Some(0) => {}
        Some(1) => return Ok(None),
        _ => bail!("probe {url}: {}", String::from_utf8_lossy(&out.stderr).trim()),
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let (code, body) = text.split_once('\n').unwrap_or((&text, ""));
    Ok(Some((code.trim().parse().context("probe status code")?, body.to_owned())))
}

/// kube-apiserver's `--cert-dir` holds `apiserver.crt`: the serving certificate (for 127.0.0.1)
/// followed by the self-signed CA that issued it. The CA alone goes to `ca.crt`, for kubeconfigs.
fn server_ca(cert_dir: &Path) -> Result<PathBuf> {
    let chain =
        fs::read_to_string(cert_dir.join("apiserver.crt")).context("the server's serving certificate")?;
    let begin = chain.rfind("-----BEGIN CERTIFICATE-----").context("no certificate in apiserver.crt")?;
    let ca = cert_dir.join("ca.crt");
    fs::write(&ca, &chain[begin..])?;
    Ok(ca)
}

fn write_kubeconfig(path: &Path, server: &str, ca: &Path, token: &str) -> Result<()> {
    // The CA by path: the kubeconfig lives in the state directory next to it. Verifying (rather
    // than `insecure-skip-tls-verify`) keeps clients quiet: kube's rustls warns on every
    // connection that skips verification.
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster:\n    server: {server}\n    \
         certificate-authority: {}\nusers:\n- name: user\n  user:\n    token: {token}\ncontexts:\n- name: local\n  \
         context:\n    cluster: local\n    user: user\ncurrent-context: local\n",
        ca.display()
    );
    fs::write(path, text)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_is_ours_only_with_our_binary_and_state_dir() {
        let dir = Path::new("/tmp/kc-state");
        let cmd = |args: &[&str]| args.join("\0").into_bytes();
        assert!(is_ours(&cmd(&["/c/etcd", "--data-dir=/tmp/kc-state/etcd"]), dir));
        assert!(is_ours(&cmd(&["/c/kube-apiserver", "--x", "--cert-dir=/tmp/kc-state/pki/a"]), dir));
        // Another state directory, even one whose name starts with ours.
        assert!(!is_ours(&cmd(&["/c/etcd", "--data-dir=/tmp/kc-state2/etcd"]), dir));
        // Another program that mentions the directory.
        assert!(!is_ours(&cmd(&["/bin/vi", "/tmp/kc-state/etcd.log"]), dir));
        assert!(!is_ours(b"", dir));
    }

    /// A process this xtask spawned and stopped is reaped, not left a zombie until xtask exits.
    #[test]
    fn a_stopped_child_is_reaped() {
        let dir = std::env::temp_dir().join(format!("kcache-cp-reap-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let mut sleeper = Command::new("sleep");
        sleeper.arg("30");
        let pid = spawn(&dir, "sleeper", sleeper, false).unwrap();
        // Our child, so ours whatever its command line says, until it has exited.
        assert_eq!(liveness(pid, &dir), Liveness::Ours);
        assert_eq!(liveness(pid, Path::new("/elsewhere")), Liveness::Foreign);
        signal(pid, "KILL");
        let deadline = Instant::now() + Duration::from_secs(10);
        while liveness(pid, &dir) != Liveness::Gone {
            assert!(Instant::now() < deadline, "SIGKILL did not end {pid}");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!Path::new(&format!("/proc/{pid}")).exists(), "{pid} is still a zombie");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn gates_render_in_name_order_and_legacy_turns_watch_list_off() {
        let mut s = ServerSpec::new("kube-apiserver");
        assert_eq!(gates_to_string(&s.effective_gates()), "none");
        s.feature_gates.insert("ShardedListAndWatch".into(), true);
        s.feature_gates.insert("AnotherGate".into(), false);
        s.legacy = true;
        assert_eq!(
            gates_to_string(&s.effective_gates()),
            "AnotherGate=false,ShardedListAndWatch=true,WatchList=false"
        );
    }

    #[test]
    fn cluster_json_round_trips() {
        let mut spec = ServerSpec::new("kube-apiserver");
        spec.feature_gates.insert("ShardedListAndWatch".into(), true);
        spec.audit = true;
        spec.runtime_config.push("coordination.k8s.io/v1beta1=true".into());
        let instance = Instance {
            dir: "/s".into(),
            kube_version: KUBE_VERSION.into(),
            etcd_url: "http://127.0.0.1:1".into(),
            servers: vec![Server {
                spec,
                url: "https://127.0.0.1:2".into(),
                kubeconfig: "/s/a.kubeconfig".into(),
                limited_kubeconfig: "/s/a.limited.kubeconfig".into(),
                audit_log: Some("/s/a.audit.log".into()),
            }],
        };
        assert_eq!(Instance::from_json(Path::new("/s"), &instance.to_json()).unwrap(), instance);
    }
}
