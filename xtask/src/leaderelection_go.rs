//! The client-go side of the leader-election interop tests: builds `xtask/leaderelection-go`
//! (client-go v0.37.2's `LeaderElector` as a process, pinned by its own go.mod) once per change
//! of its sources and caches the binary next to the control plane's, as `control_plane.rs` does
//! for kube-apiserver's helpers. `cargo xtask e2e` hands its path to the suite in
//! `KCACHE_E2E_LEADERELECTION_GO`.

use std::fs;
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};

use crate::control_plane::{cache_root, files_hash};

/// The binary, built now unless cached. Keyed by go.mod, go.sum and main.go: a changed pin or
/// source builds anew (about a minute cold with the modules downloaded, seconds warm).
pub(crate) fn ensure_binary() -> Result<PathBuf> {
    let module = crate::project_root().join("xtask/leaderelection-go");
    let sources = ["go.mod", "go.sum", "main.go"].map(|f| module.join(f));
    let bin = cache_root().join(format!("leaderelection-go/leaderelection-go-{}", files_hash(&sources)?));
    if bin.is_file() {
        return Ok(bin);
    }
    let dir = bin.parent().context("binary directory")?;
    fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".leaderelection-go.partial.{}", std::process::id()));
    eprintln!("xtask: building leaderelection-go (client-go's LeaderElector)");
    let start = Instant::now();
    let status = Command::new("go")
        .current_dir(&module)
        .env("CGO_ENABLED", "0")
        .args(["build", "-trimpath", "-o"])
        .arg(&tmp)
        .arg(".")
        .status()
        .context("running go build")?;
    if !status.success() {
        let _ = fs::remove_file(&tmp);
        bail!("go build xtask/leaderelection-go failed ({status})");
    }
    // Rename is atomic: a concurrent or interrupted build never leaves a half-written binary.
    fs::rename(&tmp, &bin)?;
    eprintln!("xtask: built leaderelection-go in {:.1}s ({})", start.elapsed().as_secs_f64(), bin.display());
    Ok(bin)
}
