//! interop tests.
