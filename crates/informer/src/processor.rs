//! The shared processor: the set of listeners and the distributor that never waits for them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use tokio::time::Instant;

use crate::listener::{Listener, Notification};

/// One handler's counters at one moment ([`SharedIndexInformer::handler_stats`](crate::SharedIndexInformer::handler_stats)):
/// what [`HandlerRegistration`](crate::HandlerRegistration) reports for its own handler, for
/// every handler of an informer, whoever registered it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HandlerStats {
    /// The handler's name ([`HandlerRegistration::name`](crate::HandlerRegistration::name)).
    pub name: String,
    /// Notifications waiting for it: its backlog.
    pub pending: usize,
    /// The largest backlog it has had.
    pub pending_high_water: usize,
    /// Notifications delivered to it so far.
    pub delivered: u64,
    /// Times it panicked.
    pub panics: u64,
}

/// client-go's `sharedProcessor`.
pub(crate) struct Processor<K> {
    listeners: RwLock<Vec<Arc<Listener<K>>>>,
    started: AtomicBool,
    /// Set (under the `listeners` write lock) once stopped.
    stopped: AtomicBool,
    /// The threads of removed listeners, which may still be finishing a notification; `join`
    /// joins them. Only the threads: a removed listener (and its handler, with whatever the
    /// handler holds) is freed as soon as its thread ends.
    retired: Mutex<Vec<std::thread::JoinHandle<()>>>,
    next_id: AtomicU64,
}

impl<K: Send + Sync + 'static> Processor<K> {
    pub(crate) fn new() -> Self {
        Self {
            listeners: RwLock::new(Vec::new()),
            started: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            retired: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(1),
        }
    }

    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Registers a listener, starting its thread if the processor runs. Fails (registering
    /// nothing) only if the OS refuses the thread.
    pub(crate) fn add_listener(&self, listener: Arc<Listener<K>>) -> std::io::Result<()> {
        let mut ls = self.listeners.write();
        if self.stopped.load(Ordering::Acquire) {
            // Too late: a thread started now would never be stopped.
            listener.stop();
            return Ok(());
        }
        if self.started.load(Ordering::Acquire) {
            listener.start()?;
        }
        ls.push(listener);
        Ok(())
    }

    /// Removes a listener; its pending notifications are dropped. Returns whether it was there.
    /// Does not wait for its thread (which ends after the current notification), but `join`
    /// will.
    pub(crate) fn remove_listener(&self, id: u64) -> Option<Arc<Listener<K>>> {
        let mut ls = self.listeners.write();
        let idx = ls.iter().position(|l| l.id == id)?;
        let l = ls.remove(idx);
        drop(ls);
        l.stop();
        let mut retired = self.retired.lock();
        retired.retain(|h| !h.is_finished());
        retired.extend(l.take_thread());
        Some(l)
    }

    /// Hands `n` to every listener (when `is_sync`, only to those in the syncing set: client-go's
    /// `sharedProcessor.distribute`).
    pub(crate) fn distribute(&self, n: &Notification<K>, is_sync: bool) {
        for l in self.listeners.read().iter() {
            if is_sync && !l.syncing.load(Ordering::Acquire) {
                continue;
            }
            l.add(n.clone());
        }
    }

    /// Starts every listener's thread; stops at the first the OS refuses.
    pub(crate) fn start(&self) -> std::io::Result<()> {
        let ls = self.listeners.read();
        self.started.store(true, Ordering::Release);
        for l in ls.iter() {
            l.start()?;
        }
        Ok(())
    }

    /// Waits for the threads of `stopped` (as [`stop_without_join`](Self::stop_without_join)
    /// returned them) and of every listener removed earlier.
    pub(crate) fn join(&self, stopped: &[Arc<Listener<K>>]) {
        for l in stopped {
            l.join();
        }
        // Removed listeners too: when the informer has stopped, no handler thread is left.
        let retired: Vec<_> = self.retired.lock().drain(..).collect();
        for h in retired {
            if h.thread().id() != std::thread::current().id() {
                let _ = h.join(); // not from a handler removed earlier that is stopping us
            }
        }
    }

    /// Stops every listener (each thread ends after its current notification) without waiting;
    /// returns them. Listeners added afterwards are never started.
    pub(crate) fn stop_without_join(&self) -> Vec<Arc<Listener<K>>> {
        let ls: Vec<_> = {
            let mut ls = self.listeners.write();
            self.stopped.store(true, Ordering::Release);
            ls.drain(..).collect()
        };
        for l in &ls {
            l.stop();
        }
        ls
    }

    /// client-go's `shouldResync`: marks the listeners due for resync and reports whether any is.
    pub(crate) fn should_resync(&self, now: Instant) -> bool {
        let mut any = false;
        for l in self.listeners.read().iter() {
            let due = l.should_resync(now);
            l.syncing.store(due, Ordering::Release);
            if due {
                any = true;
                l.determine_next_resync(now);
            }
        }
        any
    }

    /// The counters of every registered listener, in registration order.
    pub(crate) fn stats(&self) -> Vec<HandlerStats> {
        self.listeners
            .read()
            .iter()
            .map(|l| HandlerStats {
                name: l.name.clone(),
                pending: l.pending(),
                pending_high_water: l.high_water(),
                delivered: l.delivered(),
                panics: l.panics(),
            })
            .collect()
    }

    /// client-go's `resyncCheckPeriodChanged`.
    pub(crate) fn resync_check_period_changed(&self, check: Duration) {
        for l in self.listeners.read().iter() {
            l.set_resync_period(determine_resync_period(l.requested_resync_period, check));
        }
    }
}

/// client-go's `determineResyncPeriod`: zero stays zero; no check period disables resync; a
/// period shorter than the check period is raised to it.
pub(crate) fn determine_resync_period(desired: Duration, check: Duration) -> Duration {
    if desired.is_zero() {
        return desired;
    }
    if check.is_zero() {
        tracing::info!(?desired, "the resync period is ignored: this informer does not resync");
        return Duration::ZERO;
    }
    if desired < check {
        tracing::info!(?desired, ?check, "the resync period is raised to the informer's resync check period");
        return check;
    }
    desired
}
