//! Unit tests of watch decoding: event types, bad frames, expected types, frame splitting and a
//! body broken by the connection. [`FRAMES`] and [`rv`] are shared with the decode thread's tests.

use bytes::Bytes;
use futures::StreamExt;
use serde_json::Value;

use super::*;

#[test]
fn decodes_each_event_type() {
    let ev: WatchEvent<Value> =
        decode_frame(br#"{"type":"ADDED","object":{"metadata":{"name":"a"}}}"#, &Decoding::default())
            .unwrap();
    assert!(matches!(ev, WatchEvent::Added(_)));
    let ev: WatchEvent<Value> = decode_frame(
        br#"{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"12","annotations":{"k8s.io/initial-events-end":"true"}}}}"#,
        &Decoding::default(),
    )
    .unwrap();
    match ev {
        WatchEvent::Bookmark(b) => {
            assert_eq!(b.resource_version, "12");
            assert!(b.initial_events_end);
        }
        other => panic!("{other:?}"),
    }
    let ev: WatchEvent<Value> = decode_frame(
        br#"{"type":"ERROR","object":{"code":410,"reason":"Expired","message":"too old"}}"#,
        &Decoding::default(),
    )
    .unwrap();
    assert!(matches!(ev, WatchEvent::Error(s) if s.code == 410));
}

#[test]
fn classifies_bad_frames_without_quoting_them() {
    let e = decode_frame::<Value>(br#"{"type":"ADDED","object":{"secret":"hunter2""#, &Decoding::default())
        .unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::Decode);
    assert!(!e.to_string().contains("hunter2"));
    let e = decode_frame::<Value>(br#"{"type":"SURPRISE","object":{}}"#, &Decoding::default()).unwrap_err();
    assert!(matches!(e, ReflectorError::UnknownEventType(t) if t == "SURPRISE"));
    let e = decode_frame::<Value>(br#"{"type":"BOOKMARK","object":{"metadata":{}}}"#, &Decoding::default())
        .unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::MissingResourceVersion);
    let e = decode_frame::<u32>(br#"{"type":"MODIFIED","object":{"data":"hunter2"}}"#, &Decoding::default())
        .unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::Decode);
    assert!(!e.to_string().contains("hunter2"));
}

/// Found by the `watch_events` fuzz target: a type with JSON escapes was a decode error
/// (a borrowed `&str` cannot hold it) instead of the type it spells.
#[test]
fn event_type_with_escapes() {
    let ev: WatchEvent<Value> =
        decode_frame(br#"{"type":"\u0041DDED","object":{"metadata":{"name":"a"}}}"#, &Decoding::default())
            .unwrap();
    assert!(matches!(ev, WatchEvent::Added(_)));
    let e =
        decode_frame::<Value>(b"{\"type\":\"\\u0001\\n\",\"object\":{}}", &Decoding::default()).unwrap_err();
    assert!(matches!(e, ReflectorError::UnknownEventType(t) if t == "\u{1}\n"));
}

fn expecting(api_version: &str, kind: &str) -> Decoding {
    Decoding {
        expect: Some(Arc::new(ExpectedType { api_version: api_version.into(), kind: kind.into() })),
        strip_managed_fields: false,
        ..Decoding::default()
    }
}

/// `expect_type` on `DynamicObject` (checked after its one decoding pass) and on any other
/// type (peeked at before decoding) accepts the expected type and rejects every other one,
/// also when the object has no type members, naming types only, never values.
#[test]
fn expected_type_is_checked_once_decoded_or_peeked() {
    let d = expecting("example.com/v1", "Widget");
    let frame = |types: &str| {
        format!(
            r#"{{"type":"MODIFIED","object":{{{types}"metadata":{{"name":"w","resourceVersion":"3"}},"spec":"hunter2"}}}}"#
        )
    };
    let widget = frame(r#""apiVersion":"example.com/v1","kind":"Widget","#);
    let foreign = frame(r#""apiVersion":"v1","kind":"ConfigMap","#);
    let untyped = frame("");
    let ok: WatchEvent<DynamicObject> = decode_frame(widget.as_bytes(), &d).unwrap();
    assert!(matches!(ok, WatchEvent::Modified(o) if o.metadata.name.as_deref() == Some("w")));
    let ok: WatchEvent<Value> = decode_frame(widget.as_bytes(), &d).unwrap();
    assert!(matches!(ok, WatchEvent::Modified(_)));
    let stripped = Decoding { strip_managed_fields: true, ..d.clone() };
    assert!(decode_frame::<DynamicObject>(widget.as_bytes(), &stripped).is_ok());
    for bad in [&foreign, &untyped] {
        for e in [
            decode_frame::<DynamicObject>(bad.as_bytes(), &d).unwrap_err(),
            decode_frame::<DynamicObject>(bad.as_bytes(), &stripped).unwrap_err(),
            decode_frame::<Value>(bad.as_bytes(), &d).unwrap_err(),
        ] {
            assert_eq!(e.kind(), crate::ErrorKind::Decode, "{e}");
            let msg = e.to_string();
            assert!(msg.contains("MODIFIED event object: expected example.com/v1 Widget"), "{msg}");
            assert!(!msg.contains("hunter2"), "{msg}");
        }
    }
    let e = decode_frame::<DynamicObject>(foreign.as_bytes(), &d).unwrap_err();
    assert!(e.to_string().contains(r#"got "v1" "ConfigMap""#), "{e}");
    // Bookmarks carry no type members worth checking.
    let bookmark = br#"{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}}"#;
    assert!(matches!(decode_frame::<DynamicObject>(bookmark, &d).unwrap(), WatchEvent::Bookmark(_)));
}

#[test]
fn splits_frames_across_chunks() {
    let mut s = FrameSplitter::default();
    s.push(Bytes::from_static(b"{\"a\":1}\n{\"b\""));
    assert_eq!(s.next_frame().unwrap().unwrap(), Bytes::from_static(b"{\"a\":1}"));
    assert!(s.next_frame().unwrap().is_none());
    s.push(Bytes::from_static(b":2}\n\n"));
    assert_eq!(s.next_frame().unwrap().unwrap(), Bytes::from_static(b"{\"b\":2}"));
    assert!(s.next_frame().unwrap().is_none());
    assert!(s.finish().is_none());
}

/// apimachinery's `framer.NewJSONFramedReader` hands each newline-delimited frame to the decoder;
/// ours hands a frame that lies whole in one chunk out as a slice of that chunk, without copying
/// it, and gathers (copies) only a frame split between chunks.
#[test]
fn a_frame_whole_in_one_chunk_is_not_copied() {
    let chunk = Bytes::from_static(b"{\"a\":1}\n{\"b\":2}\n{\"c\"");
    let inside = |f: &Bytes| chunk.as_ptr_range().contains(&f.as_ptr());
    let mut s = FrameSplitter::default();
    s.push(chunk.clone());
    let a = s.next_frame().unwrap().unwrap();
    let b = s.next_frame().unwrap().unwrap();
    assert_eq!((&a[..], &b[..]), (&b"{\"a\":1}"[..], &b"{\"b\":2}"[..]));
    assert!(inside(&a) && inside(&b), "frames whole in the chunk are slices of it");
    assert!(s.next_frame().unwrap().is_none());
    s.push(Bytes::from_static(b":3}\n"));
    let c = s.next_frame().unwrap().unwrap();
    assert_eq!(&c[..], b"{\"c\":3}");
    assert!(!inside(&c), "a frame split between chunks is gathered");
    // Two chunks pushed before any frame is read keep their order.
    s.push(Bytes::from_static(b"{\"d\""));
    s.push(Bytes::from_static(b":4}\n"));
    assert_eq!(&s.next_frame().unwrap().unwrap()[..], b"{\"d\":4}");
    assert!(s.next_frame().unwrap().is_none());
}

/// A frame may grow to [`MAX_FRAME_BYTES`] while it arrives; one byte more without a newline is a
/// decode error (naming the limit, never the bytes), so a broken stream cannot make the watch
/// buffer without end.
#[test]
fn a_frame_longer_than_the_limit_is_a_decode_error() {
    let mib = Bytes::from(vec![b'x'; 1 << 20]);
    let mut s = FrameSplitter::default();
    for _ in 0..MAX_FRAME_BYTES / mib.len() {
        s.push(mib.clone());
        assert!(s.next_frame().unwrap().is_none());
    }
    s.push(Bytes::from_static(b"x"));
    let e = s.next_frame().unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::Decode);
    assert!(e.to_string().contains(&MAX_FRAME_BYTES.to_string()) && !e.to_string().contains("xx"), "{e}");
}

/// An ADDED, a MODIFIED and a DELETED frame of one object, at resource versions 1, 2 and 3.
pub(crate) const FRAMES: [&str; 3] = [
    r#"{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"1"}}}"#,
    r#"{"type":"MODIFIED","object":{"metadata":{"name":"a","resourceVersion":"2"}}}"#,
    r#"{"type":"DELETED","object":{"metadata":{"name":"a","resourceVersion":"3"}}}"#,
];

/// The resource version of an ADDED, MODIFIED or DELETED event's object.
pub(crate) fn rv(ev: &WatchEvent<DynamicObject>) -> &str {
    match ev {
        WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => {
            o.metadata.resource_version.as_deref().unwrap_or("")
        }
        other => panic!("{other:?}"),
    }
}

/// A watch body broken by the connection (reset, aborted, broken pipe, timed out, GOAWAY,
/// unexpected EOF) ends the stream after the events before it, with no error: client-go's
/// `StreamWatcher` stops quietly on `net.IsProbableEOF` and `net.IsTimeout`, and the reflector
/// re-watches from the resource version it holds instead of relisting. Any other transport
/// error is reported as one.
#[tokio::test]
async fn a_watch_broken_by_the_connection_ends_quietly() {
    use std::io::{Error as IoError, ErrorKind as Io};
    let service = |e: IoError| kube::Error::Service(Box::new(e));
    let ends: Vec<(kube::Error, bool)> = vec![
        (service(IoError::from(Io::ConnectionReset)), true),
        (service(IoError::from(Io::ConnectionAborted)), true),
        (service(IoError::from(Io::BrokenPipe)), true),
        (service(IoError::from(Io::TimedOut)), true),
        (service(IoError::from(Io::UnexpectedEof)), true),
        (kube::Error::Service("read tcp: connection reset by peer".into()), true),
        (kube::Error::Service("http2: server sent GOAWAY and closed the connection".into()), true),
        (service(IoError::from(Io::PermissionDenied)), false),
        (kube::Error::Service("certificate verify failed".into()), false),
    ];
    for (err, quiet) in ends {
        let what = err.to_string();
        let body = futures::stream::iter(vec![Ok(Bytes::from(format!("{}\n", FRAMES[0]))), Err(err)]).boxed();
        let events: Vec<_> =
            decode_in_task::<DynamicObject>(body, Decoding::default(), false, 0, 1).collect::<Vec<_>>().await;
        assert_eq!(rv(events[0].as_ref().unwrap()), "1", "{what}");
        if quiet {
            assert_eq!(events.len(), 1, "{what}: {events:?}");
        } else {
            assert_eq!(events.len(), 2, "{what}");
            assert_eq!(events[1].as_ref().unwrap_err().kind(), crate::ErrorKind::Transport, "{what}");
        }
    }
}

/// The one-pass frame decoder (`OnePass`) gives what the two-pass one gave whatever the member
/// order: `type` first (the object decoded while the frame is parsed), `object` first (kept as
/// JSON, decoded after), extra members, an escaped type; a duplicate `type` is refused as serde's
/// derive refused it, and a `null` object is an event without one.
#[test]
fn one_pass_decoding_is_order_independent() {
    let obj = r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"5","managedFields":[{"manager":"m"}]},"data":{"v":"1"}}"#;
    let frames = [
        format!(r#"{{"type":"MODIFIED","object":{obj}}}"#),
        format!(r#"{{"object":{obj},"type":"MODIFIED"}}"#),
        format!(r#"{{"extra":[1,{{"x":"y"}}],"type":"MODIFIED","object":{obj},"more":null}}"#),
        format!(r#"{{"type":"\u004dODIFIED","object":{obj}}}"#),
    ];
    for strip in [true, false] {
        let decoding = Decoding { strip_managed_fields: strip, ..Decoding::default() };
        for f in &frames {
            match decode_frame::<k8s_openapi::api::core::v1::ConfigMap>(f.as_bytes(), &decoding).unwrap() {
                WatchEvent::Modified(o) => {
                    assert_eq!(o.metadata.name.as_deref(), Some("a"));
                    assert_eq!(o.metadata.managed_fields.is_none(), strip, "{f}");
                }
                other => panic!("{f}: {other:?}"),
            }
        }
    }
    let dup = format!(r#"{{"type":"ADDED","type":"ADDED","object":{obj}}}"#);
    assert!(decode_frame::<Value>(dup.as_bytes(), &Decoding::default()).is_err());
    let e = decode_frame::<Value>(br#"{"type":"ADDED","object":null}"#, &Decoding::default()).unwrap_err();
    assert!(e.to_string().contains("ADDED event without an object"), "{e}");
    let e = decode_frame::<Value>(br#"{"object":{}}"#, &Decoding::default()).unwrap_err();
    assert!(e.to_string().contains("type"), "{e}");
}

/// A watch-list stream of `n` ConfigMaps as kube-apiserver writes it (JSON, or protobuf with
/// `pb`): `ADDED` frames, the bookmark that ends the initial events, two live `MODIFIED`
/// events; each frame as its own bytes.
fn watch_list_frames(n: usize, pb: bool) -> Vec<Vec<u8>> {
    use kcache_protobuf::{MessageType, encode_json, envelope, watch_frame};
    let cm = |i: usize, rv: usize| {
        serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("cm-{i}"), "namespace": "ns", "resourceVersion": rv.to_string()},
            "data": {"i": i.to_string()}})
    };
    let bookmark = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"resourceVersion": (n + 1).to_string(), "annotations": {"k8s.io/initial-events-end": "true"}}});
    let mut events: Vec<(&str, Value)> = (0..n).map(|i| ("ADDED", cm(i, i + 1))).collect();
    events.push(("BOOKMARK", bookmark));
    events.push(("MODIFIED", cm(0, n + 2)));
    events.push(("MODIFIED", cm(1, n + 3)));
    events
        .into_iter()
        .map(|(ty, obj)| {
            if pb {
                let msg = MessageType::for_kind("v1", "ConfigMap").unwrap();
                watch_frame(ty, &envelope("v1", "ConfigMap", &encode_json(msg, &obj).unwrap()))
            } else {
                format!("{{\"type\":\"{ty}\",\"object\":{obj}}}\n").into_bytes()
            }
        })
        .collect()
}

/// A watch-list's initial events decoded with helper threads (`ApiListerWatcher::decode_helpers`)
/// yield what one thread yields: every event, error or not, in its place, however the body is
/// chunked. Streams of 0 to 40 ConfigMaps in JSON and protobuf, with bad `ADDED` frames
/// anywhere, an `ADDED` frame not written as kube-apiserver writes one (decoded in its place),
/// a broken frame length, a body cut mid-frame, a transport error, and bytes changed at
/// pseudo-random places; batches of 1 to 3 frames.
#[test]
fn parallel_and_serial_watch_lists_agree() {
    use k8s_openapi::api::core::v1::ConfigMap;
    let summary = |events: Vec<Result<WatchEvent<ConfigMap>>>| -> Vec<String> {
        events.into_iter().map(|e| e.map_or_else(|e| format!("err {e}"), |ev| format!("{ev:?}"))).collect()
    };
    let decode = |body: &[u8], chunk: usize, pb: bool, fail: bool, helpers: usize, batch: usize| {
        let mut chunks: Vec<std::result::Result<Bytes, kube::Error>> =
            body.chunks(chunk.max(1)).map(|c| Ok(Bytes::copy_from_slice(c))).collect();
        if fail {
            chunks.push(Err(kube::Error::Service("certificate verify failed".into())));
        }
        let decoding = Decoding {
            protobuf: pb.then(|| Arc::new(ProtobufKind::new("v1", "ConfigMap").unwrap())),
            ..Decoding::default()
        };
        let stream =
            decode_in_task::<ConfigMap>(futures::stream::iter(chunks).boxed(), decoding, pb, helpers, batch);
        summary(stream.collect::<Vec<_>>().now_or_never().expect("an in-memory body is always ready"))
    };
    let mut bodies: Vec<(Vec<u8>, bool, bool)> = Vec::new();
    for pb in [false, true] {
        let bad_added: &[u8] = if pb {
            b"\x00\x00\x00\x09\x0a\x05ADDED\x12\x00"
        } else {
            b"{\"type\":\"ADDED\",\"object\":7}\n"
        };
        for n in [0, 1, 2, 5, 17, 40] {
            let frames = watch_list_frames(n, pb);
            let join = |frames: &[Vec<u8>]| frames.concat();
            bodies.push((join(&frames), pb, false));
            bodies.push((join(&frames), pb, true));
            for bad in [0, n / 2, n.saturating_sub(1)].into_iter().filter(|b| *b < n) {
                let mut one = frames.clone();
                one[bad] = bad_added.to_vec();
                bodies.push((join(&one), pb, false));
                if bad + 3 < n {
                    let mut two = one.clone();
                    two[bad + 3] = bad_added.to_vec();
                    bodies.push((join(&two), pb, false));
                }
                let whole = join(&one);
                bodies.push((whole[..whole.len() - 3].to_vec(), pb, false));
            }
            if !pb && n > 3 {
                // An ADDED with a space after the brace: not batched, decoded in its place.
                let mut odd = frames.clone();
                odd[2] = odd[2].splice(1..1, *b" ").collect();
                bodies.push((join(&odd), pb, false));
            }
            if pb && n > 3 {
                // A frame length past the end of any frame (a framing error mid-stream).
                let mut broken = frames.clone();
                broken[3][..4].copy_from_slice(&u32::MAX.to_be_bytes());
                bodies.push((join(&broken), pb, false));
            }
        }
        let base = watch_list_frames(40, pb).concat();
        let mut rng = kcache_test_support::rng::SplitMix64::new(0x9e37_79b9_7f4a_7c15_u64);
        for _ in 0..100 {
            let mut body = base.clone();
            rng.scramble(&mut body, 3);
            bodies.push((body, pb, false));
        }
    }
    let (mut clean, mut failing) = (0, 0);
    for (body, pb, fail) in &bodies {
        let serial = decode(body, body.len(), *pb, *fail, 0, 1);
        if serial.iter().any(|e| e.starts_with("err")) {
            failing += 1;
        } else {
            clean += 1;
        }
        for (chunk, helpers, batch) in [(body.len(), 1, 1), (7, 1, 2), (1, 2, 1), (64, 2, 3), (13, 1, 3)] {
            assert_eq!(
                decode(body, chunk, *pb, *fail, helpers, batch),
                serial,
                "{helpers} helpers, batches of {batch}, chunks of {chunk}, protobuf {pb}"
            );
        }
    }
    assert!(
        clean >= 12 && failing >= 100,
        "both outcomes must be exercised: {clean} clean, {failing} failing"
    );
}

/// A type whose decoding panics on the object named `boom` (a bug in a user's `Deserialize`).
#[derive(Debug)]
struct Boom;

impl<'de> Deserialize<'de> for Boom {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        assert_ne!(v["metadata"]["name"], "boom", "a Deserialize that panics");
        Ok(Boom)
    }
}

/// A watch helper whose decoding panics does not leave the stream waiting for its answer: in
/// the batch's place the stream yields a `Decode` error ("a watch decoding helper ended
/// early"), found by the wait's check that the helper has ended, then goes on. (Batches of 32:
/// frames 0 to 31 are decoded on the watch's thread, and the first batch, 32 to 63, always goes
/// to the helper.)
#[test]
fn a_panicking_watch_helper_is_an_error_not_a_hang() {
    let mut frames = watch_list_frames(64, false);
    frames[40] = b"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"boom\"}}}\n".to_vec();
    let body = futures::stream::iter([Ok(Bytes::from(frames.concat()))]).boxed();
    let events: Vec<Result<WatchEvent<Boom>>> = decode_in_task(body, Decoding::default(), false, 1, 32)
        .collect::<Vec<_>>()
        .now_or_never()
        .expect("an in-memory body is always ready");
    assert!(events[..32].iter().all(|e| matches!(e, Ok(WatchEvent::Added(_)))));
    let e = events[32].as_ref().unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::Decode);
    assert!(e.to_string().contains("a watch decoding helper ended early"), "{e}");
    // The bookmark and the live events after the lost batch.
    assert!(matches!(events[33], Ok(WatchEvent::Bookmark(_))), "{:?}", events[33]);
    assert_eq!(events.len(), 36);
}
