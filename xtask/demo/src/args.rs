//! Command-line flags: a small hand parser (`--flag VALUE` or `--flag=VALUE`).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};

/// The help text.
pub(crate) const USAGE: &str = "\
kcache-demo: a sample controller built from kcache's public APIs, on the embedded API server
(default) or a real cluster, with churn, a live display and a final verification.

usage: cargo xtask demo [flags]

  --kubeconfig PATH     run against the cluster of this kubeconfig (current context), in a
                        throwaway namespace created and deleted by the demo
  --watch-only          write nothing: observe a namespace for --duration, print statistics and
                        check that the cache equals the server's list
  --namespace NS        the namespace to observe with --watch-only (default: default)
  --objects N           number of distinct ConfigMap names the churn uses (default 200)
  --rate R              churn operations per second: creates, updates, deletes (default 120)
  --duration SECS       how long the churn (or the observation) lasts (default 15)
  --workers N           reconcile workers draining the workqueue (default 4)
  --failure-rate F      fraction of reconcile attempts that fail, 0 <= F < 1 (default 0.1)
  --slow-handler-ms MS  time the slow handler spends on each notification (default 10; 20 with
                        --quick)
  --metrics-addr ADDR   serve Prometheus/OpenMetrics text at http://ADDR/metrics while running
  --settle-timeout SECS bound on the wait for quiescence after the churn (default 60)
  --seed S              seed of the churn and failure injection (default 42)
  --replicas N          N >= 2 replicas of the controller on one Lease (kcache-leaderelection):
                        only the leader runs its workers; the leader is killed a third of the
                        way through and the failover shown live; the verification also checks
                        that one replica led at a time
  --shards N            N >= 2 replicas splitting the objects by hash (kcache-sharding: member
                        Leases, a sharded informer each); replica-0 is killed a third of the way
                        through and its range shown taken over; the verification also checks
                        that every object was reconciled by exactly one owner at a time
  --quick               a few seconds with small numbers (explicit flags still win)
  -h, --help            this text

Exit status: 0 when the verification passed, 1 when it failed or the run broke, 2 for bad flags.
";

/// Everything a run needs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Args {
    pub(crate) kubeconfig: Option<PathBuf>,
    pub(crate) watch_only: bool,
    pub(crate) namespace: Option<String>,
    pub(crate) objects: usize,
    pub(crate) rate: f64,
    pub(crate) duration: Duration,
    pub(crate) workers: usize,
    pub(crate) failure_rate: f64,
    pub(crate) slow_handler: Duration,
    pub(crate) metrics_addr: Option<String>,
    pub(crate) settle_timeout: Duration,
    pub(crate) seed: u64,
    pub(crate) quick: bool,
    /// Replicas on one Lease; 0 for the single-process demo.
    pub(crate) replicas: usize,
    /// Sharded replicas (`--shards`); 0 without.
    pub(crate) shards: usize,
}

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Parsed {
    Run(Args),
    Help,
}

/// Flags given explicitly; the rest comes from the defaults (or the `--quick` defaults).
#[derive(Debug, Default)]
struct Given {
    kubeconfig: Option<PathBuf>,
    watch_only: bool,
    namespace: Option<String>,
    objects: Option<usize>,
    rate: Option<f64>,
    duration: Option<f64>,
    workers: Option<usize>,
    failure_rate: Option<f64>,
    slow_handler_ms: Option<u64>,
    metrics_addr: Option<String>,
    settle_timeout: Option<f64>,
    seed: Option<u64>,
    quick: bool,
    replicas: Option<usize>,
    shards: Option<usize>,
}

fn number<T: std::str::FromStr>(flag: &str, value: &str) -> Result<T>
where
    T::Err: std::error::Error + Send + Sync + 'static,
{
    value.parse().with_context(|| format!("{flag}: cannot parse `{value}`"))
}

/// Parses the flags (without the program name).
pub(crate) fn parse(args: impl IntoIterator<Item = String>) -> Result<Parsed> {
    let mut given = Given::default();
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_owned(), Some(v.to_owned())),
            _ => (arg.clone(), None),
        };
        let mut value = || -> Result<String> {
            match &inline {
                Some(v) => Ok(v.clone()),
                None => it.next().with_context(|| format!("{flag} needs a value")),
            }
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(Parsed::Help),
            "--quick" => given.quick = true,
            "--watch-only" => given.watch_only = true,
            "--kubeconfig" => given.kubeconfig = Some(PathBuf::from(value()?)),
            "--namespace" => given.namespace = Some(value()?),
            "--objects" => given.objects = Some(number(&flag, &value()?)?),
            "--rate" => given.rate = Some(number(&flag, &value()?)?),
            "--duration" => given.duration = Some(number(&flag, &value()?)?),
            "--workers" => given.workers = Some(number(&flag, &value()?)?),
            "--failure-rate" => given.failure_rate = Some(number(&flag, &value()?)?),
            "--slow-handler-ms" => given.slow_handler_ms = Some(number(&flag, &value()?)?),
            "--metrics-addr" => given.metrics_addr = Some(value()?),
            "--settle-timeout" => given.settle_timeout = Some(number(&flag, &value()?)?),
            "--seed" => given.seed = Some(number(&flag, &value()?)?),
            "--replicas" => given.replicas = Some(number(&flag, &value()?)?),
            "--shards" => given.shards = Some(number(&flag, &value()?)?),
            other => bail!("unknown flag `{other}` (see --help)"),
        }
        if matches!(flag.as_str(), "--quick" | "--watch-only" | "-h" | "--help") && inline.is_some() {
            bail!("{flag} takes no value");
        }
    }
    resolve(given).map(Parsed::Run)
}

fn resolve(g: Given) -> Result<Args> {
    // (objects, rate, duration s, workers, slow handler ms)
    let (objects, rate, duration, workers, slow) =
        if g.quick { (40, 80.0, 3.0, 2, 20) } else { (200, 120.0, 15.0, 4, 10) };
    let args = Args {
        kubeconfig: g.kubeconfig,
        watch_only: g.watch_only,
        namespace: g.namespace,
        objects: g.objects.unwrap_or(objects),
        rate: g.rate.unwrap_or(rate),
        duration: secs("--duration", g.duration.unwrap_or(duration))?,
        workers: g.workers.unwrap_or(workers),
        failure_rate: g.failure_rate.unwrap_or(0.1),
        slow_handler: Duration::from_millis(g.slow_handler_ms.unwrap_or(slow)),
        metrics_addr: g.metrics_addr,
        settle_timeout: secs("--settle-timeout", g.settle_timeout.unwrap_or(60.0))?,
        seed: g.seed.unwrap_or(42),
        quick: g.quick,
        replicas: g.replicas.unwrap_or(0),
        shards: g.shards.unwrap_or(0),
    };
    if g.shards.is_some() && args.shards < 2 {
        bail!("--shards must be at least 2");
    }
    if args.shards > 0 && (args.watch_only || args.replicas > 0) {
        bail!("--shards writes (the churn) and runs its own replicas: not with --watch-only or --replicas");
    }
    if g.replicas.is_some() && args.replicas < 2 {
        bail!("--replicas must be at least 2");
    }
    if args.replicas > 0 && args.watch_only {
        bail!("--replicas writes (the churn): not with --watch-only");
    }
    if args.objects == 0 {
        bail!("--objects must be at least 1");
    }
    if !(args.rate.is_finite() && args.rate > 0.0) {
        bail!("--rate must be a positive number of operations per second");
    }
    if args.workers == 0 {
        bail!("--workers must be at least 1");
    }
    if !(0.0..1.0).contains(&args.failure_rate) {
        bail!("--failure-rate must be in 0..1 (1 would never converge)");
    }
    if args.namespace.is_some() && !args.watch_only {
        bail!("--namespace is only for --watch-only (the churn uses a namespace of its own)");
    }
    Ok(args)
}

fn secs(flag: &str, s: f64) -> Result<Duration> {
    if !(s.is_finite() && s > 0.0 && s < 86_400.0) {
        bail!("{flag} must be a positive number of seconds");
    }
    Ok(Duration::from_secs_f64(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Result<Args> {
        match parse(args.iter().map(|s| (*s).to_owned()))? {
            Parsed::Run(a) => Ok(a),
            Parsed::Help => bail!("help"),
        }
    }

    #[test]
    fn defaults_quick_and_explicit_flags() {
        let d = run(&[]).unwrap();
        assert_eq!((d.objects, d.workers, d.seed, d.quick), (200, 4, 42, false));
        assert_eq!(d.duration, Duration::from_secs(15));

        let q = run(&["--quick", "--objects=7", "--duration", "1.5"]).unwrap();
        assert_eq!((q.objects, q.workers, q.quick), (7, 2, true));
        assert_eq!(q.duration, Duration::from_millis(1500));

        let k = run(&["--kubeconfig", "/tmp/k", "--watch-only", "--namespace", "x"]).unwrap();
        assert_eq!(k.kubeconfig, Some(PathBuf::from("/tmp/k")));
        assert!(k.watch_only);
        assert_eq!(k.namespace.as_deref(), Some("x"));
    }

    #[test]
    fn rejects_bad_flags() {
        assert!(run(&["--nope"]).is_err());
        assert!(run(&["--objects"]).is_err());
        assert!(run(&["--objects", "x"]).is_err());
        assert!(run(&["--failure-rate", "1"]).is_err());
        assert!(run(&["--rate", "0"]).is_err());
        assert!(run(&["--namespace", "x"]).is_err());
        assert!(run(&["--quick=1"]).is_err());
        assert!(run(&["--replicas", "1"]).is_err());
        assert!(run(&["--replicas", "3", "--watch-only"]).is_err());
        assert_eq!(run(&["--replicas", "3"]).unwrap().replicas, 3);
        assert!(run(&["--shards", "1"]).is_err());
        assert!(run(&["--shards", "3", "--replicas", "2"]).is_err());
        assert_eq!(run(&["--shards", "3"]).unwrap().shards, 3);
        assert_eq!(parse(["--help".to_owned()]).unwrap(), Parsed::Help);
    }
}
