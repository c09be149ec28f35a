//! kcache-delta-fifo's integration tests: one binary, a module per feature (each module's
//! doc says what it covers and which client-go scenario it mirrors).

mod async_pop;
mod common;
mod delta_fifo;
mod model_delta_fifo;
mod model_real_fifo;
mod popped_key;
mod real_fifo;
mod real_fifo_atomic;
mod send_sync;
mod stress;
