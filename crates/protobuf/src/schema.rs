//! The shape of the generated schema (`generated.rs`): messages, their fields, and the kinds
//! decoded from protobuf.

/// What a field holds, as far as decoding it needs to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
// Some variants are not in today's table (no built-in type has an unsigned or floating-point
// field or a metav1.Duration), but the generator writes them when one appears.
#[allow(dead_code)]
pub(crate) enum Kind {
    /// `string`.
    String,
    /// `bool` (varint).
    Bool,
    /// `int32` (varint, sign-extended to 64 bits when negative).
    Int32,
    /// `int64` (varint).
    Int64,
    /// `uint32` (varint).
    Uint32,
    /// `uint64` (varint).
    Uint64,
    /// `double` (fixed64).
    Double,
    /// `bytes`: base64 in JSON.
    Bytes,
    /// A nested message, by index into `MESSAGES`.
    Msg(u16),
    /// A nested message whose fields JSON puts in the parent (`json:",inline"`).
    Inline(u16),
    /// A named `[]string` with a message of its own (`message ExtraValue { repeated string items = 1; }`):
    /// a JSON array of strings.
    StringList,
    /// metav1.Time: `{int64 seconds = 1; int32 nanos = 2}`, RFC 3339 to the second in JSON.
    Time,
    /// metav1.MicroTime: as Time, RFC 3339 with microseconds in JSON.
    MicroTime,
    /// metav1.Duration: `{int64 duration = 1}` in nanoseconds, Go's `1h2m3s` form in JSON.
    Duration,
    /// intstr.IntOrString: `{int64 type = 1; int32 intVal = 2; string strVal = 3}`.
    IntOrString,
    /// resource.Quantity: `{string string = 1}`.
    Quantity,
    /// runtime.RawExtension: `{bytes raw = 1}` holding JSON.
    RawExtension,
    /// metav1.FieldsV1: `{bytes Raw = 1}` holding JSON.
    FieldsV1,
}

/// Field flags.
pub(crate) mod flags {
    /// JSON omits the field when it holds its zero value (`omitempty`).
    pub(crate) const OMIT_EMPTY: u8 = 1;
    /// A pointer in Go: absent unless set, written even when zero.
    pub(crate) const NULLABLE: u8 = 2;
    /// A repeated field (a JSON array).
    pub(crate) const REPEATED: u8 = 4;
    /// A map (`map<string, V>`: repeated entries of `key = 1`, `value = 2`; a JSON object).
    pub(crate) const MAP: u8 = 8;
}

/// One field of a message.
#[derive(Debug)]
pub(crate) struct Field {
    /// The protobuf field number.
    pub(crate) number: u32,
    /// The JSON member name.
    pub(crate) json: &'static str,
    /// What it holds (a map's value, a repeated field's element).
    pub(crate) kind: Kind,
    /// [`flags`].
    pub(crate) flags: u8,
}

impl Field {
    pub(crate) fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// A generated field (the generated table's shorthand).
pub(crate) const fn f(number: u32, json: &'static str, kind: Kind, flags: u8) -> Field {
    Field { number, json, kind, flags }
}

/// One message: its Go type (for error messages) and its fields, sorted by number.
#[derive(Debug)]
pub(crate) struct Message {
    /// The Go type, without `k8s.io/api/` or `k8s.io/apimachinery/pkg/` (`core/v1.Pod`,
    /// `apis/meta/v1.Status`).
    pub(crate) name: &'static str,
    /// Sorted by `number`.
    pub(crate) fields: &'static [Field],
}

impl Message {
    /// The index in `fields` of field `number`.
    pub(crate) fn field(&self, number: u32) -> Option<usize> {
        // Most messages have a few fields numbered from 1 in order: try the direct slot first.
        let guess = (number as usize).wrapping_sub(1);
        if self.fields.get(guess).is_some_and(|f| f.number == number) {
            return Some(guess);
        }
        self.fields.binary_search_by_key(&number, |f| f.number).ok()
    }
}

/// A kind decoded from protobuf and its message.
#[derive(Debug)]
pub(crate) struct KindEntry {
    pub(crate) api_version: &'static str,
    pub(crate) kind: &'static str,
    pub(crate) message: u16,
}
