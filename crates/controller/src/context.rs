//! `Context<T>`: what a reconcile gets besides the object: the application's data, the caches of
//! every watched type, the key, its retry count.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use kcache_informer::Lister;
use kube::Resource;
use tokio_util::sync::CancellationToken;

/// One watched type's cache: its lister and, for an owned type, the name of the index from
/// controller owner to owned objects.
struct CacheEntry<S> {
    lister: Lister<S>,
    owner_index: Option<String>,
}

/// The caches of every type a controller watches, by type.
#[derive(Default)]
pub(crate) struct Caches {
    /// `TypeId::of::<S>()` -> `CacheEntry<S>`.
    entries: HashMap<TypeId, Box<dyn Any + Send + Sync>>,
}

impl Caches {
    /// Records `S`'s lister (the first one registered wins) and, if given, its owner index.
    pub(crate) fn insert<S: Send + Sync + 'static>(
        &mut self,
        lister: Lister<S>,
        owner_index: Option<String>,
    ) {
        let entry = self
            .entries
            .entry(TypeId::of::<S>())
            .or_insert_with(|| Box::new(CacheEntry { lister, owner_index: None }));
        if let Some(entry) = entry.downcast_mut::<CacheEntry<S>>()
            && entry.owner_index.is_none()
        {
            entry.owner_index = owner_index;
        }
    }

    /// The lister of `S`, if the controller watches it.
    pub(crate) fn lister<S: 'static>(&self) -> Option<Lister<S>> {
        self.get::<S>().map(|e| e.lister.clone())
    }

    fn get<S: 'static>(&self) -> Option<&CacheEntry<S>> {
        self.entries.get(&TypeId::of::<S>()).and_then(|e| e.downcast_ref())
    }
}

/// What the controller shares with every reconcile.
pub(crate) struct ContextShared {
    pub(crate) name: Arc<str>,
    pub(crate) caches: Caches,
    pub(crate) shutdown: CancellationToken,
}

/// The second argument of a reconcile: the application's data (`T`, also reachable through
/// `Deref`), cached reads of every type the controller watches, and the key being reconciled.
/// kube-runtime's `Arc<Ctx>`, plus what a client-go controller would read from its listers.
///
/// Cheap to clone.
///
/// # Examples
///
/// ```no_run
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::{ConfigMap, Secret};
/// use kcache_controller::{Action, Context};
///
/// struct Data { client: kube::Client }
///
/// async fn reconcile(cm: Arc<ConfigMap>, ctx: Context<Data>) -> Result<Action, kube::Error> {
///     // Secrets whose controller owner reference names this ConfigMap: an indexed read of the
///     // cache of `owns::<Secret>()`, no API call.
///     let secrets: Vec<Arc<Secret>> = ctx.owned::<Secret>();
///     let _client = &ctx.client; // Deref to Data
///     println!("{} owns {} secrets (attempt {})", ctx.key(), secrets.len(), ctx.requeues() + 1);
///     Ok(Action::await_change())
/// }
/// ```
pub struct Context<T> {
    data: Arc<T>,
    shared: Arc<ContextShared>,
    /// The key being reconciled (`namespace/name`).
    key: Arc<str>,
    requeues: usize,
}

impl<T> Clone for Context<T> {
    fn clone(&self) -> Self {
        Self {
            data: Arc::clone(&self.data),
            shared: Arc::clone(&self.shared),
            key: Arc::clone(&self.key),
            requeues: self.requeues,
        }
    }
}

impl<T> fmt::Debug for Context<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("controller", &self.shared.name)
            .field("key", &self.key)
            .field("requeues", &self.requeues)
            .finish_non_exhaustive()
    }
}

impl<T> Deref for Context<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.data
    }
}

impl<T> Context<T> {
    pub(crate) fn new(data: Arc<T>, shared: Arc<ContextShared>, key: Arc<str>, requeues: usize) -> Self {
        Self { data, shared, key, requeues }
    }

    /// The application's data given to [`Controller::context`](crate::Controller::context).
    pub fn data(&self) -> &Arc<T> {
        &self.data
    }

    /// The key being reconciled: `namespace/name`, or `name` for a cluster-scoped object.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// How many times in a row this key failed before this attempt (the rate limiter's
    /// `NumRequeues`; 0 on a first attempt or after a success).
    pub fn requeues(&self) -> usize {
        self.requeues
    }

    /// The controller's name ([`Controller::name`](crate::Controller::name)).
    pub fn controller(&self) -> &str {
        &self.shared.name
    }

    /// Cancelled when the controller is stopping: a long reconcile may end early (the key's
    /// retry is then up to it). The controller waits for running reconciles either way.
    pub fn shutdown(&self) -> &CancellationToken {
        &self.shared.shutdown
    }

    /// The objects of type `S` whose controller owner reference names the object being
    /// reconciled, from the cache of [`owns::<S>()`](crate::Controller::owns), through an index
    /// (no scan, no API call). Works for a gone object too
    /// ([`on_gone`](crate::Controller::on_gone)): the owner is matched by kind, namespace and
    /// name, as controller-runtime's `EnqueueRequestForOwner` matches it.
    ///
    /// # Panics
    ///
    /// If the controller does not own `S` (no `owns::<S>()`): a programming error, logged at
    /// error level before the panic (the worker catches it and retries the key).
    pub fn owned<S: Resource + Send + Sync + 'static>(&self) -> Vec<Arc<S>> {
        let entry = self.entry::<S>("owned", "owns");
        let Some(index) = &entry.owner_index else {
            self.misuse::<S>("owned", "owns");
        };
        entry.lister.by_index(index, &self.key).unwrap_or_default()
    }

    /// The cache of `S`, one of the controller's types (its primary type, or one given to
    /// [`owns`](crate::Controller::owns) or [`watches`](crate::Controller::watches)).
    ///
    /// # Panics
    ///
    /// If the controller does not watch `S`: a programming error, logged at error level before
    /// the panic (the worker catches it and retries the key).
    pub fn lister<S: Resource + Send + Sync + 'static>(&self) -> Lister<S> {
        self.entry::<S>("lister", "owns or watches").lister.clone()
    }

    fn entry<S: Resource + Send + Sync + 'static>(&self, method: &str, step: &str) -> &CacheEntry<S> {
        match self.shared.caches.get::<S>() {
            Some(e) => e,
            None => self.misuse::<S>(method, step),
        }
    }

    fn misuse<S>(&self, method: &str, step: &str) -> ! {
        let kind = std::any::type_name::<S>();
        let message = format!(
            "Context::{method}::<{kind}>() in controller {:?}, which does not watch that type: add {step}::<{kind}>() to the builder",
            self.shared.name
        );
        tracing::error!(controller = %self.shared.name, "{message}");
        panic!("{message}");
    }
}
