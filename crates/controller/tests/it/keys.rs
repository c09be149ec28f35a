//! keys tests.
