//! Decoding one object: kcache-protobuf (its serde path, `decode`, and the decoder generated for
//! the k8s-openapi type, `Decoder`) against serde_json, for the benchmark's ConfigMaps (three
//! labels, no managed fields) and for what kube-apiserver sends (a Pod and a ConfigMap with
//! their managed fields).
#![allow(missing_docs)] // criterion_group! generates an undocumented public fn

use criterion::{Criterion, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kcache_protobuf::{DecodeOptions, Decoder, MessageType, decode, encode_json};
use serde::de::DeserializeOwned;

fn item_json(name: &str) -> serde_json::Value {
    let path = format!("{}/tests/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    v["items"][0].clone()
}

fn pair<K: DeserializeOwned + 'static>(c: &mut Criterion, label: &str, kind: &str, json: &serde_json::Value) {
    let ty = MessageType::for_kind("v1", kind).unwrap();
    let pb = encode_json(ty, json).unwrap();
    let text = serde_json::to_vec(json).unwrap();
    let mut g = c.benchmark_group(label);
    g.bench_function("serde_json", |b| b.iter(|| serde_json::from_slice::<K>(&text).unwrap()));
    g.bench_function("protobuf", |b| b.iter(|| decode::<K>(ty, &pb, DecodeOptions::default()).unwrap()));
    g.bench_function("protobuf_skip_managed_fields", |b| {
        b.iter(|| decode::<K>(ty, &pb, DecodeOptions::default().skip_managed_fields(true)).unwrap())
    });
    let generated = Decoder::<K>::new(ty);
    assert!(generated.is_generated());
    g.bench_function("protobuf_generated", |b| {
        b.iter(|| generated.decode(&pb, DecodeOptions::default()).unwrap())
    });
    g.bench_function("protobuf_generated_skip_managed_fields", |b| {
        b.iter(|| generated.decode(&pb, DecodeOptions::default().skip_managed_fields(true)).unwrap())
    });
    g.finish();
}

fn benches(c: &mut Criterion) {
    let bench_cm = serde_json::json!({"metadata": {"name": "cm-1234", "namespace": "ns-34", "resourceVersion": "1235",
        "uid": "b10d8b47-b9ac-413a-848b-d72527047a59", "creationTimestamp": "2026-12-06T07:25:26Z",
        "labels": {"app": "app-234", "shard": "shard-1234", "tier": "tier-1"}}});
    pair::<ConfigMap>(c, "configmap_bench", "ConfigMap", &bench_cm);
    pair::<ConfigMap>(c, "configmap_real", "ConfigMap", &item_json("configmaps"));
    pair::<Pod>(c, "pod_real", "Pod", &item_json("pods"));
}

criterion_group!(decode_benches, benches);
criterion_main!(decode_benches);
