//! The running server: its [`Builder`], the accept loop, and the handles a test holds,
//! [`TestServer`] and [`Faults`].

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use kcache_utils::{Clock, SystemClock};
use parking_lot::Mutex;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::direct::Objects;
use crate::faults::{FaultId, Lasting, RequestFault, RequestMatch, WatchFault, WatchListSupport};
use crate::log::RequestLog;
use crate::resources::ResourceDef;
use crate::state::{MASTERS, Shared, User};
use crate::store::Store;

/// Default number of events kept for watches to resume from.
pub const DEFAULT_HISTORY_SIZE: usize = 10_000;
/// Default interval between BOOKMARK events on watches that allow them.
pub const DEFAULT_BOOKMARK_INTERVAL: Duration = Duration::from_secs(1);

/// Options for [`TestServer::builder`].
#[derive(Debug, Clone)]
pub struct Builder {
    port: u16,
    history_size: usize,
    bookmark_interval: Duration,
    strict_namespaces: bool,
    tokens: Vec<(String, User)>,
    anonymous_auth: bool,
    garbage_collection: bool,
    protobuf: bool,
    coordinated_leader_election: bool,
    sharded_list_and_watch: bool,
    clock: Arc<dyn Clock>,
}

impl Default for Builder {
    fn default() -> Self {
        Self {
            port: 0,
            history_size: DEFAULT_HISTORY_SIZE,
            bookmark_interval: DEFAULT_BOOKMARK_INTERVAL,
            strict_namespaces: false,
            tokens: Vec::new(),
            anonymous_auth: false,
            garbage_collection: true,
            protobuf: true,
            coordinated_leader_election: false,
            sharded_list_and_watch: false,
            clock: Arc::new(SystemClock),
        }
    }
}

impl Builder {
    /// Port on 127.0.0.1 to listen on; 0 (the default) picks a free one.
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// Number of events kept for watches to resume from (default [`DEFAULT_HISTORY_SIZE`]).
    pub fn history_size(mut self, size: usize) -> Self {
        self.history_size = size;
        self
    }

    /// Interval between BOOKMARK events (default [`DEFAULT_BOOKMARK_INTERVAL`]).
    pub fn bookmark_interval(mut self, interval: Duration) -> Self {
        self.bookmark_interval = interval;
        self
    }

    /// Behave like a cluster with the NamespaceLifecycle admission plugin: start with the
    /// namespaces `default`, `kube-system`, `kube-public` and `kube-node-lease`, and refuse to
    /// create a namespaced object in a namespace that does not exist (404
    /// `namespaces "<ns>" not found`). Off by default, so tests can use any namespace at once.
    pub fn strict_namespaces(mut self, strict: bool) -> Self {
        self.strict_namespaces = strict;
        self
    }

    /// Accepts `Authorization: Bearer <token>` as `user` in `groups` (kube-apiserver's static
    /// token file); call it once per user. Configuring any token turns authentication and
    /// authorization on, as in a real cluster:
    ///
    /// - a request without a known token gets 401 `Unauthorized` (see
    ///   [`Builder::anonymous_auth`]);
    /// - members of `system:masters` may do anything;
    /// - everyone else is authorized by the Roles, ClusterRoles, RoleBindings and
    ///   ClusterRoleBindings stored in the server, evaluated like kube-apiserver's RBAC
    ///   authorizer at each request (a grant takes effect at the next request), and denied
    ///   requests get kube-apiserver's 403 Forbidden Status; discovery, `/version` and the health
    ///   endpoints stay open to every authenticated user (the bootstrap `system:discovery` role).
    ///
    /// Without any token (the default) every request is allowed.
    /// [`TestServer::config`] and [`TestServer::client`] use the first `system:masters` token;
    /// [`TestServer::client_for_token`] gives a client for any token.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> anyhow::Result<()> {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache_testserver::TestServer;
    ///
    /// let server = TestServer::builder()
    ///     .token("admin-token", "admin", &["system:masters"])
    ///     .token("alice-token", "alice", &[])
    ///     .start()
    ///     .await;
    /// let as_admin: kube::Api<ConfigMap> = kube::Api::namespaced(server.client(), "e2e-1");
    /// assert!(as_admin.list(&Default::default()).await?.items.is_empty());
    ///
    /// let as_alice: kube::Api<ConfigMap> = kube::Api::namespaced(server.client_for_token("alice-token"), "e2e-1");
    /// let Err(kube::Error::Api(status)) = as_alice.list(&Default::default()).await else { panic!() };
    /// assert_eq!(status.code, 403);
    /// assert_eq!(
    ///     status.message,
    ///     "configmaps is forbidden: User \"alice\" cannot list resource \"configmaps\" in API group \"\" \
    ///      in the namespace \"e2e-1\""
    /// );
    /// # Ok(()) }
    /// ```
    pub fn token(mut self, token: impl Into<String>, user: impl Into<String>, groups: &[&str]) -> Self {
        let user = User { name: user.into(), groups: groups.iter().map(|g| g.to_string()).collect() };
        self.tokens.push((token.into(), user));
        self
    }

    /// With tokens configured, treat requests that carry no bearer token as the user
    /// `system:anonymous` in group `system:unauthenticated` (kube-apiserver's
    /// `--anonymous-auth=true`, its default) instead of answering 401: they are then authorized
    /// like any user, which by default allows only `/version`, `/healthz`, `/livez` and
    /// `/readyz` (the bootstrap `system:public-info-viewer` role), so resource requests get
    /// 403 `... User "system:anonymous" cannot ...`. A token that is present but unknown is
    /// always 401. Off by default (`--anonymous-auth=false`).
    pub fn anonymous_auth(mut self, enabled: bool) -> Self {
        self.anonymous_auth = enabled;
        self
    }

    /// Runs kube-controller-manager's garbage collector (on by default): an object whose owners
    /// (`metadata.ownerReferences`) are all gone is deleted, after its owner's DELETE with
    /// background propagation (the default) or when it names an owner that does not exist;
    /// an owner deleted with `propagationPolicy: Foreground` keeps its `foregroundDeletion`
    /// finalizer until its dependents are gone (those with `blockOwnerDeletion: true` are waited
    /// for); one deleted with `Orphan` keeps its `orphan` finalizer until its dependents no
    /// longer name it. Dependents disappear through ordinary DELETED watch events.
    ///
    /// `false` is a cluster without kube-controller-manager (envtest's default): DELETE still
    /// adds the `foregroundDeletion` or `orphan` finalizer, as kube-apiserver does, but nothing
    /// removes it, and dependents stay.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> anyhow::Result<()> {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kube::api::{Api, DeleteParams, PostParams};
    /// use kube::core::ObjectMeta;
    /// use kube::Resource;
    ///
    /// let server = kcache_testserver::TestServer::start().await;
    /// let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    /// let owner = cms.create(&PostParams::default(), &ConfigMap {
    ///     metadata: ObjectMeta { name: Some("owner".into()), ..Default::default() },
    ///     ..Default::default()
    /// }).await?;
    /// let dependent = ConfigMap {
    ///     metadata: ObjectMeta {
    ///         name: Some("dependent".into()),
    ///         owner_references: Some(vec![owner.controller_owner_ref(&()).unwrap()]),
    ///         ..Default::default()
    ///     },
    ///     ..Default::default()
    /// };
    /// cms.create(&PostParams::default(), &dependent).await?;
    /// cms.delete("owner", &DeleteParams::default()).await?;
    /// assert!(cms.get_opt("dependent").await?.is_none());
    /// # Ok(()) }
    /// ```
    pub fn garbage_collection(mut self, enabled: bool) -> Self {
        self.garbage_collection = enabled;
        self
    }

    /// Whether the reads of built-in kinds (get, list, watch) are answered in Kubernetes'
    /// protobuf to a client that prefers it (`Accept: application/vnd.kubernetes.protobuf,
    /// application/json`), as kube-apiserver answers them. On by default; `false` makes a
    /// server that speaks JSON only, as a proxy or an API server without protobuf does: such a
    /// client then gets JSON, and a client that accepts protobuf only gets 406.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use kcache_testserver::TestServer;
    ///
    /// let json_only = TestServer::builder().protobuf(false).start().await;
    /// # drop(json_only);
    /// # }
    /// ```
    pub fn protobuf(mut self, enabled: bool) -> Self {
        self.protobuf = enabled;
        self
    }

    /// The clock the server waits on and logs with: [`Faults::slow_responses`] delays answers on
    /// it, and [`RequestRecord::at`](crate::RequestRecord::at) reads it. Tokio's
    /// ([`SystemClock`]) by default; a [`FakeClock`](kcache_utils::FakeClock) shared with the
    /// clients under test puts the server's delays on their timeline.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use kcache_testserver::TestServer;
    /// use kcache_utils::FakeClock;
    ///
    /// let clock = FakeClock::new();
    /// let server = TestServer::builder().clock(clock.clone()).start().await;
    /// # drop(server);
    /// # }
    /// ```
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Serve coordinated leader election (KEP-4355) as kube-apiserver v1.36 does with
    /// `--feature-gates=CoordinatedLeaderElection=true` and
    /// `--runtime-config=coordination.k8s.io/v1beta1=true`; off by default, as there.
    ///
    /// - Leases keep `spec.strategy` and `spec.preferredHolder` as written (with the gate off
    ///   they are dropped);
    /// - coordination.k8s.io/v1beta1 `leasecandidates` are served (namespaced, validated as
    ///   kube-apiserver validates them, an update must carry a resourceVersion);
    /// - a coordinator runs in the server, kube-apiserver's `leader-election-controller`: for
    ///   each Lease the candidates name, it pings the candidates (`pingTime`), elects the one with
    ///   the oldest emulation version, then binary version, then creation time, then name, and
    ///   writes it as the Lease's holder (`leaseDurationSeconds: 5`, strategy
    ///   `OldestEmulationVersion`), or sets `preferredHolder` when another candidate holds a valid
    ///   Lease. Its times come from [`Builder::clock`]'s wall clock, so a test sharing one
    ///   clock with its candidates is deterministic.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> anyhow::Result<()> {
    /// use k8s_openapi::api::coordination::v1beta1::LeaseCandidate;
    /// use kcache_testserver::TestServer;
    ///
    /// let server = TestServer::builder().coordinated_leader_election(true).start().await;
    /// let candidates: kube::Api<LeaseCandidate> = kube::Api::namespaced(server.in_memory_client(), "default");
    /// let candidate: LeaseCandidate = serde_json::from_value(serde_json::json!({
    ///     "metadata": {"name": "pod-a"},
    ///     "spec": {"leaseName": "my-controller", "binaryVersion": "1.36.3", "emulationVersion": "1.36.3",
    ///              "strategy": "OldestEmulationVersion", "renewTime": "2026-12-07T10:11:12.123456Z"},
    /// }))?;
    /// candidates.create(&Default::default(), &candidate).await?;
    /// # Ok(()) }
    /// ```
    pub fn coordinated_leader_election(mut self, enabled: bool) -> Self {
        self.coordinated_leader_election = enabled;
        self
    }

    /// Serve server-side sharded list and watch (KEP-5866) as kube-apiserver v1.36.3 does with
    /// `--feature-gates=ShardedListAndWatch=true`; off by default, as there (the gate is alpha),
    /// like [`coordinated_leader_election`](Self::coordinated_leader_election). Switchable later
    /// with [`TestServer::set_sharded_list_and_watch`].
    ///
    /// On, the `shardSelector` parameter (`shardRange(object.metadata.uid, '0x..', '0x..') ||
    /// ...`, see kcache-shard-selector) filters:
    /// - a LIST, JSON, protobuf or PartialObjectMetadata, to the objects whose uid or namespace
    ///   hashes (FNV-1a) into a range; the JSON and protobuf lists carry `metadata.shardInfo:
    ///   {"selector": <the selector's canonical form>}`, the PartialObjectMetadataList does not
    ///   (kube-apiserver's conversion drops it); `remainingItemCount` stays as without the
    ///   selector (kube-apiserver counts the unfiltered items);
    /// - a WATCH to the in-range events (uid and namespace never change, so an object never
    ///   moves in or out); a watch-list's initial events likewise, its end bookmark has no
    ///   shardInfo;
    /// - a DELETECOLLECTION to the in-range objects.
    ///
    /// A malformed selector is a 500 Status without a reason, `invalid shard selector: <the
    /// parser's message>`. Off, the parameter is ignored, even malformed, and no list carries
    /// `shardInfo`: what a client sees from a server without the gate, or older.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> anyhow::Result<()> {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache_testserver::TestServer;
    ///
    /// let server = TestServer::builder().sharded_list_and_watch(true).start().await;
    /// let cms: kube::Api<ConfigMap> = kube::Api::namespaced(server.in_memory_client(), "default");
    /// let half = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')";
    /// let url = format!("/api/v1/namespaces/default/configmaps?shardSelector={}", half.replace(' ', "%20"));
    /// let list: serde_json::Value = server
    ///     .in_memory_client()
    ///     .request(http::Request::get(url).body(Vec::new())?)
    ///     .await?;
    /// assert_eq!(list["metadata"]["shardInfo"]["selector"], half);
    /// # let _ = cms;
    /// # Ok(()) }
    /// ```
    pub fn sharded_list_and_watch(mut self, enabled: bool) -> Self {
        self.sharded_list_and_watch = enabled;
        self
    }

    /// Binds and starts serving on the current tokio runtime.
    ///
    /// # Errors
    ///
    /// When the port cannot be bound.
    pub async fn try_start(self) -> std::io::Result<TestServer> {
        let listener = TcpListener::bind(("127.0.0.1", self.port)).await?;
        let addr = listener.local_addr()?;
        let shutdown = CancellationToken::new();
        let shared = Arc::new(Shared {
            store: Mutex::new(Store::new(self.history_size, self.garbage_collection)),
            strict_namespaces: self.strict_namespaces,
            rv_tx: watch::channel(1).0,
            faults: Mutex::new(Default::default()),
            log: Arc::default(),
            bookmark_interval: Mutex::new(self.bookmark_interval),
            generation: Mutex::new(shutdown.child_token()),
            shutdown: shutdown.clone(),
            addr,
            connections: AtomicU64::new(0),
            open: Mutex::default(),
            tokens: self.tokens,
            anonymous_auth: self.anonymous_auth,
            protobuf: self.protobuf,
            coordinated_leader_election: self.coordinated_leader_election,
            sharded_list_and_watch: AtomicBool::new(self.sharded_list_and_watch),
            clock: self.clock,
        });
        if self.coordinated_leader_election {
            shared.store.lock().register(crate::coordinator::lease_candidates());
            tokio::spawn(crate::coordinator::run(shared.clone()));
        }
        if self.strict_namespaces {
            let objects = Objects { shared: shared.clone() };
            let defaults = ["default", "kube-system", "kube-public", "kube-node-lease"].map(|name| {
                serde_json::json!({"metadata": {"name": name}, "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
            });
            objects.bulk_insert("", "v1", "namespaces", defaults);
        }
        if !shared.tokens.is_empty() {
            let objects = Objects { shared: shared.clone() };
            let (roles, bindings) = crate::auth::bootstrap_policy();
            objects.bulk_insert(crate::resources::RBAC_GROUP, "v1", "clusterroles", roles);
            objects.bulk_insert(crate::resources::RBAC_GROUP, "v1", "clusterrolebindings", bindings);
        }
        tokio::spawn(accept_loop(listener, shared.clone()));
        Ok(TestServer { shared })
    }

    /// Binds and starts serving on the current tokio runtime.
    ///
    /// # Panics
    ///
    /// When the port cannot be bound (use [`Builder::try_start`] to handle that).
    pub async fn start(self) -> TestServer {
        match self.try_start().await {
            Ok(s) => s,
            Err(e) => panic!("kcache-testserver: cannot bind 127.0.0.1: {e}"),
        }
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let accepted = tokio::select! {
            _ = shared.shutdown.cancelled() => return,
            a = listener.accept() => a,
        };
        let Ok((stream, _)) = accepted else { continue };
        let _ = stream.set_nodelay(true);
        crate::connection::serve_connection(shared.clone(), stream);
    }
}

/// A running in-process Kubernetes API server. Dropping it stops the server and closes every
/// connection.
///
/// # Examples
///
/// ```no_run
/// # async fn demo() -> anyhow::Result<()> {
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache_testserver::TestServer;
///
/// let server = TestServer::start().await;
/// let cms: kube::Api<ConfigMap> = kube::Api::default_namespaced(server.client());
/// assert!(cms.list(&Default::default()).await?.items.is_empty());
/// # Ok(()) }
/// ```
pub struct TestServer {
    shared: Arc<Shared>,
}

impl fmt::Debug for TestServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestServer").field("addr", &self.shared.addr).finish()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.shared.shutdown.cancel();
    }
}

impl TestServer {
    /// Starts a server on a random port of 127.0.0.1 with default options.
    ///
    /// # Panics
    ///
    /// When no port can be bound.
    pub async fn start() -> TestServer {
        Builder::default().start().await
    }

    /// Options: port, history size, bookmark interval.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// The address served.
    pub fn addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.shared.addr)
    }

    /// A kube config for this server: default namespace `default`, kube's automatic retry of
    /// 429/503/504 turned off so tests see exactly what the server answered, and no credentials,
    /// or, when [`Builder::token`] configured tokens, the first token of a `system:masters`
    /// user (none if there is no such token).
    pub fn config(&self) -> kube::Config {
        let admin = self.shared.tokens.iter().find(|(_, u)| u.groups.iter().any(|g| g == MASTERS));
        match admin {
            Some((token, _)) => self.config_for_token(token),
            None => self.anonymous_config(),
        }
    }

    fn anonymous_config(&self) -> kube::Config {
        let uri = self.url().parse().unwrap_or_default();
        let mut config = kube::Config::new(uri);
        config.default_namespace = "default".into();
        config.default_retry = false;
        config
    }

    /// [`TestServer::config`] with `token` as the bearer token, whatever it is (an unknown
    /// token is useful too: it gets 401).
    ///
    /// # Examples
    ///
    /// ```
    /// # async fn demo() {
    /// let server = kcache_testserver::TestServer::builder().token("t", "alice", &[]).start().await;
    /// let config = server.config_for_token("t");
    /// assert!(config.auth_info.token.is_some());
    /// # }
    /// ```
    pub fn config_for_token(&self, token: &str) -> kube::Config {
        let mut config = self.anonymous_config();
        config.auth_info.token = Some(token.to_string().into());
        config
    }

    /// A kube client sending `token` (see [`TestServer::config_for_token`]).
    ///
    /// # Panics
    ///
    /// As [`TestServer::client`].
    pub fn client_for_token(&self, token: &str) -> kube::Client {
        match kube::Client::try_from(self.config_for_token(token)) {
            Ok(c) => c,
            Err(e) => panic!("kcache-testserver: kube client: {e}"),
        }
    }

    /// A kube client for this server (see [`TestServer::config`]).
    ///
    /// # Panics
    ///
    /// If kube cannot build a client from the plain-HTTP config, which does not happen with the
    /// workspace's kube features.
    pub fn client(&self) -> kube::Client {
        match kube::Client::try_from(self.config()) {
            Ok(c) => c,
            Err(e) => panic!("kcache-testserver: kube client: {e}"),
        }
    }

    /// A new connection to the server that is a pipe in memory rather than a TCP socket, served
    /// exactly like an accepted one (it counts in [`RequestRecord::connection`](crate::RequestRecord::connection),
    /// and [`Faults::restart`] drops it).
    pub fn connect_in_memory(&self) -> tokio::io::DuplexStream {
        crate::memory::connect(&self.shared)
    }

    /// A kube client whose requests go over in-memory connections ([`TestServer::connect_in_memory`];
    /// kept alive and reused like a TCP client's), authenticated as [`TestServer::client`] is.
    ///
    /// For tests on tokio's paused clock: over TCP the runtime idles while the kernel moves a
    /// request's bytes, and the paused clock then jumps to the next timer (a client's timeout can
    /// fire before the server has answered); over a pipe the runtime idles only when every task
    /// waits for time, so such a test is deterministic and takes no real time.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> anyhow::Result<()> {
    /// use std::time::Duration;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache_testserver::{RequestMatch, TestServer};
    ///
    /// let server = TestServer::start().await;
    /// server.faults().slow_responses(RequestMatch::all(), Duration::from_secs(5));
    /// let cms: kube::Api<ConfigMap> = kube::Api::default_namespaced(server.in_memory_client());
    /// let start = tokio::time::Instant::now();
    /// cms.list(&Default::default()).await?;
    /// assert_eq!(start.elapsed(), Duration::from_secs(5)); // exactly: the paused clock
    /// # Ok(()) }
    /// ```
    pub fn in_memory_client(&self) -> kube::Client {
        let admin = self.shared.tokens.iter().find(|(_, u)| u.groups.iter().any(|g| g == MASTERS));
        self.in_memory_client_with(admin.map(|(t, _)| t.clone()))
    }

    /// [`TestServer::in_memory_client`] sending `token` as its bearer token.
    pub fn in_memory_client_for_token(&self, token: &str) -> kube::Client {
        self.in_memory_client_with(Some(token.to_string()))
    }

    fn in_memory_client_with(&self, token: Option<String>) -> kube::Client {
        kube::Client::new(
            crate::memory::InMemory { shared: self.shared.clone(), token, idle: Arc::default() },
            "default",
        )
    }

    /// The fault-injection handle.
    pub fn faults(&self) -> Faults {
        Faults { shared: self.shared.clone() }
    }

    /// The request log.
    pub fn request_log(&self) -> RequestLog {
        RequestLog { records: self.shared.log.clone() }
    }

    /// Serves another resource without a CustomResourceDefinition object (creating a CRD through
    /// the API does this and more: see the crate docs); replaces the definition if the
    /// group/version/resource is already served. Discovery lists it at once.
    pub fn register(&self, def: ResourceDef) {
        self.shared.store.lock().register(def);
    }

    /// The current resourceVersion (that of the last write).
    pub fn resource_version(&self) -> u64 {
        self.shared.store.lock().rv
    }

    /// Drops the event history now (see [`Faults::compact`]).
    pub fn compact(&self) {
        self.shared.compact();
    }

    /// Restarts the server's HTTP side, keeping state (see [`Faults::restart`]).
    pub fn restart(&self) {
        self.shared.restart();
    }

    /// The number of requests being served right now, open watches included: each counts from
    /// the moment its head was read until its response has been handed to the connection
    /// (a watch: until its stream ends). A test can wait for a request to be under way, to
    /// restart the server in the middle of it.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let server = kcache_testserver::TestServer::start().await;
    /// assert_eq!(server.requests_in_flight(), 0);
    /// # }
    /// ```
    pub fn requests_in_flight(&self) -> usize {
        self.shared.open.lock().values().map(|c| c.in_flight.load(Ordering::Acquire)).sum()
    }

    /// Changes the event history size (trimming it if smaller).
    pub fn set_history_size(&self, size: usize) {
        self.shared.store.lock().set_history_cap(size);
    }

    /// Changes the bookmark interval for watches opened from now on.
    pub fn set_bookmark_interval(&self, interval: Duration) {
        *self.shared.bookmark_interval.lock() = interval;
    }

    /// Turns the `ShardedListAndWatch` gate on or off for requests from now on (see
    /// [`Builder::sharded_list_and_watch`]): a server upgraded or downgraded in place. Watches
    /// already open keep the selector they were opened with.
    pub fn set_sharded_list_and_watch(&self, enabled: bool) {
        self.shared.sharded_list_and_watch.store(enabled, Ordering::Relaxed);
    }

    /// Direct access to objects, bypassing HTTP (for fixtures and benchmarks).
    pub fn objects(&self) -> Objects {
        Objects { shared: self.shared.clone() }
    }
}

/// A handle that breaks the running server on purpose. Cheap to clone; every method takes
/// effect for requests that arrive afterwards.
///
/// # Examples
///
/// ```no_run
/// # async fn demo() {
/// use kcache_testserver::{RequestFault, TestServer, Verb, WatchFault};
///
/// let server = TestServer::start().await;
/// let faults = server.faults();
/// faults.fail_requests(2, RequestFault::internal_error().verb(Verb::List));
/// faults.next_watch(WatchFault::CloseAfter(3));
/// faults.compact();
/// # }
/// ```
#[derive(Clone)]
pub struct Faults {
    pub(crate) shared: Arc<Shared>,
}

impl fmt::Debug for Faults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Faults").field("state", &*self.shared.faults.lock()).finish()
    }
}

impl Faults {
    /// Answers the next `count` requests that match `fault` (verb, path and user filters) with
    /// its Status instead of serving them.
    pub fn fail_requests(&self, count: usize, fault: RequestFault) {
        self.shared.faults.lock().add_request_fault(fault, count);
    }

    /// [`Faults::fail_requests`] that [`Faults::remove`] can end before its count is used up: a
    /// conflict storm that lasts a while rather than a number of requests.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use kcache_testserver::{RequestFault, TestServer, Verb};
    ///
    /// let server = TestServer::start().await;
    /// let storm = server
    ///     .faults()
    ///     .fail_requests_until_removed(1000, RequestFault::conflict("leases.coordination.k8s.io", "lock").verb(Verb::Update));
    /// // ... some time later
    /// server.faults().remove(storm);
    /// # }
    /// ```
    pub fn fail_requests_until_removed(&self, count: usize, fault: RequestFault) -> FaultId {
        self.shared.faults.lock().add_request_fault(fault, count)
    }

    /// Applies `fault` to the next watch opened (one-shot; several calls queue up, one per watch).
    pub fn next_watch(&self, fault: WatchFault) {
        self.shared.faults.lock().watch_once.push_back(fault);
    }

    /// Applies `fault` to every watch opened from now on, until [`Faults::clear`].
    pub fn all_watches(&self, fault: WatchFault) {
        self.shared.faults.lock().watch_always.push(fault);
    }

    /// Imitates a server of another Kubernetes version with respect to watch-list.
    pub fn set_watch_list_support(&self, support: WatchListSupport) {
        self.shared.faults.lock().watch_list = support;
    }

    /// Removes every request, watch and lasting fault (requests held by
    /// [`Faults::unreachable`] are let go: their connections are dropped) and restores
    /// watch-list support.
    pub fn clear(&self) {
        let mut f = self.shared.faults.lock();
        f.requests.clear();
        f.watch_once.clear();
        f.watch_always.clear();
        f.watch_list = WatchListSupport::default();
        f.remove_lasting(None);
    }

    /// Makes the server unreachable for matching requests until [`Faults::remove`]: they get no
    /// answer and have no effect (as if lost on the way), and when the fault is removed their
    /// connections are dropped, so a client that has not given up by then sees a connection
    /// error. A client with a request timeout gives up before: a network partition between it
    /// and the server. Narrow it with a [`RequestMatch`], by user for one client among several.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// use std::time::Duration;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kcache_testserver::{RequestMatch, TestServer};
    ///
    /// let server = TestServer::start().await;
    /// let cms: kube::Api<ConfigMap> = kube::Api::default_namespaced(server.in_memory_client());
    /// let partition = server.faults().unreachable(RequestMatch::all());
    /// let lp = Default::default();
    /// let list = tokio::time::timeout(Duration::from_secs(10), cms.list(&lp)).await;
    /// assert!(list.is_err(), "no answer: the client's own timeout ends the wait");
    /// server.faults().remove(partition);
    /// assert!(cms.list(&Default::default()).await.is_ok());
    /// # }
    /// ```
    pub fn unreachable(&self, requests: RequestMatch) -> FaultId {
        self.shared.faults.lock().add_lasting(Lasting::Unreachable(requests))
    }

    /// Answers matching requests `delay` after serving them, on the server's clock (see
    /// [`Builder::clock`]): the work is done at once (a write is stored and seen by watches), only
    /// the answer is late, as from an overloaded server or a slow network. Delays of overlapping
    /// faults add up. Lasts until [`Faults::remove`].
    pub fn slow_responses(&self, requests: RequestMatch, delay: Duration) -> FaultId {
        self.shared.faults.lock().add_lasting(Lasting::Slow(requests, delay))
    }

    /// Ends a fault from [`Faults::unreachable`], [`Faults::slow_responses`] or
    /// [`Faults::fail_requests_until_removed`] (what is left of its count); requests an unreachable fault held
    /// unanswered have their connections dropped now. Removing one that is gone does nothing.
    pub fn remove(&self, fault: FaultId) {
        self.shared.faults.lock().remove_lasting(Some(fault));
    }

    /// Drops the event history now: watches from any older resourceVersion get 410 Expired, and
    /// continue tokens from before become too old.
    pub fn compact(&self) {
        self.shared.compact();
    }

    /// Restarts the server's HTTP side while keeping the listening socket and all state, as a
    /// graceful kube-apiserver restart behind a stable address looks to its clients:
    ///
    /// - a request being served is finished, its response carries `Connection: close`, and then
    ///   its connection closes (Go's `http.Server.Shutdown` stops keep-alives while shutting
    ///   down; over HTTP/2, kube-apiserver's usual protocol, the same is a GOAWAY frame, and this
    ///   server speaks only HTTP/1.1);
    /// - watches are cut without a clean end of stream: kube-apiserver does not wait for them by
    ///   default (`--shutdown-watch-termination-grace-period=0`), so they end with the old
    ///   process;
    /// - an idle keep-alive connection answers its next request, if any comes, with
    ///   `Connection: close`, then closes. kube-apiserver closes idle connections at once, and
    ///   during the seconds a real restart takes a client's pool notices; this server restarts
    ///   in no time, and closing the socket under a client that is about to reuse it would fail
    ///   that request with `IncompleteMessage` (as it did before), where on a real restart the
    ///   request goes out on a new connection and succeeds;
    /// - new connections are accepted at once (the restarted server).
    pub fn restart(&self) {
        self.shared.restart();
    }
}
