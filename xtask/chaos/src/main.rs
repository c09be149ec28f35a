//! `kcache-chaos --runs N --seed S [--keys K]`: runs seeds S, S+1, ..., S+N-1, prints a summary
//! (faults injected by kind, effects observed, events, failures with their replay commands) and
//! exits non-zero when any run failed.
//!
//! `kcache-chaos leader-election --runs N --seed S [--faults F]`: the same for leader election
//! (`kcache_chaos::leader`), runs spread over the machine's cores.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use kcache_chaos::{Config, RunReport, replay_command, run_blocking};

const USAGE: &str = "\
kcache-chaos [--runs N] [--seed S] [--keys K] [--fault-every F] [--no-final-restart] [--no-hung-watches]
kcache-chaos leader-election [--runs N] [--seed S] [--faults F]

  --runs N             number of runs (default 1); run i uses seed S + i
  --seed S             first seed (default 1)
  --keys K             keys in the universe (default 1000); the churn makes 3 writes per key
  --fault-every F      on average one fault per F writes (default 60)
  --no-final-restart   after clearing the faults, leave the live watches to deliver the final
                       state (a clock jump after 3 s replaces hung ones; reported as notes)
  --no-hung-watches    inject no hung streams; with --no-final-restart a run whose live
                       watches do not deliver the final state within 3 s fails
";

struct Args {
    runs: u64,
    seed: u64,
    config: Config,
}

fn parse_args() -> Result<Option<Args>> {
    let mut args = Args { runs: 1, seed: 1, config: Config::default() };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = |name: &str| it.next().with_context(|| format!("{name} needs a value"));
        match flag.as_str() {
            "--runs" => args.runs = value("--runs")?.parse().context("--runs")?,
            "--seed" => args.seed = value("--seed")?.parse().context("--seed")?,
            "--keys" => {
                let keys = value("--keys")?.parse().context("--keys")?;
                args.config = Config { fault_every: args.config.fault_every, ..Config::with_keys(keys) };
            }
            "--fault-every" => {
                args.config.fault_every = value("--fault-every")?.parse().context("--fault-every")?
            }
            "--no-final-restart" => args.config.final_restart = false,
            "--no-hung-watches" => args.config.hung_watches = false,
            "-h" | "--help" => {
                print!("{USAGE}");
                return Ok(None);
            }
            other => bail!("unknown argument `{other}`\n\n{USAGE}"),
        }
    }
    Ok(Some(args))
}

fn main() -> Result<ExitCode> {
    if std::env::args().nth(1).as_deref() == Some("leader-election") {
        return leader_election_main();
    }
    let Some(args) = parse_args()? else { return Ok(ExitCode::SUCCESS) };
    let config = args.config.clone();
    let started = Instant::now();
    let mut faults: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut observed: BTreeMap<String, u64> = BTreeMap::new();
    let (mut writes, mut events, mut reconciles) = (0u64, 0u64, 0u64);
    let mut slowest = Duration::ZERO;
    let mut quiescence: Vec<Duration> = Vec::new();
    let mut notes = 0usize;
    let mut failed: Vec<RunReport> = Vec::new();
    for i in 0..args.runs {
        let seed = args.seed.wrapping_add(i);
        let report = run_blocking(seed, &config);
        for (k, n) in &report.faults {
            *faults.entry(k).or_default() += n;
        }
        for (k, n) in &report.observed {
            *observed.entry(k.clone()).or_default() += n;
        }
        writes += report.writes;
        events += report.events;
        reconciles += report.reconciles;
        slowest = slowest.max(report.elapsed);
        quiescence.push(report.quiescence);
        for n in &report.notes {
            eprintln!("note, seed {seed}: {n}");
        }
        notes += report.notes.len();
        if !report.passed() {
            eprintln!("FAILED seed {seed} ({} violations) after {:.2?}:", report.violations, report.elapsed);
            for f in &report.failures {
                eprintln!("  {f}");
            }
            eprintln!("  replay: {}", replay_command(seed, &config));
            failed.push(report);
        }
        let done = i + 1;
        if args.runs >= 20 && done % (args.runs / 10).max(1) == 0 {
            eprintln!("{done}/{} runs, {} failed, {:.1?}", args.runs, failed.len(), started.elapsed());
        }
    }
    let wall = started.elapsed();

    println!(
        "kcache-chaos: seeds {}..={}, {} keys",
        args.seed,
        args.seed.wrapping_add(args.runs.saturating_sub(1)),
        config.keys
    );
    println!("runs: {}, passed: {}, failed: {}", args.runs, args.runs - failed.len() as u64, failed.len());
    println!(
        "wall time: {wall:.1?} (mean {:.0?} per run, slowest {slowest:.0?})",
        wall / u32::try_from(args.runs.max(1)).unwrap_or(u32::MAX)
    );
    quiescence.sort();
    let pct = |p: usize| quiescence.get((quiescence.len() * p / 100).min(quiescence.len().saturating_sub(1)));
    println!(
        "quiescence (faults cleared -> converged): median {:.0?}, p99 {:.0?}, max {:.0?}",
        pct(50).copied().unwrap_or_default(),
        pct(99).copied().unwrap_or_default(),
        quiescence.last().copied().unwrap_or_default()
    );
    println!("writes: {writes}, handler notifications: {events}, reconciles: {reconciles}");
    if !config.final_restart {
        println!("runs whose live watches did not converge within 3 s (clock jump needed): {notes}");
    }
    println!("faults injected (by kind):");
    for (k, n) in &faults {
        println!("  {k:<28} {n}");
    }
    println!("observed:");
    for (k, n) in &observed {
        println!("  {k:<36} {n}");
    }
    if failed.is_empty() {
        println!("failures: 0");
        Ok(ExitCode::SUCCESS)
    } else {
        println!("failures: {}", failed.len());
        for r in &failed {
            println!("  seed {}: {}", r.seed, r.failures.first().map(String::as_str).unwrap_or_default());
            println!("    replay: {}", replay_command(r.seed, &config));
        }
        Ok(ExitCode::FAILURE)
    }
}

/// `kcache-chaos leader-election`: seeded leader-election chaos runs, spread over the cores.
fn leader_election_main() -> Result<ExitCode> {
    use kcache_chaos::leader::{LeConfig, le_replay_command, run_many};

    let (mut runs, mut seed, mut config) = (200u64, 1u64, LeConfig::default());
    let mut it = std::env::args().skip(2);
    while let Some(flag) = it.next() {
        let mut value = |name: &str| it.next().with_context(|| format!("{name} needs a value"));
        match flag.as_str() {
            "--runs" => runs = value("--runs")?.parse().context("--runs")?,
            "--seed" => seed = value("--seed")?.parse().context("--seed")?,
            "--faults" => config.faults = value("--faults")?.parse().context("--faults")?,
            "-h" | "--help" => {
                print!("{USAGE}");
                return Ok(ExitCode::SUCCESS);
            }
            other => bail!("unknown argument `{other}`\n\n{USAGE}"),
        }
    }
    let started = Instant::now();
    let reports = run_many(seed, runs, &config);
    let wall = started.elapsed();
    let mut faults: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut recoveries: Vec<Duration> = Vec::new();
    let mut leaderships = 0;
    for r in &reports {
        for (k, n) in &r.faults {
            *faults.entry(k).or_default() += n;
        }
        recoveries.push(r.recovery);
        leaderships += r.leaderships;
    }
    recoveries.sort();
    let failed: Vec<_> = reports.iter().filter(|r| !r.passed()).collect();
    println!(
        "kcache-chaos leader-election: seeds {seed}..={}, {} faults per run",
        seed + runs.saturating_sub(1),
        config.faults
    );
    println!("runs: {runs}, passed: {}, failed: {}", runs - failed.len() as u64, failed.len());
    println!(
        "wall time: {wall:.1?} (slowest run {:.0?})",
        reports.iter().map(|r| r.elapsed).max().unwrap_or_default()
    );
    println!("leaderships: {leaderships}, requests: {}", reports.iter().map(|r| r.requests).sum::<usize>());
    let pct = |p: usize| {
        recoveries.get((recoveries.len() * p / 100).min(recoveries.len().saturating_sub(1))).copied()
    };
    println!(
        "recovery (last fault ended -> a leader): median {:.1?}, p99 {:.1?}, max {:.1?} (bounds per run: {:.1?} to {:.1?})",
        pct(50).unwrap_or_default(),
        pct(99).unwrap_or_default(),
        recoveries.last().copied().unwrap_or_default(),
        reports.iter().map(|r| r.bound).min().unwrap_or_default(),
        reports.iter().map(|r| r.bound).max().unwrap_or_default(),
    );
    println!("faults injected (by kind):");
    for (k, n) in &faults {
        println!("  {k:<16} {n}");
    }
    println!("failures: {}", failed.len());
    for r in &failed {
        for v in &r.violations {
            println!("  seed {}: {v}", r.seed);
        }
        println!("    replay: {}", le_replay_command(r.seed, &config));
        if runs == 1 {
            println!("  trace:");
            for l in &r.trace {
                println!("    {l}");
            }
        }
    }
    Ok(if failed.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
