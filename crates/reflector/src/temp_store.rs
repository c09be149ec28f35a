//! The watch-list's temporary store: the initial events' objects by key, in arrival order.

use std::collections::HashMap;
use std::sync::Arc;

/// The objects of a watch-list's initial events (and of any change that comes before the
/// bookmark that ends them), each under the key the reflector's key function gave it, kept in
/// the order they arrived (client-go's `temporaryStore`, whose `List` has no order).
///
/// Why not a map from key to object, as client-go's: every key is computed here, once, while
/// the object just decoded is still in the CPU's cache, and handed on with its object
/// (`ReflectorStore::replace_keyed`), so a FIFO with the same key function does not compute it
/// again from an object that is long out of the cache; and the objects go on in the order they
/// were decoded, which is the order they lie in memory, so the FIFO and the indexer walk them
/// in that order too (docs/benchmarks.md, "Where the sync time goes").
#[derive(Debug)]
pub(crate) struct TempStore<K> {
    /// The objects with their keys, in arrival order (a removal moves the last one into the
    /// hole). Every key is in `index` exactly once, pointing at its entry.
    entries: Vec<(Arc<str>, Arc<K>)>,
    /// Where each key's entry is in `entries`.
    index: HashMap<Arc<str>, usize, foldhash::fast::RandomState>,
}

impl<K> Default for TempStore<K> {
    fn default() -> Self {
        Self { entries: Vec::new(), index: HashMap::default() }
    }
}

impl<K> TempStore<K> {
    /// Adds `obj` under `key`, or replaces the object under it (keeping its place).
    pub(crate) fn upsert(&mut self, key: String, obj: Arc<K>) {
        match self.index.get(key.as_str()) {
            Some(&i) => self.entries[i].1 = obj,
            None => {
                let key: Arc<str> = Arc::from(key);
                self.index.insert(Arc::clone(&key), self.entries.len());
                self.entries.push((key, obj));
            }
        }
    }

    /// Removes the object under `key`, if any.
    pub(crate) fn remove(&mut self, key: &str) {
        let Some(i) = self.index.remove(key) else { return };
        self.entries.swap_remove(i);
        if let Some((moved, _)) = self.entries.get(i)
            && let Some(at) = self.index.get_mut(moved)
        {
            *at = i;
        }
    }

    /// How many objects it holds.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The objects with their keys, in arrival order (but for removals).
    pub(crate) fn into_entries(self) -> Vec<(Arc<str>, Arc<K>)> {
        drop(self.index);
        self.entries
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
        let mut t = TempStore::default();
        for (i, k) in ["c", "a", "d", "b"].into_iter().enumerate() {
            t.upsert(k.to_owned(), Arc::new(i as u32));
        }
        t.upsert("a".to_owned(), Arc::new(10));
        t.remove("c");
        t.remove("nope");
        assert_eq!(t.len(), 3);
        t.upsert("e".to_owned(), Arc::new(11));
        t.remove("b");
        t.upsert("b".to_owned(), Arc::new(12));
        assert_eq!(
            keys(t),
            [("e".to_owned(), 11), ("a".to_owned(), 10), ("d".to_owned(), 2), ("b".to_owned(), 12)]
        );
    }
}
