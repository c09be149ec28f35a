//! The delaying queue's pending set: an indexed binary min-heap keyed by ready time, with each
//! item stored once.
//!
//! Layout, chosen for the 64-bytes-per-pending-item budget:
//! * `slots`: a dense `Vec` of `(item, ready_at, heap position)`; removal is `swap_remove`;
//! * `index`: a `hashbrown::HashTable<u32>` of slot numbers, hashed by the slot's item, for
//!   de-duplication (5 bytes per bucket);
//! * `heap`: a `Vec<u32>` of slot numbers ordered by ready time.
//!
//! For a `u64` item that is 24 + 4 bytes plus 5 bytes per table bucket, about 45 bytes beyond
//! the item at worst-case capacity slack. An `IndexMap`-based heap (the `priority-queue` crate)
//! needs about 72 bytes at a million items because its entry vector grows to the hash table's
//! capacity.

use std::hash::{BuildHasher, Hash};

use hashbrown::HashTable;

struct Slot<T> {
    item: T,
    /// Ready time in nanoseconds since the queue's base instant.
    at: u64,
    /// Position of this slot in `heap`.
    pos: u32,
}

/// Pending items, each once, ordered by ready time.
pub(crate) struct Pending<T> {
    slots: Vec<Slot<T>>,
    /// Slot numbers, hashed by `slots[n].item`.
    index: HashTable<u32>,
    /// Binary min-heap of slot numbers by `slots[n].at`.
    heap: Vec<u32>,
    hasher: foldhash::fast::RandomState,
}

impl<T> Default for Pending<T> {
    fn default() -> Self {
        Self {
            slots: Vec::new(),
            index: HashTable::new(),
            heap: Vec::new(),
            hasher: foldhash::fast::RandomState::default(),
        }
    }
}

impl<T: Eq + Hash> Pending<T> {
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Earliest ready time, if any.
    pub(crate) fn peek_at(&self) -> Option<u64> {
        self.heap.first().map(|&s| self.slots[s as usize].at)
    }

    /// Inserts `item` ready at `at`, or moves an already pending item's ready time earlier.
    /// A later time for a pending item is ignored (client-go: "earlier wins").
    pub(crate) fn insert_or_earlier(&mut self, item: T, at: u64) {
        let hash = self.hasher.hash_one(&item);
        let slots = &self.slots;
        if let Some(&n) = self.index.find(hash, |&n| slots[n as usize].item == item) {
            let slot = &mut self.slots[n as usize];
            if at < slot.at {
                slot.at = at;
                let pos = slot.pos as usize;
                self.sift_up(pos);
            }
            return;
        }
        // Slot numbers are u32: four billion pending items is far beyond any real queue.
        let n = u32::try_from(self.slots.len()).unwrap_or(u32::MAX);
        let pos = self.heap.len();
        self.slots.push(Slot { item, at, pos: pos as u32 });
        self.heap.push(n);
        let (slots, hasher) = (&self.slots, &self.hasher);
        self.index.insert_unique(hash, n, |&m| hasher.hash_one(&slots[m as usize].item));
        self.sift_up(pos);
    }

    /// Removes and returns the earliest item if it is ready at `now`.
    pub(crate) fn pop_ready(&mut self, now: u64) -> Option<T> {
        let &top = self.heap.first()?;
        if self.slots[top as usize].at > now {
            return None;
        }
        // Take the root out of the heap.
        let last = self.heap.len() - 1;
        self.heap.swap(0, last);
        self.heap.pop();
        if !self.heap.is_empty() {
            self.slots[self.heap[0] as usize].pos = 0;
            self.sift_down(0);
        }
        Some(self.remove_slot(top))
    }

    /// Removes slot `n` (already out of the heap) from the index and the slot vector.
    fn remove_slot(&mut self, n: u32) -> T {
        let hash = self.hasher.hash_one(&self.slots[n as usize].item);
        if let Ok(entry) = self.index.find_entry(hash, |&m| m == n) {
            entry.remove();
        }
        let last = (self.slots.len() - 1) as u32;
        let removed = self.slots.swap_remove(n as usize);
        if n != last {
            // The former last slot now lives at `n`: repoint the index and the heap at it.
            let moved = &self.slots[n as usize];
            let hash = self.hasher.hash_one(&moved.item);
            if let Some(m) = self.index.find_mut(hash, |&m| m == last) {
                *m = n;
            }
            self.heap[moved.pos as usize] = n;
        }
        removed.item
    }

    /// Drops every pending item.
    pub(crate) fn clear(&mut self) {
        self.slots = Vec::new();
        self.index = HashTable::new();
        self.heap = Vec::new();
    }

    fn at(&self, pos: usize) -> u64 {
        self.slots[self.heap[pos] as usize].at
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        self.slots[self.heap[a] as usize].pos = a as u32;
        self.slots[self.heap[b] as usize].pos = b as u32;
    }

    fn sift_up(&mut self, mut pos: usize) {
        while pos > 0 {
            let parent = (pos - 1) / 2;
            if self.at(pos) >= self.at(parent) {
                break;
            }
            self.swap(pos, parent);
            pos = parent;
        }
    }

    fn sift_down(&mut self, mut pos: usize) {
        let len = self.heap.len();
        loop {
            let left = 2 * pos + 1;
            if left >= len {
                break;
            }
            let right = left + 1;
            let child = if right < len && self.at(right) < self.at(left) { right } else { left };
            if self.at(child) >= self.at(pos) {
                break;
            }
            self.swap(pos, child);
            pos = child;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Pending;
    use std::collections::BTreeMap;

    /// Randomised comparison with a simple model: same contents, same pop order by time.
    #[test]
    fn matches_a_model() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut pending = Pending::default();
        let mut model: BTreeMap<u32, u64> = BTreeMap::new();
        let mut now = 0;
        for _ in 0..20_000 {
            if next() % 3 == 0 {
                now += next() % 50;
                let mut popped = Vec::new();
                while let Some(item) = pending.pop_ready(now) {
                    popped.push(item);
                }
                let mut expected: Vec<(u64, u32)> =
                    model.iter().filter(|(_, at)| **at <= now).map(|(k, at)| (*at, *k)).collect();
                expected.sort();
                for (_, k) in &expected {
                    model.remove(k);
                }
                let mut got_times: Vec<u64> = Vec::new();
                for item in &popped {
                    got_times.push(expected.iter().find(|(_, k)| k == item).map(|(at, _)| *at).unwrap());
                }
                assert!(got_times.windows(2).all(|w| w[0] <= w[1]), "popped out of time order");
                let mut got = popped.clone();
                got.sort();
                let mut want: Vec<u32> = expected.iter().map(|(_, k)| *k).collect();
                want.sort();
                assert_eq!(got, want);
            } else {
                let item = (next() % 500) as u32;
                let at = now + next() % 200;
                pending.insert_or_earlier(item, at);
                let e = model.entry(item).or_insert(at);
                *e = (*e).min(at);
            }
            assert_eq!(pending.len(), model.len());
            assert_eq!(pending.peek_at(), model.values().min().copied());
        }
    }
}
