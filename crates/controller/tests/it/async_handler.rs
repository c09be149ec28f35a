//! async_handler tests.
