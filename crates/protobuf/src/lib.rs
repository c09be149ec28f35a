//! Kubernetes' protobuf encoding of built-in types (`application/vnd.kubernetes.protobuf`),
//! decoded straight into the k8s-openapi types users hold, for kcache's reflector; and the
//! encoding, for kcache-testserver.
//!
//! # Concepts
//!
//! client-go speaks protobuf to kube-apiserver for built-in types when `rest.Config.ContentType`
//! says so (kube-controller-manager and kube-scheduler do). A response is the bytes `k8s\0`
//! followed by a `runtime.Unknown` message ([`Unknown`]) whose `raw` field holds the object's
//! message (or a list's); a watch is a stream of frames, each a 4-byte big-endian length and a
//! `meta/v1 WatchEvent` whose object is such an envelope ([`watch_event`]).
//!
//! kube-rs's `k8s-pb` crate has prost-generated structs for those messages, but users hold
//! k8s-openapi types, so prost structs would have to be converted field by field, every string
//! moved and every special type (Time, Quantity, IntOrString, ...) re-encoded. This crate does not
//! build them: [`decode`] is a serde `Deserializer` that presents a message to the type being
//! decoded as the JSON object the JSON encoding would have given it, so k8s-openapi's own
//! `Deserialize` impls build the object directly from the protobuf bytes. What that needs is
//! a schema ([`MessageType`]) generated from the Go types by reflection
//! (`xtask/protobuf-schema`): each field's JSON name, whether JSON leaves it out when empty
//! (protobuf writes every non-pointer field), whether it is inlined into its parent in JSON,
//! and which fields are the types whose protobuf form differs from their JSON form.
//!
//! [`Decoder`] goes one step further for k8s-openapi's own types: a decoder generated per type
//! (`cargo xtask protobuf-direct`, from that schema and k8s-openapi's sources) writes each
//! field by its protobuf number, as Go's generated `Unmarshal` does, with no serde visitor
//! matching member names in between, and gives the same value as [`decode`] (a test holds
//! every generated type to that on random and malformed messages). It costs 30-50% less per
//! object; `decode` remains the path for every other type.
//!
//! Custom resources have no protobuf form; kube-apiserver answers JSON for them even when a
//! client prefers protobuf, and kcache decodes by the response's `Content-Type`. The
//! metadata-only kinds it converts any object to when `Accept` asks
//! (`application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1`,
//! client-go's metadata client) do have one, for custom resources too: meta.k8s.io `v1` and
//! `v1beta1` `PartialObjectMetadata` and `PartialObjectMetadataList` are in the table.
//!
//! # Examples
//!
//! ```
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kcache_protobuf::{DecodeOptions, MessageType, decode, encode_json, unknown};
//!
//! let ty = MessageType::for_kind("v1", "ConfigMap").unwrap();
//! let json = serde_json::json!({"metadata": {"name": "a", "namespace": "ns"}, "data": {"k": "v"}});
//! // What kube-apiserver would send (kcache-testserver writes it so).
//! let body = kcache_protobuf::envelope("v1", "ConfigMap", &encode_json(ty, &json)?);
//! let u = unknown(&body)?;
//! assert_eq!((u.api_version, u.kind), ("v1", "ConfigMap"));
//! let cm: ConfigMap = decode(ty, u.raw, DecodeOptions::default())?;
//! assert_eq!(cm.metadata.namespace.as_deref(), Some("ns"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod de;
mod direct;
mod enc;
mod envelope;
mod error;
mod generated;
mod list;
mod message_type;
mod schema;
mod time;
mod wire;

pub use de::{DecodeOptions, MAX_DEPTH, decode};
pub use direct::Decoder;
pub use enc::{EncodeError, encode_json};
pub use envelope::{
    MAGIC, MEDIA_TYPE, RawWatchEvent, Unknown, WATCH_MEDIA_TYPE, envelope, unknown, watch_event, watch_frame,
};
pub use error::{Error, Wire};
pub use list::{ListPart, ListReader};
pub use message_type::MessageType;
