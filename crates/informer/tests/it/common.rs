//! Helpers shared by the informer's integration tests: a recording handler, a gate that blocks a
//! handler, a harness running an informer against a kcache-testserver, and the binary's log
//! capture.

#![allow(dead_code, unreachable_pub)]

use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kcache_informer::{ObjectOrTombstone, ResourceEventHandler, SharedIndexInformer};
use kcache_reflector::FakeClock;
use kcache_testserver::TestServer;
use kube::api::{Api, ObjectMeta, PostParams};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing_subscriber::fmt::format::FmtSpan;

/// One notification as a handler saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ev {
    /// name, data.v, is_in_initial_list
    Add(String, String, bool),
    /// name, old data.v, new data.v, same object version (a resync)
    Update(String, String, String, bool),
    /// name, last known data.v, was a tombstone
    Delete(String, String, bool),
}

impl Ev {
    pub fn name(&self) -> &str {
        match self {
            Ev::Add(n, ..) | Ev::Update(n, ..) | Ev::Delete(n, ..) => n,
        }
    }
}

pub fn name(o: &ConfigMap) -> String {
    o.metadata.name.clone().unwrap_or_default()
}

pub fn value(o: &ConfigMap) -> String {
    o.data.as_ref().and_then(|d| d.get("v")).cloned().unwrap_or_default()
}

/// Blocks a handler until opened. Opening is permanent.
#[derive(Clone, Default)]
pub struct Gate {
    open: Arc<(Mutex<bool>, Condvar)>,
    /// How many times a handler has reached the gate, and a signal each time one does.
    entered: Arc<(Mutex<usize>, Notify)>,
}

impl Gate {
    pub fn closed() -> Self {
        Self::default()
    }
    pub fn open(&self) {
        *self.open.0.lock().unwrap() = true;
        self.open.1.notify_all();
    }
    pub fn wait(&self) {
        *self.entered.0.lock().unwrap() += 1;
        self.entered.1.notify_waiters();
        let mut g = self.open.0.lock().unwrap();
        while !*g {
            g = self.open.1.wait(g).unwrap();
        }
    }

    /// Waits (no sleeping) until handlers have reached the gate `n` times: a handler blocked at
    /// a closed gate has taken its notification off its buffer, so the buffer's count is stable.
    pub async fn wait_entered(&self, n: usize) {
        let fut = async {
            loop {
                let notified = self.entered.1.notified();
                if *self.entered.0.lock().unwrap() >= n {
                    return;
                }
                notified.await;
            }
        };
        if tokio::time::timeout(Duration::from_secs(20), fut).await.is_err() {
            panic!("timed out waiting for {n} handler(s) at the gate");
        }
    }
}

/// A handler that records everything, optionally blocked by a gate or panicking on a name.
#[derive(Clone, Default)]
pub struct Recorder {
    pub events: Arc<Mutex<Vec<Ev>>>,
    pub changed: Arc<Notify>,
    pub gate: Option<Gate>,
    pub panic_on: Option<String>,
}

impl Recorder {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn gated(gate: Gate) -> Self {
        Self { gate: Some(gate), ..Self::default() }
    }

    pub fn events(&self) -> Vec<Ev> {
        self.events.lock().unwrap().clone()
    }

    /// The events about one object.
    pub fn of(&self, n: &str) -> Vec<Ev> {
        self.events().into_iter().filter(|e| e.name() == n).collect()
    }

    fn record(&self, e: Ev) {
        if let Some(g) = &self.gate {
            g.wait();
        }
        if self.panic_on.as_deref() == Some(e.name()) {
            self.events.lock().unwrap().push(e);
            self.changed.notify_waiters();
            panic!("handler asked to panic");
        }
        self.events.lock().unwrap().push(e);
        self.changed.notify_waiters();
    }

    /// Waits (no sleeping) until `cond` holds on the recorded events.
    pub async fn wait_until(&self, what: &str, cond: impl Fn(&[Ev]) -> bool) {
        let fut = async {
            loop {
                let notified = self.changed.notified();
                if cond(&self.events()) {
                    return;
                }
                notified.await;
            }
        };
        if tokio::time::timeout(Duration::from_secs(20), fut).await.is_err() {
            panic!("timed out waiting for: {what}; events: {:#?}", self.events());
        }
    }
}

impl ResourceEventHandler<ConfigMap> for Recorder {
    fn on_add(&self, obj: &Arc<ConfigMap>, initial: bool) {
        self.record(Ev::Add(name(obj), value(obj), initial));
    }
    fn on_update(&self, old: &Arc<ConfigMap>, new: &Arc<ConfigMap>) {
        let same = old.metadata.resource_version == new.metadata.resource_version;
        self.record(Ev::Update(name(new), value(old), value(new), same));
    }
    fn on_delete(&self, obj: &ObjectOrTombstone<ConfigMap>) {
        self.record(Ev::Delete(name(obj.object()), value(obj.object()), obj.is_tombstone()));
    }
}

/// A running informer on namespace `default` of a test server.
pub struct Harness {
    pub server: TestServer,
    pub api: Api<ConfigMap>,
    pub informer: SharedIndexInformer<ConfigMap>,
    pub clock: FakeClock,
    pub cancel: CancellationToken,
    pub task: Option<tokio::task::JoinHandle<()>>,
}

impl Harness {
    /// An informer (not started) with a fake clock.
    pub async fn new(default_resync: Duration) -> Self {
        let server = TestServer::start().await;
        Self::on(server, default_resync)
    }

    pub fn on(server: TestServer, default_resync: Duration) -> Self {
        let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
        let informer = SharedIndexInformer::from_api(api.clone(), default_resync);
        let clock = FakeClock::new();
        informer.set_clock(clock.clone()).unwrap();
        Self { server, api, informer, clock, cancel: CancellationToken::new(), task: None }
    }

    pub fn start(&mut self) {
        let informer = self.informer.clone();
        let cancel = self.cancel.clone();
        self.task = Some(tokio::spawn(async move {
            informer.run(cancel).await.unwrap();
        }));
    }

    /// Adds a fresh [`Recorder`] as a handler, starts the informer, waits for it to sync and for
    /// the recorder to have seen `n` events (`what` names them in a timeout message).
    pub async fn start_recording(&mut self, what: &str, n: usize) -> Recorder {
        let rec = Recorder::new();
        self.informer.add_event_handler(rec.clone()).unwrap();
        self.start();
        self.synced().await;
        rec.wait_until(what, |ev| ev.len() == n).await;
        rec
    }

    pub async fn synced(&self) {
        let ok = tokio::time::timeout(
            Duration::from_secs(20),
            kcache_informer::wait_for_cache_sync(&self.cancel, &[&self.informer]),
        )
        .await
        .expect("informer syncs");
        assert!(ok);
    }

    pub async fn stop(mut self) {
        self.cancel.cancel();
        if let Some(t) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(20), t).await.expect("informer stops").unwrap();
        }
    }
}

pub fn cm(name: &str, value: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        data: Some([("v".to_string(), value.to_string())].into()),
        ..Default::default()
    }
}

pub async fn create(api: &Api<ConfigMap>, name: &str, value: &str) {
    api.create(&PostParams::default(), &cm(name, value)).await.expect("create");
}

pub async fn update(api: &Api<ConfigMap>, name: &str, value: &str) {
    let mut o = api.get(name).await.expect("get");
    o.data = Some([("v".to_string(), value.to_string())].into());
    api.replace(name, &PostParams::default(), &o).await.expect("replace");
}

pub async fn delete(api: &Api<ConfigMap>, name: &str) {
    api.delete(name, &Default::default()).await.expect("delete");
}

/// Everything the subscriber wrote, from every thread and every test in this binary.
pub use kcache_test_support::capture::Captured;

/// Installs the capturing subscriber (TRACE, every target) once for the whole binary (the global
/// default, so handler threads, runtime threads and the test server are all captured), and
/// returns it. Every module that reads logs shares it: the captured text holds every test's
/// lines, so a test looks for its own (by a name no other test uses).
pub fn capture() -> Captured {
    static CAPTURED: OnceLock<Captured> = OnceLock::new();
    CAPTURED
        .get_or_init(|| {
            let captured = Captured::default();
            tracing_subscriber::fmt()
                .with_max_level(tracing::Level::TRACE)
                .with_writer(captured.clone())
                .with_span_events(FmtSpan::FULL)
                .with_target(true)
                .with_thread_names(true)
                .with_file(true)
                .with_ansi(false)
                .try_init()
                .expect("the only subscriber in this binary");
            captured
        })
        .clone()
}

/// Events as lines (`add p1`, `delete p1`, ...) pushed by handlers of any type, and waiting for
/// a number of them (no sleeping: each push wakes the waiter).
#[derive(Clone, Default)]
pub struct EventLog {
    events: Arc<Mutex<Vec<String>>>,
    changed: Arc<Notify>,
}

impl EventLog {
    pub fn push(&self, e: String) {
        self.events.lock().unwrap().push(e);
        self.changed.notify_waiters();
    }

    /// The first `n` or more events, once there are; fails after 20 s.
    pub async fn wait_for(&self, n: usize) -> Vec<String> {
        let fut = async {
            loop {
                let notified = self.changed.notified();
                let events = self.events.lock().unwrap().clone();
                if events.len() >= n {
                    return events;
                }
                notified.await;
            }
        };
        match tokio::time::timeout(Duration::from_secs(20), fut).await {
            Ok(events) => events,
            Err(_) => panic!("timed out waiting for {n} events: {:?}", self.events.lock().unwrap()),
        }
    }
}
