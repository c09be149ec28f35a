//! The coordination.k8s.io/v1 Lease registry's strategy: what kube-apiserver v1.36 clears and
//! validates on create and update (kubernetes `pkg/registry/coordination/lease/strategy.go` and
//! `pkg/apis/coordination/validation`), with the `CoordinatedLeaderElection` gate off (its
//! default) or on ([`Builder::coordinated_leader_election`](crate::Builder::coordinated_leader_election)).

use serde_json::{Map, Value};

use crate::resources::ResourceDef;
use crate::status::ApiError;

/// `PrepareForCreate`: with the `CoordinatedLeaderElection` gate off, `spec.strategy` and
/// `spec.preferredHolder` are dropped; with it on, they are kept.
pub(crate) fn prepare_create(obj: &mut Map<String, Value>, gate: bool) {
    if gate {
        return;
    }
    if let Some(Value::Object(spec)) = obj.get_mut("spec") {
        spec.remove("strategy");
        spec.remove("preferredHolder");
    }
}

/// `PrepareForUpdate`: with the gate off, `spec.strategy` and `spec.preferredHolder` may only be
/// kept where the stored object already has them; with it on, they are written as sent.
pub(crate) fn prepare_update(obj: &mut Map<String, Value>, old: &Value, gate: bool) {
    if gate {
        return;
    }
    if let Some(Value::Object(spec)) = obj.get_mut("spec") {
        for field in ["strategy", "preferredHolder"] {
            if old["spec"].get(field).is_none_or(Value::is_null) {
                spec.remove(field);
            }
        }
    }
}

/// `ValidateLeaseSpec`: the 422 kube-apiserver answers, every field error at once.
pub(crate) fn validate(def: &ResourceDef, name: &str, obj: &Map<String, Value>) -> Result<(), ApiError> {
    let Some(spec) = obj.get("spec").and_then(Value::as_object) else { return Ok(()) };
    let mut causes = Vec::new();
    if let Some(d) = spec.get("leaseDurationSeconds").and_then(Value::as_i64)
        && d <= 0
    {
        causes.push((
            "FieldValueInvalid",
            "spec.leaseDurationSeconds",
            format!("Invalid value: {d}: must be greater than 0"),
        ));
    }
    if let Some(t) = spec.get("leaseTransitions").and_then(Value::as_i64)
        && t < 0
    {
        causes.push((
            "FieldValueInvalid",
            "spec.leaseTransitions",
            format!("Invalid value: {t}: must be greater than or equal to 0"),
        ));
    }
    let has = |field: &str| spec.get(field).and_then(Value::as_str).is_some_and(|s| !s.is_empty());
    // `ValidateCoordinatedLeaseStrategy`: a Kubernetes-defined name, or a qualified name
    // (`example.com/my-strategy`) that some other coordinator runs. Its field path repeats
    // `strategy`, as upstream's (the helper appends the child to a path that already ends in it).
    if let Some(strategy) = spec.get("strategy").and_then(Value::as_str)
        && strategy != "OldestEmulationVersion"
        && !strategy.contains('/')
    {
        causes.push((
            "FieldValueNotSupported",
            "spec.strategy.strategy",
            format!("Unsupported value: {strategy:?}: supported values: \"OldestEmulationVersion\""),
        ));
    }
    if has("preferredHolder") && !has("strategy") {
        causes.push((
            "FieldValueForbidden",
            "spec.preferredHolder",
            "Forbidden: may only be specified if `strategy` is defined".to_string(),
        ));
    }
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid(&def.group, &def.kind, name, &causes))
}
