//! `cargo xtask bench --cluster local --filter sharding`: issue 34's benchmark (item 7), one
//! replica of a sharded controller syncing 50k ConfigMaps, per mode and shard count.
//!
//! Starts etcd and two kube-apiservers on it: `sharded` with `ShardedListAndWatch=true` and
//! `plain` without (the client-side fallback), loads N ConfigMaps, then runs the kcache-bench
//! scenario `sharding_sync_50k` (a reflector, LIST + WATCH, into a plain store, timed to its first
//! replace) for each configuration below, R times, interleaved, one process per run:
//!
//! | mode | server | selector |
//! |---|---|---|
//! | unsharded | `sharded` | none |
//! | server-side, 1/2/4 shards | `sharded` | shard 0 of `ShardSelector::split(Uid, N)` |
//! | client-side, 1/2/4 shards | `plain` | the same |
//!
//! Per configuration it prints the medians of: time to synced, CPU seconds of the process while
//! syncing (decoding dominates it), peak RSS, bytes received (response bodies, counted in a layer
//! of the client's stack, after TLS), objects cached and the shard mode the reflector ended in, and
//! each configuration's bytes and CPU as a fraction of unsharded. kcache only: client-go has no
//! sharding to compare with. The table goes to stdout for docs/benchmarks.md (this never
//! rewrites that file) and, with `--json PATH`, every run's line.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use xshell::{Shell, cmd};

use super::{Options, output_within, stats};

/// The scenario of kcache-bench this runs.
const SCENARIO: &str = "sharding_sync_50k";

/// One configuration: a name, the server it talks to and the number of shards (0: no selector).
struct Config {
    name: String,
    server: &'static str,
    shards: usize,
}

fn configs() -> Vec<Config> {
    let mut v = vec![Config { name: "unsharded".into(), server: "sharded", shards: 0 }];
    for (mode, server) in [("server-side", "sharded"), ("client-side", "plain")] {
        for shards in [1, 2, 4] {
            v.push(Config {
                name: format!("{mode}, {shards} shard{}", if shards == 1 { "" } else { "s" }),
                server,
                shards,
            });
        }
    }
    v
}

/// Runs the sharding benchmark (see the module docs).
pub(super) fn run(opts: &Options, args: &[String]) -> Result<()> {
    if !opts.cluster_local {
        bail!("the sharding benchmark needs --cluster local (kube-apiserver with ShardedListAndWatch)");
    }
    let root = crate::project_root();
    let sh = Shell::new()?;
    sh.change_dir(&root);
    let n = opts.n.unwrap_or(50_000);
    let bin = build(&sh, &root)?;
    let bins = crate::control_plane::ensure_binaries()?;
    let mut sharded = crate::control_plane::ServerSpec::new("sharded");
    sharded.feature_gates.insert("ShardedListAndWatch".to_owned(), true);
    let spec = crate::control_plane::Spec {
        servers: vec![sharded, crate::control_plane::ServerSpec::new("plain")],
        detach: false,
        logs_on_failure: root.join("target/bench-logs"),
    };
    let dir = std::env::temp_dir().join(format!("kcache-bench-sharding-{}", std::process::id()));
    let plane = crate::control_plane::ControlPlane::start(&bins, &dir, &spec)?;
    let kubeconfig =
        |server: &str| -> Result<PathBuf> { Ok(plane.instance().server(server)?.kubeconfig.clone()) };

    let t = Instant::now();
    let status = std::process::Command::new(&bin)
        .arg("load")
        .arg("--kubeconfig")
        .arg(kubeconfig("sharded")?)
        .args(["--from", "0", "--configmaps", &n.to_string()])
        .status()?;
    if !status.success() {
        bail!("loading {n} ConfigMaps failed");
    }
    eprintln!("bench: loaded {n} ConfigMaps in {:.1?}", t.elapsed());

    let configs = configs();
    // One untimed run per server, so no configuration pays for warming a watch cache.
    for server in ["sharded", "plain"] {
        let _ = run_one(&bin, &kubeconfig(server)?, n, 0)?;
    }
    let mut lines: BTreeMap<usize, Vec<Value>> = BTreeMap::new();
    for run in 0..opts.runs {
        for (i, c) in configs.iter().enumerate() {
            let line = run_one(&bin, &kubeconfig(c.server)?, n, c.shards)
                .with_context(|| format!("{} (run {})", c.name, run + 1))?;
            if let Some(e) = line["error"].as_str() {
                bail!("{}: {e}", c.name);
            }
            lines.entry(i).or_default().push(line);
        }
        eprintln!("bench: sharding run {}/{} done", run + 1, opts.runs);
    }
    drop(plane);

    let table = markdown(&configs, &lines, n, opts.runs, &super::command_line(args));
    println!("{table}");
    if let Some(path) = &opts.json {
        let doc = json!({
            "command": super::command_line(args),
            "runs": opts.runs,
            "configs": configs.iter().enumerate().map(|(i, c)| json!({
                "name": c.name, "server": c.server, "shards": c.shards, "lines": lines.get(&i),
            })).collect::<Vec<_>>(),
        });
        std::fs::write(path, serde_json::to_string_pretty(&doc)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("bench: wrote {}", path.display());
    }
    Ok(())
}

/// Builds kcache-bench (kcache only, with TLS for kube-apiserver and `load`) and returns it.
fn build(sh: &Shell, root: &Path) -> Result<PathBuf> {
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    let target = if target.is_absolute() { target } else { root.join(target) };
    cmd!(sh, "cargo build --release -p kcache-bench --no-default-features --features tls,server").run()?;
    let bin = target.join("release/kcache-bench");
    let copy = bin.with_file_name("kcache-bench-sharding");
    std::fs::copy(&bin, &copy).with_context(|| format!("copying {} to {}", bin.display(), copy.display()))?;
    Ok(copy)
}

fn run_one(bin: &Path, kubeconfig: &Path, n: usize, shards: usize) -> Result<Value> {
    let mut command = std::process::Command::new(bin);
    command
        .args(["--scenario", SCENARIO, "--side", "kcache", "-n", &n.to_string()])
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env_remove("KCACHE_BENCH_PROTOBUF")
        .env_remove("KCACHE_BENCH_STRIP_MANAGED_FIELDS")
        .env("KCACHE_BENCH_SHARDS", shards.to_string());
    let out = output_within(&mut command, super::RUN_TIMEOUT)?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().rev().find(|l| l.trim_start().starts_with('{')).with_context(|| {
        format!("{command:?} printed no JSON line ({}): {}", out.status, String::from_utf8_lossy(&out.stderr))
    })?;
    serde_json::from_str(line).with_context(|| format!("bad JSON line: {line}"))
}

/// The median of `f` over `lines`, and the spread ((max - min) / median).
fn median(lines: &[Value], f: impl Fn(&Value) -> Option<f64>) -> Option<(f64, f64)> {
    stats(&lines.iter().filter_map(f).collect::<Vec<_>>())
}

/// The table for docs/benchmarks.md.
fn markdown(
    configs: &[Config],
    lines: &BTreeMap<usize, Vec<Value>>,
    n: usize,
    runs: usize,
    command: &str,
) -> String {
    let empty = Vec::new();
    let of = |i: usize| lines.get(&i).unwrap_or(&empty);
    let bytes = |l: &Value| l["extra"]["bytes_received"].as_f64();
    let cpu = |l: &Value| l["cpu_seconds"].as_f64();
    let base_bytes = median(of(0), bytes).map(|m| m.0);
    let base_cpu = median(of(0), cpu).map(|m| m.0);
    let mut s = String::new();
    let _ = writeln!(s, "`{command}` ({n} ConfigMaps, median of {runs} runs, spread in parentheses):\n");
    let _ = writeln!(
        s,
        "| configuration | objects cached | mode | bytes received | of unsharded | CPU (s) | of unsharded | peak RSS | time to synced |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|");
    for (i, c) in configs.iter().enumerate() {
        let l = of(i);
        let cell = |m: Option<(f64, f64)>, fmt: &dyn Fn(f64) -> String| {
            m.map_or_else(|| "-".to_owned(), |(v, sp)| format!("{} ({:.0} %)", fmt(v), sp * 100.0))
        };
        let ratio = |m: Option<(f64, f64)>, base: Option<f64>| match (m, base) {
            (Some((v, _)), Some(b)) if b > 0.0 => format!("{:.2}", v / b),
            _ => "-".to_owned(),
        };
        let items = median(l, |l| l["extra"]["items"].as_f64()).map_or(0.0, |m| m.0);
        let mode = l.first().and_then(|l| l["extra"]["shard_mode"].as_str()).unwrap_or("-");
        let mb = |v: f64| format!("{:.1} MiB", v / (1024.0 * 1024.0));
        let _ = writeln!(
            s,
            "| {} | {items:.0} | {mode} | {} | {} | {} | {} | {} | {} |",
            c.name,
            cell(median(l, bytes), &mb),
            ratio(median(l, bytes), base_bytes),
            cell(median(l, cpu), &|v| format!("{v:.2}")),
            ratio(median(l, cpu), base_cpu),
            cell(median(l, |l| l["peak_rss_bytes"].as_f64()), &mb),
            cell(median(l, |l| l["extra"]["wall_seconds"].as_f64()), &|v| format!("{v:.2} s")),
        );
    }
    s
}
