//! RFC 6902 JSON Patch (`application/json-patch+json`), the patch type kube-runtime's finalizer
//! helper uses (`test` then `remove`/`add` on `/metadata/finalizers`): the `json-patch` crate,
//! with kube-apiserver's reading of `test`.

use json_patch::{Patch, PatchOperation};
use serde_json::Value;

/// Applies `patch` (an array of operations) to `doc`; on error `doc` is left part-patched (the
/// caller patches a copy). The message is this server's own.
pub(crate) fn apply(doc: &mut Value, patch: &Value) -> Result<(), String> {
    let Patch(ops) = serde_json::from_value(patch.clone()).map_err(|e| format!("invalid JSON patch: {e}"))?;
    for (i, op) in ops.iter().enumerate() {
        match op {
            // As in evanphx/json-patch (kube-apiserver's), a missing value equals null, so
            // `test` of an absent field against null passes; the json-patch crate (RFC 6902)
            // fails it. kube-runtime's finalizer helper relies on the former for its first add.
            PatchOperation::Test(test) => {
                let actual = doc.pointer(test.path.as_str()).unwrap_or(&Value::Null);
                if *actual != test.value {
                    return Err(format!("testing value {} failed: test failed", test.path));
                }
            }
            op => json_patch::patch(doc, std::slice::from_ref(op)).map_err(|e| {
                format!("operation {i} ({op}) failed at path {:?}: {}", e.path.as_str(), e.kind)
            })?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::apply;

    #[test]
    fn rfc_6902_operations() {
        let mut doc = json!({"a": {"b": [1, 2]}, "c": "x"});
        apply(
            &mut doc,
            &json!([
                {"op": "add", "path": "/a/b/-", "value": 3},
                {"op": "add", "path": "/a/b/0", "value": 0},
                {"op": "remove", "path": "/a/b/1"},
                {"op": "replace", "path": "/c", "value": "y"},
                {"op": "copy", "from": "/c", "path": "/d"},
                {"op": "move", "from": "/d", "path": "/e~1f"},
                {"op": "test", "path": "/a/b", "value": [0, 2, 3]},
            ]),
        )
        .unwrap();
        assert_eq!(doc, json!({"a": {"b": [0, 2, 3]}, "c": "y", "e/f": "y"}));
        assert!(apply(&mut doc, &json!([{"op": "test", "path": "/c", "value": "z"}])).is_err());
        assert!(apply(&mut doc, &json!([{"op": "test", "path": "/missing", "value": null}])).is_ok());
        assert!(apply(&mut doc, &json!([{"op": "remove", "path": "/nope"}])).is_err());
        assert!(apply(&mut doc, &json!([{"op": "replace", "path": "/a/b/9", "value": 1}])).is_err());
        assert!(apply(&mut doc, &json!({"op": "add"})).is_err());
        assert!(apply(&mut doc, &json!([{"op": "frobnicate", "path": "/c"}])).is_err());
        assert_eq!(doc, json!({"a": {"b": [0, 2, 3]}, "c": "y", "e/f": "y"}));
    }

    #[test]
    fn messages() {
        let mut doc = json!({"a": [1]});
        assert_eq!(
            apply(&mut doc, &json!([{"op": "test", "path": "/a/0", "value": 2}])).unwrap_err(),
            "testing value /a/0 failed: test failed"
        );
        assert_eq!(
            apply(
                &mut doc,
                &json!([{"op": "test", "path": "/a/0", "value": 1}, {"op": "remove", "path": "/a/1"}])
            )
            .unwrap_err(),
            r#"operation 1 ({"op":"remove","path":"/a/1"}) failed at path "/a/1": path is invalid"#
        );
    }
}
