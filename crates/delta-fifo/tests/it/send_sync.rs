//! Asserts `Send`/`Sync` (and `Unpin` for the pop future) of every public type, so FIFOs can be
//! shared between a reflector task and an informer task.

use std::sync::Arc;

use kcache_delta_fifo::{
    AtomicEvent, Delta, DeltaFifo, DeltaFifoOptions, DeltaType, Deltas, Fifo, FifoError, Pop, RealFifo,
    RealFifoOptions,
};

struct Obj;

fn send_sync<T: Send + Sync>() {}
fn send<T: Send>(_: &T) {}
fn unpin<T: Unpin>(_: &T) {}

#[test]
fn public_types_are_send_and_sync() {
    send_sync::<DeltaFifo<Obj>>();
    send_sync::<RealFifo<Obj>>();
    send_sync::<DeltaFifoOptions<Obj>>();
    send_sync::<RealFifoOptions<Obj>>();
    send_sync::<Delta<Obj>>();
    send_sync::<Deltas<Obj>>();
    send_sync::<DeltaType>();
    send_sync::<AtomicEvent>();
    send_sync::<FifoError>();
    send_sync::<Arc<dyn Fifo<Obj>>>();
    send_sync::<Pop<'static, Obj, dyn Fifo<Obj>, fn(Deltas<Obj>, bool) -> Result<(), FifoError>>>();
}

#[test]
fn pop_future_is_send_and_unpin() {
    let f: Arc<dyn Fifo<Obj>> =
        Arc::new(DeltaFifo::new(DeltaFifoOptions::new(kcache_store::key_func(|_: &Obj| {
            Ok(String::from("k"))
        }))));
    let fut = kcache_delta_fifo::FifoExt::pop(&*f, |_: Deltas<Obj>, _| Ok::<_, FifoError>(()));
    send(&fut);
    unpin(&fut);
}
