//! `cargo xtask ci`: every check CI runs, in the order that fails fastest.

use std::collections::BTreeMap;

use anyhow::{Context, Result, bail};
use xshell::{Shell, cmd};

/// cargo-deny version installed when it is missing; pinned so CI is reproducible.
const CARGO_DENY_VERSION: &str = "0.20.2";

/// The environment every cargo command of CI runs with (also passed to the e2e harness's own
/// cargo invocations, so they reuse the test step's build instead of rebuilding).
///
/// The last two keep CI's disk footprint small (docs/testing.md, "CI's disk footprint"): a clean
/// clone has no use for incremental caches, and debug info made up most of the 13.6 GB
/// `target/debug` that once filled a CI machine's disk. A failing test still reports the file and
/// line of its panic; a backtrace names functions without lines.
const CI_ENV: &[(&str, &str)] = &[
    ("RUSTFLAGS", "-D warnings"),
    ("RUSTDOCFLAGS", "-D warnings"),
    ("CARGO_INCREMENTAL", "0"),
    ("CARGO_PROFILE_DEV_DEBUG", "0"),
];

pub(crate) fn run(args: &[String]) -> Result<()> {
    let skip_deny = args.iter().any(|a| a == "--no-deny");
    let sh = Shell::new()?;
    sh.change_dir(crate::project_root());
    // Warnings are errors in CI, not in source (crossbeam's habit).
    let _env: Vec<_> = CI_ENV.iter().map(|(k, v)| sh.push_env(k, v)).collect();

    step("rustfmt", || Ok(cmd!(sh, "cargo fmt --all -- --check").run()?))?;
    step("msrv", || check_msrv(&sh))?;
    // All features: kcache-workqueue's `prometheus` is compiled, linted and tested too.
    step("clippy", || {
        Ok(cmd!(sh, "cargo clippy --workspace --all-targets --all-features --locked -- -D warnings").run()?)
    })?;
    step("test", || Ok(cmd!(sh, "cargo test --workspace --all-targets --all-features --locked").run()?))?;
    step("doctest", || Ok(cmd!(sh, "cargo test --workspace --doc --all-features --locked").run()?))?;
    // kcache-store also works without kube, and the kcache-only benchmark binary builds.
    step("no-default-features", || {
        cmd!(sh, "cargo test --locked -p kcache-store --no-default-features --lib --tests").run()?;
        // The kcache-only scenario binary that `cargo xtask bench` runs the kcache side in.
        Ok(cmd!(sh, "cargo clippy --locked -p kcache-bench --no-default-features -- -D warnings").run()?)
    })?;
    step("loom", || run_loom(&sh))?;
    // A short pass over every fuzz target (nightly; the build dominates the cost).
    step("fuzz", || crate::fuzz::run_targets(&sh, crate::fuzz::TARGETS, crate::fuzz::CI_SECONDS))?;
    step("rustdoc", || Ok(cmd!(sh, "cargo doc --workspace --no-deps --all-features --locked").run()?))?;
    // The end-to-end suite: on a real kube-apiserver built from Go modules whenever Go is here
    // (cached by version after the first build), and always on the embedded server.
    if crate::control_plane::go_available() {
        // The FNV-1a/selector table the shard-selector tests check is still what Go writes.
        step("shard-conformance", || crate::shard_conformance::run(&["--check".to_owned()]))?;
        step("e2e-local", || crate::e2e::run_cluster(&crate::e2e::Cluster::Local, &[], CI_ENV))?;
        // `cargo xtask cluster`'s lifecycle, its feature gates and the demo against it: the
        // `#[ignore]`d tests of xtask/src/cluster.rs, on the binaries e2e-local just built or
        // found. `--workspace --all-features` resolves features as the test step did, so the
        // xtask test binary is reused; the demo is the binary the test step built.
        step("cluster", || {
            let demo = target_dir(&sh)?.join("debug/kcache-demo");
            Ok(cmd!(sh, "cargo test --locked --workspace --all-features --bin xtask -- --ignored cluster::")
                .env("KCACHE_DEMO_BIN", demo)
                .run()?)
        })?;
    } else {
        eprintln!(
            "xtask ci: Go not found; e2e and `cargo xtask cluster` on a real kube-apiserver skipped (the embedded run follows)"
        );
    }
    step("e2e-embedded", || crate::e2e::run_cluster(&crate::e2e::Cluster::Embedded, &[], CI_ENV))?;
    if skip_deny {
        eprintln!("xtask ci: cargo-deny skipped (--no-deny)");
    } else {
        step("cargo-deny", || run_deny(&sh))?;
    }
    eprintln!("xtask ci: all checks passed");
    Ok(())
}

fn step(name: &str, f: impl FnOnce() -> Result<()>) -> Result<()> {
    eprintln!("\n==> xtask ci: {name}");
    let start = std::time::Instant::now();
    f().with_context(|| format!("ci step `{name}` failed"))?;
    eprintln!("==> {name} ok in {:.1}s", start.elapsed().as_secs_f64());
    Ok(())
}

/// Cargo's target directory (`CARGO_TARGET_DIR` or the workspace's `target/`).
fn target_dir(sh: &Shell) -> Result<std::path::PathBuf> {
    let out = cmd!(sh, "cargo metadata --format-version 1 --no-deps --locked").read()?;
    let meta: serde_json::Value = serde_json::from_str(&out)?;
    Ok(meta["target_directory"].as_str().context("target_directory")?.into())
}

/// Loom model tests live in `tests/loom*.rs` of the crates that have them, behind `cfg(loom)`.
///
/// `LOOM_MAX_PREEMPTIONS=2` bounds the search: every bug loom has found in crossbeam and tokio
/// needed at most two preemptions, and the unbounded search is exponential.
fn run_loom(sh: &Shell) -> Result<()> {
    let root = crate::project_root();
    let mut targets = Vec::new();
    for entry in std::fs::read_dir(root.join("crates"))? {
        let dir = entry?.path();
        let tests = dir.join("tests");
        if !tests.is_dir() {
            continue;
        }
        for t in std::fs::read_dir(&tests)? {
            let path = t?.path();
            let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_owned();
            if stem.starts_with("loom") && path.extension().is_some_and(|e| e == "rs") {
                let pkg = format!("kcache-{}", dir.file_name().unwrap().to_string_lossy());
                targets.push((pkg, stem));
            }
        }
    }
    if targets.is_empty() {
        eprintln!("no loom tests yet");
        return Ok(());
    }
    let _flags = sh.push_env("RUSTFLAGS", "--cfg loom -D warnings");
    let _pre = sh.push_env("LOOM_MAX_PREEMPTIONS", "2");
    // A separate target dir: `--cfg loom` changes every crate's hash anyway, and keeping it apart
    // stops the normal build from being invalidated on every CI run.
    let _dir = sh.push_env("CARGO_TARGET_DIR", root.join("target/loom"));
    for (pkg, test) in targets {
        cmd!(sh, "cargo test --locked --release -p {pkg} --test {test}").run()?;
    }
    Ok(())
}

/// The declared MSRV must be at least every dependency's own `rust-version` (kube 5 says 1.89).
/// The GitHub workflow also builds on that exact toolchain.
fn check_msrv(sh: &Shell) -> Result<()> {
    let out = cmd!(sh, "cargo metadata --format-version 1 --locked").read()?;
    let meta: serde_json::Value = serde_json::from_str(&out)?;
    let members: Vec<&str> = meta["workspace_members"]
        .as_array()
        .context("workspace_members")?
        .iter()
        .filter_map(|m| m.as_str())
        .collect();
    let mut declared = None;
    let mut worst: BTreeMap<(u64, u64, u64), Vec<String>> = BTreeMap::new();
    for pkg in meta["packages"].as_array().context("packages")? {
        let id = pkg["id"].as_str().unwrap_or_default();
        let Some(rv) = pkg["rust_version"].as_str() else { continue };
        let v = parse_version(rv)?;
        if members.contains(&id) {
            declared = Some(declared.map_or(v, |d: (u64, u64, u64)| d.min(v)));
        } else {
            let name =
                format!("{} {}", pkg["name"].as_str().unwrap_or("?"), pkg["version"].as_str().unwrap_or("?"));
            worst.entry(v).or_default().push(name);
        }
    }
    let declared = declared.context("no workspace member declares rust-version")?;
    if let Some((need, who)) = worst.iter().next_back() {
        if *need > declared {
            bail!("declared rust-version {declared:?} is older than {need:?} required by {who:?}");
        }
        eprintln!(
            "msrv {declared:?} covers every dependency (highest requirement {need:?}: {})",
            who.join(", ")
        );
    }
    let kube_msrv = worst.iter().find(|(_, w)| w.iter().any(|n| n.starts_with("kube-client ")));
    if let Some((kv, _)) = kube_msrv
        && declared < *kv
    {
        bail!("declared rust-version must be at least kube's {kv:?}");
    }
    Ok(())
}

fn parse_version(s: &str) -> Result<(u64, u64, u64)> {
    let mut it = s.split('.').map(|p| p.parse::<u64>());
    let major = it.next().context("empty version")??;
    let minor = it.next().unwrap_or(Ok(0))?;
    let patch = it.next().unwrap_or(Ok(0))?;
    Ok((major, minor, patch))
}

fn run_deny(sh: &Shell) -> Result<()> {
    if cmd!(sh, "cargo deny --version").quiet().ignore_stderr().read().is_err() {
        eprintln!("cargo-deny not found: installing {CARGO_DENY_VERSION}");
        cmd!(sh, "cargo install --locked cargo-deny@{CARGO_DENY_VERSION}").env_remove("RUSTFLAGS").run()?;
    }
    // Advisories need the advisory database from the network; the GitHub workflow checks them.
    cmd!(sh, "cargo deny --all-features --locked check licenses bans sources").run()?;
    Ok(())
}
