//! Asserts that the public types are `Send` and `Sync` (tokio's `async_send_sync.rs` habit), so a
//! store can be shared between a reflector task and reader threads.

use kcache_store::{
    BoxError, DeletedFinalStateUnknown, IndexError, IndexFunc, Indexers, KeyError, KeyFunc, KnownObjects,
    ObjectOrTombstone, ReflectorStore, Store, StoreError,
};

fn send_sync<T: Send + Sync>() {}
fn send_sync_static<T: Send + Sync + 'static>() {}

struct Obj;

#[test]
fn public_types_are_send_and_sync() {
    send_sync::<Store<Obj>>();
    send_sync::<DeletedFinalStateUnknown<Obj>>();
    send_sync::<ObjectOrTombstone<Obj>>();
    send_sync::<KeyFunc<Obj>>();
    send_sync::<IndexFunc<Obj>>();
    send_sync::<Indexers<Obj>>();
    send_sync_static::<KeyError>();
    send_sync_static::<IndexError>();
    send_sync_static::<StoreError>();
    send_sync_static::<BoxError>();
    send_sync::<std::sync::Arc<dyn ReflectorStore<Obj>>>();
    send_sync::<std::sync::Arc<dyn KnownObjects<Obj>>>();
}
