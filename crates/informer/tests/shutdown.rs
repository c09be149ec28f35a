//! Shutdown: stopping an informer or a factory mid-flight leaves no handler thread, runtime
//! thread or tokio task behind (threads counted by name in `/proc/self/task`, tasks with the
//! runtime's `num_alive_tasks`), completes the notification a handler is in, and cannot deadlock
//! whatever the drop order (client-go's `sharedIndexInformer.Run`, whose deferred
//! `processor.stop` and `wg.Wait` stop every `processorListener`, and `TestSharedInformerStopped`-era
//! tests). Each test builds its own runtime with named threads so it can count them after the
//! runtime is gone, and holds one lock so no other test's threads are counted. Every wait is under
//! a timeout that fails the test instead of hanging it.
//!
//! A binary of its own: it counts the process's threads, which other tests would skew.

#[path = "it/common.rs"]
mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use common::Gate;
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_informer::{
    HandlerRegistration, InformerError, InformerScope, ObjectOrTombstone, ResourceEventHandler,
    SharedIndexInformer, SharedInformerFactory,
};
use kcache_reflector::{
    FakeClock, ListOptions, ListPage, ListerWatcher, ReflectorConfig, WatchEvent, WatchOptions, WatchStream,
};
use kube::api::ObjectMeta;
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

/// Every test holds this lock: thread counts are one test's alone.
static SERIAL: Mutex<()> = Mutex::new(());

const RUNTIME_THREAD: &str = "shutdown-rt";

/// Handler threads are named "kcache-listener-N" (cut to 15 bytes in `/proc`).
const LISTENER_THREAD: &str = "kcache-listen";

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Threads of this process whose name starts with `prefix` (names are cut to 15 bytes).
fn threads_named(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim_end().starts_with(prefix))
        .count()
}

/// Handler threads alive.
fn listener_threads() -> usize {
    threads_named(LISTENER_THREAD)
}

/// Waits until no thread named `prefix…` is listed in `/proc/self/task`, checking repeatedly
/// (yielding, never sleeping) until a deadline. A thread that was told to stop has no handle to
/// join here, and even a joined one can stay listed for a moment: the kernel wakes the joiner
/// when the thread releases its memory, before it removes the thread's entry (CI once saw a
/// handler thread listed right after `run`, which joins them, returned). So every "no thread
/// left" check goes through here instead of reading the count once.
fn threads_gone(what: &str, prefix: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while threads_named(prefix) != 0 {
        assert!(Instant::now() < deadline, "{what}: {} threads left behind", threads_named(prefix));
        std::thread::yield_now();
    }
}

fn alive_tasks() -> usize {
    tokio::runtime::Handle::current().metrics().num_alive_tasks()
}

/// Yields until the runtime's live tasks drop to `expected`, or fails after a deadline.
async fn tasks_settle_to(expected: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while alive_tasks() != expected {
        assert!(Instant::now() < deadline, "tasks alive: {} (expected {expected})", alive_tasks());
        tokio::task::yield_now().await;
    }
}

/// Yields until `cond` holds, or fails after a deadline (no sleeping).
async fn until(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(Instant::now() < deadline, "never happened: {what}");
        tokio::task::yield_now().await;
    }
}

/// Fails the test instead of hanging it.
async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(Duration::from_secs(20), fut).await {
        Ok(v) => v,
        Err(_) => panic!("deadlock: {what} did not finish"),
    }
}

/// A multi-threaded runtime with two workers, its threads named [`RUNTIME_THREAD`].
fn test_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(RUNTIME_THREAD)
        .enable_all()
        .build()
        .unwrap()
}

/// Runs `test` on a fresh multi-threaded runtime with named threads, shuts the runtime down, and
/// checks that none of its threads (workers and blocking pool) and no handler thread survive.
fn on_runtime(test: impl std::future::Future<Output = ()>) {
    let _serial = serial();
    assert_eq!(listener_threads(), 0, "no handler thread before the test");
    let rt = test_runtime();
    rt.block_on(test);
    rt.shutdown_timeout(Duration::from_secs(20));
    threads_gone("runtime threads after shutdown", RUNTIME_THREAD);
    threads_gone("handler threads after shutdown", LISTENER_THREAD);
}

fn cm(name: &str, value: u64) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            resource_version: Some((value + 2).to_string()),
            ..Default::default()
        },
        data: Some([("v".to_string(), value.to_string())].into()),
        ..Default::default()
    }
}

/// A `ListerWatcher` without HTTP (so every task on the runtime is the informer's): the list is
/// `initial` ConfigMaps `k0..`, the first watch streams what the test sends, later watches stay
/// silent.
struct Fed {
    initial: u64,
    events: Mutex<Option<mpsc::UnboundedReceiver<WatchEvent<ConfigMap>>>>,
}

impl ListerWatcher<ConfigMap> for Fed {
    fn list(&self, _: ListOptions) -> BoxFuture<'static, kcache_reflector::Result<ListPage<ConfigMap>>> {
        let items = (0..self.initial).map(|i| Arc::new(cm(&format!("k{i}"), 0))).collect();
        futures::future::ready(Ok(ListPage {
            items,
            resource_version: "1".into(),
            continue_token: None,
            shard_info: None,
        }))
        .boxed()
    }

    fn watch(&self, _: WatchOptions) -> BoxFuture<'static, kcache_reflector::Result<WatchStream<ConfigMap>>> {
        let stream = match self.events.lock().unwrap().take() {
            Some(mut rx) => futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
                .map(Ok)
                .chain(futures::stream::pending())
                .boxed(),
            None => futures::stream::pending().boxed(),
        };
        futures::future::ready(Ok(stream)).boxed()
    }
}

/// Counts notifications and keeps the last value per key; optionally blocks in each until its
/// gate opens; notifies `dropped` when the handler itself is dropped (its listener is gone).
#[derive(Clone, Default)]
struct Counter {
    received: Arc<AtomicU64>,
    last: Arc<Mutex<HashMap<String, String>>>,
    changed: Arc<Notify>,
    entered: Arc<Notify>,
    gate: Option<Gate>,
}

impl Counter {
    fn gated(gate: Gate) -> Self {
        Self { gate: Some(gate), ..Self::default() }
    }

    fn seen(&self, obj: &ConfigMap) {
        self.entered.notify_one();
        if let Some(g) = &self.gate {
            g.wait();
        }
        self.last.lock().unwrap().insert(common::name(obj), common::value(obj));
        self.received.fetch_add(1, Ordering::SeqCst);
        self.changed.notify_waiters();
    }

    fn received(&self) -> u64 {
        self.received.load(Ordering::SeqCst)
    }

    async fn wait_for(&self, n: u64) {
        within(&format!("{n} notifications"), async {
            loop {
                let notified = self.changed.notified();
                if self.received() >= n {
                    return;
                }
                notified.await;
            }
        })
        .await;
    }
}

impl ResourceEventHandler<ConfigMap> for Counter {
    fn on_add(&self, obj: &Arc<ConfigMap>, _: bool) {
        self.seen(obj);
    }
    fn on_update(&self, _: &Arc<ConfigMap>, new: &Arc<ConfigMap>) {
        self.seen(new);
    }
    fn on_delete(&self, obj: &ObjectOrTombstone<ConfigMap>) {
        self.seen(obj.object());
    }
}

/// An informer over a [`Fed`] lister-watcher, on a fake clock, LIST + WATCH.
fn fed_informer(
    initial: u64,
) -> (SharedIndexInformer<ConfigMap>, mpsc::UnboundedSender<WatchEvent<ConfigMap>>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let informer = SharedIndexInformer::new(Fed { initial, events: Mutex::new(Some(rx)) }, Duration::ZERO);
    informer.set_clock(FakeClock::new()).unwrap();
    informer
        .set_reflector_config(ReflectorConfig { use_watch_list: false, ..ReflectorConfig::default() })
        .unwrap();
    (informer, tx)
}

fn spawn_run(
    informer: &SharedIndexInformer<ConfigMap>,
    cancel: &CancellationToken,
) -> tokio::task::JoinHandle<Result<(), InformerError>> {
    let (informer, cancel) = (informer.clone(), cancel.clone());
    tokio::spawn(async move { informer.run(cancel).await })
}

/// Cancelling a running informer while one handler is blocked inside a notification with a
/// backlog behind it: `run` waits for that notification to complete (and no more), then returns;
/// every handler thread and every task it started is gone; the cache holds every change popped
/// from the FIFO; adding a handler afterwards is refused without starting a thread.
#[test]
fn cancel_mid_flight_completes_the_current_notification_and_leaves_nothing() {
    on_runtime(async {
        let tasks_before = alive_tasks();
        let (informer, tx) = fed_informer(50);
        let gate = Gate::closed();
        let stalled = Counter::gated(gate.clone());
        let fast = Counter::default();
        let stalled_reg = informer.add_event_handler(stalled.clone()).unwrap();
        informer.add_event_handler(fast.clone()).unwrap();
        let cancel = CancellationToken::new();
        let task = spawn_run(&informer, &cancel);
        fast.wait_for(50).await;
        for i in 0..500 {
            tx.send(WatchEvent::Modified(Arc::new(cm(&format!("k{}", i % 50), i + 1)))).unwrap();
        }
        fast.wait_for(550).await;
        within("the stalled handler is inside its first notification", stalled.entered.notified()).await;
        assert_eq!(listener_threads(), 2);
        assert_eq!(stalled_reg.pending(), 549);

        cancel.cancel();
        // Once the listeners are stopped (the backlog is dropped), let the notification in
        // progress finish: run waits for it.
        until("the listeners are stopped", || stalled_reg.pending() == 0).await;
        gate.open();
        within("run returns", task).await.unwrap().unwrap();
        threads_gone("handler threads are joined by run", LISTENER_THREAD);
        tasks_settle_to(tasks_before).await; // the reflector task is gone
        assert_eq!(stalled.received(), 1, "the notification in progress completed; the backlog was dropped");
        assert_eq!(stalled_reg.pending(), 0);
        assert!(informer.is_stopped());
        // Every delta popped from the FIFO reached the cache.
        for k in 0..50 {
            let v = informer.indexer().get_by_key(&format!("default/k{k}")).unwrap();
            assert_eq!(common::value(&v), fast.last.lock().unwrap()[&format!("k{k}")]);
        }
        assert!(matches!(informer.add_event_handler(Counter::default()), Err(InformerError::Stopped)));
        threads_gone("handler threads after the informer stopped", LISTENER_THREAD);
    });
}

/// Regression: dropping `run`'s future (an aborted task) used to leave the reflector task running
/// and every handler thread parked for ever. A guard now cancels the reflector, closes the FIFO
/// and stops the handlers; a handler blocked in a notification finishes it and its thread ends.
#[test]
fn dropping_the_run_future_stops_the_reflector_and_the_handlers() {
    on_runtime(async {
        let tasks_before = alive_tasks();
        let (informer, tx) = fed_informer(10);
        let gate = Gate::closed();
        let stalled = Counter::gated(gate.clone());
        let fast = Counter::default();
        informer.add_event_handler(stalled.clone()).unwrap();
        informer.add_event_handler(fast.clone()).unwrap();
        let task = spawn_run(&informer, &CancellationToken::new());
        fast.wait_for(10).await;
        tx.send(WatchEvent::Added(Arc::new(cm("late", 1)))).unwrap();
        fast.wait_for(11).await;
        // The fast handler's progress says nothing about the stalled one's thread: on a loaded
        // machine it may not have run yet.
        within("the stalled handler is inside its first notification", stalled.entered.notified()).await;
        assert_eq!(listener_threads(), 2);

        task.abort();
        assert!(within("abort", task).await.unwrap_err().is_cancelled());
        gate.open();
        tasks_settle_to(tasks_before).await;
        assert!(informer.is_stopped());
        assert!(matches!(informer.add_event_handler(Counter::default()), Err(InformerError::Stopped)));
        threads_gone("handler threads after the run future was dropped", LISTENER_THREAD);
        assert_eq!(stalled.received(), 1, "the notification in progress completed");
        assert!(
            tx.send(WatchEvent::Added(Arc::new(cm("after", 1)))).is_err(),
            "the reflector dropped its watch"
        );
    });
}

/// A handler that stops the informer from inside a notification, a handler that removes itself,
/// and registrations dropped before and after the informer: no deadlock (`run` joins the thread
/// of the handler that cancelled it only after that handler returned).
#[test]
fn stopping_and_removing_from_inside_handlers_and_any_drop_order() {
    struct Stopper(CancellationToken);
    impl ResourceEventHandler<ConfigMap> for Stopper {
        fn on_add(&self, obj: &Arc<ConfigMap>, _: bool) {
            if common::name(obj) == "stop" {
                self.0.cancel();
            }
        }
    }
    struct SelfRemover(Arc<OnceLock<HandlerRegistration<ConfigMap>>>, SharedIndexInformer<ConfigMap>);
    impl ResourceEventHandler<ConfigMap> for SelfRemover {
        fn on_add(&self, _: &Arc<ConfigMap>, _: bool) {
            if let Some(reg) = self.0.get() {
                self.1.remove_event_handler(reg);
            }
        }
    }
    on_runtime(async {
        let tasks_before = alive_tasks();
        let (informer, tx) = fed_informer(5);
        let cancel = CancellationToken::new();
        let fast = Counter::default();
        let stopper = informer.add_event_handler(Stopper(cancel.clone())).unwrap();
        let slot = Arc::new(OnceLock::new());
        let remover = informer.add_event_handler(SelfRemover(slot.clone(), informer.clone())).unwrap();
        let removed = remover.name().to_owned();
        // The self-remover holds its own registration: a reference cycle through the informer.
        let _ = slot.set(remover);
        let counted = informer.add_event_handler(fast.clone()).unwrap();
        let task = spawn_run(&informer, &cancel);
        fast.wait_for(5).await;
        drop(stopper); // a registration dropped while running changes nothing
        tx.send(WatchEvent::Added(Arc::new(cm("stop", 1)))).unwrap();
        within("run returns after a handler cancelled it", task).await.unwrap().unwrap();
        assert!(!removed.is_empty());
        drop(informer); // before the remaining registration
        drop(counted);
        threads_gone("handler threads after the drops", LISTENER_THREAD);
        tasks_settle_to(tasks_before).await;
    });
}

/// Handlers added from another thread while the informer stops: each is either registered before
/// the stop (and stopped with the others) or refused with `Stopped`; none starts a thread after
/// the stop (regression guard for the check-then-start race between `add_event_handler` and
/// `run`'s shutdown).
#[test]
fn handlers_added_while_stopping_start_no_thread() {
    on_runtime(async {
        for _ in 0..20 {
            let (informer, _tx) = fed_informer(3);
            let cancel = CancellationToken::new();
            let fast = Counter::default();
            informer.add_event_handler(fast.clone()).unwrap();
            let task = spawn_run(&informer, &cancel);
            fast.wait_for(3).await;
            let adding = Arc::new(AtomicBool::new(true));
            let adder = std::thread::spawn({
                let (informer, adding) = (informer.clone(), adding.clone());
                move || {
                    let mut registrations = Vec::new();
                    while adding.load(Ordering::SeqCst) && registrations.len() < 50 {
                        match informer.add_event_handler(Counter::default()) {
                            Ok(r) => registrations.push(r),
                            Err(InformerError::Stopped) => return registrations.len(),
                            Err(e) => panic!("{e}"),
                        }
                    }
                    registrations.len()
                }
            });
            cancel.cancel();
            within("run returns", task).await.unwrap().unwrap();
            adding.store(false, Ordering::SeqCst);
            let added = adder.join().unwrap();
            assert!(added <= 50);
            threads_gone("handler threads after a racing add", LISTENER_THREAD);
        }
    });
}

/// An informer that never ran: dropping it, its registrations and its handlers in any order
/// starts and leaves nothing. Mirrors the "no-run" case of client-go shared_informer_test.go
/// `TestShutdown` (the others are in [`handlers_added_before_or_after_start_leave_nothing`]).
#[test]
fn an_informer_that_never_ran_drops_cleanly() {
    on_runtime(async {
        let tasks_before = alive_tasks();
        let (informer, _tx) = fed_informer(1);
        let a = informer.add_event_handler(Counter::default()).unwrap();
        let b = informer.add_event_handler(Counter::default()).unwrap();
        assert_eq!(listener_threads(), 0, "threads start with run");
        drop(a);
        drop(informer);
        drop(b);
        assert_eq!(alive_tasks(), tasks_before);
    });
}

/// `run` polled outside a Tokio runtime (a misuse) panics before it changes anything: it used to
/// start the handler threads first, then panic in `tokio::spawn`, leaving them parked for ever
/// and the informer marked as running, so that every later `run` returned `AlreadyStarted`.
/// Likewise `SharedInformerFactory::start` outside a runtime used to mark its informers started,
/// so that a later `start` within one skipped them and `wait_for_cache_sync` never returned.
#[test]
fn run_and_start_outside_a_runtime_change_nothing() {
    let _serial = serial();
    let (informer, _tx) = fed_informer(3);
    let counter = Counter::default();
    informer.add_event_handler(counter.clone()).unwrap();
    let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut run = Box::pin(informer.run(CancellationToken::new()));
        let mut cx = std::task::Context::from_waker(futures::task::noop_waker_ref());
        let _ = run.as_mut().poll(&mut cx);
    }));
    assert!(polled.is_err(), "polling outside a runtime panics");
    assert_eq!(listener_threads(), 0, "no handler thread was started");
    assert!(!informer.is_stopped());

    let rt = test_runtime();
    let server = rt.block_on(kcache_testserver::TestServer::start());
    let factory = {
        // The kube client needs the runtime to be built; the factory's `start` below does not.
        let _in_runtime = rt.enter();
        Arc::new(SharedInformerFactory::new(server.client(), Duration::ZERO))
    };
    let from_factory = factory.informer::<ConfigMap>(&InformerScope::namespace("default"));
    let started = std::thread::spawn({
        let f = Arc::clone(&factory);
        move || std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f.start())).is_ok()
    })
    .join()
    .unwrap();
    assert!(!started, "start outside a runtime panics");

    rt.block_on(async {
        let cancel = CancellationToken::new();
        let task = spawn_run(&informer, &cancel);
        counter.wait_for(3).await;
        factory.start();
        assert!(within("the factory's informer syncs", factory.wait_for_cache_sync()).await);
        assert!(from_factory.has_synced());
        cancel.cancel();
        within("run", task).await.unwrap().unwrap();
        factory.shutdown().await;
    });
    drop(server);
    rt.shutdown_timeout(Duration::from_secs(20));
    threads_gone("runtime threads after shutdown", RUNTIME_THREAD);
    threads_gone("handler threads after shutdown", LISTENER_THREAD);
}

/// Waiting for an informer whose `run` future was dropped before it synced (an aborted task)
/// ends, with false, although the token it ran with was never cancelled: it has stopped for good
/// and will never sync. It used to wait for ever.
#[test]
fn waiting_for_an_aborted_informer_returns_false() {
    struct Never;
    impl ListerWatcher<ConfigMap> for Never {
        fn list(&self, _: ListOptions) -> BoxFuture<'static, kcache_reflector::Result<ListPage<ConfigMap>>> {
            futures::future::pending().boxed()
        }
        fn watch(
            &self,
            _: WatchOptions,
        ) -> BoxFuture<'static, kcache_reflector::Result<WatchStream<ConfigMap>>> {
            futures::future::pending().boxed()
        }
    }
    on_runtime(async {
        let informer = SharedIndexInformer::new(Never, Duration::ZERO);
        informer.set_clock(FakeClock::new()).unwrap();
        let reg = informer.add_event_handler(Counter::default()).unwrap();
        let cancel = CancellationToken::new();
        let task = spawn_run(&informer, &cancel);
        until("the handler thread started", || listener_threads() == 1).await;
        task.abort();
        assert!(within("abort", task).await.unwrap_err().is_cancelled());
        assert!(informer.is_stopped());
        let synced = within(
            "waiting on a stopped informer",
            kcache_informer::wait_for_cache_sync(&cancel, &[&informer]),
        )
        .await;
        assert!(!synced);
        let synced =
            within("waiting on its handler", kcache_informer::wait_for_cache_sync(&cancel, &[&reg])).await;
        assert!(!synced);
    });
}

/// `SharedInformerFactory::shutdown` mid-flight, with a handler blocked in a notification: it
/// returns once that notification completes; every informer is stopped and every handler thread
/// joined. A second shutdown is a no-op.
#[test]
fn factory_shutdown_mid_flight() {
    on_runtime(async {
        let server = kcache_testserver::TestServer::start().await;
        let api = kube::Api::<ConfigMap>::namespaced(server.client(), "default");
        common::create(&api, "a", "1").await;
        let factory = SharedInformerFactory::new(server.client(), Duration::ZERO);
        let scoped = factory.informer::<ConfigMap>(&InformerScope::namespace("default"));
        let all = factory.informer::<ConfigMap>(&InformerScope::all());
        let gate = Gate::closed();
        let stalled = Counter::gated(gate.clone());
        let stalled_reg = scoped.add_event_handler(stalled.clone()).unwrap();
        let fast = Counter::default();
        all.add_event_handler(fast.clone()).unwrap();
        factory.start();
        assert!(within("sync", factory.wait_for_cache_sync()).await);
        common::create(&api, "b", "1").await;
        fast.wait_for(2).await;
        within("stalled handler entered", stalled.entered.notified()).await;
        // "b" reaches the scoped informer over its own watch, maybe after the other one's: wait
        // until it is queued behind the stalled notification, or it could arrive after the
        // backlog was dropped and be handled once the gate opens.
        until("b is queued for the stalled handler", || stalled_reg.pending() == 1).await;
        assert_eq!(listener_threads(), 2);

        let factory = Arc::new(factory);
        let shutdown = tokio::spawn({
            let factory = factory.clone();
            async move { factory.shutdown().await }
        });
        until("the listeners are stopped", || stalled_reg.pending() == 0).await;
        gate.open();
        within("factory shutdown", shutdown).await.unwrap();
        assert!(scoped.is_stopped() && all.is_stopped());
        threads_gone("handler threads after factory shutdown", LISTENER_THREAD);
        within("second shutdown", factory.shutdown()).await;
        assert_eq!(stalled.received(), 1, "the notification in progress completed");
    });
}

/// Dropping the factory without calling shutdown stops its informers (its `Drop` cancels them):
/// the handler threads end and the informers report stopped.
#[test]
fn dropping_the_factory_stops_its_informers() {
    on_runtime(async {
        let server = kcache_testserver::TestServer::start().await;
        let factory = SharedInformerFactory::new(server.client(), Duration::ZERO);
        let informer = factory.informer::<ConfigMap>(&InformerScope::namespace("default"));
        let fast = Counter::default();
        let reg = informer.add_event_handler(fast.clone()).unwrap();
        factory.start();
        assert!(within("sync", factory.wait_for_cache_sync()).await);
        // A new thread names itself: wait for the name rather than race it.
        until("the handler thread runs", || listener_threads() == 1).await;
        drop(factory);
        until("the informer stopped after its factory was dropped", || {
            informer.is_stopped() && listener_threads() == 0
        })
        .await;
        drop(reg);
        drop(informer);
    });
}

/// Mirrors client-go shared_informer_test.go `TestShutdown` ("no-context" and
/// "no-context-later"; "no-run" is [`an_informer_that_never_ran_drops_cleanly`]): a handler added
/// before start and removed after the informer stopped, and a handler added after sync and removed
/// while it runs, leave no handler thread and no task behind once the informer stopped.
#[test]
fn handlers_added_before_or_after_start_leave_nothing() {
    on_runtime(async {
        let tasks_before = alive_tasks();

        let (informer, _tx) = fed_informer(2);
        let early = Counter::default();
        let reg = informer.add_event_handler(early.clone()).unwrap();
        let cancel = CancellationToken::new();
        let task = spawn_run(&informer, &cancel);
        early.wait_for(2).await;
        cancel.cancel();
        within("run returns", task).await.unwrap().unwrap();
        assert!(!informer.remove_event_handler(&reg), "nothing is registered once stopped");
        threads_gone("the early handler's thread after run returned", LISTENER_THREAD);

        let (informer, _tx) = fed_informer(2);
        let cancel = CancellationToken::new();
        let task = spawn_run(&informer, &cancel);
        assert!(within("sync", kcache_informer::wait_for_cache_sync(&cancel, &[&informer])).await);
        let late = Counter::default();
        let reg = informer.add_event_handler(late.clone()).unwrap();
        late.wait_for(2).await; // the replay of the cache
        assert!(informer.remove_event_handler(&reg));
        cancel.cancel();
        within("run returns", task).await.unwrap().unwrap();
        threads_gone("the removed handler's thread was joined by run", LISTENER_THREAD);
        tasks_settle_to(tasks_before).await;
    });
}

/// A removed handler, and whatever it holds, is freed once its thread has finished, while the
/// informer goes on running (client-go drops the removed listener from its processor and the
/// garbage collector takes it); the informer keeps only the thread's handle to join at stop.
#[test]
fn a_removed_handler_is_freed_while_the_informer_runs() {
    on_runtime(async {
        let (informer, _tx) = fed_informer(2);
        let cancel = CancellationToken::new();
        let task = spawn_run(&informer, &cancel);
        assert!(within("sync", kcache_informer::wait_for_cache_sync(&cancel, &[&informer])).await);
        let held = Arc::new(());
        let in_handler = Arc::clone(&held);
        let reg = informer
            .add_event_handler(kcache_informer::EventHandlerFuncs::new().on_add(
                move |_: &Arc<ConfigMap>, _| {
                    let _ = &in_handler;
                },
            ))
            .unwrap();
        assert!(informer.remove_event_handler(&reg));
        drop(reg);
        until("the removed handler is freed", || Arc::strong_count(&held) == 1).await;
        assert!(!informer.is_stopped());
        cancel.cancel();
        within("run returns", task).await.unwrap().unwrap();
    });
}
