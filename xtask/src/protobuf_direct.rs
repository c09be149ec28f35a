//! `cargo xtask protobuf-direct`: regenerates `crates/protobuf/src/direct/generated.rs`, the
//! decoders that write k8s-openapi's structs field by protobuf field number (as Go's generated
//! `Unmarshal` does), from two inputs:
//!
//! - kcache-protobuf's schema table (`crates/protobuf/src/generated.rs`): each message's
//!   fields, their numbers, JSON names, kinds and flags;
//! - k8s-openapi's sources for the Kubernetes version the schema was made from (`src/v1_37`):
//!   each definition's Rust type, its fields' Rust names and types, and the JSON name each
//!   field is read from (the `visit_str` match of its `Deserialize` impl).
//!
//! A message gets a generated decoder only when its Rust type is a struct whose `Deserialize` is
//! k8s-openapi's plain generated form (every field `value_x` or `value_x.unwrap_or_default()`,
//! nothing required): then writing the fields directly gives what that `Deserialize` would
//! have built. Every other message, and every leaf value, is read through the serde path, so
//! the two decoders agree by construction where they share code and by test where they do not.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// The Kubernetes version of k8s.io/api the schema table was generated from, as k8s-openapi's
/// module and feature name it.
const K8S_VERSION: &str = "v1_37";

pub(crate) fn run(args: &[String]) -> Result<()> {
    if let Some(a) = args.first() {
        bail!("cargo xtask protobuf-direct takes no arguments (got `{a}`)");
    }
    let root = crate::project_root();
    let schema = std::fs::read_to_string(root.join("crates/protobuf/src/generated.rs"))?;
    let messages = parse_schema(&schema)?;
    let openapi = k8s_openapi_src()?.join(K8S_VERSION);
    let types = parse_openapi(&openapi)?;
    let out = generate(&messages, &types)?;
    let path = root.join("crates/protobuf/src/direct/generated.rs");
    std::fs::write(&path, out).with_context(|| format!("writing {}", path.display()))?;
    eprintln!("protobuf-direct: wrote {}", path.display());
    Ok(())
}

/// One field of the schema table.
#[derive(Debug)]
struct SchemaField {
    number: u32,
    json: String,
    /// `String`, `Msg(12)`, `Inline(3)`, `Time`, ...
    kind: String,
    repeated: bool,
    map: bool,
}

#[derive(Debug)]
struct SchemaMessage {
    name: String,
    fields: Vec<SchemaField>,
}

fn parse_schema(text: &str) -> Result<Vec<SchemaMessage>> {
    let mut out: Vec<SchemaMessage> = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("Message { name: \"") {
            let name = rest.split('"').next().context("message name")?;
            let index: usize = line.rsplit("// ").next().context("message index")?.trim().parse()?;
            if index != out.len() {
                bail!("schema: message {name} has index {index}, expected {}", out.len());
            }
            out.push(SchemaMessage { name: name.to_owned(), fields: Vec::new() });
        } else if let Some(rest) = line.strip_prefix("f(") {
            let rest = rest.strip_suffix("),").context("field line")?;
            let mut parts = rest.splitn(2, ", ");
            let number: u32 = parts.next().context("number")?.parse()?;
            let rest = parts.next().context("field rest")?;
            let rest = rest.strip_prefix('"').context("json name")?;
            let (json, rest) = rest.split_once("\", ").context("json name end")?;
            let (kind, flags) = rest.split_once(", ").context("kind and flags")?;
            let m = out.last_mut().context("field before message")?;
            m.fields.push(SchemaField {
                number,
                json: json.to_owned(),
                kind: kind.to_owned(),
                repeated: flags.contains("REPEATED"),
                map: flags.contains("MAP"),
            });
        }
    }
    if out.is_empty() {
        bail!("schema: no messages found");
    }
    Ok(out)
}

/// The shape of a Rust field's type around its element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// `T`
    Req,
    /// `Option<T>`
    Opt,
    /// `Vec<T>`
    Vec,
    /// `Option<Vec<T>>`
    OptVec,
    /// `BTreeMap<String, T>`
    Map,
    /// `Option<BTreeMap<String, T>>`
    OptMap,
}

#[derive(Debug)]
struct RustField {
    name: String,
    shape: Shape,
    /// The element type, `crate::` replaced by `k8s_openapi::`.
    elem: String,
}

/// A k8s-openapi struct with the plain generated `Deserialize`.
#[derive(Debug)]
struct RustType {
    path: String,
    /// JSON member name -> field.
    fields: BTreeMap<String, RustField>,
}

/// k8s-openapi's `src` directory, found through `cargo metadata`.
fn k8s_openapi_src() -> Result<PathBuf> {
    let out = std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["metadata", "--format-version", "1", "--locked"])
        .current_dir(crate::project_root())
        .output()
        .context("cargo metadata")?;
    if !out.status.success() {
        bail!("cargo metadata failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    for p in meta["packages"].as_array().context("packages")? {
        if p["name"] == "k8s-openapi" {
            let manifest = p["manifest_path"].as_str().context("manifest_path")?;
            return Ok(Path::new(manifest).parent().context("manifest dir")?.join("src"));
        }
    }
    bail!("k8s-openapi is not in the workspace's dependencies")
}

fn parse_openapi(dir: &Path) -> Result<BTreeMap<String, RustType>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)? {
            let p = e?.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&p)?;
                let rel = p.parent().context("parent")?.strip_prefix(dir)?;
                if let Some((def, ty)) = parse_type(&text, rel) {
                    out.insert(def, ty);
                }
            }
        }
    }
    Ok(out)
}

/// A definition's name and its type, when it is a struct with the plain generated `Deserialize`.
fn parse_type(text: &str, module: &Path) -> Option<(String, RustType)> {
    let def = text.lines().next()?.strip_prefix("// Generated from definition ")?.trim().to_owned();
    let start = text.find("\npub struct ")?;
    let rest = &text[start + "\npub struct ".len()..];
    let (name, rest) = rest.split_once(' ')?;
    if !rest.starts_with('{') || !text.contains("#[derive(Clone, Debug, Default, PartialEq)]") {
        return None;
    }
    // A required field (`missing_field`) or anything past the plain form: left to serde.
    if text.contains("missing_field") || !text.contains("fn visit_map") {
        return None;
    }
    let body = &rest[..rest.find("\n}\n")?];
    let mut by_rust: BTreeMap<String, (Shape, String)> = BTreeMap::new();
    for line in body.lines() {
        let Some(decl) = line.strip_prefix("    pub ") else { continue };
        let (field, ty) = decl.split_once(": ")?;
        let ty = ty.strip_suffix(',')?;
        by_rust.insert(field.to_owned(), shape_of(ty)?);
    }
    // Every field is built as `x: value_x` or `x: value_x.unwrap_or_default()`.
    for field in by_rust.keys() {
        let plain = format!("{field}: value_{field},");
        let default = format!("{field}: value_{field}.unwrap_or_default(),");
        if !text.contains(&plain) && !text.contains(&default) {
            return None;
        }
    }
    let mut fields = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        let Some(rest) = line.strip_prefix('"') else { continue };
        let Some((json, rest)) = rest.split_once("\" => Field::Key_") else { continue };
        let field = rest.strip_suffix(',')?;
        if let Some((shape, elem)) = by_rust.get(field) {
            fields.insert(
                json.to_owned(),
                RustField { name: field.to_owned(), shape: *shape, elem: elem.clone() },
            );
        }
    }
    let mut path = String::from("k8s_openapi");
    for c in module.components() {
        path.push_str("::");
        path.push_str(c.as_os_str().to_str()?);
    }
    path.push_str("::");
    path.push_str(name);
    Some((def, RustType { path, fields }))
}

fn shape_of(ty: &str) -> Option<(Shape, String)> {
    const VEC: &str = "std::vec::Vec<";
    const MAP: &str = "std::collections::BTreeMap<std::string::String, ";
    let (opt, inner) = match ty.strip_prefix("Option<").and_then(|t| t.strip_suffix('>')) {
        Some(t) => (true, t),
        None => (false, ty),
    };
    let (shape, elem) = if let Some(e) = inner.strip_prefix(VEC).and_then(|t| t.strip_suffix('>')) {
        (if opt { Shape::OptVec } else { Shape::Vec }, e)
    } else if let Some(e) = inner.strip_prefix(MAP).and_then(|t| t.strip_suffix('>')) {
        (if opt { Shape::OptMap } else { Shape::Map }, e)
    } else {
        (if opt { Shape::Opt } else { Shape::Req }, inner)
    };
    if elem.contains("Box<") {
        return None;
    }
    Some((shape, elem.replace("crate::", "k8s_openapi::")))
}

/// The OpenAPI definition a schema message is, by k8s-openapi's naming.
fn definition(proto: &str) -> String {
    let (group_version, name) = proto.split_once('.').unwrap_or((proto, ""));
    match group_version.strip_prefix("apis/meta/") {
        Some(v) => format!("io.k8s.apimachinery.pkg.apis.meta.{v}.{name}"),
        None => format!("io.k8s.api.{}.{name}", group_version.replace('/', ".")),
    }
}

fn msg_index(kind: &str, prefix: &str) -> Option<usize> {
    kind.strip_prefix(prefix)?.strip_suffix(')')?.parse().ok()
}

/// Whether a schema field and the Rust field it lands in agree on shape.
fn shapes_agree(f: &SchemaField, r: &RustField) -> bool {
    match r.shape {
        Shape::Vec | Shape::OptVec => f.repeated,
        Shape::Map | Shape::OptMap => f.map,
        Shape::Req | Shape::Opt => !f.repeated && !f.map,
    }
}

fn generate(messages: &[SchemaMessage], types: &BTreeMap<String, RustType>) -> Result<String> {
    // Which messages get a generated decoder: those with a plain Rust type all of whose
    // members (inlined ones included) land in fields of the right shape.
    let mut rust: BTreeMap<usize, &RustType> = BTreeMap::new();
    for (i, m) in messages.iter().enumerate() {
        if let Some(t) = types.get(&definition(&m.name)) {
            rust.insert(i, t);
        }
    }
    // Drop messages whose members do not fit their Rust type (checked through inlines).
    loop {
        let mut bad = BTreeSet::new();
        for (&i, t) in &rust {
            if !fits(messages, i, t, 0) {
                bad.insert(i);
            }
        }
        if bad.is_empty() {
            break;
        }
        for i in bad {
            rust.remove(&i);
        }
    }
    let mut impls = String::new();
    let mut used = BTreeSet::from(["Direct"]);
    for (&i, t) in &rust {
        writeln!(impls, "// {}", messages[i].name)?;
        writeln!(impls, "impl Direct for {} {{", t.path)?;
        writeln!(impls, "    fn merge(&mut self, buf: &[u8], cx: Ctx) -> Result<(), Error> {{")?;
        body(&mut impls, &mut used, messages, &rust, i, t, "self", false, 2)?;
        writeln!(impls, "        Ok(())\n    }}\n}}\n")?;
    }
    let mut out = String::new();
    writeln!(
        out,
        "//! Decoders that write k8s-openapi's structs by protobuf field number, generated by\n\
         //! `cargo xtask protobuf-direct` from the schema table and k8s-openapi's `{K8S_VERSION}` sources.\n\
         //! Do not edit.\n\n\
         // One arm per field: a message with one field is still a `match`, and managedFields' arm\n\
         // reads its option first.\n\
         #![allow(clippy::single_match, clippy::collapsible_match)]\n\n\
         use super::{{{}}};\n\
         use crate::de::Ctx;\n\
         use crate::error::Error;\n\
         use crate::generated::MESSAGES;\n\
         use crate::wire::Reader;\n",
        used.into_iter().collect::<Vec<_>>().join(", ")
    )?;
    out.push_str(&impls);
    // The table: message index -> the decoder of its Rust type.
    writeln!(out, "/// The generated decoder of message `msg`, for its Rust type.")?;
    writeln!(out, "pub(super) fn erased(msg: u16) -> Option<super::Erased> {{")?;
    writeln!(out, "    Some(match msg {{")?;
    for (&i, t) in &rust {
        writeln!(out, "        {i} => super::erase::<{}>(),", t.path)?;
    }
    writeln!(out, "        _ => return None,\n    }})\n}}\n")?;
    writeln!(out, "/// Checks the generated decoder of message `msg` against the serde path on `bytes`.")?;
    writeln!(out, "#[cfg(test)]")?;
    writeln!(
        out,
        "pub(super) fn agree(msg: u16, bytes: &[u8], opts: crate::DecodeOptions) -> Option<Result<bool, String>> {{"
    )?;
    writeln!(out, "    Some(match msg {{")?;
    for (&i, t) in &rust {
        writeln!(out, "        {i} => super::tests::agree::<{}>(msg, bytes, opts),", t.path)?;
    }
    writeln!(out, "        _ => return None,\n    }})\n}}")?;
    Ok(out)
}

/// Whether message `i`'s members (through its inlined messages) land in `t`'s fields with the
/// right shapes.
fn fits(messages: &[SchemaMessage], i: usize, t: &RustType, depth: usize) -> bool {
    if depth > 4 {
        return false;
    }
    messages[i].fields.iter().all(|f| {
        if let Some(j) = msg_index(&f.kind, "Inline(") {
            return !f.repeated && !f.map && fits(messages, j, t, depth + 1);
        }
        t.fields.get(&f.json).is_none_or(|r| shapes_agree(f, r))
    })
}

/// The loop over message `i`'s fields, writing into `target` (`self`, or the struct an inlined
/// message's members land in).
#[allow(clippy::too_many_arguments)]
fn body(
    out: &mut String,
    used: &mut BTreeSet<&'static str>,
    messages: &[SchemaMessage],
    rust: &BTreeMap<usize, &RustType>,
    i: usize,
    t: &RustType,
    target: &str,
    target_inlined: bool,
    indent: usize,
) -> Result<()> {
    let pad = "    ".repeat(indent);
    writeln!(out, "{pad}let m = &MESSAGES[{i}];")?;
    writeln!(out, "{pad}let mut r = Reader::new(buf);")?;
    // In JSON each occurrence of an inlined message is its own set of members: a repeated
    // field or map in it replaces what an earlier occurrence gave.
    let inlined = target_inlined;
    if inlined && messages[i].fields.iter().any(|f| (f.repeated || f.map) && t.fields.contains_key(&f.json)) {
        writeln!(out, "{pad}let mut seen = 0u128;")?;
    }
    writeln!(out, "{pad}while let Some((at, number, v)) = super::field(&mut r, m)? {{")?;
    writeln!(out, "{pad}    match number {{")?;
    for (j, f) in messages[i].fields.iter().enumerate() {
        let fd = format!("&m.fields[{j}]");
        if let Some(k) = msg_index(&f.kind, "Inline(") {
            used.insert("inline");
            writeln!(out, "{pad}        {} => if let Some(b) = inline(m, {fd}, v, at)? {{", f.number)?;
            writeln!(out, "{pad}            let buf = b;")?;
            writeln!(out, "{pad}            {{")?;
            body(out, used, messages, rust, k, t, target, true, indent + 4)?;
            writeln!(out, "{pad}            }}")?;
            writeln!(out, "{pad}        }},")?;
            continue;
        }
        let Some(r) = t.fields.get(&f.json) else {
            used.insert("skip");
            writeln!(out, "{pad}        {} => skip(m, {fd}, v, at)?,", f.number)?;
            continue;
        };
        const META: &str = "k8s_openapi::apimachinery::pkg::apis::meta::v1::";
        let read = match (f.kind.as_str(), r.elem.as_str()) {
            (kind, elem)
                if msg_index(kind, "Msg(")
                    .is_some_and(|k| rust.get(&k).is_some_and(|rt| rt.path == elem)) =>
            {
                "direct"
            }
            ("String", "std::string::String") => "string",
            ("Time", e) if e.strip_prefix(META) == Some("Time") => "time",
            ("MicroTime", e) if e.strip_prefix(META) == Some("MicroTime") => "micro_time",
            _ => "serde",
        };
        let helper = match r.shape {
            Shape::Req => "req",
            Shape::Opt => "opt",
            Shape::Vec => "vec",
            Shape::OptVec => "opt_vec",
            Shape::Map => "map",
            Shape::OptMap => "opt_map",
        };
        used.insert(read);
        used.insert(helper);
        let mut call = format!("{helper}(&mut {target}.{}, m, {fd}, v, at, cx, {read})?", r.name);
        if inlined && (f.repeated || f.map) {
            call = format!(
                "{{ if seen & (1 << {j}) == 0 {{ seen |= 1 << {j}; {target}.{} = Default::default(); }} {call} }}",
                r.name
            );
        }
        if messages[i].name == "apis/meta/v1.ObjectMeta" && f.number == 17 {
            // managedFields: skipped, unread, when the options say so (as the serde path does).
            writeln!(out, "{pad}        {} => if !cx.skips_managed_fields() {{ {call} }},", f.number)?;
        } else {
            writeln!(out, "{pad}        {} => {call},", f.number)?;
        }
    }
    writeln!(out, "{pad}        _ => {{}}")?;
    writeln!(out, "{pad}    }}")?;
    writeln!(out, "{pad}}}")?;
    Ok(())
}
