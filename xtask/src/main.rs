//! `cargo xtask`: kcache's own build tool (matklad's xtask pattern), one module per task.
//!
//! `cargo xtask ci` mirrors CI exactly: if it passes locally, CI is green.

mod bench;
mod chaos;
mod ci;
mod cluster;
mod control_plane;
mod demo;
mod e2e;
mod fuzz;
mod leaderelection_go;
mod openapi;
mod protobuf_direct;
mod protobuf_schema;
mod shard_conformance;
mod tidy;

use std::path::PathBuf;

use anyhow::{Result, bail};

const USAGE: &str = "\
cargo xtask <task> [options]

tasks:
  bench [--quick] [--filter NAME] [--json PATH] [--runs R] [--no-write] [--cluster local]
                side-by-side benchmarks: kcache vs client-go (Go) vs kube-runtime / VecDeque,
                table written to docs/benchmarks.md
  chaos [--runs N] [--seed S] [--keys K]
                seeded chaos convergence runs (churn + every testserver fault), summary;
                a failing run prints its seed and replay command
  capture-openapi [--out PATH]
                start a throwaway kube-apiserver and write the OpenAPI v3 schemas of the kinds
                kcache-testserver serves (its server-side apply knowledge) to
                crates/testserver/openapi/kube-apiserver-<version>.json
  chaos leader-election [--runs N] [--seed S] [--faults F]
                seeded leader-election chaos (kills, freezes, partitions, outages, slow
                answers, conflict storms, clock skew): mutual exclusion and recovery
  ci            rustfmt check, clippy (all targets, warnings denied), tests incl. doctests,
                loom models, rustdoc (warnings denied), MSRV check, cargo-deny (licenses bans sources)
  cluster <up [--feature-gates G=true,...] [--legacy] | status | down> [--state-dir DIR]
                a real etcd + kube-apiserver (built from Go modules) on loopback, in the
                background, for `demo --kubeconfig` and multi-process tests
  demo [args]   the main job: a working pipeline on the embedded API server
  fuzz [--time SECS] [--target NAME]
                cargo-fuzz targets (nightly, installed if missing), SECS (60) each, one at a time
  e2e --cluster <local|kind|embedded|kubeconfig=PATH> [-- TEST-ARGS]
                the cross-crate suite against a real API server (local: etcd + kube-apiserver
                built from Go modules and cached) or kcache-testserver
  protobuf-schema
                regenerate crates/protobuf/src/generated.rs (the built-in types' protobuf
                messages) from the Go types of k8s.io/api by reflection (needs Go)
  protobuf-direct
                regenerate crates/protobuf/src/direct/generated.rs (decoders writing
                k8s-openapi's structs by field number) from that table and k8s-openapi's sources
  shard-conformance [--check]
                regenerate (or with --check, verify) kcache-shard-selector's conformance
                table with Go's apimachinery pkg/sharding (xtask/shard-hash-go; needs Go)
  help          this text
";

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let task = args.next().unwrap_or_else(|| "help".to_owned());
    let rest: Vec<String> = args.collect();
    match task.as_str() {
        "bench" => bench::run(&rest),
        "capture-openapi" => openapi::run(&rest),
        "chaos" => chaos::run(&rest),
        "ci" => ci::run(&rest),
        "cluster" => cluster::run(&rest),
        "demo" => demo::run(&rest),
        "fuzz" => fuzz::run(&rest),
        "e2e" => e2e::run(&rest),
        "protobuf-schema" => protobuf_schema::run(&rest),
        "protobuf-direct" => protobuf_direct::run(&rest),
        "shard-conformance" => shard_conformance::run(&rest),
        "help" | "-h" | "--help" => {
            print!("{USAGE}");
            Ok(())
        }
        other => bail!("unknown task `{other}`\n\n{USAGE}"),
    }
}

/// The standard output of `go run .` in `module` (a directory under the workspace root), its
/// standard error passed through: the Go generators behind `protobuf-schema` and
/// `shard-conformance`.
pub(crate) fn go_run(module: &str) -> Result<Vec<u8>> {
    use anyhow::Context;
    let output = std::process::Command::new("go")
        .args(["run", "."])
        .current_dir(project_root().join(module))
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("running `go run .` in {module} (needs Go)"))?;
    if !output.status.success() {
        bail!("{module} failed: {}", output.status);
    }
    Ok(output.stdout)
}

/// The workspace root (the parent of this crate's manifest directory).
pub(crate) fn project_root() -> PathBuf {
    let dir = env!("CARGO_MANIFEST_DIR");
    PathBuf::from(dir).parent().expect("xtask lives one level below the root").to_owned()
}
