//! `cargo xtask fuzz`: runs the cargo-fuzz (libFuzzer) targets in `xtask/fuzz` for a fixed time
//! each, installing what they need (the nightly toolchain, cargo-fuzz) when it is missing.
//! `cargo xtask ci` runs a short pass over every target; longer runs are documented in
//! `xtask/fuzz/README.md` and `docs/reliability.md`.

use std::time::Instant;

use anyhow::{Context, Result, bail};
use xshell::{Shell, cmd};

/// cargo-fuzz version installed when it is missing; pinned so CI is reproducible.
const CARGO_FUZZ_VERSION: &str = "0.13.1";

/// Every fuzz target (a `[[bin]]` of `xtask/fuzz/Cargo.toml`).
pub(crate) const TARGETS: &[&str] = &[
    "watch_decode",
    "list_decode",
    "watch_events",
    "protobuf_decode",
    "protobuf_direct",
    "workqueue",
    "rate_limiters",
    "delta_fifo",
    "real_fifo",
];

/// Seconds per target in `cargo xtask ci`: enough to replay the corpus and catch a regression
/// in the checked paths, short enough to keep CI's cost dominated by the one build.
pub(crate) const CI_SECONDS: u64 = 15;

/// Seconds per target when `--time` is not given.
const DEFAULT_SECONDS: u64 = 60;

pub(crate) fn run(args: &[String]) -> Result<()> {
    let mut secs = DEFAULT_SECONDS;
    let mut targets: Vec<&str> = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--time" => {
                let v = it.next().context("--time needs a number of seconds")?;
                secs = v.parse().with_context(|| format!("--time {v}: not a number of seconds"))?;
            }
            "--target" => {
                let v = it.next().context("--target needs a target name")?;
                let Some(t) = TARGETS.iter().find(|t| **t == v.as_str()) else {
                    bail!("unknown fuzz target `{v}`; targets: {}", TARGETS.join(", "));
                };
                targets.push(t);
            }
            other => bail!("unknown option `{other}` (options: --time SECS, --target NAME)"),
        }
    }
    if targets.is_empty() {
        targets = TARGETS.to_vec();
    }
    let sh = Shell::new()?;
    sh.change_dir(crate::project_root());
    run_targets(&sh, &targets, secs)
}

/// Builds the fuzz crate once, then fuzzes each target for `secs` seconds, one at a time.
pub(crate) fn run_targets(sh: &Shell, targets: &[&str], secs: u64) -> Result<()> {
    ensure_nightly(sh)?;
    ensure_cargo_fuzz(sh)?;
    let root = crate::project_root();
    let dir = root.join("xtask/fuzz");
    // The fuzz crate is its own workspace with its own Cargo.lock; cargo-fuzz has no `--locked`,
    // so check the lock file is current first (this fails instead of rewriting it).
    let manifest = dir.join("Cargo.toml");
    cmd!(sh, "cargo +nightly metadata --locked --format-version 1 --manifest-path {manifest}")
        .env_remove("RUSTFLAGS")
        .quiet()
        .ignore_stdout()
        .run()
        .context("xtask/fuzz/Cargo.lock is out of date: update it with `cargo +nightly update --manifest-path xtask/fuzz/Cargo.toml -p <crate>` and commit it")?;

    // No sanitizer: kcache has no unsafe code (`unsafe_code = "deny"`), so AddressSanitizer would
    // only slow the runs down; panics, overflow checks and debug assertions are what we look for.
    // RUSTFLAGS is cleared so CI's `-D warnings` cannot turn a new nightly lint into a failure
    // (the crates themselves are linted on stable), and so the build is cached across runs.
    let start = Instant::now();
    cmd!(sh, "cargo +nightly fuzz build --fuzz-dir {dir} --sanitizer none")
        .env_remove("RUSTFLAGS")
        .env_remove("RUSTDOCFLAGS")
        .run()?;
    eprintln!("xtask fuzz: built in {:.1}s", start.elapsed().as_secs_f64());

    let mut summary = Vec::new();
    for target in targets {
        let corpus = dir.join("corpus").join(target);
        std::fs::create_dir_all(&corpus)?;
        // Small committed seeds, read but never written (new inputs go to the first directory).
        let seeds = dir.join("seeds").join(target);
        let seeds: Vec<String> = if seeds.is_dir() { vec![seeds.display().to_string()] } else { Vec::new() };
        let max_time = format!("-max_total_time={secs}");
        eprintln!("xtask fuzz: {target} for {secs}s");
        let out = cmd!(
            sh,
            "cargo +nightly fuzz run --fuzz-dir {dir} --sanitizer none {target} {corpus} {seeds...} -- {max_time} -timeout=10 -rss_limit_mb=2048 -print_final_stats=1"
        )
        .env_remove("RUSTFLAGS")
        .env_remove("RUSTDOCFLAGS")
        .ignore_status()
        .output()?;
        let log = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            for line in tail.into_iter().rev() {
                eprintln!("{line}");
            }
            bail!(
                "fuzz target `{target}` failed; the input is in xtask/fuzz/artifacts/{target}/ \
                 (reproduce: cargo +nightly fuzz run --fuzz-dir xtask/fuzz -s none {target} <file>)"
            );
        }
        let execs = stat(&log, "stat::number_of_executed_units").unwrap_or(0);
        let corpus_size = std::fs::read_dir(&corpus).map(|d| d.count()).unwrap_or(0);
        summary.push(format!("{target:<14} {execs:>10} execs in {secs} s, corpus {corpus_size} inputs"));
    }
    for line in &summary {
        eprintln!("xtask fuzz: {line}");
    }
    Ok(())
}

/// Reads `name: N` from libFuzzer's final stats.
fn stat(log: &str, name: &str) -> Option<u64> {
    log.lines().find_map(|l| l.strip_prefix(name)?.trim_start_matches(':').trim().parse().ok())
}

fn ensure_nightly(sh: &Shell) -> Result<()> {
    if cmd!(sh, "cargo +nightly --version").quiet().ignore_stdout().ignore_stderr().run().is_ok() {
        return Ok(());
    }
    eprintln!("xtask fuzz: no nightly toolchain: installing it (libFuzzer needs nightly)");
    cmd!(sh, "rustup toolchain install nightly --profile minimal").run().context(
        "cargo xtask fuzz needs a nightly toolchain and could not install one with \
         `rustup toolchain install nightly --profile minimal` (is rustup installed and online?)",
    )?;
    Ok(())
}

fn ensure_cargo_fuzz(sh: &Shell) -> Result<()> {
    if cmd!(sh, "cargo fuzz --version").quiet().ignore_stdout().ignore_stderr().run().is_ok() {
        return Ok(());
    }
    eprintln!("xtask fuzz: cargo-fuzz not found: installing {CARGO_FUZZ_VERSION}");
    cmd!(sh, "cargo install --locked cargo-fuzz@{CARGO_FUZZ_VERSION}")
        .env_remove("RUSTFLAGS")
        .run()
        .context("could not install cargo-fuzz")?;
    Ok(())
}
