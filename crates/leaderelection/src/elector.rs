//! The election loop: client-go's `LeaderElector` (`Run`, `acquire`, `renew`, `release`,
//! `tryAcquireOrRenew`, `maybeReportTransition`, `Check`) over a [`LeaseLock`], on an injectable
//! [`Clock`].
//!
//! Timing, as in client-go v0.37 `tools/leaderelection/leaderelection.go`:
//!
//! - **acquire**: try at once, then after each failure wait `retry_period * (1 + 1.2 * r)`
//!   (`wait.JitterUntil`, sliding), until a try succeeds or the run is cancelled;
//! - **renew**: right after acquiring, then `retry_period` after each successful renewal, a poll
//!   (`wait.PollUntilContextTimeout`): a try at once, then one per tick of a `retry_period`
//!   ticker, until one succeeds or the renew deadline passes, which ends leadership;
//! - **expiry** is judged by this process's clock: another holder's lease is valid until
//!   `leaseDurationSeconds` after this process last saw the lease's spec change, whatever its
//!   `renewTime` says (clock skew between machines does not matter, only their rates).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kcache_utils::{Clock, SystemClock};
use parking_lot::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::{JITTER_FACTOR, LeaderElectionConfig};
use crate::error::{Error, Result};
use crate::lock::{LeaseLock, LockError};
use crate::metrics::{Metrics, MetricsProvider};
use crate::record::{LeaderElectionRecord, micro_timestamp};

/// What a candidate does when leadership starts and ends (client-go's `LeaderCallbacks`).
///
/// The callbacks run on the task that runs [`LeaderElector::run`], in order; they must not
/// block. Start the work that needs leadership on a task of its own from `on_started_leading`,
/// and stop it when the token it gets is cancelled.
///
/// # Examples
///
/// ```
/// use kcache_leaderelection::LeaderCallbacks;
///
/// let callbacks = LeaderCallbacks::new(
///     |leading| {
///         tokio::spawn(async move {
///             // ... run the controller's workers until `leading` is cancelled ...
///             leading.cancelled().await;
///         });
///     },
///     || eprintln!("no longer leading"),
/// )
/// .on_new_leader(|identity| eprintln!("the leader is now {identity:?}"));
/// ```
pub struct LeaderCallbacks {
    on_started_leading: Box<dyn Fn(CancellationToken) + Send + Sync>,
    on_stopped_leading: Box<dyn Fn() + Send + Sync>,
    on_new_leader: Option<NewLeaderFn>,
}

/// The `on_new_leader` callback.
type NewLeaderFn = Box<dyn Fn(&str) + Send + Sync>;

impl fmt::Debug for LeaderCallbacks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaderCallbacks")
            .field("on_new_leader", &self.on_new_leader.is_some())
            .finish_non_exhaustive()
    }
}

impl LeaderCallbacks {
    /// Callbacks for the start and the end of leadership.
    ///
    /// - `on_started_leading` gets a token that is cancelled the moment leadership ends: the
    ///   renew deadline passed without a renewal, or the run was cancelled. It is cancelled
    ///   before the lease is released (with `release_on_cancel`), and before
    ///   `on_stopped_leading` runs.
    /// - `on_stopped_leading` runs when [`LeaderElector::run`] ends, whether or not this
    ///   candidate led (client-go's documented behaviour: do not assume it follows
    ///   `on_started_leading`).
    pub fn new(
        on_started_leading: impl Fn(CancellationToken) + Send + Sync + 'static,
        on_stopped_leading: impl Fn() + Send + Sync + 'static,
    ) -> Self {
        Self {
            on_started_leading: Box::new(on_started_leading),
            on_stopped_leading: Box::new(on_stopped_leading),
            on_new_leader: None,
        }
    }

    /// Called with the holder's identity whenever this candidate sees the holder change,
    /// including the first holder it sees; `""` when the lease was released and nobody holds it.
    pub fn on_new_leader(mut self, f: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.on_new_leader = Some(Box::new(f));
        self
    }
}

/// How a [`LeaderElector::run`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// The run was cancelled before this candidate acquired the lease.
    CancelledBeforeLeading,
    /// This candidate led until the run was cancelled; `released` says whether it then released
    /// the lease (`release_on_cancel`).
    Cancelled {
        /// The lease was released (holder emptied) before `run` returned.
        released: bool,
    },
    /// This candidate led until it could not renew the lease within the renew deadline (the API
    /// server did not answer, another candidate holds the lease, or, in
    /// [coordinated](crate::LeaderElectionConfig::coordinated) mode, the coordinator asked it to
    /// step down with `preferredHolder`).
    LeaseLost {
        /// The lease was released afterwards (`release_on_cancel` and the lease still named this
        /// candidate).
        released: bool,
    },
}

/// What this process last knew of the lease (client-go's `observedRecord`, `observedRawRecord`,
/// `observedTime` and `reportedLeader`, under one lock).
#[derive(Debug, Default)]
struct Observed {
    /// The record last seen or written.
    record: LeaderElectionRecord,
    /// The spec as last read from the server. Only a read changes it (as client-go's raw record):
    /// after this process writes, its next read finds a "change" and restarts the clock.
    raw: Option<LeaseSpec>,
    /// When `record` last changed, on this process's clock; `None` before anything was seen
    /// (client-go's zero time: every lease is expired).
    time: Option<Instant>,
    /// The holder last reported to `on_new_leader`.
    reported_leader: String,
    /// Whether this candidate leads right now: from the moment it acquires until the moment
    /// leadership ends (the leading token's life).
    leading: bool,
}

/// SplitMix64 for the retry jitter: seedable, so a seeded test replays the same waits.
#[derive(Debug)]
struct Jitter(u64);

impl Jitter {
    /// A number in `[0, 1)`.
    fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Options of a [`LeaderElector`] before it is built.
///
/// # Examples
///
/// ```no_run
/// use std::sync::Arc;
/// use kcache_leaderelection::{HealthzAdaptor, LeaderCallbacks, LeaderElectionConfig, LeaderElector};
///
/// # fn demo(client: kube::Client) -> kcache_leaderelection::Result<()> {
/// let health = HealthzAdaptor::new(std::time::Duration::from_secs(20));
/// let elector = LeaderElector::builder(
///     client,
///     LeaderElectionConfig::new("kube-system", "my-controller", "pod-a"),
///     LeaderCallbacks::new(|_leading| {}, || {}),
/// )
/// .watchdog(&health)
/// .build()?;
/// # Ok(()) }
/// ```
pub struct Builder {
    client: kube::Client,
    config: LeaderElectionConfig,
    callbacks: LeaderCallbacks,
    clock: Arc<dyn Clock>,
    provider: Option<Arc<dyn MetricsProvider>>,
    seed: Option<u64>,
    /// Run on the elector once built (a watchdog's tie to it).
    on_built: Vec<OnBuilt>,
}

/// What runs on an elector once built.
type OnBuilt = Box<dyn FnOnce(&LeaderElector) + Send + Sync>;

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder").field("config", &self.config).finish_non_exhaustive()
    }
}

impl Builder {
    /// The clock to read and sleep on; tokio's ([`SystemClock`]) by default. Tests pass a
    /// [`FakeClock`](kcache_utils::FakeClock).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// The clock, shared.
    pub fn clock_arc(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Reports `leader_election_master_status` and `leader_election_slowpath_total` through
    /// `provider` (nothing is recorded without one).
    pub fn metrics_provider(mut self, provider: Arc<dyn MetricsProvider>) -> Self {
        self.provider = Some(provider);
        self
    }

    /// Seeds the retry jitter, so that a test replays the same waits; random by default.
    pub fn jitter_seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Runs `f` on the elector once [`build`](Self::build) made it.
    pub(crate) fn on_built(mut self, f: impl FnOnce(&LeaderElector) + Send + Sync + 'static) -> Self {
        self.on_built.push(Box::new(f));
        self
    }

    /// Validates the configuration and builds the elector.
    ///
    /// # Errors
    ///
    /// The configuration's first failed check ([`LeaderElectionConfig::validate`]).
    pub fn build(self) -> Result<LeaderElector> {
        self.config.validate()?;
        let api = kube::Api::<Lease>::namespaced(self.client, &self.config.lease_namespace);
        let lock = LeaseLock::new(
            api,
            &self.config.lease_namespace,
            &self.config.lease_name,
            self.config.labels.clone(),
        );
        let metrics = match &self.provider {
            Some(p) => Metrics::new(p.as_ref(), &self.config.name),
            None => Metrics::default(),
        };
        let seed = self.seed.unwrap_or_else(rand::random);
        let elector = LeaderElector {
            inner: Arc::new(Inner {
                config: self.config,
                callbacks: self.callbacks,
                clock: self.clock,
                metrics,
                observed: Mutex::new(Observed::default()),
                lock: tokio::sync::Mutex::new(lock),
                jitter: Mutex::new(Jitter(seed)),
            }),
        };
        for f in self.on_built {
            f(&elector);
        }
        Ok(elector)
    }
}

/// A candidate in a Lease-based leader election, compatible with client-go's
/// `leaderelection.LeaderElector` on the same Lease (see the crate docs).
///
/// Cheap to clone: clones share the candidate (so a health endpoint can ask
/// [`is_leader`](Self::is_leader) while another task runs it).
///
/// # Examples
///
/// ```no_run
/// use kcache_leaderelection::{LeaderCallbacks, LeaderElectionConfig, LeaderElector};
/// use tokio_util::sync::CancellationToken;
///
/// # async fn demo(client: kube::Client) -> kcache_leaderelection::Result<()> {
/// let config = LeaderElectionConfig::new("kube-system", "my-controller", "pod-a").release_on_cancel(true);
/// let callbacks = LeaderCallbacks::new(
///     |leading| { tokio::spawn(async move { /* work */ leading.cancelled().await }); },
///     || {},
/// );
/// let elector = LeaderElector::new(client, config, callbacks)?;
/// let shutdown = CancellationToken::new();
/// let outcome = elector.run(shutdown.clone()).await?;
/// println!("{outcome:?}");
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct LeaderElector {
    inner: Arc<Inner>,
}

struct Inner {
    config: LeaderElectionConfig,
    callbacks: LeaderCallbacks,
    clock: Arc<dyn Clock>,
    metrics: Metrics,
    observed: Mutex<Observed>,
    /// The lock; held by a run for its whole life, so a second concurrent run is refused.
    lock: tokio::sync::Mutex<LeaseLock>,
    jitter: Mutex<Jitter>,
}

impl fmt::Debug for LeaderElector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaderElector")
            .field(
                "lease",
                &format_args!("{}/{}", self.inner.config.lease_namespace, self.inner.config.lease_name),
            )
            .field("identity", &self.inner.config.identity)
            .field("leading", &self.is_leader())
            .finish_non_exhaustive()
    }
}

/// How a renew poll ended.
enum Poll {
    /// Renewed by a write sent at this instant.
    Renewed(Instant),
    Cancelled,
    DeadlineExceeded,
}

impl LeaderElector {
    /// A candidate with `config` that talks to the API server through `client` (client-go's
    /// `NewLeaderElector`); the Lease is `config.lease_namespace/config.lease_name`.
    ///
    /// # Errors
    ///
    /// The configuration's first failed check ([`LeaderElectionConfig::validate`]).
    pub fn new(
        client: kube::Client,
        config: LeaderElectionConfig,
        callbacks: LeaderCallbacks,
    ) -> Result<Self> {
        Self::builder(client, config, callbacks).build()
    }

    /// A [`Builder`] for options: clock, metrics, jitter seed, watchdog.
    pub fn builder(
        client: kube::Client,
        config: LeaderElectionConfig,
        callbacks: LeaderCallbacks,
    ) -> Builder {
        Builder {
            client,
            config,
            callbacks,
            clock: Arc::new(SystemClock),
            provider: None,
            seed: None,
            on_built: Vec::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &LeaderElectionConfig {
        &self.inner.config
    }

    /// Whether this candidate leads right now: true from the moment it acquires the lease until
    /// the moment leadership ends (the token `on_started_leading` got is cancelled at the same
    /// moment).
    ///
    /// client-go's `IsLeader` answers whether the last record it saw names this candidate, which
    /// stays true after a failed renewal until another holder is seen; that question is
    /// [`check`](Self::check)'s.
    pub fn is_leader(&self) -> bool {
        self.inner.observed.lock().leading
    }

    /// The holder of the lease as this candidate last saw it, `None` when it has seen none or the
    /// lease was released (client-go's `GetLeader`; informational).
    pub fn leader(&self) -> Option<String> {
        let holder = self.inner.observed.lock().record.holder_identity.clone();
        (!holder.is_empty()).then_some(holder)
    }

    /// The election record this candidate last saw or wrote.
    pub fn observed_record(&self) -> LeaderElectionRecord {
        self.inner.observed.lock().record.clone()
    }

    /// The health check (client-go's `Check`): an error when the last record this candidate saw
    /// names it as the holder but that record has not changed (been renewed) for longer than the
    /// lease duration plus `max_tolerable_expired_lease`. A process in that state should have
    /// stepped down (deadlock, a stuck runtime): a liveness probe failing on it gets it
    /// restarted. Candidates that do not lead are always healthy.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseNotRenewed`].
    pub fn check(&self, max_tolerable_expired_lease: Duration) -> Result<()> {
        let inner = &self.inner;
        let obs = inner.observed.lock();
        if obs.record.holder_identity != inner.config.identity {
            return Ok(());
        }
        let since = obs.time.map_or(Duration::MAX, |t| inner.clock.now().saturating_duration_since(t));
        if since > inner.config.lease_duration.saturating_add(max_tolerable_expired_lease) {
            return Err(Error::LeaseNotRenewed { name: inner.config.name.clone(), since });
        }
        Ok(())
    }

    /// Runs the election until leadership ends (client-go's `Run`): tries to acquire the lease
    /// until it succeeds or `cancel` fires; then calls `on_started_leading` and renews the lease
    /// until the renew deadline passes without a renewal or `cancel` fires; then cancels the
    /// leading token, releases the lease if configured, and calls `on_stopped_leading` (which is
    /// also called when it never led).
    ///
    /// A candidate that lost the lease does not try again: as with client-go, a controller
    /// usually exits then (controller-runtime does) and its replacement starts afresh. Calling
    /// `run` again is allowed and starts over with what this elector last saw.
    ///
    /// # Errors
    ///
    /// [`Error::AlreadyRunning`] when another `run` of this elector (or a clone) has not
    /// returned.
    ///
    /// # Cancel safety
    ///
    /// Cancel with `cancel`, not by dropping the future: a dropped run cancels the leading token
    /// and stops reporting itself as leader, but neither releases the lease nor calls
    /// `on_stopped_leading`.
    pub async fn run(&self, cancel: CancellationToken) -> Result<Outcome> {
        let Ok(mut lock) = self.inner.lock.try_lock() else { return Err(Error::AlreadyRunning) };
        let inner = &self.inner;
        tracing::info!(lock = %lock.describe(), identity = %inner.config.identity, "attempting to acquire leader lease");
        let Some(acquired_at) = self.acquire(&mut lock, &cancel).await else {
            (inner.callbacks.on_stopped_leading)();
            return Ok(Outcome::CancelledBeforeLeading);
        };
        let leading = cancel.child_token();
        // Ends leadership if this future is dropped: no work may outlive it.
        let guard = LeadingGuard { elector: self, token: leading.clone() };
        inner.observed.lock().leading = true;
        inner.metrics.on();
        tracing::info!(lock = %lock.describe(), identity = %inner.config.identity, "successfully acquired lease");
        (inner.callbacks.on_started_leading)(leading.clone());
        let lost = !self.renew(&mut lock, &cancel, acquired_at).await;
        // The moment leadership ends: before the release, so that nothing guarded by the lease
        // still runs when a successor can take it.
        drop(guard);
        if lost {
            tracing::info!(lock = %lock.describe(), identity = %inner.config.identity, "failed to renew lease: stopped leading");
        }
        let released = inner.config.release_on_cancel && self.release(&mut lock).await;
        self.maybe_report_transition();
        (inner.callbacks.on_stopped_leading)();
        Ok(if lost { Outcome::LeaseLost { released } } else { Outcome::Cancelled { released } })
    }

    /// Tries until the lease is acquired, and returns when the write that took it was sent;
    /// `None` when `cancel` fires first.
    async fn acquire(&self, lock: &mut LeaseLock, cancel: &CancellationToken) -> Option<Instant> {
        let inner = &self.inner;
        loop {
            if cancel.is_cancelled() {
                return None;
            }
            let acquired = tokio::select! {
                biased;
                () = cancel.cancelled() => return None,
                sent = self.try_acquire_or_renew(lock, None) => sent,
            };
            self.maybe_report_transition();
            if acquired.is_some() {
                return acquired;
            }
            tracing::debug!(lock = %lock.describe(), "failed to acquire lease");
            // `wait.JitterUntil(.., RetryPeriod, JitterFactor, sliding=true)`: the wait starts
            // after the try, and is `RetryPeriod * (1 + JitterFactor * r)`.
            let r = inner.jitter.lock().next_f64();
            let wait = inner.config.retry_period.mul_f64(1.0 + JITTER_FACTOR * r);
            tokio::select! {
                biased;
                () = cancel.cancelled() => return None,
                () = inner.clock.sleep(wait) => {}
            }
        }
    }

    /// Renews until a poll fails (false) or `cancel` fires (true). `acquired_at` is when the
    /// write that acquired the lease was sent.
    ///
    /// client-go polls with a fresh `RenewDeadline` each time (`wait.UntilWithContext` around
    /// `PollUntilContextTimeout`), `RetryPeriod` after the previous success returned. Here a
    /// poll's deadline is also never later than `RetryPeriod + RenewDeadline` after the last
    /// successful renewal was *sent*. While the process runs normally and the server answers at
    /// once this is the same instant. But the others count their `LeaseDuration` from when they
    /// saw the renewal, which was stored no earlier than it was sent: anchored there, a leader
    /// stops believing before anyone may take over whenever `RetryPeriod + RenewDeadline <
    /// LeaseDuration`, however late the answers came (client-go's margin shrinks by the latency
    /// of the last renewal's answer) and however long the process was frozen or starved (a woken
    /// leader steps down at once instead of polling for another `RenewDeadline`). The price: a
    /// renewal must be answered within about half the renew deadline instead of all of it.
    async fn renew(&self, lock: &mut LeaseLock, cancel: &CancellationToken, acquired_at: Instant) -> bool {
        let inner = &self.inner;
        let (rp, rd) = (inner.config.retry_period, inner.config.renew_deadline);
        let mut last_renewal = acquired_at;
        loop {
            let start = inner.clock.now();
            let deadline = (start + rd).min(last_renewal + rp + rd);
            let poll = self.poll_renew(lock, cancel, start, deadline).await;
            self.maybe_report_transition();
            match poll {
                Poll::Renewed(sent) => last_renewal = sent,
                Poll::Cancelled => return true,
                Poll::DeadlineExceeded => return false,
            }
            tracing::trace!(lock = %lock.describe(), "successfully renewed lease");
            tokio::select! {
                biased;
                () = cancel.cancelled() => return true,
                () = inner.clock.sleep(rp) => {}
            }
        }
    }

    /// One renew poll (`PollUntilContextTimeout(ctx, RetryPeriod, RenewDeadline, immediate)`): a
    /// try at once, then one at each tick of a `RetryPeriod` ticker started with the poll (ticks
    /// that fall while a try is under way collapse into one), until a try succeeds or the
    /// deadline passes; a try still under way at the deadline is abandoned.
    async fn poll_renew(
        &self,
        lock: &mut LeaseLock,
        cancel: &CancellationToken,
        start: Instant,
        deadline: Instant,
    ) -> Poll {
        let clock = &self.inner.clock;
        let rp = self.inner.config.retry_period;
        let mut tick = start + rp;
        loop {
            if clock.now() >= deadline {
                return Poll::DeadlineExceeded;
            }
            tokio::select! {
                biased;
                () = cancel.cancelled() => return Poll::Cancelled,
                () = sleep_until(clock.as_ref(), deadline) => return Poll::DeadlineExceeded,
                sent = self.try_acquire_or_renew(lock, Some(deadline)) => if let Some(sent) = sent { return Poll::Renewed(sent) },
            }
            tokio::select! {
                biased;
                () = cancel.cancelled() => return Poll::Cancelled,
                () = sleep_until(clock.as_ref(), deadline) => return Poll::DeadlineExceeded,
                () = sleep_until(clock.as_ref(), tick) => {}
            }
            let now = clock.now();
            while tick <= now {
                tick += rp;
            }
        }
    }

    /// One request, bounded by the request timeout and by `deadline`.
    async fn timed<T>(
        &self,
        request: impl Future<Output = std::result::Result<T, LockError>>,
        deadline: Option<Instant>,
    ) -> std::result::Result<T, LockError> {
        let clock = &self.inner.clock;
        let mut until = clock.now() + self.inner.config.effective_request_timeout();
        if let Some(d) = deadline {
            until = until.min(d);
        }
        tokio::select! {
            biased;
            () = sleep_until(clock.as_ref(), until) => Err(LockError::Timeout),
            r = request => r,
        }
    }

    /// Now, and the record this candidate would write now as holder (both `tryAcquireOrRenew`
    /// and `tryCoordinatedRenew` start from it): acquired and renewed at this instant.
    fn fresh_record(&self) -> (Instant, LeaderElectionRecord) {
        let inner = &self.inner;
        let now = inner.clock.now();
        let wall = micro_timestamp(inner.clock.wall_now());
        let record = LeaderElectionRecord {
            holder_identity: inner.config.identity.clone(),
            lease_duration_seconds: inner.config.lease_duration_seconds(),
            acquire_time: Some(wall),
            renew_time: Some(wall),
            ..Default::default()
        };
        (now, record)
    }

    /// client-go's `tryAcquireOrRenew`: whether this candidate holds the lease afterwards.
    ///
    /// On success, returns when the write that took or renewed the lease was sent: the server
    /// stored it no earlier, so the others, who count `LeaseDuration` from when they see it,
    /// cannot take the lease over before that instant plus `LeaseDuration`.
    async fn try_acquire_or_renew(&self, lock: &mut LeaseLock, deadline: Option<Instant>) -> Option<Instant> {
        if self.inner.config.coordinated {
            return self.try_coordinated_renew(lock, deadline).await;
        }
        let inner = &self.inner;
        let (now, mut record) = self.fresh_record();

        // 1. The leader's fast path: update optimistically from the record it last saw (and
        //    the resourceVersion it last wrote).
        if self.observed_holder_is_self() && self.is_lease_valid(now) {
            let old = self.observed_record();
            record.acquire_time = old.acquire_time;
            record.lease_transitions = old.lease_transitions;
            let sent = inner.clock.now();
            match self.timed(lock.update(&record), deadline).await {
                Ok(()) => {
                    self.set_observed_record(record);
                    return Some(sent);
                }
                Err(e) => {
                    self.count_conflict(&e);
                    tracing::debug!(lock = %lock.describe(), error = %e, "failed to update lease optimistically, falling back to slow path");
                }
            }
        }

        // 2. Read the lease, or create it.
        let (old, raw) = match self.timed(lock.get(), deadline).await {
            Ok(r) => r,
            Err(LockError::NotFound) => {
                let sent = inner.clock.now();
                return match self.timed(lock.create(&record), deadline).await {
                    Ok(()) => {
                        self.set_observed_record(record);
                        Some(sent)
                    }
                    Err(e) => {
                        self.report_write_error(lock, &e, "error initially creating lease lock");
                        None
                    }
                };
            }
            Err(e) => {
                tracing::warn!(lock = %lock.describe(), error = %e, "error retrieving lease lock");
                return None;
            }
        };

        // 3. A record that changed since the last read restarts the expiry clock: this is the
        //    only way another holder's renewals are seen (its timestamps are never compared with
        //    this process's clock).
        {
            let mut obs = inner.observed.lock();
            if obs.raw.as_ref() != Some(&raw) {
                obs.record = old.clone();
                obs.time = Some(inner.clock.now());
                obs.raw = Some(raw);
            }
        }
        if !old.holder_identity.is_empty() && self.is_lease_valid(now) && !self.observed_holder_is_self() {
            tracing::trace!(lock = %lock.describe(), holder = %old.holder_identity, "lease is held and has not yet expired");
            return None;
        }

        // 4. Take or renew it: the acquire time and the transition count stay while this
        //    candidate keeps the lease; a new holder counts one more transition.
        if self.observed_holder_is_self() {
            record.acquire_time = old.acquire_time;
            record.lease_transitions = old.lease_transitions;
            inner.metrics.slowpath_exercised();
        } else {
            record.lease_transitions = old.lease_transitions.saturating_add(1);
        }
        let sent = inner.clock.now();
        match self.timed(lock.update(&record), deadline).await {
            Ok(()) => {
                self.set_observed_record(record);
                Some(sent)
            }
            Err(e) => {
                self.report_write_error(lock, &e, "failed to update lease");
                None
            }
        }
    }

    /// client-go's `tryCoordinatedRenew`, the try of a coordinated candidate (acquiring and
    /// renewing alike): read the Lease (never create it: the coordinator does); fail while the
    /// Lease names another holder, has expired by this process's clock, or carries a
    /// `preferredHolder` (the coordinator's "end of term": the holder stops renewing, so its
    /// leadership ends at the renew deadline and the coordinator hands the expired Lease to the
    /// preferred candidate); else renew it as holder, keeping `acquireTime`, `leaseTransitions`
    /// and `strategy`. There is no fast path: every try reads the Lease, so the end of term is
    /// seen at the next try.
    async fn try_coordinated_renew(
        &self,
        lock: &mut LeaseLock,
        deadline: Option<Instant>,
    ) -> Option<Instant> {
        let inner = &self.inner;
        let (now, mut record) = self.fresh_record();
        let (old, raw) = match self.timed(lock.get(), deadline).await {
            Ok(r) => r,
            Err(LockError::NotFound) => {
                tracing::info!(lock = %lock.describe(), "lease lock not found");
                return None;
            }
            Err(e) => {
                tracing::warn!(lock = %lock.describe(), error = %e, "error retrieving lease lock");
                return None;
            }
        };
        let observed_time = {
            let mut obs = inner.observed.lock();
            if obs.raw.as_ref() != Some(&raw) {
                obs.record = old.clone();
                obs.time = Some(inner.clock.now());
                obs.raw = Some(raw);
            }
            obs.time
        };
        // client-go: `observedTime + leaseDurationSeconds` before `now` (taken before the read).
        let lease_duration = Duration::from_secs(u64::try_from(old.lease_duration_seconds).unwrap_or(0));
        if observed_time.is_none_or(|t| t + lease_duration < now) {
            tracing::info!(lock = %lock.describe(), "lease has expired");
            return None;
        }
        if !self.observed_holder_is_self() {
            tracing::trace!(lock = %lock.describe(), holder = %old.holder_identity, "lease is held and has not yet expired");
            return None;
        }
        if !old.preferred_holder.is_empty() {
            // The coordinator elected someone else: do not renew, so that the lease expires and
            // the coordinator can hand it over. Everything this lease guards stops at the renew
            // deadline, before it expires for anyone else.
            tracing::debug!(lock = %lock.describe(), preferred = %old.preferred_holder, "lease is marked as 'end of term'");
            return None;
        }
        record.acquire_time = old.acquire_time;
        record.lease_transitions = old.lease_transitions;
        record.strategy = old.strategy;
        inner.metrics.slowpath_exercised();
        let sent = inner.clock.now();
        match self.timed(lock.update(&record), deadline).await {
            Ok(()) => {
                self.set_observed_record(record);
                Some(sent)
            }
            Err(e) => {
                self.report_write_error(lock, &e, "failed to update lease");
                None
            }
        }
    }

    /// client-go's `release` (with `tryRelease`): within the renew deadline, read the lease and,
    /// if it still names this candidate, write an empty holder with `leaseDurationSeconds: 1`
    /// and the transitions unchanged; a conflict (an in-flight renewal raced it) reads again.
    ///
    /// client-go writes over whatever it read as long as the record it last saw named itself;
    /// this release also requires the lease as read to name it, so that a candidate that lost
    /// the lease without noticing (the server answered again only after another took over)
    /// never empties its successor's lease.
    async fn release(&self, lock: &mut LeaseLock) -> bool {
        let inner = &self.inner;
        let deadline = inner.clock.now() + inner.config.renew_deadline;
        loop {
            let old = match self.timed(lock.get(), Some(deadline)).await {
                Ok((old, _)) => old,
                Err(LockError::NotFound) => {
                    tracing::info!(lock = %lock.describe(), "lease lock not found");
                    return false;
                }
                Err(e) => {
                    tracing::warn!(lock = %lock.describe(), error = %e, "error retrieving resource lock");
                    return false;
                }
            };
            if !self.observed_holder_is_self() || old.holder_identity != inner.config.identity {
                return true;
            }
            let now = Some(micro_timestamp(inner.clock.wall_now()));
            let record = LeaderElectionRecord {
                lease_transitions: old.lease_transitions,
                lease_duration_seconds: 1,
                renew_time: now,
                acquire_time: now,
                ..Default::default()
            };
            match self.timed(lock.update(&record), Some(deadline)).await {
                Ok(()) => {
                    self.set_observed_record(record);
                    tracing::info!(lock = %lock.describe(), "released lease");
                    return true;
                }
                Err(LockError::Conflict) => {
                    inner.metrics.conflict();
                    tracing::debug!(lock = %lock.describe(), "conflict when releasing lease, retrying");
                }
                Err(e) => {
                    tracing::warn!(lock = %lock.describe(), error = %e, "failed to release lease");
                    return false;
                }
            }
        }
    }

    /// A failed create or update: a conflict is a race lost to another candidate (counted,
    /// logged at debug level: with several candidates it is routine), anything else a warning.
    fn report_write_error(&self, lock: &LeaseLock, e: &LockError, what: &str) {
        if matches!(e, LockError::Conflict) {
            self.inner.metrics.conflict();
            tracing::debug!(lock = %lock.describe(), "{what}: lost the race to another writer");
        } else {
            tracing::warn!(lock = %lock.describe(), error = %e, "{what}");
        }
    }

    fn count_conflict(&self, e: &LockError) {
        if matches!(e, LockError::Conflict) {
            self.inner.metrics.conflict();
        }
    }

    /// client-go's `maybeReportTransition`: tells `on_new_leader` when the holder seen changed.
    fn maybe_report_transition(&self) {
        let holder = {
            let mut obs = self.inner.observed.lock();
            if obs.record.holder_identity == obs.reported_leader {
                return;
            }
            obs.reported_leader = obs.record.holder_identity.clone();
            obs.reported_leader.clone()
        };
        if let Some(f) = &self.inner.callbacks.on_new_leader {
            f(&holder);
        }
    }

    /// client-go's `IsLeader`: the record last seen names this candidate.
    fn observed_holder_is_self(&self) -> bool {
        self.inner.observed.lock().record.holder_identity == self.inner.config.identity
    }

    /// client-go's `isLeaseValid`: `observedTime + leaseDurationSeconds` is after `now`.
    fn is_lease_valid(&self, now: Instant) -> bool {
        let obs = self.inner.observed.lock();
        let secs = u64::try_from(obs.record.lease_duration_seconds).unwrap_or(0);
        obs.time.is_some_and(|t| t + Duration::from_secs(secs) > now)
    }

    /// client-go's `setObservedRecord`: the record, seen now.
    fn set_observed_record(&self, record: LeaderElectionRecord) {
        let now = self.inner.clock.now();
        let mut obs = self.inner.observed.lock();
        obs.record = record;
        obs.time = Some(now);
    }
}

/// Ends leadership when dropped: cancels the leading token and stops reporting leadership.
struct LeadingGuard<'a> {
    elector: &'a LeaderElector,
    token: CancellationToken,
}

impl Drop for LeadingGuard<'_> {
    fn drop(&mut self) {
        self.token.cancel();
        let inner = &self.elector.inner;
        let mut obs = inner.observed.lock();
        if obs.leading {
            obs.leading = false;
            inner.metrics.off();
        }
    }
}

/// Sleeps on `clock` until `at` (at once if it has passed).
fn sleep_until(clock: &dyn Clock, at: Instant) -> kcache_utils::Sleep {
    clock.sleep(at.saturating_duration_since(clock.now()))
}
