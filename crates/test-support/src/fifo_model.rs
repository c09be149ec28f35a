//! Reference models of both FIFOs and a step-by-step checker that runs an operation sequence
//! against the real queue and the model. Shared by kcache-delta-fifo's proptests and the fuzz
//! targets in `xtask/fuzz`; so it depends only on kcache-delta-fifo, kcache-store and parking_lot.
//!
//! The models are written from the semantics list of issue 4 and client-go's `delta_fifo.go` and
//! `the_real_fifo.go` doc comments, not from the implementation; the in-order FIFO's atomic mode
//! from `the_real_fifo.go`'s `AtomicEvents` and `controller.go`'s `processReplacedAllInfo` (issue
//! 32).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use kcache_delta_fifo::DeltaType::{self, Deleted, Replaced, Sync};
use kcache_delta_fifo::{
    AtomicEvent, Delta, DeltaFifo, DeltaFifoOptions, Deltas, Fifo, FifoError, RealFifo, RealFifoOptions,
};
use kcache_store::{KeyFunc, key_func};

/// Client-go's `testFifoObject`: `name` is the key, `val` tells versions apart, `xfrm` counts
/// how often a transformer touched it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TObj {
    /// The key.
    pub name: String,
    /// Tells versions of one key apart.
    pub val: i64,
    /// How many times a transformer touched the object.
    pub xfrm: u32,
}

/// Client-go's `mkFifoObj`.
pub fn mk(name: &str, val: i64) -> Arc<TObj> {
    Arc::new(TObj { name: name.into(), val, xfrm: 0 })
}

/// Client-go's `testFifoObjectKeyFunc`.
pub fn key_fn() -> KeyFunc<TObj> {
    key_func(|o: &TObj| Ok(o.name.clone()))
}

/// Known objects in key order, so tests can predict the order of known-key tombstones and syncs
/// (a `Store` lists in hash order). The pop process writes into it, as an informer's indexer.
#[derive(Debug, Default)]
pub struct OrderedKnown(pub parking_lot::Mutex<BTreeMap<String, Arc<TObj>>>);

impl kcache_store::KnownObjects<TObj> for OrderedKnown {
    fn list_keys(&self) -> Vec<Arc<str>> {
        self.0.lock().keys().map(|k| Arc::from(k.as_str())).collect()
    }
    fn get_by_key(&self, key: &str) -> Option<Arc<TObj>> {
        self.0.lock().get(key).cloned()
    }
}

impl OrderedKnown {
    /// Applies popped deltas the way an informer applies them to its indexer.
    pub fn apply(&self, deltas: &[Delta<TObj>]) {
        let mut m = self.0.lock();
        for d in deltas {
            let key = match d.object.tombstone() {
                Some(t) => t.key.clone(),
                None => d.obj().name.clone(),
            };
            if d.delta_type == DeltaType::Deleted {
                m.remove(&key);
            } else {
                m.insert(key, d.obj().clone());
            }
        }
    }
}

/// A delta flattened for comparison with a model: type, tombstone key (if a tombstone), object
/// name and value.
pub type Flat = (DeltaType, Option<String>, String, i64);

/// Flattens a delta for comparison with a model.
pub fn flatten(d: &Delta<TObj>) -> Flat {
    (d.delta_type, d.object.tombstone().map(|t| t.key.clone()), d.obj().name.clone(), d.obj().val)
}

/// One step of a random FIFO workload; keys index [`KEYS`].
#[derive(Debug, Clone)]
pub enum Op {
    /// `add` of key `KEYS[k]` with value `v`.
    Add(usize, i64),
    /// `update` of key `KEYS[k]` with value `v`.
    Update(usize, i64),
    /// `delete` of key `KEYS[k]` with value `v`.
    Delete(usize, i64),
    /// `replace` with these (key index, value) pairs.
    Replace(Vec<(usize, i64)>),
    /// `resync`.
    Resync,
    /// One non-blocking pop.
    Pop,
}

/// The keys a workload draws from.
pub const KEYS: [&str; 4] = ["a", "b", "c", "d"];

/// Returns `Err` describing the first difference instead of panicking, so proptest can shrink.
macro_rules! ensure_eq {
    ($got:expr, $want:expr, $($ctx:tt)+) => {{
        let (got, want) = (&$got, &$want);
        if got != want {
            return Err(format!("{}: queue {:?}, model {:?}", format_args!($($ctx)+), got, want));
        }
    }};
}

/// The DeltaFIFO model: a queue of keys without duplicates, per-key deltas oldest first.
#[derive(Debug, Default)]
pub struct DeltaFifoModel {
    queue: Vec<String>,
    items: BTreeMap<String, Vec<Flat>>,
    known: BTreeMap<String, i64>,
    populated: bool,
    initial: usize,
    emit_replaced: bool,
}

impl DeltaFifoModel {
    /// "Per-key deltas oldest first; a queue of keys without duplicates" and the dedup rule: only
    /// the newest two, only when both are deletions, keep the one that is not a tombstone (the
    /// older when neither is; the newer when both are).
    fn push(&mut self, key: &str, d: Flat) {
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
    fn pop(&mut self) -> Option<(Vec<Flat>, bool)> {
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

/// Runs `ops` against a `DeltaFifo` (known objects applied on pop, as an informer does) and the
/// model; after every step the popped item, the queued keys and their deltas, the depth and
/// `has_synced` must agree.
///
/// # Errors
///
/// The first disagreement, described.
pub fn check_delta_fifo(ops: &[Op], emit_replaced: bool) -> Result<(), String> {
    let known = Arc::new(OrderedKnown::default());
    let f = DeltaFifo::new(
        DeltaFifoOptions::new(key_fn()).known_objects(known.clone()).emit_delta_type_replaced(emit_replaced),
    );
    let mut m = DeltaFifoModel { emit_replaced, ..DeltaFifoModel::default() };
    for op in ops {
        match op {
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
                    ensure_eq!(None::<(Vec<Flat>, bool)>, expected, "pop from an empty queue");
                    continue;
                }
                let mut got = None;
                f.pop_blocking(|d: Deltas<TObj>, initial| {
                    known.apply(&d);
                    got = Some((d.iter().map(flatten).collect::<Vec<_>>(), initial));
                    Ok::<_, FifoError>(())
                })
                .unwrap();
                ensure_eq!(got, expected, "after {op:?}");
            }
        }
        let keys: Vec<String> = f.list_keys().iter().map(|k| k.to_string()).collect();
        ensure_eq!(keys, m.queue, "queue after {op:?}");
        ensure_eq!(f.len(), m.queue.len(), "len after {op:?}");
        ensure_eq!(f.has_synced(), m.has_synced(), "has_synced after {op:?}");
        for k in &m.queue {
            let got: Vec<Flat> = f.get_by_key(k).unwrap().iter().map(flatten).collect();
            ensure_eq!(got, m.items[k], "deltas of {k} after {op:?}");
        }
    }
    Ok(())
}

/// One queued item of the in-order FIFO model.
#[derive(Debug, Clone, PartialEq)]
enum MItem {
    /// A delta and its key.
    Delta(String, Flat),
    /// An atomic relist: the listed (key, value) pairs.
    ReplacedAll(Vec<(String, i64)>),
    /// An atomic resync.
    SyncAll,
}

/// What the in-order FIFO model pops: the deltas, whether they are an atomic relist
/// (`Some(true)`) or resync (`Some(false)`) or neither (`None`), and the initial-list flag.
pub type RealPop = (Vec<Flat>, Option<bool>, bool);

/// The in-order FIFO model, in either mode.
///
/// Without atomic events (client-go's RealFIFO before `AtomicFIFO`): every delta in arrival
/// order, one per pop; replace emits tombstones first (queued keys whose last delta is not a
/// deletion, then known keys neither listed nor queued), then `Replaced`; resync emits `Sync` for
/// known keys with nothing queued.
///
/// With atomic events (`AtomicFIFO`): replace and resync queue one item each. Popping a relist
/// yields a tombstone for every key known then and not listed (in key order, as
/// [`OrderedKnown`] lists them), then `Replaced` for every listed object in list order; popping
/// a resync yields `Sync` for every key known then. Either counts as one item toward the initial
/// population.
#[derive(Debug, Default)]
pub struct RealFifoModel {
    /// Oldest first.
    items: Vec<MItem>,
    known: BTreeMap<String, i64>,
    populated: bool,
    initial: usize,
    atomic: bool,
}

impl RealFifoModel {
    fn push(&mut self, t: DeltaType, k: &str, v: i64) {
        self.populated = true;
        self.items.push(MItem::Delta(k.to_string(), (t, None, k.to_string(), v)));
    }

    fn replace(&mut self, list: &[(String, i64)]) {
        if self.atomic {
            self.items.push(MItem::ReplacedAll(list.to_vec()));
        } else {
            self.replace_per_delta(list);
        }
        if !self.populated {
            self.populated = true;
            self.initial = self.items.len();
        }
    }

    fn replace_per_delta(&mut self, list: &[(String, i64)]) {
        let listed: HashSet<&String> = list.iter().map(|(k, _)| k).collect();
        let mut order: Vec<String> = Vec::new();
        let mut last: BTreeMap<String, Flat> = BTreeMap::new();
        for item in &self.items {
            let MItem::Delta(k, d) = item else { continue };
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
            new.push(MItem::Delta(k.clone(), (Deleted, Some(k.clone()), l.2.clone(), l.3)));
        }
        for (k, v) in &self.known {
            if listed.contains(k) || last.contains_key(k) {
                continue;
            }
            new.push(MItem::Delta(k.clone(), (Deleted, Some(k.clone()), k.clone(), *v)));
        }
        for (k, v) in list {
            new.push(MItem::Delta(k.clone(), (Replaced, None, k.clone(), *v)));
        }
        self.items.extend(new);
    }

    fn resync(&mut self) {
        if self.atomic {
            self.items.push(MItem::SyncAll);
            return;
        }
        let queued: HashSet<String> = self
            .items
            .iter()
            .filter_map(|i| match i {
                MItem::Delta(k, _) => Some(k.clone()),
                _ => None,
            })
            .collect();
        for (k, v) in self.known.clone() {
            if !queued.contains(&k) {
                self.items.push(MItem::Delta(k.clone(), (Sync, None, k, v)));
            }
        }
    }

    fn has_synced(&self) -> bool {
        self.populated && self.initial == 0
    }

    /// The queued deltas (atomic items are not listed, as `RealFifo::list`).
    fn listed(&self) -> Vec<(String, Flat)> {
        self.items
            .iter()
            .filter_map(|i| match i {
                MItem::Delta(k, d) => Some((k.clone(), d.clone())),
                _ => None,
            })
            .collect()
    }

    /// Pops one item; the consumer applies its deltas to the known objects.
    fn pop(&mut self) -> Option<RealPop> {
        if self.items.is_empty() {
            return None;
        }
        let initial = !self.has_synced();
        let item = self.items.remove(0);
        self.initial = self.initial.saturating_sub(1);
        let (deltas, atomic) = match item {
            MItem::Delta(_, d) => (vec![d], None),
            MItem::ReplacedAll(list) => {
                let listed: HashSet<&String> = list.iter().map(|(k, _)| k).collect();
                let mut deltas: Vec<Flat> = self
                    .known
                    .iter()
                    .filter(|(k, _)| !listed.contains(k))
                    .map(|(k, v)| (Deleted, Some(k.clone()), k.clone(), *v))
                    .collect();
                deltas.extend(list.iter().map(|(k, v)| (Replaced, None, k.clone(), *v)));
                (deltas, Some(true))
            }
            MItem::SyncAll => {
                (self.known.iter().map(|(k, v)| (Sync, None, k.clone(), *v)).collect(), Some(false))
            }
        };
        for d in &deltas {
            let key = d.1.clone().unwrap_or_else(|| d.2.clone());
            if d.0 == Deleted {
                self.known.remove(&key);
            } else {
                self.known.insert(key, d.3);
            }
        }
        Some((deltas, atomic, initial))
    }
}

/// Runs `ops` against a `RealFifo` without atomic events and the model; after every step the
/// popped delta, the queued deltas and `has_synced` must agree.
///
/// # Errors
///
/// The first disagreement, described.
pub fn check_real_fifo(ops: &[Op]) -> Result<(), String> {
    check_real_fifo_mode(ops, false)
}

/// [`check_real_fifo`] with atomic events (the default of `RealFifoOptions`): the same checks
/// after every step, then the queue is drained and every remaining pop compared, since queued
/// atomic items are visible only once popped.
///
/// # Errors
///
/// The first disagreement, described.
pub fn check_real_fifo_atomic(ops: &[Op]) -> Result<(), String> {
    check_real_fifo_mode(ops, true)
}

/// Pops once from a non-empty `f`, applying the deltas to `known`.
fn pop_real(f: &RealFifo<TObj>, known: &OrderedKnown) -> RealPop {
    let mut got = None;
    f.pop_blocking(|d: Deltas<TObj>, initial| {
        known.apply(&d);
        let atomic = d.atomic_event().map(|e| matches!(e, AtomicEvent::ReplacedAll { .. }));
        got = Some((d.iter().map(flatten).collect::<Vec<_>>(), atomic, initial));
        Ok::<_, FifoError>(())
    })
    .unwrap();
    got.expect("popped")
}

fn check_real_fifo_mode(ops: &[Op], atomic: bool) -> Result<(), String> {
    let known = Arc::new(OrderedKnown::default());
    let f = RealFifo::new(RealFifoOptions::new(key_fn(), known.clone()).atomic_events(atomic));
    let mut m = RealFifoModel { atomic, ..RealFifoModel::default() };
    for op in ops {
        match op {
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
                    ensure_eq!(None::<RealPop>, expected, "pop from an empty queue");
                    continue;
                }
                ensure_eq!(Some(pop_real(&f, &known)), expected, "after {op:?}");
            }
        }
        let items: Vec<(String, Flat)> = f.list().iter().map(|(k, d)| (k.to_string(), flatten(d))).collect();
        ensure_eq!(items, m.listed(), "queue after {op:?}");
        ensure_eq!(f.len(), m.items.len(), "len after {op:?}");
        ensure_eq!(f.has_synced(), m.has_synced(), "has_synced after {op:?}");
    }
    if atomic {
        while let Some(expected) = m.pop() {
            ensure_eq!(f.is_empty(), false, "draining: the model still has {expected:?}");
            ensure_eq!(pop_real(&f, &known), expected, "draining");
            ensure_eq!(f.has_synced(), m.has_synced(), "has_synced while draining");
        }
        ensure_eq!(f.len(), 0, "drained");
    }
    Ok(())
}
