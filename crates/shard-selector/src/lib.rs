//! Shard selectors for Kubernetes' server-side sharded list and watch (KEP-5866, alpha in
//! Kubernetes v1.36, feature gate `ShardedListAndWatch`): the Rust counterpart of apimachinery's
//! `pkg/sharding` (`Selector`, `HashField`, `ResolveFieldValue`) and of kube-apiserver's selector
//! parser (apiserver `pkg/sharding/parser.go`).
//!
//! A list or watch request with `shardSelector=shardRange(object.metadata.uid, '0x..', '0x..')`
//! receives only the objects whose field hashes (64-bit FNV-1a) into one of the ranges. client-go
//! passes the string through and has no helpers; this crate parses and formats it exactly as the
//! server does, matches objects by the same hash (for a client that must filter itself when the
//! server ignored the parameter), and splits the hash space into shards.
//!
//! * [`ShardSelector`]: parse, `Display` (apimachinery's `String()`), match, split, union.
//! * [`ShardRange`], [`ShardKey`]: a range `[start, end)` of the hash space; the hashed field.
//! * [`fnv1a_64`], [`hash_hex`]: the hash, and apimachinery's `HashField` rendering of it.
//! * [`ShardSelectorError`]: why a selector is malformed, with kube-apiserver's messages.
//!
//! # Example
//!
//! ```
//! use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
//! use kcache_shard_selector::{ShardKey, ShardSelector};
//!
//! // Replica 1 of 3 asks the server for its third of the objects.
//! let mine = &ShardSelector::split(ShardKey::Uid, 3)[1];
//! let query = format!("shardSelector={mine}");
//! assert!(query.starts_with("shardSelector=shardRange(object.metadata.uid, '0x5555555555555555', "));
//!
//! // A server without the feature sends everything: keep only what is ours.
//! let meta = ObjectMeta { uid: Some("0b7f2a64-3c1e-4d8e-9a4b-1f6c2d3e4a5b".into()), ..Default::default() };
//! let ours = mine.matches(&meta);
//! let owners = ShardSelector::split(ShardKey::Uid, 3).iter().filter(|s| s.matches(&meta)).count();
//! assert_eq!(owners, 1);
//! # let _ = ours;
//!
//! // The server's errors, by variant and by message.
//! let err = "shardRange(object.metadata.name, '0x0000000000000000', '0x10000000000000000')"
//!     .parse::<ShardSelector>()
//!     .unwrap_err();
//! assert_eq!(
//!     err.to_string(),
//!     r#"unsupported field path "object.metadata.name"; supported: object.metadata.uid, object.metadata.namespace"#
//! );
//! ```

mod error;
mod hash;
mod key;
mod parse;
mod range;
mod selector;

pub use error::{ExprKind, HexArgument, ShardSelectorError};
pub use hash::{fnv1a_64, hash_hex};
pub use key::ShardKey;
pub use range::{HASH_SPACE_END, ShardRange};
pub use selector::ShardSelector;

/// `Result` with this crate's error.
pub type Result<T, E = ShardSelectorError> = std::result::Result<T, E>;

// The README's example is compiled and run as a doctest here, so it cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct Readme;
