//! The watch-list's temporary store: the initial events' objects under their final keys, in
//! arrival order, handed on whole at the bookmark.

use std::hash::BuildHasher;
use std::sync::Arc;

use hashbrown::HashTable;

/// The hasher of the key index: foldhash, as the FIFO's and the store's maps (SipHash was 1.4% of
/// a watch-list sync's samples; docs/benchmarks.md, "Where the sync time goes").
type Hasher = foldhash::fast::RandomState;

/// The objects of a watch-list's initial events (and of any change that comes before the
/// bookmark that ends them), each under the key the reflector's key function gave it, kept in
/// the order they arrived (client-go's `temporaryStore`, whose `List` has no order).
///
/// Why not a map from key to object, as client-go's: every key is computed here, once, while
/// the object just decoded is still in the CPU's cache, already in the form the FIFO files it
/// under (`Arc<str>`), and the table of entries is handed on whole at the bookmark
/// (`ReflectorStore::replace_keyed`): a FIFO with the same key function queues it as it is,
/// without computing any key again from an object long out of the cache, and without freeing
/// one table of 10k keys and allocating another (docs/benchmarks.md, "Watch-list sync: keys
/// once, fewer hand-offs"). The objects go on in the order they were decoded, which is the
/// order they lie in memory, so the FIFO and the indexer walk them in that order too.
///
/// The index is a table of `u32` positions hashed by the key they point at, not a second map
/// of keys: 5 bytes a slot, so at 10k objects it stays below glibc's 128 KiB mmap threshold,
/// and freeing it at the bookmark does not raise that threshold for the rest of the process
/// (docs/benchmarks.md, "Per arena, with `malloc_info`").
pub(crate) struct TempStore<K> {
    /// The objects with their keys, in arrival order (a removal moves the last one into the
    /// hole). Every entry's position is in `index` exactly once.
    entries: Vec<(Arc<str>, Arc<K>)>,
    /// The position in `entries` of each key, hashed by the key.
    index: HashTable<u32>,
    hasher: Hasher,
}

impl<K> std::fmt::Debug for TempStore<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TempStore").field("len", &self.entries.len()).finish_non_exhaustive()
    }
}

impl<K> TempStore<K> {
    /// An empty store with room for `capacity` objects.
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Self {
            entries: Vec::with_capacity(capacity),
            index: HashTable::with_capacity(capacity),
            hasher: Hasher::default(),
        }
    }

    /// Adds `obj` under `key`, or replaces the object under it (keeping its place). The key is
    /// made an `Arc<str>` only when it is new.
    pub(crate) fn upsert(&mut self, key: String, obj: Arc<K>) {
        let hash = self.hasher.hash_one(key.as_str());
        let entries = &mut self.entries;
        if let Some(&i) = self.index.find(hash, |&i| *entries[i as usize].0 == *key) {
            entries[i as usize].1 = obj;
            return;
        }
        // A watch-list of more than 4 billion objects does not fit in memory anyway.
        let at = u32::try_from(entries.len()).unwrap_or(u32::MAX);
        entries.push((Arc::from(key), obj));
        let hasher = &self.hasher;
        self.index.insert_unique(hash, at, |&i| hasher.hash_one(&*entries[i as usize].0));
    }

    /// Removes the object under `key`, if any.
    pub(crate) fn remove(&mut self, key: &str) {
        let hash = self.hasher.hash_one(key);
        let entries = &self.entries;
        let Ok(found) = self.index.find_entry(hash, |&i| &*entries[i as usize].0 == key) else { return };
        let (i, _) = found.remove();
        let last = u32::try_from(self.entries.len() - 1).unwrap_or(u32::MAX);
        self.entries.swap_remove(i as usize);
        if i != last {
            // The last entry moved into the hole: point its index slot at its new place.
            let moved = self.hasher.hash_one(&*self.entries[i as usize].0);
            if let Some(slot) = self.index.find_mut(moved, |&j| j == last) {
                *slot = i;
            }
        }
    }

    /// How many objects it holds.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The objects with their keys, in arrival order (but for removals): the table itself,
    /// its spare capacity given back (in place: glibc shrinks a large block with `mremap`, and
    /// the FIFO holds the table until the relist is popped).
    pub(crate) fn into_entries(self) -> Vec<(Arc<str>, Arc<K>)> {
        let mut entries = self.entries;
        entries.shrink_to_fit();
        entries
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(t: TempStore<u32>) -> Vec<(String, u32)> {
        t.into_entries().into_iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    /// Arrival order is kept; an update keeps its place; a removal fills its hole with the last.
    #[test]
    fn keeps_arrival_order_updates_in_place_and_removes() {
        let mut t = TempStore::with_capacity(0);
        for (i, k) in ["c", "a", "d", "b"].into_iter().enumerate() {
            t.upsert(k.to_owned(), Arc::new(u32::try_from(i).unwrap()));
        }
        t.upsert("a".to_owned(), Arc::new(10));
        t.remove("c");
        t.remove("nope");
        assert_eq!(t.len(), 3);
        t.upsert("e".to_owned(), Arc::new(11));
        t.remove("b");
        t.upsert("b".to_owned(), Arc::new(12));
        // The last one removed: nothing moves.
        t.remove("b");
        t.upsert("b".to_owned(), Arc::new(13));
        assert_eq!(
            keys(t),
            [("e".to_owned(), 11), ("a".to_owned(), 10), ("d".to_owned(), 2), ("b".to_owned(), 13)]
        );
    }

    /// Many keys, removed and re-added: every lookup still finds its entry (the index slots of
    /// moved entries follow them).
    #[test]
    fn index_follows_moved_entries() {
        let mut t = TempStore::with_capacity(4);
        for i in 0..1000u32 {
            t.upsert(i.to_string(), Arc::new(i));
        }
        for i in (0..1000u32).step_by(3) {
            t.remove(&i.to_string());
        }
        for i in 0..1000u32 {
            t.upsert(i.to_string(), Arc::new(i + 1));
        }
        assert_eq!(t.len(), 1000);
        let mut got = keys(t);
        got.sort_by_key(|(_, v)| *v);
        assert!(got.iter().enumerate().all(|(i, (k, v))| *k == i.to_string() && *v as usize == i + 1));
    }
}
