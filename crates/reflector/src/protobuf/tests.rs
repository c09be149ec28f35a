//! Unit tests of the protobuf decode path: frames, lists and errors built with kcache-protobuf's
//! encoder (what kube-apiserver writes, checked against its fixtures in that crate).

use k8s_openapi::api::core::v1::ConfigMap;
use kcache_protobuf::{MessageType, encode_json, envelope, watch_frame};
use serde_json::json;

use super::*;
use crate::ErrorKind;

fn cm_kind() -> Arc<ProtobufKind> {
    Arc::new(ProtobufKind::new("v1", "ConfigMap").unwrap())
}

fn cm(name: &str, rv: &str) -> Vec<u8> {
    let ty = MessageType::for_kind("v1", "ConfigMap").unwrap();
    let obj = json!({"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv,
        "managedFields": [{"manager": "m", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {}}}]},
        "data": {"k": "v"}});
    envelope("v1", "ConfigMap", &encode_json(ty, &obj).unwrap())
}

fn list(items: &[Vec<u8>], rv: &str, cont: &str) -> Vec<u8> {
    let ty = MessageType::for_kind("v1", "ConfigMapList").unwrap();
    let items: Vec<serde_json::Value> = items
        .iter()
        .map(|e| {
            let u = kcache_protobuf::unknown(e).unwrap();
            let c: ConfigMap = kcache_protobuf::decode(
                MessageType::for_kind("v1", "ConfigMap").unwrap(),
                u.raw,
                DecodeOptions::default(),
            )
            .unwrap();
            serde_json::to_value(c).unwrap()
        })
        .collect();
    let v = json!({"metadata": {"resourceVersion": rv, "continue": cont}, "items": items});
    envelope("v1", "ConfigMapList", &encode_json(ty, &v).unwrap())
}

fn decode_list(body: &[u8], chunk: usize, strip: bool) -> Result<ListPage<ConfigMap>> {
    let mut d = ProtoListDecoder::<ConfigMap>::new(cm_kind(), strip, 0, 1);
    for c in body.chunks(chunk) {
        d.push(c)?;
    }
    d.finish()
}

/// client-go's protobuf list decoding (`protobuf.Serializer.Decode` of a `ConfigMapList`): the
/// items, the resource version and the continue token, however the body is chunked; managed
/// fields skipped on request.
#[test]
fn lists_decode_in_any_chunking() {
    let body = list(&[cm("a", "5"), cm("b", "6")], "7", "tok");
    for chunk in [1, 3, 64, body.len()] {
        let page = decode_list(&body, chunk, true).unwrap();
        assert_eq!(page.items.len(), 2);
        assert_eq!(page.items[1].metadata.name.as_deref(), Some("b"));
        assert!(page.items[0].metadata.managed_fields.is_none());
        assert_eq!((page.resource_version.as_str(), page.continue_token.as_deref()), ("7", Some("tok")));
    }
    let kept = decode_list(&body, 5, false).unwrap();
    assert_eq!(kept.items[0].metadata.managed_fields.as_ref().map(Vec::len), Some(1));
}

/// `ListMeta.shardInfo` (field 5, KEP-5866), which kube-apiserver sets on a list it filtered by
/// a shard selector (`SelectionPredicate.SetShardInfoOnList`), reaches the page as
/// `shard_info`; a list without it has none.
#[test]
fn shard_info_is_read_from_the_list_metadata() {
    let ty = MessageType::for_kind("v1", "ConfigMapList").unwrap();
    let selector = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')";
    let v = json!({"metadata": {"resourceVersion": "7", "shardInfo": {"selector": selector}}, "items": []});
    let body = envelope("v1", "ConfigMapList", &encode_json(ty, &v).unwrap());
    for chunk in [1, 7, body.len()] {
        assert_eq!(decode_list(&body, chunk, true).unwrap().shard_info.as_deref(), Some(selector));
    }
    let plain = list(&[cm("a", "5")], "7", "");
    assert_eq!(decode_list(&plain, 4, true).unwrap().shard_info, None);
}

/// A list of another kind, a truncated list and a Status in place of a list are classified
/// errors (the Status as the error it describes, as client-go's `Result.Into`).
#[test]
fn bad_lists_are_classified_errors() {
    let pods = envelope("v1", "PodList", &[]);
    let e = decode_list(&pods, 4, true).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Decode);
    assert!(e.to_string().contains("expected v1 ConfigMapList, got v1 PodList"), "{e}");
    // A type that is no kind's (in a corrupted body, any bytes of an object) is never quoted:
    // the `protobuf_decode` fuzz target's first find.
    let secret = "c2VjcmV0LXZhbHVlLTQy";
    let e = decode_list(&envelope("v1", secret, &[]), 4, true).unwrap_err();
    assert!(!e.to_string().contains(secret), "{e}");
    let e = split(&frames(&[("ADDED", envelope(secret, "ConfigMap", &[]))]), 64).unwrap_err();
    assert!(!e.to_string().contains(secret), "{e}");
    let body = list(&[cm("a", "5")], "7", "");
    let e = decode_list(&body[..body.len() - 10], 4, true).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Decode);
    let status = encode_json(
        MessageType::status(),
        &json!({"status": "Failure", "reason": "Expired", "code": 410, "message": "too old"}),
    )
    .unwrap();
    let e = decode_list(&envelope("v1", "Status", &status), 3, true).unwrap_err();
    assert!(e.is_expired(), "{e}");
    assert_eq!(status_body(&envelope("v1", "Status", &status)).unwrap().code, 410);
}

fn frames(events: &[(&str, Vec<u8>)]) -> Vec<u8> {
    events.iter().flat_map(|(t, o)| watch_frame(t, o)).collect()
}

fn split(body: &[u8], chunk: usize) -> Result<Vec<WatchEvent<ConfigMap>>> {
    let mut s = ProtoFrameSplitter::default();
    let pb = cm_kind();
    let mut out = Vec::new();
    for c in body.chunks(chunk) {
        s.push(Bytes::copy_from_slice(c));
        while let Some(f) = s.next_frame()? {
            out.push(decode_proto_frame::<ConfigMap>(&f, &pb, true)?);
        }
    }
    s.finish()?;
    Ok(out)
}

/// client-go's `StreamWatcher` over the protobuf watch decoder (`streaming.NewDecoder` with
/// length-delimited frames): ADDED, MODIFIED, DELETED, a BOOKMARK ending the initial events and
/// an ERROR carrying its Status, across any chunking.
#[test]
fn watch_frames_decode_in_any_chunking() {
    let ty = MessageType::for_kind("v1", "ConfigMap").unwrap();
    let bookmark = envelope(
        "v1",
        "ConfigMap",
        &encode_json(ty, &json!({"metadata": {"resourceVersion": "9", "annotations": {"k8s.io/initial-events-end": "true"}}})).unwrap(),
    );
    let status = envelope(
        "v1",
        "Status",
        &encode_json(MessageType::status(), &json!({"status": "Failure", "reason": "Expired", "code": 410}))
            .unwrap(),
    );
    let body = frames(&[
        ("ADDED", cm("a", "5")),
        ("MODIFIED", cm("a", "6")),
        ("DELETED", cm("a", "7")),
        ("BOOKMARK", bookmark),
        ("ERROR", status),
    ]);
    for chunk in [1, 7, body.len()] {
        let evs = split(&body, chunk).unwrap();
        assert!(
            matches!(&evs[0], WatchEvent::Added(o) if o.metadata.resource_version.as_deref() == Some("5"))
        );
        assert!(matches!(&evs[1], WatchEvent::Modified(_)));
        assert!(matches!(&evs[2], WatchEvent::Deleted(o) if o.metadata.managed_fields.is_none()));
        assert!(
            matches!(&evs[3], WatchEvent::Bookmark(b) if b.resource_version == "9" && b.initial_events_end)
        );
        assert!(matches!(&evs[4], WatchEvent::Error(s) if s.code == 410));
    }
}

/// An object of another kind, an unknown event type, a frame over the limit and a stream cut
/// inside a frame are classified errors, never a panic or a wrong object in the cache.
#[test]
fn bad_watch_frames_are_classified_errors() {
    let pod = envelope("v1", "Pod", &[]);
    let e = split(&frames(&[("ADDED", pod)]), 64).unwrap_err();
    assert!(e.to_string().contains("expected v1 ConfigMap"), "{e}");
    let e = split(&frames(&[("SURPRISE", cm("a", "1"))]), 64).unwrap_err();
    assert!(matches!(e, ReflectorError::UnknownEventType(t) if t == "SURPRISE"));
    let mut huge = (u32::MAX).to_be_bytes().to_vec();
    huge.push(0);
    assert_eq!(split(&huge, 64).unwrap_err().kind(), ErrorKind::Decode);
    let body = frames(&[("ADDED", cm("a", "1"))]);
    assert_eq!(split(&body[..body.len() - 1], 64).unwrap_err().kind(), ErrorKind::Decode);
    let e = split(&frames(&[("ADDED", Vec::new())]), 64).unwrap_err();
    assert!(e.to_string().contains("without an object"), "{e}");
}

/// A ConfigMapList body written field by field: `items` are bare ConfigMap messages (any
/// bytes), the metadata before them, or after them when `meta_last`.
fn raw_list(items: &[Vec<u8>], meta_last: bool) -> Vec<u8> {
    fn field(out: &mut Vec<u8>, bytes: &[u8]) {
        let mut len = bytes.len();
        while len >= 0x80 {
            out.push((len as u8) | 0x80);
            len >>= 7;
        }
        out.push(len as u8);
        out.extend_from_slice(bytes);
    }
    let meta_ty = MessageType::for_kind("v1", "ConfigMapList").unwrap().field_message(1).unwrap();
    let meta = encode_json(meta_ty, &json!({"resourceVersion": "9"})).unwrap();
    let mut raw = Vec::new();
    if !meta_last {
        raw.push(0x0a);
        field(&mut raw, &meta);
    }
    for item in items {
        raw.push(0x12);
        field(&mut raw, item);
    }
    if meta_last {
        raw.push(0x0a);
        field(&mut raw, &meta);
    }
    envelope("v1", "ConfigMapList", &raw)
}

/// A bare ConfigMap message named `cm-<i>`.
fn bare_cm(i: usize) -> Vec<u8> {
    let ty = MessageType::for_kind("v1", "ConfigMap").unwrap();
    let labels = json!({"app": format!("app-{}", i % 7)});
    encode_json(ty, &json!({"metadata": {"name": format!("cm-{i}"), "namespace": "ns", "labels": labels}, "data": {"k": i.to_string()}}))
        .unwrap()
}

fn page_or_error(r: Result<ListPage<ConfigMap>>) -> std::result::Result<(Vec<ConfigMap>, String), String> {
    r.map(|p| (p.items.iter().map(|o| (**o).clone()).collect(), p.resource_version))
        .map_err(|e| e.to_string())
}

/// A list decoded with helper threads (`ApiListerWatcher::decode_helpers`) gives what one
/// thread gives: the same objects in the same order, or the same error, the first bad item's,
/// even when a later item, the metadata after the items, or the body's end is bad too. Lists of
/// 0 to 40 items, bad items anywhere, truncated bodies, and bytes changed at pseudo-random
/// places; batches of 1 to 3 items so that every list of a few items is cut into many.
#[test]
fn parallel_and_serial_lists_agree() {
    let decode = |body: &[u8], chunk: usize, helpers: usize, batch: usize| {
        let mut d = ProtoListDecoder::<ConfigMap>::new(cm_kind(), true, helpers, batch);
        let pushed = body.chunks(chunk.max(1)).try_for_each(|c| d.push(c));
        page_or_error(pushed.and_then(|()| d.finish()))
    };
    // An item that does not decode: ObjectMeta (field 1) as a varint.
    let bad_wire = vec![0x08, 0x01];
    // An item whose name is not UTF-8.
    let bad_utf8 = {
        let mut meta = vec![0x0a, 0x02, 0xff, 0xfe];
        let mut item = vec![0x0a, meta.len() as u8];
        item.append(&mut meta);
        item
    };
    let mut bodies = Vec::new();
    for n in [0, 1, 2, 5, 17, 40] {
        let items: Vec<Vec<u8>> = (0..n).map(bare_cm).collect();
        bodies.push(raw_list(&items, false));
        bodies.push(raw_list(&items, true));
        for bad in [0, 1, n / 2, n.saturating_sub(1)].into_iter().filter(|b| *b < n) {
            let mut one = items.clone();
            one[bad] = bad_wire.clone();
            bodies.push(raw_list(&one, false));
            // A second bad item further on, of another kind: the first one's error wins.
            let mut two = one.clone();
            if bad + 3 < n {
                two[bad + 3] = bad_utf8.clone();
                bodies.push(raw_list(&two, false));
            }
            // The first bad item, then a body cut short.
            let whole = raw_list(&one, true);
            bodies.push(whole[..whole.len() - 3].to_vec());
        }
        let whole = raw_list(&items, false);
        bodies.push(whole[..whole.len() * 2 / 3].to_vec());
    }
    // Bytes changed at pseudo-random places of a 40-item list.
    let base = raw_list(&(0..40).map(bare_cm).collect::<Vec<_>>(), false);
    let mut rng = kcache_test_support::rng::SplitMix64::new(0x2545_f491_4f6c_dd1d_u64);
    for _ in 0..200 {
        let mut body = base.clone();
        rng.scramble(&mut body, 3);
        bodies.push(body);
    }

    let (mut oks, mut errs) = (0, 0);
    for body in &bodies {
        let serial = decode(body, body.len(), 0, 1);
        match &serial {
            Ok(_) => oks += 1,
            Err(_) => errs += 1,
        }
        for (chunk, helpers, batch) in [(body.len(), 1, 1), (7, 1, 2), (1, 2, 1), (64, 2, 3), (13, 1, 3)] {
            assert_eq!(
                decode(body, chunk, helpers, batch),
                serial,
                "{helpers} helpers, batches of {batch}, chunks of {chunk}"
            );
        }
    }
    assert!(oks >= 12 && errs >= 100, "both outcomes must be exercised: {oks} decoded, {errs} refused");
}

/// A type whose decoding panics on the object named `boom` (a bug in a user's `Deserialize`).
#[derive(Debug)]
struct Boom;

impl<'de> serde::Deserialize<'de> for Boom {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        assert_ne!(v["metadata"]["name"], "boom", "a Deserialize that panics");
        Ok(Boom)
    }
}

/// A helper whose decoding panics does not leave the list waiting for its answer: the list
/// fails with "a list decoding helper ended early" and never hangs. (Batches of 32: items 0 to
/// 31 are decoded on the list's own thread, and the first batch, 32 to 63, always goes to the
/// helper, so the helper is the one that meets the bad item.)
#[test]
fn a_panicking_helper_fails_the_list_and_never_hangs() {
    let mut items: Vec<Vec<u8>> = (0..64).map(bare_cm).collect();
    let ty = MessageType::for_kind("v1", "ConfigMap").unwrap();
    items[40] = encode_json(ty, &json!({"metadata": {"name": "boom"}})).unwrap();
    let body = raw_list(&items, false);
    for chunk in [16, body.len()] {
        let mut d = ProtoListDecoder::<Boom>::new(cm_kind(), true, 1, 32);
        let e =
            body.chunks(chunk).try_for_each(|c| d.push(c)).and_then(|()| d.finish().map(|_| ())).unwrap_err();
        assert!(e.to_string().contains("a list decoding helper ended early"), "{e}");
    }
}
