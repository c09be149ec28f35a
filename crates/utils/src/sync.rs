//! The locks and atomics kcache's queues are built on: `parking_lot` and std normally, loom's
//! model-checked types under `cfg(loom)` (tokio's `src/loom` habit).
//!
//! kcache-workqueue's queue core and kcache-delta-fifo's FIFO core import their `Mutex`,
//! `Condvar` and atomics from here, so their loom models (`tests/loom.rs`,
//! `tests/loom_fifo.rs`) check the real code, not a copy of it. Building with
//! `RUSTFLAGS="--cfg loom"` switches every crate of the build at once.
//!
//! Both sides expose the same small, non-poisoning API: [`Mutex::lock`] returns the guard
//! directly and [`Condvar::wait`] takes the guard by value and hands it back, so the code that
//! uses them compiles unchanged under either.
//!
//! # Examples
//!
//! A one-shot signal between two threads:
//!
//! ```
//! use std::sync::Arc;
//! use kcache_utils::sync::{Condvar, Mutex};
//!
//! let signal = Arc::new((Mutex::new(false), Condvar::new()));
//! let setter = {
//!     let signal = Arc::clone(&signal);
//!     std::thread::spawn(move || {
//!         *signal.0.lock() = true;
//!         signal.1.notify_all();
//!     })
//! };
//! let mut set = signal.0.lock();
//! while !*set {
//!     set = signal.1.wait(set);
//! }
//! drop(set);
//! setter.join().unwrap();
//! ```

#[cfg(not(loom))]
mod imp {
    pub use parking_lot::MutexGuard;
    pub use std::sync::atomic::{AtomicBool, AtomicUsize};

    /// A mutual exclusion lock that does not poison (parking_lot's).
    #[derive(Debug)]
    pub struct Mutex<T>(parking_lot::Mutex<T>);

    impl<T> Mutex<T> {
        /// A new, unlocked mutex holding `value`.
        #[inline]
        pub fn new(value: T) -> Self {
            Self(parking_lot::Mutex::new(value))
        }

        /// Locks the mutex, blocking the thread until it is free.
        #[inline]
        pub fn lock(&self) -> MutexGuard<'_, T> {
            self.0.lock()
        }
    }

    /// A condition variable paired with [`Mutex`] (parking_lot's).
    #[derive(Debug)]
    pub struct Condvar(parking_lot::Condvar);

    impl Condvar {
        /// A new condition variable with no waiters.
        #[inline]
        pub fn new() -> Self {
            Self(parking_lot::Condvar::new())
        }

        /// Releases `guard`'s lock, blocks until notified, and locks again. Like every condition
        /// variable it may wake spuriously: check the condition in a loop.
        #[inline]
        pub fn wait<'a, T>(&self, mut guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
            self.0.wait(&mut guard);
            guard
        }

        /// Wakes one waiting thread, if there is one.
        #[inline]
        pub fn notify_one(&self) {
            self.0.notify_one();
        }

        /// Wakes every waiting thread.
        #[inline]
        pub fn notify_all(&self) {
            self.0.notify_all();
        }
    }

    impl Default for Condvar {
        fn default() -> Self {
            Self::new()
        }
    }
}

#[cfg(loom)]
mod imp {
    pub use loom::sync::MutexGuard;
    pub use loom::sync::atomic::{AtomicBool, AtomicUsize};

    /// loom's model-checked mutex. A poisoned lock only happens after a panic in the model,
    /// which fails the model anyway, so poisoning is unwrapped.
    #[derive(Debug)]
    pub struct Mutex<T>(loom::sync::Mutex<T>);

    impl<T> Mutex<T> {
        /// A new, unlocked mutex holding `value`.
        #[inline]
        pub fn new(value: T) -> Self {
            Self(loom::sync::Mutex::new(value))
        }

        /// Locks the mutex, blocking the (model) thread until it is free.
        #[inline]
        pub fn lock(&self) -> MutexGuard<'_, T> {
            self.0.lock().unwrap_or_else(|p| p.into_inner())
        }
    }

    /// loom's model-checked condition variable.
    #[derive(Debug)]
    pub struct Condvar(loom::sync::Condvar);

    impl Condvar {
        /// A new condition variable with no waiters.
        #[inline]
        pub fn new() -> Self {
            Self(loom::sync::Condvar::new())
        }

        /// Releases `guard`'s lock, blocks until notified, and locks again.
        #[inline]
        pub fn wait<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
            self.0.wait(guard).unwrap_or_else(|p| p.into_inner())
        }

        /// Wakes one waiting thread, if there is one.
        #[inline]
        pub fn notify_one(&self) {
            self.0.notify_one();
        }

        /// Wakes every waiting thread.
        #[inline]
        pub fn notify_all(&self) {
            self.0.notify_all();
        }
    }

    impl Default for Condvar {
        fn default() -> Self {
            Self::new()
        }
    }
}

pub use imp::{AtomicBool, AtomicUsize, Condvar, Mutex, MutexGuard};
