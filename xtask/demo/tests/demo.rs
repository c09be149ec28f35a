//! Runs the demo binary end to end: `--quick` on the embedded API server, and the `--kubeconfig`
//! paths (throwaway namespace, `--watch-only`) against a kcache-testserver standing in for a
//! cluster.

use std::path::PathBuf;
use std::process::{Command, Output};

use k8s_openapi::api::core::v1::Namespace;
use kcache_testserver::TestServer;
use serde_json::json;

fn demo(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kcache-demo")).args(args).output().expect("run kcache-demo")
}

fn assert_passed(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit status {}\nstdout:\n{stdout}\nstderr:\n{stderr}", out.status);
    assert!(stdout.contains("verification: PASSED"), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("summary"), "stdout:\n{stdout}");
    stdout
}

#[test]
fn quick_run_passes_verification() {
    let out = demo(&["--quick", "--settle-timeout", "40"]);
    let stdout = assert_passed(&out);
    // Not a terminal: plain periodic log lines, not progress bars.
    assert!(stdout.lines().any(|l| l.starts_with('[') && l.contains("churn")), "stdout:\n{stdout}");
    assert!(stdout.contains("slow (20 ms)"), "stdout:\n{stdout}");
}

#[test]
fn bad_flags_exit_with_status_2() {
    assert_eq!(demo(&["--no-such-flag"]).status.code(), Some(2));
    assert_eq!(demo(&["--failure-rate", "1.5"]).status.code(), Some(2));
    let help = demo(&["--help"]);
    assert!(help.status.success());
    assert!(String::from_utf8_lossy(&help.stdout).contains("--failure-rate"));
}

/// A kubeconfig for `server`, written to a file of its own.
fn kubeconfig(server: &TestServer, tag: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("kcache-demo-test-{}-{tag}.yaml", std::process::id()));
    let text = format!(
        "apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: {}
contexts:
- name: test
  context:
    cluster: test
    user: test
current-context: test
users:
- name: test
  user: {{}}
",
        server.url()
    );
    std::fs::write(&path, text).expect("write kubeconfig");
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubeconfig_runs_in_a_throwaway_namespace_and_deletes_it() {
    let server = TestServer::start().await;
    let path = kubeconfig(&server, "churn");
    let arg = path.to_string_lossy().into_owned();
    let out = tokio::task::spawn_blocking(move || {
        demo(&["--kubeconfig", &arg, "--quick", "--duration", "2", "--settle-timeout", "40"])
    })
    .await
    .unwrap();
    let _ = std::fs::remove_file(&path);
    let stdout = assert_passed(&out);
    assert!(stdout.contains("created throwaway namespace kcache-demo-"), "stdout:\n{stdout}");
    assert!(stdout.contains("deleted throwaway namespace kcache-demo-"), "stdout:\n{stdout}");
    let namespaces = kube::Api::<Namespace>::all(server.client()).list(&Default::default()).await.unwrap();
    let left: Vec<_> = namespaces
        .items
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .filter(|n| n.starts_with("kcache-demo-"))
        .collect();
    assert!(left.is_empty(), "throwaway namespaces left behind: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_only_observes_without_writing() {
    let server = TestServer::start().await;
    let stored = server.objects().bulk_insert(
        "",
        "v1",
        "configmaps",
        (0..25).map(|i| json!({"metadata": {"name": format!("existing-{i}"), "namespace": "observed"}})),
    );
    assert_eq!(stored, 25);
    let rv_before = server.resource_version();
    let path = kubeconfig(&server, "watch");
    let arg = path.to_string_lossy().into_owned();
    let out = tokio::task::spawn_blocking(move || {
        demo(&["--kubeconfig", &arg, "--watch-only", "--namespace", "observed", "--duration", "1"])
    })
    .await
    .unwrap();
    let _ = std::fs::remove_file(&path);
    let stdout = assert_passed(&out);
    assert!(stdout.contains("cache == server list; 25 objects"), "stdout:\n{stdout}");
    assert_eq!(server.resource_version(), rv_before, "a watch-only run wrote to the server");
}

/// `--replicas 3`: three replicas on one Lease; the leader is killed a third of the way through,
/// another takes over within the bound, the killed one comes back as a follower, and the
/// verification passes (one leader at a time, every final state and delete reconciled).
#[test]
fn replicas_fail_over_and_pass_verification() {
    let out = demo(&["--replicas", "3", "--quick", "--duration", "9", "--settle-timeout", "40"]);
    let stdout = assert_passed(&out);
    assert!(stdout.contains("KILL replica-0"), "stdout:\n{stdout}");
    assert!(
        stdout.lines().any(|l| l.contains("failover:") && l.contains("started leading")),
        "stdout:\n{stdout}"
    );
    assert!(stdout.contains("one leader at a time"), "stdout:\n{stdout}");
}

/// `--shards 3`: three replicas split the objects by hash; replica-0 is killed a third of the
/// way through, its range is taken over within the bound, and the ledger shows every object's
/// final state reconciled, by exactly one owner at a time.
#[test]
fn shards_take_over_and_pass_verification() {
    let out = demo(&["--shards", "3", "--quick", "--duration", "9", "--settle-timeout", "40"]);
    let stdout = assert_passed(&out);
    assert!(stdout.contains("KILL replica-0"), "stdout:\n{stdout}");
    assert!(stdout.lines().any(|l| l.contains("takeover:")), "stdout:\n{stdout}");
    assert!(
        stdout.contains("PASS each object reconciled by exactly one owner at a time"),
        "stdout:\n{stdout}"
    );
}
