//! Resource definitions: which group/version/resource paths the server serves, and how.

/// A resource the server serves: the built-ins, or one added at run time with
/// [`TestServer::register`](crate::TestServer::register) (the equivalent of installing a CRD).
///
/// # Examples
///
/// ```
/// use kcache_testserver::ResourceDef;
///
/// let def = ResourceDef::new("example.com", "v1", "widgets", "Widget", true);
/// assert_eq!(def.api_version(), "example.com/v1");
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
    /// What DELETE answers with. Most built-in registries answer a `Status` with `status: Success`;
    /// custom resources, pods and namespaces answer the deleted object.
    pub delete_returns_object: bool,
    /// Whether `metadata.generation` is maintained (set to 1 on create and bumped when anything
    /// outside `metadata` and `status` changes). True for custom resources and pods.
    pub has_generation: bool,
    /// Whether PUT without `metadata.resourceVersion` is allowed (an unconditional update).
    /// True for the built-ins; custom resources require it (422 otherwise).
    pub allow_unconditional_update: bool,
    /// Whether the `status` subresource exists: then `PUT`/`PATCH .../<name>/status` change only
    /// `.status`, and writes to the object itself keep the stored `.status`. True for pods,
    /// namespaces and (by default) custom resources, as for a CRD declaring
    /// `subresources: {status: {}}`.
    pub status_subresource: bool,
}

impl ResourceDef {
    /// A definition with custom-resource behaviour: DELETE returns the object and
    /// `metadata.generation` is maintained.
    pub fn new(
        group: impl Into<String>,
        version: impl Into<String>,
        resource: impl Into<String>,
        kind: impl Into<String>,
        namespaced: bool,
    ) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
            kind: kind.into(),
            namespaced,
            delete_returns_object: true,
            has_generation: true,
            allow_unconditional_update: false,
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

    /// The built-in core/v1 resources every server starts with.
    pub(crate) fn builtins() -> Vec<ResourceDef> {
        let core =
            |resource: &str, kind: &str, namespaced, delete_returns_object, has_generation| ResourceDef {
                group: String::new(),
                version: "v1".into(),
                resource: resource.into(),
                kind: kind.into(),
                namespaced,
                delete_returns_object,
                has_generation,
                allow_unconditional_update: true,
                // Of these, pods and namespaces have a status subresource.
                status_subresource: resource == "pods" || resource == "namespaces",
            };
        vec![
            core("configmaps", "ConfigMap", true, false, false),
            core("secrets", "Secret", true, false, false),
            core("pods", "Pod", true, true, true),
            core("namespaces", "Namespace", false, true, false),
        ]
    }
}
