//! Structured fuzz target for the watch decoding path: frames built from arbitrary JSON-shaped
//! events (well-formed or broken objects, odd resource versions, bookmarks with and without the
//! initial-events-end annotation, ERROR Status bodies, unknown types, keep-alive lines, a
//! truncated last frame), fed through the frame splitter and decoder as a live watch.
//!
//! Checks, per frame, what the decoder must make of it: the event type, the name and
//! resourceVersion of well-formed objects, a bookmark's version and annotation, which error kind
//! a bad frame gets; and that no error message quotes an object's Secret-like data.
#![no_main]

use arbitrary::Arbitrary;
use bytes::Bytes;
use kcache_reflector::{__fuzz, ErrorKind, WatchEvent};
use kube_core::DynamicObject;
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

/// Planted in every object's data; must never appear in an error.
const SECRET: &str = "c2VjcmV0LXZhbHVlLTQy";

#[derive(Arbitrary, Debug)]
enum Type {
    Added,
    Modified,
    Deleted,
    Bookmark,
    Error,
    Other(String),
    /// No `type` field at all.
    Missing,
    /// `type` is not a string.
    Number(i64),
}

#[derive(Arbitrary, Debug)]
enum Rv {
    Str(String),
    Num(u64),
    Null,
    Absent,
}

#[derive(Arbitrary, Debug)]
enum Object {
    /// A well-formed object with this name and resourceVersion.
    Good {
        name: String,
        rv: Rv,
        initial_events_end: Option<String>,
        extra_annotation: Option<(String, String)>,
    },
    /// `metadata` that is not an object.
    BadMetadata(i64),
    /// A JSON value that is not an object.
    Scalar(Option<bool>),
    /// A Status-shaped object (what ERROR events carry).
    Status { code: Option<u16>, reason: Option<String>, message: Option<String> },
    /// No `object` field.
    Absent,
}

#[derive(Arbitrary, Debug)]
struct Frame {
    kind: Type,
    object: Object,
    /// Blank keep-alive lines before the frame.
    blank_lines: u8,
}

#[derive(Arbitrary, Debug)]
struct Input {
    frames: Vec<Frame>,
    /// Cut the body this many bytes before its end (a connection closed mid-frame).
    truncate: u8,
    /// Chunk size for the body.
    chunk: u8,
}

fn rv_json(rv: &Rv) -> Option<Value> {
    match rv {
        Rv::Str(s) => Some(Value::String(s.clone())),
        Rv::Num(n) => Some(json!(n)),
        Rv::Null => Some(Value::Null),
        Rv::Absent => None,
    }
}

fn object_json(o: &Object) -> Option<Value> {
    Some(match o {
        Object::Good { name, rv, initial_events_end, extra_annotation } => {
            let mut meta = serde_json::Map::new();
            meta.insert("name".into(), json!(name));
            if let Some(v) = rv_json(rv) {
                meta.insert("resourceVersion".into(), v);
            }
            let mut ann = serde_json::Map::new();
            if let Some(v) = initial_events_end {
                ann.insert("k8s.io/initial-events-end".into(), json!(v));
            }
            if let Some((k, v)) = extra_annotation {
                ann.insert(k.clone(), json!(v));
            }
            if !ann.is_empty() {
                meta.insert("annotations".into(), Value::Object(ann));
            }
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": meta, "data": {"token": SECRET}})
        }
        Object::BadMetadata(n) => json!({"metadata": n, "data": {"token": SECRET}}),
        Object::Scalar(b) => json!(b),
        Object::Status { code, reason, message } => {
            json!({"kind": "Status", "status": "Failure", "code": code, "reason": reason, "message": message})
        }
        Object::Absent => return None,
    })
}

fn type_json(t: &Type) -> Option<Value> {
    Some(match t {
        Type::Added => json!("ADDED"),
        Type::Modified => json!("MODIFIED"),
        Type::Deleted => json!("DELETED"),
        Type::Bookmark => json!("BOOKMARK"),
        Type::Error => json!("ERROR"),
        Type::Other(s) => json!(s),
        Type::Missing => return None,
        Type::Number(n) => json!(n),
    })
}

/// What the decoder must make of one complete frame.
fn check(frame: &Frame, outcome: &kcache_reflector::Result<WatchEvent<DynamicObject>>) {
    if let Err(e) = outcome {
        let text = format!("{e} {e:?}");
        let planted_in_type = matches!(&frame.kind, Type::Other(s) if s.contains(SECRET));
        assert!(planted_in_type || !text.contains(SECRET), "an error quotes object data: {text}");
    }
    let type_str = match &frame.kind {
        Type::Added => "ADDED",
        Type::Modified => "MODIFIED",
        Type::Deleted => "DELETED",
        Type::Bookmark => "BOOKMARK",
        Type::Error => "ERROR",
        Type::Other(s) => s.as_str(),
        Type::Missing | Type::Number(_) => {
            assert_kind(outcome, ErrorKind::Decode, frame);
            return;
        }
    };
    match type_str {
        "ADDED" | "MODIFIED" | "DELETED" => match &frame.object {
            Object::Good { name, rv, .. } if !matches!(rv, Rv::Num(_)) => {
                let obj = match (type_str, outcome) {
                    ("ADDED", Ok(WatchEvent::Added(o)))
                    | ("MODIFIED", Ok(WatchEvent::Modified(o)))
                    | ("DELETED", Ok(WatchEvent::Deleted(o))) => o,
                    _ => panic!("{type_str} with a well-formed object: {outcome:?} from {frame:?}"),
                };
                assert_eq!(obj.metadata.name.as_deref(), Some(name.as_str()));
                let want_rv = match rv {
                    Rv::Str(s) => Some(s.as_str()),
                    _ => None,
                };
                assert_eq!(obj.metadata.resource_version.as_deref(), want_rv);
            }
            // A number where a string belongs, metadata that is not an object, no object.
            Object::Good { .. } | Object::BadMetadata(_) | Object::Scalar(_) | Object::Absent => {
                assert_kind(outcome, ErrorKind::Decode, frame)
            }
            // A Status has no metadata.name: DynamicObject accepts it (metadata is optional).
            Object::Status { .. } => assert!(outcome.is_ok(), "{outcome:?} from {frame:?}"),
        },
        "BOOKMARK" => match &frame.object {
            Object::Good { rv: Rv::Str(s), initial_events_end, extra_annotation, .. } if !s.is_empty() => {
                match outcome {
                    Ok(WatchEvent::Bookmark(b)) => {
                        assert_eq!(&b.resource_version, s);
                        // The extra annotation is inserted second, so it wins if it has the same key.
                        let end = match extra_annotation {
                            Some((k, v)) if k == "k8s.io/initial-events-end" => Some(v),
                            _ => initial_events_end.as_ref(),
                        };
                        assert_eq!(b.initial_events_end, end.is_some_and(|v| v == "true"));
                    }
                    other => panic!("bookmark at {s:?}: {other:?}"),
                }
            }
            Object::Good { rv: Rv::Str(_) | Rv::Null | Rv::Absent, .. } | Object::Status { .. } => {
                assert_kind(outcome, ErrorKind::MissingResourceVersion, frame)
            }
            Object::Good { rv: Rv::Num(_), .. }
            | Object::BadMetadata(_)
            | Object::Scalar(_)
            | Object::Absent => assert_kind(outcome, ErrorKind::Decode, frame),
        },
        // An ERROR event is always delivered, with whatever Status could be read.
        "ERROR" => assert!(matches!(outcome, Ok(WatchEvent::Error(_))), "{outcome:?} from {frame:?}"),
        other => match outcome {
            Err(kcache_reflector::ReflectorError::UnknownEventType(t)) => {
                assert_eq!(t, &other.chars().take(64).collect::<String>())
            }
            _ => panic!("unknown type {other:?}: {outcome:?}"),
        },
    }
}

fn assert_kind(
    outcome: &kcache_reflector::Result<WatchEvent<DynamicObject>>,
    kind: ErrorKind,
    frame: &Frame,
) {
    match outcome {
        Err(e) if e.kind() == kind => {}
        other => panic!("expected a {kind:?} error, got {other:?} from {frame:?}"),
    }
}

fuzz_target!(|input: Input| {
    let mut body = Vec::new();
    let mut frames = Vec::new();
    for f in &input.frames {
        for _ in 0..f.blank_lines % 3 {
            body.extend_from_slice(b" \r\n");
        }
        let mut ev = serde_json::Map::new();
        if let Some(t) = type_json(&f.kind) {
            ev.insert("type".into(), t);
        }
        if let Some(o) = object_json(&f.object) {
            ev.insert("object".into(), o);
        }
        let start = body.len();
        serde_json::to_writer(&mut body, &Value::Object(ev)).expect("serializing a Value");
        body.push(b'\n');
        frames.push((start, body.len(), f));
    }
    let cut = body.len().saturating_sub(usize::from(input.truncate % 8));
    body.truncate(cut);
    let chunk = usize::from(input.chunk).max(1);
    let chunks: Vec<Bytes> = body.chunks(chunk).map(Bytes::copy_from_slice).collect();
    let outcomes = __fuzz::watch_events::<DynamicObject>(chunks);

    // Frames that keep all their JSON (at most the newline cut) decode on their own; a frame
    // cut inside its JSON is a bad frame.
    let complete: Vec<_> = frames.iter().filter(|(_, end, _)| *end - 1 <= cut).collect();
    let partial = frames.iter().any(|(start, end, _)| *start < cut && *end - 1 > cut);
    assert_eq!(outcomes.len(), complete.len() + usize::from(partial), "one outcome per frame");
    for ((_, _, f), outcome) in complete.iter().zip(&outcomes) {
        check(f, outcome);
    }
    if partial {
        let last = outcomes.last().expect("counted above");
        assert_kind(last, ErrorKind::Decode, frames.last().map(|(_, _, f)| *f).expect("a frame was cut"));
    }
});
