//! The election record client-go keeps in a Lease's spec (`resourcelock.LeaderElectionRecord`)
//! and its conversion to and from `LeaseSpec` (`LeaseSpecToLeaderElectionRecord`,
//! `LeaderElectionRecordToLeaseSpec`), with MicroTime timestamps as kube-apiserver stores them.

use std::time::SystemTime;

use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;

/// The state of an election as one Lease spec records it.
///
/// Timestamps are informational: candidates judge expiry by their own clock, from when they saw
/// the record change, never from `renew_time` (another machine's clock).
///
/// # Examples
///
/// ```
/// use k8s_openapi::api::coordination::v1::LeaseSpec;
/// use kcache_leaderelection::LeaderElectionRecord;
///
/// let spec = LeaseSpec {
///     holder_identity: Some("pod-a".into()),
///     lease_duration_seconds: Some(15),
///     lease_transitions: Some(3),
///     ..Default::default()
/// };
/// let record = LeaderElectionRecord::from_spec(&spec);
/// assert_eq!((record.holder_identity.as_str(), record.lease_transitions), ("pod-a", 3));
/// assert_eq!(record.to_spec().holder_identity.as_deref(), Some("pod-a"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaderElectionRecord {
    /// Who holds the lease; empty when nobody does (never taken, or released).
    pub holder_identity: String,
    /// `leaseDurationSeconds`: how long the others wait without seeing a change.
    pub lease_duration_seconds: i32,
    /// When the holder acquired the lease (kept while it renews).
    pub acquire_time: Option<Timestamp>,
    /// When the holder last renewed the lease.
    pub renew_time: Option<Timestamp>,
    /// `leaseTransitions`: how many times the holder changed.
    pub lease_transitions: i32,
    /// `strategy` of coordinated leader election (KEP-4355); empty without it.
    pub strategy: String,
    /// `preferredHolder` of coordinated leader election: set by the coordinator to ask the
    /// holder to step down in its favour; empty without it.
    pub preferred_holder: String,
}

impl LeaderElectionRecord {
    /// client-go's `LeaseSpecToLeaderElectionRecord`: absent fields become empty or zero.
    pub fn from_spec(spec: &LeaseSpec) -> Self {
        Self {
            holder_identity: spec.holder_identity.clone().unwrap_or_default(),
            lease_duration_seconds: spec.lease_duration_seconds.unwrap_or_default(),
            acquire_time: spec.acquire_time.as_ref().map(|t| t.0),
            renew_time: spec.renew_time.as_ref().map(|t| t.0),
            lease_transitions: spec.lease_transitions.unwrap_or_default(),
            strategy: spec.strategy.clone().unwrap_or_default(),
            preferred_holder: spec.preferred_holder.clone().unwrap_or_default(),
        }
    }

    /// client-go's `LeaderElectionRecordToLeaseSpec`: holder, duration, times and transitions are
    /// always written (an empty holder too: that is a released lease); `strategy` and
    /// `preferredHolder` only when set. Times serialize as MicroTime, `2026-12-07T10:11:12.123456Z`.
    pub fn to_spec(&self) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.holder_identity.clone()),
            lease_duration_seconds: Some(self.lease_duration_seconds),
            acquire_time: self.acquire_time.map(MicroTime),
            renew_time: self.renew_time.map(MicroTime),
            lease_transitions: Some(self.lease_transitions),
            strategy: (!self.strategy.is_empty()).then(|| self.strategy.clone()),
            preferred_holder: (!self.preferred_holder.is_empty()).then(|| self.preferred_holder.clone()),
        }
    }
}

/// A wall-clock time as a MicroTime timestamp: truncated to whole microseconds, as
/// `metav1.MicroTime` marshals (RFC 3339 with six fractional digits), so that what this process
/// remembers writing equals what the server stores and sends back. Public for other Lease
/// writers (kcache-sharding's member Leases).
///
/// # Examples
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use kcache_leaderelection::micro_timestamp;
///
/// let t = SystemTime::UNIX_EPOCH + Duration::new(1, 123_456_789);
/// assert_eq!(micro_timestamp(t).subsec_nanosecond(), 123_456_000);
/// ```
pub fn micro_timestamp(t: SystemTime) -> Timestamp {
    let since_epoch = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let micros = i64::try_from(since_epoch.as_micros()).unwrap_or(i64::MAX);
    Timestamp::from_microsecond(micros).unwrap_or(Timestamp::UNIX_EPOCH)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// client-go's `TestLeaseSpecToLeaderElectionRecordRoundTrip`: spec to record to spec gives
    /// the same spec, and record to spec to record the same record.
    #[test]
    fn lease_spec_round_trips_through_the_record() {
        let now = micro_timestamp(SystemTime::now());
        let old = LeaseSpec {
            holder_identity: Some("foo".into()),
            lease_duration_seconds: Some(10),
            acquire_time: Some(MicroTime(now)),
            renew_time: Some(MicroTime(now)),
            lease_transitions: Some(1),
            ..Default::default()
        };
        let record = LeaderElectionRecord::from_spec(&old);
        let new = record.to_spec();
        assert_eq!(old, new);
        assert_eq!(LeaderElectionRecord::from_spec(&new), record);
    }

    /// MicroTime truncates to microseconds (`metav1.MicroTime`'s `RFC3339Micro`), so a record
    /// written and read back compares equal.
    #[test]
    fn timestamps_are_whole_microseconds_as_kube_apiserver_stores_them() {
        let t = SystemTime::UNIX_EPOCH + Duration::new(1_796_638_272, 123_456_789);
        let ts = micro_timestamp(t);
        assert_eq!(serde_json::to_string(&MicroTime(ts)).unwrap(), r#""2026-12-07T10:11:12.123456Z""#);
        assert_eq!(ts.subsec_nanosecond(), 123_456_000);
    }
}
