//! `cargo xtask cluster up | status | down`: a real control plane (etcd + kube-apiserver v1.36.3,
//! built from Go modules) on loopback that outlives the command, for `cargo xtask demo
//! --kubeconfig`, for tests that run several processes against one server, and for trying kcache
//! by hand. Starting, tracking and stopping are `control_plane.rs`'s, the code that
//! `cargo xtask e2e --cluster local` runs too.
//!
//! The state directory (pid files, logs, kubeconfigs, etcd's data) is `--state-dir`, else
//! `$KCACHE_CLUSTER_DIR`, else `<cache root>/cluster` (`~/.cache/kcache/cluster`): one cluster per
//! user, found by `status` and `down` from any checkout, next to the binaries it runs.
//!
//! `up` prints what it did on stderr and one `export KUBECONFIG=...` line on stdout, so
//! `eval "$(cargo xtask cluster up)"` points the shell at it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};

use crate::control_plane::{self, ControlPlane, Instance, Liveness, ServerSpec, Spec, State, Tracked};

const USAGE: &str = "\
cargo xtask cluster <up|status|down> [options]

  up [--feature-gates G=true,...] [--runtime-config GV=true,...] [--legacy]
          build etcd and kube-apiserver if needed, start them on loopback in the background, wait
          for /readyz and print `export KUBECONFIG=...`; a cluster already running with the same
          options is reused, one with other options is replaced
  status  whether it runs, with which feature gates, where its kubeconfig and logs are
  down    stop it and remove its state directory

  --feature-gates G=B,...  kube-apiserver feature gates (e.g. ShardedListAndWatch=true)
  --runtime-config GV=B,...  kube-apiserver API versions off by default (e.g.
                           coordination.k8s.io/v1beta1=true, with
                           --feature-gates CoordinatedLeaderElection=true)
  --legacy                 the legacy server: WatchList=false and no watch cache
  --state-dir DIR          the state directory (default: $KCACHE_CLUSTER_DIR, else
                           ~/.cache/kcache/cluster)
";

/// The name of the one kube-apiserver of `cargo xtask cluster`.
pub(crate) const SERVER: &str = "kube-apiserver";

/// What `up` is asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct UpOptions {
    pub(crate) legacy: bool,
    pub(crate) feature_gates: BTreeMap<String, bool>,
    pub(crate) runtime_config: Vec<String>,
}

impl UpOptions {
    fn server_spec(&self) -> ServerSpec {
        ServerSpec {
            legacy: self.legacy,
            feature_gates: self.feature_gates.clone(),
            runtime_config: self.runtime_config.clone(),
            ..ServerSpec::new(SERVER)
        }
    }

    /// Whether a running server is what these options would start.
    fn matches(&self, server: &ServerSpec) -> bool {
        server.legacy == self.legacy
            && server.feature_gates == self.feature_gates
            && server.runtime_config == self.runtime_config
    }
}

/// What `up` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UpOutcome {
    /// Nothing ran: started.
    Started,
    /// A cluster with the same options ran: reused as it is.
    Reused,
    /// A cluster with other options ran: stopped, and started as asked.
    Replaced,
    /// A stale state was found: cleaned up, then started.
    Recovered,
}

pub(crate) fn run(args: &[String]) -> Result<()> {
    let mut it = args.iter();
    let Some(command) = it.next() else { bail!("a command is needed: up, status or down\n\n{USAGE}") };
    let mut opts = UpOptions::default();
    let mut state_dir = None;
    while let Some(a) = it.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_owned())),
            _ => (a.as_str(), None),
        };
        let mut value = || -> Result<String> {
            inline.clone().or_else(|| it.next().cloned()).with_context(|| format!("{flag} needs a value"))
        };
        match flag {
            "--state-dir" => state_dir = Some(PathBuf::from(value()?)),
            "--feature-gates" if command == "up" => opts.feature_gates = parse_feature_gates(&value()?)?,
            "--runtime-config" if command == "up" => {
                opts.runtime_config =
                    value()?.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect();
            }
            "--legacy" if command == "up" && inline.is_none() => opts.legacy = true,
            "-h" | "--help" => {
                print!("{USAGE}");
                return Ok(());
            }
            other => bail!("unknown option `{other}` for `cluster {command}`\n\n{USAGE}"),
        }
    }
    if opts.legacy && opts.feature_gates.get("WatchList") == Some(&true) {
        bail!("--legacy turns WatchList off; --feature-gates WatchList=true contradicts it");
    }
    let dir = state_dir.unwrap_or_else(default_state_dir);
    match command.as_str() {
        "up" => {
            control_plane::install_interrupt_handler();
            let (_, instance) = up(&dir, &opts, true)?;
            let server = instance.server(SERVER)?;
            eprintln!("kubeconfig: {}", server.kubeconfig.display());
            println!("export KUBECONFIG={}", server.kubeconfig.display());
            Ok(())
        }
        "status" => {
            print!("{}", status(&dir)?);
            Ok(())
        }
        "down" => {
            eprintln!("{}", down(&dir)?);
            Ok(())
        }
        "-h" | "--help" | "help" => {
            print!("{USAGE}");
            Ok(())
        }
        other => bail!("unknown cluster command `{other}`\n\n{USAGE}"),
    }
}

/// `$KCACHE_CLUSTER_DIR`, else `<cache root>/cluster`.
pub(crate) fn default_state_dir() -> PathBuf {
    std::env::var_os("KCACHE_CLUSTER_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| control_plane::cache_root().join("cluster"))
}

/// `Name=true,Other=false` (kube-apiserver's `--feature-gates` syntax).
pub(crate) fn parse_feature_gates(s: &str) -> Result<BTreeMap<String, bool>> {
    let mut gates = BTreeMap::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, value) = part
            .split_once('=')
            .with_context(|| format!("feature gate `{part}`: expected Name=true|false"))?;
        let value = match value.trim() {
            "true" => true,
            "false" => false,
            other => bail!("feature gate `{name}`: `{other}` is neither true nor false"),
        };
        let name = name.trim();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric()) {
            bail!("feature gate `{name}`: a name is letters and digits (e.g. ShardedListAndWatch)");
        }
        if gates.insert(name.to_owned(), value).is_some() {
            bail!("feature gate `{name}` given twice");
        }
    }
    if gates.is_empty() {
        bail!("--feature-gates needs at least one Name=true|false");
    }
    Ok(gates)
}

/// Starts a cluster in `dir`, or reuses the one running there with the same options.
///
/// `detach` puts the processes in a process group of their own, so that they outlive the
/// command (the terminal's Ctrl-C does not reach them). The tests pass `false`: their clusters
/// stay in the test process's group, so that a CI job killed as a whole takes them along.
pub(crate) fn up(dir: &Path, opts: &UpOptions, detach: bool) -> Result<(UpOutcome, Instance)> {
    let mut outcome = UpOutcome::Started;
    match control_plane::inspect(dir)? {
        State::Stopped => {}
        State::Running { instance, processes } => {
            let server = instance.server(SERVER)?;
            if opts.matches(&server.spec) {
                eprintln!(
                    "cluster: already running in {} ({}; feature gates: {}): reusing it",
                    instance.dir.display(),
                    pids(&processes),
                    control_plane::gates_to_string(&server.spec.effective_gates())
                );
                return Ok((UpOutcome::Reused, instance));
            }
            eprintln!(
                "cluster: running with feature gates {}, asked for {}: replacing it",
                control_plane::gates_to_string(&server.spec.effective_gates()),
                control_plane::gates_to_string(&opts.server_spec().effective_gates())
            );
            control_plane::stop(dir)?;
            outcome = UpOutcome::Replaced;
        }
        State::Stale { reason, .. } => {
            eprintln!("cluster: stale state in {}: {reason}; cleaning it up", dir.display());
            control_plane::stop(dir)?;
            outcome = UpOutcome::Recovered;
        }
    }
    let t = Instant::now();
    let bins = control_plane::ensure_binaries()?;
    eprintln!("cluster: binaries ready in {:.1}s", t.elapsed().as_secs_f64());
    let spec = Spec {
        servers: vec![opts.server_spec()],
        detach,
        logs_on_failure: crate::project_root().join("target/cluster-logs"),
    };
    let t = Instant::now();
    let plane = ControlPlane::start(&bins, dir, &spec)?;
    let instance = plane.leave_running();
    let server = instance.server(SERVER)?;
    eprintln!(
        "cluster: kube-apiserver {} ready at {} in {:.1}s (feature gates: {}); etcd at {}",
        instance.kube_version,
        server.url,
        t.elapsed().as_secs_f64(),
        control_plane::gates_to_string(&server.spec.effective_gates()),
        instance.etcd_url
    );
    eprintln!("cluster: state and logs in {}; `cargo xtask cluster down` stops it", instance.dir.display());
    Ok((outcome, instance))
}

fn pids(processes: &[Tracked]) -> String {
    processes.iter().map(|p| format!("{} pid {}", p.name, p.pid)).collect::<Vec<_>>().join(", ")
}

/// The status report. A state whose processes are all gone is cleaned up here; one with
/// survivors is left to `up` or `down`.
pub(crate) fn status(dir: &Path) -> Result<String> {
    let shown = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_owned());
    Ok(match control_plane::inspect(dir)? {
        State::Stopped => format!("cluster: not running (state directory {})\n", shown.display()),
        State::Stale { processes, reason } if processes.iter().all(|p| p.liveness != Liveness::Ours) => {
            control_plane::stop(dir)?;
            format!("cluster: not running; stale state cleaned up ({reason})\n")
        }
        State::Stale { reason, .. } => format!(
            "cluster: broken: {reason}\n  `cargo xtask cluster down` stops what is left; `cargo xtask cluster up` starts afresh\n  logs: {}\n",
            shown.display()
        ),
        State::Running { instance, processes } => {
            let mut out = String::new();
            let server = instance.server(SERVER)?;
            let ready = match control_plane::cached_binaries() {
                Some(bins) => {
                    match control_plane::get(
                        &bins,
                        &format!("{}/readyz", server.url),
                        control_plane::ADMIN_TOKEN,
                    ) {
                        Ok(Some((200, _))) => "ready",
                        Ok(Some(_)) => "running, not ready (/readyz)",
                        _ => "running, not answering",
                    }
                }
                None => "running",
            };
            let pid = |name: &str| processes.iter().find(|p| p.name == name).map_or(0, |p| p.pid);
            out += &format!("cluster: {ready} (state directory {})\n", instance.dir.display());
            out += &format!(
                "  kube-apiserver {} at {} (pid {})\n",
                instance.kube_version,
                server.url,
                pid(SERVER)
            );
            out += &format!(
                "    feature gates: {}{}\n",
                control_plane::gates_to_string(&server.spec.effective_gates()),
                if server.spec.legacy { " (legacy: no watch-list, no watch cache)" } else { "" }
            );
            if !server.spec.runtime_config.is_empty() {
                out += &format!("    runtime config: {}\n", server.spec.runtime_config.join(","));
            }
            out += &format!(
                "  etcd {} at {} (pid {})\n",
                control_plane::ETCD_VERSION,
                instance.etcd_url,
                pid(control_plane::ETCD)
            );
            out += &format!("  kubeconfig: {} (admin)\n", server.kubeconfig.display());
            out += &format!(
                "              {} ({}, no RBAC bindings)\n",
                server.limited_kubeconfig.display(),
                control_plane::LIMITED_USER
            );
            out += &format!(
                "  logs: {}, {}\n",
                instance.log(SERVER).display(),
                instance.log(control_plane::ETCD).display()
            );
            out
        }
    })
}

/// Stops the cluster in `dir` and removes its state; says what it did.
pub(crate) fn down(dir: &Path) -> Result<String> {
    let t = Instant::now();
    let shown = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_owned());
    let processes = control_plane::stop(dir)?;
    let stopped: Vec<&Tracked> = processes.iter().filter(|p| p.liveness == Liveness::Ours).collect();
    let stale: Vec<String> =
        processes.iter().filter(|p| p.liveness != Liveness::Ours).map(ToString::to_string).collect();
    let mut out = if stopped.is_empty() {
        "cluster: nothing was running".to_owned()
    } else {
        format!(
            "cluster: stopped {} in {:.1}s",
            stopped.iter().map(|p| format!("{} (pid {})", p.name, p.pid)).collect::<Vec<_>>().join(", "),
            t.elapsed().as_secs_f64()
        )
    };
    if !stale.is_empty() {
        out += &format!("; stale pid files cleaned up: {}", stale.join(", "));
    }
    if !processes.is_empty() {
        out += &format!("; removed {}", shown.display());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    //! The stale-pid tests run everywhere (they fake the processes); the others need the Go-built
    //! binaries and start real control planes, so they are `#[ignore]`d: `cargo xtask ci` runs
    //! them after its e2e-local step has built or found those binaries (`cargo test -p xtask --
    //! --ignored cluster::` by hand).

    use std::collections::BTreeSet;
    use std::fs;
    use std::process::{Command, Stdio};
    use std::sync::Mutex;

    use serde_json::Value;

    use super::*;
    use crate::control_plane::{Binaries, Server};

    /// The tests that start control planes run one at a time: each kube-apiserver wants a core
    /// to start within its deadline on a 2-core CI machine.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

    /// A fresh state directory, stopped and removed when the test ends, however it ends.
    struct StateDir(PathBuf);

    impl StateDir {
        fn new(tag: &str) -> Self {
            let dir = std::env::temp_dir().join(format!("kcache-cluster-test-{}-{tag}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            StateDir(dir)
        }
    }

    impl Drop for StateDir {
        fn drop(&mut self) {
            let _ = control_plane::stop(&self.0);
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    /// The binaries, or `None` (the test says SKIPPED and passes) where Go is missing, the way
    /// `cargo xtask ci` skips its e2e-local step.
    fn binaries(test: &str) -> Option<Binaries> {
        if !control_plane::go_available() {
            eprintln!("SKIPPED {test}: Go is not on PATH, so there is no local control plane");
            return None;
        }
        Some(control_plane::ensure_binaries().expect("build or find the control-plane binaries"))
    }

    fn gates(s: &str) -> UpOptions {
        UpOptions { feature_gates: parse_feature_gates(s).unwrap(), ..UpOptions::default() }
    }

    fn pid_of(dir: &Path, name: &str) -> u32 {
        fs::read_to_string(dir.join(format!("{name}.pid"))).unwrap().trim().parse().unwrap()
    }

    /// `GET path` as admin: the status code and the body as JSON (or a string).
    fn get(bins: &Binaries, server: &Server, path: &str) -> (u16, Value) {
        let (code, body) =
            control_plane::get(bins, &format!("{}{path}", server.url), control_plane::ADMIN_TOKEN)
                .unwrap()
                .expect("the server answers");
        (code, serde_json::from_str(&body).unwrap_or(Value::String(body)))
    }

    /// Percent-encoding of a query parameter's value.
    fn query(v: &str) -> String {
        v.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect()
    }

    /// apimachinery `sharding.HashField`: FNV-1a 64 of the field's bytes, as `0x` + 16 hex digits.
    fn shard_hash(value: &str) -> String {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in value.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        format!("0x{h:016x}")
    }

    fn uids(list: &Value) -> BTreeSet<String> {
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["metadata"]["uid"].as_str().unwrap().to_owned())
            .collect()
    }

    /// A LIST of namespaces (default, kube-system, kube-public, kube-node-lease at least) with a
    /// `shardSelector` over the uid.
    fn sharded_namespaces(bins: &Binaries, server: &Server, start: &str, end: &str) -> (String, Value) {
        let selector = format!("shardRange(object.metadata.uid, '{start}', '{end}')");
        let (code, list) =
            get(bins, server, &format!("/api/v1/namespaces?shardSelector={}", query(&selector)));
        assert_eq!(code, 200, "{list}");
        (selector, list)
    }

    /// The addresses that the process listens on (TCP), from `/proc/<pid>/fd` and `/proc/net/tcp*`.
    fn listening_addresses(pid: u32) -> Vec<String> {
        let inodes: BTreeSet<String> = fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .flatten()
            .filter_map(|e| fs::read_link(e.path()).ok())
            .filter_map(|l| {
                let l = l.to_string_lossy().into_owned();
                Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
            })
            .collect();
        let mut out = Vec::new();
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            for line in fs::read_to_string(table).unwrap().lines().skip(1) {
                let f: Vec<&str> = line.split_whitespace().collect();
                // local_address, state (0A = LISTEN), inode
                if f.len() > 9 && f[3] == "0A" && inodes.contains(f[9]) {
                    out.push(f[1].to_owned());
                }
            }
        }
        out
    }

    /// 127.0.0.1, ::1 or ::ffff:127.0.0.1, as `/proc/net/tcp*` writes them (host byte order per word).
    fn is_loopback(addr: &str) -> bool {
        let ip = addr.split(':').next().unwrap();
        matches!(ip, "0100007F" | "00000000000000000000000001000000" | "0000000000000000FFFF00000100007F")
    }

    #[test]
    fn feature_gates_parse_like_kube_apiserver_flags() {
        let g = parse_feature_gates("ShardedListAndWatch=true, WatchList=false").unwrap();
        assert_eq!(
            g.into_iter().collect::<Vec<_>>(),
            [("ShardedListAndWatch".into(), true), ("WatchList".into(), false)]
        );
        for bad in ["", "ShardedListAndWatch", "X=yes", "X=true,X=false", "=true", "a b=true"] {
            assert!(parse_feature_gates(bad).is_err(), "{bad:?}");
        }
    }

    /// Pid files whose processes died (a reboot, a crash), or whose pid another program now has,
    /// are stale: `status` says so and cleans up, killing nothing that is not ours; a survivor of
    /// ours (recognised by `/proc/<pid>/cmdline`) is stopped by `up`/`down`. Needs no binaries: a
    /// shell renamed `etcd` plays the survivor.
    #[test]
    fn stale_pid_files_are_detected_and_cleaned_up() {
        let state = StateDir::new("stale");
        let dir = &state.0;
        fs::create_dir_all(dir).unwrap();
        fs::write(dir.join("kcache-control-plane"), "").unwrap();
        let dir = fs::canonicalize(dir).unwrap();

        // A process that has exited and been reaped: its pid names nothing (until reused).
        let mut gone = Command::new("true").spawn().unwrap();
        gone.wait().unwrap();
        fs::write(dir.join("etcd.pid"), format!("{}\n", gone.id())).unwrap();
        // A live process that is not ours: this test.
        fs::write(dir.join("kube-apiserver.pid"), format!("{}\n", std::process::id())).unwrap();
        fs::write(dir.join("cluster.json"), "{}").unwrap();

        let State::Stale { processes, reason } = control_plane::inspect(&dir).unwrap() else {
            panic!("not stale")
        };
        let liveness: Vec<(&str, Liveness)> =
            processes.iter().map(|p| (p.name.as_str(), p.liveness)).collect();
        assert_eq!(liveness, [("kube-apiserver", Liveness::Foreign), ("etcd", Liveness::Gone)]);
        assert!(reason.contains("is another program now") && reason.contains("is gone"), "{reason}");
        let report = status(&dir).unwrap();
        assert!(report.contains("stale state cleaned up"), "{report}");
        assert!(!dir.exists(), "status removes a state with no survivors");
        assert!(matches!(control_plane::inspect(&dir).unwrap(), State::Stopped));

        // A survivor of ours: argv[0] `etcd`, an argument inside the state directory. It traps
        // SIGTERM the way etcd does, by exiting.
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("kcache-control-plane"), "").unwrap();
        let fake_etcd =
            std::env::temp_dir().join(format!("kcache-cluster-test-{}-bin/etcd", std::process::id()));
        fs::create_dir_all(fake_etcd.parent().unwrap()).unwrap();
        let _ = fs::remove_file(&fake_etcd);
        std::os::unix::fs::symlink("/bin/sh", &fake_etcd).unwrap();
        let mut survivor = Command::new(&fake_etcd)
            .args(["-c", "trap 'exit 0' TERM; while :; do sleep 0.1; done"])
            .arg(dir.join("etcd").display().to_string())
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        fs::write(dir.join("etcd.pid"), format!("{}\n", survivor.id())).unwrap();
        fs::write(dir.join("kube-apiserver.pid"), "garbage").unwrap();
        // `/proc/<pid>/cmdline` is the shell's until it has started.
        let deadline = Instant::now() + std::time::Duration::from_secs(10);
        while control_plane::liveness(survivor.id(), &dir) != Liveness::Ours {
            assert!(Instant::now() < deadline, "the fake etcd never looked like ours");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let State::Stale { processes, .. } = control_plane::inspect(&dir).unwrap() else {
            panic!("not stale")
        };
        assert_eq!(processes.iter().filter(|p| p.liveness == Liveness::Ours).count(), 1);
        let report = status(&dir).unwrap();
        assert!(report.starts_with("cluster: broken"), "{report}");
        assert!(dir.exists(), "status leaves survivors to up or down");
        let said = down(&dir).unwrap();
        assert!(said.contains(&format!("stopped etcd (pid {})", survivor.id())), "{said}");
        assert!(said.contains("stale pid files cleaned up: kube-apiserver (pid 0) is gone"), "{said}");
        // Stopped, and a zombie until this test (its parent) reaps it: gone either way.
        assert_eq!(control_plane::liveness(survivor.id(), &dir), Liveness::Gone);
        survivor.wait().unwrap();
        assert!(!dir.exists());
        let _ = fs::remove_dir_all(fake_etcd.parent().unwrap());
    }

    /// A directory that is not a state directory is never removed, even when asked to.
    #[test]
    fn down_refuses_a_directory_without_the_marker() {
        let state = StateDir::new("foreign");
        fs::create_dir_all(&state.0).unwrap();
        fs::write(state.0.join("notes.txt"), "mine").unwrap();
        fs::write(state.0.join("etcd.pid"), "1").unwrap();
        assert!(down(&state.0).is_err());
        assert!(state.0.join("notes.txt").exists());
    }

    /// up on a fresh state directory (through the command line's parser, detached), status, a
    /// second up that reuses the cluster, down. The processes listen on loopback only, and
    /// without the gate a `shardSelector` is ignored.
    #[test]
    #[ignore = "needs the local control plane (cargo xtask ci runs it)"]
    fn up_status_down_on_a_fresh_state_dir() {
        let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let Some(bins) = binaries("up_status_down_on_a_fresh_state_dir") else { return };
        let state = StateDir::new("lifecycle");
        let dir = &state.0;
        assert!(status(dir).unwrap().starts_with("cluster: not running"));

        // As from the command line: detached, each process the leader of a group of its own.
        let args = ["up".to_owned(), "--state-dir".to_owned(), dir.display().to_string()];
        run(&args).unwrap();
        let State::Running { instance, .. } = control_plane::inspect(dir).unwrap() else {
            panic!("not running")
        };
        for name in [SERVER, control_plane::ETCD] {
            let pid = pid_of(&instance.dir, name);
            let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
            // After `(comm)`: state, ppid, pgrp.
            let pgrp = stat.rsplit_once(')').unwrap().1.split_whitespace().nth(2).unwrap().to_owned();
            assert_eq!(pgrp, pid.to_string(), "{name} leads its own process group");
        }
        let server = instance.server(SERVER).unwrap();
        assert!(server.kubeconfig.is_file() && server.limited_kubeconfig.is_file());
        let report = status(dir).unwrap();
        for expected in [
            "cluster: ready".to_owned(),
            format!("kube-apiserver {} at {}", control_plane::KUBE_VERSION, server.url),
            "feature gates: none".to_owned(),
            server.kubeconfig.display().to_string(),
            instance.log(SERVER).display().to_string(),
            instance.log(control_plane::ETCD).display().to_string(),
        ] {
            assert!(report.contains(&expected), "no {expected:?} in\n{report}");
        }

        // Nothing listens beyond loopback; etcd's client and peer ports, and the server's.
        let (etcd, apiserver) = (pid_of(&instance.dir, "etcd"), pid_of(&instance.dir, SERVER));
        for pid in [etcd, apiserver] {
            let addrs = listening_addresses(pid);
            assert!(!addrs.is_empty(), "pid {pid} listens nowhere?");
            assert!(addrs.iter().all(|a| is_loopback(a)), "pid {pid} listens on {addrs:?}");
        }
        assert_eq!(listening_addresses(etcd).len(), 2, "etcd: client and peer only");

        // The gate is off by default: the selector is ignored, the whole list comes back.
        let (_, all) = sharded_namespaces(&bins, server, "0x0000000000000000", "0x8000000000000000");
        assert!(all["metadata"].get("shardInfo").is_none(), "{all}");
        assert!(uids(&all).len() >= 4, "{all}");

        let (outcome, again) = up(dir, &UpOptions::default(), false).unwrap();
        assert_eq!((outcome, &again), (UpOutcome::Reused, &instance));
        assert_eq!((pid_of(dir, "etcd"), pid_of(dir, SERVER)), (etcd, apiserver));

        let said = down(dir).unwrap();
        assert!(said.contains(&format!("stopped {SERVER} (pid {apiserver}), etcd (pid {etcd})")), "{said}");
        for pid in [etcd, apiserver] {
            assert_eq!(control_plane::liveness(pid, &instance.dir), Liveness::Gone);
        }
        assert!(!dir.exists());
        assert!(status(dir).unwrap().starts_with("cluster: not running"));
        assert_eq!(down(dir).unwrap(), "cluster: nothing was running");
    }

    /// `--feature-gates ShardedListAndWatch=true` is on: a LIST with a `shardSelector` answers
    /// only the objects whose uid hashes into the range, with `metadata.shardInfo.selector`
    /// echoing the selector. An `up` with other gates replaces the cluster.
    #[test]
    #[ignore = "needs the local control plane (cargo xtask ci runs it)"]
    fn sharded_list_and_watch_gate_is_on() {
        let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let Some(bins) = binaries("sharded_list_and_watch_gate_is_on") else { return };
        let state = StateDir::new("gates");
        let dir = &state.0;
        let (_, instance) = up(dir, &gates("ShardedListAndWatch=true"), false).unwrap();
        let server = instance.server(SERVER).unwrap();
        assert!(status(dir).unwrap().contains("feature gates: ShardedListAndWatch=true"));

        let (selector, whole) =
            sharded_namespaces(&bins, server, "0x0000000000000000", "0x10000000000000000");
        assert_eq!(whole["metadata"]["shardInfo"]["selector"], selector, "{whole}");
        let all = uids(&whole);
        assert!(all.len() >= 4, "{whole}");
        let mut union = BTreeSet::new();
        for (start, end) in
            [("0x0000000000000000", "0x8000000000000000"), ("0x8000000000000000", "0x10000000000000000")]
        {
            let (selector, half) = sharded_namespaces(&bins, server, start, end);
            assert_eq!(half["metadata"]["shardInfo"]["selector"], selector, "{half}");
            for uid in uids(&half) {
                let h = shard_hash(&uid);
                // Same width except the 17-digit end: compare as the server does (apimachinery HexLess).
                let less = |a: &str, b: &str| (a.len(), a) < (b.len(), b);
                assert!(!less(&h, start) && less(&h, end), "{uid} hashes to {h}, outside [{start}, {end})");
                union.insert(uid);
            }
        }
        assert_eq!(union, all, "the two halves make the whole");

        // Other gates: the cluster is replaced, and the selector is ignored again.
        let (outcome, plain) = up(dir, &UpOptions::default(), false).unwrap();
        assert_eq!(outcome, UpOutcome::Replaced);
        let (_, list) = sharded_namespaces(&bins, plain.server(SERVER).unwrap(), "0x0", "0x1");
        assert!(list["metadata"].get("shardInfo").is_none(), "{list}");
        down(dir).unwrap();
    }

    /// `--legacy` refuses a watch-list request (422); and a control plane whose server died
    /// (a crash, an OOM kill) is stale: status says so, and `up` stops what is left and starts
    /// afresh.
    #[test]
    #[ignore = "needs the local control plane (cargo xtask ci runs it)"]
    fn legacy_server_and_a_crashed_one() {
        let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let Some(bins) = binaries("legacy_server_and_a_crashed_one") else { return };
        let state = StateDir::new("legacy");
        let dir = &state.0;
        let legacy = UpOptions { legacy: true, ..UpOptions::default() };
        let (_, instance) = up(dir, &legacy, false).unwrap();
        let server = instance.server(SERVER).unwrap();
        assert!(status(dir).unwrap().contains("feature gates: WatchList=false (legacy"));
        let watch_list = "/api/v1/namespaces/default/configmaps?watch=1&sendInitialEvents=true\
                          &allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan";
        let (code, body) = get(&bins, server, watch_list);
        assert_eq!(code, 422, "{body}");

        let apiserver = pid_of(&instance.dir, SERVER);
        let etcd = pid_of(&instance.dir, "etcd");
        Command::new("kill").args(["-s", "KILL", &apiserver.to_string()]).status().unwrap();
        let deadline = Instant::now() + std::time::Duration::from_secs(10);
        while control_plane::liveness(apiserver, &instance.dir) != Liveness::Gone {
            assert!(Instant::now() < deadline, "SIGKILL did not end pid {apiserver}");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let report = status(dir).unwrap();
        assert!(report.contains(&format!("{SERVER} (pid {apiserver}) is gone")), "{report}");

        let (outcome, fresh) = up(dir, &legacy, false).unwrap();
        assert_eq!(outcome, UpOutcome::Recovered);
        assert_eq!(control_plane::liveness(etcd, &instance.dir), Liveness::Gone, "the old etcd was stopped");
        assert_ne!(fresh.server(SERVER).unwrap().url, "");
        assert!(status(dir).unwrap().starts_with("cluster: ready"));
        down(dir).unwrap();
    }

    /// The demo against the cluster: `kcache-demo --kubeconfig <printed path> --quick` passes its
    /// verification. CI hands over the binary its test step built (`KCACHE_DEMO_BIN`); by hand,
    /// cargo builds it.
    #[test]
    #[ignore = "needs the local control plane (cargo xtask ci runs it)"]
    fn demo_passes_verification_against_the_cluster() {
        let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        if binaries("demo_passes_verification_against_the_cluster").is_none() {
            return;
        }
        let state = StateDir::new("demo");
        let (_, instance) = up(&state.0, &UpOptions::default(), false).unwrap();
        let kubeconfig = instance.server(SERVER).unwrap().kubeconfig.clone();
        let mut demo = match std::env::var_os("KCACHE_DEMO_BIN") {
            Some(bin) => Command::new(bin),
            None => {
                let mut c = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
                c.current_dir(crate::project_root()).args([
                    "run",
                    "--quiet",
                    "--locked",
                    "-p",
                    "kcache-demo",
                    "--",
                ]);
                c
            }
        };
        let t = Instant::now();
        let out = demo.arg("--kubeconfig").arg(&kubeconfig).arg("--quick").output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "exit {}\nstdout:\n{stdout}\nstderr:\n{stderr}", out.status);
        assert!(stdout.contains("verification: PASSED"), "stdout:\n{stdout}\nstderr:\n{stderr}");
        assert!(
            stdout.contains(&instance.server(SERVER).unwrap().url),
            "the demo ran against the cluster:\n{stdout}"
        );
        eprintln!("demo --quick against the cluster passed in {:.1}s", t.elapsed().as_secs_f64());
        down(&state.0).unwrap();
    }
}
