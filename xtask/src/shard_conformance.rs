//! `cargo xtask shard-conformance [--check]`: regenerates kcache-shard-selector's Go conformance
//! table (`crates/shard-selector/tests/data/fnv_conformance.tsv`) with `xtask/shard-hash-go`
//! (apimachinery v0.37.2's `pkg/sharding`, pinned by its go.mod), or with `--check` fails if the
//! checked-in table differs from what Go writes now (CI runs that when Go is installed).

use anyhow::{Context, Result, bail};

/// The table, relative to the workspace root.
const TABLE: &str = "crates/shard-selector/tests/data/fnv_conformance.tsv";

pub(crate) fn run(args: &[String]) -> Result<()> {
    let check = match args {
        [] => false,
        [a] if a == "--check" => true,
        _ => bail!("usage: cargo xtask shard-conformance [--check]"),
    };
    let root = crate::project_root();
    let output = std::process::Command::new("go")
        .args(["run", "."])
        .current_dir(root.join("xtask/shard-hash-go"))
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("running `go run .` in xtask/shard-hash-go (needs Go)")?;
    if !output.status.success() {
        bail!("xtask/shard-hash-go failed: {}", output.status);
    }
    let path = root.join(TABLE);
    if check {
        let current = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        if current != output.stdout {
            bail!(
                "{TABLE} differs from what xtask/shard-hash-go writes; run `cargo xtask shard-conformance`"
            );
        }
        eprintln!("shard-conformance: {TABLE} matches Go");
    } else {
        std::fs::write(&path, &output.stdout).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("shard-conformance: wrote {}", path.display());
    }
    Ok(())
}
