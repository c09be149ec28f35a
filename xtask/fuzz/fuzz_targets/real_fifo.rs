//! Fuzz target: random add/update/delete/replace/resync/pop sequences on `RealFifo`, with and
//! without atomic events, checked step by step against the reference model the proptests use
//! (`kcache_test_support::fifo_model`).
#![no_main]

mod fifo_ops;

use kcache_test_support::fifo_model as model;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut u = arbitrary::Unstructured::new(data);
    let ops = fifo_ops::ops(&mut u);
    if let Err(e) = model::check_real_fifo(&ops) {
        panic!("RealFifo differs from the model: {e}\nops: {ops:?}");
    }
    if let Err(e) = model::check_real_fifo_atomic(&ops) {
        panic!("RealFifo with atomic events differs from the model: {e}\nops: {ops:?}");
    }
});
