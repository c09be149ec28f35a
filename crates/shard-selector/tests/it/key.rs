//! The hashed field: apimachinery's `accessor_test.go`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kcache_shard_selector::ShardKey;

/// apimachinery `TestResolveFieldValue`: uid and namespace resolve, other paths do not.
#[test]
fn resolve_field_value() {
    let meta = ObjectMeta {
        uid: Some("test-uid-123".into()),
        name: Some("test-name".into()),
        namespace: Some("test-namespace".into()),
        ..Default::default()
    };
    assert_eq!(ShardKey::from_path("object.metadata.uid").map(|k| k.value(&meta)), Some("test-uid-123"));
    assert_eq!(
        ShardKey::from_path("object.metadata.namespace").map(|k| k.value(&meta)),
        Some("test-namespace")
    );
    for unsupported in ["object.metadata.name", "object.metadata.labels", "invalid.path", "metadata.uid"] {
        assert_eq!(ShardKey::from_path(unsupported), None, "{unsupported}");
    }
}

/// apimachinery's accessor returns `""` for an unset uid or namespace (`GetUID`/`GetNamespace`
/// on the zero value), and that is what gets hashed.
#[test]
fn unset_fields_are_the_empty_string() {
    let meta = ObjectMeta::default();
    assert_eq!(ShardKey::Uid.value(&meta), "");
    assert_eq!(ShardKey::Namespace.value(&meta), "");
    assert_eq!(ShardKey::Uid.to_string(), "object.metadata.uid");
    assert_eq!(ShardKey::Namespace.to_string(), "object.metadata.namespace");
}
