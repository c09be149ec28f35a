//! The item table behind a [`Queue`](crate::Queue): client-go's `dirty` and `processing` sets
//! folded into one record per item, found through one hash table.
//!
//! client-go keeps two Go sets and probes both on every operation. Here each operation hashes the
//! item once (before taking the queue lock) and probes once. The records live in a vector of
//! slots, handed out in arrival order, and the hash table holds only where they are, so a FIFO's
//! `take` walks them nearly in order; `done` finds a just-taken item through a short list of
//! recent slots instead of probing, and leaves its index behind for a periodic sweep.

use std::any::{Any, TypeId};
use std::sync::Arc;

use hashbrown::HashTable;

use crate::item::Item;

/// One known item: client-go's dirty and processing sets folded into one record, so each
/// operation hashes the item once and probes once. Records live in [`SlotTable::slots`]; the hash
/// table holds only where they are.
pub(crate) struct Slot<T> {
    item: T,
    /// The item's 32 hash bits, as in its [`Index`] (free: it fits in the record's padding).
    hash: u32,
    /// Needs processing (stored, or re-added while processing).
    pub(crate) dirty: bool,
    /// Handed out by `get` and not yet `done`.
    pub(crate) processing: bool,
}

/// A bucket of the item table: where the item's [`Slot`] is, and 32 bits of the item's hash
/// (`Shared::hash_of` in `queue.rs`), so growing the table never hashes an item again nor reads
/// its slot (for `Arc<str>` keys that would read every key's bytes, a cache miss each).
#[derive(Clone, Copy)]
struct Index {
    slot: u32,
    hash: u32,
}

/// Every item that is dirty, processing or both, by item, with its record.
pub(crate) struct SlotTable<T> {
    /// Every item that is dirty, processing or both, by item. An item that is neither is
    /// removed from `slots` at once, and from the table at once or, if `done` found it through
    /// `recent`, at the next sweep (see `stale`).
    items: HashTable<Index>,
    /// The items' records, `None` where `free` lists the slot for reuse. Slots are handed out in
    /// the order items arrive, so a FIFO's `take` walks them nearly in order instead of probing
    /// the table at random (with a million queued items, a cache miss per take).
    slots: Vec<Option<Slot<T>>>,
    /// Free slots, reused last freed first.
    free: Vec<u32>,
    /// Slots and hashes of the items `take` handed out most recently (at most [`RECENT`]), so
    /// that `done` finds a just-taken item without the table. With a large queue the table is far
    /// bigger than the cache, and probing it costs `done` two cache misses (control bytes and
    /// bucket).
    recent: Vec<(u32, u32)>,
    /// Slots `done` emptied through `recent` without probing the table: their [`Index`] is still
    /// there. Such a slot stays empty (it is not in `free`), so its index matches no item, until
    /// [`sweep_if_due`](SlotTable::sweep_if_due) removes those indexes together and frees the
    /// slots.
    stale: Vec<u32>,
    /// One bit per slot, set only during a sweep for the slots in `stale`.
    stale_bits: Vec<u64>,
}

/// What [`SlotTable::done`] did with an item that was being processed.
pub(crate) enum Done<T> {
    /// Not added again while processing: its record is gone. Holds the record's item (if any),
    /// for the caller to drop after it releases the lock.
    Finished(Option<T>),
    /// Added again while processing: its record, in `slot`, is now dirty and not processing, and
    /// `item` (a clone) is to be stored again.
    Requeue { slot: u32, item: T },
}

/// Item equality, with `Arc<str>` keys compared by pointer first. When a key is added again
/// through the same `Arc` (see [`Queue::add_ref`](crate::Queue::add_ref)), the entry and the
/// caller share one allocation, and `Arc`'s `==` would still compare the bytes through `memcmp`
/// (a quarter of a coalescing `add`'s time). `TypeId` stands in for specialization; the check
/// folds away at compile time, and other item types compare with `==` alone.
#[inline]
fn same_item<T: Item>(a: &T, b: &T) -> bool {
    if TypeId::of::<T>() == TypeId::of::<Arc<str>>() {
        let any = |x: &T| (x as &dyn Any).downcast_ref::<Arc<str>>().map(Arc::as_ptr);
        if any(a).zip(any(b)).is_some_and(|(x, y)| std::ptr::eq(x, y)) {
            return true;
        }
    }
    a == b
}

/// How many recently taken items `done` looks for before it probes the table. Enough for a
/// typical worker pool; with more workers, the older items' `done` probes the table.
const RECENT: usize = 8;

/// Stale indexes tolerated before a sweep, whatever the size of the table.
const MIN_SWEEP: usize = 64;

/// The table hash of a stored 32-bit hash: the same bits in both halves, so the bucket (low bits)
/// and the control tag (top bits) both come from them.
fn widen(h: u32) -> u64 {
    (u64::from(h) << 32) | u64::from(h)
}

/// Whether slot `slot` holds `item`.
#[inline]
fn holds<T: Item>(slots: &[Option<Slot<T>>], slot: u32, item: &T) -> bool {
    slots.get(slot as usize).and_then(Option::as_ref).is_some_and(|s| same_item(&s.item, item))
}

/// The table's equality test for `item` (hash `h`): the hash bits first, then the item in the slot.
#[inline]
fn index_of<'a, T: Item>(slots: &'a [Option<Slot<T>>], h: u32, item: &'a T) -> impl Fn(&Index) -> bool + 'a {
    move |ix| ix.hash == h && holds(slots, ix.slot, item)
}

// The hot methods are `#[inline]`: `add`, `get` and `done` in queue.rs call them on every
// operation, and without the hint a module of their own can land in another codegen unit, where
// they are not inlined (measured: about 4% more instructions per add/get/done).
impl<T: Item> SlotTable<T> {
    pub(crate) fn new() -> Self {
        Self {
            items: HashTable::new(),
            slots: Vec::new(),
            free: Vec::new(),
            recent: Vec::with_capacity(RECENT),
            stale: Vec::new(),
            stale_bits: Vec::new(),
        }
    }

    /// The slot of `item` (hash `h`), if the queue knows the item.
    #[inline]
    pub(crate) fn find(&self, h: u32, item: &T) -> Option<u32> {
        self.items.find(widen(h), index_of(&self.slots, h, item)).map(|ix| ix.slot)
    }

    /// Whether slot `slot` holds `item`.
    #[inline]
    pub(crate) fn holds(&self, slot: u32, item: &T) -> bool {
        holds(&self.slots, slot, item)
    }

    /// Records a new item (hash `h`) and returns its slot.
    #[inline]
    pub(crate) fn insert(&mut self, h: u32, item: T, dirty: bool, processing: bool) -> u32 {
        let record = Slot { item, hash: h, dirty, processing };
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize] = Some(record);
                slot
            }
            None => {
                // More than 2^32 items would need hundreds of GiB first.
                let slot = u32::try_from(self.slots.len()).expect("workqueue: more than 2^32 items");
                self.slots.push(Some(record));
                slot
            }
        };
        self.items.insert_unique(widen(h), Index { slot, hash: h }, |ix| widen(ix.hash));
        slot
    }

    /// The record in `slot`, which the caller found in the table.
    #[inline]
    pub(crate) fn record(&mut self, slot: u32) -> Option<&mut Slot<T>> {
        self.slots.get_mut(slot as usize).and_then(Option::as_mut)
    }

    /// Moves `item`, just popped from the storage, from dirty to processing: its record is in
    /// `slot` if the caller found one; `hash` gives its hash bits otherwise.
    #[inline]
    pub(crate) fn take(&mut self, slot: Option<u32>, item: &T, hash: impl FnOnce() -> u32) {
        let taken = match slot.and_then(|slot| Some(slot).zip(self.record(slot))) {
            Some((slot, record)) => {
                record.dirty = false;
                record.processing = true;
                (slot, record.hash)
            }
            // Unreachable while the storage keeps its contract (it only returns pushed items);
            // tracking the item anyway keeps `done` and the stingy rule working.
            None => {
                let h = hash();
                (self.insert(h, item.clone(), false, true), h)
            }
        };
        if self.recent.len() == RECENT {
            // The oldest item's `done` will probe the table, which still indexes it.
            self.recent.remove(0);
        }
        self.recent.push(taken);
    }

    /// Where `recent` holds the slot of `item` (hash `h`), if it does. Only a slot whose hash
    /// matches is read, so an item that is not there costs no record reads.
    #[inline]
    fn recent_of(&self, h: u32, item: &T) -> Option<usize> {
        self.recent.iter().position(|&(slot, hash)| {
            hash == h && self.slots[slot as usize].as_ref().is_some_and(|r| same_item(&r.item, item))
        })
    }

    /// Ends the processing of `item` (hash `h`): removes its record unless it was added again
    /// meanwhile. `None`, changing nothing, if the item is not being processed.
    #[inline]
    pub(crate) fn done(&mut self, h: u32, item: &T) -> Option<Done<T>> {
        // A just-taken item is found in `recent`; if it is finished (not re-added), its record is
        // emptied and its index left for a later sweep. Otherwise probe the table.
        let (slot, finished) = if let Some(pos) = self.recent_of(h, item) {
            let (slot, _) = self.recent.remove(pos);
            debug_assert!(self.slots[slot as usize].as_ref().is_some_and(|r| r.processing));
            let dirty = self.slots[slot as usize].as_ref().is_some_and(|r| r.dirty);
            if !dirty {
                self.stale.push(slot);
            }
            (slot, !dirty)
        } else {
            let slots = &self.slots;
            let (dirty, entry) =
                self.items.find_entry(widen(h), index_of(slots, h, item)).ok().and_then(|entry| {
                    let record = slots[entry.get().slot as usize].as_ref().filter(|r| r.processing)?;
                    Some((record.dirty, entry))
                })?;
            let slot = entry.get().slot;
            let finished = !dirty;
            if finished {
                entry.remove();
                self.free.push(slot);
            }
            (slot, finished)
        };
        if finished {
            let removed = self.slots[slot as usize].take().map(|r| r.item);
            self.sweep_if_due();
            return Some(Done::Finished(removed));
        }
        Some(match self.slots[slot as usize].as_mut() {
            Some(record) => {
                record.processing = false;
                Done::Requeue { slot, item: record.item.clone() }
            }
            None => Done::Finished(None),
        })
    }

    /// Removes the indexes of the `stale` slots from the table, in one pass over it, once they
    /// outnumber the live ones (so the table is at most about twice its size, and each stale
    /// index costs a constant share of a sequential pass instead of a random probe), and frees
    /// the slots.
    #[inline]
    fn sweep_if_due(&mut self) {
        let stale = self.stale.len();
        if stale < MIN_SWEEP || stale * 2 < self.items.len() {
            return;
        }
        self.sweep();
    }

    /// The sweep itself, out of line: `done` pays only for the check above.
    fn sweep(&mut self) {
        let words = self.slots.len().div_ceil(64);
        if self.stale_bits.len() < words {
            self.stale_bits.resize(words, 0);
        }
        for &slot in &self.stale {
            self.stale_bits[slot as usize / 64] |= 1 << (slot % 64);
        }
        let bits = &self.stale_bits;
        self.items.retain(|ix| bits[ix.slot as usize / 64] & (1 << (ix.slot % 64)) == 0);
        for &slot in &self.stale {
            self.stale_bits[slot as usize / 64] = 0;
        }
        self.free.append(&mut self.stale);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::Queue;
    use std::collections::VecDeque;

    /// `done`'s fast path leaves stale indexes in the table; the sweep keeps them from piling up.
    /// Runs items through add, get and done with up to 100 in flight (more than [`RECENT`], so
    /// both lookup paths run) and checks after every step that stale indexes never exceed the
    /// live ones by more than a sweep's threshold, that every empty slot is free or stale, and
    /// that everything ends swept or reusable.
    #[test]
    fn stale_indexes_are_swept() {
        let q: Queue<u64> = Queue::new();
        let mut held = VecDeque::new();
        for i in 0..30_000u64 {
            q.add(i);
            q.add(i % 1000); // some re-adds, queued or in flight
            if let Some(item) = q.get_blocking() {
                held.push_back(item);
            }
            if held.len() > 100 {
                let item = held.pop_front().unwrap();
                q.done(&item);
            }
            if i % 16 != 0 {
                continue;
            }
            let st = q.shared.state.lock();
            let t = &st.table;
            let live = t.slots.iter().filter(|s| s.is_some()).count();
            assert_eq!(t.items.len(), live + t.stale.len(), "step {i}");
            assert!(
                t.stale.len() < MIN_SWEEP.max(live + 1),
                "step {i}: {} stale, {live} live",
                t.stale.len()
            );
            assert_eq!(t.slots.len(), live + t.stale.len() + t.free.len(), "step {i}");
        }
        for item in held {
            q.done(&item);
        }
        while let Some(item) = (!q.is_empty()).then(|| q.get_blocking()).flatten() {
            q.done(&item);
        }
        let st = q.shared.state.lock();
        assert_eq!(st.processing, 0);
        assert!(st.table.items.len() == st.table.stale.len() && st.table.stale.len() < MIN_SWEEP);
    }
}
