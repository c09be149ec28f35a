//! Concurrent readers and writers on one store (the informer's situation: one writer, many
//! listers): bounded thread stress, no timing assertions.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

use common::*;

/// Writers add, update and delete while readers list, get and query the index; at every read the
/// index and the map agree, and at the end the contents are exactly what the writers left.
#[test]
fn readers_and_writers() {
    let store = store_with(&[("by_ns", ns_index()), ("by_val", vals_index())]);
    let done = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let store = store.clone();
            thread::spawn(move || {
                for round in 0..200 {
                    for i in 0..20 {
                        let ns = format!("w{w}");
                        let name = format!("o{i}");
                        let val = format!("v{}", (round + i) % 3);
                        store.update(obj(&ns, &name, &[&val])).unwrap();
                        if (round + i) % 7 == 0 {
                            store.delete_by_key(&format!("{ns}/{name}")).unwrap();
                        }
                    }
                }
                // Leave a known final state: everything present with value "end".
                for i in 0..20 {
                    store.update(obj(&format!("w{w}"), &format!("o{i}"), &["end"])).unwrap();
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let store = store.clone();
            let done = done.clone();
            thread::spawn(move || {
                let mut reads = 0u64;
                while !done.load(Ordering::Acquire) || reads < 100 {
                    for o in store.by_index("by_ns", "w0").unwrap() {
                        assert_eq!(o.ns, "w0");
                    }
                    for v in ["v0", "v1", "v2"] {
                        for o in store.by_index("by_val", v).unwrap() {
                            assert_eq!(o.vals, [v.to_string()]);
                        }
                    }
                    assert!(store.list().len() <= 40);
                    reads += 1;
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    done.store(true, Ordering::Release);
    for r in readers {
        r.join().unwrap();
    }
    assert_eq!(store.len(), 40);
    assert_eq!(store.by_index("by_val", "end").unwrap().len(), 40);
    assert_eq!(sorted(store.list_index_func_values("by_val")), ["end"]);
    assert_eq!(store.by_index("by_ns", "w1").unwrap().len(), 20);
}

/// A writer swaps the whole contents back and forth between two versions of the same 200 objects
/// with `replace_with_keys` (an informer applying atomic relists) while readers list and query
/// the index: every read sees one version of every object, never a mix.
#[test]
fn replace_with_keys_is_seen_whole() {
    let store = store_with(&[("by_val", vals_index())]);
    let version = |v: &str| -> Vec<(Arc<str>, Arc<Obj>)> {
        (0..200)
            .map(|i| {
                let o = obj("ns", &format!("o{i}"), &[v]);
                (Arc::from(format!("ns/o{i}")), o)
            })
            .collect()
    };
    let (old, new) = (version("old"), version("new"));
    store.replace_with_keys(old.iter().map(|(k, o)| (k, o)), "1").unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let store = store.clone();
            let done = done.clone();
            thread::spawn(move || {
                let mut reads = 0u64;
                while !done.load(Ordering::Acquire) || reads < 100 {
                    let list = store.list();
                    assert_eq!(list.len(), 200);
                    let first = list[0].vals.clone();
                    assert!(list.iter().all(|o| o.vals == first), "a mix of versions in one list");
                    let by_val = store.by_index("by_val", "new").unwrap().len();
                    assert!(by_val == 0 || by_val == 200, "{by_val} objects indexed as new");
                    reads += 1;
                }
            })
        })
        .collect();
    for round in 0..200 {
        let (v, items) = if round % 2 == 0 { ("new", &new) } else { ("old", &old) };
        let previous = store.replace_with_keys(items.iter().map(|(k, o)| (k, o)), "2").unwrap();
        let other = if v == "new" { "old" } else { "new" };
        assert!(previous.iter().all(|p| p.as_ref().is_some_and(|o| o.vals == [other])));
    }
    done.store(true, Ordering::Release);
    for r in readers {
        r.join().unwrap();
    }
}
