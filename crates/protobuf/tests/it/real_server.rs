//! What kube-apiserver v1.36.3 sent as protobuf decodes to the very objects its JSON for the same
//! request decodes to (client-go's protobuf and JSON decoders give one Go object either way).

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolume, PersistentVolumeClaim, Pod, Secret, Service};
use kcache_protobuf::DecodeOptions;
use serde::de::DeserializeOwned;

use crate::common::{fixture, json_items, pb_items};

fn same_as_json<K: DeserializeOwned + PartialEq + std::fmt::Debug>(name: &str) -> Vec<K> {
    let from_pb: Vec<K> = pb_items(&fixture(&format!("{name}.pb")), DecodeOptions::default());
    let from_json: Vec<K> = json_items(&fixture(&format!("{name}.json")));
    assert!(!from_json.is_empty(), "{name}: no items");
    assert_eq!(from_pb, from_json, "{name}");
    from_pb
}

/// A ConfigMap with labels, data, binaryData and a managedFields entry (Time, FieldsV1).
#[test]
fn config_maps() {
    let cms: Vec<ConfigMap> = same_as_json("configmaps");
    assert!(cms[0].metadata.managed_fields.is_some());
    assert!(cms[0].binary_data.is_some());
}

/// A Pod: inlined volume sources, IntOrString probe ports (a name and a number), quantities,
/// owner references, finalizers, tolerations with a pointer int64, node affinity; and the
/// fields JSON leaves out when empty that protobuf writes (`generateName`, `generation`, ...).
#[test]
fn pods() {
    let pods: Vec<Pod> = same_as_json("pods");
    let spec = pods[0].spec.as_ref().unwrap();
    assert!(spec.volumes.as_ref().unwrap()[0].empty_dir.is_some());
}

/// Secret data is bytes in protobuf and base64 in JSON; an empty value survives.
#[test]
fn secrets() {
    let s: Vec<Secret> = same_as_json("secrets");
    assert_eq!(s[0].data.as_ref().unwrap()["k"].0, vec![0, 1, 2, 3, 4]);
}

/// Services: IntOrString target ports, both kinds.
#[test]
fn services() {
    same_as_json::<Service>("services");
}

/// A Deployment: an IntOrString percentage, a pod template, conditions.
#[test]
fn deployments() {
    same_as_json::<Deployment>("deployments");
}

/// A Lease: MicroTime to the microsecond.
#[test]
fn leases() {
    let l: Vec<Lease> = same_as_json("leases");
    let spec = l[0].spec.as_ref().unwrap();
    assert!(spec.acquire_time.is_some());
}

/// PersistentVolumeClaims and PersistentVolumes (PersistentVolumeSource inlined in the spec).
#[test]
fn volumes() {
    same_as_json::<PersistentVolumeClaim>("pvcs");
    let pv: Vec<PersistentVolume> = same_as_json("pvs");
    assert!(pv[0].spec.as_ref().unwrap().host_path.is_some());
}

/// Skipping managedFields leaves the rest of the object as it was.
#[test]
fn managed_fields_are_skipped_on_request() {
    let full: Vec<Pod> = pb_items(&fixture("pods.pb"), DecodeOptions::default());
    let skipped: Vec<Pod> = pb_items(&fixture("pods.pb"), DecodeOptions::default().skip_managed_fields(true));
    let mut expected = full.clone();
    for p in &mut expected {
        p.metadata.managed_fields = None;
    }
    assert!(full[0].metadata.managed_fields.is_some());
    assert_eq!(skipped, expected);
}
