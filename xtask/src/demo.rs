//! `cargo xtask demo`: the main job. Until the informer exists it runs the ring-buffer example,
//! which shows a listener's buffer absorbing and draining a burst.

use anyhow::Result;
use xshell::{Shell, cmd};

pub(crate) fn run(args: &[String]) -> Result<()> {
    let sh = Shell::new()?;
    sh.change_dir(crate::project_root());
    cmd!(sh, "cargo run --quiet --release -p kcache-ring-buffer --example burst -- {args...}").run()?;
    Ok(())
}
