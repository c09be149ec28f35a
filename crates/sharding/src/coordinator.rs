//! `ShardCoordinator`: the hand-off protocol (`MemberState`) over member Leases, one round per
//! retry period: renew this member's Lease (publishing what it serves and claims), list the
//! group's Leases, recompute the assignment, hand ranges off. Consumers follow the
//! [`Assignment`] through a `watch` channel.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kcache_leaderelection::{LeaderElectionRecord, micro_timestamp};
use kcache_shard_selector::{ShardKey, ShardSelector, fnv1a_64};
use kcache_utils::{Clock, SystemClock};
use kube::api::{Api, DeleteParams, ListParams, PostParams, Preconditions};
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::config::{GROUP_LABEL, SERVING_ANNOTATION, ShardingConfig};
use crate::error::{Error, Result};
use crate::protocol::{MemberState, MemberView};
use crate::range_set::RangeSet;

/// What this replica serves, and the group as it last saw it.
///
/// # Examples
///
/// ```
/// use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
/// use kcache_sharding::{Assignment, RangeSet};
/// use kcache_shard_selector::ShardKey;
///
/// let all = Assignment::new(ShardKey::Uid, RangeSet::full(), vec!["a".into()]);
/// let meta = ObjectMeta { uid: Some("1234".into()), ..Default::default() };
/// assert!(all.owns(&meta));
/// assert_eq!(all.selector().unwrap().to_string(),
///     "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')");
/// assert!(Assignment::new(ShardKey::Uid, RangeSet::empty(), vec![]).selector().is_none());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Assignment {
    /// The hashed field.
    pub key: ShardKey,
    /// The hash values this replica serves now: act on an object only while it is in here.
    pub serving: RangeSet,
    /// The live members (this one included), sorted, as of the last list.
    pub members: Vec<String>,
}

impl Assignment {
    /// An assignment (for tests and static use).
    pub fn new(key: ShardKey, serving: RangeSet, members: Vec<String>) -> Self {
        Self { key, serving, members }
    }

    /// The selector for this replica's informer; `None` while it serves nothing.
    pub fn selector(&self) -> Option<ShardSelector> {
        self.serving.to_selector(self.key)
    }

    /// Whether this replica serves the object (by its uid or namespace, hashed as the server
    /// hashes; a missing field hashes as `""`).
    pub fn owns(&self, meta: &ObjectMeta) -> bool {
        self.owns_value(self.key.value(meta))
    }

    /// Whether this replica serves objects whose key field is `value`.
    pub fn owns_value(&self, value: &str) -> bool {
        self.serving.contains(fnv1a_64(value.as_bytes()))
    }
}

/// Shard assignment through member Leases: each replica of a controller runs one, and together
/// they split the hash space of KEP-5866 sharded list and watch, without configuration.
///
/// - Each replica holds its own Lease, `<group>-<identity>`, labelled
///   `sharding.kcache.io/group=<group>`, renewed every `retry_period` as a leader renews its
///   lease; it lists the group's Leases to find the live members (a member is live while its
///   Lease changed less than `leaseDurationSeconds` ago, by this replica's clock).
/// - The ranges are a deterministic function of the live members ([`Strategy`](crate::Strategy)).
/// - Each member publishes in its Lease (annotation `sharding.kcache.io/serving`) what it serves
///   and claims; it starts serving a range only after every other live member has published that
///   it no longer serves it, or that member's Lease expired, and it stops serving when it cannot
///   renew for `renew_deadline` (see [`MemberState`] for the argument, and the README for the
///   liveness bound).
/// - [`assignments`](Self::assignments) follows what this replica serves.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> anyhow::Result<()> {
/// use std::time::Duration;
/// use kcache_sharding::{ShardCoordinator, ShardingConfig};
/// use tokio_util::sync::CancellationToken;
///
/// let server = kcache_testserver::TestServer::start().await;
/// let a = ShardCoordinator::new(server.in_memory_client(), ShardingConfig::new("default", "demo", "a"))?;
/// let b = ShardCoordinator::new(server.in_memory_client(), ShardingConfig::new("default", "demo", "b"))?;
/// let stop = CancellationToken::new();
/// for c in [&a, &b] {
///     let (c, stop) = (c.clone(), stop.clone());
///     tokio::spawn(async move { c.run(stop).await });
/// }
/// tokio::time::sleep(Duration::from_secs(10)).await;
/// let (sa, sb) = (a.assignment().serving, b.assignment().serving);
/// assert!(!sa.overlaps(&sb) && sa.union(&sb).is_full());
/// stop.cancel();
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct ShardCoordinator {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ShardCoordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardCoordinator")
            .field("group", &self.inner.config.group)
            .field("identity", &self.inner.config.identity)
            .finish_non_exhaustive()
    }
}

struct Inner {
    config: ShardingConfig,
    api: Api<Lease>,
    clock: Arc<dyn Clock>,
    state: Mutex<MemberState>,
    tx: watch::Sender<Assignment>,
    running: AtomicBool,
}

/// What this process knows of its own Lease: the object of its next update.
enum Own {
    /// A write failed: read it before writing again (its resourceVersion is unknown).
    Unknown,
    /// Not found: create it.
    Absent,
    /// As last read or written.
    Known(Box<Lease>),
}

impl ShardCoordinator {
    /// A coordinator with the system clock.
    ///
    /// # Errors
    ///
    /// The configuration's [`validate`](ShardingConfig::validate) errors.
    pub fn new(client: kube::Client, config: ShardingConfig) -> Result<Self> {
        Self::with_clock(client, config, Arc::new(SystemClock))
    }

    /// A coordinator reading time from `clock` (a `FakeClock` in tests).
    ///
    /// # Errors
    ///
    /// The configuration's [`validate`](ShardingConfig::validate) errors.
    pub fn with_clock(client: kube::Client, config: ShardingConfig, clock: Arc<dyn Clock>) -> Result<Self> {
        config.validate()?;
        let api = Api::namespaced(client, &config.namespace);
        let state = MemberState::new(config.identity.clone(), config.strategy, config.renew_deadline);
        let (tx, _) =
            watch::channel(Assignment::new(config.key, RangeSet::empty(), vec![config.identity.clone()]));
        let inner =
            Inner { config, api, clock, state: Mutex::new(state), tx, running: AtomicBool::new(false) };
        Ok(Self { inner: Arc::new(inner) })
    }

    /// The configuration.
    pub fn config(&self) -> &ShardingConfig {
        &self.inner.config
    }

    /// Follows this replica's assignment: a new value whenever what it serves or the member set
    /// changes. Serving shrinks in the value *before* the replica stops holding the range (the
    /// channel is updated first), so a consumer that checks [`owns`](Assignment::owns) on the
    /// current value before acting never acts outside its range.
    pub fn assignments(&self) -> watch::Receiver<Assignment> {
        self.inner.tx.subscribe()
    }

    /// The current assignment.
    pub fn assignment(&self) -> Assignment {
        self.inner.tx.borrow().clone()
    }

    /// Whether this replica serves the object now (judged on this process's clock, so a replica
    /// that missed its renew deadline answers `false` even before the run loop notices).
    pub fn owns(&self, meta: &ObjectMeta) -> bool {
        let value = self.inner.config.key.value(meta);
        self.inner.state.lock().serving_at(self.inner.clock.now()).contains(fnv1a_64(value.as_bytes()))
    }

    /// Runs the member until `cancel`: rounds every `retry_period`; on cancellation it stops
    /// serving (the assignment becomes empty), then deletes its Lease so the others take over at
    /// their next round.
    ///
    /// # Errors
    ///
    /// [`Error::AlreadyRunning`] if another run of this coordinator has not returned. API errors
    /// are not returned: they are retried at the next round, and a member that cannot renew
    /// stops serving after `renew_deadline`.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future stops the rounds without deleting the Lease; the others take over
    /// after `lease_duration`. Cancel through `cancel` for a graceful leave.
    pub async fn run(&self, cancel: CancellationToken) -> Result<()> {
        if self.inner.running.swap(true, Ordering::SeqCst) {
            return Err(Error::AlreadyRunning);
        }
        struct Reset<'a>(&'a AtomicBool);
        impl Drop for Reset<'_> {
            fn drop(&mut self) {
                self.0.store(false, Ordering::SeqCst);
            }
        }
        let _reset = Reset(&self.inner.running);
        let inner = &self.inner;
        let mut own = Own::Unknown;
        tracing::info!(group = %inner.config.group, identity = %inner.config.identity, "shard coordinator starting");
        loop {
            let round_start = inner.clock.now();
            let rounds = async {
                // One round, and at once a second when the list changed what to publish (a claim
                // or a release), so hand-offs do not wait a whole period.
                if self.round(&mut own).await {
                    self.round(&mut own).await;
                }
            };
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = self.until_lapse(rounds) => {}
            }
            let wait = inner.config.retry_period.saturating_sub(inner.clock.now() - round_start);
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = self.until_lapse(inner.clock.sleep(wait)) => {}
            }
        }
        // Graceful leave: stop serving first, then remove the Lease.
        inner.state.lock().stop();
        self.publish();
        let mut dp = DeleteParams::default();
        if let Own::Known(lease) = &own {
            dp.preconditions =
                Some(Preconditions { resource_version: lease.metadata.resource_version.clone(), uid: None });
        }
        let name = inner.config.lease_name();
        match tokio::time::timeout(self.request_timeout(), inner.api.delete(&name, &dp)).await {
            Ok(Ok(_)) => tracing::info!(lease = %name, "shard coordinator left the group"),
            Ok(Err(e)) => {
                tracing::warn!(lease = %name, error = %e, "could not delete the member lease; it expires")
            }
            Err(_) => tracing::warn!(lease = %name, "deleting the member lease timed out; it expires"),
        }
        Ok(())
    }

    fn request_timeout(&self) -> Duration {
        self.inner.config.election().effective_request_timeout()
    }

    /// Runs `fut`, meanwhile applying a lapse as soon as it is due (serving stops at the renew
    /// deadline even while a request hangs).
    async fn until_lapse<F: Future>(&self, fut: F) -> F::Output {
        let mut fut = std::pin::pin!(fut);
        loop {
            let until = self.inner.state.lock().valid_until();
            let Some(until) = until else { return fut.await };
            let wait = until.saturating_duration_since(self.inner.clock.now());
            tokio::select! {
                out = &mut fut => return out,
                _ = self.inner.clock.sleep(wait) => {
                    let lapsed = self.inner.state.lock().expire(self.inner.clock.now());
                    if lapsed {
                        tracing::warn!(identity = %self.inner.config.identity, "renew deadline passed: serving nothing");
                        self.publish();
                    }
                }
            }
        }
    }

    /// Sends the current assignment if it changed.
    fn publish(&self) {
        let inner = &self.inner;
        let (serving, members) = {
            let state = inner.state.lock();
            (state.serving_at(inner.clock.now()), state.live_members().to_vec())
        };
        let next = Assignment::new(inner.config.key, serving, members);
        inner.tx.send_if_modified(|current| {
            if *current == next {
                return false;
            }
            if current.serving != next.serving {
                tracing::info!(
                    identity = %inner.config.identity,
                    members = next.members.len(),
                    share = format_args!("{:.3}", next.serving.fraction()),
                    ranges = next.serving.ranges().len(),
                    "shard assignment changed"
                );
            }
            *current = next;
            true
        });
    }

    /// One round: renew (with a read first if the Lease's version is unknown), then list.
    /// Returns whether the list changed what to publish.
    async fn round(&self, own: &mut Own) -> bool {
        let inner = &self.inner;
        let timeout = self.request_timeout();
        let name = inner.config.lease_name();
        if matches!(own, Own::Unknown) {
            match tokio::time::timeout(timeout, inner.api.get_opt(&name)).await {
                Ok(Ok(Some(lease))) => *own = Own::Known(Box::new(lease)),
                Ok(Ok(None)) => *own = Own::Absent,
                Ok(Err(e)) => {
                    tracing::debug!(lease = %name, error = %e, "reading the member lease failed");
                    return false;
                }
                Err(_) => return false,
            }
        }
        let sent = inner.clock.now();
        let published = inner.state.lock().write_sent(sent);
        let lease = self.lease_to_write(own, &published);
        let write = async {
            match own {
                Own::Known(_) => inner.api.replace(&name, &PostParams::default(), &lease).await,
                _ => inner.api.create(&PostParams::default(), &lease).await,
            }
        };
        let result = tokio::time::timeout(timeout, write).await;
        let now = inner.clock.now();
        let ok = matches!(result, Ok(Ok(_)));
        inner.state.lock().write_done(now, ok);
        match result {
            Ok(Ok(lease)) => *own = Own::Known(Box::new(lease)),
            Ok(Err(e)) => {
                tracing::debug!(lease = %name, error = %e, "renewing the member lease failed");
                *own = Own::Unknown;
            }
            Err(_) => *own = Own::Unknown,
        }
        self.publish();
        if !ok {
            return false;
        }
        let sent = inner.clock.now();
        let lp = ListParams::default().labels(&format!("{GROUP_LABEL}={}", inner.config.group));
        let list = match tokio::time::timeout(timeout, inner.api.list(&lp)).await {
            Ok(Ok(list)) => list,
            Ok(Err(e)) => {
                tracing::debug!(group = %inner.config.group, error = %e, "listing the group failed");
                return false;
            }
            Err(_) => return false,
        };
        let views = list
            .items
            .iter()
            .filter(|l| l.metadata.name.as_deref() != Some(&name))
            .filter_map(view)
            .collect();
        let changed = inner.state.lock().list_done(sent, inner.clock.now(), views);
        self.publish();
        changed
    }

    /// The member Lease as it is to be written: holder, duration, renew time, the group label and
    /// the published ranges, over the object last seen (its resourceVersion is the precondition).
    fn lease_to_write(&self, own: &Own, published: &RangeSet) -> Lease {
        let config = &self.inner.config;
        let mut lease = match own {
            Own::Known(l) => (**l).clone(),
            _ => Lease {
                metadata: ObjectMeta {
                    name: Some(config.lease_name()),
                    namespace: Some(config.namespace.clone()),
                    ..Default::default()
                },
                spec: None,
            },
        };
        let now = micro_timestamp(self.inner.clock.wall_now());
        let previous = lease.spec.as_ref().map(LeaderElectionRecord::from_spec).unwrap_or_default();
        let mut record = previous.clone();
        record.holder_identity = config.identity.clone();
        record.lease_duration_seconds = config.lease_duration.as_secs().try_into().unwrap_or(i32::MAX);
        record.renew_time = Some(now);
        if previous.holder_identity != config.identity || record.acquire_time.is_none() {
            record.acquire_time = Some(now);
        }
        lease.spec = Some(record.to_spec());
        lease
            .metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(GROUP_LABEL.into(), config.group.clone());
        lease
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(SERVING_ANNOTATION.into(), published.to_annotation());
        lease
    }
}

/// A member as its Lease shows it; `None` for a Lease without a holder (not a member).
fn view(lease: &Lease) -> Option<MemberView> {
    let spec = lease.spec.as_ref()?;
    let identity = spec.holder_identity.clone().filter(|h| !h.is_empty())?;
    let published = match lease.metadata.annotations.as_ref().and_then(|a| a.get(SERVING_ANNOTATION)) {
        Some(text) => RangeSet::parse_annotation(text),
        // A labelled Lease without the annotation: it may serve anything (the safe reading).
        None => None,
    };
    let secs = u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0);
    let version = lease.metadata.resource_version.clone().unwrap_or_default();
    Some(MemberView::new(identity, version, published, Duration::from_secs(secs)))
}
