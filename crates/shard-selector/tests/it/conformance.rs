//! The Go conformance table (see the crate README); filled in by the next commit.
