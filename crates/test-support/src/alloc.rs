//! A global allocator that counts live heap bytes, for the memory tests and benches of every crate.
//! Install it with `#[global_allocator] static ALLOC: Counting = Counting;` and read [`LIVE`] (and
//! [`PEAK`], the high-water mark since the last [`reset_peak`]) for the whole process, or
//! [`thread_live`] for the calling thread alone (so tests running in parallel do not mix).

// A global allocator has to implement the unsafe `GlobalAlloc`; it only forwards to `System`.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};

/// Forwards to `System`, keeping [`LIVE`] up to date.
#[derive(Debug)]
pub struct Counting;

/// Whether [`Counting`] counts (on unless a bench switches it off around what it times, so the
/// counting costs nothing there but one load).
pub static ENABLED: AtomicBool = AtomicBool::new(true);

/// Bytes currently allocated through [`Counting`].
pub static LIVE: AtomicIsize = AtomicIsize::new(0);

/// The highest [`LIVE`] seen since the last [`reset_peak`].
pub static PEAK: AtomicIsize = AtomicIsize::new(0);

/// Starts a new peak measurement from the current live bytes.
pub fn reset_peak() {
    PEAK.store(LIVE.load(Ordering::Relaxed), Ordering::Relaxed);
}

thread_local! {
    /// Bytes allocated minus bytes freed by this thread. `const` and without a destructor, so
    /// reading it never allocates (which would recurse into the allocator).
    static THREAD_LIVE: Cell<isize> = const { Cell::new(0) };
}

thread_local! {
    /// Allocations (and reallocations) made by this thread; as `THREAD_LIVE`, `const` and
    /// without a destructor.
    static THREAD_ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

/// Bytes allocated minus bytes freed by the calling thread since it started.
pub fn thread_live() -> isize {
    THREAD_LIVE.with(Cell::get)
}

/// Allocations and reallocations the calling thread has made since it started (while
/// [`ENABLED`]): what a test of a hot path reads around one call to count the allocations it
/// makes, whatever they free again.
pub fn thread_allocations() -> u64 {
    THREAD_ALLOCATIONS.with(Cell::get)
}

fn allocated() {
    if ENABLED.load(Ordering::Relaxed) {
        let _ = THREAD_ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
    }
}

fn grew(by: isize) {
    if !ENABLED.load(Ordering::Relaxed) {
        return;
    }
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
    // `try_with`: the allocator also runs while thread-locals are torn down.
    let _ = THREAD_LIVE.try_with(|l| l.set(l.get() + by));
}

// SAFETY: every method forwards to `System` with the same arguments, so `System`'s guarantees
// carry over; the counter is only bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        allocated();
        grew(layout.size() as isize);
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which `System` shares.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        grew(-(layout.size() as isize));
        // SAFETY: `ptr` was allocated by `System` with `layout` (see `alloc`).
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        allocated();
        grew(new_size as isize - layout.size() as isize);
        // SAFETY: forwarded unchanged; `ptr` came from `System` with `layout`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}
