//! `cargo xtask demo [args]`: the main job. Runs the `kcache-demo` binary (xtask/demo), a sample
//! controller on the embedded API server with churn, a live display and a final verification;
//! `cargo xtask demo --help` lists its flags.

use anyhow::Result;
use xshell::{Shell, cmd};

pub(crate) fn run(args: &[String]) -> Result<()> {
    let sh = Shell::new()?;
    sh.change_dir(crate::project_root());
    cmd!(sh, "cargo run --quiet --release -p kcache-demo -- {args...}").run()?;
    Ok(())
}
