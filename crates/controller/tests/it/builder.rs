//! builder tests.
