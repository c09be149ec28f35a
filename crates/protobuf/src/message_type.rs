//! `MessageType`: a message of the generated table (`generated.rs`), found by kind.

use crate::generated::{KINDS, MESSAGES};
use crate::schema::{Kind, Message};

/// The protobuf message of a Kubernetes built-in kind: what [`decode`](crate::decode) decodes
/// an object of that kind from.
///
/// # Examples
///
/// ```
/// use kcache_protobuf::MessageType;
///
/// assert!(MessageType::for_kind("v1", "ConfigMap").is_some());
/// assert!(MessageType::for_kind("apps/v1", "Deployment").is_some());
/// // Custom resources have no protobuf form: kcache reads them as JSON.
/// assert!(MessageType::for_kind("example.com/v1", "Widget").is_none());
/// // The metadata-only conversions of any object (client-go's metadata client) do.
/// assert!(MessageType::for_kind("meta.k8s.io/v1", "PartialObjectMetadataList").is_some());
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct MessageType(pub(crate) u16);

impl std::fmt::Debug for MessageType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("MessageType").field(&self.message().name).finish()
    }
}

impl MessageType {
    /// The message of the built-in kind `kind` at `api_version` (`"v1"`, `"apps/v1"`), if the
    /// server can send it as protobuf.
    pub fn for_kind(api_version: &str, kind: &str) -> Option<Self> {
        KINDS
            .binary_search_by(|k| (k.api_version, k.kind).cmp(&(api_version, kind)))
            .ok()
            .map(|i| Self(KINDS[i].message))
    }

    /// meta/v1 `Status`: the object of an error response and of a watch's `ERROR` event.
    pub fn status() -> Self {
        Self(crate::generated::STATUS)
    }

    /// The Go type of the message, such as `core/v1.ConfigMap`.
    pub fn name(self) -> &'static str {
        self.message().name
    }

    /// The message of field `number` of this message, if it holds one: a list type's items
    /// (field 2) or its `ListMeta` (field 1); meta.k8s.io/v1beta1's `PartialObjectMetadataList`
    /// alone numbers them the other way round (items 1, `ListMeta` 2).
    ///
    /// ```
    /// use kcache_protobuf::MessageType;
    ///
    /// let list = MessageType::for_kind("v1", "ConfigMapList").unwrap();
    /// assert_eq!(list.field_message(2), MessageType::for_kind("v1", "ConfigMap"));
    /// assert_eq!(list.field_message(1).unwrap().name(), "apis/meta/v1.ListMeta");
    /// ```
    pub fn field_message(self, number: u32) -> Option<Self> {
        let m = self.message();
        match m.fields[m.field(number)?].kind {
            Kind::Msg(i) => Some(Self(i)),
            _ => None,
        }
    }

    pub(crate) fn message(self) -> &'static Message {
        &MESSAGES[usize::from(self.0)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::flags;

    /// The generated table is what the decoder assumes: fields sorted and unique, indexes in
    /// range, kinds sorted (binary search), every message small enough for the decoder's
    /// 128-bit record of the repeated fields it has read.
    #[test]
    fn generated_table_is_well_formed() {
        for m in MESSAGES {
            assert!(m.fields.len() <= 128, "{} has {} fields", m.name, m.fields.len());
            for w in m.fields.windows(2) {
                assert!(w[0].number < w[1].number, "{}: fields out of order", m.name);
            }
            for f in m.fields {
                if let Kind::Msg(i) | Kind::Inline(i) = f.kind {
                    assert!(usize::from(i) < MESSAGES.len());
                }
                assert!(!(f.has(flags::MAP) && f.has(flags::REPEATED)));
            }
        }
        for w in KINDS.windows(2) {
            assert!((w[0].api_version, w[0].kind) < (w[1].api_version, w[1].kind));
        }
        assert_eq!(MessageType::status().name(), "apis/meta/v1.Status");
        assert_eq!(MESSAGES[usize::from(crate::generated::OBJECT_META)].name, "apis/meta/v1.ObjectMeta");
        assert_eq!(
            MessageType::for_kind("v1", "ConfigMap").map(MessageType::name),
            Some("core/v1.ConfigMap")
        );
        for (api_version, list) in [("meta.k8s.io/v1", "v1"), ("meta.k8s.io/v1beta1", "v1beta1")] {
            let partial = MessageType::for_kind(api_version, "PartialObjectMetadata").unwrap();
            assert_eq!(partial.name(), "apis/meta/v1.PartialObjectMetadata");
            assert_eq!(partial.field_message(1).map(MessageType::name), Some("apis/meta/v1.ObjectMeta"));
            let ty = MessageType::for_kind(api_version, "PartialObjectMetadataList").unwrap();
            assert_eq!(ty.name(), format!("apis/meta/{list}.PartialObjectMetadataList"));
        }
    }
}
