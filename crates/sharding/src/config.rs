//! What a member is: its group, identity, the hashed field, the strategy and the three durations
//! of leader election (client-go's defaults via controller-runtime's: 15 s, 10 s, 2 s).

use std::time::Duration;

use kcache_leaderelection::{
    DEFAULT_LEASE_DURATION, DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD, LeaderElectionConfig,
};
use kcache_shard_selector::ShardKey;

use crate::assignment::Strategy;
use crate::error::{Error, Result};

/// The label that marks a member Lease of a group: `sharding.kcache.io/group=<group>`.
pub const GROUP_LABEL: &str = "sharding.kcache.io/group";
/// The annotation in which a member publishes the hash ranges it serves or claims
/// ([`RangeSet::to_annotation`](crate::RangeSet::to_annotation)).
pub const SERVING_ANNOTATION: &str = "sharding.kcache.io/serving";

/// The configuration of one member of a sharding group.
///
/// Every replica of one controller uses the same namespace, group, key and strategy, and a
/// distinct identity (the pod name, say). Its member Lease is `<group>-<identity>` in the
/// namespace, labelled [`GROUP_LABEL`].
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use kcache_sharding::{ShardingConfig, Strategy};
///
/// let config = ShardingConfig::new("default", "my-controller", "pod-a");
/// assert_eq!(config.lease_duration, Duration::from_secs(15));
/// assert_eq!(config.lease_name(), "my-controller-pod-a");
/// assert_eq!(config.strategy, Strategy::ConsistentHashing { vnodes: 64 });
/// assert!(config.validate().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShardingConfig {
    /// Namespace of the member Leases.
    pub namespace: String,
    /// The group: one per sharded controller (the Leases' label value).
    pub group: String,
    /// This replica's identity, unique in the group.
    pub identity: String,
    /// The field objects are sharded by (`object.metadata.uid` by default).
    pub key: ShardKey,
    /// How the hash space is divided among live members.
    pub strategy: Strategy,
    /// How long the others wait, after they last saw this member's Lease change, before they
    /// take its ranges over (leader election's `LeaseDuration`).
    pub lease_duration: Duration,
    /// How long this member keeps serving without an acknowledged renewal, counted from when the
    /// last acknowledged renewal was sent (leader election's `RenewDeadline`).
    pub renew_deadline: Duration,
    /// Time between rounds (a renewal, then a list of the group): `RetryPeriod`.
    pub retry_period: Duration,
    /// Timeout of each request; `None` is `max(renew_deadline / 2, 1 s)`, as the elector's.
    pub request_timeout: Option<Duration>,
}

impl ShardingConfig {
    /// A member of `group` in `namespace` with leader election's default durations.
    pub fn new(namespace: impl Into<String>, group: impl Into<String>, identity: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            group: group.into(),
            identity: identity.into(),
            key: ShardKey::Uid,
            strategy: Strategy::default(),
            lease_duration: DEFAULT_LEASE_DURATION,
            renew_deadline: DEFAULT_RENEW_DEADLINE,
            retry_period: DEFAULT_RETRY_PERIOD,
            request_timeout: None,
        }
    }

    /// Sets the hashed field.
    pub fn key(mut self, key: ShardKey) -> Self {
        self.key = key;
        self
    }

    /// Sets the strategy.
    pub fn strategy(mut self, strategy: Strategy) -> Self {
        self.strategy = strategy;
        self
    }

    /// Sets leader election's three durations at once: how long the others wait before taking
    /// over (`LeaseDuration`), how long this member serves without an acknowledged renewal
    /// (`RenewDeadline`), and the time between rounds (`RetryPeriod`).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use kcache_sharding::ShardingConfig;
    ///
    /// let s = Duration::from_secs;
    /// let config = ShardingConfig::new("default", "ctl", "a").durations(s(4), s(2), Duration::from_millis(500));
    /// assert_eq!(config.renew_deadline, s(2));
    /// ```
    pub fn durations(
        mut self,
        lease_duration: Duration,
        renew_deadline: Duration,
        retry_period: Duration,
    ) -> Self {
        (self.lease_duration, self.renew_deadline, self.retry_period) =
            (lease_duration, renew_deadline, retry_period);
        self
    }

    /// Sets the request timeout.
    pub fn request_timeout(mut self, d: Duration) -> Self {
        self.request_timeout = Some(d);
        self
    }

    /// The member Lease's name: `<group>-<identity>`.
    pub fn lease_name(&self) -> String {
        format!("{}-{}", self.group, self.identity)
    }

    /// The leader election config with the same Lease and durations: its validation and request
    /// timeout are this member's.
    pub(crate) fn election(&self) -> LeaderElectionConfig {
        let mut c = LeaderElectionConfig::new(&self.namespace, self.lease_name(), &self.identity)
            .lease_duration(self.lease_duration)
            .renew_deadline(self.renew_deadline)
            .retry_period(self.retry_period);
        if let Some(t) = self.request_timeout {
            c = c.request_timeout(t);
        }
        c
    }

    /// Checks the configuration: leader election's rules for the durations and identity, and a
    /// group that makes a valid Lease name and label value.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] with the leader election's error, or [`Error::InvalidGroup`].
    pub fn validate(&self) -> Result<()> {
        self.election().validate().map_err(Error::Config)?;
        let name = self.lease_name();
        let valid_name = |s: &str, max: usize| {
            !s.is_empty()
                && s.len() <= max
                && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
                && s.as_bytes()[0].is_ascii_alphanumeric()
                && s.as_bytes()[s.len() - 1].is_ascii_alphanumeric()
        };
        if !valid_name(&self.group, 63) || !valid_name(&name, 253) {
            return Err(Error::InvalidGroup { group: self.group.clone() });
        }
        Ok(())
    }
}
