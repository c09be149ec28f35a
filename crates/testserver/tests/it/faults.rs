//! Injected faults: failed requests, broken, hung and slow watch streams, restarts, and the
//! request log that shows what the client did about them.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kcache_testserver::{RequestFault, RequestMatch, TestServer, Verb, WatchFault};
use kube::api::{Api, ListParams, PostParams, WatchParams};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::{cm, describe, drain, next_events, status_of};

async fn seeded(n: usize) -> (TestServer, Api<ConfigMap>) {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    for i in 0..n {
        cms.create(&PostParams::default(), &cm(&format!("cm-{i}"), &[], "1")).await.unwrap();
    }
    (server, cms)
}

/// Plain watch parameters without bookmarks (so counts are of object events only).
fn wp() -> WatchParams {
    WatchParams::default().disable_bookmarks()
}

#[tokio::test]
async fn the_next_k_matching_requests_fail_with_the_injected_status() {
    let (server, cms) = seeded(1).await;
    server.faults().fail_requests(2, RequestFault::internal_error().verb(Verb::List));
    for _ in 0..2 {
        let s = status_of(cms.list(&ListParams::default()).await.unwrap_err());
        assert_eq!((s.code, s.reason.as_str()), (500, "InternalError"));
    }
    assert!(cms.get("cm-0").await.is_ok(), "other verbs are not affected");
    assert_eq!(cms.list(&ListParams::default()).await.unwrap().items.len(), 1, "only two failed");
}

#[tokio::test]
async fn faults_can_be_limited_to_a_path() {
    let (server, cms) = seeded(1).await;
    let secrets: Api<Secret> = Api::default_namespaced(server.client());
    server.faults().fail_requests(1, RequestFault::forbidden().path_contains("/secrets"));
    assert!(cms.list(&ListParams::default()).await.is_ok());
    let s = status_of(secrets.list(&ListParams::default()).await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        s.message,
        "secrets is forbidden: User \"system:anonymous\" cannot list resource \"secrets\" in API group \"\" in \
         the namespace \"default\""
    );
}

/// A raw GET of the default namespace's configmaps: code, headers and body bytes.
async fn raw_list(server: &TestServer) -> (u16, http::HeaderMap, bytes::Bytes) {
    let req = http::Request::get("/api/v1/namespaces/default/configmaps")
        .body(kube::client::Body::from(Vec::new()))
        .unwrap();
    let resp = server.client().send(req).await.unwrap();
    let (code, headers) = (resp.status().as_u16(), resp.headers().clone());
    let body = http_body_util::BodyExt::collect(resp.into_body()).await.unwrap().to_bytes();
    (code, headers, body)
}

/// `too_many_requests` is API Priority and Fairness's rejection
/// (k8s.io/apiserver/pkg/server/filters/priority-and-fairness.go `tooManyRequests`): a
/// `Retry-After` header and Go's `http.Error` plain-text body, no Status.
/// `too_many_requests_status` is the watch cache's while it (re)initializes
/// (k8s.io/apiserver/pkg/storage/cacher/cacher.go, `errors.NewTooManyRequests`): a Status with
/// `details.retryAfterSeconds` and the same header (responsewriters/writers.go
/// `ErrorNegotiated`). Other faults are Statuses with their reasons.
#[tokio::test]
async fn too_many_requests_carries_retry_after_and_other_codes_have_their_reasons() {
    let (server, cms) = seeded(0).await;
    let faults = server.faults();
    faults.fail_requests(1, RequestFault::too_many_requests(7));
    let (code, headers, body) = raw_list(&server).await;
    assert_eq!(code, 429);
    assert_eq!(headers["retry-after"], "7");
    assert_eq!(headers["content-type"], "text/plain; charset=utf-8");
    assert_eq!(headers["x-content-type-options"], "nosniff");
    assert_eq!(&body[..], b"Too many requests, please try again later.\n");

    faults.fail_requests(1, RequestFault::too_many_requests_status(3));
    let (code, headers, body) = raw_list(&server).await;
    assert_eq!(code, 429);
    assert_eq!(headers["retry-after"], "3");
    assert_eq!(headers["content-type"], "application/json");
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        v,
        serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "storage is (re)initializing", "reason": "TooManyRequests",
            "details": {"retryAfterSeconds": 3}, "code": 429,
        })
    );
    faults.fail_requests(1, RequestFault::too_many_requests_status(3));
    let s = status_of(cms.list(&ListParams::default()).await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (429, "TooManyRequests"));
    assert_eq!(s.details.unwrap().retry_after_seconds, 3);

    // Any fault can be sent as plain text.
    faults.fail_requests(1, RequestFault::status(503, "ServiceUnavailable", "down").plain_text());
    let (code, headers, body) = raw_list(&server).await;
    assert_eq!((code, &body[..]), (503, &b"down\n"[..]));
    assert!(headers.get("retry-after").is_none());

    for (fault, code, reason) in [
        (RequestFault::unauthorized(), 401, "Unauthorized"),
        (RequestFault::gone(), 410, "Expired"),
        (RequestFault::status(503, "ServiceUnavailable", "down"), 503, "ServiceUnavailable"),
    ] {
        faults.fail_requests(1, fault);
        let s = status_of(cms.list(&ListParams::default()).await.unwrap_err());
        assert_eq!((s.code, s.reason.as_str()), (code, reason));
    }
    // A failed watch request is a non-200 response, not a stream.
    faults.fail_requests(1, RequestFault::internal_error().verb(Verb::Watch));
    let s = status_of(cms.watch(&wp(), "0").await.err().expect("watch refused"));
    assert_eq!(s.code, 500);
}

#[tokio::test]
async fn close_after_n_events_ends_the_stream_cleanly() {
    let (server, cms) = seeded(3).await;
    server.faults().next_watch(WatchFault::CloseAfter(2));
    let mut s = cms.watch(&wp(), "0").await.unwrap().boxed();
    assert_eq!(drain(&mut s).await.len(), 2);
    // One-shot: the next watch is whole again.
    let mut s = cms.watch(&wp(), "0").await.unwrap().boxed();
    assert_eq!(next_events(&mut s, 3).await.len(), 3);
}

#[tokio::test]
async fn close_after_zero_is_a_very_short_watch() {
    let (server, cms) = seeded(3).await;
    server.faults().all_watches(WatchFault::CloseAfter(0));
    for _ in 0..2 {
        let mut s = cms.watch(&wp(), "0").await.unwrap().boxed();
        assert!(drain(&mut s).await.is_empty());
    }
    server.faults().clear();
    let mut s = cms.watch(&wp(), "0").await.unwrap().boxed();
    assert_eq!(next_events(&mut s, 3).await.len(), 3);
    let log = server.request_log().filter(|r| r.watch);
    assert_eq!(log.len(), 3);
    assert!(log.iter().all(|r| r.status == 200 && r.verb == Verb::Watch));
}

#[tokio::test]
async fn an_error_event_with_a_non_410_status_ends_the_stream() {
    let (server, cms) = seeded(3).await;
    server.faults().next_watch(WatchFault::Error {
        after: 1,
        code: 500,
        reason: "InternalError".into(),
        message: "etcd is sad".into(),
    });
    let mut s = cms.watch(&wp(), "0").await.unwrap().boxed();
    let evs = drain(&mut s).await;
    assert_eq!(evs.len(), 2);
    assert_eq!(evs[0].0, "ADDED");
    assert_eq!(evs[1], ("ERROR".to_string(), "InternalError".to_string(), "500".to_string()));
}

#[tokio::test]
async fn malformed_frames_and_unknown_event_types_reach_the_client_as_decode_errors() {
    let (server, cms) = seeded(3).await;
    server.faults().next_watch(WatchFault::MalformedFrame { after: 1 });
    let wp = wp().timeout(1);
    let mut s = cms.watch(&wp, "0").await.unwrap().boxed();
    let mut seen = Vec::new();
    while let Some(ev) = s.next().await {
        seen.push(ev.map(|e| describe(&e).0).unwrap_or_else(|_| "decode-error".into()));
    }
    assert_eq!(seen, ["ADDED", "decode-error", "ADDED", "ADDED"]);

    server.faults().next_watch(WatchFault::UnknownEventType { after: 2 });
    let mut s = cms.watch(&wp, "0").await.unwrap().boxed();
    let mut seen = Vec::new();
    while let Some(ev) = s.next().await {
        seen.push(ev.map(|e| describe(&e).0).unwrap_or_else(|_| "decode-error".into()));
    }
    assert_eq!(seen, ["ADDED", "ADDED", "decode-error", "ADDED"]);
}

/// Sends a raw HTTP/1.1 GET and returns the stream after reading the response head.
async fn raw_watch(server: &TestServer, query: &str) -> (TcpStream, String, Vec<u8>) {
    let mut tcp = TcpStream::connect(server.addr()).await.unwrap();
    let req = format!(
        "GET /api/v1/namespaces/default/configmaps?{query} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
    );
    tcp.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        let n = tcp.read(&mut chunk).await.unwrap();
        assert!(n > 0, "connection closed before the response head");
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let rest = buf[head_end..].to_vec();
    (tcp, head, rest)
}

async fn read_to_end(tcp: &mut TcpStream, mut body: Vec<u8>) -> Vec<u8> {
    let mut chunk = [0u8; 4096];
    loop {
        match tcp.read(&mut chunk).await {
            Ok(0) | Err(_) => return body,
            Ok(n) => body.extend_from_slice(&chunk[..n]),
        }
    }
}

#[tokio::test]
async fn raw_frames_are_newline_delimited_json_and_the_malformed_one_is_not() {
    let (server, _cms) = seeded(2).await;
    server.faults().next_watch(WatchFault::MalformedFrame { after: 1 });
    let (mut tcp, head, rest) = raw_watch(&server, "watch=1&resourceVersion=0&timeoutSeconds=1").await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.to_ascii_lowercase().contains("transfer-encoding: chunked"), "{head}");
    let body = String::from_utf8_lossy(&read_to_end(&mut tcp, rest).await).into_owned();
    let lines: Vec<&str> = body.lines().filter(|l| l.starts_with('{')).collect();
    assert_eq!(lines.len(), 3, "{body}");
    assert!(serde_json::from_str::<serde_json::Value>(lines[0]).is_ok());
    assert!(serde_json::from_str::<serde_json::Value>(lines[1]).is_err());
    assert!(serde_json::from_str::<serde_json::Value>(lines[2]).is_ok());
}

/// Raw frames go out byte for byte at their position, several per watch, in order.
#[tokio::test]
async fn raw_frames_are_sent_verbatim_at_their_position() {
    let (server, _cms) = seeded(2).await;
    let faults = server.faults();
    faults.next_watch(WatchFault::RawFrame { after: 1, bytes: b"{\"type\":\"odd\"}\n".to_vec() });
    let (mut tcp, _head, rest) = raw_watch(&server, "watch=1&resourceVersion=0&timeoutSeconds=1").await;
    let body = String::from_utf8_lossy(&read_to_end(&mut tcp, rest).await).into_owned();
    let lines: Vec<&str> = body.lines().filter(|l| l.starts_with('{')).collect();
    assert_eq!(lines.len(), 3, "{body}");
    assert_eq!(lines[1], r#"{"type":"odd"}"#);
    assert!(lines[0].contains("ADDED") && lines[2].contains("ADDED"));
}

#[tokio::test]
async fn a_hung_stream_sends_headers_and_then_nothing_until_the_connection_drops() {
    let (server, cms) = seeded(2).await;
    server.faults().next_watch(WatchFault::Hang);
    let (mut tcp, head, rest) = raw_watch(&server, "watch=true&resourceVersion=0").await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(rest.is_empty());
    // An event that a healthy stream would carry.
    cms.create(&PostParams::default(), &cm("late", &[], "1")).await.unwrap();
    // Only a restart ends the hang: no bytes came, and the close is not a clean end of stream.
    server.restart();
    let body = read_to_end(&mut tcp, rest).await;
    assert!(body.is_empty(), "a hung stream sent {:?}", String::from_utf8_lossy(&body));

    // Through kube: the watch opens, then nothing arrives until the restart drops it.
    server.faults().next_watch(WatchFault::Hang);
    let mut s = cms.watch(&wp(), "0").await.unwrap().boxed();
    server.restart();
    let ends = s.next().await;
    assert!(!matches!(ends, Some(Ok(_))), "no event from a hung stream: {ends:?}");
}

#[tokio::test(start_paused = true)]
async fn a_slow_stream_sends_at_most_n_events_per_second() {
    let (server, cms) = seeded(5).await;
    server.faults().next_watch(WatchFault::Slow { events_per_sec: 2 });
    let start = tokio::time::Instant::now();
    let mut s = cms.watch(&wp(), "0").await.unwrap().boxed();
    assert_eq!(next_events(&mut s, 5).await.len(), 5);
    // Four gaps of half a second each on the (paused) tokio clock.
    assert!(start.elapsed() >= Duration::from_secs(2), "{:?}", start.elapsed());
}

#[tokio::test]
async fn restart_drops_every_connection_and_keeps_state() {
    let (server, cms) = seeded(2).await;
    let rv = server.resource_version().to_string();
    let mut s = cms.watch(&wp(), &rv).await.unwrap().boxed();
    let before = server.request_log().entries().last().unwrap().connection;
    server.faults().restart();
    let end = s.next().await;
    assert!(!matches!(end, Some(Ok(_))), "the watch ends: {end:?}");
    // Same state, same resourceVersions; watching resumes where it left off.
    assert_eq!(cms.list(&ListParams::default()).await.unwrap().items.len(), 2);
    assert_eq!(server.resource_version().to_string(), rv);
    let mut s = cms.watch(&wp(), &rv).await.unwrap().boxed();
    cms.create(&PostParams::default(), &cm("after", &[], "1")).await.unwrap();
    assert_eq!(next_events(&mut s, 1).await[0].1, "after");
    let after = server.request_log().filter(|r| r.watch).last().unwrap().connection;
    assert!(after > before, "the client had to reconnect");
}

#[tokio::test]
async fn compacting_through_the_fault_handle_expires_old_watches() {
    let (server, cms) = seeded(2).await;
    let old = "2";
    server.faults().compact();
    let mut s = cms.watch(&wp(), old).await.unwrap().boxed();
    let evs = drain(&mut s).await;
    assert_eq!(evs, [("ERROR".to_string(), "Expired".to_string(), "410".to_string())]);
}

#[tokio::test]
async fn the_request_log_records_what_the_client_did() {
    let (server, cms) = seeded(1).await;
    let log = server.request_log();
    log.clear();
    server.faults().fail_requests(1, RequestFault::too_many_requests(1).verb(Verb::Get));
    let _ = cms.get("cm-0").await;
    cms.get("cm-0").await.unwrap();
    let mut s = cms.watch(&wp().labels("a=b").timeout(1), "0").await.unwrap().boxed();
    drain(&mut s).await;
    let entries = log.entries();
    let summary: Vec<_> = entries.iter().map(|r| (r.method.as_str(), r.verb, r.status, r.watch)).collect();
    assert_eq!(
        summary,
        [("GET", Verb::Get, 429, false), ("GET", Verb::Get, 200, false), ("GET", Verb::Watch, 200, true)]
    );
    assert_eq!(entries[0].path, "/api/v1/namespaces/default/configmaps/cm-0");
    assert_eq!(entries[2].query_param("labelSelector").as_deref(), Some("a=b"));
    assert_eq!(entries[2].query_param("timeoutSeconds").as_deref(), Some("1"));
    assert!(entries[0].at <= entries[1].at && entries[1].at <= entries[2].at);
    assert_eq!(log.count(Verb::Get), 2);
}

/// Reads one HTTP/1.1 response with a `content-length` body: its head (lowercased) and body.
async fn read_response(tcp: &mut TcpStream) -> (String, Vec<u8>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..i + 4]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            if buf.len() >= i + 4 + len {
                return (head, buf[i + 4..i + 4 + len].to_vec());
            }
        }
        let n = tcp.read(&mut chunk).await.unwrap();
        assert!(n > 0, "connection closed mid-response: {:?}", String::from_utf8_lossy(&buf));
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// A graceful kube-apiserver restart (Go's `http.Server.Shutdown`, called by the generic API
/// server's `RunWithContext` once in-flight requests drained) closes idle keep-alive
/// connections; by the time the restarted server answers, a client has noticed and sends its
/// next request on a new connection, which succeeds. Here the restart takes no time, and the
/// next request after it succeeds too (it failed now and then with `IncompleteMessage` when the
/// restart dropped the pooled connection under the client).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_right_after_a_restart_succeeds() {
    let (server, cms) = seeded(1).await;
    for i in 0..200 {
        cms.get("cm-0").await.unwrap_or_else(|e| panic!("request {i} before the restart: {e}"));
        server.faults().restart();
        cms.get("cm-0").await.unwrap_or_else(|e| panic!("request {i} right after the restart: {e}"));
    }
}

/// An idle keep-alive connection of a restarted server answers its next request with
/// `Connection: close` and closes, so the client's following request opens a new connection,
/// as after a real restart (where kube-apiserver closed the idle connection at once).
#[tokio::test]
async fn an_idle_connection_closes_after_its_next_request_once_restarted() {
    let (server, _cms) = seeded(1).await;
    let mut tcp = TcpStream::connect(server.addr()).await.unwrap();
    let get = b"GET /api/v1/namespaces/default/configmaps/cm-0 HTTP/1.1\r\nhost: x\r\n\r\n";
    tcp.write_all(get).await.unwrap();
    let (head, _) = read_response(&mut tcp).await;
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(!head.contains("connection: close"), "keep-alive before the restart: {head}");
    server.faults().restart();
    tcp.write_all(get).await.unwrap();
    let (head, _) = read_response(&mut tcp).await;
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("connection: close"), "{head}");
    let mut rest = Vec::new();
    assert_eq!(tcp.read_to_end(&mut rest).await.unwrap_or(0), 0, "closed after the response");
}

/// A request being served when the restart comes is finished, with `Connection: close` (Go's
/// server stops keep-alives while shutting down, `doKeepAlives`), and then its connection
/// closes; the state it wrote is kept.
#[tokio::test]
async fn a_request_in_flight_during_a_restart_completes_with_connection_close() {
    let (server, cms) = seeded(0).await;
    let mut tcp = TcpStream::connect(server.addr()).await.unwrap();
    let body = br#"{"metadata":{"name":"in-flight"},"data":{"v":"1"}}"#;
    let head = format!(
        "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n",
        body.len()
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    tcp.write_all(&body[..10]).await.unwrap();
    // The server is reading the body when the restart comes: wait until it counts the request.
    let log = server.request_log();
    let mut tries = 0;
    while server.requests_in_flight() == 0 {
        tries += 1;
        assert!(tries < 10_000, "the request never started");
        tokio::task::yield_now().await;
    }
    assert!(log.entries().is_empty());
    server.faults().restart();
    tcp.write_all(&body[10..]).await.unwrap();
    let (head, resp) = read_response(&mut tcp).await;
    assert!(head.starts_with("http/1.1 201"), "{head}");
    assert!(head.contains("connection: close"), "{head}");
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&resp).unwrap()["metadata"]["name"], "in-flight");
    let mut rest = Vec::new();
    assert_eq!(tcp.read_to_end(&mut rest).await.unwrap_or(0), 0, "closed after the response");
    assert!(cms.get("in-flight").await.is_ok());
}

/// A conflict storm: `RequestFault::conflict` answers matching updates with kube-apiserver's 409
/// for a stale resourceVersion, whatever they carry (what a client sees when other writers keep
/// winning the race), and can be limited to one user.
#[tokio::test]
async fn a_conflict_storm_answers_updates_with_kube_apiservers_409() {
    let server = TestServer::builder()
        .token("admin", "admin", &["system:masters"])
        .token("a", "candidate-a", &["system:masters"])
        .start()
        .await;
    let as_admin: Api<ConfigMap> = Api::default_namespaced(server.client());
    let as_a: Api<ConfigMap> = Api::default_namespaced(server.client_for_token("a"));
    let created = as_admin.create(&PostParams::default(), &cm("lock", &[], "1")).await.unwrap();
    server.faults().fail_requests(
        3,
        RequestFault::conflict("configmaps", "lock").verb(Verb::Update).user("candidate-a"),
    );
    for _ in 0..3 {
        let s = status_of(as_a.replace("lock", &PostParams::default(), &created).await.unwrap_err());
        assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
        assert_eq!(
            s.message,
            "Operation cannot be fulfilled on configmaps \"lock\": the object has been modified; please apply \
             your changes to the latest version and try again"
        );
    }
    let kept = as_admin.replace("lock", &PostParams::default(), &created).await.unwrap();
    assert_eq!(
        kept.metadata.resource_version, created.metadata.resource_version,
        "another user is not affected"
    );
    assert!(as_a.replace("lock", &PostParams::default(), &kept).await.is_ok(), "the storm is over");
}

/// `Faults::unreachable`: matching requests get no answer and have no effect until the fault is
/// removed; then their connections are dropped. The client's own timeout ends the wait, as in a
/// network partition. Only the partitioned user is affected. On tokio's paused clock through the
/// in-memory client, so the timeout costs no real time.
#[tokio::test(start_paused = true)]
async fn an_unreachable_server_answers_nothing_until_the_fault_is_removed() {
    let server = TestServer::builder()
        .token("admin", "admin", &["system:masters"])
        .token("a", "candidate-a", &["system:masters"])
        .start()
        .await;
    let as_admin: Api<ConfigMap> = Api::default_namespaced(server.in_memory_client());
    let as_a: Api<ConfigMap> = Api::default_namespaced(server.in_memory_client_for_token("a"));
    let partition = server.faults().unreachable(RequestMatch::all().user("candidate-a"));

    let start = tokio::time::Instant::now();
    let x = cm("x", &[], "1");
    let lost = tokio::time::timeout(Duration::from_secs(10), as_a.create(&PostParams::default(), &x)).await;
    assert!(lost.is_err(), "no answer within the client's timeout");
    assert_eq!(start.elapsed(), Duration::from_secs(10));
    assert!(as_admin.get_opt("x").await.unwrap().is_none(), "the create never reached the server");

    // A request in flight when the fault is removed fails with a connection error.
    let pending = tokio::spawn({
        let as_a = as_a.clone();
        async move { as_a.list(&ListParams::default()).await }
    });
    // On the paused clock this sleep ends only once every task waits: the list is held.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!pending.is_finished());
    server.faults().remove(partition);
    let err = pending.await.unwrap().unwrap_err();
    assert!(!matches!(err, kube::Error::Api(_)), "a transport error, not a Status: {err}");
    let dropped = server.request_log().filter(|r| r.status == 0);
    assert_eq!(dropped.iter().map(|r| r.verb).collect::<Vec<_>>(), [Verb::List], "logged with status 0");
    assert!(as_a.create(&PostParams::default(), &cm("x", &[], "1")).await.is_ok(), "reachable again");
}

/// `Faults::slow_responses`: the work is done at once (the write is stored) and the answer comes
/// `delay` later on the server's clock; delays of overlapping faults add up.
#[tokio::test(start_paused = true)]
async fn slow_responses_answer_late_after_doing_the_work() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.in_memory_client());
    let slow = server.faults().slow_responses(RequestMatch::all().verb(Verb::Create), Duration::from_secs(3));
    server.faults().slow_responses(RequestMatch::all().path_contains("/configmaps"), Duration::from_secs(1));

    let start = tokio::time::Instant::now();
    let create = tokio::spawn({
        let cms = cms.clone();
        async move { cms.create(&PostParams::default(), &cm("x", &[], "1")).await }
    });
    // The paused clock moves only when every task waits, so after one second of it the create
    // has been served and waits for its answer.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(server.objects().count("", "v1", "configmaps"), 1, "stored before the answer");
    assert!(!create.is_finished());
    create.await.unwrap().unwrap();
    assert_eq!(start.elapsed(), Duration::from_secs(4), "3 s + 1 s");

    server.faults().remove(slow);
    let start = tokio::time::Instant::now();
    cms.get("x").await.unwrap();
    assert_eq!(start.elapsed(), Duration::from_secs(1));
}

/// With `Builder::clock`, slow responses wait on that clock: a `FakeClock` the test advances.
#[tokio::test]
async fn slow_responses_wait_on_the_servers_clock() {
    let clock = kcache_testserver::FakeClock::new();
    let server = TestServer::builder().clock(clock.clone()).start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    server.faults().slow_responses(RequestMatch::all(), Duration::from_secs(30));
    let list = tokio::spawn(async move { cms.list(&ListParams::default()).await });
    assert_eq!(clock.wait_for_sleepers(1).await, [Duration::from_secs(30)]);
    assert!(!list.is_finished());
    clock.advance(Duration::from_secs(30));
    assert!(list.await.unwrap().is_ok());
}
