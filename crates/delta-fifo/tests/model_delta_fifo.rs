//! Property test: `DeltaFifo` against a small reference model written from the semantics list of
//! issue 4 and client-go's `delta_fifo.go` doc comments (not from the implementation). Random
//! add/update/delete/replace/resync/pop sequences; after every step the popped item, the queued
//! keys, the depth and `has_synced` must agree.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use common::*;
use kcache_delta_fifo::DeltaType::{self, Deleted, Replaced, Sync};
use kcache_delta_fifo::{DeltaFifo, DeltaFifoOptions, Deltas, FifoError};
use proptest::prelude::*;

/// A model delta: type, tombstone key if a tombstone, object (name, value).
type MDelta = Flat;

#[derive(Default)]
struct Model {
    queue: Vec<String>,
    items: BTreeMap<String, Vec<MDelta>>,
    known: BTreeMap<String, i64>,
    populated: bool,
    initial: usize,
    emit_replaced: bool,
}

impl Model {
    /// "Per-key deltas oldest first; a queue of keys without duplicates" and the dedup rule: only
    /// the newest two, only when both are deletions, keep the one that is not a tombstone (the
    /// older when neither is; the newer when both are).
    fn push(&mut self, key: &str, d: MDelta) {
        if !self.items.contains_key(key) {
            self.queue.push(key.to_string());
        }
        let v = self.items.entry(key.to_string()).or_default();
        v.push(d);
        let n = v.len();
        if n >= 2 && v[n - 1].0 == Deleted && v[n - 2].0 == Deleted {
            if v[n - 2].1.is_some() {
                v.remove(n - 2);
            } else {
                v.pop();
            }
        }
    }

    fn add(&mut self, t: DeltaType, k: &str, v: i64) {
        self.populated = true;
        self.push(k, (t, None, k.to_string(), v));
    }

    /// "Delete of a key neither queued nor known is ignored."
    fn delete(&mut self, k: &str, v: i64) {
        self.populated = true;
        if !self.items.contains_key(k) && !self.known.contains_key(k) {
            return;
        }
        self.push(k, (Deleted, None, k.to_string(), v));
    }

    /// "Replaced (or Sync) for each listed object; tombstones with the newest known object for
    /// keys queued but not listed, and for known keys neither listed nor queued; the first
    /// replace sets the initial population count."
    fn replace(&mut self, list: &[(String, i64)]) {
        let action = if self.emit_replaced { Replaced } else { Sync };
        let mut listed = HashSet::new();
        for (k, v) in list {
            listed.insert(k.clone());
            self.push(k, (action, None, k.clone(), *v));
        }
        let mut deletions = 0;
        for k in self.queue.clone() {
            if listed.contains(&k) {
                continue;
            }
            let newest = self.items[&k].last().unwrap().clone();
            deletions += 1;
            self.push(&k, (Deleted, Some(k.clone()), newest.2, newest.3));
        }
        for (k, v) in self.known.clone() {
            if listed.contains(&k) || self.items.contains_key(&k) {
                continue;
            }
            deletions += 1;
            self.push(&k, (Deleted, Some(k.clone()), k.clone(), v));
        }
        if !self.populated {
            self.populated = true;
            self.initial = listed.len() + deletions;
        }
    }

    /// "Sync for each known key with nothing queued."
    fn resync(&mut self) {
        for (k, v) in self.known.clone() {
            if !self.items.contains_key(&k) {
                self.push(&k, (Sync, None, k.clone(), v));
            }
        }
    }

    fn has_synced(&self) -> bool {
        self.populated && self.initial == 0
    }

    /// Pop the first key; the consumer applies the deltas to the known objects.
    fn pop(&mut self) -> Option<(Vec<MDelta>, bool)> {
        if self.queue.is_empty() {
            return None;
        }
        let initial = !self.has_synced();
        let k = self.queue.remove(0);
        self.initial = self.initial.saturating_sub(1);
        let deltas = self.items.remove(&k).unwrap();
        for d in &deltas {
            let key = d.1.clone().unwrap_or_else(|| d.2.clone());
            if d.0 == Deleted {
                self.known.remove(&key);
            } else {
                self.known.insert(key, d.3);
            }
        }
        Some((deltas, initial))
    }
}

fn run(ops: Vec<Op>, emit_replaced: bool) -> Result<(), TestCaseError> {
    let known = Arc::new(OrderedKnown::default());
    let f = DeltaFifo::new(
        DeltaFifoOptions::new(key_fn()).known_objects(known.clone()).emit_delta_type_replaced(emit_replaced),
    );
    let mut m = Model { emit_replaced, ..Model::default() };
    for op in ops {
        match &op {
            Op::Add(k, v) => {
                f.add(mk(KEYS[*k], *v)).unwrap();
                m.add(DeltaType::Added, KEYS[*k], *v);
            }
            Op::Update(k, v) => {
                f.update(mk(KEYS[*k], *v)).unwrap();
                m.add(DeltaType::Updated, KEYS[*k], *v);
            }
            Op::Delete(k, v) => {
                f.delete(mk(KEYS[*k], *v)).unwrap();
                m.delete(KEYS[*k], *v);
            }
            Op::Replace(list) => {
                f.replace(list.iter().map(|(k, v)| mk(KEYS[*k], *v)).collect(), "1").unwrap();
                m.replace(&list.iter().map(|(k, v)| (KEYS[*k].to_string(), *v)).collect::<Vec<_>>());
            }
            Op::Resync => {
                f.resync().unwrap();
                m.resync();
            }
            Op::Pop => {
                let expected = m.pop();
                if f.is_empty() {
                    prop_assert!(expected.is_none());
                    continue;
                }
                let mut got = None;
                f.pop_blocking(|d: Deltas<TObj>, initial| {
                    known.apply(&d);
                    got = Some((d.iter().map(flatten).collect::<Vec<_>>(), initial));
                    Ok::<_, FifoError>(())
                })
                .unwrap();
                prop_assert_eq!(got, expected, "after {:?}", op);
            }
        }
        let keys: Vec<String> = f.list_keys().iter().map(|k| k.to_string()).collect();
        prop_assert_eq!(&keys, &m.queue, "queue after {:?}", op);
        prop_assert_eq!(f.len(), m.queue.len());
        prop_assert_eq!(f.has_synced(), m.has_synced(), "has_synced after {:?}", op);
        for k in &m.queue {
            let got: Vec<MDelta> = f.get_by_key(k).unwrap().iter().map(flatten).collect();
            prop_assert_eq!(&got, &m.items[k], "deltas of {} after {:?}", k, op);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The DeltaFIFO matches the model with `Sync` for listed objects (client-go's default).
    #[test]
    fn delta_fifo_matches_model(ops in proptest::collection::vec(op_strategy(), 0..40)) {
        run(ops, false)?;
    }

    /// The DeltaFIFO matches the model with `Replaced` for listed objects (informers' setting).
    #[test]
    fn delta_fifo_matches_model_replaced(ops in proptest::collection::vec(op_strategy(), 0..40)) {
        run(ops, true)?;
    }
}
