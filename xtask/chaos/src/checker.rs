//! The consistency checker: compares what one handler saw for one key with the server's history
//! of that key.
//!
//! # What "consistent" means
//!
//! A handler keeps, per key, a *believed state*: absent, or present at a resourceVersion. It
//! starts absent. The server's history of a key is every write to it with its resourceVersion:
//! `ADDED`, `MODIFIED` (the *states* the key had) and `DELETED`. Global resourceVersions
//! increase strictly, so they order a key's history. A handler's log is consistent when:
//!
//! 1. **Adds** arrive only while the key is believed absent, and carry a state the key really
//!    had (an `ADDED` or `MODIFIED` resourceVersion of the key).
//! 2. **Updates** `(old, new)` arrive only while the key is believed present, with `old` equal to
//!    the believed state (the handler's view never jumps). `new` is a state the key really had.
//!    `new == old` is a resync, allowed only for a handler with a resync period.
//! 3. **Deletes** arrive only while the key is believed present, and are either
//!    * the watch's delete: the object is at the resourceVersion of the key's *first* `DELETED`
//!      after the believed state (intermediate updates may be skipped by a DeltaFIFO, but no
//!      other life of the key may be skipped over), or
//!    * a relist's delete: the object is the believed state itself, as a
//!      `DeletedFinalStateUnknown` tombstone (or as the plain last-known object).
//!
//!    A handler in [`ListenerMode::Coalescing`](kcache_informer::ListenerMode) may instead get a
//!    delete carrying any later state or deletion of the key: there "a delete supersedes pending
//!    updates", and a superseded update may itself have spanned a delete and re-create that
//!    only a relist saw (rule 2), so the informer's last known state, which the tombstone
//!    carries, can be one the handler never saw.
//! 4. **Never backwards.** Every resourceVersion a handler sees for a key is at least the
//!    previous one, and strictly greater except for resyncs; a re-add after a delete has a
//!    resourceVersion above the delete's.
//! 5. **Ends right.** After quiescence the believed state is the server's final state: present
//!    at the final resourceVersion, or absent.
//!
//! What it allows: skipped intermediate versions (after a relist, a DeltaFIFO's compression or
//! a coalescing listener), a delete and re-create collapsed into one update (both lives seen
//! only through a relist, as client-go's `Replace` reports them), adds flagged as initial-list
//! adds at any time a relist or late registration produces them, tombstones, and keys the
//! handler never heard of because they were created and deleted while it was disconnected.

use std::collections::HashMap;

/// What a handler was told about one key, in delivery order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// `on_add` with the object at this resourceVersion.
    Add(u64),
    /// `on_update(old, new)`.
    Update {
        /// The old object's resourceVersion.
        old: u64,
        /// The new object's resourceVersion.
        new: u64,
    },
    /// `on_delete`.
    Delete {
        /// The deleted object's resourceVersion (the tombstone's last known state for a
        /// tombstone).
        rv: u64,
        /// Whether it came as a `DeletedFinalStateUnknown`.
        tombstone: bool,
    },
}

/// A write in the server's history of one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerEvent {
    /// Created.
    Added,
    /// Updated.
    Modified,
    /// Deleted.
    Deleted,
}

/// The server's history of one key: `(resourceVersion, event)` in increasing resourceVersion.
#[derive(Debug, Clone, Default)]
pub struct KeyHistory {
    events: Vec<(u64, ServerEvent)>,
}

impl KeyHistory {
    /// Records a write (resourceVersions must be given in increasing order).
    pub fn push(&mut self, rv: u64, event: ServerEvent) {
        debug_assert!(self.events.last().is_none_or(|(last, _)| *last < rv));
        self.events.push((rv, event));
    }

    /// The final state: `Some(rv)` when the key exists, `None` when absent.
    pub fn final_state(&self) -> Option<u64> {
        match self.events.last() {
            Some((rv, ServerEvent::Added | ServerEvent::Modified)) => Some(*rv),
            _ => None,
        }
    }

    /// Every write, oldest first.
    pub fn events(&self) -> &[(u64, ServerEvent)] {
        &self.events
    }

    fn event_at(&self, rv: u64) -> Option<ServerEvent> {
        self.events.binary_search_by_key(&rv, |(r, _)| *r).ok().map(|i| self.events[i].1)
    }

    fn is_state(&self, rv: u64) -> bool {
        matches!(self.event_at(rv), Some(ServerEvent::Added | ServerEvent::Modified))
    }

    fn first_delete_after(&self, rv: u64) -> Option<u64> {
        let start = self.events.partition_point(|(r, _)| *r <= rv);
        self.events[start..].iter().find(|(_, e)| *e == ServerEvent::Deleted).map(|(r, _)| *r)
    }
}

/// Counts of what a consistent log contained.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogStats {
    /// Notifications checked.
    pub notifications: u64,
    /// Resyncs (`on_update(o, o)`).
    pub resyncs: u64,
    /// Tombstone deletes.
    pub tombstones: u64,
    /// Server states the handler never saw (skipped intermediate versions), counting only
    /// states older than the handler's final one.
    pub skipped: u64,
}

impl LogStats {
    /// Adds `other` into `self`.
    pub fn merge(&mut self, other: LogStats) {
        self.notifications += other.notifications;
        self.resyncs += other.resyncs;
        self.tombstones += other.tombstones;
        self.skipped += other.skipped;
    }
}

/// What a handler may legitimately see beyond the strict rules.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Allow {
    /// The handler has a resync period: `on_update(o, o)` is allowed.
    pub resync: bool,
    /// The handler's listener coalesces: a delete may carry a later state than the believed one
    /// (rule 3's exception).
    pub coalesced_deletes: bool,
}

/// Checks one handler's log for one key against the key's server history (rules 1 to 5 of the
/// module docs). `history` is `None` for a key the server never had.
///
/// # Errors
///
/// A description of the first violation.
pub fn check_key(log: &[Seen], history: Option<&KeyHistory>, allow: Allow) -> Result<LogStats, String> {
    let empty = KeyHistory::default();
    let history = history.unwrap_or(&empty);
    let mut believed: Option<u64> = None;
    let mut floor = 0u64;
    let mut stats = LogStats::default();
    let mut seen_states = std::collections::HashSet::new();
    for (i, seen) in log.iter().enumerate() {
        stats.notifications += 1;
        let at = |why: String| format!("notification #{i} {seen:?}: {why} (log {log:?}, server {history:?})");
        match *seen {
            Seen::Add(rv) => {
                if let Some(b) = believed {
                    return Err(at(format!("add while present at {b}")));
                }
                if !history.is_state(rv) {
                    return Err(at("the key never had this resourceVersion".into()));
                }
                if rv <= floor {
                    return Err(at(format!("resourceVersion went backwards (last seen {floor})")));
                }
                believed = Some(rv);
                floor = rv;
                seen_states.insert(rv);
            }
            Seen::Update { old, new } => {
                if believed != Some(old) {
                    return Err(at(format!("old object is not the believed state {believed:?}")));
                }
                if new == old {
                    if !allow.resync {
                        return Err(at("resync delivered to a handler without a resync period".into()));
                    }
                    stats.resyncs += 1;
                    continue;
                }
                if !history.is_state(new) {
                    return Err(at("the key never had the new resourceVersion".into()));
                }
                if new < old {
                    return Err(at("resourceVersion went backwards".into()));
                }
                believed = Some(new);
                floor = new;
                seen_states.insert(new);
            }
            Seen::Delete { rv, tombstone } => {
                let Some(b) = believed else {
                    return Err(at("delete while absent".into()));
                };
                if rv < b {
                    return Err(at(format!("deleted object is older than the believed state {b}")));
                }
                if allow.coalesced_deletes {
                    let later_state = history.is_state(rv);
                    let deletion = history.event_at(rv) == Some(ServerEvent::Deleted);
                    if !(later_state || (deletion && !tombstone)) {
                        return Err(at("the key never had the deleted object's resourceVersion".into()));
                    }
                    stats.tombstones += u64::from(tombstone);
                } else if tombstone {
                    if rv != b {
                        return Err(at(format!("tombstone is not the last known state {b}")));
                    }
                    stats.tombstones += 1;
                } else if rv != b && history.first_delete_after(b) != Some(rv) {
                    return Err(at(format!(
                        "deleted object is neither the believed state {b} nor the first delete after it ({:?})",
                        history.first_delete_after(b)
                    )));
                }
                believed = None;
                floor = floor.max(rv);
            }
        }
    }
    let expected = history.final_state();
    if believed != expected {
        return Err(format!(
            "ends at {believed:?}, server final state {expected:?} (log {log:?}, server {history:?})"
        ));
    }
    let last = believed.unwrap_or(floor);
    stats.skipped = history
        .events()
        .iter()
        .filter(|(rv, e)| *e != ServerEvent::Deleted && *rv <= last && !seen_states.contains(rv))
        .count() as u64;
    Ok(stats)
}

/// Checks every key of one handler. `in_scope` says which keys the handler's informer watches;
/// keys outside it must not appear at all. Returns the summed statistics and up to `max_errors`
/// violations (and how many there were).
pub fn check_handler(
    logs: &HashMap<String, Vec<Seen>>,
    histories: &HashMap<String, KeyHistory>,
    in_scope: impl Fn(&str) -> bool,
    allow: Allow,
) -> (LogStats, Vec<String>) {
    let mut stats = LogStats::default();
    let mut errors = Vec::new();
    for (key, history) in histories.iter().filter(|(k, _)| in_scope(k)) {
        let log = logs.get(key).map(Vec::as_slice).unwrap_or_default();
        match check_key(log, Some(history), allow) {
            Ok(s) => stats.merge(s),
            Err(e) => errors.push(format!("{key}: {e}")),
        }
    }
    for (key, log) in logs {
        if !log.is_empty() && (!in_scope(key) || !histories.contains_key(key)) {
            errors.push(format!("{key}: notifications for a key outside the informer's scope: {log:?}"));
        }
    }
    errors.sort();
    (stats, errors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ServerEvent::*;

    const STRICT: Allow = Allow { resync: false, coalesced_deletes: false };

    fn history(events: &[(u64, ServerEvent)]) -> KeyHistory {
        let mut h = KeyHistory::default();
        for &(rv, e) in events {
            h.push(rv, e);
        }
        h
    }

    #[test]
    fn every_event_in_order_is_consistent() {
        let h = history(&[(2, Added), (5, Modified), (9, Deleted), (12, Added)]);
        let log = [
            Seen::Add(2),
            Seen::Update { old: 2, new: 5 },
            Seen::Delete { rv: 9, tombstone: false },
            Seen::Add(12),
        ];
        assert_eq!(check_key(&log, Some(&h), STRICT).map(|s| s.notifications), Ok(4));
    }

    #[test]
    fn skipped_versions_and_tombstones_are_allowed() {
        let h = history(&[(2, Added), (5, Modified), (7, Modified), (9, Deleted)]);
        let log = [Seen::Add(2), Seen::Update { old: 2, new: 7 }, Seen::Delete { rv: 7, tombstone: true }];
        let stats = check_key(&log, Some(&h), STRICT).unwrap();
        assert_eq!((stats.tombstones, stats.skipped), (1, 1));
        // A coalesced delete skips the intermediate update.
        let log = [Seen::Add(2), Seen::Delete { rv: 9, tombstone: false }];
        assert!(check_key(&log, Some(&h), STRICT).is_ok());
    }

    #[test]
    fn delete_and_recreate_seen_as_one_update_is_allowed() {
        let h = history(&[(2, Added), (4, Deleted), (6, Added)]);
        let log = [Seen::Add(2), Seen::Update { old: 2, new: 6 }];
        assert!(check_key(&log, Some(&h), STRICT).is_ok());
    }

    #[test]
    fn violations_are_reported() {
        let h = history(&[(2, Added), (5, Modified), (9, Deleted), (12, Added), (15, Deleted)]);
        // Missing the final delete.
        assert!(check_key(&[Seen::Add(2)], Some(&h), STRICT).is_err());
        // Going backwards.
        let log = [Seen::Add(5), Seen::Update { old: 5, new: 2 }];
        assert!(check_key(&log, Some(&h), STRICT).is_err());
        // Update from a state the handler does not have.
        let log = [Seen::Add(2), Seen::Update { old: 5, new: 12 }];
        assert!(check_key(&log, Some(&h), STRICT).is_err());
        // A resync without a resync period.
        let log = [Seen::Add(2), Seen::Update { old: 2, new: 2 }, Seen::Delete { rv: 2, tombstone: true }];
        assert!(check_key(&log, Some(&h), STRICT).is_err());
        assert!(check_key(&log, Some(&h), Allow { resync: true, ..STRICT }).is_ok());
        // A watch delete of a later life than the believed one.
        let log = [Seen::Add(2), Seen::Delete { rv: 15, tombstone: false }];
        assert!(check_key(&log, Some(&h), STRICT).is_err());
        // A version the key never had.
        let log = [Seen::Add(3), Seen::Delete { rv: 3, tombstone: true }];
        assert!(check_key(&log, Some(&h), STRICT).is_err());
        // Add while present.
        let log = [Seen::Add(2), Seen::Add(12), Seen::Delete { rv: 15, tombstone: false }];
        assert!(check_key(&log, Some(&h), STRICT).is_err());
    }

    #[test]
    fn coalesced_deletes_may_carry_a_later_state() {
        // A relist saw the re-created key (an update across lives), then the watch its delete;
        // the coalescing listener delivered only the delete.
        let h = history(&[(2, Added), (4, Deleted), (6, Added), (8, Deleted)]);
        let log = [Seen::Add(2), Seen::Delete { rv: 8, tombstone: false }];
        assert!(check_key(&log, Some(&h), STRICT).is_err());
        let coalescing = Allow { coalesced_deletes: true, ..STRICT };
        assert!(check_key(&log, Some(&h), coalescing).is_ok());
        let log = [Seen::Add(2), Seen::Delete { rv: 6, tombstone: true }];
        assert!(check_key(&log, Some(&h), coalescing).is_ok());
        // Still never backwards, and never a version the key did not have.
        let log = [Seen::Add(6), Seen::Delete { rv: 4, tombstone: false }];
        assert!(check_key(&log, Some(&h), coalescing).is_err());
        let log = [Seen::Add(2), Seen::Delete { rv: 7, tombstone: false }];
        assert!(check_key(&log, Some(&h), coalescing).is_err());
    }

    #[test]
    fn keys_outside_the_scope_are_violations() {
        let mut histories = HashMap::new();
        histories.insert("a/x".to_owned(), history(&[(2, Added)]));
        histories.insert("b/y".to_owned(), history(&[(3, Added)]));
        let mut logs = HashMap::new();
        logs.insert("a/x".to_owned(), vec![Seen::Add(2)]);
        logs.insert("b/y".to_owned(), vec![Seen::Add(3)]);
        let (_, errors) = check_handler(&logs, &histories, |k| k.starts_with("a/"), STRICT);
        assert_eq!(errors.len(), 1);
        let (_, errors) = check_handler(&logs, &histories, |_| true, STRICT);
        assert!(errors.is_empty());
    }
}
