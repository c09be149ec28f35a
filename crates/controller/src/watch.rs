//! `Watch`: what a controller watches of one type (the informer's scope) and which of its
//! events count (client-side filters, controller-runtime's predicates).

use kcache_informer::InformerScope;
use kube::Resource;
use kube::core::{Selector, SelectorExt};

/// What a controller watches of one type, for [`Controller::new`](crate::Controller::new),
/// [`owns`](crate::Controller::owns) and [`watches`](crate::Controller::watches): where (the
/// shared informer's scope: a namespace, server-side label and field selectors) and which events
/// enqueue anything (client-side filters).
///
/// | kcache-controller | controller-runtime | kube-runtime |
/// |---|---|---|
/// | [`Watch::all`], [`Watch::namespace`], [`labels`](Self::labels), [`fields`](Self::fields) | the cache's `ByObject` selectors / namespaces | `watcher::Config::labels`, `fields`, `Api::namespaced` |
/// | [`filter_labels`](Self::filter_labels) | `predicate.LabelSelectorPredicate` | `predicates` on labels |
/// | [`generation_changed`](Self::generation_changed) | `predicate.GenerationChangedPredicate` | `predicates::generation` |
/// | [`resource_version_changed`](Self::resource_version_changed) | `predicate.ResourceVersionChangedPredicate` | `predicates::resource_version` |
///
/// Informers come from the controller's [`SharedInformerFactory`](kcache_informer::SharedInformerFactory):
/// two watches of one type with the same scope share one informer and one API watch, whatever
/// their filters. Filters combine with *and*.
///
/// **Label filters see both sides of an update.** An object that stops matching (a label
/// removed) is, for the controller, deleted: its key is enqueued as for a delete, and for the
/// primary type it is *gone* (the reconcile of a gone key runs
/// [`on_gone`](crate::Controller::on_gone)). controller-runtime's `LabelSelectorPredicate`
/// looks at the new object only and drops that update; kube-runtime's label predicate too.
/// A server-side selector ([`labels`](Self::labels)) behaves the same way: the API server sends
/// the object's departure as a delete.
///
/// # Examples
///
/// ```
/// use kcache_controller::Watch;
/// use kube::core::{Expression, Selector};
///
/// // ConfigMaps labelled app=x, in every namespace, filtered by the API server.
/// let primary = Watch::all().labels("app=x");
/// // Deployments of one namespace; only spec changes (generation) count.
/// let deployments = Watch::namespace("prod").generation_changed();
/// // Every Secret, shared with other controllers, filtered here.
/// let secrets = Watch::all().filter_labels(Selector::from(Expression::Exists("owner".into())));
/// # let _ = (primary, deployments, secrets);
/// ```
#[derive(Debug, Clone, Default)]
pub struct Watch {
    pub(crate) scope: InformerScope,
    pub(crate) label_filter: Option<Selector>,
    pub(crate) generation_changed: bool,
    pub(crate) resource_version_changed: bool,
}

impl Watch {
    /// Every object of the type, in every namespace.
    pub fn all() -> Self {
        Self::default()
    }

    /// The objects of one namespace (`""` is every namespace, as in client-go).
    pub fn namespace(namespace: &str) -> Self {
        Self::scope(InformerScope::namespace(namespace))
    }

    /// Exactly the objects of an informer scope.
    pub fn scope(scope: InformerScope) -> Self {
        Self { scope, ..Self::default() }
    }

    /// A server-side label selector (`app=x,tier!=cache`): the informer lists and watches only
    /// matching objects, and an object that stops matching arrives as a delete.
    #[must_use]
    pub fn labels(mut self, selector: &str) -> Self {
        self.scope.label_selector = Some(selector.to_owned());
        self
    }

    /// A server-side field selector (`metadata.name=web`).
    #[must_use]
    pub fn fields(mut self, selector: &str) -> Self {
        self.scope.field_selector = Some(selector.to_owned());
        self
    }

    /// A client-side label filter: only events of matching objects count, and an object that
    /// stops matching counts as deleted (see the type's docs). Use it instead of
    /// [`labels`](Self::labels) to share one unfiltered informer with other controllers.
    #[must_use]
    pub fn filter_labels(mut self, selector: Selector) -> Self {
        self.label_filter = Some(selector);
        self
    }

    /// Updates count only if `metadata.generation` changed (controller-runtime's
    /// `GenerationChangedPredicate`): status-only writes, metadata changes, resyncs and unchanged
    /// relists are dropped. Adds and deletes always count. Objects without a generation (most
    /// built-in kinds other than workloads) then never count on update.
    #[must_use]
    pub fn generation_changed(mut self) -> Self {
        self.generation_changed = true;
        self
    }

    /// Updates count only if `metadata.resourceVersion` changed (controller-runtime's
    /// `ResourceVersionChangedPredicate`): periodic resyncs and relists that found the object
    /// unchanged are dropped. Without it they count, at [`LOW_PRIORITY`](kcache_workqueue::LOW_PRIORITY):
    /// the level-triggered healing of client-go's informers.
    #[must_use]
    pub fn resource_version_changed(mut self) -> Self {
        self.resource_version_changed = true;
        self
    }

    /// The informer scope this watch asks the factory for.
    pub fn informer_scope(&self) -> &InformerScope {
        &self.scope
    }

    /// Whether `obj` passes the client-side label filter.
    pub(crate) fn selects<S: Resource>(&self, obj: &S) -> bool {
        match &self.label_filter {
            None => true,
            Some(selector) => selector.matches(obj.meta().labels.as_ref().unwrap_or(&EMPTY_LABELS)),
        }
    }

    /// Whether an update from `old` to `new` (both selected) counts.
    pub(crate) fn update_counts<S: Resource>(&self, old: &S, new: &S) -> bool {
        let (o, n) = (old.meta(), new.meta());
        if self.generation_changed && o.generation == n.generation {
            return false;
        }
        if self.resource_version_changed && o.resource_version == n.resource_version {
            return false;
        }
        true
    }
}

static EMPTY_LABELS: std::collections::BTreeMap<String, String> = std::collections::BTreeMap::new();
