//! Key functions and tombstones: client-go's `MetaNamespaceKeyFunc`, `SplitMetaNamespaceKey` and
//! `DeletionHandlingMetaNamespaceKeyFunc` (`tools/cache/store.go`, tested in `store_test.go`
//! and `controller_test.go`).

use crate::common;

use std::sync::Arc;

use common::*;
use kcache_store::{
    DeletedFinalStateUnknown, KeyError, ObjectOrTombstone, deletion_handling_key, meta_namespace_key,
    split_meta_namespace_key,
};

/// Namespaced and cluster-scoped keys.
#[test]
fn meta_namespace_keys() {
    assert_eq!(meta_namespace_key("ns", "n"), "ns/n");
    assert_eq!(meta_namespace_key("", "n"), "n");
}

/// Mirrors the table of `TestSplitMetaNamespaceKey`-style cases in client-go.
#[test]
fn split_keys() {
    assert_eq!(split_meta_namespace_key("ns/n").unwrap(), ("ns", "n"));
    assert_eq!(split_meta_namespace_key("n").unwrap(), ("", "n"));
    assert_eq!(split_meta_namespace_key("/n").unwrap(), ("", "n"));
    assert_eq!(split_meta_namespace_key("").unwrap(), ("", ""));
    let err = split_meta_namespace_key("a/b/c").unwrap_err();
    assert!(matches!(&err, KeyError::InvalidKey { key } if key == "a/b/c"));
    assert_eq!(err.to_string(), "unexpected key format: \"a/b/c\"");
}

/// Mirrors `DeletionHandlingMetaNamespaceKeyFunc`: a tombstone's key is its stored key, whatever
/// its object says; a live object's is the key function's. Also mirrors client-go
/// controller_test.go `TestDeletedObjectGetKey` (the key of a deleted object, live or
/// tombstone; `ObjectOrTombstone` is the counterpart of `DeletedObject`) and
/// `TestDeletionHandlingObjectToName` (a tombstone names the object by its stored key).
#[test]
fn deletion_handling_key_uses_tombstone_key() {
    let kf = key_fn();
    let tomb = ObjectOrTombstone::Tombstone(DeletedFinalStateUnknown {
        key: "stored/key".into(),
        obj: obj("other", "name", &[]),
    });
    assert_eq!(deletion_handling_key(&kf, &tomb).unwrap(), "stored/key");
    assert!(tomb.is_tombstone());
    assert_eq!(tomb.object().name, "name");
    let live = ObjectOrTombstone::Object(obj("ns", "live", &[]));
    assert_eq!(deletion_handling_key(&kf, &live).unwrap(), "ns/live");
    assert!(live.tombstone().is_none());
    assert_eq!(live.clone(), live);
    assert_ne!(live, tomb);
    let t2 = tomb.tombstone().unwrap().clone();
    assert!(Arc::ptr_eq(&t2.obj, tomb.object()));
}

/// The namespace index derived from keys.
#[test]
fn namespace_index_from_key() {
    let f = kcache_store::namespace_index_func_from_key(key_fn());
    assert_eq!(f(&obj("ns", "a", &[])).unwrap(), ["ns"]);
    assert_eq!(f(&obj("", "a", &[])).unwrap(), [""]);
}

/// Mirrors client-go store_test.go `TestKeyError`: a key function's own error stays reachable
/// through the error chain, also when the store wraps it, so callers can match on it.
#[test]
fn key_error_keeps_the_key_functions_error_as_its_source() {
    #[derive(Debug, PartialEq)]
    struct NoKey(&'static str);
    impl std::fmt::Display for NoKey {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "no key: {}", self.0)
        }
    }
    impl std::error::Error for NoKey {}

    let store: kcache_store::Store<Obj> = kcache_store::Store::new(kcache_store::key_func(|_: &Obj| {
        Err(KeyError::Custom(Box::new(NoKey("test"))))
    }));
    let err = store.add(obj("ns", "a", &[])).unwrap_err();
    assert!(matches!(err, kcache_store::StoreError::Key(KeyError::Custom(_))), "{err:?}");
    // The chain: StoreError -> KeyError -> the key function's error, found by walking it.
    let mut chain = std::iter::successors(Some(&err as &dyn std::error::Error), |e| e.source());
    assert!(chain.any(|e| e.downcast_ref::<NoKey>() == Some(&NoKey("test"))));
    assert!(store.is_empty(), "a key error stores nothing");
}
