//! Sharded list and watch (KEP-5866): `shardSelector` on every request, detection of a server
//! that does not filter (a LIST without `metadata.shardInfo`, an object outside the selector),
//! client-side filtering, and the `ShardMode` accessor, metric and log. client-go has no tests
//! for this (it passes `ListOptions.ShardSelector` through untouched); the server behaviour
//! mirrored is kube-apiserver v1.36.3's `SelectionPredicate.SetShardInfoOnList` and the watch
//! cache's sharded filtering (`storage/selection_predicate.go`, `storage/cacher`), as recorded
//! in ../shared/reference/scale-out.md.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_reflector::{
    ApiListerWatcher, ListOptions, ListPage, ListerWatcher, ReflectorMetrics, ShardMode, WatchEvent,
    WatchOptions, WatchStream,
};
use kcache_shard_selector::{ShardKey, ShardSelector};
use kcache_testserver::{TestServer, Verb};
use kube::api::{Api, ObjectMeta};

use crate::common::{Captured, Harness, Op, RecordingStore, cm, create, delete};

/// How many ConfigMaps a test creates: with two shards, the chance that all land in one (and a
/// watch-list never sees an object outside its range) is 2^-19.
const OBJECTS: usize = 20;

/// Records every `shard_mode` report.
#[derive(Debug, Clone, Default)]
struct Modes(Arc<Mutex<Vec<ShardMode>>>);

impl ReflectorMetrics for Modes {
    fn shard_mode(&self, _: &str, mode: ShardMode) {
        self.0.lock().unwrap().push(mode);
    }
}

impl Modes {
    fn get(&self) -> Vec<ShardMode> {
        self.0.lock().unwrap().clone()
    }
}

/// The names on the server whose uid `selector` admits, sorted.
async fn expected(api: &Api<ConfigMap>, selector: &ShardSelector) -> Vec<String> {
    crate::common::server_names_where(api, |o| selector.matches(&o.metadata)).await
}

async fn create_many(api: &Api<ConfigMap>, prefix: &str, n: usize) {
    for i in 0..n {
        create(api, &format!("{prefix}{i:02}"), "1").await;
    }
}

/// Starts a reflector for `shard` on `server` (JSON or protobuf, LIST + WATCH or watch-list),
/// waits for its first sync, then creates and deletes objects and waits until the cache holds
/// exactly this shard's part of the server's objects. Returns the harness and the final
/// objects of the cache.
async fn follow_shard(
    server: TestServer,
    shard: ShardSelector,
    watch_list: bool,
    protobuf: bool,
    modes: Modes,
    name: &'static str,
) -> (Harness, Vec<ConfigMap>) {
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    create_many(&api, "a", OBJECTS).await;
    let mut lw = ApiListerWatcher::new(api.clone());
    if protobuf {
        lw = lw.protobuf(true);
    }
    let sel = shard.clone();
    let h = Harness::start_with(server, lw, move |r| {
        r.name(name).use_watch_list(watch_list).shard_selector(Some(sel)).metrics(Arc::new(modes))
    });
    h.store.wait_until("initial sync", |s| s.ops().iter().any(|o| matches!(o, Op::Replace(..)))).await;
    let want = expected(&h.api, &shard).await;
    assert_eq!(h.store.names(), want, "the first sync holds this shard's objects only");
    create_many(&h.api, "b", OBJECTS).await;
    for i in 0..OBJECTS / 2 {
        delete(&h.api, &format!("a{i:02}")).await;
    }
    let want = expected(&h.api, &shard).await;
    h.store.wait_until("the live events of this shard", |s| s.names() == want).await;
    let mut objects: Vec<ConfigMap> = h.store.store.list().iter().map(|o| (**o).clone()).collect();
    objects.sort_by(|x, y| x.metadata.name.cmp(&y.metadata.name));
    (h, objects)
}

/// The reflector's LISTs: those with a query (the test's own `expected` lists have none).
fn reflector_lists(h: &Harness) -> Vec<kcache_testserver::RequestRecord> {
    h.requests(Verb::List).into_iter().filter(|r| !r.query.is_empty()).collect()
}

/// Every LIST and WATCH request of the reflector carried `shardSelector` in apimachinery's
/// rendering.
fn assert_selector_sent(h: &Harness, shard: &ShardSelector) {
    let requests: Vec<_> = reflector_lists(h).into_iter().chain(h.requests(Verb::Watch)).collect();
    assert!(!requests.is_empty());
    for r in requests {
        assert_eq!(r.query_param("shardSelector"), Some(shard.to_string()), "{:?} {}", r.verb, r.path);
    }
}

fn first_of_two() -> ShardSelector {
    ShardSelector::split(ShardKey::Uid, 2).swap_remove(0)
}

/// Follows shard 0 of 2 on a server that ignores `shardSelector` (LIST + WATCH or watch-list)
/// and checks the switch: client-side mode, reported at start and at the switch, the selector
/// sent on every request. Returns the harness.
async fn detects_an_unfiltering_server(watch_list: bool) -> Harness {
    let shard = first_of_two();
    let modes = Modes::default();
    let (h, _) =
        follow_shard(TestServer::start().await, shard.clone(), watch_list, false, modes.clone(), "test")
            .await;
    assert_eq!(h.handle.shard_mode(), ShardMode::ClientSide);
    assert_eq!(
        modes.get(),
        [ShardMode::ServerSide, ShardMode::ClientSide],
        "reported at start and at the switch"
    );
    assert_selector_sent(&h, &shard);
    h
}

/// A server that ignores `shardSelector` (kube-apiserver without `ShardedListAndWatch`, which
/// answers every LIST without `metadata.shardInfo`): the reflector switches to client-side
/// filtering at the first LIST and its cache is this shard's part, through LIST and WATCH.
#[tokio::test]
async fn list_without_shard_info_switches_to_client_side_filtering() {
    let h = detects_an_unfiltering_server(false).await;
    assert!(!reflector_lists(&h).is_empty(), "synced by LIST");
    h.stop().await;
}

/// The same server with watch-list: the end bookmark carries no `shardInfo`, so the first
/// object outside the selector is what proves the server did not filter; it never reaches the
/// store, nor does any later one (watch events included).
#[tokio::test]
async fn watch_list_detects_an_unfiltering_server_by_an_object_outside_the_selector() {
    let h = detects_an_unfiltering_server(true).await;
    assert_eq!(reflector_lists(&h).len(), 0, "synced by watch-list");
    h.stop().await;
}

/// Protobuf lists and watches (the `ListMeta` without field 5, `shardInfo`) are detected and
/// filtered as JSON ones, and the cache is the very one a JSON reflector builds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_lists_and_watches_are_filtered_as_json_ones() {
    for watch_list in [false, true] {
        let shard = first_of_two();
        let (h, objects) = follow_shard(
            TestServer::start().await,
            shard.clone(),
            watch_list,
            true,
            Modes::default(),
            "test",
        )
        .await;
        assert_eq!(h.handle.shard_mode(), ShardMode::ClientSide, "watch_list {watch_list}");
        assert!(h.requests(Verb::Watch).iter().all(|r| r.content_type.contains("protobuf")));
        let want = expected(&h.api, &shard).await;
        let names: Vec<_> = objects.iter().filter_map(|o| o.metadata.name.clone()).collect();
        assert_eq!(names, want);
        h.stop().await;
    }
}

/// Three reflectors on `ShardSelector::split(Uid, 3)` partition the collection: their caches
/// are disjoint and their union is the server's list.
#[tokio::test]
async fn three_shards_partition_the_collection() {
    let server = TestServer::start().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    create_many(&api, "a", 30).await;
    let mut running = Vec::new();
    for (i, shard) in ShardSelector::split(ShardKey::Uid, 3).into_iter().enumerate() {
        let store = RecordingStore::new();
        let lw = ApiListerWatcher::new(api.clone()).shard_selector(Some(shard.clone()));
        let reflector = kcache_reflector::Reflector::new(lw, store.clone())
            .name(format!("shard-{i}"))
            .clock(kcache_reflector::FakeClock::new())
            .use_watch_list(i % 2 == 0);
        assert_eq!(reflector.handle().shard_mode(), ShardMode::ServerSide, "adopted from the lister-watcher");
        let cancel = tokio_util::sync::CancellationToken::new();
        let task = tokio::spawn(reflector.run(cancel.clone()));
        running.push((shard, store, cancel, task));
    }
    create_many(&api, "b", 15).await;
    let mut union = Vec::new();
    for (shard, store, cancel, task) in running {
        let want = expected(&api, &shard).await;
        store.wait_until("this shard's objects", |s| s.names() == want).await;
        union.extend(store.names());
        cancel.cancel();
        task.await.unwrap();
    }
    union.sort();
    let all = crate::common::server_names(&api).await;
    assert_eq!(union, all, "no object in two caches, none in none");
}

/// Syncs a reflector on `shard` of `api` (LIST + WATCH or watch-list, JSON or protobuf) into a
/// store of its own, then creates `created` and deletes `deleted` and waits for the shard's new
/// state. Returns its mode at the end and its objects (sorted) at the sync and at the end.
async fn sync_and_follow(
    api: &Api<ConfigMap>,
    shard: &ShardSelector,
    watch_list: bool,
    protobuf: bool,
    (created, deleted): (&str, &str),
) -> (ShardMode, Vec<ConfigMap>, Vec<ConfigMap>) {
    let objects = |store: &RecordingStore| {
        let mut v: Vec<ConfigMap> = store.store.list().iter().map(|o| (**o).clone()).collect();
        v.sort_by(|x, y| x.metadata.name.cmp(&y.metadata.name));
        v
    };
    let store = RecordingStore::new();
    let lw = ApiListerWatcher::new(api.clone()).protobuf(protobuf);
    let reflector = kcache_reflector::Reflector::new(lw, store.clone())
        .clock(kcache_reflector::FakeClock::new())
        .use_watch_list(watch_list)
        .shard_selector(Some(shard.clone()));
    let handle = reflector.handle();
    let cancel = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(reflector.run(cancel.clone()));
    store.wait_until("synced", |s| s.ops().iter().any(|o| matches!(o, Op::Replace(..)))).await;
    let at_sync = objects(&store);
    create(api, created, "1").await;
    delete(api, deleted).await;
    let want = expected(api, shard).await;
    store.wait_until("this shard, live", |s| s.names() == want).await;
    cancel.cancel();
    task.await.unwrap();
    (handle.shard_mode(), at_sync, objects(&store))
}

/// The cache is the same whichever side filters: on one server, a reflector with
/// `ShardedListAndWatch` on (kube-apiserver v1.36.3's filtering, `shardInfo` on every LIST)
/// ends where the next one, with the gate off (the reflector filters), syncs; both follow a
/// create and a delete to exactly their shard. For LIST + WATCH and watch-list, JSON and
/// protobuf. With the gate on the reflector stays server-side, off it switches to client-side.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_is_the_same_whichever_side_filters() {
    let server = TestServer::builder().sharded_list_and_watch(true).start().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    create_many(&api, "a", OBJECTS).await;
    let shard = first_of_two();
    let mut step = 0;
    for watch_list in [false, true] {
        for protobuf in [false, true] {
            let case = format!("watch_list {watch_list}, protobuf {protobuf}");
            server.set_sharded_list_and_watch(true);
            let change = (format!("on{step:02}"), format!("a{step:02}"));
            let (on_mode, _, on_end) =
                sync_and_follow(&api, &shard, watch_list, protobuf, (&change.0, &change.1)).await;
            server.set_sharded_list_and_watch(false);
            let change = (format!("off{step:02}"), format!("on{step:02}"));
            let (off_mode, off_sync, _) =
                sync_and_follow(&api, &shard, watch_list, protobuf, (&change.0, &change.1)).await;
            step += 1;
            assert_eq!(on_mode, ShardMode::ServerSide, "{case}");
            assert_eq!(off_mode, ShardMode::ClientSide, "{case}");
            assert_eq!(
                on_end, off_sync,
                "{case}: the same cache from the server's filter and the reflector's"
            );
        }
    }
}

/// A lister-watcher scripted page by page and event by event, with `shard_info` on its pages.
struct Scripted {
    pages: Mutex<Vec<ListPage<ConfigMap>>>,
    events: Mutex<Vec<Vec<WatchEvent<ConfigMap>>>>,
    asked: Arc<Mutex<Vec<Option<String>>>>,
}

impl ListerWatcher<ConfigMap> for Scripted {
    fn list(&self, opts: ListOptions) -> BoxFuture<'static, kcache_reflector::Result<ListPage<ConfigMap>>> {
        self.asked.lock().unwrap().push(opts.shard_selector.map(|s| s.to_string()));
        let mut pages = self.pages.lock().unwrap();
        let page = if pages.len() > 1 { pages.remove(0) } else { pages[0].clone() };
        futures::future::ready(Ok(page)).boxed()
    }

    fn watch(
        &self,
        opts: WatchOptions,
    ) -> BoxFuture<'static, kcache_reflector::Result<WatchStream<ConfigMap>>> {
        self.asked.lock().unwrap().push(opts.shard_selector.map(|s| s.to_string()));
        let mut events = self.events.lock().unwrap();
        // Each scripted batch is one watch that closes after its events; then one that stays open.
        let stream: WatchStream<ConfigMap> = if events.is_empty() {
            futures::stream::pending().boxed()
        } else {
            futures::stream::iter(events.remove(0).into_iter().map(Ok)).boxed()
        };
        futures::future::ready(Ok(stream)).boxed()
    }
}

/// A ConfigMap named `name` at resource version `rv` whose uid is the first value (from
/// `uid-0`, `uid-1`, ...) that `shard` admits (`inside`) or does not.
fn object(name: &str, rv: &str, shard: &ShardSelector, inside: bool) -> Arc<ConfigMap> {
    let uid = (0..)
        .map(|i| format!("{name}-uid-{i}"))
        .find(|u| shard.matches_value(u) == inside)
        .expect("some uid hashes on each side");
    Arc::new(ConfigMap {
        metadata: ObjectMeta { uid: Some(uid), resource_version: Some(rv.into()), ..cm(name, "1").metadata },
        ..Default::default()
    })
}

fn page(items: Vec<Arc<ConfigMap>>, rv: &str, shard_info: Option<&ShardSelector>) -> ListPage<ConfigMap> {
    ListPage {
        items,
        resource_version: rv.into(),
        continue_token: None,
        shard_info: shard_info.map(ToString::to_string),
    }
}

/// A server that says it filtered (`shardInfo` on the LIST) stays server-side; a watch event
/// for an object outside the selector (a buggy server, or one behind the same load balancer
/// with the gate off) is dropped, never delivered, and switches to client-side. The switch is
/// for the life of the reflector: a later relist with `shardInfo` does not switch back.
#[tokio::test]
async fn an_event_outside_the_selector_is_dropped_and_switches_for_good() {
    let shard = first_of_two();
    let store = RecordingStore::new();
    let asked = Arc::new(Mutex::new(Vec::new()));
    let lw = Scripted {
        pages: Mutex::new(vec![page(vec![object("in", "5", &shard, true)], "5", Some(&shard))]),
        events: Mutex::new(vec![
            vec![WatchEvent::Added(object("in2", "6", &shard, true))],
            vec![
                WatchEvent::Added(object("out", "7", &shard, false)),
                WatchEvent::Modified(object("out", "8", &shard, false)),
                WatchEvent::Added(object("in3", "9", &shard, true)),
                WatchEvent::Deleted(object("out", "10", &shard, false)),
                // Ends this watch: a relist (with shardInfo again) follows.
                WatchEvent::Error(Box::new({
                    let mut s = kube::core::Status::failure("too old", "Expired");
                    s.code = 410;
                    s
                })),
            ],
        ]),
        asked: Arc::clone(&asked),
    };
    let modes = Modes::default();
    let clock = kcache_reflector::FakeClock::new();
    let reflector = kcache_reflector::Reflector::new(lw, store.clone())
        .use_watch_list(false)
        .clock(clock.clone())
        .metrics(Arc::new(modes.clone()))
        .shard_selector(Some(shard.clone()));
    let handle = reflector.handle();
    let cancel = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(reflector.run(cancel.clone()));
    // The 410 ends the second watch: backoff, then a relist whose page carries shardInfo.
    let backoff = clock.wait_for_sleep(|d| d < Duration::from_secs(61)).await;
    assert_eq!(handle.shard_mode(), ShardMode::ClientSide, "switched by the second watch's events");
    clock.advance(backoff);
    store
        .wait_until("the relist", |s| s.ops().iter().filter(|o| matches!(o, Op::Replace(..))).count() == 2)
        .await;
    assert_eq!(store.names(), ["in"]);
    assert_eq!(handle.shard_mode(), ShardMode::ClientSide, "for good, despite the relist's shardInfo");
    assert_eq!(modes.get(), [ShardMode::ServerSide, ShardMode::ClientSide]);
    let ops = store.ops();
    assert!(
        !ops.iter().any(|o| matches!(o, Op::Add(n) | Op::Update(n) | Op::Delete(n) if n == "out")),
        "no event of the object outside the selector was delivered: {ops:?}"
    );
    assert!(ops.contains(&Op::Add("in2".into())) && ops.contains(&Op::Add("in3".into())), "{ops:?}");
    // Its resource versions still count: the stream moved past them.
    assert!(ops.contains(&Op::ResourceVersion("8".into())), "{ops:?}");
    assert!(asked.lock().unwrap().iter().all(|s| s.as_deref() == Some(shard.to_string().as_str())));
    cancel.cancel();
    task.await.unwrap();
}

/// A LIST whose `shardInfo` names another selector than the one asked for (a proxy's cached
/// answer for another shard, say) is no proof that the server filtered as asked: the reflector
/// switches to filtering on the client.
#[tokio::test]
async fn shard_info_naming_another_selector_is_no_proof() {
    let shards = ShardSelector::split(ShardKey::Uid, 2);
    let store = RecordingStore::new();
    let lw = Scripted {
        pages: Mutex::new(vec![page(
            // Only objects of this shard: the objects prove nothing, the echo must.
            vec![object("mine", "5", &shards[0], true)],
            "5",
            Some(&shards[1]),
        )]),
        events: Mutex::new(Vec::new()),
        asked: Arc::default(),
    };
    let reflector = kcache_reflector::Reflector::new(lw, store.clone())
        .use_watch_list(false)
        .clock(kcache_reflector::FakeClock::new())
        .shard_selector(Some(shards[0].clone()));
    let handle = reflector.handle();
    let cancel = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(reflector.run(cancel.clone()));
    store.wait_until("the list", |s| s.ops().iter().any(|o| matches!(o, Op::Replace(..)))).await;
    assert_eq!(store.names(), ["mine"]);
    assert_eq!(handle.shard_mode(), ShardMode::ClientSide);
    cancel.cancel();
    task.await.unwrap();
}

/// Without a selector nothing is filtered and nothing is sent: the mode is `Unsharded`, and a
/// LIST without `shardInfo` is no evidence of anything.
#[tokio::test]
async fn unsharded_reflector_sends_no_selector_and_filters_nothing() {
    let shard = first_of_two();
    let store = RecordingStore::new();
    let asked = Arc::new(Mutex::new(Vec::new()));
    let lw = Scripted {
        pages: Mutex::new(vec![page(
            vec![object("in", "5", &shard, true), object("out", "5", &shard, false)],
            "5",
            None,
        )]),
        events: Mutex::new(Vec::new()),
        asked: Arc::clone(&asked),
    };
    let modes = Modes::default();
    let reflector = kcache_reflector::Reflector::new(lw, store.clone())
        .use_watch_list(false)
        .clock(kcache_reflector::FakeClock::new())
        .metrics(Arc::new(modes.clone()));
    let handle = reflector.handle();
    let cancel = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(reflector.run(cancel.clone()));
    store.wait_until("the list", |s| s.names() == ["in", "out"]).await;
    assert_eq!(handle.shard_mode(), ShardMode::Unsharded);
    assert_eq!(modes.get(), [ShardMode::Unsharded]);
    assert!(asked.lock().unwrap().iter().all(Option::is_none));
    cancel.cancel();
    task.await.unwrap();
}

/// The switch is logged once, at info level, naming the selector and the evidence and never an
/// object (whatever else arrives out of range afterwards).
#[tokio::test]
async fn the_switch_is_logged_once_at_info() {
    let captured = capture();
    let shard = first_of_two();
    let name = "shard-switch-logged-once";
    let (h, _) =
        follow_shard(TestServer::start().await, shard.clone(), false, false, Modes::default(), name).await;
    h.stop().await;
    let text = captured.text();
    let lines: Vec<&str> =
        text.lines().filter(|l| l.contains(name) && l.contains("does not filter by shardSelector")).collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert!(lines[0].contains(" INFO "), "{}", lines[0]);
    assert!(lines[0].contains("without metadata.shardInfo"), "{}", lines[0]);
    assert!(lines[0].contains(&shard.to_string()), "{}", lines[0]);
    assert!(!lines[0].contains("a00"), "no object is named: {}", lines[0]);
}

/// Installs a capturing subscriber (INFO and above) as the global default, once for the whole
/// binary: a thread-local one misses events whose callsite interest another thread cached
/// while it had no subscriber. Every test's lines are captured; a test looks for its own by
/// its reflector's name.
fn capture() -> Captured {
    static CAPTURED: std::sync::OnceLock<Captured> = std::sync::OnceLock::new();
    CAPTURED
        .get_or_init(|| {
            let captured = Captured::default();
            let writer = captured.clone();
            tracing_subscriber::fmt()
                .with_max_level(tracing::Level::INFO)
                .with_ansi(false)
                .with_writer(move || writer.clone())
                .try_init()
                .expect("the only global subscriber in this binary");
            captured
        })
        .clone()
}
