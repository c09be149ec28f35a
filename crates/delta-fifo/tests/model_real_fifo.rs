//! Property test: `RealFifo` against a small reference model written from the semantics of
//! issue 4 and client-go's `the_real_fifo.go` doc comments (not from the implementation): every
//! delta in arrival order; replace emits tombstones first (queued keys whose last delta is not a
//! deletion, then known keys neither listed nor queued), then `Replaced`.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use common::*;
use kcache_delta_fifo::DeltaType::{self, Deleted, Replaced, Sync};
use kcache_delta_fifo::{Deltas, FifoError, RealFifo, RealFifoOptions};
use proptest::prelude::*;

#[derive(Default)]
struct Model {
    /// (key, delta), oldest first.
    items: Vec<(String, Flat)>,
    known: BTreeMap<String, i64>,
    populated: bool,
    initial: usize,
}

impl Model {
    fn push(&mut self, t: DeltaType, k: &str, v: i64) {
        self.populated = true;
        self.items.push((k.to_string(), (t, None, k.to_string(), v)));
    }

    fn replace(&mut self, list: &[(String, i64)]) {
        let listed: HashSet<&String> = list.iter().map(|(k, _)| k).collect();
        let mut order: Vec<String> = Vec::new();
        let mut last: BTreeMap<String, Flat> = BTreeMap::new();
        for (k, d) in &self.items {
            if !last.contains_key(k) {
                order.push(k.clone());
            }
            last.insert(k.clone(), d.clone());
        }
        let mut new = Vec::new();
        for k in &order {
            let l = &last[k];
            if listed.contains(k) || l.0 == Deleted {
                continue;
            }
            new.push((k.clone(), (Deleted, Some(k.clone()), l.2.clone(), l.3)));
        }
        for (k, v) in &self.known {
            if listed.contains(k) || last.contains_key(k) {
                continue;
            }
            new.push((k.clone(), (Deleted, Some(k.clone()), k.clone(), *v)));
        }
        for (k, v) in list {
            new.push((k.clone(), (Replaced, None, k.clone(), *v)));
        }
        self.items.extend(new);
        if !self.populated {
            self.populated = true;
            self.initial = self.items.len();
        }
    }

    fn resync(&mut self) {
        let queued: HashSet<String> = self.items.iter().map(|(k, _)| k.clone()).collect();
        for (k, v) in self.known.clone() {
            if !queued.contains(&k) {
                self.items.push((k.clone(), (Sync, None, k, v)));
            }
        }
    }

    fn has_synced(&self) -> bool {
        self.populated && self.initial == 0
    }

    fn pop(&mut self) -> Option<(Flat, bool)> {
        if self.items.is_empty() {
            return None;
        }
        let initial = !self.has_synced();
        let (k, d) = self.items.remove(0);
        self.initial = self.initial.saturating_sub(1);
        if d.0 == Deleted {
            self.known.remove(&k);
        } else {
            self.known.insert(k, d.3);
        }
        Some((d, initial))
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The in-order FIFO matches the model step by step.
    #[test]
    fn real_fifo_matches_model(ops in proptest::collection::vec(op_strategy(), 0..40)) {
        let known = Arc::new(OrderedKnown::default());
        let f = RealFifo::new(RealFifoOptions::new(key_fn(), known.clone()));
        let mut m = Model::default();
        for op in ops {
            match &op {
                Op::Add(k, v) => {
                    f.add(mk(KEYS[*k], *v)).unwrap();
                    m.push(DeltaType::Added, KEYS[*k], *v);
                }
                Op::Update(k, v) => {
                    f.update(mk(KEYS[*k], *v)).unwrap();
                    m.push(DeltaType::Updated, KEYS[*k], *v);
                }
                Op::Delete(k, v) => {
                    f.delete(mk(KEYS[*k], *v)).unwrap();
                    m.push(Deleted, KEYS[*k], *v);
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
                        assert_eq!(d.len(), 1);
                        got = Some((flatten(&d[0]), initial));
                        Ok::<_, FifoError>(())
                    })
                    .unwrap();
                    prop_assert_eq!(got, expected, "after {:?}", op);
                }
            }
            let items: Vec<(String, Flat)> =
                f.list().iter().map(|(k, d)| (k.to_string(), flatten(d))).collect();
            prop_assert_eq!(&items, &m.items, "queue after {:?}", op);
            prop_assert_eq!(f.has_synced(), m.has_synced(), "has_synced after {:?}", op);
        }
    }
}
