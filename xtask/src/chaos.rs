//! `cargo xtask chaos [--runs N] [--seed S] [--keys K]`: seeded chaos convergence runs, and
//! `cargo xtask chaos leader-election [--runs N] [--seed S]`: seeded leader-election chaos. Runs
//! the `kcache-chaos` binary (xtask/chaos) in release mode; a failing run prints its seed and the
//! command that replays it.

use anyhow::Result;
use xshell::{Shell, cmd};

pub(crate) fn run(args: &[String]) -> Result<()> {
    let sh = Shell::new()?;
    sh.change_dir(crate::project_root());
    cmd!(sh, "cargo run --quiet --release -p kcache-chaos -- {args...}").run()?;
    Ok(())
}
