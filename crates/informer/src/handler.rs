//! Event handlers: the trait a controller implements, and closure and filtering helpers.

use std::fmt;
use std::sync::Arc;

use kcache_store::ObjectOrTombstone;

/// Receives an informer's notifications (client-go's `ResourceEventHandler`).
///
/// Each handler is called from its own listener thread, one notification at a time, in the order
/// the informer saw the changes. A handler may block or be slow without delaying the informer or
/// any other handler: its notifications wait in its own buffer. The usual handler enqueues a key
/// in a workqueue and returns.
///
/// A listener thread is a plain OS thread, not a Tokio worker: inside a handler there is no
/// current runtime, so `tokio::spawn` or `Handle::current()` panic there (the panic is caught and
/// counted like any other). To start async work from a handler, capture a
/// [`tokio::runtime::Handle`] when registering it and call `handle.spawn(..)`; a workqueue's `add`
/// needs no runtime at all.
///
/// Every method has an empty default, so a handler implements only what it needs.
pub trait ResourceEventHandler<K>: Send + Sync + 'static {
    /// An object was added. `is_in_initial_list` is true for the objects of the initial list
    /// (and of the replay a handler added after start receives).
    fn on_add(&self, obj: &Arc<K>, is_in_initial_list: bool) {
        let _ = (obj, is_in_initial_list);
    }

    /// An object changed from `old` to `new`, or was re-announced unchanged (`old` and `new`
    /// with the same resourceVersion): by a periodic resync, and, as client-go's
    /// `ResourceEventHandler` promises, by a relist even if nothing changed. On an informer
    /// without resync every handler receives those relist updates; on one with resync, every
    /// handler until the first resync check, then the handlers due for a resync (client-go's
    /// rules). [`HandlerOptions::skip_unchanged_updates`](crate::HandlerOptions::skip_unchanged_updates)
    /// limits them to the handler's own resyncs.
    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        let _ = (old, new);
    }

    /// An object was deleted: its last state, or a [`DeletedFinalStateUnknown`](kcache_store::DeletedFinalStateUnknown)
    /// tombstone when the deletion was missed during a disconnection and found by a relist.
    fn on_delete(&self, obj: &ObjectOrTombstone<K>) {
        let _ = obj;
    }
}

type AddFn<K> = Box<dyn Fn(&Arc<K>, bool) + Send + Sync>;
type UpdateFn<K> = Box<dyn Fn(&Arc<K>, &Arc<K>) + Send + Sync>;
type DeleteFn<K> = Box<dyn Fn(&ObjectOrTombstone<K>) + Send + Sync>;

/// A handler built from closures (client-go's `ResourceEventHandlerFuncs`).
///
/// # Examples
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache_informer::EventHandlerFuncs;
///
/// let handler = EventHandlerFuncs::<ConfigMap>::new()
///     .on_add(|cm, _initial| println!("added {:?}", cm.metadata.name))
///     .on_delete(|_| println!("deleted"));
/// # let _ = handler;
/// ```
pub struct EventHandlerFuncs<K> {
    add: Option<AddFn<K>>,
    update: Option<UpdateFn<K>>,
    delete: Option<DeleteFn<K>>,
}

impl<K> fmt::Debug for EventHandlerFuncs<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventHandlerFuncs")
            .field("add", &self.add.is_some())
            .field("update", &self.update.is_some())
            .field("delete", &self.delete.is_some())
            .finish()
    }
}

impl<K> Default for EventHandlerFuncs<K> {
    fn default() -> Self {
        Self { add: None, update: None, delete: None }
    }
}

impl<K> EventHandlerFuncs<K> {
    /// A handler that ignores everything until closures are set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the add closure.
    #[must_use]
    pub fn on_add(mut self, f: impl Fn(&Arc<K>, bool) + Send + Sync + 'static) -> Self {
        self.add = Some(Box::new(f));
        self
    }

    /// Sets the update closure.
    #[must_use]
    pub fn on_update(mut self, f: impl Fn(&Arc<K>, &Arc<K>) + Send + Sync + 'static) -> Self {
        self.update = Some(Box::new(f));
        self
    }

    /// Sets the delete closure.
    #[must_use]
    pub fn on_delete(mut self, f: impl Fn(&ObjectOrTombstone<K>) + Send + Sync + 'static) -> Self {
        self.delete = Some(Box::new(f));
        self
    }
}

impl<K: Send + Sync + 'static> ResourceEventHandler<K> for EventHandlerFuncs<K> {
    fn on_add(&self, obj: &Arc<K>, is_in_initial_list: bool) {
        if let Some(f) = &self.add {
            f(obj, is_in_initial_list);
        }
    }

    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        if let Some(f) = &self.update {
            f(old, new);
        }
    }

    fn on_delete(&self, obj: &ObjectOrTombstone<K>) {
        if let Some(f) = &self.delete {
            f(obj);
        }
    }
}

/// Passes on only the objects a filter accepts (client-go's `FilteringResourceEventHandler`).
///
/// An update is translated when the object moves across the filter: accepted before and after,
/// an update; only before, a delete of the old object; only after, an add of the new one.
///
/// # Examples
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache_informer::{EventHandlerFuncs, FilteringHandler};
///
/// let only_labelled = FilteringHandler::new(
///     |cm: &ConfigMap| cm.metadata.labels.as_ref().is_some_and(|l| l.contains_key("app")),
///     EventHandlerFuncs::<ConfigMap>::new().on_add(|_, _| {}),
/// );
/// # let _ = only_labelled;
/// ```
pub struct FilteringHandler<K, H> {
    filter: Box<dyn Fn(&K) -> bool + Send + Sync>,
    inner: H,
}

impl<K, H: fmt::Debug> fmt::Debug for FilteringHandler<K, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FilteringHandler").field("inner", &self.inner).finish_non_exhaustive()
    }
}

impl<K, H> FilteringHandler<K, H> {
    /// Wraps `inner`, passing on only objects for which `filter` returns true.
    pub fn new(filter: impl Fn(&K) -> bool + Send + Sync + 'static, inner: H) -> Self {
        Self { filter: Box::new(filter), inner }
    }
}

impl<K, H> ResourceEventHandler<K> for FilteringHandler<K, H>
where
    K: Send + Sync + 'static,
    H: ResourceEventHandler<K>,
{
    fn on_add(&self, obj: &Arc<K>, is_in_initial_list: bool) {
        if (self.filter)(obj) {
            self.inner.on_add(obj, is_in_initial_list);
        }
    }

    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        match ((self.filter)(old), (self.filter)(new)) {
            (true, true) => self.inner.on_update(old, new),
            (true, false) => self.inner.on_delete(&ObjectOrTombstone::Object(Arc::clone(old))),
            (false, true) => self.inner.on_add(new, false),
            (false, false) => {}
        }
    }

    fn on_delete(&self, obj: &ObjectOrTombstone<K>) {
        if (self.filter)(obj.object()) {
            self.inner.on_delete(obj);
        }
    }
}
