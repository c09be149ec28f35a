//! The shard selector parser: the CEL subset kube-apiserver accepts, by hand.
//!
//! kube-apiserver (apiserver v0.36.3 `pkg/sharding/parser.go`) parses the selector as a full CEL
//! expression with cel-go (no macros), then walks the tree: the root must be a `shardRange()`
//! call or a `||` of such roots; each call has a field path and two string literals. To give the
//! same answer (and the same error message) for any input, this module parses the whole CEL
//! expression grammar too (ternary, `||`, `&&`, relations, arithmetic, unary operators, member
//! calls, indexing, list/map/message literals, all literal forms including raw, triple-quoted and
//! bytes strings with their escapes, parentheses), then walks the tree as parser.go does. Only the
//! messages for text that is not CEL at all differ (see [`ShardSelectorError::Syntax`]).

use crate::error::{ExprKind, HexArgument, ShardSelectorError};
use crate::{ShardKey, ShardRange, ShardSelector};

/// Deepest nesting of parentheses, arguments and literals accepted, and the longest chain of
/// selections. cel-go's limit is 250 (`maxRecursionDepth`); ours is lower because a debug build
/// of this recursive-descent parser needs about 2.5 KiB of stack per level and a server parses
/// untrusted selectors on 2 MiB threads. No real selector nests more than a few levels.
const MAX_DEPTH: usize = 100;

/// Parses `input` as kube-apiserver does (see [`ShardSelector::parse`]).
pub(crate) fn parse(input: &str) -> Result<ShardSelector, ShardSelectorError> {
    let text = input.trim();
    if text.is_empty() {
        return Err(ShardSelectorError::Empty);
    }
    let tokens = Lexer { text, pos: 0 }.tokens()?;
    let mut parser = Parser { tokens, pos: 0, depth: 0, end: text.len() };
    let expr = parser.expr()?;
    if let Some((_, offset)) = parser.tokens.get(parser.pos) {
        return Err(syntax(
            format!("unexpected {} after the expression", parser.describe(parser.pos)),
            *offset,
        ));
    }
    let mut terms = Vec::new();
    walk(&expr, &mut terms)?;
    // As parser.go: the field check comes after the walk, so an error inside a later term wins.
    let key = terms[0].0;
    if let Some((other, _)) = terms.iter().find(|(k, _)| *k != key) {
        return Err(ShardSelectorError::MixedKeys { first: key, other: *other });
    }
    ShardSelector::new(key, terms.into_iter().map(|(_, r)| r).collect())
}

fn syntax(message: impl std::fmt::Display, offset: usize) -> ShardSelectorError {
    ShardSelectorError::Syntax { message: format!("Syntax error: {message}"), offset }
}

/// The binary operator a token is, with its precedence (higher binds tighter) and CEL name.
fn binary_operator(token: &Token) -> Option<(u8, &'static str)> {
    let Token::Punct(p) = token else { return None };
    Some(match *p {
        "||" => (0, "_||_"),
        "&&" => (1, "_&&_"),
        "==" => (2, "_==_"),
        "!=" => (2, "_!=_"),
        "<" => (2, "_<_"),
        "<=" => (2, "_<=_"),
        ">" => (2, "_>_"),
        ">=" => (2, "_>=_"),
        "in" => (2, "@in"),
        "+" => (3, "_+_"),
        "-" => (3, "_-_"),
        "*" => (4, "_*_"),
        "/" => (4, "_/_"),
        "%" => (4, "_%_"),
        _ => return None,
    })
}

/// `||` over `operands` (at least two) as a balanced tree, in order.
fn balance(mut operands: Vec<Expr>) -> Expr {
    if operands.len() == 1 {
        return operands.pop().expect("one operand");
    }
    let right = operands.split_off(operands.len() / 2);
    Expr::call("_||_", vec![balance(operands), balance(right)])
}

/// parser.go's `walkExpr`: a `shardRange()` call, or `||` of two walkable expressions.
fn walk(expr: &Expr, terms: &mut Vec<(ShardKey, ShardRange)>) -> Result<(), ShardSelectorError> {
    match expr {
        Expr::Call { function, args } if function == "_||_" => {
            walk(&args[0], terms)?;
            walk(&args[1], terms)
        }
        Expr::Call { function, args } if function == "shardRange" => {
            terms.push(shard_range_call(args)?);
            Ok(())
        }
        Expr::Call { function, .. } => {
            Err(ShardSelectorError::UnsupportedFunction { name: function.clone() })
        }
        other => Err(ShardSelectorError::UnexpectedExpression { kind: other.kind() }),
    }
}

/// parser.go's `parseShardRangeCall`.
fn shard_range_call(args: &[Expr]) -> Result<(ShardKey, ShardRange), ShardSelectorError> {
    if args.len() != 3 {
        return Err(ShardSelectorError::ArgumentCount { got: args.len() });
    }
    let path = field_path(&args[0]).ok_or(ShardSelectorError::NotAFieldPath { kind: args[0].kind() })?;
    let key = ShardKey::from_path(&path).ok_or(ShardSelectorError::UnsupportedFieldPath { path })?;
    let (start_text, start) = hex_literal(&args[1], HexArgument::Start)?;
    let (end_text, end) = hex_literal(&args[2], HexArgument::End)?;
    if start >= end {
        return Err(ShardSelectorError::StartNotBeforeEnd { start: start_text, end: end_text });
    }
    // Both bounds are validated: start < 2^64 since end <= 2^64.
    let range = ShardRange::new(start as u64, end)?;
    Ok((key, range))
}

/// parser.go's `extractFieldPath`: an identifier or a select chain, dot-joined.
fn field_path(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Ident(name) => Some(name.clone()),
        Expr::Select { operand, field } => Some(format!("{}.{field}", field_path(operand)?)),
        _ => None,
    }
}

/// parser.go's `extractHexLiteral`, in its order of checks; returns the text and its value.
fn hex_literal(expr: &Expr, argument: HexArgument) -> Result<(String, u128), ShardSelectorError> {
    let value = match expr {
        Expr::Literal(Literal::String(s)) => s,
        Expr::Literal(other) => {
            return Err(ShardSelectorError::NotAStringLiteral { argument, found: other.go_type() });
        }
        other => return Err(ShardSelectorError::NotALiteral { argument, kind: other.kind() }),
    };
    let Some(digits) = value.strip_prefix("0x") else {
        return Err(ShardSelectorError::MissingHexPrefix { argument, value: value.clone() });
    };
    if digits.is_empty() {
        return Err(ShardSelectorError::MissingHexDigits { argument });
    }
    // Go's len() counts bytes, and so does str::len.
    if digits.len() > 17 {
        return Err(ShardSelectorError::HexTooLong {
            argument,
            len: digits.len(),
            digits: digits.to_owned(),
        });
    }
    if let Some(character) = digits.chars().find(|c| !matches!(c, '0'..='9' | 'a'..='f')) {
        return Err(ShardSelectorError::InvalidHexCharacter { argument, character, value: value.clone() });
    }
    if digits.len() == 17 {
        if value != "0x10000000000000000" {
            return Err(ShardSelectorError::SeventeenDigitsNotHashSpaceEnd {
                argument,
                value: value.clone(),
            });
        }
    } else if digits.len() != 16 {
        let suggestion = format!("0x{digits:0>16}");
        return Err(ShardSelectorError::NotSixteenDigits { argument, value: value.clone(), suggestion });
    }
    let parsed = u128::from_str_radix(digits, 16).expect("16 or 17 checked lowercase hex digits");
    Ok((value.clone(), parsed))
}

/// A CEL expression tree, as much of cel-go's `ast.Expr` as the walk looks at.
#[derive(Debug)]
enum Expr {
    /// A function, operator (`_||_`, `_&&_`, `!_`, ...) or member call; the receiver of a member
    /// call is dropped: parser.go looks only at the function name and the arguments.
    Call {
        function: String,
        args: Vec<Expr>,
    },
    Ident(String),
    Select {
        operand: Box<Expr>,
        field: String,
    },
    Literal(Literal),
    List,
    Map,
    Struct,
}

impl Expr {
    fn kind(&self) -> ExprKind {
        match self {
            Expr::Call { .. } => ExprKind::Call,
            Expr::Ident(_) => ExprKind::Ident,
            Expr::Select { .. } => ExprKind::Select,
            Expr::Literal(_) => ExprKind::Literal,
            Expr::List => ExprKind::List,
            Expr::Map => ExprKind::Map,
            Expr::Struct => ExprKind::Struct,
        }
    }

    fn call(function: &str, args: Vec<Expr>) -> Expr {
        Expr::Call { function: function.to_owned(), args }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Literal {
    String(String),
    Bytes,
    Int,
    Uint,
    Double,
    Bool,
    Null,
}

impl Literal {
    /// The Go type of cel-go's `ref.Val.Value()` for this literal, as `%T` prints it.
    fn go_type(&self) -> &'static str {
        match self {
            Literal::String(_) => "string",
            Literal::Bytes => "[]uint8",
            Literal::Int => "int64",
            Literal::Uint => "uint64",
            Literal::Double => "float64",
            Literal::Bool => "bool",
            Literal::Null => "structpb.NullValue",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    Literal(Literal),
    /// An operator or punctuation, e.g. `||`, `(`, `.`.
    Punct(&'static str),
}

/// CEL's reserved words (the language definition's "reserved for future use" list); cel-go
/// rejects them as identifiers.
const RESERVED: [&str; 15] = [
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
];

/// Operators and punctuation, longest first so that `||` is not read as two `|`.
const PUNCTS: [&str; 25] = [
    "||", "&&", "==", "!=", "<=", ">=", "<", ">", "!", "+", "-", "*", "/", "%", "?", ":", ".", ",", "(", ")",
    "[", "]", "{", "}", "=",
];

struct Lexer<'a> {
    text: &'a str,
    pos: usize,
}

impl Lexer<'_> {
    fn tokens(mut self) -> Result<Vec<(Token, usize)>, ShardSelectorError> {
        let mut out = Vec::new();
        loop {
            self.skip_space();
            let start = self.pos;
            let rest = &self.text[self.pos..];
            let Some(c) = rest.chars().next() else { return Ok(out) };
            let token = if c.is_ascii_alphabetic() || c == '_' {
                let len = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
                let word = &rest[..len];
                self.pos += len;
                let next = self.text[self.pos..].chars().next();
                let prefix = word.to_ascii_lowercase();
                if matches!(next, Some('\'' | '"')) && matches!(prefix.as_str(), "r" | "b" | "rb" | "br") {
                    let raw = prefix.contains('r');
                    let s = self.string(raw)?;
                    Token::Literal(if prefix.contains('b') { Literal::Bytes } else { Literal::String(s) })
                } else {
                    match word {
                        "true" | "false" => Token::Literal(Literal::Bool),
                        "null" => Token::Literal(Literal::Null),
                        "in" => Token::Punct("in"),
                        w => Token::Ident(w.to_owned()),
                    }
                }
            } else if c.is_ascii_digit() || (c == '.' && rest[1..].starts_with(|c: char| c.is_ascii_digit()))
            {
                self.number()?
            } else if c == '\'' || c == '"' {
                Token::Literal(Literal::String(self.string(false)?))
            } else if let Some(p) = PUNCTS.iter().find(|p| rest.starts_with(**p)) {
                if *p == "=" {
                    return Err(syntax("'=' is not an operator (did you mean '=='?)", start));
                }
                self.pos += p.len();
                Token::Punct(p)
            } else {
                return Err(syntax(format!("unexpected character {c:?}"), start));
            };
            out.push((token, start));
        }
    }

    fn skip_space(&mut self) {
        loop {
            let rest = &self.text[self.pos..];
            let trimmed = rest.trim_start_matches([' ', '\t', '\n', '\r', '\x0c']);
            self.pos += rest.len() - trimmed.len();
            if trimmed.starts_with("//") {
                self.pos += trimmed.find('\n').unwrap_or(trimmed.len());
            } else {
                return;
            }
        }
    }

    /// An integer, unsigned or double literal; only its type matters to the walk, but its form
    /// is checked so that what cel-go rejects is rejected.
    fn number(&mut self) -> Result<Token, ShardSelectorError> {
        let start = self.pos;
        let rest = &self.text[self.pos..];
        let bytes = rest.as_bytes();
        let digits = |from: usize, hex: bool| {
            from + bytes[from..]
                .iter()
                .take_while(|b| if hex { b.is_ascii_hexdigit() } else { b.is_ascii_digit() })
                .count()
        };
        if rest.starts_with("0x") || rest.starts_with("0X") {
            let end = digits(2, true);
            if end == 2 {
                return Err(syntax("hex literal without digits", start));
            }
            let value = u64::from_str_radix(&rest[2..end], 16).ok();
            return self.integer_suffix(end, value, start);
        }
        let mut end = digits(0, false);
        let mut double = false;
        if bytes.get(end) == Some(&b'.') && bytes.get(end + 1).is_some_and(u8::is_ascii_digit) {
            end = digits(end + 1, false);
            double = true;
        }
        if matches!(bytes.get(end), Some(b'e' | b'E')) {
            let mut exp = end + 1;
            if matches!(bytes.get(exp), Some(b'+' | b'-')) {
                exp += 1;
            }
            let exp_end = digits(exp, false);
            if exp_end == exp {
                return Err(syntax("exponent without digits", start));
            }
            end = exp_end;
            double = true;
        }
        if double {
            self.pos += end;
            return Ok(Token::Literal(Literal::Double));
        }
        let value = rest[..end].parse::<u64>().ok();
        self.integer_suffix(end, value, start)
    }

    fn integer_suffix(
        &mut self,
        end: usize,
        value: Option<u64>,
        start: usize,
    ) -> Result<Token, ShardSelectorError> {
        let rest = &self.text[self.pos..];
        let Some(value) = value else { return Err(syntax("invalid int literal", start)) };
        if matches!(rest.as_bytes().get(end), Some(b'u' | b'U')) {
            self.pos += end + 1;
            return Ok(Token::Literal(Literal::Uint));
        }
        // An int is signed: 2^63 itself is only valid negated, which the parser folds in, so
        // it is accepted here and the literal's type is all that matters.
        if value > 1 << 63 {
            return Err(syntax("invalid int literal", start));
        }
        self.pos += end;
        Ok(Token::Literal(Literal::Int))
    }

    /// A quoted string at `self.pos` (`'..'`, `".."`, `'''..'''`, `""".."""`), decoded.
    fn string(&mut self, raw: bool) -> Result<String, ShardSelectorError> {
        let start = self.pos;
        let rest = &self.text[self.pos..];
        let quote = &rest[..1];
        let triple = rest.starts_with(&quote.repeat(3));
        let delimiter = if triple { quote.repeat(3) } else { quote.to_owned() };
        let mut chars = rest[delimiter.len()..].char_indices().peekable();
        let body_start = self.pos + delimiter.len();
        let mut out = String::new();
        loop {
            let Some((i, c)) = chars.next() else {
                return Err(syntax("unterminated string literal", start));
            };
            if self.text[body_start + i..].starts_with(delimiter.as_str()) {
                self.pos = body_start + i + delimiter.len();
                return Ok(out);
            }
            match c {
                '\n' | '\r' if !triple => return Err(syntax("newline in a string literal", start)),
                '\\' if !raw => {
                    let Some((_, e)) = chars.next() else {
                        return Err(syntax("unterminated string literal", start));
                    };
                    let mut code = |n: usize, radix: u32| -> Result<u32, ShardSelectorError> {
                        let mut v = 0u32;
                        for _ in 0..n {
                            let d = chars.next().and_then(|(_, d)| d.to_digit(radix));
                            v = v * radix + d.ok_or_else(|| syntax("invalid escape sequence", start))?;
                        }
                        Ok(v)
                    };
                    let decoded = match e {
                        'a' => '\x07',
                        'b' => '\x08',
                        'f' => '\x0c',
                        'n' => '\n',
                        'r' => '\r',
                        't' => '\t',
                        'v' => '\x0b',
                        '\\' | '\'' | '"' | '`' | '?' => e,
                        'x' | 'X' => char::from_u32(code(2, 16)?).expect("two hex digits"),
                        'u' => char::from_u32(code(4, 16)?)
                            .ok_or_else(|| syntax("invalid unicode escape", start))?,
                        'U' => char::from_u32(code(8, 16)?)
                            .ok_or_else(|| syntax("invalid unicode escape", start))?,
                        '0'..='3' => {
                            let rest = code(2, 8)?;
                            char::from_u32(e.to_digit(8).expect("octal digit") * 64 + rest)
                                .expect("below 256")
                        }
                        _ => return Err(syntax("invalid escape sequence", start)),
                    };
                    out.push(decoded);
                }
                c => out.push(c),
            }
        }
    }
}

struct Parser {
    tokens: Vec<(Token, usize)>,
    pos: usize,
    depth: usize,
    /// Length of the text, the offset reported for "unexpected end".
    end: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos).map(|(t, _)| t)
    }

    fn offset(&self) -> usize {
        self.tokens.get(self.pos).map_or(self.end, |(_, o)| *o)
    }

    fn describe(&self, at: usize) -> String {
        match self.tokens.get(at).map(|(t, _)| t) {
            None => "end of input".to_owned(),
            Some(Token::Ident(name)) => format!("identifier {name:?}"),
            Some(Token::Literal(_)) => "literal".to_owned(),
            Some(Token::Punct(p)) => format!("'{p}'"),
        }
    }

    fn eat(&mut self, punct: &str) -> bool {
        if matches!(self.peek(), Some(Token::Punct(p)) if *p == punct) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, punct: &str) -> Result<(), ShardSelectorError> {
        if self.eat(punct) {
            Ok(())
        } else {
            Err(syntax(format!("expected '{punct}', found {}", self.describe(self.pos)), self.offset()))
        }
    }

    /// `expr := or ('?' or ':' expr)?`
    fn expr(&mut self) -> Result<Expr, ShardSelectorError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            // cel-go says `expression recursion limit exceeded: 250`, at 250.
            return Err(syntax(format!("expression nested more than {MAX_DEPTH} deep"), self.offset()));
        }
        let condition = self.binary(0)?;
        let result = if self.eat("?") {
            let then = self.binary(0)?;
            self.expect(":")?;
            let otherwise = self.expr()?;
            drop((condition, then, otherwise));
            Expr::call("_?_:_", Vec::new())
        } else {
            condition
        };
        self.depth -= 1;
        Ok(result)
    }

    /// Binary operators by precedence climbing (one frame per nesting level, not one per
    /// precedence level, to keep the stack small); all are left-associative.
    fn binary(&mut self, min_precedence: u8) -> Result<Expr, ShardSelectorError> {
        let mut left = self.unary()?;
        let mut run: Vec<Expr> = Vec::new();
        while let Some((precedence, function)) = self.peek().and_then(binary_operator) {
            if precedence < min_precedence {
                break;
            }
            self.pos += 1;
            let right = self.binary(precedence + 1)?;
            if function == "_||_" {
                // Collected and balanced below, as cel-go balances `||` chains: the walk and the
                // drop then recurse log(n) deep, not n.
                if run.is_empty() {
                    run.push(left);
                }
                run.push(right);
                left = Expr::List; // placeholder, replaced below
            } else {
                if !run.is_empty() {
                    left = balance(std::mem::take(&mut run));
                }
                // Below any other operator the walk looks at nothing but the name (the root
                // would be rejected as an unsupported function), so the operands are dropped.
                drop((left, right));
                left = Expr::call(function, Vec::new());
            }
        }
        Ok(if run.is_empty() { left } else { balance(run) })
    }

    /// `unary := member | '!'+ member | '-'+ member`; as cel-go, an even run cancels out, and
    /// a single `-` before a number is part of the literal.
    fn unary(&mut self) -> Result<Expr, ShardSelectorError> {
        for (op, function) in [("!", "!_"), ("-", "-_")] {
            let mut count = 0;
            while self.eat(op) {
                count += 1;
            }
            if count > 0 {
                if op == "-" && matches!(self.peek(), Some(Token::Literal(Literal::Int | Literal::Double))) {
                    count -= 1;
                }
                let operand = self.member()?;
                return Ok(if count % 2 == 1 { Expr::call(function, Vec::new()) } else { operand });
            }
        }
        self.member()
    }

    /// `member := primary ('.' IDENT ('(' args ')')? | '[' expr ']' | '{' fields '}')*`
    fn member(&mut self) -> Result<Expr, ShardSelectorError> {
        let mut expr = self.primary()?;
        for links in 0.. {
            if links > MAX_DEPTH {
                // cel-go says `max recursion depth exceeded` (its grammar recurses once per
                // link, to 250); here the bound keeps the select chain's drop shallow.
                return Err(syntax(format!("a chain of more than {MAX_DEPTH} selections"), self.offset()));
            }
            if self.eat(".") {
                let field = match self.peek() {
                    Some(Token::Ident(name)) => name.clone(),
                    _ => {
                        return Err(syntax(
                            format!("expected a field name after '.', found {}", self.describe(self.pos)),
                            self.offset(),
                        ));
                    }
                };
                self.pos += 1;
                expr = if self.eat("(") {
                    // A member call `x.f(a)`: parser.go ignores the receiver.
                    Expr::Call { function: field, args: self.args(")")? }
                } else {
                    Expr::Select { operand: Box::new(expr), field }
                };
            } else if self.eat("[") {
                self.expr()?;
                self.expect("]")?;
                expr = Expr::call("_[_]", Vec::new());
            } else if matches!(expr, Expr::Ident(_) | Expr::Select { .. }) && self.eat("{") {
                self.entries("}", true)?;
                expr = Expr::Struct;
            } else {
                return Ok(expr);
            }
        }
        unreachable!("the loop returns")
    }

    fn primary(&mut self) -> Result<Expr, ShardSelectorError> {
        let offset = self.offset();
        let Some(token) = self.peek().cloned() else {
            return Err(syntax("unexpected end of input, expected an expression", offset));
        };
        self.pos += 1;
        match token {
            Token::Literal(l) => Ok(Expr::Literal(l)),
            // cel-go rejects reserved words as identifiers and function names, not as field
            // names (`object.metadata.namespace` is fine).
            Token::Ident(name) if RESERVED.contains(&name.as_str()) => {
                Err(ShardSelectorError::Syntax { message: format!("reserved identifier: {name}"), offset })
            }
            Token::Ident(name) => self.ident(name),
            Token::Punct(".") => match self.peek().cloned() {
                // `.name`: an identifier rooted at the top scope.
                Some(Token::Ident(name)) => {
                    self.pos += 1;
                    self.ident(format!(".{name}"))
                }
                _ => Err(syntax(
                    format!("expected an identifier after '.', found {}", self.describe(self.pos)),
                    offset,
                )),
            },
            Token::Punct("(") => {
                let inner = self.expr()?;
                self.expect(")")?;
                Ok(inner)
            }
            Token::Punct("[") => {
                self.list("]")?;
                Ok(Expr::List)
            }
            Token::Punct("{") => {
                self.entries("}", false)?;
                Ok(Expr::Map)
            }
            _ => Err(syntax(
                format!("unexpected {}, expected an expression", self.describe(self.pos - 1)),
                offset,
            )),
        }
    }

    fn ident(&mut self, name: String) -> Result<Expr, ShardSelectorError> {
        if self.eat("(") {
            let function = name.strip_prefix('.').map(str::to_owned).unwrap_or(name);
            return Ok(Expr::Call { function, args: self.args(")")? });
        }
        Ok(Expr::Ident(name))
    }

    /// Call arguments up to `close`; no trailing comma (CEL's `exprList`).
    fn args(&mut self, close: &str) -> Result<Vec<Expr>, ShardSelectorError> {
        let mut args = Vec::new();
        if self.eat(close) {
            return Ok(args);
        }
        loop {
            args.push(self.expr()?);
            if self.eat(close) {
                return Ok(args);
            }
            self.expect(",")?;
        }
    }

    /// List elements up to `close`, trailing comma allowed.
    fn list(&mut self, close: &str) -> Result<(), ShardSelectorError> {
        while !self.eat(close) {
            self.expr()?;
            if !self.eat(",") {
                return self.expect(close);
            }
        }
        Ok(())
    }

    /// Map (`key: value`) or message (`field: value`) entries up to `close`, trailing comma
    /// allowed.
    fn entries(&mut self, close: &str, fields: bool) -> Result<(), ShardSelectorError> {
        while !self.eat(close) {
            if fields {
                if !matches!(self.peek(), Some(Token::Ident(_))) {
                    return Err(syntax(
                        format!("expected a field name, found {}", self.describe(self.pos)),
                        self.offset(),
                    ));
                }
                self.pos += 1;
            } else {
                self.expr()?;
            }
            self.expect(":")?;
            self.expr()?;
            if !self.eat(",") {
                return self.expect(close);
            }
        }
        Ok(())
    }
}
