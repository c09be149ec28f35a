//! The metadata-only kinds kube-apiserver converts objects to when `Accept` asks for them
//! (`application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1`,
//! client-go's metadata client, `k8s.io/client-go/metadata`): what v1.36.3 sent for two
//! ConfigMaps (`tests/fixtures/partial-*`, captured with curl from `cargo xtask cluster up`)
//! is what `encode_json` writes from the JSON form of the same answer, and decodes to it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ListMeta, ObjectMeta};
use kcache_protobuf::{
    DecodeOptions, MessageType, decode, encode_json, envelope, unknown, watch_event, watch_frame,
};
use serde::Deserialize;

use crate::common::fixture;

/// `PartialObjectMetadata`, as k8s-openapi's `ObjectMeta` holds its metadata.
#[derive(Debug, PartialEq, Deserialize)]
struct Partial {
    metadata: ObjectMeta,
}

/// `PartialObjectMetadataList`.
#[derive(Debug, PartialEq, Deserialize)]
struct PartialList {
    metadata: ListMeta,
    items: Vec<Partial>,
}

fn json(name: &str) -> serde_json::Value {
    serde_json::from_slice(&fixture(name)).unwrap()
}

/// A LIST as client-go's metadata client asks for it (`metadataResourceClient.List`), in
/// meta.k8s.io v1 and v1beta1 (whose list numbers its fields the other way round: items 1,
/// metadata 2): kube-apiserver's bytes, byte for byte, from the JSON answer.
#[test]
fn partial_object_metadata_lists_encode_as_kube_apiservers() {
    for (name, api_version, message) in [
        ("partial-configmaps", "meta.k8s.io/v1", "apis/meta/v1.PartialObjectMetadataList"),
        ("partial-configmaps-v1beta1", "meta.k8s.io/v1beta1", "apis/meta/v1beta1.PartialObjectMetadataList"),
    ] {
        let pb = fixture(&format!("{name}.pb"));
        let u = unknown(&pb).unwrap();
        assert_eq!((u.api_version, u.kind), (api_version, "PartialObjectMetadataList"));
        let ty = MessageType::for_kind(api_version, "PartialObjectMetadataList").unwrap();
        assert_eq!(ty.name(), message);
        let raw = encode_json(ty, &json(&format!("{name}.json"))).unwrap();
        assert_eq!(envelope(api_version, "PartialObjectMetadataList", &raw), pb, "{name}");
    }
}

/// The list decodes to what its JSON form does (a metadata informer's items).
#[test]
fn partial_object_metadata_lists_decode_as_json() {
    for name in ["partial-configmaps", "partial-configmaps-v1beta1"] {
        let pb = fixture(&format!("{name}.pb"));
        let u = unknown(&pb).unwrap();
        let ty = MessageType::for_kind(u.api_version, u.kind).unwrap();
        let from_pb: PartialList = decode(ty, u.raw, DecodeOptions::default()).unwrap();
        let from_json: PartialList = serde_json::from_value(json(&format!("{name}.json"))).unwrap();
        assert_eq!(from_pb.items.len(), 2, "{name}");
        assert_eq!(from_pb, from_json, "{name}");
    }
}

/// A GET as the metadata client asks for it (`metadataResourceClient.Get`).
#[test]
fn partial_object_metadata_encodes_as_kube_apiservers() {
    let pb = fixture("partial-configmap.pb");
    let ty = MessageType::for_kind("meta.k8s.io/v1", "PartialObjectMetadata").unwrap();
    let j = json("partial-configmap.json");
    let raw = encode_json(ty, &j).unwrap();
    assert_eq!(envelope("meta.k8s.io/v1", "PartialObjectMetadata", &raw), pb);
    let u = unknown(&pb).unwrap();
    let from_pb: Partial = decode(ty, u.raw, DecodeOptions::default()).unwrap();
    assert_eq!(from_pb, serde_json::from_value::<Partial>(j).unwrap());
    // v1beta1's PartialObjectMetadata is v1's Go type.
    assert_eq!(MessageType::for_kind("meta.k8s.io/v1beta1", "PartialObjectMetadata"), Some(ty));
}

/// A WATCH from resourceVersion 0 as the metadata client asks for it
/// (`metadataResourceClient.Watch`): each ADDED frame's object is the item's
/// PartialObjectMetadata in its own envelope (items of the list answer, same objects).
#[test]
fn partial_object_metadata_watch_frames_are_kube_apiservers() {
    let ty = MessageType::for_kind("meta.k8s.io/v1", "PartialObjectMetadata").unwrap();
    let list = json("partial-configmaps.json");
    let mut want = Vec::new();
    for item in list["items"].as_array().unwrap() {
        let object = envelope("meta.k8s.io/v1", "PartialObjectMetadata", &encode_json(ty, item).unwrap());
        want.extend_from_slice(&watch_frame("ADDED", &object));
    }
    let got = fixture("partial-configmaps-watch.pb");
    assert_eq!(got, want);
    // And each frame reads back.
    let len = u32::from_be_bytes(got[..4].try_into().unwrap()) as usize;
    let first = watch_event(&got[4..4 + len]).unwrap();
    assert_eq!(first.event_type, "ADDED");
    assert_eq!(unknown(first.object).unwrap().kind, "PartialObjectMetadata");
}
