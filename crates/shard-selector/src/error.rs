//! The crate's one error enum. Each message is the one kube-apiserver's shard selector parser
//! (apiserver v0.36.3 `pkg/sharding/parser.go`) returns, so a server built on this crate answers
//! `invalid shard selector: {error}` byte for byte as kube-apiserver does. The exception is
//! [`ShardSelectorError::Syntax`]: cel-go's ANTLR messages are not reproduced (see its doc).

use std::fmt;

/// Why a shard selector was rejected.
///
/// # Examples
///
/// ```
/// use kcache_shard_selector::{ShardSelector, ShardSelectorError};
///
/// let err = ShardSelector::parse("bogus(x)").unwrap_err();
/// assert!(matches!(err, ShardSelectorError::UnsupportedFunction { ref name } if name == "bogus"));
/// assert_eq!(err.to_string(), r#"unsupported function "bogus"; only shardRange() and || are allowed"#);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ShardSelectorError {
    /// The selector is empty (or only whitespace), or a selector was built from no ranges. An
    /// unfiltered request omits the parameter instead.
    #[error("empty shard selector is not allowed; omit the parameter for unfiltered lists")]
    Empty,
    /// The text is not a CEL expression. The server's message is cel-go's first parse error,
    /// `CEL parse error: Syntax error: mismatched input ...` from its ANTLR grammar, which is not
    /// reproduced: ours starts the same way (`CEL parse error: Syntax error: `) and says what is
    /// wrong in our own words. A reserved word used as an identifier has cel-go's exact message,
    /// `CEL parse error: reserved identifier: if`.
    #[error("CEL parse error: {message}")]
    Syntax {
        /// What is wrong, after `CEL parse error: ` (`Syntax error: ...` or
        /// `reserved identifier: ...`).
        message: String,
        /// Byte offset in the (trimmed) selector where the problem was found.
        offset: usize,
    },
    /// A function or operator other than `shardRange()` and `||`; operators are named as CEL
    /// names them (`_&&_`, `_>_`, `!_`, `@in`, `_[_]`, `_?_:_`).
    #[error("unsupported function {}; only shardRange() and || are allowed", go_quote(name))]
    UnsupportedFunction {
        /// The function's name.
        name: String,
    },
    /// The expression (or one side of `||`) is not a call, e.g. a bare literal or identifier.
    #[error("unexpected expression kind {kind}; expected shardRange() call or || operator")]
    UnexpectedExpression {
        /// What it is instead.
        kind: ExprKind,
    },
    /// `shardRange()` with other than three arguments.
    #[error("shardRange() requires exactly 3 arguments, got {got}")]
    ArgumentCount {
        /// How many it had.
        got: usize,
    },
    /// `shardRange()`'s first argument is not a field path like `object.metadata.uid`.
    #[error(
        "shardRange() first argument: expected field path (e.g. object.metadata.uid), got expression kind {kind}"
    )]
    NotAFieldPath {
        /// What it is instead.
        kind: ExprKind,
    },
    /// A field path other than `object.metadata.uid` and `object.metadata.namespace`.
    #[error(
        "unsupported field path {}; supported: object.metadata.uid, object.metadata.namespace",
        go_quote(path)
    )]
    UnsupportedFieldPath {
        /// The path as written (dot-joined).
        path: String,
    },
    /// A bound is not a literal at all (e.g. a call `hex(0)`).
    #[error("{argument} must be a string literal (e.g. '0xff'), got expression kind {kind}")]
    NotALiteral {
        /// Which bound.
        argument: HexArgument,
        /// What it is instead.
        kind: ExprKind,
    },
    /// A bound is a literal of another type (e.g. `0`, `true`, `b'..'`).
    #[error("{argument} must be a string literal, got {found}")]
    NotAStringLiteral {
        /// Which bound.
        argument: HexArgument,
        /// The literal's Go type as the server prints it: `int64`, `uint64`, `float64`, `bool`,
        /// `[]uint8` or `structpb.NullValue`.
        found: &'static str,
    },
    /// A bound without the `0x` prefix (`0X` is not accepted either).
    #[error("{argument} must have '0x' prefix, got {}", go_quote(value))]
    MissingHexPrefix {
        /// Which bound.
        argument: HexArgument,
        /// The bound as written.
        value: String,
    },
    /// A bound that is just `0x`.
    #[error("{argument}: hex value is required after '0x'")]
    MissingHexDigits {
        /// Which bound.
        argument: HexArgument,
    },
    /// More than 17 characters after `0x` (counted in bytes, as Go's `len`).
    #[error("{argument}: hex value too long ({len} chars, max 17): {}", go_quote(digits))]
    HexTooLong {
        /// Which bound.
        argument: HexArgument,
        /// The length in bytes of what follows `0x`.
        len: usize,
        /// What follows `0x`.
        digits: String,
    },
    /// A character other than `0-9a-f` after `0x` (upper case is rejected).
    #[error("{argument}: invalid hex character {} in {}", go_quote(&character.to_string()), go_quote(value))]
    InvalidHexCharacter {
        /// Which bound.
        argument: HexArgument,
        /// The first offending character.
        character: char,
        /// The bound as written.
        value: String,
    },
    /// 17 digits that are not 2^64.
    #[error("{argument}: 17-digit hex value must be '0x10000000000000000' (2^64), got {}", go_quote(value))]
    SeventeenDigitsNotHashSpaceEnd {
        /// Which bound.
        argument: HexArgument,
        /// The bound as written.
        value: String,
    },
    /// Fewer than 16 digits: the wire form is always zero-padded.
    #[error(
        "{argument} must be a 0x-prefixed 16-digit hex value, got {} (did you mean {}?)",
        go_quote(value),
        go_quote(suggestion)
    )]
    NotSixteenDigits {
        /// Which bound.
        argument: HexArgument,
        /// The bound as written.
        value: String,
        /// The same value zero-padded to 16 digits.
        suggestion: String,
    },
    /// A range whose start is not below its end.
    #[error("shard range start {start} must be less than end {end}")]
    StartNotBeforeEnd {
        /// The start, as written (`0x` and 16 hex digits).
        start: String,
        /// The end, as written.
        end: String,
    },
    /// Terms on different fields in one selector (or a union of selectors on different fields).
    #[error("all shard ranges must use the same field, got {} and {}", go_quote(first.path()), go_quote(other.path()))]
    MixedKeys {
        /// The first term's field.
        first: crate::ShardKey,
        /// The first field that differs from it.
        other: crate::ShardKey,
    },
    /// [`ShardRange::new`](crate::ShardRange::new) with an end beyond 2^64 (the parser cannot
    /// produce one: it reports [`HexTooLong`](Self::HexTooLong) or
    /// [`SeventeenDigitsNotHashSpaceEnd`](Self::SeventeenDigitsNotHashSpaceEnd) instead).
    #[error("shard range end {end:#x} is beyond the hash space end 0x10000000000000000")]
    EndOutOfRange {
        /// The end given.
        end: u128,
    },
}

/// Which bound of `shardRange(path, hexStart, hexEnd)` an error is about; displays as the
/// server's names, `hexStart` and `hexEnd`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HexArgument {
    /// The second argument, the inclusive start.
    Start,
    /// The third argument, the exclusive end.
    End,
}

impl fmt::Display for HexArgument {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HexArgument::Start => "hexStart",
            HexArgument::End => "hexEnd",
        })
    }
}

/// The kind of a CEL expression node, for errors about an argument of the wrong shape.
///
/// Displays as a number, as the server prints cel-go's `ast.ExprKind` with `%v` (the type has no
/// `String` method): `1` for a call, `3` an identifier, `4` a list, `5` a literal, `6` a map,
/// `7` a field selection, `8` a struct literal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ExprKind {
    /// A function call or operator (`f(x)`, `a && b`).
    Call = 1,
    /// A comprehension (only produced by macros, which the server disables).
    Comprehension = 2,
    /// An identifier (`object`).
    Ident = 3,
    /// A list literal (`[1, 2]`).
    List = 4,
    /// A scalar literal (`'0x..'`, `1`, `true`).
    Literal = 5,
    /// A map literal (`{'a': 1}`).
    Map = 6,
    /// A field selection (`object.metadata`).
    Select = 7,
    /// A message literal (`T{f: 1}`).
    Struct = 8,
}

impl fmt::Display for ExprKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", *self as u8)
    }
}

/// `s` quoted as Go's `%q` (`strconv.Quote`) quotes it: double quotes, backslash escapes for
/// `"`, `\` and control characters, printable Unicode kept. Go's `unicode.IsPrint` is
/// approximated: control characters and whitespace other than U+0020 are escaped.
pub(crate) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x0b' => out.push_str("\\v"),
            ' ' => out.push(' '),
            c if (c as u32) < 0x20 || c == '\x7f' => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() || c.is_whitespace() || c == '\u{feff}' => {
                if (c as u32) < 0x10000 {
                    out.push_str(&format!("\\u{:04x}", c as u32));
                } else {
                    out.push_str(&format!("\\U{:08x}", c as u32));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
