//! The harness of kcache's end-to-end suite: every test takes its cluster from here.
//!
//! `cargo xtask e2e --cluster <local|kind|embedded|kubeconfig=PATH>` starts (or finds) the API
//! server and describes it in environment variables; [`Cluster::connect`] reads them. Without
//! them the suite runs on `embedded` (an in-process kcache-testserver per test), so plain
//! `cargo test` runs it too.
//!
//! | variable | meaning |
//! |---|---|
//! | `KCACHE_E2E_CLUSTER` | `local`, `kind`, `embedded` (default) or `kubeconfig` |
//! | `KCACHE_E2E_KUBECONFIG` | admin kubeconfig of the cluster under test |
//! | `KCACHE_E2E_LIMITED_KUBECONFIG`, `KCACHE_E2E_LIMITED_USER` | a user without RBAC bindings |
//! | `KCACHE_E2E_LEGACY_KUBECONFIG` | the same cluster through a kube-apiserver with `WatchList=false` and no watch cache |
//! | `KCACHE_E2E_UNSHARDED_KUBECONFIG` | the same cluster through a kube-apiserver without server-side sharded list and watch (`ShardedListAndWatch` off; the main server has it on) |
//! | `KCACHE_E2E_COORDINATED_KUBECONFIG` | the same cluster through a kube-apiserver with coordinated leader election (`CoordinatedLeaderElection=true`, `coordination.k8s.io/v1beta1=true`) |
//! | `KCACHE_E2E_ETCD` | etcd's client URL, to force compaction |
//! | `KCACHE_E2E_AUDIT_LOG` | the main kube-apiserver's audit log |
//!
//! A test whose capability the cluster lacks (no etcd access on kind, say) prints why and
//! returns; the capabilities of each cluster are listed in docs/testing.md.

pub mod differential;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use kcache_informer::EventHandlerFuncs;
use kcache_store::{ObjectOrTombstone, meta_namespace_key};
use kcache_testserver::{TestServer, WatchListSupport};
use kube::api::{Api, ListParams, ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How long any single convergence wait may take before the test fails.
pub const CONVERGE_TIMEOUT: Duration = Duration::from_secs(90);

/// Which kind of cluster the suite runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterKind {
    /// kcache-testserver in this process.
    Embedded,
    /// etcd + kube-apiserver built from Go modules, started by `cargo xtask e2e`.
    Local,
    /// A throwaway kind cluster.
    Kind,
    /// An existing cluster from a kubeconfig.
    Kubeconfig,
}

/// An API server endpoint: its admin client config and how to compact its storage.
#[derive(Debug, Clone)]
pub struct Target {
    config: kube::Config,
    compactor: Compactor,
}

#[derive(Debug, Clone)]
enum Compactor {
    None,
    Etcd(String),
    Embedded(Arc<TestServer>),
}

impl Target {
    /// A new admin client (clients are bound to the runtime that created them).
    pub fn client(&self) -> kube::Client {
        kube::Client::try_from(self.config.clone()).expect("kube client from a valid config")
    }

    /// The admin client config.
    pub fn config(&self) -> &kube::Config {
        &self.config
    }

    /// Whether [`Target::compact`] can force a compaction.
    pub fn can_compact(&self) -> bool {
        !matches!(self.compactor, Compactor::None)
    }

    /// Compacts the storage at its current revision: every older resource version becomes
    /// unusable for watches (410 Gone) and continue tokens. Returns false when unsupported.
    pub async fn compact(&self) -> Result<bool> {
        match &self.compactor {
            Compactor::None => Ok(false),
            Compactor::Embedded(server) => {
                server.compact();
                Ok(true)
            }
            Compactor::Etcd(url) => {
                // etcd's JSON gateway: read the current revision, then compact physically at it.
                let range = etcd_post(url, "/v3/kv/range", r#"{"key":"L3JlZ2lzdHJ5","limit":1}"#).await?;
                let rev = json_string_field(&range, "revision").context("etcd range: no header.revision")?;
                let body = format!(r#"{{"revision":"{rev}","physical":true}}"#);
                etcd_post(url, "/v3/kv/compaction", &body).await?;
                tracing::info!(revision = %rev, "etcd compacted");
                Ok(true)
            }
        }
    }
}

/// A plain HTTP/1.1 POST to etcd's gateway; returns the raw response.
async fn etcd_post(url: &str, path: &str, body: &str) -> Result<String> {
    let host = url.strip_prefix("http://").context("etcd URL must be http://")?;
    let mut conn = TcpStream::connect(host).await?;
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(req.as_bytes()).await?;
    let mut resp = String::new();
    conn.read_to_string(&mut resp).await?;
    if !resp.starts_with("HTTP/1.1 200") {
        bail!("etcd {path}: {}", resp.lines().next().unwrap_or_default());
    }
    Ok(resp)
}

/// The value of the first `"field":"value"` in `text`.
fn json_string_field(text: &str, field: &str) -> Option<String> {
    let pat = format!("\"{field}\":\"");
    let start = text.find(&pat)? + pat.len();
    let end = text[start..].find('"')?;
    Some(text[start..start + end].to_owned())
}

/// A user without any RBAC binding.
#[derive(Debug, Clone)]
pub struct LimitedUser {
    /// The user name RBAC subjects refer to.
    pub name: String,
    config: kube::Config,
}

impl LimitedUser {
    /// A client authenticating as this user.
    pub fn client(&self) -> kube::Client {
        kube::Client::try_from(self.config.clone()).expect("kube client from a valid config")
    }

    /// Its client config.
    pub fn config(&self) -> &kube::Config {
        &self.config
    }
}

/// The cluster under test, as described by `cargo xtask e2e` (see the crate docs).
#[derive(Debug)]
pub struct Cluster {
    /// Which kind.
    pub kind: ClusterKind,
    /// The main API server.
    pub main: Target,
    /// A server of the same cluster that refuses watch-list and has no watch cache.
    pub legacy: Option<Target>,
    /// A server of the same cluster with coordinated leader election (KEP-4355): the
    /// `CoordinatedLeaderElection` gate, `leasecandidates` and the coordinator.
    pub coordinated: Option<Target>,
    /// A server of the same cluster without server-side sharded list and watch: the
    /// `ShardedListAndWatch` gate off, where `main` has it on (KEP-5866). A `shardSelector` sent
    /// there is ignored.
    pub unsharded: Option<Target>,
    /// A user without RBAC bindings on `main`.
    pub limited: Option<LimitedUser>,
    /// The main server's audit log, when readable.
    pub audit_log: Option<PathBuf>,
    run_id: String,
    counter: AtomicU64,
    _servers: Vec<Arc<TestServer>>,
}

/// Token of the embedded server's `system:masters` user.
const EMBEDDED_ADMIN_TOKEN: &str = "embedded-admin-token";
/// Token of the embedded server's user without bindings.
const EMBEDDED_LIMITED_TOKEN: &str = "embedded-limited-token";
/// Name of that user.
const EMBEDDED_LIMITED_USER: &str = "kcache-e2e-limited";

impl Cluster {
    /// Connects to the cluster named by the environment and waits until it serves requests
    /// (`/readyz`, then GET of namespace `default`).
    pub async fn connect() -> Result<Self> {
        init_tracing();
        let kind = match std::env::var("KCACHE_E2E_CLUSTER").as_deref() {
            Err(_) | Ok("" | "embedded") => ClusterKind::Embedded,
            Ok("local") => ClusterKind::Local,
            Ok("kind") => ClusterKind::Kind,
            Ok("kubeconfig") => ClusterKind::Kubeconfig,
            Ok(other) => bail!("unknown KCACHE_E2E_CLUSTER `{other}`"),
        };
        let run_id = format!("{:06x}", rand::random::<u32>() & 0xff_ffff);
        if kind == ClusterKind::Embedded {
            return Ok(Self::embedded(run_id).await);
        }
        let main_config =
            config_from(&std::env::var("KCACHE_E2E_KUBECONFIG").context("KCACHE_E2E_KUBECONFIG")?).await?;
        let etcd = std::env::var("KCACHE_E2E_ETCD").ok();
        let compactor = || etcd.clone().map_or(Compactor::None, Compactor::Etcd);
        let main = Target { config: main_config, compactor: compactor() };
        wait_ready(&main.client()).await?;
        // A further server of the cluster, when the harness names its kubeconfig in `var`.
        let other = async |var: &str| -> Result<Option<Target>> {
            let Ok(path) = std::env::var(var) else { return Ok(None) };
            let t = Target { config: config_from(&path).await?, compactor: compactor() };
            wait_ready(&t.client()).await?;
            Ok(Some(t))
        };
        let legacy = other("KCACHE_E2E_LEGACY_KUBECONFIG").await?;
        let coordinated = other("KCACHE_E2E_COORDINATED_KUBECONFIG").await?;
        let unsharded = other("KCACHE_E2E_UNSHARDED_KUBECONFIG").await?;
        let limited = match std::env::var("KCACHE_E2E_LIMITED_KUBECONFIG") {
            Ok(path) => Some(LimitedUser {
                name: std::env::var("KCACHE_E2E_LIMITED_USER").context("KCACHE_E2E_LIMITED_USER")?,
                config: config_from(&path).await?,
            }),
            Err(_) => None,
        };
        let audit_log = std::env::var_os("KCACHE_E2E_AUDIT_LOG").map(PathBuf::from);
        Ok(Self {
            kind,
            main,
            legacy,
            coordinated,
            unsharded,
            limited,
            audit_log,
            run_id,
            counter: AtomicU64::new(0),
            _servers: Vec::new(),
        })
    }

    async fn embedded(run_id: String) -> Self {
        let main_server = Arc::new(
            TestServer::builder()
                .strict_namespaces(true)
                .token(EMBEDDED_ADMIN_TOKEN, "kcache-e2e-admin", &["system:masters"])
                .token(EMBEDDED_LIMITED_TOKEN, EMBEDDED_LIMITED_USER, &[])
                // As the local control plane's main kube-apiserver.
                .sharded_list_and_watch(true)
                .start()
                .await,
        );
        // The embedded "legacy" server is a second server (its own data) that refuses watch-list
        // the way kube-apiserver does with the WatchList gate off.
        let legacy_server = Arc::new(
            TestServer::builder()
                .strict_namespaces(true)
                .token(EMBEDDED_ADMIN_TOKEN, "kcache-e2e-admin", &["system:masters"])
                .start()
                .await,
        );
        legacy_server.faults().set_watch_list_support(WatchListSupport::GateDisabled);
        // The embedded "coordinated" server: its own data, with the test server's coordinator;
        // without sharded list and watch, it is also the "unsharded" server, as on `local`.
        let coordinated_server = Arc::new(
            TestServer::builder()
                .token(EMBEDDED_ADMIN_TOKEN, "kcache-e2e-admin", &["system:masters"])
                .coordinated_leader_election(true)
                .start()
                .await,
        );
        let coordinated = Target {
            config: coordinated_server.config(),
            compactor: Compactor::Embedded(coordinated_server.clone()),
        };
        let unsharded = Target {
            config: coordinated_server.config(),
            compactor: Compactor::Embedded(coordinated_server.clone()),
        };
        let main =
            Target { config: main_server.config(), compactor: Compactor::Embedded(main_server.clone()) };
        let legacy =
            Target { config: legacy_server.config(), compactor: Compactor::Embedded(legacy_server.clone()) };
        let limited = Some(LimitedUser {
            name: EMBEDDED_LIMITED_USER.to_owned(),
            config: main_server.config_for_token(EMBEDDED_LIMITED_TOKEN),
        });
        Self {
            kind: ClusterKind::Embedded,
            main,
            legacy: Some(legacy),
            coordinated: Some(coordinated),
            unsharded: Some(unsharded),
            limited,
            audit_log: None,
            run_id,
            counter: AtomicU64::new(0),
            _servers: vec![main_server, legacy_server, coordinated_server],
        }
    }

    /// The kubeconfig file of the main server (`KCACHE_E2E_KUBECONFIG`), for processes the tests
    /// start; `None` on `embedded`, whose server lives in the test process (see
    /// [`write_kubeconfig`]).
    pub fn kubeconfig_file(&self) -> Option<PathBuf> {
        if self.kind == ClusterKind::Embedded {
            return None;
        }
        std::env::var_os("KCACHE_E2E_KUBECONFIG").map(PathBuf::from)
    }

    /// A unique name for this run: `<prefix>-<run id>-<n>`.
    pub fn unique(&self, prefix: &str) -> String {
        format!("{prefix}-{}-{}", self.run_id, self.counter.fetch_add(1, Ordering::Relaxed))
    }

    /// Creates a fresh namespace on `target` (labelled `kcache.dev/e2e=<run id>`). It is deleted
    /// when the returned guard drops, except on throwaway clusters (embedded, local), which
    /// disappear as a whole.
    pub async fn namespace(&self, target: &Target, prefix: &str) -> Result<Namespace> {
        let name = self.unique(&format!("e2e-{prefix}"));
        let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(target.client());
        let mut labels = BTreeMap::new();
        labels.insert("kcache.dev/e2e".to_owned(), self.run_id.clone());
        let ns = k8s_openapi::api::core::v1::Namespace {
            metadata: ObjectMeta { name: Some(name.clone()), labels: Some(labels), ..Default::default() },
            ..Default::default()
        };
        api.create(&PostParams::default(), &ns)
            .await
            .with_context(|| format!("creating namespace {name}"))?;
        let cleanup = matches!(self.kind, ClusterKind::Kind | ClusterKind::Kubeconfig);
        Ok(Namespace { name, config: target.config.clone(), cleanup })
    }

    /// True when the audit log shows a LIST of ConfigMaps in `namespace`. `None` without a log.
    pub fn audit_shows_list(&self, namespace: &str) -> Option<bool> {
        let log = std::fs::read_to_string(self.audit_log.as_ref()?).ok()?;
        let ns = format!("\"namespace\":\"{namespace}\"");
        Some(log.lines().any(|l| l.contains("\"verb\":\"list\"") && l.contains(&ns)))
    }

    /// True when the audit log shows a watch-list request (`sendInitialEvents=true`) in
    /// `namespace`. `None` without a log.
    pub fn audit_shows_watch_list(&self, namespace: &str) -> Option<bool> {
        let log = std::fs::read_to_string(self.audit_log.as_ref()?).ok()?;
        let ns = format!("\"namespace\":\"{namespace}\"");
        Some(log.lines().any(|l| {
            l.contains("\"verb\":\"watch\"") && l.contains(&ns) && l.contains("sendInitialEvents=true")
        }))
    }
}

/// Writes a kubeconfig for `server` (a plain-HTTP URL, no credentials) to the temp dir, for
/// processes a test starts against an embedded server. No token: client-go reads a kubeconfig's
/// credentials only for TLS servers (`clientcmd` `DirectClientConfig.ClientConfig`), so a server
/// for client-go processes must run without authentication.
pub fn write_kubeconfig(server: &str, name: &str) -> Result<PathBuf> {
    let kubeconfig = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "embedded", "cluster": {"server": server.trim_end_matches('/')}}],
        "users": [{"name": "anonymous", "user": {}}],
        "contexts": [{"name": "embedded", "context": {"cluster": "embedded", "user": "anonymous"}}],
        "current-context": "embedded",
    });
    let path = std::env::temp_dir().join(format!("kcache-e2e-{}-{name}.kubeconfig", std::process::id()));
    std::fs::write(&path, serde_json::to_vec_pretty(&kubeconfig)?)?;
    Ok(path)
}

/// Reports a skipped test (the cluster lacks a capability) on stderr.
pub fn skip(test: &str, why: &str) {
    eprintln!("SKIPPED {test}: {why}");
}

async fn config_from(path: &str) -> Result<kube::Config> {
    let kc = Kubeconfig::read_from(path).with_context(|| format!("reading kubeconfig {path}"))?;
    let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
    // Tests must see exactly what the server answered.
    config.default_retry = false;
    Ok(config)
}

/// Polls `/readyz`, then GET of namespace `default`, for up to two minutes.
async fn wait_ready(client: &kube::Client) -> Result<()> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let ready = async {
            let req = http::Request::get("/readyz").body(Vec::new())?;
            let text = client.request_text(req).await?;
            if text.trim() != "ok" {
                bail!("/readyz: {text}");
            }
            let ns: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
            ns.get("default").await?;
            Ok(())
        };
        match ready.await {
            Ok(()) => return Ok(()),
            Err(e) if tokio::time::Instant::now() > deadline => {
                bail!("API server not ready after 2 minutes: {e}")
            }
            Err(_) => {}
        }
        // A server we do not control is starting: polling is the only signal.
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// With `RUST_LOG` set, tracing output goes to the test's captured output.
fn init_tracing() {
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_default_env() {
        let _ = tracing_subscriber::fmt().with_env_filter(filter).with_test_writer().try_init();
    }
}

/// A namespace created for one test.
#[derive(Debug)]
pub struct Namespace {
    /// Its name.
    pub name: String,
    config: kube::Config,
    cleanup: bool,
}

impl Drop for Namespace {
    fn drop(&mut self) {
        if !self.cleanup {
            return;
        }
        delete_cluster_scoped::<k8s_openapi::api::core::v1::Namespace>(&self.config, &self.name);
    }
}

/// A TCP proxy in front of an API server that a test can cut (open connections dropped, new ones
/// refused, as when the server's host is unreachable) and resume: a network partition between
/// one client and the server.
#[derive(Debug)]
pub struct Proxy {
    addr: SocketAddr,
    target: SocketAddr,
    accept: Mutex<Option<tokio::task::JoinHandle<()>>>,
    generation: Arc<Mutex<Generation>>,
    /// While cut: the proxy's address, bound but not listening, so connections to it are refused
    /// and no other socket of the process (tests run in parallel) can take the port meanwhile.
    reserved: Mutex<Option<TcpSocket>>,
    target_config: kube::Config,
}

/// The connections piped since the last cut, and the token that ends them.
#[derive(Debug, Default)]
struct Generation {
    token: CancellationToken,
    conns: TaskTracker,
}

impl Proxy {
    /// Starts a proxy to the server of `config`.
    pub async fn start(config: &kube::Config) -> Result<Self> {
        let uri = &config.cluster_url;
        let host = uri.host().context("cluster URL without host")?.to_owned();
        let port = uri.port_u16().unwrap_or(if uri.scheme_str() == Some("https") { 443 } else { 80 });
        let target =
            tokio::net::lookup_host((host.as_str(), port)).await?.next().context("resolving server")?;
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let proxy = Self {
            addr,
            target,
            accept: Mutex::new(None),
            generation: Arc::new(Mutex::new(Generation::default())),
            reserved: Mutex::new(None),
            target_config: config.clone(),
        };
        proxy.serve(listener);
        Ok(proxy)
    }

    fn serve(&self, listener: TcpListener) {
        let (generation, target) = (self.generation.clone(), self.target);
        let task = tokio::spawn(async move {
            loop {
                let Ok((inbound, _)) = listener.accept().await else { continue };
                // No await between accept and registration: an aborted accept task leaves no
                // connection untracked.
                let g = generation.lock();
                g.conns.spawn(pipe(inbound, target, g.token.clone()));
            }
        });
        *self.accept.lock() = Some(task);
    }

    /// A client config like the target's, connecting through the proxy.
    pub fn config(&self) -> kube::Config {
        let mut config = self.target_config.clone();
        let uri = &config.cluster_url;
        let host = uri.host().unwrap_or_default().to_owned();
        let scheme = uri.scheme_str().unwrap_or("http").to_owned();
        config.cluster_url = format!("{scheme}://{}", self.addr).parse().expect("valid proxy URL");
        if host.parse::<std::net::IpAddr>().is_err() && config.tls_server_name.is_none() {
            config.tls_server_name = Some(host);
        }
        config
    }

    /// A client through the proxy.
    pub fn client(&self) -> kube::Client {
        kube::Client::try_from(self.config()).expect("kube client from a valid config")
    }

    /// Drops every open connection and closes the listening socket, so new connections are
    /// refused, until [`Proxy::resume`].
    ///
    /// When it returns, every piped connection is closed: nothing the server sends afterwards
    /// reaches a client (a connection task that had not yet run when its token was cancelled
    /// could otherwise still forward what the server wrote in the meantime).
    pub async fn cut(&self) {
        let task = self.accept.lock().take();
        if let Some(task) = task {
            task.abort();
            // The listener is closed once the aborted task is gone.
            let _ = task.await;
        }
        // Keep the address: bound but not listening, so connections are refused. A failure here
        // (another socket took the port in between) surfaces in `resume`.
        let reserved = reserve(self.addr);
        if let Err(e) = &reserved {
            tracing::warn!(addr = %self.addr, error = %e, "proxy cut: cannot hold the proxy's address");
        }
        *self.reserved.lock() = reserved.ok();
        let old = std::mem::take(&mut *self.generation.lock());
        old.token.cancel();
        // A finished connection task has dropped (closed) both of its sockets.
        old.conns.close();
        old.conns.wait().await;
    }

    /// Listens again on the same address.
    pub async fn resume(&self) -> Result<()> {
        let reserved = self.reserved.lock().take();
        let listener = match reserved {
            Some(socket) => socket.listen(1024),
            None => TcpListener::bind(self.addr).await,
        }
        .context("re-binding the proxy address")?;
        self.serve(listener);
        Ok(())
    }
}

/// A socket bound to `addr` without listening: connections to `addr` are refused, and the port
/// stays taken. The address options are those of `TcpListener::bind`, so the connections the cut
/// left in TIME_WAIT do not stand in the way.
fn reserve(addr: SocketAddr) -> std::io::Result<TcpSocket> {
    let socket = if addr.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
    #[cfg(unix)]
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    Ok(socket)
}

/// Pipes one accepted connection to `target` until either side closes or `token` is cancelled;
/// cancellation wins over pending data (`biased`), so a cancelled connection forwards nothing
/// more.
async fn pipe(mut inbound: TcpStream, target: SocketAddr, token: CancellationToken) {
    let piping = async {
        let Ok(mut outbound) = TcpStream::connect(target).await else { return };
        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
    };
    tokio::select! {
        biased;
        () = token.cancelled() => {}
        () = piping => {}
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(task) = self.accept.lock().take() {
            task.abort();
        }
        self.generation.lock().token.cancel();
    }
}

/// What a handler last saw for one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// Present at this resourceVersion.
    Present(String),
    /// Deleted (`tombstone`: the delete came as a `DeletedFinalStateUnknown`).
    Deleted {
        /// Whether it was a tombstone.
        tombstone: bool,
    },
}

/// A handler that records, per key, the last state it was told about, and wakes waiters.
#[derive(Debug, Default)]
pub struct Recorder {
    state: Mutex<BTreeMap<String, Seen>>,
    /// Count of notifications, by kind: adds, updates, deletes, tombstones.
    counts: Mutex<[u64; 4]>,
    notify: Notify,
}

impl Recorder {
    /// A new, empty recorder.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Event handler functions feeding this recorder.
    pub fn handler<K>(self: &Arc<Self>) -> EventHandlerFuncs<K>
    where
        K: kube::Resource + Send + Sync + 'static,
    {
        let (a, u, d) = (self.clone(), self.clone(), self.clone());
        EventHandlerFuncs::new()
            .on_add(move |o: &Arc<K>, _| a.record(key_of(&**o), Seen::Present(rv_of(&**o)), 0))
            .on_update(move |_, o: &Arc<K>| u.record(key_of(&**o), Seen::Present(rv_of(&**o)), 1))
            .on_delete(move |o: &ObjectOrTombstone<K>| {
                let tombstone = matches!(o, ObjectOrTombstone::Tombstone(_));
                d.record(key_of(&**o.object()), Seen::Deleted { tombstone }, if tombstone { 3 } else { 2 });
            })
    }

    fn record(&self, key: String, seen: Seen, kind: usize) {
        self.state.lock().insert(key, seen);
        self.counts.lock()[kind] += 1;
        self.notify.notify_waiters();
    }

    /// What was last seen per key.
    pub fn snapshot(&self) -> BTreeMap<String, Seen> {
        self.state.lock().clone()
    }

    /// Notification counts: adds, updates, deletes (objects), deletes (tombstones).
    pub fn counts(&self) -> [u64; 4] {
        *self.counts.lock()
    }

    /// Waits, without polling, until `cond` holds; evaluated after every notification this
    /// recorder receives (and once at the start).
    pub async fn wait_for(&self, what: &str, cond: impl Fn() -> bool) -> Result<()> {
        wait_on(&self.notify, what, cond).await
    }

    /// True when the per-key final states equal `server` (key -> resourceVersion): present keys at
    /// the server's version; keys not on the server deleted or never seen.
    pub fn matches(&self, server: &BTreeMap<String, String>) -> bool {
        let state = self.state.lock();
        server.iter().all(|(k, rv)| state.get(k) == Some(&Seen::Present(rv.clone())))
            && state.iter().all(|(k, s)| server.contains_key(k) || matches!(s, Seen::Deleted { .. }))
    }
}

/// Waits until `cond()` holds, re-checking whenever `notify` fires; fails after
/// [`CONVERGE_TIMEOUT`].
pub async fn wait_on(notify: &Notify, what: &str, cond: impl Fn() -> bool) -> Result<()> {
    let deadline = tokio::time::Instant::now() + CONVERGE_TIMEOUT;
    loop {
        let notified = notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if cond() {
            return Ok(());
        }
        if tokio::time::timeout_at(deadline, notified).await.is_err() {
            bail!("timed out after {CONVERGE_TIMEOUT:?} waiting for {what}");
        }
    }
}

/// `namespace/name` (or `name`) of an object.
pub fn key_of<K: kube::Resource>(o: &K) -> String {
    let m = o.meta();
    meta_namespace_key(m.namespace.as_deref().unwrap_or(""), m.name.as_deref().unwrap_or(""))
}

/// The object's resourceVersion.
pub fn rv_of<K: kube::Resource>(o: &K) -> String {
    o.meta().resource_version.clone().unwrap_or_default()
}

/// A fresh consistent list from the server: key -> resourceVersion.
pub async fn server_state<K>(api: &Api<K>) -> Result<BTreeMap<String, String>>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let list = api.list(&ListParams::default()).await?;
    Ok(list.items.iter().map(|o| (key_of(o), rv_of(o))).collect())
}

/// key -> resourceVersion of what a cache holds.
pub fn cache_state<K: kube::Resource>(items: &[Arc<K>]) -> BTreeMap<String, String> {
    items.iter().map(|o| (key_of(&**o), rv_of(&**o))).collect()
}

/// Random creates, updates and deletes of ConfigMaps `cm-0 .. cm-{keys}` in `api`'s namespace,
/// seeded; returns the number of writes the server accepted.
pub async fn churn_configmaps(
    api: &Api<k8s_openapi::api::core::v1::ConfigMap>,
    seed: u64,
    keys: usize,
    ops: usize,
) -> Result<usize> {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{DeleteParams, Patch, PatchParams};
    use rand::{Rng, SeedableRng};

    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut exists = vec![false; keys];
    for cm in api.list(&ListParams::default()).await?.items {
        if let Some(i) = cm
            .metadata
            .name
            .as_deref()
            .and_then(|n| n.strip_prefix("cm-"))
            .and_then(|n| n.parse::<usize>().ok())
            && i < keys
        {
            exists[i] = true;
        }
    }
    let mut writes = 0;
    for op in 0..ops {
        let i = rng.random_range(0..keys);
        let name = format!("cm-{i}");
        if !exists[i] {
            let mut data = BTreeMap::new();
            data.insert("v".to_owned(), op.to_string());
            let cm = ConfigMap {
                metadata: ObjectMeta { name: Some(name), ..Default::default() },
                data: Some(data),
                ..Default::default()
            };
            api.create(&PostParams::default(), &cm).await?;
            exists[i] = true;
        } else if rng.random_bool(0.7) {
            let patch = serde_json::json!({ "data": { "v": op.to_string() } });
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
        } else {
            api.delete(&name, &DeleteParams::default()).await?;
            exists[i] = false;
        }
        writes += 1;
    }
    Ok(writes)
}

/// Deletes the cluster-scoped object `name` (a namespace, a CRD) for cleanup, best effort: from a
/// fresh runtime on a helper thread, because clients belong to a runtime and the test's may be
/// shutting down (this runs from `Drop`).
pub fn delete_cluster_scoped<K>(config: &kube::Config, name: &str)
where
    K: kube::Resource<Scope = kube::core::ClusterResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    let (name, config) = (name.to_owned(), config.clone());
    let done = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
        rt.block_on(async move {
            let api: Api<K> = Api::all(kube::Client::try_from(config).ok()?);
            api.delete(&name, &Default::default()).await.ok()
        })
    });
    let _ = done.join();
}
