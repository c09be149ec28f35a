//! Runs the test server standalone, optionally preloaded with ConfigMaps, and prints its URL.
//!
//! `cargo run -p kcache-testserver --example serve -- --port 8080 --objects 10000`
//!
//! Other options: `--history N` (event history size), `--bookmark-ms N` (bookmark interval),
//! `--token TOKEN:USER[:GROUP,GROUP...]` (repeatable; turns on authentication and RBAC, see
//! `Builder::token`), e.g. `--token admin-token:admin:system:masters` (groups may contain `:`).
//! Point kubectl at it with a kubeconfig whose cluster server is the printed URL, or use it from
//! a Go benchmark.

use std::time::Duration;

use kcache_testserver::TestServer;
use serde_json::json;

fn arg(args: &[String], name: &str) -> Option<u64> {
    let i = args.iter().position(|a| a == name)?;
    match args.get(i + 1).map(|v| v.parse()) {
        Some(Ok(v)) => Some(v),
        _ => {
            eprintln!("{name} needs a number");
            std::process::exit(2);
        }
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!(
            "usage: serve [--port N] [--objects N] [--history N] [--bookmark-ms N] [--token TOKEN:USER[:GROUPS]]..."
        );
        return;
    }
    let port = arg(&args, "--port").unwrap_or(0);
    let objects = arg(&args, "--objects").unwrap_or(0) as usize;
    let history = arg(&args, "--history").unwrap_or(kcache_testserver::DEFAULT_HISTORY_SIZE as u64) as usize;
    let mut builder = TestServer::builder().port(u16::try_from(port).unwrap_or(0)).history_size(history);
    if let Some(ms) = arg(&args, "--bookmark-ms") {
        builder = builder.bookmark_interval(Duration::from_millis(ms));
    }
    for pair in args.windows(2).filter(|w| w[0] == "--token") {
        let mut parts = pair[1].splitn(3, ':');
        let (Some(token), Some(user)) = (parts.next(), parts.next()) else {
            eprintln!("--token needs TOKEN:USER[:GROUP,GROUP...]");
            std::process::exit(2);
        };
        let groups: Vec<&str> = parts.next().map(|g| g.split(',').collect()).unwrap_or_default();
        builder = builder.token(token, user, &groups);
    }
    let server = match builder.try_start().await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("cannot listen: {e}");
            std::process::exit(1);
        }
    };
    let loaded = server.objects().bulk_insert(
        "",
        "v1",
        "configmaps",
        (0..objects).map(|i| {
            json!({"metadata": {"name": format!("cm-{i:06}"), "namespace": "default"}, "data": {"i": i.to_string()}})
        }),
    );
    println!("{}", server.url());
    eprintln!(
        "kcache-testserver: {loaded} configmaps in namespace default, resourceVersion {}",
        server.resource_version()
    );
    let _ = tokio::signal::ctrl_c().await;
}
