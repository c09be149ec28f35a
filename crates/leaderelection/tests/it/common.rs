//! Helpers: a test server with one token per candidate, candidates that record what happened to
//! them (on the paused clock), and reading the lease as stored.

#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kcache_leaderelection::{LeaderCallbacks, LeaderElectionConfig, LeaderElector, Outcome};
use kcache_testserver::{TestServer, Verb};
use kube::api::{Api, PostParams};
use parking_lot::Mutex;
use serde_json::Value;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Namespace and name of the lease every test contends for.
pub const NS: &str = "kube-system";
pub const LEASE: &str = "my-controller";

/// The identities tests use; each has a bearer token of the same name (user = identity), so
/// faults can single one out.
pub const IDS: [&str; 4] = ["a", "b", "c", "admin"];

/// A server whose users are the candidates (all in `system:masters`) plus `admin`.
pub async fn server() -> TestServer {
    let mut b = TestServer::builder().token("admin", "admin", &["system:masters"]);
    for id in IDS {
        b = b.token(id, id, &["system:masters"]);
    }
    b.start().await
}

/// controller-runtime's durations: 15 s, 10 s, 2 s.
pub fn config(identity: &str) -> LeaderElectionConfig {
    LeaderElectionConfig::new(NS, LEASE, identity)
}

/// What happened to a candidate, in order, with the paused clock's time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Started,
    /// The token `on_started_leading` got was cancelled; `holder` is who the stored lease named
    /// at that moment.
    TokenCancelled {
        holder: String,
    },
    Stopped,
    NewLeader(String),
}

/// A running candidate.
pub struct Candidate {
    pub elector: LeaderElector,
    pub events: Arc<Mutex<Vec<(Instant, Event)>>>,
    pub stop: CancellationToken,
    pub run: Option<JoinHandle<kcache_leaderelection::Result<Outcome>>>,
}

impl Candidate {
    /// Builds (with jitter seed 1) and starts a candidate with `config`, speaking as the user of
    /// its identity.
    pub fn start(server: &TestServer, config: LeaderElectionConfig) -> Candidate {
        Self::start_with(server, config, |b| b)
    }

    /// As `start`, with extra builder options.
    pub fn start_with(
        server: &TestServer,
        config: LeaderElectionConfig,
        options: impl FnOnce(kcache_leaderelection::Builder) -> kcache_leaderelection::Builder,
    ) -> Candidate {
        let c = Self::build(server, config, options);
        c.spawn()
    }

    /// Builds without starting.
    pub fn build(
        server: &TestServer,
        config: LeaderElectionConfig,
        options: impl FnOnce(kcache_leaderelection::Builder) -> kcache_leaderelection::Builder,
    ) -> Candidate {
        let events: Arc<Mutex<Vec<(Instant, Event)>>> = Arc::default();
        let client = server.in_memory_client_for_token(&config.identity);
        let objects = server.objects();
        let (e1, e2, e3) = (events.clone(), events.clone(), events.clone());
        let callbacks = LeaderCallbacks::new(
            move |leading: CancellationToken| {
                e1.lock().push((Instant::now(), Event::Started));
                let (events, objects) = (e1.clone(), objects.clone());
                tokio::spawn(async move {
                    leading.cancelled().await;
                    events
                        .lock()
                        .push((Instant::now(), Event::TokenCancelled { holder: holder_of(&objects) }));
                });
            },
            move || e2.lock().push((Instant::now(), Event::Stopped)),
        )
        .on_new_leader(move |id| e3.lock().push((Instant::now(), Event::NewLeader(id.to_string()))));
        let builder = LeaderElector::builder(client, config, callbacks).jitter_seed(1);
        let elector = options(builder).build().expect("valid config");
        Candidate { elector, events, stop: CancellationToken::new(), run: None }
    }

    /// Starts the run.
    pub fn spawn(mut self) -> Candidate {
        let (elector, stop) = (self.elector.clone(), self.stop.clone());
        self.run = Some(tokio::spawn(async move { elector.run(stop).await }));
        self
    }

    /// When the candidate started leading (the first time), if it did.
    pub fn started_at(&self) -> Option<Instant> {
        self.events.lock().iter().find(|(_, e)| *e == Event::Started).map(|(t, _)| *t)
    }

    /// When its leading token was cancelled, if it was.
    pub fn token_cancelled_at(&self) -> Option<Instant> {
        self.events.lock().iter().find(|(_, e)| matches!(e, Event::TokenCancelled { .. })).map(|(t, _)| *t)
    }

    /// The events without times.
    pub fn event_kinds(&self) -> Vec<Event> {
        self.events.lock().iter().map(|(_, e)| e.clone()).collect()
    }

    /// Cancels the run and waits for its outcome.
    pub async fn stop(&mut self) -> Outcome {
        self.stop.cancel();
        self.join().await
    }

    /// Waits for the run to end by itself.
    pub async fn join(&mut self) -> Outcome {
        self.run.take().expect("running").await.expect("run task").expect("run")
    }
}

/// Lets `d` of paused time pass (the runtime runs everything due meanwhile).
pub async fn pass(d: Duration) {
    tokio::time::sleep(d).await;
}

/// The stored lease as JSON (`Value::Null` if absent).
pub fn stored(server: &TestServer) -> Value {
    stored_from(&server.objects())
}

fn stored_from(objects: &kcache_testserver::Objects) -> Value {
    objects.get("coordination.k8s.io", "v1", "leases", NS, LEASE).unwrap_or(Value::Null)
}

fn holder_of(objects: &kcache_testserver::Objects) -> String {
    stored_from(objects)["spec"]["holderIdentity"].as_str().unwrap_or_default().to_string()
}

/// The stored lease's holder ("" if none or no lease).
pub fn holder(server: &TestServer) -> String {
    holder_of(&server.objects())
}

/// The lease API as the admin.
pub fn leases(server: &TestServer) -> Api<Lease> {
    Api::namespaced(server.in_memory_client(), NS)
}

/// Creates the lease with `spec` (JSON) as the admin.
pub async fn create_lease(server: &TestServer, spec: Value) -> Lease {
    let lease: Lease = serde_json::from_value(
        serde_json::json!({"metadata": {"name": LEASE, "namespace": NS}, "spec": spec}),
    )
    .unwrap();
    leases(server).create(&PostParams::default(), &lease).await.unwrap()
}

/// Lease requests by `user`, as `(verb, status)` in order.
pub fn lease_ops(server: &TestServer, user: &str) -> Vec<(Verb, u16)> {
    server
        .request_log()
        .filter(|r| r.user.as_deref() == Some(user) && r.path.contains("/leases"))
        .iter()
        .map(|r| (r.verb, r.status))
        .collect()
}

/// Shorthand for the verbs of `lease_ops`.
pub fn lease_verbs(server: &TestServer, user: &str) -> Vec<&'static str> {
    lease_ops(server, user).into_iter().map(|(v, _)| v.as_str()).collect()
}

/// tokio's (paused) clock with a wall clock that moves with it: `wall_now` is the wall time at
/// creation plus the tokio time passed since. The coordinator of the test server compares the
/// `renewTime`s and `pingTime`s candidates write with its own wall clock, so both sides read this
/// one and a paused test stays deterministic (the system's wall clock does not move with paused
/// time).
#[derive(Debug, Clone, Copy)]
pub struct PausedClock {
    start: Instant,
    wall_start: std::time::SystemTime,
}

impl PausedClock {
    pub fn new() -> Self {
        Self { start: Instant::now(), wall_start: std::time::SystemTime::now() }
    }
}

impl kcache_utils::Clock for PausedClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn sleep(&self, duration: Duration) -> kcache_utils::Sleep {
        Box::pin(tokio::time::sleep(duration))
    }

    fn wall_now(&self) -> std::time::SystemTime {
        self.wall_start + (Instant::now() - self.start)
    }
}

/// A server as `server`, with coordinated leader election (the `CoordinatedLeaderElection` gate,
/// `leasecandidates` and the coordinator) on `clock`.
pub async fn coordinated_server(clock: PausedClock) -> TestServer {
    let mut b = TestServer::builder()
        .token("admin", "admin", &["system:masters"])
        .coordinated_leader_election(true)
        .clock(clock);
    for id in IDS {
        b = b.token(id, id, &["system:masters"]);
    }
    b.start().await
}

/// Starts `identity`'s LeaseCandidate for the lease (binary version `binary`, emulation version
/// `emulation`) on `clock`; it runs until `stop` fires.
pub fn start_lease_candidate(
    server: &TestServer,
    clock: PausedClock,
    identity: &str,
    binary: &str,
    emulation: &str,
    stop: &CancellationToken,
) -> JoinHandle<()> {
    let config = kcache_leaderelection::LeaseCandidateConfig::for_election(
        &common_config(identity).coordinated(true),
        binary,
        emulation,
    );
    let candidate =
        kcache_leaderelection::LeaseCandidate::new(server.in_memory_client_for_token(identity), config)
            .clock(clock);
    let stop = stop.clone();
    tokio::spawn(async move { candidate.run(stop).await })
}

fn common_config(identity: &str) -> LeaderElectionConfig {
    config(identity)
}

/// The stored LeaseCandidate of `identity` as JSON (`Value::Null` if absent).
pub fn stored_candidate(server: &TestServer, identity: &str) -> Value {
    server
        .objects()
        .get("coordination.k8s.io", "v1beta1", "leasecandidates", NS, identity)
        .unwrap_or(Value::Null)
}
