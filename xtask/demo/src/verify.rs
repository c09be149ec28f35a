//! The end of a run: wait until the pipeline is quiet and the cache equals the server, then check
//! what the controller and the handlers saw against what the churn did.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kcache_store::meta_namespace_key;
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use tokio::time::Instant;

use crate::controller::Reconciler;
use crate::snapshot::{Probe, Snapshot};

/// `namespace/name` -> resourceVersion.
pub(crate) type Versions = BTreeMap<String, String>;

/// How often the settle loop looks.
const POLL: Duration = Duration::from_millis(100);
/// Consecutive quiet looks needed.
const QUIET_LOOKS: u32 = 3;
/// Bound on one list call.
const LIST_TIMEOUT: Duration = Duration::from_secs(15);

/// The outcome of [`settle`].
#[derive(Debug)]
pub(crate) struct Settled {
    /// Whether everything was quiet and the cache matched the server before the timeout.
    pub(crate) quiet: bool,
    /// Why not, at the last look.
    pub(crate) reasons: Vec<String>,
    /// The server's list at the last look (empty if none was taken).
    pub(crate) server: Versions,
    /// How long it took.
    pub(crate) took: Duration,
}

/// Waits (at most `timeout`) until the workqueue is empty with nothing in flight or delayed,
/// every handler has caught up, and the informer's cache equals a fresh list of the namespace
/// (same names, same resourceVersions), for [`QUIET_LOOKS`] looks in a row.
pub(crate) async fn settle(probe: &Probe, api: &Api<ConfigMap>, timeout: Duration) -> Settled {
    let start = Instant::now();
    let mut quiet_looks = 0;
    loop {
        let snap = probe.snapshot();
        let mut reasons = busy_reasons(&snap);
        let mut server = Versions::new();
        if reasons.is_empty() {
            match tokio::time::timeout(LIST_TIMEOUT, api.list(&ListParams::default())).await {
                Ok(Ok(list)) => {
                    server = versions(&list.items);
                    reasons.extend(compare_cache(&server, &cache_versions(probe)));
                }
                Ok(Err(e)) => reasons.push(format!("listing the namespace failed: {e}")),
                Err(_) => reasons.push(format!("listing the namespace took over {LIST_TIMEOUT:?}")),
            }
        }
        if reasons.is_empty() {
            quiet_looks += 1;
            if quiet_looks >= QUIET_LOOKS {
                return Settled { quiet: true, reasons, server, took: start.elapsed() };
            }
        } else {
            quiet_looks = 0;
        }
        if start.elapsed() >= timeout {
            return Settled { quiet: false, reasons, server, took: start.elapsed() };
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Why the pipeline is not quiet yet (empty: it is).
fn busy_reasons(s: &Snapshot) -> Vec<String> {
    let mut r = Vec::new();
    if s.fifo_len > 0 {
        r.push(format!("{} deltas still in the informer's FIFO", s.fifo_len));
    }
    if s.queue_len > 0 {
        r.push(format!("workqueue depth {}", s.queue_len));
    }
    if s.queue_delayed > 0 {
        r.push(format!(
            "{} retries waiting for their backoff (the default controller rate limiter lets 10 retries/s \
             through overall, after a burst of 100; lower --failure-rate or --rate)",
            s.queue_delayed
        ));
    }
    if s.in_flight > 0 {
        r.push(format!("{} reconciles in flight", s.in_flight));
    }
    for l in &s.listeners {
        if l.pending > 0 {
            r.push(format!("handler {} has {} pending notifications", l.name, l.pending));
        }
    }
    // Every handler was added before the informer started, so all receive the same
    // notifications: equal delivered counts mean none is in the middle of one.
    let delivered: Vec<u64> = s.listeners.iter().map(|l| l.delivered).collect();
    if delivered.windows(2).any(|w| w[0] != w[1]) {
        let parts: Vec<String> = s.listeners.iter().map(|l| format!("{} {}", l.name, l.delivered)).collect();
        r.push(format!("handlers have not all received the same notifications ({})", parts.join(", ")));
    }
    r
}

/// Keys and resourceVersions of a list.
pub(crate) fn versions<'a>(items: impl IntoIterator<Item = &'a ConfigMap>) -> Versions {
    items
        .into_iter()
        .map(|cm| {
            let key = meta_namespace_key(&cm.namespace().unwrap_or_default(), &cm.name_any());
            (key, cm.resource_version().unwrap_or_default())
        })
        .collect()
}

fn cache_versions(probe: &Probe) -> Versions {
    let cached = probe.informer.lister().list();
    versions(cached.iter().map(|cm| &**cm))
}

/// Differences between the server's list and the cache (empty: equal).
pub(crate) fn compare_cache(server: &Versions, cache: &Versions) -> Vec<String> {
    let missing: Vec<&String> = server.keys().filter(|k| !cache.contains_key(*k)).collect();
    let extra: Vec<&String> = cache.keys().filter(|k| !server.contains_key(*k)).collect();
    let stale: Vec<&String> =
        server.iter().filter(|(k, rv)| cache.get(*k).is_some_and(|c| c != *rv)).map(|(k, _)| k).collect();
    let mut r = Vec::new();
    if !missing.is_empty() {
        r.push(format!(
            "{} objects on the server missing from the cache: {}",
            missing.len(),
            sample(&missing)
        ));
    }
    if !extra.is_empty() {
        r.push(format!("{} objects in the cache but not on the server: {}", extra.len(), sample(&extra)));
    }
    if !stale.is_empty() {
        r.push(format!("{} cached objects at another resourceVersion: {}", stale.len(), sample(&stale)));
    }
    r
}

/// The checks after the pipeline settled: every existing object's final resourceVersion was
/// reconciled; every key deleted at the end was reconciled as absent; every delete the churn made
/// was seen by the statistics handler.
pub(crate) fn check_churn(
    server: &Versions,
    reconciler: &Reconciler,
    deletes_made: &HashMap<String, u64>,
    deletes_seen: &HashMap<String, u64>,
) -> Vec<String> {
    let mut r = Vec::new();
    let unreconciled: Vec<&String> =
        server.iter().filter(|(k, rv)| !reconciler.reconciled_at(k, rv)).map(|(k, _)| k).collect();
    if !unreconciled.is_empty() {
        r.push(format!(
            "{} objects whose final resourceVersion was never reconciled: {}",
            unreconciled.len(),
            sample(&unreconciled)
        ));
    }
    let mut gone: Vec<&String> = deletes_made.keys().filter(|k| !server.contains_key(*k)).collect();
    gone.sort();
    let not_absent: Vec<&String> =
        gone.iter().copied().filter(|k| !reconciler.reconciled_absent_key(k)).collect();
    if !not_absent.is_empty() {
        r.push(format!(
            "{} deleted objects never reconciled as gone: {}",
            not_absent.len(),
            sample(&not_absent)
        ));
    }
    let mut unseen: Vec<String> = deletes_made
        .iter()
        .filter_map(|(k, made)| {
            let seen = deletes_seen.get(k).copied().unwrap_or(0);
            (seen < *made).then(|| format!("{k} ({seen} of {made})"))
        })
        .collect();
    unseen.sort();
    if !unseen.is_empty() {
        let refs: Vec<&String> = unseen.iter().collect();
        r.push(format!(
            "{} objects with deletes the stats handler did not see: {}",
            unseen.len(),
            sample(&refs)
        ));
    }
    r
}

/// At most five keys, for messages.
fn sample(keys: &[&String]) -> String {
    let mut s: Vec<&str> = keys.iter().take(5).map(|k| k.as_str()).collect();
    if keys.len() > 5 {
        s.push("...");
    }
    s.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(pairs: &[(&str, &str)]) -> Versions {
        pairs.iter().map(|(k, rv)| ((*k).to_owned(), (*rv).to_owned())).collect()
    }

    #[test]
    fn compare_cache_reports_each_kind_of_difference() {
        let server = v(&[("ns/a", "1"), ("ns/b", "2"), ("ns/c", "3")]);
        assert!(compare_cache(&server, &server).is_empty());
        let cache = v(&[("ns/a", "1"), ("ns/b", "9"), ("ns/d", "4")]);
        let r = compare_cache(&server, &cache);
        assert_eq!(r.len(), 3, "{r:?}");
        assert!(r[0].contains("ns/c") && r[1].contains("ns/d") && r[2].contains("ns/b"), "{r:?}");
    }
}
