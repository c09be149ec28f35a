//! The parser: apiserver v0.36.3 `pkg/sharding/parser_test.go` (`TestParse`,
//! `TestParseRoundTrip`) rewritten in Rust, plus a table of kube-apiserver's exact answers.

use kcache_shard_selector::{ExprKind, HexArgument, ShardKey, ShardRange, ShardSelector, ShardSelectorError};

/// Inputs and what apiserver v0.36.3's `sharding.Parse` answered for each (the canonical
/// `String()` of the selector, or the error message), recorded by running it. The first 28 rows
/// are `TestParse`'s cases in its order; the rest cover each error class and CEL forms
/// (parentheses, double quotes, raw/triple-quoted/escaped strings, member calls, comments).
/// Rows whose Go answer is a cel-go `Syntax error: ...` are only checked for that prefix (see
/// `ShardSelectorError::Syntax`).
const KUBE_APISERVER_ANSWERS: &[(&str, Result<&str, &str>)] = &[
    (r#""#, Err(r#"empty shard selector is not allowed; omit the parameter for unfiltered lists"#)),
    (r#"   "#, Err(r#"empty shard selector is not allowed; omit the parameter for unfiltered lists"#)),
    (
        r#"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"#,
        Ok(r#"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"#),
    ),
    (
        r#"shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')"#,
        Ok(r#"shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')"#),
    ),
    (
        r#"shardRange(object.metadata.namespace, '0x00000000000000aa', '0x00000000000000ff')"#,
        Ok(r#"shardRange(object.metadata.namespace, '0x00000000000000aa', '0x00000000000000ff')"#),
    ),
    (
        r#"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')"#,
        Ok(
            r#"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')"#,
        ),
    ),
    (
        r#"shardRange(object.metadata.uid,'0x0000000000000000','0x8000000000000000')"#,
        Ok(r#"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"#),
    ),
    (
        r#"  shardRange( object.metadata.uid ,  '0x0000000000000000' ,  '0x8000000000000000' )  "#,
        Ok(r#"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"#),
    ),
    (
        r#"shardRange(object.metadata.uid, "0x0000000000000000", "0x8000000000000000")"#,
        Ok(r#"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"#),
    ),
    (
        r#"(shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || (shardRange(object.metadata.uid, '0x9000000000000000', '0xa000000000000000')))"#,
        Ok(
            r#"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || shardRange(object.metadata.uid, '0x9000000000000000', '0xa000000000000000')"#,
        ),
    ),
    (
        r#"shardRange(object.metadata.uid, '0000000000000000', '0x8000000000000000')"#,
        Err(r#"hexStart must have '0x' prefix, got "0000000000000000""#),
    ),
    (
        r#"shardRange(object.metadata.uid, '0x0000000000000000', '8000000000000000')"#,
        Err(r#"hexEnd must have '0x' prefix, got "8000000000000000""#),
    ),
    (
        r#"shardRange(object.metadata.uid, '0x', '0x8000000000000000')"#,
        Err(r#"hexStart: hex value is required after '0x'"#),
    ),
    (
        r#"shardRange(object.metadata.name, '0x00', '0x80')"#,
        Err(
            r#"unsupported field path "object.metadata.name"; supported: object.metadata.uid, object.metadata.namespace"#,
        ),
    ),
    (
        r#"shardRange(object.metadata.labels, '0x00', '0x80')"#,
        Err(
            r#"unsupported field path "object.metadata.labels"; supported: object.metadata.uid, object.metadata.namespace"#,
        ),
    ),
    (
        r#"invalidFunc(object.metadata.uid, '0x00', '0x80')"#,
        Err(r#"unsupported function "invalidFunc"; only shardRange() and || are allowed"#),
    ),
    (
        r#"shardRange(object.metadata.uid, '0x000000000000000000', '0x80')"#,
        Err(r#"hexStart: hex value too long (18 chars, max 17): "000000000000000000""#),
    ),
    (
        r#"shardRange(object.metadata.uid, '0x0g', '0x80')"#,
        Err(r#"hexStart: invalid hex character "g" in "0x0g""#),
    ),
    (
        r#"shardRange(object.metadata.uid, '0x0', '0x8') && shardRange(object.metadata.uid, '0x8', '0xf')"#,
        Err(r#"unsupported function "_&&_"; only shardRange() and || are allowed"#),
    ),
    (r#"shardRange(object.metadata.uid, 0, 8)"#, Err(r#"hexStart must be a string literal, got int64"#)),
    (
        r#"object.metadata.uid > '0x0'"#,
        Err(r#"unsupported function "_>_"; only shardRange() and || are allowed"#),
    ),
    (r#"shardRange(object.metadata.uid, '0x0')"#, Err(r#"shardRange() requires exactly 3 arguments, got 2"#)),
    (
        r#"shardRange(object.metadata.uid, hex(0), '0x8')"#,
        Err(r#"hexStart must be a string literal (e.g. '0xff'), got expression kind 1"#),
    ),
    (
        r#"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')"#,
        Err(
            r#"all shard ranges must use the same field, got "object.metadata.uid" and "object.metadata.namespace""#,
        ),
    ),
    (
        r#"shardRange(object.metadata.uid, '0x0', '0x8000000000000000')"#,
        Err(
            r#"hexStart must be a 0x-prefixed 16-digit hex value, got "0x0" (did you mean "0x0000000000000000"?)"#,
        ),
    ),
    (
        r#"shardRange(object.metadata.uid, '0x0000000000000000', '0xff')"#,
        Err(
            r#"hexEnd must be a 0x-prefixed 16-digit hex value, got "0xff" (did you mean "0x00000000000000ff"?)"#,
        ),
    ),
    (
        r#"shardRange(object.metadata.uid, '0x8000000000000000', '0x8000000000000000')"#,
        Err(r#"shard range start 0x8000000000000000 must be less than end 0x8000000000000000"#),
    ),
    (
        r#"shardRange(object.metadata.uid, '0xffffffffffffffff', '0x0000000000000000')"#,
        Err(r#"shard range start 0xffffffffffffffff must be less than end 0x0000000000000000"#),
    ),
    (r#"bogus(x)"#, Err(r#"unsupported function "bogus"; only shardRange() and || are allowed"#)),
    (
        r#"'0x0000000000000000'"#,
        Err(r#"unexpected expression kind 5; expected shardRange() call or || operator"#),
    ),
    (r#"object"#, Err(r#"unexpected expression kind 3; expected shardRange() call or || operator"#)),
    (
        r#"object.metadata.uid"#,
        Err(r#"unexpected expression kind 7; expected shardRange() call or || operator"#),
    ),
    (
        r#"shardRange('object.metadata.uid', '0x0000000000000000', '0x8000000000000000')"#,
        Err(
            r#"shardRange() first argument: expected field path (e.g. object.metadata.uid), got expression kind 5"#,
        ),
    ),
    (
        r#"shardRange(object.metadata.uid, 1u, '0x8000000000000000')"#,
        Err(r#"hexStart must be a string literal, got uint64"#),
    ),
    (
        r#"shardRange(object.metadata.uid, 1.5, '0x8000000000000000')"#,
        Err(r#"hexStart must be a string literal, got float64"#),
    ),
    (
        r#"shardRange(object.metadata.uid, true, '0x8000000000000000')"#,
        Err(r#"hexStart must be a string literal, got bool"#),
    ),
    (
        r#"shardRange(object.metadata.uid, null, '0x8000000000000000')"#,
        Err(r#"hexStart must be a string literal, got structpb.NullValue"#),
    ),
    (
        r#"shardRange(object.metadata.uid, b'0x0000000000000000', '0x8000000000000000')"#,
        Err(r#"hexStart must be a string literal, got []uint8"#),
    ),
    (
        r#"shardRange(object.metadata.uid, [1], '0x8000000000000000')"#,
        Err(r#"hexStart must be a string literal (e.g. '0xff'), got expression kind 4"#),
    ),
    (
        r#"shardRange(object.metadata.uid, {'a': 1}, '0x8000000000000000')"#,
        Err(r#"hexStart must be a string literal (e.g. '0xff'), got expression kind 6"#),
    ),
    (
        r#"shardRange(object.metadata.uid, object.x, '0x8000000000000000')"#,
        Err(r#"hexStart must be a string literal (e.g. '0xff'), got expression kind 7"#),
    ),
    (
        r#"shardRange(object.metadata.uid, object, '0x8000000000000000')"#,
        Err(r#"hexStart must be a string literal (e.g. '0xff'), got expression kind 3"#),
    ),
    (
        r#"shardRange(object.metadata.uid, -1, '0x8000000000000000')"#,
        Err(r#"hexStart must be a string literal, got int64"#),
    ),
    (
        r#"shardRange(object.metadata.uid, '0X0000000000000000', '0x8000000000000000')"#,
        Err(r#"hexStart must have '0x' prefix, got "0X0000000000000000""#),
    ),
    (
        r#"shardRange(object.metadata.uid, '0x000000000000000A', '0x8000000000000000')"#,
        Err(r#"hexStart: invalid hex character "A" in "0x000000000000000A""#),
    ),
    (
        r#"shardRange(object.metadata.uid, '0x0000000000000000', '0x20000000000000000')"#,
        Err(r#"hexEnd: 17-digit hex value must be '0x10000000000000000' (2^64), got "0x20000000000000000""#),
    ),
    (
        r#"shardRange(object.metadata.uid, '0xé', '0x8000000000000000')"#,
        Err(r#"hexStart: invalid hex character "é" in "0xé""#),
    ),
    (
        r#"shardRange(object.metadata.uid, '0x"', '0x8000000000000000')"#,
        Err(r#"hexStart: invalid hex character "\"" in "0x\"""#),
    ),
    (
        r#"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000', '0x9')"#,
        Err(r#"shardRange() requires exactly 3 arguments, got 4"#),
    ),
    (r#"shardRange()"#, Err(r#"shardRange() requires exactly 3 arguments, got 0"#)),
    (
        r#"shardRange(1, '0x0000000000000000', '0x8000000000000000')"#,
        Err(
            r#"shardRange() first argument: expected field path (e.g. object.metadata.uid), got expression kind 5"#,
        ),
    ),
    (
        r#"shardRange(f(x), '0x0000000000000000', '0x8000000000000000')"#,
        Err(
            r#"shardRange() first argument: expected field path (e.g. object.metadata.uid), got expression kind 1"#,
        ),
    ),
    (
        r#"shardRange(a[0], '0x0000000000000000', '0x8000000000000000')"#,
        Err(
            r#"shardRange() first argument: expected field path (e.g. object.metadata.uid), got expression kind 1"#,
        ),
    ),
    (
        r#"!shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"#,
        Err(r#"unsupported function "!_"; only shardRange() and || are allowed"#),
    ),
    (
        r#"true ? shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') : shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"#,
        Err(r#"unsupported function "_?_:_"; only shardRange() and || are allowed"#),
    ),
    (r#"x in y"#, Err(r#"unsupported function "@in"; only shardRange() and || are allowed"#)),
    (r#"a[0]"#, Err(r#"unsupported function "_[_]"; only shardRange() and || are allowed"#)),
    (r#"-x"#, Err(r#"unsupported function "-_"; only shardRange() and || are allowed"#)),
    (r#"x + y"#, Err(r#"unsupported function "_+_"; only shardRange() and || are allowed"#)),
    (r#"[1]"#, Err(r#"unexpected expression kind 4; expected shardRange() call or || operator"#)),
    (r#"{'a': 1}"#, Err(r#"unexpected expression kind 6; expected shardRange() call or || operator"#)),
    (r#"a.b{c: 1}"#, Err(r#"unexpected expression kind 8; expected shardRange() call or || operator"#)),
    (
        r#"x.shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"#,
        Ok(r#"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"#),
    ),
    (
        r#"shardRange(object.metadata.uid, r'0x0000000000000000', '0x8000000000000000')"#,
        Ok(r#"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"#),
    ),
    (
        r#"shardRange(object.metadata.uid, '\x30x0000000000000000', '0x8000000000000000')"#,
        Ok(r#"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"#),
    ),
    (
        r#"shardRange(object.metadata.uid, '''0x0000000000000000''', '0x8000000000000000')"#,
        Ok(r#"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"#),
    ),
    (
        r#"shardRange(.object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"#,
        Err(
            r#"unsupported field path ".object.metadata.uid"; supported: object.metadata.uid, object.metadata.namespace"#,
        ),
    ),
    (
        r#"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') // comment"#,
        Ok(r#"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"#),
    ),
    (
        r#"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || shardRange(object.metadata.uid, '0x', '0x8000000000000000') || shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')"#,
        Err(r#"hexStart: hex value is required after '0x'"#),
    ),
    (
        r#"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || bogus(x)"#,
        Err(r#"unsupported function "bogus"; only shardRange() and || are allowed"#),
    ),
    (
        r#"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') ||"#,
        Err(
            r#"CEL parse error: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}"#,
        ),
    ),
    (
        r#"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000'"#,
        Err(r#"CEL parse error: Syntax error: missing ')' at '<EOF>'"#),
    ),
    (
        r#"shardRange(object.metadata.uid '0x0000000000000000', '0x8000000000000000')"#,
        Err(r#"CEL parse error: Syntax error: mismatched input ''0x0000000000000000'' expecting ')'"#),
    ),
    (
        r#"shardRange(object.metadata.uid, '0x0000000000000000, '0x8000000000000000')"#,
        Err(r#"CEL parse error: Syntax error: token recognition error at: '')'"#),
    ),
    (
        r#"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') | shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"#,
        Err(r#"CEL parse error: Syntax error: token recognition error at: '| '"#),
    ),
    (r#"if(x)"#, Err(r#"CEL parse error: reserved identifier: if"#)),
    (
        r#"shardRange(object.metadata.uid, '0x\t', '0x8000000000000000')"#,
        Err(r#"hexStart: invalid hex character "\t" in "0x\t""#),
    ),
];

/// apiserver `TestParse` and beyond: every row of [`KUBE_APISERVER_ANSWERS`] gets the server's
/// answer, byte for byte.
#[test]
fn parse_answers_as_kube_apiserver() {
    for (input, want) in KUBE_APISERVER_ANSWERS {
        let got = ShardSelector::parse(input).map(|s| s.to_string()).map_err(|e| (e.to_string(), e));
        match (want, &got) {
            (Ok(want), Ok(got)) => assert_eq!(got, want, "{input:?}"),
            (Err(want), Err((got, err))) if want.starts_with("CEL parse error: Syntax error: ") => {
                assert!(matches!(err, ShardSelectorError::Syntax { .. }), "{input:?}: {err:?}");
                assert!(got.starts_with("CEL parse error: Syntax error: "), "{input:?}: {got}");
            }
            (Err(want), Err((got, _))) => assert_eq!(got, want, "{input:?}"),
            _ => panic!("{input:?}: kube-apiserver answers {want:?}, we {got:?}"),
        }
    }
}

/// apiserver `TestParse`'s valid cases, checked field by field (its `wantReq`).
#[test]
fn parse_valid_requirements() {
    let h = |s: &str| u128::from_str_radix(s, 16).unwrap();
    let range = |a: &str, b: &str| ShardRange::new(h(a) as u64, h(b)).unwrap();
    let cases = [
        (
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
            ShardKey::Uid,
            vec![range("0", "8000000000000000")],
        ),
        (
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')",
            ShardKey::Uid,
            vec![ShardRange::full()],
        ),
        (
            "shardRange(object.metadata.namespace, '0x00000000000000aa', '0x00000000000000ff')",
            ShardKey::Namespace,
            vec![range("aa", "ff")],
        ),
        (
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x0000000000000005') || shardRange(object.metadata.uid, '0x0000000000000005', '0x000000000000000a') || shardRange(object.metadata.uid, '0x000000000000000a', '0x000000000000000f')",
            ShardKey::Uid,
            vec![range("0", "5"), range("5", "a"), range("a", "f")],
        ),
        (
            "  shardRange( object.metadata.uid ,  '0x0000000000000000' ,  '0x8000000000000000' )  ",
            ShardKey::Uid,
            vec![range("0", "8000000000000000")],
        ),
    ];
    for (input, key, ranges) in cases {
        let s = ShardSelector::parse(input).unwrap();
        assert_eq!((s.key(), s.ranges()), (key, &ranges[..]), "{input}");
    }
}

/// apiserver `TestParseRoundTrip`: `Parse(s).String() == s` for canonical inputs, and stable.
#[test]
fn parse_round_trip() {
    for input in [
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
        "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')",
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')",
        "shardRange(object.metadata.namespace, '0x00000000000000aa', '0x00000000000000ff')",
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')",
    ] {
        let once = ShardSelector::parse(input).unwrap();
        assert_eq!(once.to_string(), input);
        assert_eq!(ShardSelector::parse(&once.to_string()).unwrap(), once);
        assert_eq!(input.parse::<ShardSelector>().unwrap(), once, "FromStr");
    }
}

/// The errors are matchable by variant, with the parts a caller needs (not only a message).
#[test]
fn errors_are_typed() {
    let err = |s: &str| ShardSelector::parse(s).unwrap_err();
    assert_eq!(err(""), ShardSelectorError::Empty);
    assert_eq!(
        err("shardRange(object.metadata.uid, '0x0', '0x8000000000000000')"),
        ShardSelectorError::NotSixteenDigits {
            argument: HexArgument::Start,
            value: "0x0".into(),
            suggestion: "0x0000000000000000".into()
        }
    );
    assert_eq!(
        err("shardRange(object.metadata.uid, hex(0), '0x8')"),
        ShardSelectorError::NotALiteral { argument: HexArgument::Start, kind: ExprKind::Call }
    );
    assert_eq!(
        err("shardRange(object.metadata.uid, '0x0000000000000000', 1)"),
        ShardSelectorError::NotAStringLiteral { argument: HexArgument::End, found: "int64" }
    );
    assert_eq!(
        err(
            "shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000') || shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')"
        ),
        ShardSelectorError::MixedKeys { first: ShardKey::Namespace, other: ShardKey::Uid }
    );
    assert!(matches!(err("shardRange(object.metadata.uid"), ShardSelectorError::Syntax { offset: 30, .. }));
}

/// A hostile selector nested deeper than cel-go allows is a syntax error, not a stack overflow
/// (kube-apiserver parses untrusted input, and so does kcache-testserver).
#[test]
fn deep_nesting_is_rejected() {
    let deep = format!("{}x{}", "(".repeat(100_000), ")".repeat(100_000));
    assert!(matches!(ShardSelector::parse(&deep), Err(ShardSelectorError::Syntax { .. })));
    let negations = format!("{}x", "!".repeat(100_000));
    assert!(matches!(ShardSelector::parse(&negations), Err(ShardSelectorError::UnexpectedExpression { .. })));
}

/// Long chains stay within the stack: `||` chains are balanced (as cel-go balances them), select
/// chains are bounded as cel-go bounds them.
#[test]
fn long_chains() {
    let term = "shardRange(object.metadata.uid, '0x0000000000000000', '0x0000000000000001')";
    let many = vec![term; 20_000].join(" || ");
    assert_eq!(ShardSelector::parse(&many).unwrap().ranges().len(), 20_000);
    let plus = vec!["x"; 100_000].join(" + ");
    assert_eq!(
        ShardSelector::parse(&plus).unwrap_err().to_string(),
        r#"unsupported function "_+_"; only shardRange() and || are allowed"#
    );
    // cel-go: `max recursion depth exceeded` and `expression recursion limit exceeded: 250`;
    // ours are syntax errors of our own, at a lower depth (see parse.rs's MAX_DEPTH).
    let selects = vec!["x"; 100_000].join(".");
    assert!(matches!(ShardSelector::parse(&selects), Err(ShardSelectorError::Syntax { .. })));
    let parens = format!("{}x{}", "(".repeat(300), ")".repeat(300));
    assert!(matches!(ShardSelector::parse(&parens), Err(ShardSelectorError::Syntax { .. })));
    let wrapped = format!("{}{term}{}", "(".repeat(90), ")".repeat(90));
    assert!(ShardSelector::parse(&wrapped).is_ok());
}
