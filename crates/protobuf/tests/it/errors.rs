//! Bad input (docs/reliability.md): every malformed message is a classified [`Error`], never a
//! panic, and no error message quotes a value from the bytes.

use k8s_openapi::api::core::v1::{Pod, Secret};
use kcache_protobuf::{DecodeOptions, MessageType, decode, unknown};

use crate::common::{fixture, list_item_bytes};

/// Every prefix and every single-byte change of a real Pod is decoded or refused, never a panic.
#[test]
fn truncated_and_corrupted_pods_are_errors_not_panics() {
    let pb = fixture("pods.pb");
    let u = unknown(&pb).unwrap();
    let ty = MessageType::for_kind("v1", "Pod").unwrap();
    let pod = list_item_bytes(u.raw)[0].to_vec();
    for cut in 0..pod.len() {
        let _ = decode::<Pod>(ty, &pod[..cut], DecodeOptions::default());
    }
    for i in 0..pod.len() {
        for x in [0x00, 0x80, 0xff, pod[i] ^ 0x01] {
            let mut bad = pod.clone();
            bad[i] = x;
            let _ = decode::<Pod>(ty, &bad, DecodeOptions::default());
        }
    }
}

/// A Secret whose data is cut short: the error names the field and the class, not the bytes.
#[test]
fn errors_never_quote_values() {
    let ty = MessageType::for_kind("v1", "Secret").unwrap();
    // data (2): one entry, key "k", value "hunter2", the entry's length one byte short.
    let mut msg = vec![0x12, 0x0b, 0x0a, 0x01, b'k', 0x12, 0x07];
    msg.extend_from_slice(b"hunter2");
    let err = decode::<Secret>(ty, &msg, DecodeOptions::default()).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("truncated"), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
    // A type field with a bad apiVersion: serde's message would quote it; ours does not.
    let err = decode::<Secret>(ty, &[0x1a, 0x03, 0xff, 0xfe, 0xfd], DecodeOptions::default()).unwrap_err();
    assert!(err.to_string().contains("UTF-8"), "{err}");
}
