//! Cancellation: a cancelled reflector makes no request, and one cancelled while listing,
//! opening a watch or reading one drops what it holds (the watch stream is closed) and `run`
//! returns; a watch that fails is closed before the reflector moves on (client-go
//! reflector_test.go `TestReflectorWatchStoppedBefore`, `TestReflectorWatchStoppedAfter`,
//! `TestReflectorHandleWatchStoppedBefore`, `TestReflectorHandleWatchStoppedAfter`,
//! `TestReflectorStopWatch`, `TestRunUntil`, `TestCloseWatchChannelOnError`), in LIST + WATCH and
//! watch-list mode.
//!
//! The lister-watcher here is scripted, not the test server: what is checked is that the
//! reflector drops the request future or stream it was handed, which only a drop guard inside
//! them can show.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_reflector::{
    ErrorKind, FakeClock, ListOptions, ListPage, ListerWatcher, Reflector, ReflectorMetrics, WatchEvent,
    WatchOptions, WatchStream,
};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::common::{Op, RecordingStore};

/// Sets its flag when dropped: proof that a future or stream was let go of.
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// What the scripted watch does once opened.
#[derive(Clone, Copy, PartialEq)]
enum WatchScript {
    /// The request never gets an answer.
    NeverAnswer,
    /// One ADDED event, then the stream stays open and silent.
    AddThenSilence,
    /// One ERROR event, then the stream stays open and silent (it must be closed by the reader).
    ErrorThenSilence,
}

/// A scripted lister-watcher: counts calls, signals each one, and plants a drop guard in every
/// future and stream it hands out.
struct Scripted {
    list_never_answers: bool,
    watch: WatchScript,
    lists: Arc<AtomicUsize>,
    watches: Arc<AtomicUsize>,
    called: Arc<Notify>,
    /// Signalled when the reflector reads the first event of a stream.
    first_event: Arc<Notify>,
    /// Set when the (last) LIST future is dropped.
    list_dropped: Arc<AtomicBool>,
    /// Set when the (last) watch request or stream is dropped.
    watch_dropped: Arc<AtomicBool>,
}

impl Scripted {
    fn new(list_never_answers: bool, watch: WatchScript) -> Self {
        Self {
            list_never_answers,
            watch,
            lists: Arc::default(),
            watches: Arc::default(),
            called: Arc::new(Notify::new()),
            first_event: Arc::new(Notify::new()),
            list_dropped: Arc::default(),
            watch_dropped: Arc::default(),
        }
    }
}

fn page() -> ListPage<ConfigMap> {
    ListPage { items: Vec::new(), resource_version: "1".into(), continue_token: None, shard_info: None }
}

fn added(name: &str, rv: &str) -> WatchEvent<ConfigMap> {
    let mut o = crate::common::cm(name, "1");
    o.metadata.resource_version = Some(rv.into());
    WatchEvent::Added(std::sync::Arc::new(o))
}

impl ListerWatcher<ConfigMap> for Scripted {
    fn list(&self, _: ListOptions) -> BoxFuture<'static, kcache_reflector::Result<ListPage<ConfigMap>>> {
        self.lists.fetch_add(1, Ordering::SeqCst);
        self.called.notify_one();
        let guard = DropFlag(Arc::clone(&self.list_dropped));
        let never = self.list_never_answers;
        async move {
            let _guard = guard;
            if never {
                std::future::pending::<()>().await;
            }
            Ok(page())
        }
        .boxed()
    }

    fn watch(&self, _: WatchOptions) -> BoxFuture<'static, kcache_reflector::Result<WatchStream<ConfigMap>>> {
        self.watches.fetch_add(1, Ordering::SeqCst);
        self.called.notify_one();
        let guard = DropFlag(Arc::clone(&self.watch_dropped));
        let first_event = Arc::clone(&self.first_event);
        let script = self.watch;
        async move {
            if script == WatchScript::NeverAnswer {
                let _guard = guard;
                std::future::pending::<()>().await;
                unreachable!();
            }
            let first = match script {
                WatchScript::ErrorThenSilence => {
                    // An ERROR whose object is not a Status (client-go's test sends a Pod).
                    WatchEvent::Error(Box::new(kube::core::Status::failure("", "")))
                }
                _ => added("bar", "2"),
            };
            let stream = futures::stream::iter([Ok(first)])
                .chain(futures::stream::pending())
                // The guard lives as long as the stream.
                .map(move |ev| {
                    let _ = &guard;
                    first_event.notify_one();
                    ev
                })
                .boxed();
            Ok(stream)
        }
        .boxed()
    }
}

/// Errors the reflector reported, each with whether the watch stream was already closed then.
type Reports = Arc<std::sync::Mutex<Vec<(ErrorKind, bool)>>>;

/// Starts a LIST + WATCH reflector on `lw`; returns its store, its error reports and its task.
fn start(lw: Scripted, cancel: &CancellationToken) -> (RecordingStore, Reports, tokio::task::JoinHandle<()>) {
    start_in_mode(lw, cancel, false)
}

/// As [`start`], in watch-list mode when `watch_list` is set.
fn start_in_mode(
    lw: Scripted,
    cancel: &CancellationToken,
    watch_list: bool,
) -> (RecordingStore, Reports, tokio::task::JoinHandle<()>) {
    let store = RecordingStore::new();
    let errors: Reports = Arc::default();
    let errs = Arc::clone(&errors);
    let watch_dropped = Arc::clone(&lw.watch_dropped);
    let store2 = store.clone();
    let reflector = Reflector::new(lw, store.clone())
        .use_watch_list(watch_list)
        .clock(FakeClock::new())
        .watch_error_handler(move |_, e| {
            errs.lock().unwrap().push((e.kind(), watch_dropped.load(Ordering::SeqCst)));
            // Wake waiters on the store too, so one wait covers both.
            store2.changed.notify_waiters();
        });
    (store, errors, tokio::spawn(reflector.run(cancel.clone())))
}

async fn stops(task: tokio::task::JoinHandle<()>) {
    tokio::time::timeout(Duration::from_secs(10), task).await.expect("run returns once cancelled").unwrap();
}

/// Mirrors `TestReflectorWatchStoppedBefore`: cancelled before it starts, the reflector lists
/// nothing, watches nothing, and returns.
#[tokio::test]
async fn cancelled_before_run_makes_no_request() {
    let lw = Scripted::new(false, WatchScript::AddThenSilence);
    let (lists, watches) = (Arc::clone(&lw.lists), Arc::clone(&lw.watches));
    let cancel = CancellationToken::new();
    cancel.cancel();
    let (store, errors, task) = start(lw, &cancel);
    stops(task).await;
    assert_eq!(lists.load(Ordering::SeqCst), 0);
    assert_eq!(watches.load(Ordering::SeqCst), 0);
    assert!(store.ops().is_empty());
    assert!(errors.lock().unwrap().is_empty());
}

/// Mirrors `TestRunUntil`, `TestReflectorHandleWatchStoppedAfter` and `TestReflectorStopWatch`:
/// cancelled while reading a watch (an event already handled, so the reader is known to be in
/// its loop), `run` returns without reporting an error and the stream has been dropped (the
/// connection closed).
#[tokio::test]
async fn cancel_while_watching_closes_the_stream_and_returns() {
    let lw = Scripted::new(false, WatchScript::AddThenSilence);
    let dropped = Arc::clone(&lw.watch_dropped);
    let cancel = CancellationToken::new();
    let (store, errors, task) = start(lw, &cancel);
    store.wait_until("the watch event", |s| s.names() == ["bar"]).await;
    assert!(!dropped.load(Ordering::SeqCst), "the watch is still open");
    cancel.cancel();
    stops(task).await;
    assert!(dropped.load(Ordering::SeqCst), "the watch stream must be closed");
    assert!(errors.lock().unwrap().is_empty(), "cancellation is not an error");
    assert_eq!(store.ops().last(), Some(&Op::ResourceVersion("2".into())));
}

/// Mirrors `TestReflectorWatchStoppedAfter`: cancelled while a watch request is still waiting for
/// its answer, the reflector drops the request and returns.
#[tokio::test]
async fn cancel_while_opening_a_watch_drops_the_request() {
    let lw = Scripted::new(false, WatchScript::NeverAnswer);
    let (dropped, watches, called) =
        (Arc::clone(&lw.watch_dropped), Arc::clone(&lw.watches), Arc::clone(&lw.called));
    let cancel = CancellationToken::new();
    let (_store, errors, task) = start(lw, &cancel);
    while watches.load(Ordering::SeqCst) == 0 {
        called.notified().await;
    }
    cancel.cancel();
    stops(task).await;
    assert!(dropped.load(Ordering::SeqCst), "the pending watch request must be dropped");
    assert!(errors.lock().unwrap().is_empty());
}

/// The LIST counterpart: cancelled while a LIST is in flight, the reflector drops it and returns
/// without syncing anything (client-go's `list` selects on the stop channel the same way).
#[tokio::test]
async fn cancel_while_listing_drops_the_request() {
    let lw = Scripted::new(true, WatchScript::AddThenSilence);
    let (dropped, lists, watches, called) = (
        Arc::clone(&lw.list_dropped),
        Arc::clone(&lw.lists),
        Arc::clone(&lw.watches),
        Arc::clone(&lw.called),
    );
    let cancel = CancellationToken::new();
    let (store, errors, task) = start(lw, &cancel);
    while lists.load(Ordering::SeqCst) == 0 {
        called.notified().await;
    }
    cancel.cancel();
    stops(task).await;
    assert!(dropped.load(Ordering::SeqCst), "the pending list request must be dropped");
    assert_eq!(watches.load(Ordering::SeqCst), 0);
    assert!(store.ops().is_empty());
    assert!(errors.lock().unwrap().is_empty());
}

/// Records, for each watch that ended with an error, its kind and whether the stream had been
/// dropped by then.
#[derive(Debug)]
struct EndedReports {
    reports: Reports,
    watch_dropped: Arc<AtomicBool>,
    /// The store's change signal, so one wait covers both.
    changed: Arc<Notify>,
}

impl ReflectorMetrics for EndedReports {
    fn watch_ended(&self, _: &str, error: Option<ErrorKind>) {
        if let Some(kind) = error {
            self.reports.lock().unwrap().push((kind, self.watch_dropped.load(Ordering::SeqCst)));
            self.changed.notify_waiters();
        }
    }
}

/// Mirrors `TestCloseWatchChannelOnError`: an ERROR event ends the watch, and the stream is
/// closed by the time the watch is reported ended, although the server side never ended it.
/// (The watch error handler never hears of it: the watch loop ends quietly, as client-go's
/// `watch` returns nil.)
#[tokio::test]
async fn watch_error_closes_the_stream() {
    let lw = Scripted::new(false, WatchScript::ErrorThenSilence);
    let cancel = CancellationToken::new();
    let store = RecordingStore::new();
    let ended: Reports = Arc::default();
    let errors: Reports = Arc::default();
    let metrics = EndedReports {
        reports: Arc::clone(&ended),
        watch_dropped: Arc::clone(&lw.watch_dropped),
        changed: Arc::clone(&store.changed),
    };
    let errs = Arc::clone(&errors);
    let reflector = Reflector::new(lw, store.clone())
        .use_watch_list(false)
        .clock(FakeClock::new())
        .metrics(Arc::new(metrics))
        .watch_error_handler(move |_, e| errs.lock().unwrap().push((e.kind(), false)));
    let task = tokio::spawn(reflector.run(cancel.clone()));
    store.wait_until("the watch's end", |_| !ended.lock().unwrap().is_empty()).await;
    assert_eq!(*ended.lock().unwrap(), [(ErrorKind::ErrorEvent, true)], "closed before it is reported ended");
    cancel.cancel();
    stops(task).await;
    assert!(errors.lock().unwrap().is_empty(), "{:?}", errors.lock().unwrap());
}

/// Watch-list mode: cancelled while the initial events are being read (before the end
/// bookmark), the reflector drops the stream, writes nothing to the store and returns.
#[tokio::test]
async fn cancel_during_watch_list_initial_events_closes_the_stream() {
    let lw = Scripted::new(false, WatchScript::AddThenSilence);
    let (dropped, lists, first_event) =
        (Arc::clone(&lw.watch_dropped), Arc::clone(&lw.lists), Arc::clone(&lw.first_event));
    let cancel = CancellationToken::new();
    let (store, errors, task) = start_in_mode(lw, &cancel, true);
    first_event.notified().await;
    cancel.cancel();
    stops(task).await;
    assert!(dropped.load(Ordering::SeqCst), "the watch-list stream must be closed");
    assert_eq!(lists.load(Ordering::SeqCst), 0, "no fallback LIST once cancelled");
    assert!(store.ops().is_empty(), "the initial events never reached the store");
    assert!(errors.lock().unwrap().is_empty());
}
