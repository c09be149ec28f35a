//! health tests.
