//! [`Error`]: why bytes could not be decoded, described by position, field and class, never by
//! a value from the bytes (a Secret's data must not reach a log).

use std::fmt;

/// What was wrong with the bytes themselves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Wire {
    /// The message ends inside a field.
    Truncated,
    /// A varint longer than 10 bytes or above 64 bits.
    Varint,
    /// A field number of 0 or past the protobuf maximum.
    FieldNumber,
    /// A wire type that is not one of protobuf's, or not the one the field's type is written
    /// with.
    WireType,
    /// A string that is not UTF-8.
    Utf8,
    /// Messages nested deeper than [`MAX_DEPTH`](crate::MAX_DEPTH).
    Depth,
    /// Not Kubernetes' protobuf envelope (the `k8s\0` prefix, then a `runtime.Unknown`).
    Envelope,
}

impl Wire {
    fn describe(self) -> &'static str {
        match self {
            Wire::Truncated => "truncated",
            Wire::Varint => "malformed varint",
            Wire::FieldNumber => "invalid field number",
            Wire::WireType => "unexpected wire type",
            Wire::Utf8 => "invalid UTF-8 in a string",
            Wire::Depth => "nested too deeply",
            Wire::Envelope => "not a Kubernetes protobuf envelope",
        }
    }
}

/// Why a protobuf message could not be decoded.
///
/// Its message names a byte offset (within the innermost message being read), the message type
/// and field, and the class of the problem. It never quotes a value: serde's own messages, which
/// can (`invalid value: string "..."`), are reduced to their class.
///
/// # Examples
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache_protobuf::{DecodeOptions, MessageType, decode};
///
/// let cm = MessageType::for_kind("v1", "ConfigMap").unwrap();
/// // Field 1 (metadata) says 5 bytes follow, but the message ends.
/// let err = decode::<ConfigMap>(cm, &[0x0a, 0x05], DecodeOptions::default()).unwrap_err();
/// assert!(err.to_string().contains("truncated"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    repr: Repr,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Repr {
    Wire {
        class: Wire,
        offset: usize,
        at: Option<(&'static str, &'static str)>,
    },
    /// The value did not fit the Rust type (serde's classes).
    Data(&'static str),
    MissingField(&'static str),
}

impl Error {
    pub(crate) fn wire(class: Wire, offset: usize) -> Self {
        Self { repr: Repr::Wire { class, offset, at: None } }
    }

    /// Adds the message and field the problem is in, if not known yet.
    pub(crate) fn at(mut self, message: &'static str, field: &'static str) -> Self {
        if let Repr::Wire { at: at @ None, .. } = &mut self.repr {
            *at = Some((message, field));
        }
        self
    }

    /// The wire-level class, if the bytes themselves were malformed (else the value did not fit
    /// the type it is decoded into).
    pub fn wire_class(&self) -> Option<Wire> {
        match self.repr {
            Repr::Wire { class, .. } => Some(class),
            _ => None,
        }
    }

    pub(crate) fn data(class: &'static str) -> Self {
        Self { repr: Repr::Data(class) }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Wire { class, offset, at: Some((m, field)) } => {
                write!(f, "protobuf: {} at byte {offset} (field `{field}` of {m})", class.describe())
            }
            Repr::Wire { class, offset, at: None } => {
                write!(f, "protobuf: {} at byte {offset}", class.describe())
            }
            Repr::Data(class) => write!(f, "protobuf: a value does not fit its type ({class})"),
            Repr::MissingField(name) => write!(f, "protobuf: missing field `{name}`"),
        }
    }
}

impl std::error::Error for Error {}

impl serde::de::Error for Error {
    fn custom<T: fmt::Display>(_msg: T) -> Self {
        // The text may quote the value (a date that does not parse, say): dropped.
        Self::data("rejected by the type")
    }

    fn invalid_type(_unexp: serde::de::Unexpected<'_>, _exp: &dyn serde::de::Expected) -> Self {
        Self::data("invalid type")
    }

    fn invalid_value(_unexp: serde::de::Unexpected<'_>, _exp: &dyn serde::de::Expected) -> Self {
        Self::data("invalid value")
    }

    fn invalid_length(_len: usize, _exp: &dyn serde::de::Expected) -> Self {
        Self::data("invalid length")
    }

    fn unknown_variant(_variant: &str, _expected: &'static [&'static str]) -> Self {
        Self::data("unknown variant")
    }

    fn unknown_field(_field: &str, _expected: &'static [&'static str]) -> Self {
        Self::data("unknown field")
    }

    fn missing_field(field: &'static str) -> Self {
        Self { repr: Repr::MissingField(field) }
    }

    fn duplicate_field(_field: &'static str) -> Self {
        Self::data("duplicate field")
    }
}
