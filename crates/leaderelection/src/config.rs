//! What an election is: the lease, the identity, the three durations and the release policy
//! (client-go's `LeaderElectionConfig`), with controller-runtime's defaults and client-go's
//! validation.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::error::{Error, Result};

/// client-go's `JitterFactor`: acquire retries wait `retry_period * (1 + 1.2 * r)` for a random
/// `r` in `[0, 1)`, and the renew deadline must be longer than `1.2 * retry_period`.
pub const JITTER_FACTOR: f64 = 1.2;

/// controller-runtime's default lease duration (`pkg/manager/internal.go`).
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);
/// controller-runtime's default renew deadline.
pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// controller-runtime's default retry period.
pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_secs(2);

/// The configuration of one candidate in one election: client-go's `LeaderElectionConfig` plus
/// the lock's namespace, name and identity (its `LeaseLock` and `ResourceLockConfig`).
///
/// Every candidate of an election must use the same lease (namespace and name) and a distinct
/// identity; whether they are kcache or client-go processes makes no difference.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use kcache_leaderelection::LeaderElectionConfig;
///
/// let config = LeaderElectionConfig::new("kube-system", "my-controller", "pod-a_4b1f")
///     .release_on_cancel(true);
/// assert_eq!(config.lease_duration, Duration::from_secs(15)); // controller-runtime's defaults
/// assert_eq!(config.renew_deadline, Duration::from_secs(10));
/// assert_eq!(config.retry_period, Duration::from_secs(2));
/// assert_eq!(config.name, "my-controller"); // the metrics label defaults to the lease name
/// assert!(config.validate().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaderElectionConfig {
    /// Namespace of the Lease.
    pub lease_namespace: String,
    /// Name of the Lease.
    pub lease_name: String,
    /// This candidate's identity, written as `holderIdentity` while it leads. Unique per
    /// process: controller-runtime uses the hostname plus `_` and a UUID.
    pub identity: String,
    /// How long the others wait, after they last saw the lease change, before they take it
    /// over (client-go's `LeaseDuration`; written as whole seconds in `leaseDurationSeconds`).
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it gives up leading (client-go's
    /// `RenewDeadline`).
    pub renew_deadline: Duration,
    /// How long to wait between tries (client-go's `RetryPeriod`).
    pub retry_period: Duration,
    /// Release the lease when the run is cancelled while leading: write an empty holder and
    /// `leaseDurationSeconds: 1`, so that another candidate takes over at its next try instead
    /// of after a whole lease duration. Only safe when everything the lease guards has stopped
    /// before the run is cancelled (client-go's `ReleaseOnCancel`).
    pub release_on_cancel: bool,
    /// The `name` label of the metrics (client-go's `Name`); the lease name by default.
    pub name: String,
    /// A timeout for each request to the API server. `None` (the default) is
    /// controller-runtime's `max(renew_deadline / 2, 1 s)`, so that one hung request cannot use
    /// up the whole renew deadline.
    pub request_timeout: Option<Duration>,
    /// Labels set on the Lease whenever this candidate writes it (client-go's
    /// `resourcelock.NewWithLabels`); other labels are left as they are.
    pub labels: BTreeMap<String, String>,
    /// Coordinated leader election (KEP-4355, client-go's `Coordinated`): this candidate never
    /// takes the Lease itself. The API server's coordinator elects a leader among the
    /// [`LeaseCandidate`](crate::LeaseCandidate)s that name the Lease and writes its name as the
    /// holder; the candidate it names then renews the Lease as usual, and stops renewing (so
    /// leadership ends after the renew deadline) once the coordinator sets `preferredHolder` to
    /// ask it to step down. Run a [`LeaseCandidate`](crate::LeaseCandidate) with
    /// [`LeaseCandidateConfig::for_election`](crate::LeaseCandidateConfig::for_election) next
    /// to the elector, or no coordinator ever elects this candidate. Needs kube-apiserver with
    /// `--feature-gates=CoordinatedLeaderElection=true` and
    /// `--runtime-config=coordination.k8s.io/v1beta1=true`. Off by default.
    pub coordinated: bool,
}

impl LeaderElectionConfig {
    /// A candidate `identity` for the Lease `namespace/name`, with controller-runtime's
    /// durations (15 s, 10 s, 2 s), no release on cancel, and the lease name as metrics name.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>, identity: impl Into<String>) -> Self {
        let lease_name = name.into();
        Self {
            lease_namespace: namespace.into(),
            name: lease_name.clone(),
            lease_name,
            identity: identity.into(),
            lease_duration: DEFAULT_LEASE_DURATION,
            renew_deadline: DEFAULT_RENEW_DEADLINE,
            retry_period: DEFAULT_RETRY_PERIOD,
            release_on_cancel: false,
            request_timeout: None,
            labels: BTreeMap::new(),
            coordinated: false,
        }
    }

    /// Sets [`lease_duration`](Self::lease_duration).
    pub fn lease_duration(mut self, d: Duration) -> Self {
        self.lease_duration = d;
        self
    }

    /// Sets [`renew_deadline`](Self::renew_deadline).
    pub fn renew_deadline(mut self, d: Duration) -> Self {
        self.renew_deadline = d;
        self
    }

    /// Sets [`retry_period`](Self::retry_period).
    pub fn retry_period(mut self, d: Duration) -> Self {
        self.retry_period = d;
        self
    }

    /// Sets [`release_on_cancel`](Self::release_on_cancel).
    pub fn release_on_cancel(mut self, release: bool) -> Self {
        self.release_on_cancel = release;
        self
    }

    /// Sets [`name`](Self::name), the metrics label.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Sets [`request_timeout`](Self::request_timeout).
    pub fn request_timeout(mut self, d: Duration) -> Self {
        self.request_timeout = Some(d);
        self
    }

    /// Sets [`coordinated`](Self::coordinated).
    ///
    /// ```
    /// use kcache_leaderelection::LeaderElectionConfig;
    ///
    /// let config = LeaderElectionConfig::new("kube-system", "my-controller", "pod-a").coordinated(true);
    /// assert!(config.coordinated);
    /// ```
    pub fn coordinated(mut self, coordinated: bool) -> Self {
        self.coordinated = coordinated;
        self
    }

    /// Adds a label to [`labels`](Self::labels).
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// The timeout of each request: [`request_timeout`](Self::request_timeout) or
    /// `max(renew_deadline / 2, 1 s)`.
    pub fn effective_request_timeout(&self) -> Duration {
        self.request_timeout.unwrap_or_else(|| (self.renew_deadline / 2).max(Duration::from_secs(1)))
    }

    /// `leaseDurationSeconds` as client-go writes it: whole seconds, truncated
    /// (`int(LeaseDuration / time.Second)`).
    pub(crate) fn lease_duration_seconds(&self) -> i32 {
        i32::try_from(self.lease_duration.as_secs()).unwrap_or(i32::MAX)
    }

    /// client-go's `NewLeaderElector` checks, in its order, then this crate's two additions.
    ///
    /// # Errors
    ///
    /// The first check that fails, as an [`Error`] variant.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use kcache_leaderelection::{Error, LeaderElectionConfig};
    ///
    /// // 1.2 * 1 s is not below a 1 s renew deadline.
    /// let config = LeaderElectionConfig::new("ns", "lock", "me")
    ///     .renew_deadline(Duration::from_secs(1))
    ///     .retry_period(Duration::from_secs(1));
    /// assert!(matches!(config.validate(), Err(Error::RenewDeadlineNotGreaterThanJitteredRetryPeriod { .. })));
    /// ```
    pub fn validate(&self) -> Result<()> {
        let (ld, rd, rp) = (self.lease_duration, self.renew_deadline, self.retry_period);
        if ld <= rd {
            return Err(Error::LeaseDurationNotGreaterThanRenewDeadline {
                lease_duration: ld,
                renew_deadline: rd,
            });
        }
        // client-go compares with `time.Duration(JitterFactor * float64(RetryPeriod))`, whole
        // nanoseconds truncated; so do we.
        if rd <= Duration::from_nanos((JITTER_FACTOR * rp.as_nanos() as f64) as u64) {
            return Err(Error::RenewDeadlineNotGreaterThanJitteredRetryPeriod {
                renew_deadline: rd,
                retry_period: rp,
            });
        }
        if ld.is_zero() {
            return Err(Error::LeaseDurationNotPositive);
        }
        if rd.is_zero() {
            return Err(Error::RenewDeadlineNotPositive);
        }
        if rp.is_zero() {
            return Err(Error::RetryPeriodNotPositive);
        }
        if self.identity.is_empty() {
            return Err(Error::EmptyIdentity);
        }
        if self.lease_name.is_empty() {
            return Err(Error::EmptyLeaseName);
        }
        if ld < Duration::from_secs(1) {
            return Err(Error::LeaseDurationUnderOneSecond { lease_duration: ld });
        }
        Ok(())
    }
}
