//! The fixtures: list responses kube-apiserver v1.36.3 sent for the same objects in JSON and in
//! protobuf (`tests/fixtures/<resource>.{json,pb}`, captured with curl from `cargo xtask cluster
//! up`: `Accept: application/json`, then `Accept: application/vnd.kubernetes.protobuf`; the
//! `partial-*` ones with `;as=PartialObjectMetadata(List);g=meta.k8s.io;v=v1` (or `v1beta1`) on
//! both).

use std::path::PathBuf;

use kcache_protobuf::{DecodeOptions, MessageType, decode, unknown};
use serde::de::DeserializeOwned;

pub(crate) fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The items of a protobuf list response, decoded as `K` (the list's field 2).
pub(crate) fn pb_items<K: DeserializeOwned>(body: &[u8], opts: DecodeOptions) -> Vec<K> {
    let u = unknown(body).expect("envelope");
    let list = MessageType::for_kind(u.api_version, u.kind).expect("a list kind");
    let item = list.field_message(2).expect("items");
    list_item_bytes(u.raw).into_iter().map(|b| decode(item, b, opts).expect("item")).collect()
}

/// The bytes of each field 2 (an item) of a list message.
pub(crate) fn list_item_bytes(raw: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut i = 0;
    let varint = |i: &mut usize| {
        let mut v = 0u64;
        let mut shift = 0;
        loop {
            let b = raw[*i];
            *i += 1;
            v |= u64::from(b & 0x7f) << shift;
            shift += 7;
            if b < 0x80 {
                return v;
            }
        }
    };
    while i < raw.len() {
        let tag = varint(&mut i);
        assert_eq!(tag & 7, 2, "list fields are length-delimited");
        let len = varint(&mut i) as usize;
        if tag >> 3 == 2 {
            out.push(&raw[i..i + len]);
        }
        i += len;
    }
    out
}

/// The items of the JSON list response.
pub(crate) fn json_items<K: DeserializeOwned>(body: &[u8]) -> Vec<K> {
    #[derive(serde::Deserialize)]
    struct List<K> {
        items: Vec<K>,
    }
    serde_json::from_slice::<List<K>>(body).expect("JSON list").items
}
