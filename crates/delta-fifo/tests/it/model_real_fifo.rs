//! Property test: `RealFifo` against a small reference model written from the semantics of
//! issue 4 and client-go's `the_real_fifo.go` doc comments (not from the implementation): every
//! delta in arrival order; replace emits tombstones first (queued keys whose last delta is not a
//! deletion, then known keys neither listed nor queued), then `Replaced`. With atomic events
//! (issue 32, client-go's `AtomicFIFO`) a replace or a resync is one item whose deltas are
//! computed against the known objects when it is popped. The model and the checker live in
//! `kcache_test_support::fifo_model`, shared with the fuzz targets in `xtask/fuzz`.

use crate::common;

use common::*;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The in-order FIFO without atomic events matches the model step by step.
    #[test]
    fn real_fifo_matches_model(ops in proptest::collection::vec(op_strategy(), 0..40)) {
        check_real_fifo(&ops).map_err(TestCaseError::fail)?;
    }

    /// The in-order FIFO with atomic events (the default) matches the model step by step.
    #[test]
    fn atomic_real_fifo_matches_model(ops in proptest::collection::vec(op_strategy(), 0..40)) {
        check_real_fifo_atomic(&ops).map_err(TestCaseError::fail)?;
    }
}
