//! The candidate's side of coordinated leader election (KEP-4355): client-go's
//! `leaderelection.LeaseCandidate` (`leasecandidate.go`). It publishes a coordination.k8s.io/v1beta1
//! `LeaseCandidate` naming the Lease it contends for and its versions, and renews it (sets
//! `renewTime`) every five minutes and whenever the coordinator pings it (sets a `pingTime` newer
//! than `renewTime`), which is how the coordinator learns which candidates are alive before it
//! elects one.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1beta1::{LeaseCandidate as LeaseCandidateObject, LeaseCandidateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kcache_utils::{Clock, SystemClock};
use kube::api::{Api, ObjectMeta, PostParams};
use kube_runtime::{WatchStreamExt, watcher};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

use crate::config::LeaderElectionConfig;
use crate::record::micro_timestamp;

/// The only strategy kube-apiserver's coordinator elects with (client-go's
/// `v1.OldestEmulationVersion`): the candidate with the oldest emulation version leads, then the
/// one with the oldest binary version.
pub const OLDEST_EMULATION_VERSION: &str = "OldestEmulationVersion";

/// client-go's `requeueInterval`: a candidate renews itself this often without being pinged.
pub const CANDIDATE_RENEW_INTERVAL: Duration = Duration::from_secs(5 * 60);

/// The first wait after a failed renewal (client-go's workqueue rate limiter: 5 ms, doubling).
const BACKOFF_BASE: Duration = Duration::from_millis(5);
/// The longest wait after failed renewals (the rate limiter's 1000 s).
const BACKOFF_MAX: Duration = Duration::from_secs(1000);

/// What a [`LeaseCandidate`] publishes (the arguments of client-go's `NewCandidate`).
///
/// # Examples
///
/// ```
/// use kcache_leaderelection::{LeaderElectionConfig, LeaseCandidateConfig};
///
/// let election = LeaderElectionConfig::new("kube-system", "my-controller", "pod-a_4b1f").coordinated(true);
/// let candidate = LeaseCandidateConfig::for_election(&election, "1.36.3", "1.36.0");
/// assert_eq!((candidate.namespace.as_str(), candidate.name.as_str()), ("kube-system", "pod-a_4b1f"));
/// assert_eq!(candidate.lease_name, "my-controller");
/// assert_eq!(candidate.strategy, "OldestEmulationVersion");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaseCandidateConfig {
    /// Namespace of the LeaseCandidate: the Lease's (the coordinator looks for candidates in the
    /// Lease's namespace).
    pub namespace: String,
    /// Name of the LeaseCandidate: the identity the coordinator writes as the Lease's holder, so
    /// it must be the elector's [`identity`](LeaderElectionConfig::identity).
    pub name: String,
    /// The Lease this candidate contends for (`spec.leaseName`, immutable).
    pub lease_name: String,
    /// `spec.binaryVersion`: the version of this binary, semver without a leading `v`.
    pub binary_version: String,
    /// `spec.emulationVersion`: the version whose behaviour this binary provides, semver, at
    /// most `binary_version`; required with [`OLDEST_EMULATION_VERSION`].
    pub emulation_version: String,
    /// `spec.strategy`; [`OLDEST_EMULATION_VERSION`] by default.
    pub strategy: String,
    /// How often the candidate renews itself unpinged; [`CANDIDATE_RENEW_INTERVAL`] (5 min).
    pub renew_interval: Duration,
}

impl LeaseCandidateConfig {
    /// A candidate `name` in `namespace` for the Lease `lease_name` (in the same namespace).
    pub fn new(
        namespace: impl Into<String>,
        name: impl Into<String>,
        lease_name: impl Into<String>,
        binary_version: impl Into<String>,
        emulation_version: impl Into<String>,
    ) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
            lease_name: lease_name.into(),
            binary_version: binary_version.into(),
            emulation_version: emulation_version.into(),
            strategy: OLDEST_EMULATION_VERSION.into(),
            renew_interval: CANDIDATE_RENEW_INTERVAL,
        }
    }

    /// The candidate of an election's elector: the Lease's namespace and name, and the
    /// elector's identity as name.
    pub fn for_election(
        config: &LeaderElectionConfig,
        binary_version: impl Into<String>,
        emulation_version: impl Into<String>,
    ) -> Self {
        Self::new(
            config.lease_namespace.clone(),
            config.identity.clone(),
            config.lease_name.clone(),
            binary_version,
            emulation_version,
        )
    }

    /// Sets [`strategy`](Self::strategy).
    pub fn strategy(mut self, strategy: impl Into<String>) -> Self {
        self.strategy = strategy.into();
        self
    }

    /// Sets [`renew_interval`](Self::renew_interval).
    pub fn renew_interval(mut self, interval: Duration) -> Self {
        self.renew_interval = interval;
        self
    }
}

/// Publishes and renews one `LeaseCandidate` (client-go's `leaderelection.LeaseCandidate`), so
/// that the API server's coordinator can elect this process; pair it with a
/// [`LeaderElector`](crate::LeaderElector) whose config is
/// [`coordinated`](LeaderElectionConfig::coordinated).
///
/// [`run`](Self::run) creates the object if it does not exist, else sets its `renewTime`; then
/// does so again every [`renew_interval`](LeaseCandidateConfig::renew_interval) and whenever it
/// sees (on a watch of this one object) a `pingTime` newer than `renewTime`. A failed write is
/// tried again after 5 ms, doubling up to 1000 s.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> anyhow::Result<()> {
/// use std::time::Duration;
/// use kcache_leaderelection::{LeaderCallbacks, LeaderElectionConfig, LeaderElector, LeaseCandidate, LeaseCandidateConfig};
/// use tokio_util::sync::CancellationToken;
///
/// // kube-apiserver with CoordinatedLeaderElection on; here the test server and its coordinator.
/// let server = kcache_testserver::TestServer::builder().coordinated_leader_election(true).start().await;
/// let config = LeaderElectionConfig::new("default", "my-controller", "pod-a").coordinated(true);
/// let shutdown = CancellationToken::new();
///
/// let candidate = LeaseCandidate::new(server.in_memory_client(), LeaseCandidateConfig::for_election(&config, "1.36.3", "1.36.0"));
/// tokio::spawn({ let stop = shutdown.clone(); async move { candidate.run(stop).await } });
///
/// let elector = LeaderElector::new(server.in_memory_client(), config, LeaderCallbacks::new(|_leading| {}, || {}))?;
/// tokio::spawn({ let (e, stop) = (elector.clone(), shutdown.clone()); async move { e.run(stop).await } });
///
/// tokio::time::sleep(Duration::from_secs(5)).await;
/// assert!(elector.is_leader(), "the coordinator elected the only candidate");
/// shutdown.cancel();
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct LeaseCandidate {
    api: Api<LeaseCandidateObject>,
    config: LeaseCandidateConfig,
    clock: Arc<dyn Clock>,
}

impl LeaseCandidate {
    /// A candidate publishing `config` through `client`, on tokio's clock.
    pub fn new(client: kube::Client, config: LeaseCandidateConfig) -> Self {
        let api = Api::namespaced(client, &config.namespace);
        Self { api, config, clock: Arc::new(SystemClock) }
    }

    /// The clock `renewTime` is read from and the renewals wait on (a test shares one with the
    /// server's coordinator).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// The configuration.
    pub fn config(&self) -> &LeaseCandidateConfig {
        &self.config
    }

    /// Publishes and renews the candidate until `cancel` fires (client-go's `Run`). Errors are
    /// logged and the write tried again; the object is left in place when the run ends (as
    /// client-go's: the coordinator stops counting a candidate that no longer answers pings, and
    /// kube-apiserver deletes it after 30 minutes without a renewal).
    ///
    /// # Cancel safety
    ///
    /// Cancel with `cancel` or by dropping the future: both stop at once; a write under way may
    /// or may not have reached the server.
    pub async fn run(&self, cancel: CancellationToken) {
        let selector = format!("metadata.name={}", self.config.name);
        // kube-runtime's default backoff between failed list/watch attempts: without it a watcher
        // retries at once, a busy loop while the server is unreachable.
        let events =
            watcher(self.api.clone(), watcher::Config::default().fields(&selector)).default_backoff();
        let mut pings = std::pin::pin!(events.filter_map(|e| async move {
            let candidate = match e {
                Ok(watcher::Event::Apply(c) | watcher::Event::InitApply(c)) => c,
                _ => return None,
            };
            pinged(&candidate).then_some(())
        }));
        let mut failures = 0u32;
        loop {
            let wait = match self.ensure().await {
                Ok(()) => {
                    failures = 0;
                    self.config.renew_interval
                }
                Err(e) => {
                    failures = failures.saturating_add(1);
                    tracing::warn!(candidate = %self.describe(), error = %e, "ensuring lease candidate failed");
                    BACKOFF_BASE.saturating_mul(2u32.saturating_pow(failures - 1)).min(BACKOFF_MAX)
                }
            };
            tokio::select! {
                biased;
                () = cancel.cancelled() => return,
                () = self.clock.sleep(wait) => {}
                Some(()) = pings.next() => {
                    tracing::debug!(candidate = %self.describe(), "pinged by the coordinator");
                }
            }
        }
    }

    /// `namespace/name`.
    fn describe(&self) -> String {
        format!("{}/{}", self.config.namespace, self.config.name)
    }

    /// client-go's `ensureLease`: create the candidate if it does not exist, else set its
    /// `renewTime` to now. client-go reads the object from its informer's cache; this reads it
    /// from the server (one GET more per renewal, and never a stale resourceVersion).
    async fn ensure(&self) -> Result<(), kube::Error> {
        let now = MicroTime(micro_timestamp(self.clock.wall_now()));
        match self.api.get_opt(&self.config.name).await? {
            None => {
                let c = &self.config;
                let object = LeaseCandidateObject {
                    metadata: ObjectMeta {
                        name: Some(c.name.clone()),
                        namespace: Some(c.namespace.clone()),
                        ..Default::default()
                    },
                    spec: LeaseCandidateSpec {
                        lease_name: c.lease_name.clone(),
                        binary_version: c.binary_version.clone(),
                        emulation_version: (!c.emulation_version.is_empty())
                            .then(|| c.emulation_version.clone()),
                        strategy: c.strategy.clone(),
                        renew_time: Some(now),
                        ping_time: None,
                    },
                };
                self.api.create(&PostParams::default(), &object).await?;
                tracing::debug!(candidate = %self.describe(), "created lease candidate");
            }
            Some(mut object) => {
                object.spec.renew_time = Some(now);
                self.api.replace(&self.config.name, &PostParams::default(), &object).await?;
                tracing::trace!(candidate = %self.describe(), "renewed lease candidate");
            }
        }
        Ok(())
    }
}

/// The coordinator asked for a renewal: `pingTime` is after `renewTime` (client-go's update
/// handler).
fn pinged(c: &LeaseCandidateObject) -> bool {
    let spec = &c.spec;
    match (&spec.ping_time, &spec.renew_time) {
        (Some(ping), Some(renew)) => ping.0 > renew.0,
        (Some(_), None) => true,
        _ => false,
    }
}
