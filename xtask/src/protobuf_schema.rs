//! `cargo xtask protobuf-schema`: regenerates `crates/protobuf/src/generated.rs`, kcache-protobuf's
//! table of the built-in types' protobuf messages, from the Go types by reflection
//! (`xtask/protobuf-schema`, a Go program; run it when the k8s.io/api version changes).

use anyhow::{Context, Result, bail};

pub(crate) fn run(args: &[String]) -> Result<()> {
    if let Some(a) = args.first() {
        bail!("cargo xtask protobuf-schema takes no arguments (got `{a}`)");
    }
    let root = crate::project_root();
    let out = root.join("crates/protobuf/src/generated.rs");
    let output = std::process::Command::new("go")
        .args(["run", "."])
        .current_dir(root.join("xtask/protobuf-schema"))
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("running `go run .` in xtask/protobuf-schema (needs Go)")?;
    if !output.status.success() {
        bail!("xtask/protobuf-schema failed: {}", output.status);
    }
    std::fs::write(&out, &output.stdout).with_context(|| format!("writing {}", out.display()))?;
    eprintln!("protobuf-schema: wrote {}", out.display());
    Ok(())
}
