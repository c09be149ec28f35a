//! The hand-off protocol without I/O: what a member publishes, when it may start serving a range,
//! and when it must stop. [`ShardCoordinator`](crate::ShardCoordinator) drives it over member
//! Leases; the simulation drives it over a model API server on a virtual clock.
//!
//! # The protocol
//!
//! Every member keeps three sets of hash values: its *target* (what the assignment gives it, from
//! the live members it last listed), what it *publishes* in its Lease, and what it *serves*.
//! Each round (every `retry_period`) it writes its Lease (a renewal that publishes
//! `serving ∪ target`), then lists the group's Leases. It:
//!
//! - **stops** serving a value as soon as the value leaves its target (locally, at once: shrinking
//!   is always safe), and publishes the smaller set at its next write;
//! - **starts** serving a value of its target only when (1) its last write published the value
//!   and was acknowledged, (2) the list it judges by was sent after that acknowledgement, and
//!   (3) in that list no other live member publishes the value;
//! - **lapses** (serves nothing) once `renew_deadline` has passed since the last acknowledged
//!   write was *sent*, and after a lapse serves again only through rule (1)-(3).
//!
//! A member is *live* to another while it last saw that member's Lease change less than the
//! Lease's `leaseDurationSeconds` ago (client-go's leader election judges expiry the same way, by
//! the observer's clock). A deleted Lease (a graceful leave) is a member gone.
//!
//! Why two members never serve one value: if both serve `x`, both published `x` (rule 1) and
//! listed after their write (rule 2). The API server is linearizable, so one of the two writes,
//! say A's, came first; B's list came after B's write, hence after A's, and showed A publishing
//! `x` unless A's Lease looked expired to B. A published `x` continuously while serving it (the
//! published set always contains the served one). So B judged A expired: B saw no change of A's
//! Lease for `leaseDuration` since it last saw one, and A's last acknowledged write was sent
//! before that change was seen, so A lapsed `renew_deadline` after it, earlier, by the margin
//! `lease_duration - renew_deadline` (less clock-rate skew). When A writes again it must list
//! again before serving, and that list shows B's claim. The simulation checks this on every
//! event of ≥ 500 seeded schedules.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;

use crate::assignment::Strategy;
use crate::range_set::RangeSet;

/// One other member as a list of the group's Leases shows it.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use kcache_sharding::{MemberView, RangeSet};
///
/// let view = MemberView::new("replica-b", "42", Some(RangeSet::full()), Duration::from_secs(15));
/// assert_eq!(view.identity, "replica-b");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MemberView {
    /// The member's identity (its Lease's `holderIdentity`).
    pub identity: String,
    /// Anything that changes whenever the member writes its Lease: the resourceVersion.
    pub version: String,
    /// What the member publishes as served or claimed; `None` when the annotation cannot be read,
    /// which counts as the whole hash space (the safe reading).
    pub published: Option<RangeSet>,
    /// The Lease's `leaseDurationSeconds`.
    pub lease_duration: Duration,
}

impl MemberView {
    /// A view of one member.
    pub fn new(
        identity: impl Into<String>,
        version: impl Into<String>,
        published: Option<RangeSet>,
        lease_duration: Duration,
    ) -> Self {
        Self { identity: identity.into(), version: version.into(), published, lease_duration }
    }
}

/// What this process last saw of another member, on its own clock.
#[derive(Debug, Clone)]
struct Observed {
    /// The version last seen.
    version: String,
    /// When this process first received that version (local clock; the later, the safer).
    observed_at: Instant,
    /// Published set; the whole space when unreadable.
    published: RangeSet,
    lease_duration: Duration,
}

/// The last write of this member's Lease.
#[derive(Debug, Clone)]
struct Write {
    published: RangeSet,
    sent_at: Instant,
    /// When the acknowledgement arrived; `None` while in flight or after a failure (a failed
    /// write may still have been applied: its published set is then what the server holds).
    acked_at: Option<Instant>,
}

/// The sans-I/O state of one member: feed it the outcome of each write of its Lease and each
/// list of the group, and it says what to publish and what this member serves.
///
/// The driver's contract: writes and lists alternate, one request at a time; each write publishes
/// exactly [`to_publish`](MemberState::to_publish) as it was when the write was sent.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tokio::time::Instant;
/// use kcache_sharding::{MemberState, RangeSet, Strategy};
///
/// let mut m = MemberState::new("a", Strategy::ContiguousRanges, Duration::from_secs(10));
/// let t0 = Instant::now();
/// // Alone: the first round claims nothing yet (no target before the first list).
/// let p = m.write_sent(t0);
/// m.write_done(t0, true);
/// m.list_done(t0, t0, vec![]); // nobody else: the target is everything
/// assert!(m.serving_at(t0).is_empty(), "the claim was not published yet");
/// let p = m.write_sent(t0);
/// assert!(p.is_full());
/// m.write_done(t0, true);
/// m.list_done(t0, t0, vec![]);
/// assert!(m.serving_at(t0).is_full());
/// // Without an acknowledged write for the renew deadline, it serves nothing.
/// assert!(m.serving_at(t0 + Duration::from_secs(10)).is_empty());
/// ```
#[derive(Debug, Clone)]
pub struct MemberState {
    identity: String,
    strategy: Strategy,
    renew_deadline: Duration,
    /// Other members by identity, as last listed. A member missing from a list is gone.
    observed: BTreeMap<String, Observed>,
    /// The assignment's share for this member, from the last list (empty before the first).
    target: RangeSet,
    /// What this member serves while `valid_until` is ahead. Invariant: a subset of the published
    /// set of every write sent since it was last grown, and of the last acknowledged one.
    serving: RangeSet,
    /// Serving stops at this instant unless an acknowledged write moves it: the send time of the
    /// last acknowledged write plus `renew_deadline`, kept only while acknowledgements are
    /// continuous (a lapse resets it to `None`).
    valid_until: Option<Instant>,
    last_write: Option<Write>,
    /// The live members (this one included) from the last list.
    live: Vec<String>,
    /// The live set `target` was computed for (`None` before the first list, or after `stop`).
    assigned_for: Option<Vec<String>>,
    /// Testing only: skip the hand-off wait (rule 3), so the simulation can show it catches an
    /// unsafe coordinator.
    skip_handoff_wait: bool,
}

impl MemberState {
    /// A member that serves nothing yet.
    pub fn new(identity: impl Into<String>, strategy: Strategy, renew_deadline: Duration) -> Self {
        let identity = identity.into();
        Self {
            live: vec![identity.clone()],
            identity,
            strategy,
            renew_deadline,
            observed: BTreeMap::new(),
            target: RangeSet::empty(),
            serving: RangeSet::empty(),
            valid_until: None,
            last_write: None,
            assigned_for: None,
            skip_handoff_wait: false,
        }
    }

    /// A deliberately broken member that starts serving its target without waiting for the
    /// others to release it. For the simulation's self-test only.
    #[doc(hidden)]
    pub fn skip_handoff_wait_for_testing(mut self) -> Self {
        self.skip_handoff_wait = true;
        self
    }

    /// This member's identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// What the next write must publish: everything served plus the target (the claim).
    pub fn to_publish(&self) -> RangeSet {
        self.serving.union(&self.target)
    }

    /// The share the assignment gives this member (from the last list).
    pub fn target(&self) -> &RangeSet {
        &self.target
    }

    /// The live members, this one included, sorted, as of the last list.
    pub fn live_members(&self) -> &[String] {
        &self.live
    }

    /// What this member serves at `now`: nothing once the renew deadline has passed.
    pub fn serving_at(&self, now: Instant) -> RangeSet {
        match self.valid_until {
            Some(until) if now < until => self.serving.clone(),
            _ => RangeSet::empty(),
        }
    }

    /// When serving lapses unless a write is acknowledged first (`None`: serving nothing).
    pub fn valid_until(&self) -> Option<Instant> {
        if self.serving.is_empty() { None } else { self.valid_until }
    }

    /// Applies a lapse that is due at `now`: serving becomes empty. Returns whether it changed.
    pub fn expire(&mut self, now: Instant) -> bool {
        if self.valid_until.is_some_and(|until| now >= until) {
            self.valid_until = None;
            return !std::mem::take(&mut self.serving).is_empty();
        }
        false
    }

    /// A write is about to be sent at `now`; returns what it must publish.
    pub fn write_sent(&mut self, now: Instant) -> RangeSet {
        self.expire(now);
        let published = self.to_publish();
        self.last_write = Some(Write { published: published.clone(), sent_at: now, acked_at: None });
        published
    }

    /// The write sent at `sent_at` was acknowledged (`ok`) or failed, at `now`.
    pub fn write_done(&mut self, now: Instant, ok: bool) {
        self.expire(now);
        let Some(write) = self.last_write.as_mut() else { return };
        if !ok {
            return;
        }
        write.acked_at = Some(now);
        let until = write.sent_at + self.renew_deadline;
        // Validity extends only while continuous: after a lapse `serving` is empty, and it grows
        // again only through a list sent after this acknowledgement.
        if now < until {
            self.valid_until = Some(until);
        }
    }

    /// A list of the group sent at `sent_at` answered at `now` with the other members' Leases
    /// (this member's own Lease excluded). Recomputes the live set and target, stops serving what
    /// left the target and starts serving what the hand-off rules allow. Returns whether the
    /// published set should change (the driver then writes again at once).
    pub fn list_done(&mut self, sent_at: Instant, now: Instant, others: Vec<MemberView>) -> bool {
        self.expire(now);
        let mut next = BTreeMap::new();
        for view in others {
            if view.identity == self.identity {
                continue;
            }
            let published = view.published.unwrap_or_else(RangeSet::full);
            let observed_at = match self.observed.get(&view.identity) {
                Some(o) if o.version == view.version => o.observed_at,
                _ => now,
            };
            next.insert(
                view.identity,
                Observed {
                    version: view.version,
                    observed_at,
                    published,
                    lease_duration: view.lease_duration,
                },
            );
        }
        self.observed = next;
        // Live: judged from the time the list was sent (the earliest it can have been served).
        let mut live = vec![self.identity.clone()];
        let mut blocked = RangeSet::empty();
        for (id, o) in &self.observed {
            if sent_at < o.observed_at + o.lease_duration {
                live.push(id.clone());
                blocked = blocked.union(&o.published);
            }
        }
        live.sort_unstable();
        // The assignment depends on the live set only: recomputed when it changes.
        if self.assigned_for.as_ref() != Some(&live) {
            self.target = self.strategy.assign(&live).remove(&self.identity).unwrap_or_default();
            self.assigned_for = Some(live.clone());
        }
        self.live = live;

        // Stop at once what is no longer ours.
        self.serving = self.serving.intersection(&self.target);
        // Start what the last acknowledged write claimed, if this list came after it.
        let valid = self.valid_until.is_some_and(|until| now < until);
        if let Some(Write { published, acked_at: Some(acked), .. }) = &self.last_write
            && valid
            && sent_at >= *acked
        {
            let mut grow = self.target.intersection(published);
            if !self.skip_handoff_wait {
                grow = grow.difference(&blocked);
            }
            self.serving = self.serving.union(&grow);
        }
        let published_now = self.last_write.as_ref().map(|w| &w.published);
        published_now != Some(&self.to_publish())
    }

    /// Stop serving everything (a graceful leave, before the Lease is deleted).
    pub fn stop(&mut self) {
        self.serving = RangeSet::empty();
        self.target = RangeSet::empty();
        self.assigned_for = None;
    }
}
