//! The synchronisation primitives the FIFO core uses, behind one small API: `parking_lot` and
//! std atomics normally, loom's model-checked types under `cfg(loom)` (tokio's `src/loom` habit),
//! so `tests/loom_fifo.rs` checks the real pop/close/wake-up code.
//!
//! `Mutex::lock` returns the guard directly (neither side poisons) and `Condvar::wait` takes the
//! guard by value and hands it back.

#[cfg(not(loom))]
mod imp {
    pub(crate) use parking_lot::MutexGuard;
    pub(crate) use std::sync::atomic::{AtomicBool, AtomicUsize};

    /// A non-poisoning mutex (parking_lot's).
    #[derive(Debug)]
    pub(crate) struct Mutex<T>(parking_lot::Mutex<T>);

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Self {
            Self(parking_lot::Mutex::new(value))
        }

        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            self.0.lock()
        }
    }

    /// A condition variable paired with [`Mutex`].
    #[derive(Debug)]
    pub(crate) struct Condvar(parking_lot::Condvar);

    impl Condvar {
        pub(crate) fn new() -> Self {
            Self(parking_lot::Condvar::new())
        }

        pub(crate) fn wait<'a, T>(&self, mut guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
            self.0.wait(&mut guard);
            guard
        }

        pub(crate) fn notify_all(&self) {
            self.0.notify_all();
        }
    }
}

#[cfg(loom)]
mod imp {
    pub(crate) use loom::sync::MutexGuard;
    pub(crate) use loom::sync::atomic::{AtomicBool, AtomicUsize};

    /// loom's mutex; a panic while locked aborts the model anyway, so poisoning is unwrapped.
    #[derive(Debug)]
    pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Self {
            Self(loom::sync::Mutex::new(value))
        }

        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            self.0.lock().unwrap_or_else(|e| e.into_inner())
        }
    }

    /// loom's condition variable.
    #[derive(Debug)]
    pub(crate) struct Condvar(loom::sync::Condvar);

    impl Condvar {
        pub(crate) fn new() -> Self {
            Self(loom::sync::Condvar::new())
        }

        pub(crate) fn wait<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
            self.0.wait(guard).unwrap_or_else(|e| e.into_inner())
        }

        pub(crate) fn notify_all(&self) {
            self.0.notify_all();
        }
    }
}

pub(crate) use imp::*;
