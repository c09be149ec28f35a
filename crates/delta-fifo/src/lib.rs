//! DeltaFIFO and the in-order FIFO between a reflector and an informer: the Rust counterpart of
//! client-go's `DeltaFIFO` (`tools/cache/delta_fifo.go`) and `RealFIFO`
//! (`tools/cache/the_real_fifo.go`).
//!
//! # Concepts
//!
//! A reflector writes every watch event and every relist into a queue through
//! [`ReflectorStore`](kcache_store::ReflectorStore); an informer pops from it, updates its
//! indexer and notifies handlers. Two queues implement both sides ([`Fifo`]):
//!
//! * [`DeltaFifo`] queues *keys*; each key carries the [`Deltas`] accumulated since it was queued,
//!   oldest first, so one pop delivers everything that happened to one object. Only adjacent
//!   deletions are collapsed (client-go's `dedupDeltas`).
//! * [`RealFifo`] queues every [`Delta`] in arrival order and pops them one at a time; it is the
//!   informer default since client-go 1.33 (feature `InOrderInformers`). By default a relist
//!   and a resync are each one pop, an [`AtomicEvent`] carrying all of their deltas, so that
//!   the informer applies a relist to its cache as one unit (client-go's `AtomicFIFO`, on by
//!   default since 1.36); [`RealFifoOptions::atomic_events`] turns that off.
//!
//! Both run the process function *under the queue's lock*: a slow handler blocks the reflector's
//! writes (backpressure) instead of letting the queue grow. A pop whose process takes over 100 ms
//! while more than 10 items wait logs a `tracing` warning "slow event handlers blocking the
//! queue", as client-go's trace does; [`Fifo::len`] exposes the depth for metrics.
//!
//! A relist ([`DeltaFifo::replace`]) emits [`DeletedFinalStateUnknown`](kcache_store::DeletedFinalStateUnknown)
//! tombstones for objects that disappeared while the watch was down, computed against the
//! queue and against [`KnownObjects`](kcache_store::KnownObjects) (the informer's indexer).
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use kcache_delta_fifo::{DeltaFifo, DeltaFifoOptions, DeltaType, Fifo, FifoExt, FifoError};
//! use kcache_store::{key_func, Store};
//!
//! # futures::executor::block_on(async {
//! let kf = key_func(|s: &String| Ok(s.clone()));
//! let indexer = Store::new(kf.clone());
//! let fifo: Arc<dyn Fifo<String>> = Arc::new(DeltaFifo::new(
//!     DeltaFifoOptions::new(kf).known_objects(Arc::new(indexer.clone())).emit_delta_type_replaced(true),
//! ));
//!
//! // The reflector's initial list...
//! fifo.replace(vec![Arc::new("a".to_string()), Arc::new("b".to_string())], "1").unwrap();
//! // ...and the informer's loop, applying each pop to the indexer.
//! while !fifo.has_synced() {
//!     fifo.pop(|deltas, initial| {
//!         assert!(initial);
//!         for d in &deltas {
//!             assert_eq!(d.delta_type, DeltaType::Replaced);
//!             indexer.update(Arc::clone(d.obj()))?;
//!         }
//!         Ok::<_, kcache_store::StoreError>(())
//!     })
//!     .await
//!     .unwrap();
//! }
//! assert_eq!(indexer.len(), 2);
//!
//! fifo.close();
//! assert!(matches!(fifo.pop(|_, _| Ok::<_, FifoError>(())).await, Err(FifoError::Closed)));
//! # });
//! ```

mod delta;
mod delta_fifo;
mod error;
mod fifo;
mod real_fifo;

pub use delta::{AtomicEvent, Delta, DeltaType, Deltas};
pub use delta_fifo::{DeltaFifo, DeltaFifoOptions, TransformFunc};
pub use error::FifoError;
pub use fifo::{Fifo, FifoExt, Pop, ProcessFn};
pub use real_fifo::{RealFifo, RealFifoOptions};
