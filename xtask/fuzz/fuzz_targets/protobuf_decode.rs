//! Fuzz target: the reflector's protobuf decode path (`ApiListerWatcher::protobuf(true)`): list
//! responses through the streaming list reader and item decoder, watch streams through the
//! length-prefixed frame splitter and event decoder, into k8s-openapi `Secret`s.
//!
//! The body is either the fuzzer's bytes as they are, or a well-formed response (a list of
//! Secrets, or their watch frames, as kube-apiserver writes them) with the fuzzer's edits
//! applied (bytes overwritten, a cut), so that the mutations reach deep into valid messages.
//!
//! Checks: no panic; every list failure is classified `Decode` (but for a body that is a
//! `Status`, which is the error it describes); the outcome does not depend on where the body was
//! cut into chunks, nor on a list's items being decoded with a helper thread; no error message
//! quotes the Secrets' data (planted in every seed object); and an unedited seed decodes to
//! exactly the Secrets it was written from.
#![no_main]

use arbitrary::Arbitrary;
use bytes::Bytes;
use k8s_openapi::api::core::v1::Secret;
use kcache_protobuf::{MessageType, encode_json, envelope, watch_frame};
use kcache_reflector::{__fuzz, ErrorKind, WatchEvent};
use libfuzzer_sys::fuzz_target;
use serde_json::json;

#[path = "chunking.rs"]
mod chunking;

/// Planted in every seed object's data (and as a label value); must never appear in an error.
const SECRET: &[u8] = b"c2VjcmV0LXZhbHVlLTQy";

#[derive(Arbitrary, Debug)]
enum Body {
    /// The fuzzer's bytes as a list response.
    RawList(Vec<u8>),
    /// The fuzzer's bytes as a watch stream.
    RawWatch(Vec<u8>),
    /// A list of `n` Secrets as kube-apiserver writes it, edited.
    SeedList { n: u8, edits: Vec<(u16, u8)>, cut: Option<u16> },
    /// Watch frames of `n` Secret events, edited.
    SeedWatch { n: u8, edits: Vec<(u16, u8)>, cut: Option<u16> },
}

#[derive(Arbitrary, Debug)]
struct Input {
    body: Body,
    chunking: u8,
    strip: bool,
}

fn secret_json(i: usize) -> serde_json::Value {
    let planted = std::str::from_utf8(SECRET).unwrap();
    json!({"metadata": {"name": format!("s{i}"), "namespace": "ns", "resourceVersion": format!("{}", i + 1),
            "labels": {"k": planted},
            "managedFields": [{"manager": "m", "operation": "Update", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data": {"f:token": {}}}}]},
        "data": {"token": base64(SECRET)}, "type": "Opaque"})
}

fn base64(b: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in b.chunks(3) {
        let n = (u32::from(c[0]) << 16) | (u32::from(*c.get(1).unwrap_or(&0)) << 8) | u32::from(*c.get(2).unwrap_or(&0));
        for k in 0..4 {
            if k <= c.len() {
                out.push(A[(n >> (18 - 6 * k)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn seed_list(n: usize) -> Vec<u8> {
    let ty = MessageType::for_kind("v1", "SecretList").unwrap();
    let items: Vec<_> = (0..n).map(secret_json).collect();
    let list = json!({"metadata": {"resourceVersion": "99"}, "items": items});
    envelope("v1", "SecretList", &encode_json(ty, &list).unwrap())
}

fn seed_watch(n: usize) -> Vec<u8> {
    let ty = MessageType::for_kind("v1", "Secret").unwrap();
    let mut out = Vec::new();
    for i in 0..n {
        let obj = envelope("v1", "Secret", &encode_json(ty, &secret_json(i)).unwrap());
        out.extend_from_slice(&watch_frame(["ADDED", "MODIFIED", "DELETED"][i % 3], &obj));
    }
    out
}

fn edit(mut body: Vec<u8>, edits: &[(u16, u8)], cut: Option<u16>) -> Vec<u8> {
    for &(at, b) in edits {
        if !body.is_empty() {
            let i = usize::from(at) % body.len();
            body[i] = b;
        }
    }
    if let Some(c) = cut {
        body.truncate(usize::from(c));
    }
    body
}

fn no_secret(text: &str) {
    let planted = std::str::from_utf8(SECRET).unwrap();
    assert!(!text.contains(planted), "an error quotes object data: {text}");
    assert!(!text.contains(&base64(SECRET)), "an error quotes object data: {text}");
}

fn expected(n: usize) -> Vec<Secret> {
    (0..n).map(|i| serde_json::from_value(secret_json(i)).unwrap()).collect()
}

fn strip_all(mut v: Vec<Secret>, strip: bool) -> Vec<Secret> {
    if strip {
        for s in &mut v {
            s.metadata.managed_fields = None;
        }
    }
    v
}

fn list(body: &[u8], seed: u8, strip: bool) -> Option<Vec<Secret>> {
    let whole = __fuzz::protobuf_list_page::<Secret>(&[body], strip);
    let chunked = __fuzz::protobuf_list_page::<Secret>(&chunking::cut(seed, body), strip);
    let summary = |r: &kcache_reflector::Result<kcache_reflector::ListPage<Secret>>| match r {
        Ok(p) => format!("ok {:?} {:?} {:?}", p.items, p.resource_version, p.continue_token),
        Err(e) => format!("err {:?} {e}", e.kind()),
    };
    assert_eq!(summary(&whole), summary(&chunked), "outcome depends on chunk boundaries");
    // Items decoded with a helper thread, in batches of 1 to 3: the same items, or the same
    // error (the first bad item's), as on one thread.
    let batch = 1 + usize::from(seed % 3);
    let helped = __fuzz::protobuf_list_page_with_helpers::<Secret>(&chunking::cut(seed, body), strip, 1, batch);
    assert_eq!(summary(&whole), summary(&helped), "outcome depends on the helper threads");
    match whole {
        Ok(p) => Some(p.items.iter().map(|s| (**s).clone()).collect()),
        Err(e) => {
            no_secret(&format!("{e} {e:?}"));
            let status = kcache_protobuf::unknown(body).is_ok_and(|u| u.kind == "Status");
            assert!(status || e.kind() == ErrorKind::Decode, "a bad list must be a decode error: {e}");
            None
        }
    }
}

fn watch(body: &[u8], seed: u8, strip: bool) -> Vec<Result<WatchEvent<Secret>, String>> {
    let run = |chunks: Vec<&[u8]>| -> Vec<Result<WatchEvent<Secret>, String>> {
        let chunks = chunks.into_iter().map(Bytes::copy_from_slice).collect();
        __fuzz::protobuf_watch_events::<Secret>(chunks, strip)
            .into_iter()
            .map(|r| {
                r.map_err(|e| {
                    let text = format!("{:?} {e} {e:?}", e.kind());
                    no_secret(&text);
                    text
                })
            })
            .collect()
    };
    let whole = run(vec![body]);
    let chunked = run(chunking::cut(seed, body));
    assert_eq!(format!("{whole:?}"), format!("{chunked:?}"), "outcome depends on chunk boundaries");
    whole
}

fuzz_target!(|input: Input| {
    match input.body {
        Body::RawList(b) => {
            list(&b, input.chunking, input.strip);
        }
        Body::RawWatch(b) => {
            watch(&b, input.chunking, input.strip);
        }
        Body::SeedList { n, edits, cut } => {
            let n = usize::from(n % 4);
            let pristine = edits.is_empty() && cut.is_none();
            let got = list(&edit(seed_list(n), &edits, cut), input.chunking, input.strip);
            if pristine {
                assert_eq!(got, Some(strip_all(expected(n), input.strip)), "a well-formed list");
            }
        }
        Body::SeedWatch { n, edits, cut } => {
            let n = usize::from(n % 4);
            let pristine = edits.is_empty() && cut.is_none();
            let got = watch(&edit(seed_watch(n), &edits, cut), input.chunking, input.strip);
            if pristine {
                let objects: Vec<Secret> = got
                    .into_iter()
                    .map(|e| match e {
                        Ok(WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o)) => (*o).clone(),
                        other => panic!("a well-formed frame: {other:?}"),
                    })
                    .collect();
                assert_eq!(objects, strip_all(expected(n), input.strip));
            }
        }
    }
});
