//! Property test: `DeltaFifo` against a small reference model written from the semantics list of
//! issue 4 and client-go's `delta_fifo.go` doc comments (not from the implementation). Random
//! add/update/delete/replace/resync/pop sequences; after every step the popped item, the queued
//! keys, the depth and `has_synced` must agree. The model and the checker live in
//! `common/model.rs`, shared with the fuzz targets in `xtask/fuzz`.

use crate::common;

use common::*;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The DeltaFIFO matches the model with `Sync` for listed objects (client-go's default).
    #[test]
    fn delta_fifo_matches_model(ops in proptest::collection::vec(op_strategy(), 0..40)) {
        check_delta_fifo(&ops, false).map_err(TestCaseError::fail)?;
    }

    /// The DeltaFIFO matches the model with `Replaced` for listed objects (informers' setting).
    #[test]
    fn delta_fifo_matches_model_replaced(ops in proptest::collection::vec(op_strategy(), 0..40)) {
        check_delta_fifo(&ops, true).map_err(TestCaseError::fail)?;
    }
}
