//! `cargo xtask protobuf-schema`: regenerates `crates/protobuf/src/generated.rs`, kcache-protobuf's
//! table of the built-in types' protobuf messages, from the Go types by reflection
//! (`xtask/protobuf-schema`, a Go program; run it when the k8s.io/api version changes).

use anyhow::{Context, Result, bail};

pub(crate) fn run(args: &[String]) -> Result<()> {
    if let Some(a) = args.first() {
        bail!("cargo xtask protobuf-schema takes no arguments (got `{a}`)");
    }
    let out = crate::project_root().join("crates/protobuf/src/generated.rs");
    let generated = crate::go_run("xtask/protobuf-schema")?;
    std::fs::write(&out, generated).with_context(|| format!("writing {}", out.display()))?;
    eprintln!("protobuf-schema: wrote {}", out.display());
    Ok(())
}
