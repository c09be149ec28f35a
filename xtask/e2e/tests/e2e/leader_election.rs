//! Leader election across languages: client-go's `LeaderElector` (`xtask/leaderelection-go`,
//! client-go v0.37.2) and kcache-leaderelection (`le-candidate`) as separate processes on one
//! Lease, against the cluster under test. Each process prints timestamped JSON lines (wall clock,
//! Unix nanoseconds, one machine); the test reads both sides' lines and checks them.
//!
//! Durations: LeaseDuration 4 s, RenewDeadline 2 s, RetryPeriod 0.5 s, every candidate with
//! ReleaseOnCancel. `LeaseDuration > RenewDeadline + RetryPeriod` leaves 1.5 s, so even a leader
//! whose renewals start failing stops believing before anyone may take over (0.5 s with client-go's
//! followers, which see renewals only to the second, and less a client-go leader's answer
//! latency); a RenewDeadline of 2 s lets a loaded server answer a renewal in up to a second
//! without a leader stepping down.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result, bail, ensure};
use kcache_e2e::{Cluster, skip, write_kubeconfig};
use kcache_testserver::TestServer;
use parking_lot::Mutex;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::Notify;

const LEASE_DURATION: Duration = Duration::from_secs(4);
const RENEW_DEADLINE: Duration = Duration::from_secs(2);
const RETRY_PERIOD: Duration = Duration::from_millis(500);
/// Slack for process scheduling and request latency on a loaded machine (two shared cores).
const SLACK: Duration = Duration::from_secs(1);
/// How long any one wait may take before the test fails.
const WAIT: Duration = Duration::from_secs(60);

/// Which implementation a candidate runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Lang {
    Go,
    Rust,
}

/// One line a candidate printed (or the harness wrote for it: `killed`).
#[derive(Debug, Clone)]
struct Line {
    /// Unix nanoseconds.
    t: u128,
    id: String,
    event: String,
    leader: Option<String>,
}

/// Every line of every candidate, in arrival order, and a wake-up for waiters.
#[derive(Debug, Default)]
struct Log {
    lines: Mutex<Vec<Line>>,
    changed: Notify,
}

impl Log {
    fn push(&self, line: Line) {
        self.lines.lock().push(line);
        self.changed.notify_waiters();
    }

    /// Waits until `pred` holds for some line, and returns it.
    async fn wait_for(&self, what: &str, pred: impl Fn(&Line) -> bool) -> Result<Line> {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let notified = self.changed.notified();
            if let Some(l) = self.lines.lock().iter().find(|l| pred(l)) {
                return Ok(l.clone());
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                bail!("timed out waiting for {what}; lines: {:#?}", self.lines.lock());
            }
        }
    }

    fn of(&self, id: &str, event: &str) -> Option<Line> {
        self.lines.lock().iter().find(|l| l.id == id && l.event == event).cloned()
    }
}

fn now_ns() -> u128 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos())
}

fn ms(ns: u128) -> f64 {
    ns as f64 / 1e6
}

/// A running candidate process.
struct Proc {
    id: String,
    lang: Lang,
    child: Child,
}

/// What the candidates need to start.
struct Env {
    go_bin: PathBuf,
    rust_bin: PathBuf,
    kubeconfig: PathBuf,
    namespace: String,
    lease: String,
    logs: PathBuf,
    log: Arc<Log>,
    /// Extra flags of the Go side: JSON bodies for kcache-testserver, which speaks no protobuf.
    go_flags: Vec<String>,
}

impl Env {
    /// The candidates' environment: `lease` in `namespace`, their stderr under a fresh
    /// directory; `embedded` servers speak JSON only.
    fn new(
        c: &Cluster,
        go_bin: String,
        kubeconfig: PathBuf,
        namespace: String,
        lease: &str,
        embedded: bool,
    ) -> Result<Env> {
        let logs = std::env::temp_dir().join(format!("kcache-e2e-{lease}-{}", c.unique("logs")));
        std::fs::create_dir_all(&logs)?;
        Ok(Env {
            go_bin: PathBuf::from(go_bin),
            rust_bin: PathBuf::from(env!("CARGO_BIN_EXE_le-candidate")),
            kubeconfig,
            namespace,
            lease: lease.into(),
            logs,
            log: Arc::default(),
            go_flags: if embedded {
                vec!["-content-type".into(), "application/json".into()]
            } else {
                Vec::new()
            },
        })
    }

    /// Runs `scenario`; on failure prints where the candidates' stderr is and the timeline,
    /// on success removes the logs.
    async fn run_logged(
        &self,
        test: &str,
        scenario: impl std::future::Future<Output = Result<()>>,
    ) -> Result<()> {
        let result = scenario.await;
        if result.is_err() {
            eprintln!("{test}: candidate stderr in {}", self.logs.display());
            for l in self.log.lines.lock().iter() {
                eprintln!("  {} {:>10} {:<20} {:?}", l.t, l.id, l.event, l.leader);
            }
        } else {
            let _ = std::fs::remove_dir_all(&self.logs);
        }
        result
    }

    fn spawn(&self, lang: Lang, id: &str) -> Result<Proc> {
        self.spawn_with(lang, id, &[])
    }

    /// As `spawn`, with `flags` added on either side.
    fn spawn_with(&self, lang: Lang, id: &str, flags: &[&str]) -> Result<Proc> {
        let (bin, extra) = match lang {
            Lang::Go => (&self.go_bin, &self.go_flags[..]),
            Lang::Rust => (&self.rust_bin, &[][..]),
        };
        let d = |d: Duration| format!("{}ms", d.as_millis());
        let stderr = std::fs::File::create(self.logs.join(format!("{id}.stderr")))?;
        let mut child = Command::new(bin)
            .arg("-kubeconfig")
            .arg(&self.kubeconfig)
            .args(["-namespace", &self.namespace, "-name", &self.lease, "-identity", id])
            .args(["-lease-duration", &d(LEASE_DURATION), "-renew-deadline", &d(RENEW_DEADLINE)])
            .args(["-retry-period", &d(RETRY_PERIOD), "-release-on-cancel"])
            .args(extra)
            .args(flags)
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let stdout = child.stdout.take().context("stdout")?;
        let log = self.log.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(text)) = lines.next_line().await {
                let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else { continue };
                log.push(Line {
                    t: v["t"].as_u64().unwrap_or_default().into(),
                    id: v["id"].as_str().unwrap_or_default().to_string(),
                    event: v["event"].as_str().unwrap_or_default().to_string(),
                    leader: v["leader"].as_str().map(str::to_string),
                });
            }
        });
        Ok(Proc { id: id.to_string(), lang, child })
    }
}

/// Sends `signal` to the process and waits until it is reaped; returns when that was.
async fn signal_and_reap(p: &mut Proc, signal: libc_signal::Signal) -> Result<u128> {
    let pid = p.child.id().context("running")?;
    libc_signal::send(pid, signal)?;
    let _ = tokio::time::timeout(WAIT, p.child.wait()).await.context("process did not exit")??;
    Ok(now_ns())
}

/// `kill(2)` without a libc dependency in this crate: through `/bin/kill`.
mod libc_signal {
    use anyhow::{Result, ensure};

    #[derive(Debug, Clone, Copy)]
    pub(super) enum Signal {
        Kill,
        Term,
    }

    pub(super) fn send(pid: u32, signal: Signal) -> Result<()> {
        let name = match signal {
            Signal::Kill => "-KILL",
            Signal::Term => "-TERM",
        };
        let status = std::process::Command::new("kill").args([name, &pid.to_string()]).status()?;
        ensure!(status.success(), "kill {name} {pid}: {status}");
        Ok(())
    }
}

/// A measured hand-over.
#[derive(Debug)]
struct Handover {
    how: &'static str,
    from: Lang,
    to: Lang,
    took: Duration,
}

/// Leadership intervals per candidate, from the lines: from `started_leading` to the first of
/// `cancel`, `stopped_leading` or `killed` (the reap after SIGKILL); open intervals end at `end`.
fn intervals(lines: &[Line], end: u128) -> Vec<(String, u128, u128)> {
    let mut out = Vec::new();
    let mut by_id: BTreeMap<&str, Vec<&Line>> = BTreeMap::new();
    for l in lines {
        by_id.entry(&l.id).or_default().push(l);
    }
    for (id, ls) in by_id {
        let mut start = None;
        for l in ls {
            match l.event.as_str() {
                "started_leading" => start = Some(l.t),
                "cancel" | "stopped_leading" | "killed" => {
                    if let Some(s) = start.take() {
                        out.push((id.to_string(), s, l.t));
                    }
                }
                _ => {}
            }
        }
        if let Some(s) = start {
            out.push((id.to_string(), s, end));
        }
    }
    out.sort_by_key(|(_, s, _)| *s);
    out
}

/// client-go and kcache candidates contend for one Lease and hand it over in both directions,
/// by crash (SIGKILL) and by clean stop (SIGTERM with ReleaseOnCancel), on the cluster under test.
///
/// Checked, from both sides' timestamped lines:
///
/// - **Mutual exclusion**: the leadership intervals of all candidates are disjoint: each starts
///   strictly after the previous one ended (ended = the candidate logged that its leading
///   context/token was cancelled, or the signal that cancels it, or the harness reaped it after
///   SIGKILL). Why it holds: a new leader must first see the lease released (written after the
///   old leader's context was cancelled) or unchanged for LeaseDuration (a dead leader renews
///   nothing); and a live leader whose renewals fail stops within RetryPeriod + RenewDeadline
///   (2.5 s) of its last renewal, before LeaseDuration (4 s) without change has passed for anyone.
/// - **Crash**: the successor leads within LeaseDuration + 1.2 × RetryPeriod + 3.2 × RetryPeriod
///   + 1 s of the kill (7.2 s). Why: the follower sees the last renewal within one jittered retry
///   period (up to 2.2 × RetryPeriod) after it, and tries again within another after the lease
///   expired (LeaseDuration later); 1 s covers requests and process scheduling.
/// - **Clean stop**: the successor leads within 2.2 × RetryPeriod + 1 s (2.1 s) of the stop: a
///   lease with an empty holder is taken at the next try.
/// - The first contest (one Go and one Rust candidate started together) elects exactly one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_election_interoperates_with_client_go() -> Result<()> {
    const TEST: &str = "leader_election_interoperates_with_client_go";
    let c = Cluster::connect().await?;
    let Ok(go_bin) = std::env::var("KCACHE_E2E_LEADERELECTION_GO") else {
        skip(TEST, "KCACHE_E2E_LEADERELECTION_GO is not set (cargo xtask e2e sets it when Go is installed)");
        return Ok(());
    };
    // On `embedded`, a server of this test's own without authentication: client-go sends a
    // kubeconfig's credentials only to TLS servers, and the embedded server speaks plain HTTP.
    let (kubeconfig, namespace, embedded, _ns) = match c.kubeconfig_file() {
        Some(path) => {
            let ns = c.namespace(&c.main, "le").await?;
            (path, ns.name.clone(), None, Some(ns))
        }
        None => {
            let server = TestServer::start().await;
            let path = write_kubeconfig(&server.url(), &c.unique("le"))?;
            (path, "default".to_string(), Some(server), None)
        }
    };
    let env = Env::new(&c, go_bin, kubeconfig, namespace, "interop", embedded.is_some())?;
    env.run_logged(TEST, relay(&env)).await
}

async fn relay(env: &Env) -> Result<()> {
    let mut alive: Vec<Proc> = Vec::new();
    let mut n = 0;
    let mut next_id = |lang: Lang| {
        n += 1;
        format!("{}-{n}", if lang == Lang::Go { "go" } else { "rust" })
    };
    // The contest: one of each, started together.
    alive.push(env.spawn(Lang::Go, &next_id(Lang::Go))?);
    alive.push(env.spawn(Lang::Rust, &next_id(Lang::Rust))?);

    let mut done: Vec<Handover> = Vec::new();
    let wanted = [
        ("crash", Lang::Go, Lang::Rust),
        ("crash", Lang::Rust, Lang::Go),
        ("clean stop", Lang::Go, Lang::Rust),
        ("clean stop", Lang::Rust, Lang::Go),
    ];
    while done.len() < wanted.len() {
        // A leader, followed by the other live candidate.
        let leader_line = env
            .log
            .wait_for("a leader", |l| l.event == "started_leading" && alive.iter().any(|p| p.id == l.id))
            .await?;
        let li = alive.iter().position(|p| p.id == leader_line.id).context("leader alive")?;
        let fi = 1 - li;
        let (leader_id, follower_id) = (alive[li].id.clone(), alive[fi].id.clone());
        env.log
            .wait_for("the follower to see the leader", |l| {
                l.id == follower_id && l.event == "new_leader" && l.leader.as_deref() == Some(&leader_id)
            })
            .await?;
        let (from, to) = (alive[li].lang, alive[fi].lang);
        let how =
            if done.iter().any(|h| h.how == "crash" && h.from == from) { "clean stop" } else { "crash" };
        // Let the leader renew a few times first, so the follower has seen renewals.
        tokio::time::sleep(RETRY_PERIOD * 3).await;
        let mut leader = alive.remove(li);
        let stopped_at = if how == "crash" {
            let t = signal_and_reap(&mut leader, libc_signal::Signal::Kill).await?;
            env.log.push(Line { t, id: leader.id.clone(), event: "killed".into(), leader: None });
            t
        } else {
            signal_and_reap(&mut leader, libc_signal::Signal::Term).await?;
            env.log.of(&leader.id, "cancel").context("the stopped leader logged its cancel")?.t
        };
        let took_over = env
            .log
            .wait_for("the follower to take over", |l| l.id == follower_id && l.event == "started_leading")
            .await?;
        let took = Duration::from_nanos((took_over.t.saturating_sub(stopped_at)) as u64);
        eprintln!(
            "leader election interop: {how} {from:?} -> {to:?}: {leader_id} -> {follower_id} in {:.0} ms",
            took.as_secs_f64() * 1e3
        );
        done.push(Handover { how, from, to, took });
        // A new candidate in the old leader's language follows the new leader.
        let id = next_id(from);
        alive.push(env.spawn(from, &id)?);
    }

    // Stop everyone cleanly, the follower first (else it would take over); then check the lines.
    for p in alive.iter_mut().rev() {
        signal_and_reap(p, libc_signal::Signal::Term).await?;
    }
    let lines = env.log.lines.lock().clone();
    check(&lines, &done, &wanted)
}

fn check(lines: &[Line], done: &[Handover], wanted: &[(&str, Lang, Lang)]) -> Result<()> {
    for (how, from, to) in wanted {
        ensure!(
            done.iter().any(|h| h.how == *how && h.from == *from && h.to == *to),
            "no {how} {from:?} -> {to:?}"
        );
    }
    let crash_bound = LEASE_DURATION + RETRY_PERIOD.mul_f64(4.4) + SLACK;
    let stop_bound = RETRY_PERIOD.mul_f64(2.2) + SLACK;
    for h in done {
        let bound = if h.how == "crash" { crash_bound } else { stop_bound };
        ensure!(
            h.took <= bound,
            "{} {:?} -> {:?} took {:?}, more than {bound:?}",
            h.how,
            h.from,
            h.to,
            h.took
        );
    }
    let end = lines.iter().map(|l| l.t).max().unwrap_or_default();
    let iv = intervals(lines, end);
    ensure!(iv.len() == done.len() + 1, "one leadership per hand-over and the last: {iv:?}");
    let mut min_gap = u128::MAX;
    for pair in iv.windows(2) {
        let ((a, _, a_end), (b, b_start, _)) = (&pair[0], &pair[1]);
        ensure!(b_start > a_end, "{b} started leading {:.1} ms before {a} stopped", ms(a_end - b_start));
        min_gap = min_gap.min(b_start - a_end);
    }
    eprintln!(
        "leader election interop: {} leaderships, disjoint; smallest gap between two {:.0} ms",
        iv.len(),
        ms(min_gap)
    );
    Ok(())
}

/// Coordinated leader election (KEP-4355) across languages, on the cluster's coordinator
/// (kube-apiserver v1.36.3 with `CoordinatedLeaderElection=true` and
/// `coordination.k8s.io/v1beta1=true`; kcache-testserver's on `embedded`): client-go's
/// `LeaseCandidate` + `Coordinated` elector (`leaderelection-go -coordinated`) and
/// kcache-leaderelection's (`le-candidate -coordinated`), each joining with an older emulation
/// version than the leader's: rust-1 (1.36.0) is elected alone; go-2 (1.35.0) joins and the
/// coordinator moves the Lease to it (rust-1 steps down on `preferredHolder`); rust-3 (1.34.0)
/// joins and takes it from go-2 the same way. Leaderships never overlap (the same check as
/// `leader_election_interoperates_with_client_go`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coordinated_leader_election_interoperates_with_client_go() -> Result<()> {
    const TEST: &str = "coordinated_leader_election_interoperates_with_client_go";
    let c = Cluster::connect().await?;
    let Ok(go_bin) = std::env::var("KCACHE_E2E_LEADERELECTION_GO") else {
        skip(TEST, "KCACHE_E2E_LEADERELECTION_GO is not set (cargo xtask e2e sets it when Go is installed)");
        return Ok(());
    };
    let Some(target) = &c.coordinated else {
        skip(TEST, "the cluster has no kube-apiserver with coordinated leader election");
        return Ok(());
    };
    let (kubeconfig, namespace, embedded, _ns) = match std::env::var_os("KCACHE_E2E_COORDINATED_KUBECONFIG") {
        Some(path) if c.kubeconfig_file().is_some() => {
            let ns = c.namespace(target, "cle").await?;
            (PathBuf::from(path), ns.name.clone(), None, Some(ns))
        }
        _ if c.kubeconfig_file().is_some() => {
            skip(TEST, "no kubeconfig file for the coordinated server");
            return Ok(());
        }
        _ => {
            // As in the interop test above: a server of its own, without authentication.
            let server = TestServer::builder().coordinated_leader_election(true).start().await;
            let path = write_kubeconfig(&server.url(), &c.unique("cle"))?;
            (path, "default".to_string(), Some(server), None)
        }
    };
    let env = Env::new(&c, go_bin, kubeconfig, namespace, "coordinated-interop", embedded.is_some())?;
    env.run_logged(TEST, coordinated_relay(&env)).await
}

async fn coordinated_relay(env: &Env) -> Result<()> {
    let mut alive = Vec::new();
    let joins =
        [(Lang::Rust, "rust-1", "1.36.0"), (Lang::Go, "go-2", "1.35.0"), (Lang::Rust, "rust-3", "1.34.0")];
    let mut previous: Option<&str> = None;
    for (lang, id, emulation) in joins {
        let joined = now_ns();
        alive.push(env.spawn_with(lang, id, &["-coordinated", "-emulation-version", emulation])?);
        let started = env
            .log
            .wait_for(&format!("{id} leading"), |l| l.id == id && l.event == "started_leading")
            .await?;
        match previous {
            None => eprintln!(
                "coordinated interop: {id} elected {:.0} ms after it started",
                ms(started.t - joined)
            ),
            Some(prev) => {
                let stopped =
                    env.log.of(prev, "stopped_leading").context("the previous leader stepped down")?;
                ensure!(
                    stopped.t < started.t,
                    "{prev} stopped at {} after {id} started at {}",
                    stopped.t,
                    started.t
                );
                eprintln!(
                    "coordinated interop: {id} joined; {prev} stepped down after {:.0} ms, {id} led after {:.0} ms",
                    ms(stopped.t - joined),
                    ms(started.t - joined)
                );
            }
        }
        previous = Some(id);
    }
    for p in &mut alive {
        if p.child.try_wait()?.is_none() {
            signal_and_reap(p, libc_signal::Signal::Term).await?;
        }
    }
    let lines = env.log.lines.lock().clone();
    let spans = intervals(&lines, now_ns());
    for pair in spans.windows(2) {
        ensure!(pair[0].2 < pair[1].1, "leaderships overlap: {:?} and {:?}", pair[0], pair[1]);
    }
    let leaders: Vec<&str> = spans.iter().map(|(id, _, _)| id.as_str()).collect();
    ensure!(leaders == ["rust-1", "go-2", "rust-3"], "leaders in order: {leaders:?}");
    Ok(())
}
