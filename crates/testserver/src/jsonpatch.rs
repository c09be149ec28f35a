//! RFC 6902 JSON Patch (`application/json-patch+json`), the patch type kube-runtime's finalizer
//! helper uses (`test` then `remove`/`add` on `/metadata/finalizers`).

use serde_json::Value;

/// Splits an RFC 6901 JSON pointer into unescaped tokens.
fn tokens(pointer: &str) -> Result<Vec<String>, String> {
    if pointer.is_empty() {
        return Ok(Vec::new());
    }
    let rest = pointer.strip_prefix('/').ok_or_else(|| format!("invalid JSON pointer {pointer:?}"))?;
    Ok(rest.split('/').map(|t| t.replace("~1", "/").replace("~0", "~")).collect())
}

fn index(token: &str, len: usize, allow_end: bool) -> Result<usize, String> {
    if allow_end && token == "-" {
        return Ok(len);
    }
    let i: usize = token.parse().map_err(|_| format!("invalid array index {token:?}"))?;
    let max = if allow_end { len } else { len.saturating_sub(1) };
    if i > max || (!allow_end && len == 0) {
        return Err(format!("array index {i} out of bounds"));
    }
    Ok(i)
}

fn get<'a>(doc: &'a Value, path: &[String]) -> Result<&'a Value, String> {
    let mut cur = doc;
    for t in path {
        cur = match cur {
            Value::Object(m) => m.get(t).ok_or_else(|| format!("missing key {t:?}"))?,
            Value::Array(a) => &a[index(t, a.len(), false)?],
            _ => return Err(format!("cannot descend into a scalar at {t:?}")),
        };
    }
    Ok(cur)
}

fn parent_mut<'a>(doc: &'a mut Value, path: &[String]) -> Result<&'a mut Value, String> {
    let mut cur = doc;
    for t in path {
        cur = match cur {
            Value::Object(m) => m.get_mut(t).ok_or_else(|| format!("missing key {t:?}"))?,
            Value::Array(a) => {
                let i = index(t, a.len(), false)?;
                &mut a[i]
            }
            _ => return Err(format!("cannot descend into a scalar at {t:?}")),
        };
    }
    Ok(cur)
}

fn add(doc: &mut Value, path: &[String], value: Value) -> Result<(), String> {
    let Some((last, parent)) = path.split_last() else {
        *doc = value;
        return Ok(());
    };
    match parent_mut(doc, parent)? {
        Value::Object(m) => {
            m.insert(last.clone(), value);
        }
        Value::Array(a) => {
            let i = index(last, a.len(), true)?;
            a.insert(i, value);
        }
        _ => return Err("add: the parent is not a container".into()),
    }
    Ok(())
}

fn remove(doc: &mut Value, path: &[String]) -> Result<Value, String> {
    let (last, parent) = path.split_last().ok_or("remove: cannot remove the whole document")?;
    match parent_mut(doc, parent)? {
        Value::Object(m) => m.remove(last).ok_or_else(|| format!("remove: missing key {last:?}")),
        Value::Array(a) => {
            let i = index(last, a.len(), false)?;
            Ok(a.remove(i))
        }
        _ => Err("remove: the parent is not a container".into()),
    }
}

/// Applies `patch` (an array of operations) to `doc`.
pub(crate) fn apply(doc: &mut Value, patch: &Value) -> Result<(), String> {
    let ops = patch.as_array().ok_or("a JSON patch must be an array of operations")?;
    for op in ops {
        let name = op["op"].as_str().ok_or("operation without \"op\"")?;
        let path = tokens(op["path"].as_str().ok_or("operation without \"path\"")?)?;
        let value = || op.get("value").cloned().ok_or_else(|| format!("{name} operation without \"value\""));
        let from = || tokens(op["from"].as_str().unwrap_or_default());
        match name {
            "add" => add(doc, &path, value()?)?,
            "remove" => {
                remove(doc, &path)?;
            }
            "replace" => {
                get(doc, &path).map_err(|e| format!("replace operation does not apply: {e}"))?;
                let v = value()?;
                match path.is_empty() {
                    true => *doc = v,
                    false => *parent_mut(doc, &path)? = v,
                }
            }
            "move" => {
                let v = remove(doc, &from()?)?;
                add(doc, &path, v)?;
            }
            "copy" => {
                let v = get(doc, &from()?)?.clone();
                add(doc, &path, v)?;
            }
            "test" => {
                let want = value()?;
                // As in evanphx/json-patch (kube-apiserver's): a missing value equals null.
                let actual = get(doc, &path).unwrap_or(&Value::Null);
                if *actual != want {
                    return Err(format!(
                        "testing value {} failed: test failed",
                        op["path"].as_str().unwrap_or("")
                    ));
                }
            }
            other => return Err(format!("unexpected kind of operation: {other:?}")),
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
    }
}
