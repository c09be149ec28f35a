//! Property test: `RealFifo` against a small reference model written from the semantics of
//! issue 4 and client-go's `the_real_fifo.go` doc comments (not from the implementation): every
//! delta in arrival order; replace emits tombstones first (queued keys whose last delta is not a
//! deletion, then known keys neither listed nor queued), then `Replaced`. The model and the
//! checker live in `common/model.rs`, shared with the fuzz targets in `xtask/fuzz`.

use crate::common;

use common::*;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The in-order FIFO matches the model step by step.
    #[test]
    fn real_fifo_matches_model(ops in proptest::collection::vec(op_strategy(), 0..40)) {
        check_real_fifo(&ops).map_err(TestCaseError::fail)?;
    }
}
