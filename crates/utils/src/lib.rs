//! Small pieces kcache's crates share, as crossbeam-utils is for crossbeam: each too small for a
//! crate of its own, and written once instead of once per crate.
//!
//! * [`sync`]: the `Mutex`, `Condvar` and atomics of the queue cores, switched to loom's
//!   model-checked types under `cfg(loom)` (tokio's `src/loom` facade), so one facade serves
//!   every crate that has loom models.
//! * [`panic_message`]: the message of a caught panic, for the worker runner's and the
//!   informer's reports.
//! * [`FAR_FUTURE`]: about 30 years, the cap on "never" durations so that no deadline overflows.
//! * `Clock`, `SystemClock`, `FakeClock` (cargo feature `clock`): injectable time, shared by the
//!   reflector and the leader elector, so neither depends on the other for it.
//!
//! Only the clock has a client-go counterpart (`k8s.io/utils/clock`); Go needs none of the rest
//! (no loom, panics recovered as values, `time.Time` far from overflow).
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use kcache_utils::sync::Mutex;
//! use kcache_utils::{FAR_FUTURE, panic_message};
//!
//! // A resync period of "never" is planned as 30 years.
//! let resync = Mutex::new(Duration::MAX);
//! let planned = resync.lock().min(FAR_FUTURE);
//! assert_eq!(planned.as_secs() / (365 * 24 * 60 * 60), 30);
//!
//! // A handler's panic becomes a message.
//! let payload = std::panic::catch_unwind(|| panic!("handler failed")).unwrap_err();
//! assert_eq!(panic_message(&*payload), Some("handler failed"));
//! ```

#[cfg(feature = "clock")]
mod clock;
mod panic;
pub mod sync;
mod time;

#[cfg(feature = "clock")]
pub use clock::{Clock, FakeClock, Sleep, SystemClock};
pub use panic::panic_message;
pub use time::FAR_FUTURE;

// The README's example is compiled and run as a doctest here, so it cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct Readme;
