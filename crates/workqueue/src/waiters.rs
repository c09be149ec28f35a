//! A FIFO list of parked async waiters, kept under the owning queue's mutex.
//!
//! This plays the role `sync.Cond` plays in client-go for tasks instead of threads. Keeping the
//! list inside the queue's own lock (rather than using `tokio::sync::Notify` beside it) is what
//! lets loom model the whole get / wake / cancel protocol, and makes the cancel-safety rule easy
//! to state: a waiter that was popped (notified) but is dropped before it polls again passes the
//! notification on, so a cancelled `get` never strands an item while another getter sleeps.

use std::collections::VecDeque;
use std::task::Waker;

/// Parked waiters in arrival order.
#[derive(Debug, Default)]
pub(crate) struct WaitList {
    /// Id handed to the next new waiter; ids are never reused while a queue lives.
    next_id: u64,
    /// Registered waiters. A waiter absent from this list but holding an id has been notified.
    entries: VecDeque<(u64, Waker)>,
}

impl WaitList {
    /// Registers (or refreshes) the waiter whose id lives in `slot`.
    pub(crate) fn register(&mut self, slot: &mut Option<u64>, waker: &Waker) {
        if let Some(id) = *slot {
            if let Some(entry) = self.entries.iter_mut().find(|e| e.0 == id) {
                if !entry.1.will_wake(waker) {
                    entry.1 = waker.clone();
                }
                return;
            }
            self.entries.push_back((id, waker.clone()));
        } else {
            let id = self.next_id;
            self.next_id += 1;
            *slot = Some(id);
            self.entries.push_back((id, waker.clone()));
        }
    }

    /// Removes the waiter `id`; returns whether it was still registered (not yet notified).
    pub(crate) fn remove(&mut self, id: u64) -> bool {
        match self.entries.iter().position(|e| e.0 == id) {
            Some(pos) => {
                self.entries.remove(pos);
                true
            }
            None => false,
        }
    }

    /// Pops the longest-waiting waiter so the caller can wake it after unlocking.
    pub(crate) fn pop(&mut self) -> Option<Waker> {
        self.entries.pop_front().map(|e| e.1)
    }

    /// Takes every waiter (shutdown, drain completion).
    pub(crate) fn take_all(&mut self) -> VecDeque<(u64, Waker)> {
        std::mem::take(&mut self.entries)
    }

    /// Are no tasks parked?
    #[allow(dead_code)]
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Wakes every waiter in `list` (call after the lock is released).
pub(crate) fn wake_all(list: VecDeque<(u64, Waker)>) {
    for (_, waker) in list {
        waker.wake();
    }
}
