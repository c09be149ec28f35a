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
    let generated = crate::go_run("xtask/shard-hash-go")?;
    let path = crate::project_root().join(TABLE);
    if check {
        let current = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        if current != generated {
            bail!(
                "{TABLE} differs from what xtask/shard-hash-go writes; run `cargo xtask shard-conformance`"
            );
        }
        eprintln!("shard-conformance: {TABLE} matches Go");
    } else {
        std::fs::write(&path, &generated).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("shard-conformance: wrote {}", path.display());
    }
    Ok(())
}
