//! `ApiListerWatcher::protobuf(true)`: lists and watches of built-in kinds in Kubernetes'
//! protobuf (client-go's `rest.Config.ContentType = "application/vnd.kubernetes.protobuf"`), the
//! same cache as with JSON, JSON from a server that does not speak protobuf, and bad protobuf
//! input classified and followed by a relist as bad JSON is.

use k8s_openapi::api::core::v1::ConfigMap;
use kcache_reflector::{ApiListerWatcher, ErrorKind, ListOptions, ListerWatcher};
use kcache_testserver::{RequestRecord, TestServer, Verb, WatchFault};
use kube::api::{Api, PostParams};

use crate::common::{Harness, Op, create, delete, update};

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
const PROTOBUF_WATCH: &str = "application/vnd.kubernetes.protobuf;stream=watch";

fn content_types(h: &Harness, verb: Verb) -> Vec<String> {
    h.requests(verb).iter().map(|r: &RequestRecord| r.content_type.clone()).collect()
}

/// Syncs two ConfigMaps (one carrying managed fields), then sees an update, a create and a
/// delete; returns the store's objects at the end.
async fn sync_and_follow(server: TestServer, watch_list: bool, strip: bool) -> (Harness, Vec<ConfigMap>) {
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    create(&api, "a", "1").await;
    let mut b = crate::common::cm("b", "1");
    b.metadata.labels = Some([("app".to_string(), "web".to_string())].into());
    api.create(&PostParams::default(), &b).await.expect("create b");
    let lw = ApiListerWatcher::new(api.clone()).protobuf(true).strip_managed_fields(strip);
    let h = Harness::start_with(server, lw, |r| r.use_watch_list(watch_list));
    h.store.wait_until("initial sync", |s| s.ops().iter().any(|o| matches!(o, Op::Replace(..)))).await;
    assert_eq!(h.store.names(), ["a", "b"]);
    update(&h.api, "a", "2").await;
    create(&h.api, "c", "1").await;
    delete(&h.api, "b").await;
    h.store.wait_until("live events", |s| s.names() == ["a", "c"] && s.values()["a"] == "2").await;
    let mut objects: Vec<ConfigMap> = h.store.store.list().iter().map(|o| (**o).clone()).collect();
    objects.sort_by(|x, y| x.metadata.name.cmp(&y.metadata.name));
    (h, objects)
}

/// client-go's reflector with a protobuf `rest.Config` (`ListAndWatch` over
/// `protobuf.Serializer` and its length-delimited watch framer): LIST then WATCH in protobuf,
/// every event in the store, the same objects as a JSON sync gives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_and_watch_in_protobuf() {
    let (h, objects) = sync_and_follow(TestServer::start().await, false, false).await;
    assert_eq!(content_types(&h, Verb::List), [PROTOBUF]);
    assert!(
        content_types(&h, Verb::Watch).iter().all(|c| c == PROTOBUF_WATCH),
        "{:?}",
        content_types(&h, Verb::Watch)
    );
    // The very objects the server holds, as its JSON gives them.
    let server_side: Vec<ConfigMap> = {
        let mut v = h.api.list(&Default::default()).await.unwrap().items;
        v.sort_by(|x, y| x.metadata.name.cmp(&y.metadata.name));
        v
    };
    assert_eq!(objects, server_side);
    assert!(objects[0].metadata.managed_fields.is_some(), "kept on request");
    h.stop().await;
}

/// A protobuf list long enough for helper threads (`decode_helpers`; lists of more than
/// 256 items use them), on a multi-threaded runtime: the page holds every object in the order the
/// server listed them (the order client-go's `Replace` gets), each as JSON gives it; with the
/// helpers off, the same page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_protobuf_list_is_decoded_with_helpers() {
    let server = TestServer::start().await;
    let n = 2000;
    let loaded = server.objects().bulk_insert(
        "",
        "v1",
        "configmaps",
        (0..n).map(|i| {
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"namespace": format!("ns-{}", i % 7), "name": format!("cm-{i:04}")},
                "data": {"i": i.to_string()}})
        }),
    );
    assert_eq!(loaded, n);
    let api: Api<ConfigMap> = Api::all(server.client());
    let opts = || ListOptions { resource_version: "0".into(), ..Default::default() };
    let helped =
        ApiListerWatcher::new(api.clone()).protobuf(true).decode_helpers(2).list(opts()).await.unwrap();
    let alone =
        ApiListerWatcher::new(api.clone()).protobuf(true).decode_helpers(0).list(opts()).await.unwrap();
    let json = api.list(&Default::default()).await.unwrap().items;
    let helped: Vec<ConfigMap> = helped.items.iter().map(|o| (**o).clone()).collect();
    let alone: Vec<ConfigMap> = alone.items.iter().map(|o| (**o).clone()).collect();
    assert_eq!(helped.len(), n);
    assert_eq!(helped, json, "every object, in the server's order");
    assert_eq!(alone, json);
}

/// A watch-list long enough for helper threads (`decode_helpers`: its initial events after the
/// first 256), in protobuf and in JSON, on a multi-threaded runtime: the store holds every object
/// as JSON gives it, and live events after the bookmark (decoded one by one again) still arrive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_watch_list_is_decoded_with_helpers() {
    for protobuf in [true, false] {
        let server = TestServer::start().await;
        let n = 2000;
        server.objects().bulk_insert(
            "",
            "v1",
            "configmaps",
            (0..n).map(|i| {
                serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"namespace": "default", "name": format!("cm-{i:04}")},
                    "data": {"v": "1"}})
            }),
        );
        let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
        let lw = ApiListerWatcher::new(api.clone()).protobuf(protobuf).decode_helpers(2);
        let h = Harness::start_with(server, lw, |r| r.use_watch_list(true));
        h.store.wait_until("initial sync", |s| s.ops().iter().any(|o| matches!(o, Op::Replace(..)))).await;
        let mut objects: Vec<ConfigMap> = h.store.store.list().iter().map(|o| (**o).clone()).collect();
        objects.sort_by(|x, y| x.metadata.name.cmp(&y.metadata.name));
        let json = api.list(&Default::default()).await.unwrap().items;
        assert_eq!(objects.len(), n, "protobuf {protobuf}");
        assert_eq!(objects, json, "protobuf {protobuf}");
        update(&h.api, "cm-0007", "2").await;
        h.store.wait_until("a live event", |s| s.values()["cm-0007"] == "2").await;
        h.stop().await;
    }
}

/// client-go's watch-list (`sendInitialEvents=true`) over protobuf: the initial events and the
/// bookmark that ends them arrive as protobuf frames; managed fields skipped while decoding.
#[tokio::test]
async fn watch_list_in_protobuf() {
    let (h, objects) = sync_and_follow(TestServer::start().await, true, true).await;
    assert!(h.requests(Verb::List).is_empty());
    assert!(content_types(&h, Verb::Watch).iter().all(|c| c == PROTOBUF_WATCH));
    assert!(objects.iter().all(|o| o.metadata.managed_fields.is_none()));
    assert_eq!(objects[0].data.as_ref().unwrap()["v"], "2");
    h.stop().await;
}

/// A server that does not speak protobuf (client-go's `AcceptContentTypes` lists JSON second for
/// this): it answers JSON, which is decoded as JSON; nothing to configure.
#[tokio::test]
async fn a_server_without_protobuf_answers_json() {
    let server = TestServer::builder().protobuf(false).start().await;
    let (h, _) = sync_and_follow(server, false, true).await;
    assert_eq!(content_types(&h, Verb::List), ["application/json"]);
    assert!(content_types(&h, Verb::Watch).iter().all(|c| c == "application/json"));
    h.stop().await;
}

/// A protobuf frame the decoder refuses (client-go: `StreamWatcher` reports "unable to decode an
/// event from the watch stream" and the reflector relists) ends the watch with a decode error,
/// then a relist after backoff catches up with what was missed.
#[tokio::test]
async fn bad_protobuf_frame_is_a_decode_error_then_relist() {
    relists_after(WatchFault::MalformedFrame { after: 1 }, ErrorKind::Decode).await;
}

/// A protobuf ERROR event carrying a 500 Status (client-go: `errors.FromObject` of the decoded
/// Status ends the watch): classified from the protobuf Status, then a relist.
#[tokio::test]
async fn protobuf_error_event_is_classified_then_relist() {
    let fault =
        WatchFault::Error { after: 1, code: 500, reason: "InternalError".into(), message: "boom".into() };
    relists_after(fault, ErrorKind::InternalError).await;
}

async fn relists_after(fault: WatchFault, expected: ErrorKind) {
    let server = TestServer::start().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    create(&api, "a", "1").await;
    create(&api, "b", "1").await;
    server.faults().next_watch(fault);
    let lw = ApiListerWatcher::new(api.clone()).protobuf(true);
    let h = Harness::start_with(server, lw, |r| r.use_watch_list(false));
    h.store.wait_until("synced", |s| s.names() == ["a", "b"]).await;
    update(&h.api, "a", "2").await;
    h.ended.wait_for(expected).await;
    delete(&h.api, "b").await;
    let d = h.clock.wait_for_sleepers(1).await[0];
    h.clock.advance(d);
    h.store
        .wait_until("relisted", |s| s.ops().iter().filter(|o| matches!(o, Op::Replace(..))).count() == 2)
        .await;
    assert_eq!(h.store.names(), ["a"]);
    assert_eq!(h.ended.kinds(), [expected]);
    assert!(content_types(&h, Verb::Watch).iter().all(|c| c == PROTOBUF_WATCH));
    h.stop().await;
}
