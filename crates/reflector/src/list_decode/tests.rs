//! Unit tests of the JSON list decoder: well-formed bodies cut anywhere decode as a whole body
//! does, malformed ones fail the same way in every chunking, and only the item a chunk cuts is
//! copied.

use serde_json::Value;

use super::oracle::decode_list_whole;
use super::*;

/// Well-formed list bodies, with the shapes a server or a proxy may produce.
const GOOD: &[&str] = &[
    r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"7","continue":"c"},"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}]}"#,
    "{ \"items\" : [ { } , { \"x\" : [ 1 , [ 2 , { } ] ] } ] ,\n \"metadata\" : { \"resourceVersion\" : \"3\" } }\n",
    r#"{"items":[{"s":"quote \" brace } bracket ] backslash \\","t":"\\\""},{"u":"\u00e9\ud83d\ude00"}]}"#,
    r#"{"items":null,"metadata":{"resourceVersion":"1"}}"#,
    r#"{"items":[]}"#,
    r#"{}"#,
    r#"{"metadata":{}}"#,
    r#"{"n":-12.5e3,"t":true,"f":false,"z":null,"a":[],"o":{},"items":[1,"two",null,[3],{"four":4}]}"#,
    r#"{"items":[{"metadata":{"name":"x","managedFields":[{"manager":"m","fieldsV1":{"f:data":{}}}]}}],"metadata":{"continue":""}}"#,
    "\t{\"items\":[{}]}\r\n  ",
    r#"{"items":[12345,-6.5e10,true,"x",null,678],"metadata":{"resourceVersion":"42"}}"#,
];

/// Malformed bodies: every one must be a decode error.
const BAD: &[&str] = &[
    "",
    "[]",
    "\"list\"",
    "null",
    "{",
    "}",
    "{,}",
    "{\"a\" 1}",
    "{\"a\":1,}",
    "{\"a\":}",
    "{\"items\":5}",
    "{\"items\":{\"a\":1}}",
    "{\"items\":[1,]}",
    "{\"items\":[,1]}",
    "{\"items\":[{}]]",
    "{\"items\":[{}}",
    "{\"items\":[]}x",
    "{\"items\":[]}{}",
    "{\"items\":[{]}",
    "{\"a\":tru}",
    "{\"a\":[}]}",
    "{\"metadata\":{\"resourceVersion\":5}}",
    "{1:2}",
    "{\"a\":1 \"b\":2}",
    "{\"items\":[{}] \"b\":2}",
    "{\"items\":[{} {}]}",
    "{\"a\\u00\":1}",
    "{\"items\":[\"\\q\"]}",
    // Found by the `list_decode` fuzz target: a number followed by a byte that cannot follow it.
    "{\"items\":[3\u{0}\u{0}\r7[{ \n3\r",
    // Also found by it: serde reads an overflowing exponent to the end of what it is given.
    "{\"items\":[[\n20199, \r88888888888888888e8888888888%[322]]}",
];

fn decode(body: &[u8], chunk: usize) -> Result<ListPage<Value>> {
    ListDecoder::decode_chunks(body.chunks(chunk.max(1)), false)
}

fn items(page: &ListPage<Value>) -> Vec<Value> {
    page.items.iter().map(|i| (**i).clone()).collect()
}

/// `metadata.shardInfo` (KEP-5866; k8s-openapi's `ListMeta` has no such field yet) reaches
/// the page as `shard_info`, in any chunking and in the oracle alike; a list without it has
/// none, and one whose `shardInfo` has no selector still says the server filtered.
#[test]
fn shard_info_is_read_from_the_list_metadata() {
    let sel = "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')";
    let body = format!(
        r#"{{"kind":"ConfigMapList","apiVersion":"v1","metadata":{{"resourceVersion":"7","shardInfo":{{"selector":"{sel}"}}}},"items":[{{}}]}}"#
    );
    for chunk in [1, 5, body.len()] {
        assert_eq!(decode(body.as_bytes(), chunk).unwrap().shard_info.as_deref(), Some(sel));
    }
    assert_eq!(decode_list_whole::<Value>(body.as_bytes(), false).unwrap().shard_info.as_deref(), Some(sel));
    assert_eq!(decode(br#"{"metadata":{"resourceVersion":"7"},"items":[]}"#, 3).unwrap().shard_info, None);
    assert_eq!(
        decode(br#"{"metadata":{"shardInfo":{}},"items":[]}"#, 3).unwrap().shard_info.as_deref(),
        Some("")
    );
}

/// A `Status` answered in place of a list (with a success code, as some aggregated API
/// servers and proxies do) is the API error it describes, in any chunking, as client-go's
/// `Result.Into` makes it; a success `Status` is an empty list there too. A `Status` whose
/// fields do not decode is a decode error; a list that merely has such member names is a list.
#[test]
fn a_status_in_place_of_a_list_is_its_error() {
    use crate::ErrorKind;
    let cases: [(&str, Option<ErrorKind>); 6] = [
        (
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version","reason":"Expired","code":410}"#,
            Some(ErrorKind::Expired),
        ),
        (
            r#"{"status":"Failure","reason":"Forbidden","code":403,"kind":"Status","message":"no"}"#,
            Some(ErrorKind::Forbidden),
        ),
        (
            r#"{"kind":"Status","status":"Failure","code":429,"reason":"TooManyRequests","details":{"retryAfterSeconds":3}}"#,
            Some(ErrorKind::TooManyRequests),
        ),
        (r#"{"kind":"Status","status":"Failure","code":"410"}"#, Some(ErrorKind::Decode)),
        (r#"{"kind":"Status","apiVersion":"v1","status":"Success","code":200}"#, None),
        (
            r#"{"kind":"ConfigMapList","code":1,"message":"m","metadata":{"resourceVersion":"4"},"items":[{}]}"#,
            None,
        ),
    ];
    for (body, want) in cases {
        for chunk in [1, 3, body.len()] {
            match (decode(body.as_bytes(), chunk), want) {
                (Err(e), Some(kind)) => assert_eq!(e.kind(), kind, "{body} in chunks of {chunk}: {e}"),
                (Ok(_), None) => {}
                (got, want) => panic!("{body} in chunks of {chunk}: {got:?}, want {want:?}"),
            }
        }
    }
    let e = decode(cases[2].0.as_bytes(), 5).unwrap_err();
    assert_eq!(e.retry_after(), Some(std::time::Duration::from_secs(3)));
}

/// Every well-formed body, in chunks of any size, decodes to exactly what serde's one pass
/// over the whole body gives.
#[test]
fn agrees_with_a_whole_body_decode_in_chunks_of_any_size() {
    for body in GOOD {
        let want = decode_list_whole::<Value>(body.as_bytes(), false).unwrap();
        for chunk in [1, 2, 3, 7, 64, body.len()] {
            let got = decode(body.as_bytes(), chunk).unwrap_or_else(|e| panic!("{body} in {chunk}s: {e}"));
            assert_eq!(items(&got), items(&want), "{body} in {chunk}s");
            assert_eq!(got.resource_version, want.resource_version);
            assert_eq!(got.continue_token, want.continue_token);
        }
    }
}

/// Malformed bodies and every truncation of a well-formed one are decode errors that quote
/// nothing of the body.
#[test]
fn malformed_and_truncated_bodies_are_decode_errors() {
    // (serde's derived decode is laxer on a few: it takes `[]` as a struct of defaults.)
    for body in BAD {
        let whole = decode(body.as_bytes(), body.len()).expect_err(body).to_string();
        // (45: the first chunk cuts the last body's exponent.)
        for chunk in [1, 2, 3, 5, 45, body.len()] {
            let e = decode(body.as_bytes(), chunk).expect_err(body);
            assert_eq!(e.kind(), crate::ErrorKind::Decode, "{body}");
            // The same error however the body was cut (what the fuzz target checks).
            assert_eq!(e.to_string(), whole, "{body:?} in chunks of {chunk}");
        }
    }
    for body in GOOD {
        let full = body.trim_end();
        for end in 0..full.len() {
            let Some(prefix) = full.get(..end) else { continue };
            for chunk in [1, 4, 64] {
                let e = decode(prefix.as_bytes(), chunk).expect_err(prefix);
                assert_eq!(e.kind(), crate::ErrorKind::Decode, "{prefix}");
            }
        }
    }
    let e = decode(br#"{"items":[{"metadata":{"name":"hunter2"}}]}trailing-secret"#, 8).unwrap_err();
    assert!(!e.to_string().contains("secret") && !e.to_string().contains("hunter2"), "{e}");
}

/// Single-byte mutations of well-formed bodies (a deterministic pseudo-random sample): the
/// decoder never panics, accepts nothing the whole-body decode rejects (apart from a `null`
/// metadata, which it reads as none), and agrees with it on everything both accept.
#[test]
fn mutated_bodies_never_disagree_with_a_whole_body_decode() {
    const BYTES: &[u8] = b"{}[],:\"\\ 0an-e.tu";
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..20_000 {
        let body = GOOD[(next() % GOOD.len() as u64) as usize].as_bytes();
        let mut m = body.to_vec();
        let at = (next() % m.len() as u64) as usize;
        m[at] = BYTES[(next() % BYTES.len() as u64) as usize];
        let chunk = 1 + (next() % 16) as usize;
        let got = decode(&m, chunk);
        let want = decode_list_whole::<Value>(&m, false);
        match (got, want) {
            (Ok(g), Ok(w)) => {
                assert_eq!(items(&g), items(&w), "{}", String::from_utf8_lossy(&m));
                assert_eq!((g.resource_version, g.continue_token), (w.resource_version, w.continue_token));
            }
            (Ok(_), Err(e)) => {
                let text = String::from_utf8_lossy(&m);
                assert!(
                    text.contains("\"metadata\":nu") || text.contains("\"metadata\":null"),
                    "accepted what a whole-body decode rejects ({e}): {text}"
                );
            }
            (Err(e), _) => assert_eq!(e.kind(), crate::ErrorKind::Decode),
        }
    }
}

/// Items that lie whole in a chunk are decoded where they lie: the only bytes copied into
/// the decoder's buffer are those of the item a chunk's end cuts (and the byte after it),
/// and the items decode to what a whole-body decode gives. No upstream counterpart:
/// client-go's `pager.List` (through `rest.Result.Into`) holds the whole body and decodes it
/// at once.
#[test]
fn only_the_item_a_chunk_cuts_is_copied() {
    let item = r#"{"metadata":{"name":"cm","namespace":"default"},"data":{"k":"v\u00e9\"x"}}"#;
    let mut body = String::from(
        r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"9"},"items":["#,
    );
    for i in 0..20 {
        if i > 0 {
            body.push(',');
        }
        body.push_str(item);
    }
    body.push_str("]}");
    let bytes = body.as_bytes();
    // Cut in the middle of the tenth item.
    let cut = body.find(item).unwrap() + 9 * (item.len() + 1) + 17;
    let mut d = ListDecoder::<Value>::new(false);
    d.push(&bytes[..cut]).unwrap();
    assert_eq!(d.items_decoded(), 9);
    assert_eq!(d.copied(), 17, "only the cut item's bytes so far are kept");
    d.push(&bytes[cut..]).unwrap();
    assert_eq!(d.copied(), item.len() + 1, "then only the rest of that item (and one byte)");
    assert_eq!(d.items_decoded(), 20);
    assert_eq!(d.buffered(), 0);
    let page = d.finish().unwrap();
    let want = decode_list_whole::<Value>(bytes, false).unwrap();
    assert_eq!(items(&page), items(&want));
    assert_eq!(page.resource_version, "9");
}

/// An item cut by many chunks is decoded once its end is in, however small the chunks, and
/// a non-ASCII character cut by a chunk's end or bytes that are not UTF-8 in a member serde
/// ignores decode as in a whole-body decode. No upstream counterpart (see above).
#[test]
fn items_cut_anywhere_decode_as_a_whole_body_does() {
    use k8s_openapi::api::core::v1::ConfigMap;
    let mut body =
        b"{\"items\":[{\"metadata\":{\"name\":\"caf\xc3\xa9\"},\"data\":{\"k\":\"\xe2\x82\xac\"}},{\"metadata\":{\"name\":\"b\"},\"x\":\"\xff\"}]}"
            .to_vec();
    body.extend_from_slice(
        b"
",
    );
    let want = decode_list_whole::<ConfigMap>(&body, false).unwrap();
    assert_eq!(want.items.len(), 2);
    for chunk in 1..body.len() {
        let got = ListDecoder::<ConfigMap>::decode_chunks(body.chunks(chunk), false).unwrap();
        assert_eq!(got.items, want.items, "chunks of {chunk}");
    }
    // A `Value` keeps every member: the byte that is no UTF-8 is an error however it is cut.
    for chunk in [1, 5, body.len()] {
        assert!(decode(&body, chunk).is_err());
    }
}

/// Stripping skips each item's managed fields, as the whole-body decode does.
#[test]
fn strips_managed_fields_per_item() {
    use k8s_openapi::api::core::v1::ConfigMap;
    let body = GOOD[8].as_bytes();
    let page = ListDecoder::<ConfigMap>::decode_chunks(body.chunks(5), true).unwrap();
    assert_eq!(page.items[0].metadata.name.as_deref(), Some("x"));
    assert!(page.items[0].metadata.managed_fields.is_none());
    assert_eq!(page.continue_token, None);
    let full = decode_list_whole::<ConfigMap>(body, false).unwrap();
    assert!(full.items[0].metadata.managed_fields.is_some());
}

/// A whole list body decoded at once by [`ListDecoder`].
fn decode_list<K: DeserializeOwned>(body: &[u8], strip: bool) -> Result<ListPage<K>> {
    ListDecoder::decode_chunks([body], strip)
}

/// A list body decodes into a page of `Arc`s, with or without managed fields; `items` may be
/// missing or `null` (an empty list), and an empty continue token means the last page.
#[test]
fn decodes_list_pages_into_arcs() {
    use k8s_openapi::api::core::v1::ConfigMap;
    let body = br#"{"kind":"ConfigMapList","metadata":{"resourceVersion":"7","continue":"tok"},"items":[
        {"metadata":{"name":"a","managedFields":[{"manager":"m","operation":"Update"}]},"data":{"k":"v"}},
        {"metadata":{"name":"b"}}]}"#;
    let page = decode_list::<ConfigMap>(body, false).unwrap();
    assert_eq!(page.resource_version, "7");
    assert_eq!(page.continue_token.as_deref(), Some("tok"));
    let names: Vec<_> = page.items.iter().map(|c| c.metadata.name.clone().unwrap()).collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(page.items[0].metadata.managed_fields.as_ref().map(Vec::len), Some(1));
    assert_eq!(page.items[0].data.as_ref().unwrap()["k"], "v");
    let stripped = decode_list::<ConfigMap>(body, true).unwrap();
    assert_eq!(stripped.items.len(), 2);
    assert_eq!(stripped.items[0].metadata.managed_fields, None);
    for empty in [
        &br#"{"metadata":{"resourceVersion":"8","continue":""},"items":null}"#[..],
        br#"{"metadata":{"resourceVersion":"8"}}"#,
    ] {
        let page = decode_list::<ConfigMap>(empty, false).unwrap();
        assert!(page.items.is_empty());
        assert_eq!((page.resource_version.as_str(), page.continue_token), ("8", None));
    }
    let e = decode_list::<ConfigMap>(br#"{"items":[{"metadata":{"name":5}}]}"#, false).unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::Decode);
    let e = decode_list::<ConfigMap>(br#"{"items":{"not":"a list"}}"#, true).unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::Decode);
}

/// Found by the `list_decode` fuzz target (stop 44): an unterminated string with a broken
/// `\u` escape and bytes that are not UTF-8 fails as a decode error in every chunking, though
/// the position its message names moves with the cut. No client-go counterpart (client-go
/// decodes the whole body at once).
#[test]
fn a_broken_escape_is_a_decode_error_in_every_chunking() {
    let body: &[u8] =
        b"{ \"items\" : [ 1  , \"\\u00e9] \xfe\xfe\xfe\xfe\xfe\xfe\xfe\xfe 1  , \\u0\"0e9] \xfe\xfe\xfe }";
    for chunk in 1..=body.len() {
        let e = decode(body, chunk).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Decode, "chunks of {chunk}: {e}");
    }
}
