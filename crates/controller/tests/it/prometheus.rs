//! prometheus tests.
