//! http tests.
