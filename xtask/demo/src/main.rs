//! `kcache-demo`, run by `cargo xtask demo`: a sample controller built only from kcache's public
//! APIs, on the embedded `kcache-testserver` (or a real cluster with `--kubeconfig`), while a churn
//! generator creates, updates and deletes ConfigMaps through the API.
//!
//! The pipeline: one namespace-scoped ConfigMap informer from a `SharedInformerFactory`, with
//! three handlers:
//!
//! * **enqueue**: the handler of a kcache-controller `Controller` on that informer, which puts
//!   `namespace/name` keys into its workqueue (default controller rate limiter), drained by
//!   `--workers` workers. The reconciler gets the object from the cache (or, through `on_gone`,
//!   the key of a deleted one), reads the namespace and group indexes, fails `--failure-rate` of
//!   its attempts (so retries and backoff show), and records every resourceVersion it reconciled;
//! * **stats**: counts adds, updates and deletes (and deletes per key);
//! * **slow**: sleeps `--slow-handler-ms` per notification; its backlog rises and drains without
//!   slowing the other two.
//!
//! At the end it waits for quiescence and verifies: the cache equals the server's list, every
//! existing object's final resourceVersion was reconciled, every delete was seen. It prints
//! `verification: PASSED` or `verification: FAILED: <reasons>` and exits non-zero on failure.
//!
//! With `--replicas N` it runs N replicas of a controller on one Lease instead (`replicas.rs`):
//! only the leader runs its workers; the leader is killed a third of the way through the churn,
//! the failover is shown live, and the verification also checks one leader at a time.
//!
//! With `--shards N` it runs N replicas that split the objects by hash (`shards.rs`,
//! kcache-sharding): each replica's share and object count live, replica-0 killed a third of the
//! way through and its range taken over, and a ledger proving one owner at a time per object.
//!
//! Object contents are never logged or printed: only names, keys and counts.

mod args;
mod churn;
mod controller;
mod display;
mod metrics;
mod replicas;
mod shards;
mod snapshot;
mod verify;

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kcache_controller::{Controller, Watch};
use kcache_informer::{HandlerOptions, InformerScope, SharedInformerFactory, wait_for_cache_sync};
use kcache_store::{Indexers, index_func};
use kcache_testserver::TestServer;
use kcache_workqueue::default_controller_rate_limiter;
use kube::api::{DeleteParams, ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, ResourceExt};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::args::{Args, Parsed, USAGE};
use crate::churn::ChurnStats;
use crate::controller::{
    CONTROLLER, EventStats, GROUP_INDEX, GROUP_LABEL, Reconciler, SlowHandler, StatsHandler,
};
use crate::display::{Console, LiveDisplay};
use crate::metrics::Metrics;
use crate::snapshot::{Probe, Snapshot};

/// Bound on the informer's initial sync.
const SYNC_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound on each shutdown step.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);
/// The namespace used on the embedded server.
const EMBEDDED_NAMESPACE: &str = "kcache-demo";

fn main() -> ExitCode {
    let args = match args::parse(std::env::args().skip(1)) {
        Ok(Parsed::Help) => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Ok(Parsed::Run(a)) => a,
        Err(e) => {
            eprintln!("kcache-demo: {e:#}");
            return ExitCode::from(2);
        }
    };
    init_tracing();
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("kcache-demo: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(run(args));
    // Never hang on the way out (a stuck connection, a blocked thread).
    rt.shutdown_timeout(Duration::from_secs(2));
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("kcache-demo: error: {e:#}");
            println!("verification: FAILED: the run did not complete: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn init_tracing() {
    // Failed reconciles are the point of the demo; the controller's per-failure warning would
    // drown the display, so it logs errors only unless RUST_LOG says otherwise.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new("warn,kcache_workqueue=error,kcache_controller=error")
    });
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
}

/// Where the run happens.
struct Target {
    client: kube::Client,
    /// Kept alive for the run.
    _server: Option<TestServer>,
    description: String,
    embedded: bool,
}

async fn connect(args: &Args) -> Result<Target> {
    match &args.kubeconfig {
        None => {
            let server = TestServer::start().await;
            Ok(Target {
                client: server.client(),
                description: format!("embedded kcache-testserver at {}", server.url()),
                _server: Some(server),
                embedded: true,
            })
        }
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .with_context(|| format!("loading kubeconfig {}", path.display()))?;
            let description = format!("cluster at {} (kubeconfig {})", config.cluster_url, path.display());
            let client = kube::Client::try_from(config).context("building the client")?;
            Ok(Target { client, _server: None, description, embedded: false })
        }
    }
}

/// Returns whether the verification passed.
async fn run(args: Args) -> Result<bool> {
    let wall = Instant::now();
    let console = Console::new(std::io::stdout().is_terminal());
    let target = connect(&args).await?;
    let (namespace, throwaway) = match (&args.kubeconfig, args.watch_only) {
        (None, _) => (EMBEDDED_NAMESPACE.to_owned(), false),
        (Some(_), true) => (args.namespace.clone().unwrap_or_else(|| "default".to_owned()), false),
        (Some(_), false) => (format!("kcache-demo-{:08x}", rand::random::<u32>()), true),
    };
    console.say(format!("kcache demo: {}, namespace {namespace}", target.description));
    if throwaway {
        let ns = Namespace {
            metadata: ObjectMeta { name: Some(namespace.clone()), ..ObjectMeta::default() },
            ..Namespace::default()
        };
        Api::<Namespace>::all(target.client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .with_context(|| format!("creating the throwaway namespace {namespace}"))?;
        console.say(format!("  created throwaway namespace {namespace}"));
    }
    // Ctrl-C stops the run; the throwaway namespace is still deleted.
    let work = async {
        if args.shards > 0 {
            shards::run(&args, target.client.clone(), &namespace).await
        } else if args.replicas > 0 {
            replicas::run(&args, target.client.clone(), &namespace).await
        } else {
            run_in(&args, &target, &namespace, &console, wall).await
        }
    };
    let outcome = tokio::select! {
        r = work => r,
        _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted")),
    };
    if throwaway {
        let api = Api::<Namespace>::all(target.client.clone());
        match tokio::time::timeout(SHUTDOWN_TIMEOUT, api.delete(&namespace, &DeleteParams::default())).await {
            Ok(Ok(_)) => console.say(format!("deleted throwaway namespace {namespace}")),
            Ok(Err(e)) => eprintln!("kcache-demo: could not delete namespace {namespace}: {e}"),
            Err(_) => eprintln!("kcache-demo: deleting namespace {namespace} timed out"),
        }
    }
    outcome
}

async fn run_in(
    args: &Args,
    target: &Target,
    namespace: &str,
    console: &Console,
    wall: Instant,
) -> Result<bool> {
    let api: Api<ConfigMap> = Api::namespaced(target.client.clone(), namespace);
    let churning = !args.watch_only;
    if churning {
        console.say(format!(
            "  churn: {} objects, {} ops/s for {:.1} s | {} workers | failure rate {} | slow handler {} ms | seed {}",
            args.objects,
            args.rate,
            args.duration.as_secs_f64(),
            args.workers,
            args.failure_rate,
            args.slow_handler.as_millis(),
            args.seed
        ));
    } else {
        console.say(format!(
            "  watch only: observing for {:.1} s | {} workers | failure rate {} | slow handler {} ms",
            args.duration.as_secs_f64(),
            args.workers,
            args.failure_rate,
            args.slow_handler.as_millis(),
        ));
    }

    // Half the names exist before the informer starts: they arrive as its initial list. On the
    // embedded server a watch-only run gets all of them, so there is something to observe.
    let existing = match (churning, target.embedded) {
        (true, _) => args.objects / 2,
        (false, true) => args.objects,
        (false, false) => 0,
    };
    if existing > 0 {
        churn::precreate(&api, existing).await.context("creating the initial objects")?;
    }

    let metrics = args.metrics_addr.as_ref().map(|_| Metrics::new());
    let factory = Arc::new(SharedInformerFactory::new(target.client.clone(), Duration::ZERO));
    let informer = factory.informer::<ConfigMap>(&InformerScope::namespace(namespace));
    let group_index =
        index_func(|cm: &ConfigMap| Ok(cm.labels().get(GROUP_LABEL).cloned().into_iter().collect()));
    informer.add_indexers(Indexers::from([(GROUP_INDEX.to_owned(), group_index)]))?;
    if let Some(m) = &metrics {
        informer.set_reflector_metrics(Arc::new(m.reflector.clone()))?;
    }
    let watch_errors = Arc::new(AtomicU64::new(0));
    {
        let watch_errors = Arc::clone(&watch_errors);
        let counter = metrics.as_ref().map(|m| m.demo.watch_errors.clone());
        informer.set_watch_error_handler(move |name, e| {
            watch_errors.fetch_add(1, Ordering::Relaxed);
            if let Some(c) = &counter {
                c.inc();
            }
            tracing::warn!(informer = name, error = %e, "list/watch error");
        })?;
    }

    let events = Arc::new(EventStats::default());
    let reconciler = Arc::new(Reconciler::new(namespace, args.failure_rate, args.seed));
    let options = |name: &str| HandlerOptions { name: Some(name.to_owned()), ..HandlerOptions::default() };
    let stats = informer
        .add_event_handler_with_options(StatsHandler { stats: Arc::clone(&events) }, options("stats"))?;
    let slow =
        informer.add_event_handler_with_options(SlowHandler { delay: args.slow_handler }, options("slow"))?;
    // The controller adds the third handler ("enqueue") to the same shared informer.
    let mut controller =
        Controller::<ConfigMap>::with_factory(Arc::clone(&factory), Watch::namespace(namespace))
            .name(CONTROLLER)
            .workers(args.workers)
            .rate_limiter(default_controller_rate_limiter());
    if let Some(m) = &metrics {
        controller = controller.queue_metrics(Arc::new(m.provider.clone()));
    }
    let controller = controller
        .context_arc(Arc::clone(&reconciler))
        .reconcile(Reconciler::reconcile)
        .on_gone(Reconciler::gone);
    let controller_health = controller.health_check();

    let demo_metrics = match (metrics, &args.metrics_addr) {
        (Some(m), Some(addr)) => {
            let (bound, demo) = m.serve(addr)?;
            console.say(format!("  metrics: http://{bound}/metrics"));
            Some(demo)
        }
        _ => None,
    };

    // The controller registers its handler, starts the factory's informer, waits for it to
    // sync and runs its workers until cancelled.
    let stop_controller = CancellationToken::new();
    let running = tokio::spawn(controller.run(stop_controller.clone()));
    let synced = tokio::time::timeout(
        SYNC_TIMEOUT,
        wait_for_cache_sync(&stop_controller, &[&informer, &stats, &slow]),
    )
    .await;
    if !matches!(synced, Ok(true)) {
        stop_controller.cancel();
        factory.shutdown().await;
        bail!("the informer did not sync within {SYNC_TIMEOUT:?}");
    }
    console.say(format!(
        "  informer synced: {} objects after {:.2} s",
        informer.indexer().len(),
        wall.elapsed().as_secs_f64()
    ));

    let churn_stats = Arc::new(ChurnStats::default());
    let churn_start = Instant::now();
    let probe = Arc::new(Probe {
        start: churn_start,
        informer: informer.clone(),
        controller: controller_health,
        reconciler: Arc::clone(&reconciler),
        events: Arc::clone(&events),
        churn: Arc::clone(&churn_stats),
    });
    console.set_phase(if churning { "churn" } else { "watching" });
    let display =
        LiveDisplay::start(console.clone(), Arc::clone(&probe), (args.duration, churning), demo_metrics);
    if churning {
        let plan = churn::Plan::from_args(args, existing);
        churn::run(api.clone(), namespace, plan, Arc::clone(&churn_stats)).await;
    } else {
        tokio::time::sleep(args.duration).await;
    }
    let churn_took = churn_start.elapsed();
    console.set_phase("settling");
    let settled = verify::settle(&probe, &api, args.settle_timeout).await;
    console.set_phase("done");
    display.stop().await;

    let snap = probe.snapshot();
    let mut failures = Vec::new();
    if settled.quiet {
        if churning {
            failures.extend(verify::check_churn(
                &settled.server,
                &reconciler,
                &churn_stats.deletes_by_key(),
                &events.deletes_by_key(),
            ));
        }
    } else {
        failures.push(format!(
            "not quiet within {:.0} s: {}",
            args.settle_timeout.as_secs_f64(),
            settled.reasons.join("; ")
        ));
    }

    stop_controller.cancel();
    match tokio::time::timeout(SHUTDOWN_TIMEOUT, running).await {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(e))) => eprintln!("kcache-demo: the controller stopped with an error: {e}"),
        Ok(Err(e)) => eprintln!("kcache-demo: the controller's task failed: {e}"),
        Err(_) => eprintln!("kcache-demo: the workers did not stop within {SHUTDOWN_TIMEOUT:?}"),
    }
    if tokio::time::timeout(SHUTDOWN_TIMEOUT, factory.shutdown()).await.is_err() {
        eprintln!("kcache-demo: the informer did not stop within {SHUTDOWN_TIMEOUT:?}");
    }

    let phases = Phases {
        setup: churn_start.duration_since(wall),
        churn: churn_took,
        settle: settled.took,
        wall: wall.elapsed(),
    };
    print_summary(args, &snap, &churn_stats, &events, watch_errors.load(Ordering::Relaxed), &phases);
    if failures.is_empty() {
        let what = if churning {
            "cache == server list; every final resourceVersion reconciled; every delete seen"
        } else {
            "cache == server list"
        };
        println!("verification: PASSED ({what}; {} objects)", settled.server.len());
        Ok(true)
    } else {
        println!("verification: FAILED: {}", failures.join("; "));
        Ok(false)
    }
}

struct Phases {
    setup: Duration,
    churn: Duration,
    settle: Duration,
    wall: Duration,
}

fn print_summary(
    args: &Args,
    s: &Snapshot,
    churn: &ChurnStats,
    events: &EventStats,
    watch_errors: u64,
    p: &Phases,
) {
    let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
    println!();
    println!("summary");
    println!(
        "  {:<20} {:.1} s (setup {:.1} s, {} {:.1} s, settle {:.1} s)",
        "wall time",
        p.wall.as_secs_f64(),
        p.setup.as_secs_f64(),
        if args.watch_only { "watch" } else { "churn" },
        p.churn.as_secs_f64(),
        p.settle.as_secs_f64()
    );
    if !args.watch_only {
        println!(
            "  {:<20} {} ops ({:.0}/s): {} creates, {} updates, {} deletes; {} errors",
            "churn",
            churn.ops(),
            churn.ops() as f64 / p.churn.as_secs_f64().max(1e-9),
            n(&churn.creates),
            n(&churn.updates),
            n(&churn.deletes),
            n(&churn.errors)
        );
    }
    println!(
        "  {:<20} {}: {} adds ({} initial), {} updates, {} deletes ({} tombstones); {} list/watch errors",
        "informer events",
        events.total(),
        n(&events.adds),
        n(&events.initial_adds),
        n(&events.updates),
        n(&events.deletes),
        n(&events.tombstones),
        watch_errors
    );
    println!("  {:<20} {} objects, last synced resourceVersion {}", "cache", s.cache_size, s.last_sync_rv);
    println!(
        "  {:<20} {} attempts: {} ok, {} of deleted keys, {} failed and retried; longest retry streak {}",
        "reconciles", s.attempts, s.reconciled, s.reconciled_absent, s.failures, s.max_requeues
    );
    println!("  {:<20} {:>10} {:>10} {:>12}", "handler", "delivered", "pending", "max pending");
    for l in &s.listeners {
        let name = if l.name == "slow" {
            format!("slow ({} ms)", args.slow_handler.as_millis())
        } else {
            l.name.clone()
        };
        println!("  {:<20} {:>10} {:>10} {:>12}", name, l.delivered, l.pending, l.high_water);
    }
    let slow = s.listeners.iter().find(|l| l.name == "slow").map_or(0, |l| l.high_water);
    let others = s.listeners.iter().filter(|l| l.name != "slow").map(|l| l.high_water).max().unwrap_or(0);
    if slow > 2 * others.max(1) {
        println!(
            "  the slow handler's backlog peaked at {slow} notifications, the others' at {others}: \
             a slow handler delays only itself"
        );
    } else {
        println!(
            "  the slow handler kept up at this rate (raise --rate or --slow-handler-ms to see its backlog)"
        );
    }
}
