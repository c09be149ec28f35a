//! `kcache-bench`: the kcache, std and kube-runtime sides of `cargo xtask bench`.
//!
//! ```text
//! kcache-bench --scenario NAME --side kcache|vecdeque|kube-runtime [-n N] [--quick]
//! kcache-bench --list
//! ```
//!
//! Prints one JSON line per result on stdout, the same shape as the client-go side
//! (`xtask/bench-go`):
//!
//! ```text
//! {"scenario":"ring_write_read","side":"kcache","ops":2000000,"ns_per_op":3.1,"ops_per_sec":3.2e8,
//!  "cpu_seconds":0.006,"peak_rss_bytes":12345678,"bytes_per_item":8.1,"extra":{"n":1000000,...}}
//! ```
//!
//! or `{"scenario":..,"side":..,"error":".."}` with exit status 2 when the side cannot run the
//! scenario (not yet implemented, or no counterpart). Numbers are never made up: a scenario whose
//! crate has no usable API yet reports that error.
//!
//! The measurement (see [`measure`]) is the one the Go side makes: wall time and getrusage CPU time
//! of the timed section, `ru_maxrss` for the process-wide peak RSS (so run one scenario per
//! process), and the growth of the peak during the section per op as `bytes_per_item`.
//!
//! Adding a scenario: write `fn(n: usize, t: &mut Timer) -> Outcome` in a module under
//! `scenarios/` (with a doc comment defining the workload exactly as the Go function does), and
//! put it in the side's slot of its entry in [`scenarios::SCENARIOS`].

mod measure;
#[cfg(feature = "server")]
mod scale;
mod scenarios;
#[cfg(feature = "server")]
mod serve;
mod workload;

use std::process::ExitCode;
use std::sync::OnceLock;

use serde_json::{Value, json};

use crate::measure::Timer;
use crate::scenarios::{SCENARIOS, Side};

const USAGE: &str = "\
usage: kcache-bench --scenario NAME --side kcache|vecdeque|kube-runtime [-n N] [--quick]
                    [--server URL | --kubeconfig PATH]
       kcache-bench --list
       kcache-bench serve --configmaps N [--mutate [--updates M]]
       kcache-bench serve --pods N
       kcache-bench load --kubeconfig PATH (--from M --configmaps N | --pods N)
";

static SERVER_URL: OnceLock<String> = OnceLock::new();

static KUBECONFIG: OnceLock<String> = OnceLock::new();

/// The `--server URL` of the informer scenarios (a `kcache-bench serve` process).
pub(crate) fn server_url() -> Option<&'static str> {
    SERVER_URL.get().map(String::as_str)
}

/// The client of the informer scenarios: for `--kubeconfig PATH` (a real kube-apiserver, `cargo
/// xtask bench --cluster local`) that kubeconfig's, else plain HTTP to `--server URL` with no auth.
/// Library defaults otherwise.
pub(crate) async fn client() -> kube::Client {
    kube::Client::try_from(config().await).unwrap_or_else(|e| panic!("client: {e}"))
}

/// The configuration [`client`] builds its client from.
pub(crate) async fn config() -> kube::Config {
    if let Some(path) = KUBECONFIG.get() {
        let kc =
            kube::config::Kubeconfig::read_from(path).unwrap_or_else(|e| panic!("kubeconfig {path}: {e}"));
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .unwrap_or_else(|e| panic!("kubeconfig {path}: {e}"))
    } else {
        let Some(url) = server_url() else {
            panic!("informer scenarios need --server URL (of `kcache-bench serve`) or --kubeconfig PATH");
        };
        kube::Config::new(url.parse().unwrap_or_else(|e| panic!("server URL {url}: {e}")))
    }
}

struct Args {
    scenario: String,
    side: String,
    n: Option<usize>,
    quick: bool,
    list: bool,
    serve: Option<usize>,
    mutate: bool,
    updates: usize,
    load: bool,
    from: usize,
    pods: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        scenario: String::new(),
        side: String::new(),
        n: None,
        quick: false,
        list: false,
        serve: None,
        mutate: false,
        updates: 0,
        load: false,
        from: 0,
        pods: 0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let arg = arg.trim_start_matches('-').to_owned();
        match arg.as_str() {
            "scenario" => args.scenario = it.next().ok_or("--scenario needs a value")?,
            "side" => args.side = it.next().ok_or("--side needs a value")?,
            "n" => {
                let v = it.next().ok_or("-n needs a value")?;
                let n: usize = v.replace('_', "").parse().map_err(|e| format!("-n {v}: {e}"))?;
                args.n = (n > 0).then_some(n);
            }
            "quick" => args.quick = true,
            "server" => {
                let url = it.next().ok_or("--server needs a URL")?;
                let _ = SERVER_URL.set(url);
            }
            "kubeconfig" => {
                let path = it.next().ok_or("--kubeconfig needs a path")?;
                let _ = KUBECONFIG.set(path);
            }
            "load" => args.load = true,
            "from" => {
                let v = it.next().ok_or("--from needs a value")?;
                args.from = v.replace('_', "").parse().map_err(|e| format!("--from {v}: {e}"))?;
            }
            "serve" => args.serve = Some(args.serve.unwrap_or(0)),
            "mutate" => args.mutate = true,
            "updates" => {
                let v = it.next().ok_or("--updates needs a value")?;
                args.updates = v.replace('_', "").parse().map_err(|e| format!("--updates {v}: {e}"))?;
            }
            "configmaps" => {
                let v = it.next().ok_or("--configmaps needs a value")?;
                let n: usize = v.replace('_', "").parse().map_err(|e| format!("--configmaps {v}: {e}"))?;
                args.serve = Some(n);
            }
            "pods" => {
                let v = it.next().ok_or("--pods needs a value")?;
                args.pods = v.replace('_', "").parse().map_err(|e| format!("--pods {v}: {e}"))?;
                args.serve = Some(args.serve.unwrap_or(0));
            }
            "list" => args.list = true,
            "h" | "help" => return Err(String::new()),
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(args)
}

fn error_line(scenario: &str, side: &str, error: &str) {
    println!("{}", json!({"scenario": scenario, "side": side, "error": error}));
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprint!("{e}\n{USAGE}");
            return ExitCode::from(64);
        }
    };
    #[cfg(feature = "server")]
    {
        if args.load {
            return serve::load(if args.pods > 0 {
                serve::Load::Pods { pods: args.pods }
            } else {
                serve::Load::ConfigMaps { from: args.from, to: args.serve.unwrap_or(0) }
            });
        }
        if let Some(configmaps) = args.serve {
            return serve::serve(configmaps, args.mutate, args.updates, args.pods);
        }
    }
    #[cfg(not(feature = "server"))]
    if args.load || args.serve.is_some() {
        eprintln!("kcache-bench: this build has no `serve` or `load` (built without the `server` feature)");
        return ExitCode::from(2);
    }
    if args.list {
        for s in SCENARIOS {
            let sides: Vec<&str> =
                Side::ALL.iter().filter(|side| s.runner(**side).is_ok()).map(|side| side.name()).collect();
            println!("{}\t{}\t{}\t{}", s.name, s.default_n, s.quick_n, sides.join(","));
        }
        return ExitCode::SUCCESS;
    }
    let Some(side) = Side::parse(&args.side) else {
        error_line(&args.scenario, &args.side, "unknown side (kcache, vecdeque or kube-runtime)");
        return ExitCode::from(2);
    };
    let Some(scenario) = SCENARIOS.iter().find(|s| s.name == args.scenario) else {
        error_line(&args.scenario, side.name(), "unknown scenario (see --list)");
        return ExitCode::from(2);
    };
    let run = match scenario.runner(side) {
        Ok(run) => run,
        Err(why) => {
            error_line(scenario.name, side.name(), &why);
            return ExitCode::from(2);
        }
    };
    let n = args.n.unwrap_or(if args.quick { scenario.quick_n } else { scenario.default_n });

    let mut timer = Timer::default();
    let outcome = run(n, &mut timer);
    let Some(m) = timer.measurement() else {
        error_line(scenario.name, side.name(), "internal error: the scenario did not stop its timer");
        return ExitCode::FAILURE;
    };
    let mut extra = outcome.extra;
    extra.insert("n".into(), json!(n));
    extra.insert("wall_seconds".into(), json!(m.wall.as_secs_f64()));
    let ops = outcome.ops.max(1);
    let wall_ns = m.wall.as_nanos() as f64;
    let line = json!({
        "scenario": scenario.name,
        "side": side.name(),
        "ops": outcome.ops,
        "ns_per_op": wall_ns / ops as f64,
        "ops_per_sec": ops as f64 / m.wall.as_secs_f64(),
        "cpu_seconds": m.cpu_seconds,
        "peak_rss_bytes": measure::peak_rss_bytes(),
        "bytes_per_item": m.rss_growth_bytes as f64 / ops as f64,
        "extra": Value::Object(extra),
    });
    println!("{line}");
    ExitCode::SUCCESS
}
