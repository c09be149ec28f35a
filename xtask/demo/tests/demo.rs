//! Runs the demo binary end to end with `--quick` on the embedded API server.

use std::process::Command;

#[test]
fn quick_run_passes_verification() {
    let out = Command::new(env!("CARGO_BIN_EXE_kcache-demo"))
        .args(["--quick", "--settle-timeout", "40"])
        .output()
        .expect("run kcache-demo");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit status {}\nstdout:\n{stdout}\nstderr:\n{stderr}", out.status);
    assert!(stdout.contains("verification: PASSED"), "stdout:\n{stdout}\nstderr:\n{stderr}");
    // Not a terminal: plain log lines and the summary table.
    assert!(stdout.contains("summary"), "stdout:\n{stdout}");
    assert!(stdout.contains("settling") || stdout.contains("churn"), "stdout:\n{stdout}");
}

#[test]
fn bad_flags_exit_with_status_2() {
    let out = Command::new(env!("CARGO_BIN_EXE_kcache-demo")).arg("--no-such-flag").output().expect("run");
    assert_eq!(out.status.code(), Some(2));
    let help = Command::new(env!("CARGO_BIN_EXE_kcache-demo")).arg("--help").output().expect("run");
    assert!(help.status.success());
    assert!(String::from_utf8_lossy(&help.stdout).contains("--failure-rate"));
}
