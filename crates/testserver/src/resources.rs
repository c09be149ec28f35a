//! Resource definitions: which group/version/resource paths the server serves, and how.

/// The group of CustomResourceDefinitions.
pub(crate) const CRD_GROUP: &str = "apiextensions.k8s.io";
/// The group of Roles, RoleBindings, ClusterRoles and ClusterRoleBindings.
pub(crate) const RBAC_GROUP: &str = "rbac.authorization.k8s.io";
/// The group of `events.k8s.io/v1` Events.
pub(crate) const EVENTS_GROUP: &str = "events.k8s.io";
/// The group of Leases.
pub(crate) const COORDINATION_GROUP: &str = "coordination.k8s.io";

/// A resource the server serves: the built-ins, one served for a CustomResourceDefinition
/// created through the API, or one added at run time with
/// [`TestServer::register`](crate::TestServer::register) (a CRD's resource without the CRD).
///
/// # Examples
///
/// ```
/// use kcache_testserver::ResourceDef;
///
/// let def = ResourceDef::new("example.com", "v1", "widgets", "Widget", true);
/// assert_eq!(def.api_version(), "example.com/v1");
/// assert_eq!(def.qualified_resource(), "widgets.example.com");
///
/// let core = ResourceDef::new("", "v1", "configmaps", "ConfigMap", true);
/// assert_eq!((core.api_version().as_str(), core.qualified_resource().as_str()), ("v1", "configmaps"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceDef {
    /// API group; empty for the core group (`/api/v1`).
    pub group: String,
    /// API version, such as `v1`.
    pub version: String,
    /// Plural resource name used in URLs, such as `configmaps`.
    pub resource: String,
    /// Kind of the objects, such as `ConfigMap`.
    pub kind: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// What DELETE answers with once the object is gone. Most registries answer a `Status` with
    /// `status: Success`, custom resources' included (apiextensions-apiserver's registry does not
    /// set `ReturnDeletedObject`); pods, namespaces and CRDs answer the deleted object. An
    /// object that finalizers keep is answered whatever this says.
    pub delete_returns_object: bool,
    /// Whether `metadata.generation` is maintained (set to 1 on create and bumped when anything
    /// outside `metadata` and `status` changes). True for custom resources and pods.
    pub has_generation: bool,
    /// Whether PUT without `metadata.resourceVersion` is allowed (an unconditional update).
    /// True for most built-ins; custom resources and leases require it (422 otherwise).
    pub allow_unconditional_update: bool,
    /// Whether PUT of an object that does not exist creates it (answered 201), as the
    /// registries whose strategy has `AllowCreateOnUpdate() == true` do: leases among the
    /// resources served here. False by default (404 `... not found`).
    pub allow_create_on_update: bool,
    /// Whether the `status` subresource exists: then `PUT`/`PATCH .../<name>/status` change only
    /// `.status`, and writes to the object itself keep the stored `.status`. True for pods,
    /// namespaces and (by default) custom resources, as for a CRD declaring
    /// `subresources: {status: {}}`.
    pub status_subresource: bool,
    /// Singular name shown in discovery (`singularName`); the lowercased kind by default.
    pub singular: String,
    /// Kind of lists, such as `ConfigMapList`; `<kind>List` by default.
    pub list_kind: String,
    /// Short names shown in discovery (`kubectl get cm`).
    pub short_names: Vec<String>,
}

impl ResourceDef {
    /// A definition with custom-resource behaviour: `metadata.generation` is maintained, an
    /// update needs a resourceVersion, DELETE answers a `Status`.
    pub fn new(
        group: impl Into<String>,
        version: impl Into<String>,
        resource: impl Into<String>,
        kind: impl Into<String>,
        namespaced: bool,
    ) -> Self {
        let kind = kind.into();
        Self {
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
            singular: kind.to_lowercase(),
            list_kind: format!("{kind}List"),
            short_names: Vec::new(),
            kind,
            namespaced,
            delete_returns_object: false,
            has_generation: true,
            allow_unconditional_update: false,
            allow_create_on_update: false,
            status_subresource: true,
        }
    }

    /// `group/version`, or just `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }

    /// The resource qualified by its group (`widgets.example.com`, or `configmaps`), as in the
    /// messages of kube-apiserver's Status errors.
    pub fn qualified_resource(&self) -> String {
        if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }

    /// Whether this is a custom resource (served by apiextensions-apiserver's CR handler, so
    /// without strategic merge patch): any group outside the core group and the `*.k8s.io`
    /// groups, which custom resources may not use without an API approval.
    pub(crate) fn is_custom(&self) -> bool {
        !(self.group.is_empty() || self.group == "k8s.io" || self.group.ends_with(".k8s.io"))
    }

    /// Whether this is the built-in coordination.k8s.io/v1 `leases` resource.
    pub(crate) fn is_lease(&self) -> bool {
        self.group == COORDINATION_GROUP && self.resource == "leases"
    }

    /// Whether this is the coordination.k8s.io/v1beta1 `leasecandidates` resource (served with
    /// [`coordinated_leader_election`](crate::Builder::coordinated_leader_election)).
    pub(crate) fn is_lease_candidate(&self) -> bool {
        self.group == COORDINATION_GROUP && self.resource == "leasecandidates"
    }

    /// Whether this is the built-in `customresourcedefinitions` resource.
    pub(crate) fn is_crd(&self) -> bool {
        self.group == CRD_GROUP && self.resource == "customresourcedefinitions"
    }

    /// The built-in resources every server starts with: core/v1 `configmaps`, `secrets`, `pods`
    /// and `namespaces`, apiextensions.k8s.io/v1 `customresourcedefinitions`, the four
    /// rbac.authorization.k8s.io/v1 kinds, events.k8s.io/v1 `events` (what kube-runtime's
    /// event `Recorder` writes) and coordination.k8s.io/v1 `leases`.
    pub(crate) fn builtins() -> Vec<ResourceDef> {
        let builtin = |group: &str, resource: &str, kind: &str, namespaced, short: &[&str]| ResourceDef {
            // A built-in registry answers DELETE with a `Status`, keeps no generation and allows
            // unconditional updates, unless overridden below.
            delete_returns_object: false,
            has_generation: false,
            allow_unconditional_update: true,
            status_subresource: false,
            short_names: short.iter().map(|s| s.to_string()).collect(),
            ..ResourceDef::new(group, "v1", resource, kind, namespaced)
        };
        let pods = ResourceDef {
            delete_returns_object: true,
            has_generation: true,
            status_subresource: true,
            ..builtin("", "pods", "Pod", true, &["po"])
        };
        let namespaces = ResourceDef {
            delete_returns_object: true,
            status_subresource: true,
            ..builtin("", "namespaces", "Namespace", false, &["ns"])
        };
        // The CRD registry (apiextensions-apiserver's strategy): generation, a status
        // subresource, the object back from DELETE, and a resourceVersion required on update.
        let crds = ResourceDef {
            delete_returns_object: true,
            has_generation: true,
            allow_unconditional_update: false,
            status_subresource: true,
            ..builtin(
                CRD_GROUP,
                "customresourcedefinitions",
                "CustomResourceDefinition",
                false,
                &["crd", "crds"],
            )
        };
        // kubernetes pkg/registry/coordination/lease/strategy.go: AllowUnconditionalUpdate false
        // (an update must carry the resourceVersion it read: leader election's optimistic
        // concurrency), AllowCreateOnUpdate true.
        let leases = ResourceDef {
            allow_unconditional_update: false,
            allow_create_on_update: true,
            ..builtin(COORDINATION_GROUP, "leases", "Lease", true, &[])
        };
        vec![
            builtin("", "configmaps", "ConfigMap", true, &["cm"]),
            builtin("", "secrets", "Secret", true, &[]),
            pods,
            namespaces,
            crds,
            builtin(RBAC_GROUP, "roles", "Role", true, &[]),
            builtin(RBAC_GROUP, "rolebindings", "RoleBinding", true, &[]),
            builtin(RBAC_GROUP, "clusterroles", "ClusterRole", false, &[]),
            builtin(RBAC_GROUP, "clusterrolebindings", "ClusterRoleBinding", false, &[]),
            builtin(EVENTS_GROUP, "events", "Event", true, &["ev"]),
            leases,
        ]
    }
}
