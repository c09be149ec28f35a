//! `kcache-bench serve --configmaps N`: one kcache-testserver process shared by every side of the
//! informer scenarios, so the server is not what is measured.
//!
//! It binds 127.0.0.1 on a free port, loads N ConfigMaps directly (no HTTP): object `i` is
//! [`crate::workload::object`]`(i, _)` without its resourceVersion (the server assigns one), then
//! prints one JSON line `{"url":"http://127.0.0.1:PORT","configmaps":N}` and serves until its
//! standard input is closed. On exit it writes to stderr how many requests of each kind it
//! served (list or watch, with or without `sendInitialEvents`), to show which protocol each side
//! used.

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::process::ExitCode;

use kcache_testserver::TestServer;
use serde_json::{Value, json};

use crate::workload::{object_name, object_namespace};

/// The JSON body of ConfigMap `i` as loaded into the server.
fn configmap_json(i: usize) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "namespace": object_namespace(i),
            "name": object_name(i),
            "labels": {
                "app": format!("app-{}", i % 1000),
                "shard": format!("shard-{}", i % 10000),
                "tier": format!("tier-{}", i % 3),
            },
        },
    })
}

/// Runs the server until standard input reaches end of file.
pub(crate) fn serve(configmaps: usize) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("kcache-bench serve: runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    rt.block_on(async {
        let server = TestServer::start().await;
        let loaded =
            server.objects().bulk_insert("", "v1", "configmaps", (0..configmaps).map(configmap_json));
        println!("{}", json!({"url": server.url(), "configmaps": loaded}));
        let _ = std::io::stdout().flush();
        let _ = tokio::task::spawn_blocking(|| {
            let mut sink = Vec::new();
            let _ = std::io::stdin().read_to_end(&mut sink);
        })
        .await;
        let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
        for r in server.request_log().entries() {
            let initial = r.query_param("sendInitialEvents").is_some_and(|v| v == "true");
            let kind =
                format!("{:?} watch={} sendInitialEvents={initial} status={}", r.verb, r.watch, r.status);
            *kinds.entry(kind).or_default() += 1;
        }
        for (kind, count) in kinds {
            eprintln!("kcache-bench serve: {count} x {kind}");
        }
    });
    ExitCode::SUCCESS
}
