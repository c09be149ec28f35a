//! `Delta`, `DeltaType` and `Deltas`: one change to one object, and the changes queued for a key.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use kcache_store::{DeletedFinalStateUnknown, ObjectOrTombstone};

/// The kind of a change (client-go's `DeltaType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeltaType {
    /// The object was added (watch `ADDED`).
    Added,
    /// The object was modified (watch `MODIFIED`).
    Updated,
    /// The object was deleted (watch `DELETED`, or a tombstone inferred from a relist).
    Deleted,
    /// The object was in a relist (only when `emit_delta_type_replaced` is on, and always in the
    /// in-order FIFO).
    Replaced,
    /// A periodic resync, or a relist with `emit_delta_type_replaced` off.
    Sync,
}

impl fmt::Display for DeltaType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DeltaType::Added => "Added",
            DeltaType::Updated => "Updated",
            DeltaType::Deleted => "Deleted",
            DeltaType::Replaced => "Replaced",
            DeltaType::Sync => "Sync",
        })
    }
}

/// One change: its type and the object's state after it (for a deletion, the final state, or a
/// tombstone when the deletion was inferred from a relist). Client-go's `Delta`.
pub struct Delta<K> {
    /// What happened.
    pub delta_type: DeltaType,
    /// The object, or a tombstone (only with [`DeltaType::Deleted`]).
    pub object: ObjectOrTombstone<K>,
}

impl<K> Delta<K> {
    /// A delta carrying an object.
    pub fn new(delta_type: DeltaType, obj: Arc<K>) -> Self {
        Self { delta_type, object: ObjectOrTombstone::Object(obj) }
    }

    /// A `Deleted` delta carrying a tombstone.
    pub fn tombstone(key: String, obj: Arc<K>) -> Self {
        Self {
            delta_type: DeltaType::Deleted,
            object: ObjectOrTombstone::Tombstone(DeletedFinalStateUnknown { key, obj }),
        }
    }

    /// The object, or the last known state inside a tombstone.
    pub fn obj(&self) -> &Arc<K> {
        self.object.object()
    }
}

impl<K> Clone for Delta<K> {
    fn clone(&self) -> Self {
        Self { delta_type: self.delta_type, object: self.object.clone() }
    }
}

impl<K: fmt::Debug> fmt::Debug for Delta<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delta").field("delta_type", &self.delta_type).field("object", &self.object).finish()
    }
}

impl<K: PartialEq> PartialEq for Delta<K> {
    fn eq(&self, other: &Self) -> bool {
        self.delta_type == other.delta_type && self.object == other.object
    }
}

/// One of the in-order FIFO's atomic events (client-go's `ReplacedAll` and `SyncAll` delta
/// types, feature `AtomicFIFO`): a pop that hands over a whole relist or a whole resync at once,
/// so that the consumer can apply it as one unit before telling anyone about it.
///
/// See [`Deltas::atomic_event`] and [`RealFifoOptions::atomic_events`](crate::RealFifoOptions::atomic_events).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AtomicEvent {
    /// A whole relist (client-go's `ReplacedAll`). The deltas are a
    /// [`DeletedFinalStateUnknown`](kcache_store::DeletedFinalStateUnknown) tombstone (type
    /// [`DeltaType::Deleted`]) for every known object the list does not have, then
    /// [`DeltaType::Replaced`] for every listed object, in list order: after applying them the
    /// consumer holds exactly the listed objects.
    ReplacedAll {
        /// The resource version of the list.
        resource_version: String,
    },
    /// A resync (client-go's `SyncAll`): a [`DeltaType::Sync`] for every known object.
    SyncAll,
}

/// The changes to one object, oldest first (client-go's `Deltas`), or one of the in-order
/// FIFO's [atomic events](AtomicEvent). Dereferences to a slice.
///
/// A pop hands over the changes to one object, never empty, queued under one key
/// ([`key`](Self::key)), so that a consumer filing the object in a store keyed the same way need
/// not compute it again. A pop of an atomic event ([`atomic_event`](Self::atomic_event) is
/// `Some`) hands over the deltas of many objects at once, each with its own key
/// ([`key_at`](Self::key_at)); it is empty when the relist or resync concerns no object.
pub struct Deltas<K> {
    deltas: Vec<Delta<K>>,
    shape: Shape,
}

/// What a [`Deltas`] holds besides its deltas.
enum Shape {
    /// Changes to one object, queued under this key (`None`: made by `from_vec`).
    Single(Option<Arc<str>>),
    /// An atomic event.
    Atomic(Box<Atomic>),
}

/// An atomic event and the key of each of its deltas, in order.
struct Atomic {
    event: AtomicEvent,
    keys: Vec<Arc<str>>,
}

impl<K> Deltas<K> {
    /// Wraps a list of deltas, oldest first, with no key.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use kcache_delta_fifo::{Delta, DeltaType, Deltas};
    ///
    /// let d = Deltas::from_vec(vec![Delta::new(DeltaType::Added, Arc::new(1))]);
    /// assert_eq!(d.len(), 1);
    /// assert!(d.key().is_none());
    /// ```
    pub fn from_vec(deltas: Vec<Delta<K>>) -> Self {
        Self { deltas, shape: Shape::Single(None) }
    }

    /// Wraps a list of deltas, oldest first, queued under `key`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use kcache_delta_fifo::{Delta, DeltaType, Deltas};
    ///
    /// let d = Deltas::with_key(Arc::from("ns/a"), vec![Delta::new(DeltaType::Added, Arc::new(1))]);
    /// assert_eq!(d.key().map(|k| &**k), Some("ns/a"));
    /// ```
    pub fn with_key(key: Arc<str>, deltas: Vec<Delta<K>>) -> Self {
        Self { deltas, shape: Shape::Single(Some(key)) }
    }

    /// An atomic event's deltas and the key of each (`keys[i]` is `deltas[i]`'s).
    pub(crate) fn atomic(event: AtomicEvent, keys: Vec<Arc<str>>, deltas: Vec<Delta<K>>) -> Self {
        debug_assert_eq!(keys.len(), deltas.len());
        Self { deltas, shape: Shape::Atomic(Box::new(Atomic { event, keys })) }
    }

    /// The key the FIFO queued these deltas under (its key function's result for the object as
    /// it arrived, before any transform); `None` for deltas made by [`from_vec`](Self::from_vec)
    /// and for an [atomic event](Self::atomic_event), whose deltas have a key each
    /// ([`key_at`](Self::key_at)). Both FIFOs set it on every other pop.
    pub fn key(&self) -> Option<&Arc<str>> {
        match &self.shape {
            Shape::Single(key) => key.as_ref(),
            Shape::Atomic(_) => None,
        }
    }

    /// The key of the delta at `index`: [`key`](Self::key) for the changes to one object, each
    /// object's own key in an [atomic event](Self::atomic_event) (for a tombstone, the
    /// tombstone's key). `None` past the end and for deltas made by
    /// [`from_vec`](Self::from_vec).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use kcache_delta_fifo::{Delta, DeltaType, Deltas};
    ///
    /// let d = Deltas::with_key(Arc::from("ns/a"), vec![Delta::new(DeltaType::Added, Arc::new(1))]);
    /// assert_eq!(d.key_at(0).map(|k| &**k), Some("ns/a"));
    /// assert_eq!(d.key_at(1), None);
    /// ```
    pub fn key_at(&self, index: usize) -> Option<&Arc<str>> {
        match &self.shape {
            Shape::Single(key) => key.as_ref().filter(|_| index < self.deltas.len()),
            Shape::Atomic(a) => a.keys.get(index),
        }
    }

    /// The atomic event these deltas make up, if they are one: a whole relist or resync popped
    /// at once from a [`RealFifo`](crate::RealFifo) with
    /// [`atomic_events`](crate::RealFifoOptions::atomic_events) on. `None` for the changes to one
    /// object (every pop of a [`DeltaFifo`](crate::DeltaFifo)).
    pub fn atomic_event(&self) -> Option<&AtomicEvent> {
        match &self.shape {
            Shape::Single(_) => None,
            Shape::Atomic(a) => Some(&a.event),
        }
    }

    /// The oldest delta.
    pub fn oldest(&self) -> Option<&Delta<K>> {
        self.deltas.first()
    }

    /// The newest delta.
    pub fn newest(&self) -> Option<&Delta<K>> {
        self.deltas.last()
    }

    /// The deltas as a `Vec`, oldest first.
    pub fn into_vec(self) -> Vec<Delta<K>> {
        self.deltas
    }
}

/// One delta as a [`DeltaFifo`](crate::DeltaFifo) keeps it while its key is queued: 16 bytes
/// instead of [`Delta`]'s 40, because the rare tombstone (key plus object) is boxed. A pop turns
/// the queued deltas into a [`Deltas`] of exactly the right size.
pub(crate) enum QueuedDelta<K> {
    /// A delta carrying an object.
    Object(DeltaType, Arc<K>),
    /// A `Deleted` delta carrying a tombstone.
    Tombstone(Box<DeletedFinalStateUnknown<K>>),
}

impl<K> QueuedDelta<K> {
    fn is_deletion(&self) -> bool {
        matches!(self, Self::Object(DeltaType::Deleted, _) | Self::Tombstone(_))
    }

    /// The object, or the last known state inside the tombstone.
    pub(crate) fn obj(&self) -> &Arc<K> {
        match self {
            Self::Object(_, obj) => obj,
            Self::Tombstone(t) => &t.obj,
        }
    }

    fn into_delta(self) -> Delta<K> {
        match self {
            Self::Object(delta_type, obj) => Delta::new(delta_type, obj),
            Self::Tombstone(t) => {
                Delta { delta_type: DeltaType::Deleted, object: ObjectOrTombstone::Tombstone(*t) }
            }
        }
    }

    fn to_delta(&self) -> Delta<K> {
        match self {
            Self::Object(delta_type, obj) => Delta::new(*delta_type, Arc::clone(obj)),
            Self::Tombstone(t) => {
                Delta { delta_type: DeltaType::Deleted, object: ObjectOrTombstone::Tombstone((**t).clone()) }
            }
        }
    }
}

impl<K> From<Delta<K>> for QueuedDelta<K> {
    fn from(delta: Delta<K>) -> Self {
        match delta.object {
            ObjectOrTombstone::Object(obj) => Self::Object(delta.delta_type, obj),
            ObjectOrTombstone::Tombstone(t) => Self::Tombstone(Box::new(t)),
        }
    }
}

/// The deltas queued for one key of a [`DeltaFifo`](crate::DeltaFifo), oldest first, never
/// empty.
pub(crate) struct QueuedDeltas<K>(Vec<QueuedDelta<K>>);

impl<K> QueuedDeltas<K> {
    /// Deltas holding only `first`.
    pub(crate) fn new(first: QueuedDelta<K>) -> Self {
        let mut v = Vec::with_capacity(4);
        v.push(first);
        Self(v)
    }

    /// The newest delta.
    pub(crate) fn newest(&self) -> Option<&QueuedDelta<K>> {
        self.0.last()
    }

    /// Appends `delta` and applies client-go's `dedupDeltas`: only the newest two are compared,
    /// and only when both are deletions are they collapsed into one. The survivor is the older
    /// one unless the older one is a tombstone, in which case it is the newer one: a deletion seen
    /// on the watch carries the real final state, which a tombstone only guesses.
    pub(crate) fn push_dedup(&mut self, delta: QueuedDelta<K>) {
        self.0.push(delta);
        let n = self.0.len();
        if n < 2 {
            return;
        }
        let (older, newer) = (&self.0[n - 2], &self.0[n - 1]);
        if !older.is_deletion() || !newer.is_deletion() {
            return;
        }
        if matches!(older, QueuedDelta::Tombstone(_)) {
            // Keep the newer one, in the older one's place.
            self.0.swap_remove(n - 2);
        } else {
            self.0.pop();
        }
    }

    /// A copy as [`Deltas`] (with no key).
    pub(crate) fn to_deltas(&self) -> Deltas<K> {
        Deltas::from_vec(self.0.iter().map(QueuedDelta::to_delta).collect())
    }

    /// The deltas as [`Deltas`] queued under `key`, allocated at their exact length.
    pub(crate) fn into_deltas(self, key: Arc<str>) -> Deltas<K> {
        Deltas::with_key(key, self.0.into_iter().map(QueuedDelta::into_delta).collect())
    }
}

impl<K> Deref for Deltas<K> {
    type Target = [Delta<K>];
    fn deref(&self) -> &[Delta<K>] {
        &self.deltas
    }
}

impl<K> IntoIterator for Deltas<K> {
    type Item = Delta<K>;
    type IntoIter = std::vec::IntoIter<Delta<K>>;
    fn into_iter(self) -> Self::IntoIter {
        self.deltas.into_iter()
    }
}

impl<'a, K> IntoIterator for &'a Deltas<K> {
    type Item = &'a Delta<K>;
    type IntoIter = std::slice::Iter<'a, Delta<K>>;
    fn into_iter(self) -> Self::IntoIter {
        self.deltas.iter()
    }
}

impl Clone for Shape {
    fn clone(&self) -> Self {
        match self {
            Shape::Single(key) => Shape::Single(key.clone()),
            Shape::Atomic(a) => {
                Shape::Atomic(Box::new(Atomic { event: a.event.clone(), keys: a.keys.clone() }))
            }
        }
    }
}

impl<K> Clone for Deltas<K> {
    fn clone(&self) -> Self {
        Self { deltas: self.deltas.clone(), shape: self.shape.clone() }
    }
}

impl<K: fmt::Debug> fmt::Debug for Deltas<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.atomic_event() {
            None => f.debug_list().entries(&self.deltas).finish(),
            Some(event) => {
                f.debug_struct("Deltas").field("atomic_event", event).field("deltas", &self.deltas).finish()
            }
        }
    }
}

/// Compares the deltas and the [atomic event](Deltas::atomic_event), not the keys.
impl<K: PartialEq> PartialEq for Deltas<K> {
    fn eq(&self, other: &Self) -> bool {
        self.deltas == other.deltas && self.atomic_event() == other.atomic_event()
    }
}
