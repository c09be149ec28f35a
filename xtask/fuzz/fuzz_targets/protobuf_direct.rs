//! Fuzz target: the protobuf decoders generated per k8s-openapi type (`kcache_protobuf::Decoder`)
//! against kcache-protobuf's serde path (`kcache_protobuf::decode`), which they replace on the
//! reflector's decode path.
//!
//! The message is either the fuzzer's bytes as they are, or a well-formed object (a Pod with a
//! rich spec, a Deployment, a Service, a ConfigMap, a Secret, as kube-apiserver writes them) with
//! the fuzzer's edits applied (bytes overwritten, a cut), so that the mutations reach deep into
//! valid messages.
//!
//! Checks: no panic; both decoders give the same object, or both refuse the bytes; an unedited
//! seed decodes.
#![no_main]

use std::fmt::Debug;

use arbitrary::Arbitrary;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use kcache_protobuf::{DecodeOptions, Decoder, MessageType, decode, encode_json};
use libfuzzer_sys::fuzz_target;
use serde::de::DeserializeOwned;
use serde_json::json;

#[derive(Arbitrary, Debug)]
struct Input {
    /// Which type (modulo 5).
    ty: u8,
    /// Raw bytes, or edits of the type's seed object.
    raw: Option<Vec<u8>>,
    edits: Vec<(u16, u8)>,
    cut: Option<u16>,
    skip_managed_fields: bool,
}

fn seed(kind: &str) -> serde_json::Value {
    let meta = json!({"name": "a", "namespace": "ns", "uid": "u-1", "resourceVersion": "7", "generation": 3,
        "creationTimestamp": "2026-12-07T10:00:00Z", "labels": {"app": "x", "é": ""},
        "annotations": {"k": "v"}, "finalizers": ["f"],
        "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "o", "uid": "u-2", "controller": true}],
        "managedFields": [{"manager": "m", "operation": "Update", "apiVersion": "v1",
            "time": "2026-12-07T10:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {}}}]});
    let pod_spec = json!({"containers": [{"name": "c", "image": "i", "args": ["a", ""],
            "ports": [{"containerPort": 80, "protocol": "TCP"}],
            "resources": {"limits": {"cpu": "100m", "memory": "1Gi"}},
            "env": [{"name": "E", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
            "livenessProbe": {"httpGet": {"port": 8080, "path": "/"}, "periodSeconds": 3},
            "securityContext": {"runAsUser": 0, "privileged": false}}],
        "volumes": [{"name": "v", "configMap": {"name": "cm", "defaultMode": 420}},
            {"name": "w", "emptyDir": {"sizeLimit": "1Mi"}}],
        "nodeSelector": {"a": "b"}, "terminationGracePeriodSeconds": 30,
        "tolerations": [{"key": "k", "operator": "Exists", "tolerationSeconds": 5}]});
    match kind {
        "Pod" => json!({"metadata": meta, "spec": pod_spec,
            "status": {"phase": "Running", "podIP": "10.0.0.1", "startTime": "2026-12-07T10:00:01Z",
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-12-07T10:00:02Z"}],
                "containerStatuses": [{"name": "c", "ready": true, "restartCount": 0, "image": "i", "imageID": "",
                    "state": {"running": {"startedAt": "2026-12-07T10:00:03Z"}}}]}}),
        "Deployment" => json!({"metadata": meta, "spec": {"replicas": 2,
            "selector": {"matchLabels": {"app": "x"}, "matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]},
            "template": {"metadata": {"labels": {"app": "x"}}, "spec": pod_spec},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0}}},
            "status": {"replicas": 2, "conditions": [{"type": "Available", "status": "True"}]}}),
        "Service" => json!({"metadata": meta, "spec": {"type": "ClusterIP", "clusterIP": "10.1.0.1",
            "ports": [{"name": "http", "port": 80, "targetPort": "http"}, {"port": 443, "targetPort": 8443}],
            "selector": {"app": "x"}}}),
        "ConfigMap" => json!({"metadata": meta, "data": {"k": "v", "": ""}, "binaryData": {"b": "AAEC"}, "immutable": false}),
        _ => json!({"metadata": meta, "data": {"token": "c2VjcmV0"}, "type": "Opaque"}),
    }
}

fn check<K: DeserializeOwned + PartialEq + Debug + 'static>(kind: &str, api_version: &str, input: &Input) {
    let ty = MessageType::for_kind(api_version, kind).unwrap();
    let decoder = Decoder::<K>::new(ty);
    assert!(decoder.is_generated());
    let opts = DecodeOptions::default().skip_managed_fields(input.skip_managed_fields);
    let json = seed(kind);
    let pristine = encode_json(ty, &json).unwrap();
    let bytes = match &input.raw {
        Some(raw) => raw.clone(),
        None => {
            let mut b = pristine.clone();
            for &(at, v) in &input.edits {
                if !b.is_empty() {
                    let i = usize::from(at) % b.len();
                    b[i] = v;
                }
            }
            if let Some(c) = input.cut {
                b.truncate(usize::from(c));
            }
            b
        }
    };
    let serde = decode::<K>(ty, &bytes, opts);
    let generated = decoder.decode(&bytes, opts);
    match (&serde, &generated) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "the decoders disagree"),
        (Err(_), Err(_)) => {}
        _ => panic!("one decoder refused what the other took: serde {serde:?}, generated {generated:?}"),
    }
    // (Not compared with the seed's JSON: protobuf writes Go's non-pointer structs even when
    // empty, as `{}` in kube-apiserver's JSON, where the seed leaves them out.)
    assert!(bytes != pristine || generated.is_ok(), "a well-formed object is refused");
}

fuzz_target!(|input: Input| {
    match input.ty % 5 {
        0 => check::<Pod>("Pod", "v1", &input),
        1 => check::<Deployment>("Deployment", "apps/v1", &input),
        2 => check::<Service>("Service", "v1", &input),
        3 => check::<ConfigMap>("ConfigMap", "v1", &input),
        _ => check::<Secret>("Secret", "v1", &input),
    }
});
