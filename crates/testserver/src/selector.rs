//! Label selectors (equality- and set-based) and the `metadata.name` / `metadata.namespace` field
//! selectors, parsed from query strings as k8s.io/apimachinery/pkg/labels and pkg/fields do.

use crate::status::ApiError;

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    /// `key=value` or `key==value`.
    Equals(String, String),
    /// `key!=value` (also true when the label is absent).
    NotEquals(String, String),
    /// `key in (a,b)`.
    In(String, Vec<String>),
    /// `key notin (a,b)` (also true when the label is absent).
    NotIn(String, Vec<String>),
    /// `key`.
    Exists(String),
    /// `!key`.
    DoesNotExist(String),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LabelSelector {
    /// All must hold (the comma is AND).
    reqs: Vec<Requirement>,
}

impl LabelSelector {
    /// Parses `labelSelector`.
    pub(crate) fn parse(s: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for part in split_top_level(s) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            reqs.push(parse_requirement(part).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "unable to parse requirement: invalid label selector: {part:?}"
                ))
            })?);
        }
        Ok(Self { reqs })
    }

    /// Whether labels (key/value pairs) satisfy every requirement.
    pub(crate) fn matches(&self, labels: &[(String, String)]) -> bool {
        let get = |k: &str| labels.iter().find(|(lk, _)| lk == k).map(|(_, v)| v.as_str());
        self.reqs.iter().all(|r| match r {
            Requirement::Equals(k, v) => get(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => get(k) != Some(v.as_str()),
            Requirement::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Requirement::NotIn(k, vs) => get(k).is_none_or(|x| !vs.iter().any(|v| v == x)),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::DoesNotExist(k) => get(k).is_none(),
        })
    }

    /// Whether the selector is empty.
    pub(crate) fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }
}

/// Splits on commas that are not inside parentheses.
fn split_top_level(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

/// Whether `s` is a plausible label key or value (no spaces or operator characters).
fn valid_token(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn valid_value(s: &str) -> bool {
    s.is_empty() || valid_token(s)
}

fn parse_requirement(part: &str) -> Option<Requirement> {
    if let Some(key) = part.strip_prefix('!') {
        let key = key.trim();
        return valid_token(key).then(|| Requirement::DoesNotExist(key.to_string()));
    }
    for (op, notin) in [(" notin ", true), (" in ", false)] {
        if let Some(idx) = part.find(op) {
            let key = part[..idx].trim();
            let rest = part[idx + op.len()..].trim();
            let inner = rest.strip_prefix('(')?.strip_suffix(')')?;
            let values: Vec<String> = inner.split(',').map(|v| v.trim().to_string()).collect();
            if !valid_token(key) || !values.iter().all(|v| valid_value(v)) {
                return None;
            }
            return Some(if notin {
                Requirement::NotIn(key.into(), values)
            } else {
                Requirement::In(key.into(), values)
            });
        }
    }
    if let Some((k, v)) = part.split_once("!=") {
        let (k, v) = (k.trim(), v.trim());
        return (valid_token(k) && valid_value(v)).then(|| Requirement::NotEquals(k.into(), v.into()));
    }
    if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
        let (k, v) = (k.trim(), v.trim());
        return (valid_token(k) && valid_value(v)).then(|| Requirement::Equals(k.into(), v.into()));
    }
    valid_token(part).then(|| Requirement::Exists(part.to_string()))
}

/// A parsed field selector over `metadata.name` and `metadata.namespace`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FieldSelector {
    /// (field is name (else namespace), value, negated).
    reqs: Vec<(bool, String, bool)>,
}

impl FieldSelector {
    /// Parses `fieldSelector`; fields other than `metadata.name` and `metadata.namespace` are
    /// rejected with kube-apiserver's message.
    pub(crate) fn parse(s: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for part in s.split(',') {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let (field, value, negated) = if let Some((f, v)) = part.split_once("!=") {
                (f, v, true)
            } else if let Some((f, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                (f, v, false)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid field selector: invalid selector: '{part}'; can't understand '{part}'"
                )));
            };
            let is_name = match field.trim() {
                "metadata.name" => true,
                "metadata.namespace" => false,
                other => {
                    return Err(ApiError::bad_request(format!("field label not supported: {other}")));
                }
            };
            reqs.push((is_name, value.trim().to_string(), negated));
        }
        Ok(Self { reqs })
    }

    /// Whether an object with this namespace and name matches.
    pub(crate) fn matches(&self, namespace: &str, name: &str) -> bool {
        self.reqs.iter().all(|(is_name, value, negated)| {
            let actual = if *is_name { name } else { namespace };
            (actual == value) != *negated
        })
    }

    /// Whether the selector is empty.
    pub(crate) fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn label_selector_syntax() {
        let l = labels(&[("app", "web"), ("tier", "front")]);
        for (sel, want) in [
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app=db", false),
            ("missing!=x", true),
            ("app in (web,db)", true),
            ("app in (db)", false),
            ("app notin (db)", true),
            ("missing notin (db)", true),
            ("tier", true),
            ("missing", false),
            ("!missing", true),
            ("!app", false),
            ("app=web,tier in (front, back)", true),
            ("app=web,tier=back", false),
        ] {
            assert_eq!(LabelSelector::parse(sel).unwrap().matches(&l), want, "{sel}");
        }
        assert!(LabelSelector::parse("app in web").is_err());
        assert!(LabelSelector::parse("a b").is_err());
    }

    #[test]
    fn field_selector_syntax() {
        let f = FieldSelector::parse("metadata.name=a,metadata.namespace!=kube-system").unwrap();
        assert!(f.matches("default", "a"));
        assert!(!f.matches("kube-system", "a"));
        assert!(!f.matches("default", "b"));
        assert!(FieldSelector::parse("spec.foo=bar").is_err());
    }
}
