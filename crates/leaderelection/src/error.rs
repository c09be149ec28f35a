//! The crate's one error type: configuration refused by validation (client-go's
//! `NewLeaderElector` checks, typed), a second concurrent run, and a failed health check.

use std::time::Duration;

/// What went wrong.
///
/// The validation variants are client-go's `NewLeaderElector` checks, in its order and with its
/// messages (lowercase, as Rust's), plus two that kube-apiserver would otherwise answer with a 422
/// on every try ([`EmptyLeaseName`](Error::EmptyLeaseName),
/// [`LeaseDurationUnderOneSecond`](Error::LeaseDurationUnderOneSecond)). Callbacks cannot be
/// missing in Rust, so client-go's "OnStartedLeading callback must not be nil" has no variant.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use kcache_leaderelection::{Error, LeaderElectionConfig};
///
/// let config = LeaderElectionConfig::new("kube-system", "my-controller", "pod-a")
///     .renew_deadline(Duration::from_secs(20)); // longer than the 15 s lease
/// assert!(matches!(config.validate(), Err(Error::LeaseDurationNotGreaterThanRenewDeadline { .. })));
/// assert_eq!(config.validate().unwrap_err().to_string(), "leaseDuration must be greater than renewDeadline");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `lease_duration <= renew_deadline`: the lease would expire for the others before this
    /// process gives up renewing it.
    #[error("leaseDuration must be greater than renewDeadline")]
    LeaseDurationNotGreaterThanRenewDeadline {
        /// The configured lease duration.
        lease_duration: Duration,
        /// The configured renew deadline.
        renew_deadline: Duration,
    },
    /// `renew_deadline <= 1.2 * retry_period`: not even one jittered retry fits in the deadline.
    #[error("renewDeadline must be greater than retryPeriod*JitterFactor")]
    RenewDeadlineNotGreaterThanJitteredRetryPeriod {
        /// The configured renew deadline.
        renew_deadline: Duration,
        /// The configured retry period.
        retry_period: Duration,
    },
    /// `lease_duration` is zero.
    #[error("leaseDuration must be greater than zero")]
    LeaseDurationNotPositive,
    /// `renew_deadline` is zero.
    #[error("renewDeadline must be greater than zero")]
    RenewDeadlineNotPositive,
    /// `retry_period` is zero.
    #[error("retryPeriod must be greater than zero")]
    RetryPeriodNotPositive,
    /// The identity is empty (client-go: "Lock identity is empty").
    #[error("lock identity is empty")]
    EmptyIdentity,
    /// The lease name is empty (not checked by client-go; the request would name no object).
    #[error("lease name is empty")]
    EmptyLeaseName,
    /// The lease duration is under one second. A Lease stores whole seconds
    /// (`leaseDurationSeconds`, truncated as client-go truncates), and kube-apiserver refuses 0
    /// (`must be greater than 0`), so such a candidate could never write the lock. Not checked by
    /// client-go.
    #[error("leaseDuration must be at least one second: a Lease stores whole seconds")]
    LeaseDurationUnderOneSecond {
        /// The configured lease duration.
        lease_duration: Duration,
    },
    /// [`LeaderElector::run`](crate::LeaderElector::run) was called while a run of the same
    /// elector had not returned.
    #[error("the leader elector is already running")]
    AlreadyRunning,
    /// The health check failed: this process believes it leads but has not renewed its lease for
    /// longer than the lease duration plus the tolerance (client-go's `Check`: "failed election
    /// to renew leadership on lease").
    #[error("failed election to renew leadership on lease {name}")]
    LeaseNotRenewed {
        /// The election's name (`LeaderElectionConfig::name`).
        name: String,
        /// How long ago the lease was last renewed (or its record last seen to change).
        since: Duration,
    },
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
