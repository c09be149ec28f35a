//! Coordinated leader election (KEP-4355) as kube-apiserver v1.36 serves it with the
//! `CoordinatedLeaderElection` gate on: the coordination.k8s.io/v1beta1 `leasecandidates`
//! registry's validation (kubernetes `pkg/apis/coordination/validation`) and a minimal
//! coordinator, the counterpart of kube-apiserver's `leader-election-controller`
//! (`pkg/controlplane/controller/leaderelection`).
//!
//! The coordinator keeps kube-apiserver's state machine and constants. For every Lease named by a
//! LeaseCandidate's `spec.leaseName` it decides whether an election is needed (no Lease, no
//! holder, the Lease expired by its `renewTime`, or a better candidate than the holder); then it
//! pings the candidates that have not renewed within the election duration (sets `pingTime`),
//! waits until they answered (`renewTime >= pingTime`) or the election duration passed, and
//! elects the best candidate that answered: the oldest `emulationVersion`, then the oldest
//! `binaryVersion`, then the oldest `creationTimestamp`, then the name (kube-apiserver's
//! `compare` keeps the first of two equal candidates in its lister's order, by name here). It
//! creates the Lease with that holder, or writes the holder into a Lease without one (or an
//! expired one), or, when another candidate holds a valid Lease, sets `preferredHolder` so that the
//! holder steps down at the end of its term.
//!
//! Differences: kube-apiserver's controller reacts to informer events through a workqueue (a
//! requeue every 5 s); this one runs a step for every Lease on every write to the store and every
//! 5 s on the server's clock, under the store's lock, so its writes never conflict. Its times
//! (`pingTime`, expiry) come from the server's clock ([`Clock::wall_now`](kcache_utils::Clock)),
//! so a test that shares one clock between the server and the candidates is deterministic.
//! Candidates are never garbage-collected (kube-apiserver's `leasecandidategc` deletes those not
//! renewed for 30 minutes; here they only stop counting).

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Map, Value, json};

use crate::resources::{COORDINATION_GROUP, ResourceDef};
use crate::state::Shared;
use crate::status::ApiError;
use crate::store::Store;

/// The only strategy kube-apiserver's coordinator elects with.
pub(crate) const OLDEST_EMULATION_VERSION: &str = "OldestEmulationVersion";
/// `defaultRequeueInterval`: how often a Lease is looked at without events.
const REQUEUE_INTERVAL: Duration = Duration::from_secs(5);
/// `electionDuration`: how long candidates have to answer a ping, and how recent a renewal
/// counts as an answer.
const ELECTION_DURATION_MICROS: i64 = 5_000_000;
/// `defaultLeaseDurationSeconds` of a Lease the coordinator writes.
const LEASE_DURATION_SECONDS: i64 = 5;
/// `leaseCandidateValidDuration`: a candidate not renewed for this long no longer counts; one not
/// renewed for half of it forces an election (which pings it).
const CANDIDATE_VALID_MICROS: i64 = 30 * 60 * 1_000_000;

/// The coordination.k8s.io/v1beta1 `leasecandidates` resource (`AllowUnconditionalUpdate` false,
/// `AllowCreateOnUpdate` true, as the registry's strategy).
pub(crate) fn lease_candidates() -> ResourceDef {
    ResourceDef {
        version: "v1beta1".into(),
        delete_returns_object: false,
        has_generation: false,
        allow_unconditional_update: false,
        allow_create_on_update: true,
        status_subresource: false,
        ..ResourceDef::new(COORDINATION_GROUP, "v1beta1", "leasecandidates", "LeaseCandidate", true)
    }
}

/// `ValidateLeaseCandidateSpec` (and, on update, `ValidateLeaseCandidateSpecUpdate`): the 422
/// kube-apiserver answers, every field error at once.
pub(crate) fn validate(
    def: &ResourceDef,
    name: &str,
    obj: &Map<String, Value>,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    let empty = Map::new();
    let spec = obj.get("spec").and_then(Value::as_object).unwrap_or(&empty);
    let text = |field: &str| spec.get(field).and_then(Value::as_str).unwrap_or_default().to_string();
    let mut causes: Vec<(&str, &str, String)> = Vec::new();
    let lease_name = text("leaseName");
    if lease_name.is_empty() {
        causes.push(("FieldValueRequired", "spec.leaseName", "Required value".into()));
    }
    let ev = text("emulationVersion");
    let ev_parsed = semver(&ev);
    if !ev.is_empty() && ev_parsed.is_none() {
        causes.push((
            "FieldValueInvalid",
            "spec.emulationVersion",
            format!("Invalid value: {ev:?}: must be a valid semantic version"),
        ));
    }
    let bv = text("binaryVersion");
    let bv_parsed = semver(&bv);
    if bv.is_empty() {
        causes.push(("FieldValueRequired", "spec.binaryVersion", "Required value".into()));
    } else if bv_parsed.is_none() {
        causes.push((
            "FieldValueInvalid",
            "spec.binaryVersion",
            format!("Invalid value: {bv:?}: must be a valid semantic version"),
        ));
    }
    if !bv.is_empty() && !ev.is_empty() && bv_parsed.unwrap_or_default() < ev_parsed.unwrap_or_default() {
        causes.push((
            "FieldValueInvalid",
            "spec.binaryVersion",
            format!("Invalid value: {bv:?}: must be greater than or equal to `emulationVersion`"),
        ));
    }
    let strategy = text("strategy");
    if strategy.is_empty() {
        causes.push(("FieldValueRequired", "spec.strategy", "Required value".into()));
    } else {
        if strategy == OLDEST_EMULATION_VERSION && ev_parsed.unwrap_or_default() == [0, 0, 0] {
            causes.push((
                "FieldValueRequired",
                "spec.emulationVersion",
                "Required value: must be specified when `strategy` is 'OldestEmulationVersion'".into(),
            ));
        }
        // Custom strategies are qualified names (`example.com/my-strategy`), left to others.
        if !strategy.contains('/') && strategy != OLDEST_EMULATION_VERSION {
            causes.push((
                "FieldValueNotSupported",
                "spec.strategy.strategy",
                format!("Unsupported value: {strategy:?}: supported values: \"OldestEmulationVersion\""),
            ));
        }
    }
    if let Some(old) = old {
        let old_name = old["spec"]["leaseName"].as_str().unwrap_or_default();
        if old_name != lease_name {
            causes.push((
                "FieldValueInvalid",
                "spec.leaseName",
                format!("Invalid value: {lease_name:?}: field is immutable"),
            ));
        }
    }
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid(&def.group, &def.kind, name, &causes))
}

/// `semver.ParseTolerant` for what candidates publish: `major.minor.patch` (a leading `v`, missing
/// minor or patch, and a pre-release or build suffix tolerated, the suffix ignored).
fn semver(s: &str) -> Option<[u64; 3]> {
    let s = s.trim().trim_start_matches('v');
    let core = s.split(['-', '+']).next()?;
    let mut v = [0u64; 3];
    let mut parts = core.split('.');
    for slot in &mut v {
        match parts.next() {
            Some(p) => *slot = p.parse().ok()?,
            None => break,
        }
    }
    if parts.next().is_some() || core.is_empty() {
        return None;
    }
    Some(v)
}

/// Runs the coordinator until the server shuts down: a step for every Lease with candidates,
/// after every write to the store and every [`REQUEUE_INTERVAL`].
pub(crate) async fn run(shared: Arc<Shared>) {
    let mut writes = shared.rv_tx.subscribe();
    loop {
        step_all(&shared);
        writes.mark_unchanged();
        tokio::select! {
            () = shared.shutdown.cancelled() => return,
            r = writes.changed() => if r.is_err() { return },
            () = shared.clock.sleep(REQUEUE_INTERVAL) => {}
        }
    }
}

/// One election step for every Lease some candidate names, under the store's lock.
fn step_all(shared: &Shared) {
    let now = micros(shared.clock.wall_now());
    let mut store = shared.store.lock();
    let Some(candidates_res) = store.lookup(COORDINATION_GROUP, "v1beta1", "leasecandidates") else { return };
    let Some(leases_res) = store.lookup(COORDINATION_GROUP, "v1", "leases") else { return };
    let leases: BTreeSet<(String, String)> = store.resources[candidates_res]
        .objects
        .values()
        .filter_map(|o| {
            let v = o.value();
            let lease = v["spec"]["leaseName"].as_str()?.to_string();
            Some((o.namespace.to_string(), lease))
        })
        .collect();
    let before = store.rv;
    for (namespace, lease) in leases {
        step(&mut store, candidates_res, leases_res, &namespace, &lease, now);
    }
    let after = store.rv;
    drop(store);
    if after != before {
        shared.notify(after);
    }
}

/// A candidate as the coordinator reads it.
struct Candidate {
    name: String,
    value: Value,
    emulation: Option<[u64; 3]>,
    binary: Option<[u64; 3]>,
    created: String,
    strategy: String,
    ping: Option<i64>,
    renew: Option<i64>,
}

impl Candidate {
    fn from_value(value: Value) -> Self {
        let spec = &value["spec"];
        let time = |f: &str| spec[f].as_str().and_then(parse_micros);
        Candidate {
            name: value["metadata"]["name"].as_str().unwrap_or_default().to_string(),
            emulation: spec["emulationVersion"].as_str().and_then(semver),
            binary: spec["binaryVersion"].as_str().and_then(semver),
            created: value["metadata"]["creationTimestamp"].as_str().unwrap_or_default().to_string(),
            strategy: spec["strategy"].as_str().unwrap_or_default().to_string(),
            ping: time("pingTime"),
            renew: time("renewTime"),
            value,
        }
    }

    /// kube-apiserver's `compare`: `Less` when `self` is the better leader.
    fn compare(&self, other: &Candidate) -> Ordering {
        let zero = [0, 0, 0];
        self.emulation
            .unwrap_or(zero)
            .cmp(&other.emulation.unwrap_or(zero))
            .then(self.binary.unwrap_or(zero).cmp(&other.binary.unwrap_or(zero)))
            // RFC 3339 in UTC at second precision sorts as it reads.
            .then(self.created.cmp(&other.created))
            .then(self.name.cmp(&other.name))
    }
}

/// `pickBestStrategy`: the strategy of the candidate with the newest binary version; `None` when
/// two candidates at the same binary version disagree.
fn best_strategy(candidates: &[&Candidate]) -> Option<String> {
    let first = candidates.first()?;
    let (mut strategy, mut highest) = (first.strategy.clone(), first.binary.unwrap_or_default());
    for c in &candidates[1..] {
        let bv = c.binary.unwrap_or_default();
        match highest.cmp(&bv) {
            Ordering::Less => (strategy, highest) = (c.strategy.clone(), bv),
            Ordering::Equal if c.strategy != strategy => return None,
            _ => {}
        }
    }
    Some(strategy)
}

/// `pickBestLeaderOldestEmulationVersion`.
fn best_leader<'a>(candidates: &[&'a Candidate]) -> Option<&'a Candidate> {
    candidates
        .iter()
        .copied()
        .filter(|c| c.emulation.is_some() && c.binary.is_some())
        .min_by(|a, b| a.compare(b))
}

/// kube-apiserver's `reconcileElectionStep` for the Lease `namespace/lease`.
fn step(store: &mut Store, candidates_res: usize, leases_res: usize, namespace: &str, lease: &str, now: i64) {
    // `listAdmissableCandidates`: this Lease's candidates renewed within the valid duration.
    let candidates: Vec<Candidate> = store.resources[candidates_res]
        .objects
        .iter()
        .filter(|((ns, _), _)| ns.as_str() == namespace)
        .map(|(_, o)| Candidate::from_value(o.value()))
        .filter(|c| c.value["spec"]["leaseName"] == lease)
        .filter(|c| c.renew.is_some_and(|r| r + CANDIDATE_VALID_MICROS >= now))
        .collect();
    if candidates.is_empty() {
        return;
    }
    let all: Vec<&Candidate> = candidates.iter().collect();
    let key = (namespace.to_string(), lease.to_string());
    let existing = store.get(leases_res, &key).map(|o| o.value());
    if !election_needed(&all, existing.as_ref(), now) {
        return;
    }

    // Ping the candidates that have not renewed within the election duration, unless a ping is
    // still unanswered; wait while any ping is unanswered and recent.
    let mut can_vote = true;
    let mut pings = Vec::new();
    for c in &candidates {
        let (ping, renew) = (c.ping, c.renew.unwrap_or(i64::MIN));
        if let Some(p) = ping
            && p + ELECTION_DURATION_MICROS > now
            && renew < p
        {
            can_vote = false;
            continue;
        }
        if renew + ELECTION_DURATION_MICROS > now {
            continue;
        }
        if ping.is_none_or(|p| p + ELECTION_DURATION_MICROS < now && renew >= p) {
            let mut v = c.value.clone();
            v["spec"]["pingTime"] = micro_time(now);
            pings.push(v);
            can_vote = false;
        }
    }
    for v in pings {
        store.put(candidates_res, v);
    }
    if !can_vote {
        return;
    }
    if candidates.iter().any(|c| {
        c.ping.is_some_and(|p| c.renew.unwrap_or(i64::MIN) < p && p + ELECTION_DURATION_MICROS > now)
    }) {
        return;
    }
    let acked: Vec<&Candidate> =
        candidates.iter().filter(|c| c.renew.is_some_and(|r| r + ELECTION_DURATION_MICROS > now)).collect();
    let Some(strategy) = best_strategy(&acked) else { return };
    let electee = if strategy == OLDEST_EMULATION_VERSION {
        match best_leader(&acked) {
            Some(c) => Some(c.name.clone()),
            None => return,
        }
    } else {
        // Another strategy is someone else's to run; the Lease is created without a holder.
        None
    };

    let Some(mut lease_value) = existing else {
        let mut spec = json!({
            "strategy": strategy,
            "leaseDurationSeconds": LEASE_DURATION_SECONDS,
            "renewTime": micro_time(now),
        });
        if let Some(e) = &electee {
            spec["holderIdentity"] = json!(e);
        }
        let lease_value = json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": lease,
                "namespace": namespace,
                "uid": crate::util::new_uid(),
                "creationTimestamp": crate::util::rfc3339_now(),
            },
            "spec": spec,
        });
        tracing::debug!(%namespace, %lease, holder = ?electee, "coordinator: created lease");
        store.put(leases_res, lease_value);
        return;
    };
    let orig = lease_value.clone();
    let spec = &mut lease_value["spec"];
    if !spec.is_object() {
        *spec = json!({});
    }
    let holder = spec["holderIdentity"].as_str().unwrap_or_default().to_string();
    let expired = lease_expired(spec, now);
    if spec["strategy"].as_str() != Some(strategy.as_str()) {
        spec["strategy"] = json!(strategy);
    }
    if let Some(e) = &electee {
        if holder.is_empty() || (expired && holder != *e) {
            let map = spec.as_object_mut().expect("an object");
            map.remove("preferredHolder");
            map.remove("acquireTime");
            map.insert("holderIdentity".into(), json!(e));
            map.insert("renewTime".into(), micro_time(now));
            map.insert("leaseDurationSeconds".into(), json!(LEASE_DURATION_SECONDS));
            tracing::debug!(%namespace, %lease, holder = %e, "coordinator: lease without a valid holder, elected");
        } else if holder != *e {
            spec["preferredHolder"] = json!(e);
            tracing::debug!(%namespace, %lease, %holder, preferred = %e, "coordinator: marked the end of term");
        }
    }
    if lease_value != orig {
        store.put(leases_res, lease_value);
    }
}

/// kube-apiserver's `electionNeeded`.
fn election_needed(candidates: &[&Candidate], lease: Option<&Value>, now: i64) -> bool {
    let Some(lease) = lease else { return true };
    let holder = lease["spec"]["holderIdentity"].as_str().unwrap_or_default();
    if lease_expired(&lease["spec"], now) || holder.is_empty() {
        return true;
    }
    // Every 15 minutes an election refreshes every candidate (which keeps them from expiring).
    if candidates.iter().any(|c| c.renew.is_some_and(|r| r + CANDIDATE_VALID_MICROS / 2 < now)) {
        return true;
    }
    if best_strategy(candidates).as_deref() != Some(OLDEST_EMULATION_VERSION) {
        return false;
    }
    best_leader(candidates).is_some_and(|best| best.name != holder)
}

/// kube-apiserver's `isLeaseExpired`: judged by the Lease's `renewTime` on the server's clock
/// (the coordinator runs next to the store, so its clock is the one that matters).
fn lease_expired(spec: &Value, now: i64) -> bool {
    let renew = spec["renewTime"].as_str().and_then(parse_micros);
    let duration = spec["leaseDurationSeconds"].as_i64();
    match (renew, duration) {
        (Some(r), Some(d)) => r + d * 1_000_000 < now,
        _ => true,
    }
}

/// Microseconds since the Unix epoch.
fn micros(t: SystemTime) -> i64 {
    let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

fn parse_micros(s: &str) -> Option<i64> {
    s.parse::<Timestamp>().ok().map(|t| t.as_microsecond())
}

/// A MicroTime as kube-apiserver writes it.
fn micro_time(micros: i64) -> Value {
    let t = Timestamp::from_microsecond(micros).unwrap_or(Timestamp::UNIX_EPOCH);
    serde_json::to_value(MicroTime(t)).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_tolerantly() {
        assert_eq!(semver("1.36.3"), Some([1, 36, 3]));
        assert_eq!(semver("v1.30"), Some([1, 30, 0]));
        assert_eq!(semver("1.31.0-alpha.1+abc"), Some([1, 31, 0]));
        assert_eq!(semver("one"), None);
        assert_eq!(semver(""), None);
    }

    fn candidate(name: &str, ev: &str, bv: &str) -> Candidate {
        Candidate::from_value(json!({
            "metadata": {"name": name, "creationTimestamp": "2026-12-07T10:00:00Z"},
            "spec": {"emulationVersion": ev, "binaryVersion": bv, "strategy": OLDEST_EMULATION_VERSION},
        }))
    }

    /// kube-apiserver's `TestPickBestLeaderOldestEmulationVersion`: the oldest emulation
    /// version wins, then the oldest binary version; here the name breaks the last tie.
    #[test]
    fn the_oldest_emulation_version_then_binary_version_then_name_wins() {
        let (a, b, c) = (
            candidate("a", "1.31.0", "1.31.0"),
            candidate("b", "1.30.0", "1.32.0"),
            candidate("c", "1.30.0", "1.31.0"),
        );
        assert_eq!(best_leader(&[&a, &b, &c]).map(|c| c.name.as_str()), Some("c"));
        let (d, e) = (candidate("e", "1.30.0", "1.31.0"), candidate("d", "1.30.0", "1.31.0"));
        assert_eq!(best_leader(&[&d, &e]).map(|c| c.name.as_str()), Some("d"));
    }
}
