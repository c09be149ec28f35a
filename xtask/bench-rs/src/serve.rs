//! `kcache-bench serve --configmaps N`: one kcache-testserver process shared by every side of the
//! informer scenarios, so the server is not what is measured.
//!
//! It binds 127.0.0.1 on a free port, loads N ConfigMaps directly (no HTTP): object `i` is
//! [`crate::workload::object`]`(i, _)` without its resourceVersion (the server assigns one), then
//! prints one JSON line `{"url":"http://127.0.0.1:PORT","configmaps":N}` and serves until its
//! standard input is closed. On exit it writes to stderr how many requests of each kind it
//! served (list or watch, with or without `sendInitialEvents`), to show which protocol each side
//! used.
//!
//! With `--mutate`, for the memory scenario (kube-rs's: N ConfigMaps, N/2 updates, N/10
//! deletes), it waits for the first watch request (the client has listed, or started a
//! watch-list), 500 ms more, then updates ConfigMaps `0..N/2` (each gets
//! `data: {"version": "2"}`), deletes ConfigMaps `N - N/10 .. N`, and finally creates the
//! ConfigMap `bench/sentinel`: a client has seen every change once the sentinel is in its store.
//! Then it updates the Secret `bench/heartbeat` every 50 ms. Such a server serves one run only.
//!
//! With `--pods N` (the scale scenarios, issue #37) it loads instead N Pods, N/5 Secrets and
//! N/10 ConfigMaps shaped like a real cluster's ([`crate::scale`]) and prints
//! `{"url":..,"pods":N,"secrets":..,"configmaps":..}`.
//!
//! With `--mutate --updates M` (the reflector event-throughput scenario) the changes are instead
//! M updates, ConfigMap `k mod N` getting `data: {"version": "<k>"}` for k in `0..M`, written as
//! fast as the server takes them, then the sentinel.

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::process::ExitCode;
use std::time::Duration;

use kcache_testserver::{Objects, RequestLog, TestServer, Verb};
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

/// The memory scenario's changes (or `updates` updates), applied once the first watch arrives.
async fn mutate(log: RequestLog, objects: Objects, configmaps: usize, updates: usize) {
    while log.count(Verb::Watch) == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    if updates > 0 {
        for k in 0..updates {
            let mut cm = configmap_json(k % configmaps.max(1));
            cm["data"] = json!({"version": k.to_string()});
            if let Err(e) = objects.upsert("", "v1", "configmaps", cm) {
                eprintln!("kcache-bench serve: update {k}: {e}");
            }
            if k % 1024 == 1023 {
                // Let the watch streams run on this runtime too.
                tokio::task::yield_now().await;
            }
        }
        sentinel_and_heartbeat(&objects).await;
        return;
    }
    for i in 0..configmaps / 2 {
        let mut cm = configmap_json(i);
        cm["data"] = json!({"version": "2"});
        if let Err(e) = objects.upsert("", "v1", "configmaps", cm) {
            eprintln!("kcache-bench serve: update {i}: {e}");
        }
    }
    for i in configmaps - configmaps / 10..configmaps {
        objects.delete("", "v1", "configmaps", &object_namespace(i), &object_name(i));
    }
    sentinel_and_heartbeat(&objects).await;
}

/// Creates `bench/sentinel`, then updates the Secret `bench/heartbeat` every 50 ms for ever.
async fn sentinel_and_heartbeat(objects: &Objects) {
    let sentinel = json!({"metadata": {"namespace": "bench", "name": "sentinel"}});
    if let Err(e) = objects.upsert("", "v1", "configmaps", sentinel) {
        eprintln!("kcache-bench serve: sentinel: {e}");
    }
    // Keep writing something else (a Secret, which ConfigMap watches never see) every 50 ms:
    // a watch stream that missed the wake-up for the sentinel gets another one. (Seen once in
    // a few runs with kube-runtime: the stream stalled before the sentinel until the next write.)
    for beat in 0u64.. {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let heartbeat = json!({"metadata": {"namespace": "bench", "name": "heartbeat"}, "data": {"beat": beat.to_string()}});
        let _ = objects.upsert("", "v1", "secrets", heartbeat);
    }
}

/// Lists each of `resources` (core/v1) once as protobuf, before any side runs.
///
/// kcache-testserver writes a stored object's protobuf form the first time a client asks for it
/// and keeps it, as kube-apiserver's watch cache keeps an object's serialization: without this,
/// whichever protobuf side ran first would wait for the whole collection to be written (about
/// 0.2 s for 50k ConfigMaps) and every later run would not.
fn warm_protobuf(url: &str, resources: &[&str]) {
    let addr = url.trim_start_matches("http://");
    for r in resources {
        let Ok(mut conn) = std::net::TcpStream::connect(addr) else { continue };
        let request = format!(
            "GET /api/v1/{r} HTTP/1.1\r\nHost: {addr}\r\nAccept: application/vnd.kubernetes.protobuf\r\nConnection: close\r\n\r\n"
        );
        let mut sink = Vec::new();
        if conn.write_all(request.as_bytes()).is_ok() {
            let _ = conn.read_to_end(&mut sink);
        }
    }
}

/// Runs the server until standard input reaches end of file.
pub(crate) fn serve(configmaps: usize, mutate_after_watch: bool, updates: usize, pods: usize) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("kcache-bench serve: runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    rt.block_on(async {
        // History for every event of the run (loads and changes), so that no watch falls out of
        // it and has to relist: the scenarios measure the informer, not recovery.
        let server = TestServer::builder().history_size(4 * configmaps.max(1000) + updates).start().await;
        let ready = if pods > 0 {
            let objects = server.objects();
            let p = objects.bulk_insert("", "v1", "pods", (0..pods).map(crate::scale::pod));
            let s = objects.bulk_insert("", "v1", "secrets", (0..pods / 5).map(crate::scale::secret));
            let c = objects.bulk_insert("", "v1", "configmaps", (0..pods / 10).map(crate::scale::configmap));
            json!({"url": server.url(), "pods": p, "secrets": s, "configmaps": c})
        } else {
            let loaded =
                server.objects().bulk_insert("", "v1", "configmaps", (0..configmaps).map(configmap_json));
            json!({"url": server.url(), "configmaps": loaded})
        };
        let url = server.url().to_owned();
        let _ = tokio::task::spawn_blocking(move || warm_protobuf(&url, &["configmaps", "pods", "secrets"]))
            .await;
        println!("{ready}");
        let _ = std::io::stdout().flush();
        let mutator = mutate_after_watch
            .then(|| tokio::spawn(mutate(server.request_log(), server.objects(), configmaps, updates)));
        let _ = tokio::task::spawn_blocking(|| {
            let mut sink = Vec::new();
            let _ = std::io::stdin().read_to_end(&mut sink);
        })
        .await;
        if let Some(m) = mutator {
            m.abort();
        }
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

/// What `kcache-bench load` creates on a real API server.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Load {
    /// `--from M --configmaps N`: the namespaces `ns-0 .. ns-99` and ConfigMaps `M .. N` (the
    /// objects `serve --configmaps` loads).
    ConfigMaps { from: usize, to: usize },
    /// `--pods N`: the scale scenarios' objects (the ones `serve --pods N` loads): the
    /// namespaces `team-0 .. team-199`, N Pods, each created and then given its status through
    /// the `status` subresource (a create drops a Pod's status, as the kubelet's later writes
    /// would fill it), N/5 Secrets and N/10 ConfigMaps.
    Pods { pods: usize },
}

/// A body to create through the API: `metadata.uid`, `creationTimestamp` and `status` left out
/// (the server sets the first two; a Pod's status is written afterwards, see [`Load::Pods`]).
fn creatable(mut v: Value) -> (Value, Option<Value>) {
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("uid");
        meta.remove("creationTimestamp");
    }
    let status = v.as_object_mut().and_then(|o| o.remove("status"));
    (v, status)
}

/// Creates `body` (a JSON object of `resource` in core/v1) in its namespace, then writes
/// `status` through the status subresource if there is one; an object that exists already
/// counts as created. Returns the number of failures (0 or 1), reported on stderr.
async fn create(
    client: kube::Client,
    resource: &'static str,
    what: String,
    body: Value,
    status: Option<Value>,
) -> usize {
    use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
    use kube::discovery::ApiResource;

    let ar = ApiResource {
        group: String::new(),
        version: "v1".into(),
        api_version: "v1".into(),
        kind: body["kind"].as_str().unwrap_or_default().to_owned(),
        plural: resource.into(),
    };
    let ns = body["metadata"]["namespace"].as_str().unwrap_or_default().to_owned();
    let name = body["metadata"]["name"].as_str().unwrap_or_default().to_owned();
    let api: Api<DynamicObject> =
        if ns.is_empty() { Api::all_with(client, &ar) } else { Api::namespaced_with(client, &ns, &ar) };
    let obj: DynamicObject = match serde_json::from_value(body) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("kcache-bench load: {what}: {e}");
            return 1;
        }
    };
    // The server may still be starting: retry for up to a minute.
    let mut attempts = 0;
    loop {
        match api.create(&PostParams::default(), &obj).await {
            Ok(_) => break,
            Err(kube::Error::Api(s)) if s.code == 409 => break,
            Err(e) if attempts < 300 && !matches!(&e, kube::Error::Api(s) if s.code == 422) => {
                attempts += 1;
                if attempts == 1 {
                    eprintln!("kcache-bench load: {what}: {e}; retrying");
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => {
                eprintln!("kcache-bench load: {what}: {e}");
                return 1;
            }
        }
    }
    if let Some(status) = status {
        let patch = Patch::Merge(json!({ "status": status }));
        if let Err(e) = api.patch_status(&name, &PatchParams::default(), &patch).await {
            eprintln!("kcache-bench load: {what} status: {e}");
            return 1;
        }
    }
    0
}

/// `kcache-bench load --kubeconfig PATH (--from M --configmaps N | --pods N)`: for `cargo xtask
/// bench --cluster local`, creates the objects of [`Load`] on a real API server through its API,
/// 32 requests at a time, and prints how long that took and how many objects it created.
pub(crate) fn load(what: Load) -> ExitCode {
    use futures::StreamExt as _;

    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("kcache-bench load: runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let started = std::time::Instant::now();
    let (failed, created) = rt.block_on(async {
        let client = crate::client().await;
        // (resource, description, body) of every object, namespaces first.
        let namespaces: Vec<String> = match what {
            Load::ConfigMaps { to, .. } => (0..100.min(to.max(1))).map(object_namespace).collect(),
            Load::Pods { .. } => crate::scale::namespaces(),
        };
        let mut failed = 0;
        for ns in &namespaces {
            let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
            failed += create(client.clone(), "namespaces", format!("namespace {ns}"), body, None).await;
        }
        if failed > 0 {
            return (failed, 0);
        }
        let objects: Box<dyn Iterator<Item = (&'static str, String, Value)> + Send> = match what {
            Load::ConfigMaps { from, to } => {
                Box::new((from..to).map(|i| ("configmaps", format!("configmap {i}"), configmap_json(i))))
            }
            Load::Pods { pods } => Box::new(
                (0..pods)
                    .map(|i| ("pods", format!("pod {i}"), crate::scale::pod(i)))
                    .chain((0..pods / 5).map(|i| ("secrets", format!("secret {i}"), crate::scale::secret(i))))
                    .chain(
                        (0..pods / 10)
                            .map(|i| ("configmaps", format!("configmap {i}"), crate::scale::configmap(i))),
                    ),
            ),
        };
        let mut created = 0usize;
        let failed = futures::stream::iter(objects)
            .map(|(resource, what, body)| {
                let (body, status) = creatable(body);
                create(client.clone(), resource, what, body, status)
            })
            .buffer_unordered(32)
            .fold(0usize, |acc, f| {
                created += 1;
                if created.is_multiple_of(10_000) {
                    eprintln!("kcache-bench load: {created} objects in {:.0?}", started.elapsed());
                }
                async move { acc + f }
            })
            .await;
        (failed, created)
    });
    eprintln!(
        "kcache-bench load: {created} objects in {:.1?} ({:.0}/s)",
        started.elapsed(),
        created as f64 / started.elapsed().as_secs_f64()
    );
    if failed > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}
