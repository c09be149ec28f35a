//! `AsyncHandler`: an event handler that is an async fn, run on the application's runtime.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;

use kcache_informer::{ObjectOrTombstone, ResourceEventHandler};
use tokio::runtime::Handle;
use tokio::sync::Semaphore;

/// One informer notification, as an [`AsyncHandler`]'s function receives it (the three methods
/// of [`ResourceEventHandler`] as one value, owned, so the future can keep it).
#[derive(Debug, Clone)]
pub enum Notification<K> {
    /// `on_add`: the object, and whether it belongs to the initial list.
    Add {
        /// The object.
        object: Arc<K>,
        /// Part of the informer's initial list (or of a late handler's replay).
        is_in_initial_list: bool,
    },
    /// `on_update`: the old and the new object (the same resource version for a resync or an
    /// unchanged relist).
    Update {
        /// The object before.
        old: Arc<K>,
        /// The object after.
        new: Arc<K>,
    },
    /// `on_delete`: the last state, or a tombstone for a deletion missed while disconnected.
    Delete(ObjectOrTombstone<K>),
}

/// An event handler that is an async fn, run on the application's Tokio runtime.
///
/// An informer calls its handlers on listener threads of its own, plain OS threads with no
/// Tokio context: `tokio::spawn` or `Handle::current()` inside a handler panics ("there is no
/// reactor running"). `AsyncHandler` captures a runtime [`Handle`] when it is created (inside the
/// runtime) and, for each notification, spawns the function's future on that runtime.
///
/// **Backpressure.** At most `max_in_flight` futures run at once (1 by default). While they
/// all run, the listener thread waits: the notifications that arrive meanwhile wait in the
/// handler's own buffer (its backlog, [`HandlerRegistration::pending`](kcache_informer::HandlerRegistration::pending)),
/// and neither the informer nor its other handlers are slowed, as with any slow handler. With
/// the default of 1 the calls run one after another, in the informer's order, and a panic in
/// one is the handler's panic (counted, and fatal under
/// [`PanicPolicy::FailInformer`](kcache_informer::PanicPolicy::FailInformer)). With more, calls
/// start in order but may overlap and finish in any order, and a panic is only logged.
///
/// If the runtime shuts down, pending calls are dropped.
///
/// # Panics
///
/// Its handler methods block the calling thread until a call can start (and, in order, until
/// it ends): call them from an informer's listener thread, as the informer does, not from
/// inside a Tokio runtime, where blocking panics.
///
/// # Examples
///
/// ```no_run
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache_controller::{AsyncHandler, Notification};
/// use kcache_informer::SharedIndexInformer;
///
/// # async fn f(informer: SharedIndexInformer<ConfigMap>, client: kube::Client) -> anyhow::Result<()> {
/// let handler = AsyncHandler::new(move |n: Notification<ConfigMap>| {
///     let client = client.clone();
///     async move {
///         if let Notification::Add { object, .. } = n {
///             // Async work on the application's runtime: API calls, timers, tokio::spawn.
///             let _ = (client, object);
///         }
///     }
/// });
/// informer.add_event_handler(handler)?;
/// # Ok(()) }
/// ```
pub struct AsyncHandler<K, F> {
    handle: Handle,
    f: Arc<F>,
    /// One permit per call that may run at once.
    permits: Arc<Semaphore>,
    in_order: bool,
    _kind: PhantomData<fn(K)>,
}

impl<K, F> fmt::Debug for AsyncHandler<K, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncHandler").field("in_order", &self.in_order).finish_non_exhaustive()
    }
}

impl<K, F, Fut> AsyncHandler<K, F>
where
    K: Send + Sync + 'static,
    F: Fn(Notification<K>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    /// A handler calling `f` on the current runtime, one call at a time.
    ///
    /// # Panics
    ///
    /// Outside a Tokio runtime (use [`with_handle`](Self::with_handle) there).
    pub fn new(f: F) -> Self {
        Self::with_handle(Handle::current(), f)
    }

    /// A handler calling `f` on the runtime of `handle`, one call at a time.
    pub fn with_handle(handle: Handle, f: F) -> Self {
        Self {
            handle,
            f: Arc::new(f),
            permits: Arc::new(Semaphore::new(1)),
            in_order: true,
            _kind: PhantomData,
        }
    }

    /// Lets up to `n` calls run at once (at least 1). See the type's docs for what changes
    /// beyond 1: order of completion and panics.
    #[must_use]
    pub fn max_in_flight(mut self, n: usize) -> Self {
        let n = n.clamp(1, Semaphore::MAX_PERMITS);
        self.permits = Arc::new(Semaphore::new(n));
        self.in_order = n == 1;
        self
    }

    fn call(&self, notification: Notification<K>) {
        if self.in_order {
            // Wait for the call itself: in order, and a panic is re-raised here, on the listener
            // thread, where the informer counts it and applies the handler's panic policy.
            let task = self.handle.spawn((self.f)(notification));
            match self.handle.block_on(task) {
                Ok(()) => {}
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(_) => tracing::debug!("async handler call cancelled: the runtime is shutting down"),
            }
            return;
        }
        // A permit per running call; the listener thread waits here while all are taken.
        let Ok(permit) = self.handle.block_on(Arc::clone(&self.permits).acquire_owned()) else {
            return; // never closed
        };
        let future = (self.f)(notification);
        self.handle.spawn(async move {
            let _permit = permit;
            if futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(future)).await.is_err() {
                // Not the message: it may quote the object.
                tracing::error!("an async handler call panicked");
            }
        });
    }
}

impl<K, F, Fut> ResourceEventHandler<K> for AsyncHandler<K, F>
where
    K: Send + Sync + 'static,
    F: Fn(Notification<K>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    fn on_add(&self, obj: &Arc<K>, is_in_initial_list: bool) {
        self.call(Notification::Add { object: Arc::clone(obj), is_in_initial_list });
    }

    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        self.call(Notification::Update { old: Arc::clone(old), new: Arc::clone(new) });
    }

    fn on_delete(&self, obj: &ObjectOrTombstone<K>) {
        self.call(Notification::Delete(obj.clone()));
    }
}
