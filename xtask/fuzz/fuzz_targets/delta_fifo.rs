//! Fuzz target: random add/update/delete/replace/resync/pop sequences on `DeltaFifo` (both
//! `emit_delta_type_replaced` settings), checked step by step against the reference model the
//! proptests use (`kcache_test_support::fifo_model`).
#![no_main]

mod fifo_ops;

use kcache_test_support::fifo_model as model;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut u = arbitrary::Unstructured::new(data);
    let Ok(emit_replaced) = u.arbitrary::<bool>() else { return };
    let ops = fifo_ops::ops(&mut u);
    if let Err(e) = model::check_delta_fifo(&ops, emit_replaced) {
        panic!("DeltaFifo differs from the model: {e}\nops: {ops:?}");
    }
});
