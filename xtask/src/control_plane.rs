//! A real control plane on loopback for `cargo xtask e2e --cluster local`: etcd and kube-apiserver
//! built from the Go module proxy (wrapper modules under `xtask/control-plane/`), cached by version,
//! started envtest-style and stopped (temp dirs removed) however the run ends.
//!
//! Two kube-apiservers share one etcd:
//! * `main`: default features (watch-list on), RBAC, token users, an audit log of ConfigMap requests;
//! * `legacy`: `--feature-gates=WatchList=false` and `--watch-cache=false`, so a watch-list request is
//!   refused (the reflector must fall back) and watches are served straight from etcd (so a
//!   compaction makes an old resource version answer 410 Gone, as on a server whose watch cache has
//!   moved on).

use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// The Kubernetes release kube-apiserver is built from (`xtask/control-plane/kube-apiserver/go.mod`).
pub(crate) const KUBE_VERSION: &str = "v1.36.3";
/// The etcd release (`xtask/control-plane/etcd/go.mod`).
pub(crate) const ETCD_VERSION: &str = "v3.6.5";

/// Token of the `system:masters` user written to the token file.
const ADMIN_TOKEN: &str = "kcache-e2e-admin-token";
/// Token of a user with no RBAC bindings at all.
pub(crate) const LIMITED_TOKEN: &str = "kcache-e2e-limited-token";
/// Name of that user.
pub(crate) const LIMITED_USER: &str = "kcache-e2e-limited";

/// Set by the Ctrl-C handler; long waits check it so cleanup still runs.
pub(crate) static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Paths of the built binaries.
#[derive(Debug)]
pub(crate) struct Binaries {
    etcd: PathBuf,
    kube_apiserver: PathBuf,
    keygen: PathBuf,
}

/// The cache root: `$KCACHE_CACHE_DIR`, else `$XDG_CACHE_HOME/kcache`, else `~/.cache/kcache`.
fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("KCACHE_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(dir).join("kcache");
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
    home.join(".cache").join("kcache")
}

/// FNV-1a of the wrapper module's go.mod and go.sum: a changed pin is a new cache entry.
fn module_hash(module: &Path) -> Result<String> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for f in ["go.mod", "go.sum"] {
        let bytes =
            fs::read(module.join(f)).with_context(|| format!("reading {}", module.join(f).display()))?;
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

/// Builds (or finds in the cache) etcd, kube-apiserver and the key generator.
pub(crate) fn ensure_binaries() -> Result<Binaries> {
    if !go_available() {
        bail!("`--cluster local` builds etcd and kube-apiserver from Go modules, but `go` is not on PATH");
    }
    let modules = crate::project_root().join("xtask/control-plane");
    let apiserver_mod = modules.join("kube-apiserver");
    let etcd_mod = modules.join("etcd");
    let minor = KUBE_VERSION.split('.').nth(1).context("kube version")?;
    let ldflags = format!(
        "-X k8s.io/component-base/version.gitVersion={KUBE_VERSION} \
         -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor={minor}"
    );
    let apiserver_dir = cache_root()
        .join(format!("control-plane/kube-apiserver-{KUBE_VERSION}-{}", module_hash(&apiserver_mod)?));
    let etcd_dir =
        cache_root().join(format!("control-plane/etcd-{ETCD_VERSION}-{}", module_hash(&etcd_mod)?));
    let kube_apiserver = build(
        &apiserver_mod,
        "k8s.io/kubernetes/cmd/kube-apiserver",
        &ldflags,
        &apiserver_dir,
        "kube-apiserver",
    )?;
    let keygen = build(&apiserver_mod, "./keygen", "", &apiserver_dir, "keygen")?;
    let etcd = build(&etcd_mod, "go.etcd.io/etcd/server/v3", "", &etcd_dir, "etcd")?;
    Ok(Binaries { etcd, kube_apiserver, keygen })
}

fn build(module: &Path, package: &str, ldflags: &str, dir: &Path, name: &str) -> Result<PathBuf> {
    let bin = dir.join(name);
    if bin.is_file() {
        eprintln!("xtask e2e: {name} from cache ({})", bin.display());
        return Ok(bin);
    }
    fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".{name}.partial.{}", std::process::id()));
    eprintln!("xtask e2e: building {name} ({package}); a cold build downloads modules and takes minutes");
    let start = Instant::now();
    let mut cmd = Command::new("go");
    cmd.current_dir(module).env("CGO_ENABLED", "0").args(["build", "-trimpath"]);
    if !ldflags.is_empty() {
        cmd.args(["-ldflags", ldflags]);
    }
    let status = cmd.arg("-o").arg(&tmp).arg(package).status().context("running go build")?;
    if !status.success() {
        let _ = fs::remove_file(&tmp);
        bail!("go build {package} failed ({status})");
    }
    // Rename is atomic: a concurrent or interrupted build never leaves a half-written binary.
    fs::rename(&tmp, &bin)?;
    eprintln!("xtask e2e: built {name} in {:.1}s", start.elapsed().as_secs_f64());
    Ok(bin)
}

/// A free loopback port (bound, read and released; the window for a race is tiny).
fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A running etcd and two kube-apiservers. Dropping it stops them and removes the temp dir.
#[derive(Debug)]
pub(crate) struct ControlPlane {
    dir: PathBuf,
    children: Vec<(String, Child)>,
    /// Where logs are copied when the run failed.
    keep_logs_in: Option<PathBuf>,
    /// etcd's client URL.
    pub(crate) etcd_url: String,
    /// Kubeconfig of the admin user on the main apiserver.
    pub(crate) kubeconfig: PathBuf,
    /// Kubeconfig of the user without RBAC bindings on the main apiserver.
    pub(crate) limited_kubeconfig: PathBuf,
    /// Kubeconfig of the admin user on the legacy apiserver (no watch-list, no watch cache).
    pub(crate) legacy_kubeconfig: PathBuf,
    /// The main apiserver's audit log.
    pub(crate) audit_log: PathBuf,
}

impl ControlPlane {
    /// Starts etcd, waits for it, then both apiservers, and waits until each answers on its port.
    /// Readiness of the API itself (`/readyz`, then GET of namespace default) is checked by the
    /// suite's harness before the first test, with a Kubernetes client.
    pub(crate) fn start(bins: &Binaries) -> Result<Self> {
        let dir = std::env::temp_dir().join(format!("kcache-e2e-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("pki"))?;
        let mut cp = ControlPlane {
            dir: dir.clone(),
            children: Vec::new(),
            keep_logs_in: None,
            etcd_url: String::new(),
            kubeconfig: dir.join("admin.kubeconfig"),
            limited_kubeconfig: dir.join("limited.kubeconfig"),
            legacy_kubeconfig: dir.join("legacy.kubeconfig"),
            audit_log: dir.join("audit.log"),
        };

        let sa_key = dir.join("pki/sa.key");
        let status = Command::new(&bins.keygen).arg(&sa_key).status().context("running keygen")?;
        if !status.success() {
            bail!("keygen failed ({status})");
        }
        fs::write(
            dir.join("pki/tokens.csv"),
            format!(
                "{ADMIN_TOKEN},kcache-e2e-admin,kcache-e2e-admin-uid,\"system:masters\"\n\
                 {LIMITED_TOKEN},{LIMITED_USER},kcache-e2e-limited-uid\n"
            ),
        )?;
        fs::write(
            dir.join("audit-policy.yaml"),
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [\"RequestReceived\"]\nrules:\n\
             - level: Metadata\n  resources:\n  - group: \"\"\n    resources: [\"configmaps\"]\n- level: None\n",
        )?;

        let (client_port, peer_port) = (free_port()?, free_port()?);
        cp.etcd_url = format!("http://127.0.0.1:{client_port}");
        let peer = format!("http://127.0.0.1:{peer_port}");
        let mut etcd = Command::new(&bins.etcd);
        etcd.arg(format!("--data-dir={}", dir.join("etcd").display()))
            .arg(format!("--listen-client-urls={}", cp.etcd_url))
            .arg(format!("--advertise-client-urls={}", cp.etcd_url))
            .arg(format!("--listen-peer-urls={peer}"))
            .arg(format!("--initial-advertise-peer-urls={peer}"))
            .arg(format!("--initial-cluster=default={peer}"))
            .arg("--unsafe-no-fsync=true");
        cp.spawn("etcd", etcd)?;
        cp.wait_for("etcd", client_port, Duration::from_secs(60), Some("/health"))?;

        let main_port = free_port()?;
        let legacy_port = free_port()?;
        let etcd_url = cp.etcd_url.clone();
        let common = |port: u16, cert_dir: &str| -> Command {
            let mut c = Command::new(&bins.kube_apiserver);
            c.arg(format!("--etcd-servers={etcd_url}"))
                .arg("--bind-address=127.0.0.1")
                .arg("--advertise-address=127.0.0.1")
                .arg(format!("--secure-port={port}"))
                .arg(format!("--cert-dir={}", dir.join(cert_dir).display()))
                .arg("--authorization-mode=RBAC")
                .arg("--service-cluster-ip-range=10.0.0.0/24")
                .arg(format!("--service-account-issuer=https://127.0.0.1:{main_port}/"))
                .arg(format!("--service-account-key-file={}", sa_key.display()))
                .arg(format!("--service-account-signing-key-file={}", sa_key.display()))
                .arg("--disable-admission-plugins=ServiceAccount")
                .arg("--allow-privileged=true")
                .arg("--endpoint-reconciler-type=none")
                .arg(format!("--token-auth-file={}", dir.join("pki/tokens.csv").display()));
            c
        };
        let mut main = common(main_port, "pki/main");
        main.arg(format!("--audit-log-path={}", cp.audit_log.display()))
            .arg(format!("--audit-policy-file={}", dir.join("audit-policy.yaml").display()));
        cp.spawn("kube-apiserver", main)?;
        let mut legacy = common(legacy_port, "pki/legacy");
        legacy.arg("--feature-gates=WatchList=false").arg("--watch-cache=false");
        cp.spawn("kube-apiserver-legacy", legacy)?;
        cp.wait_for("kube-apiserver", main_port, Duration::from_secs(120), None)?;
        cp.wait_for("kube-apiserver-legacy", legacy_port, Duration::from_secs(120), None)?;

        write_kubeconfig(&cp.kubeconfig, main_port, ADMIN_TOKEN)?;
        write_kubeconfig(&cp.limited_kubeconfig, main_port, LIMITED_TOKEN)?;
        write_kubeconfig(&cp.legacy_kubeconfig, legacy_port, ADMIN_TOKEN)?;
        Ok(cp)
    }

    fn spawn(&mut self, name: &str, mut cmd: Command) -> Result<()> {
        let log = fs::File::create(self.dir.join(format!("{name}.log")))?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {name}"))?;
        self.children.push((name.to_owned(), child));
        Ok(())
    }

    /// Waits until `port` accepts connections (and, for plain HTTP, `path` answers 200), failing
    /// early when the process exits.
    fn wait_for(&mut self, name: &str, port: u16, limit: Duration, http_path: Option<&str>) -> Result<()> {
        let start = Instant::now();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        loop {
            if INTERRUPTED.load(Ordering::SeqCst) {
                bail!("interrupted");
            }
            if let Some((_, child)) = self.children.iter_mut().find(|(n, _)| n == name)
                && let Some(status) = child.try_wait()?
            {
                self.keep_logs();
                bail!("{name} exited during start-up ({status}); its log is kept, see above");
            }
            if let Ok(mut conn) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
                let Some(path) = http_path else {
                    eprintln!(
                        "xtask e2e: {name} listening on {addr} after {:.1}s",
                        start.elapsed().as_secs_f64()
                    );
                    return Ok(());
                };
                let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
                let req = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
                let mut resp = String::new();
                if conn.write_all(req.as_bytes()).is_ok()
                    && conn.read_to_string(&mut resp).is_ok()
                    && resp.starts_with("HTTP/1.1 200")
                {
                    eprintln!("xtask e2e: {name} healthy after {:.1}s", start.elapsed().as_secs_f64());
                    return Ok(());
                }
            }
            if start.elapsed() > limit {
                self.keep_logs();
                bail!("{name} not ready on {addr} after {limit:?}");
            }
            // Polling a process we do not control: there is no event to wait on.
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Keep the logs (copied under target/e2e-logs) when the run fails.
    pub(crate) fn keep_logs(&mut self) {
        self.keep_logs_in = Some(crate::project_root().join("target/e2e-logs"));
    }
}

fn write_kubeconfig(path: &Path, port: u16, token: &str) -> Result<()> {
    // A throwaway cluster on loopback with a self-signed serving certificate: skip verification.
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster:\n    server: https://127.0.0.1:{port}\n    \
         insecure-skip-tls-verify: true\nusers:\n- name: user\n  user:\n    token: {token}\ncontexts:\n- name: local\n  \
         context:\n    cluster: local\n    user: user\ncurrent-context: local\n"
    );
    fs::write(path, text)?;
    Ok(())
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        // Apiservers first, then etcd: the reverse of start-up.
        for (name, child) in self.children.iter_mut().rev() {
            let _ = child.kill();
            match child.wait() {
                Ok(_) => {}
                Err(e) => eprintln!("xtask e2e: waiting for {name}: {e}"),
            }
        }
        if let Some(dest) = &self.keep_logs_in {
            let _ = fs::create_dir_all(dest);
            for (name, _) in &self.children {
                let src = self.dir.join(format!("{name}.log"));
                let _ = fs::copy(&src, dest.join(format!("{name}.log")));
            }
            eprintln!("xtask e2e: control-plane logs kept in {}", dest.display());
        }
        if let Err(e) = fs::remove_dir_all(&self.dir) {
            eprintln!("xtask e2e: removing {}: {e}", self.dir.display());
        }
    }
}
