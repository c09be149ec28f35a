//! What both watch decoders (JSON and protobuf) share: the frame size bound and a BOOKMARK's
//! object.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::error::{ReflectorError, Result};

/// Largest watch frame accepted. Kubernetes objects are limited to about 1.5 MiB by etcd; this
/// leaves room for big custom resources while bounding what a broken stream can make us buffer.
pub const MAX_FRAME_BYTES: usize = 64 * 1024 * 1024;

/// A BOOKMARK event's object: its resource version and annotations (JSON or protobuf).
#[derive(Deserialize)]
pub(crate) struct RawBookmark {
    #[serde(default)]
    metadata: RawBookmarkMeta,
}

impl RawBookmark {
    /// The resource version (required) and whether the bookmark ends a watch-list's initial
    /// events.
    pub(crate) fn into_parts(self) -> Result<(String, bool)> {
        let resource_version = self
            .metadata
            .resource_version
            .filter(|rv| !rv.is_empty())
            .ok_or(ReflectorError::MissingResourceVersion("bookmark"))?;
        let initial_events_end = self
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("k8s.io/initial-events-end"))
            .is_some_and(|v| v == "true");
        Ok((resource_version, initial_events_end))
    }
}

#[derive(Deserialize, Default)]
struct RawBookmarkMeta {
    #[serde(default, rename = "resourceVersion")]
    resource_version: Option<String>,
    #[serde(default)]
    annotations: Option<BTreeMap<String, String>>,
}
