//! Server-side sharded list and watch (KEP-5866, `Builder::sharded_list_and_watch`): the
//! `shardSelector` parameter as kube-apiserver v1.36.3 serves it with the `ShardedListAndWatch`
//! gate on (apiserver `registry/generic/registry/store.go` `ListPredicate`/`Watch`,
//! `storage/cacher` `GetList`/`filterWithAttrsAndPrefixFunction`,
//! `SelectionPredicate.SetShardInfoOnList`), and as it ignores it with the gate off.

use std::collections::BTreeSet;

use futures::{AsyncBufReadExt, StreamExt, TryStreamExt};
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_protobuf::{ListPart, ListReader};
use kcache_shard_selector::{ShardKey, ShardSelector};
use kcache_testserver::TestServer;
use kube::api::{Api, DeleteParams, ListParams, PostParams, WatchEvent};
use serde_json::{Value, json};

use crate::common::{cm, raw};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

fn enc(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// A server with the gate as given and `n` ConfigMaps `cm-00`.. in `default`; returns their
/// names with their uids.
async fn seeded(n: usize, gate: bool) -> (TestServer, Vec<(String, String)>) {
    let server = TestServer::builder().sharded_list_and_watch(gate).start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let mut made = Vec::new();
    for i in 0..n {
        let c = api.create(&PostParams::default(), &cm(&format!("cm-{i:02}"), &[], "1")).await.unwrap();
        made.push((c.metadata.name.unwrap(), c.metadata.uid.unwrap()));
    }
    (server, made)
}

/// The names of `made` whose uid `sel` selects.
fn expected(sel: &ShardSelector, made: &[(String, String)]) -> BTreeSet<String> {
    made.iter().filter(|(_, uid)| sel.matches_value(uid)).map(|(n, _)| n.clone()).collect()
}

fn names(list: &Value) -> BTreeSet<String> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_owned())
        .collect()
}

/// cacher `GetList` with `MatchesSharding`, then `SetShardInfoOnList`: each of three shards
/// gets exactly its objects, together all of them once, and `metadata.shardInfo.selector` is
/// the selector's canonical `String()` even when the request spelled it otherwise.
#[tokio::test]
async fn sharded_list_filters_and_echoes_the_canonical_selector() {
    let (server, made) = seeded(30, true).await;
    let mut seen = BTreeSet::new();
    for shard in ShardSelector::split(ShardKey::Uid, 3) {
        let (code, _, list) =
            raw(&server, "GET", &format!("{CMS}?shardSelector={}", enc(&shard.to_string())), &[], b"").await;
        assert_eq!(code, 200);
        let got = names(&list);
        assert_eq!(got, expected(&shard, &made));
        assert!(got.is_disjoint(&seen), "no object in two shards");
        seen.extend(got);
        assert_eq!(list["metadata"]["shardInfo"], json!({"selector": shard.to_string()}));
    }
    assert_eq!(seen.len(), 30, "every object in some shard");

    let spelled = r#" ( shardRange(object.metadata.uid,"0x0000000000000000","0x8000000000000000") ) "#;
    let (_, _, list) = raw(&server, "GET", &format!("{CMS}?shardSelector={}", enc(spelled)), &[], b"").await;
    assert_eq!(
        list["metadata"]["shardInfo"]["selector"],
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"
    );
    // An empty parameter is no selector (ListOptions.ShardSelector == "").
    let (code, _, list) = raw(&server, "GET", &format!("{CMS}?shardSelector="), &[], b"").await;
    assert_eq!((code, names(&list).len()), (200, 30));
    assert!(list["metadata"].get("shardInfo").is_none());
}

/// The protobuf list carries shardInfo (ListMeta field 5); the PartialObjectMetadataList does
/// not (apiserver `asPartialObjectMetadataList` copies resourceVersion, continue and
/// remainingItemCount only), though it is filtered all the same.
#[tokio::test]
async fn sharded_list_in_protobuf_and_as_metadata() {
    let (server, made) = seeded(20, true).await;
    let shard = &ShardSelector::split(ShardKey::Uid, 2)[1];
    let path = format!("{CMS}?shardSelector={}", enc(&shard.to_string()));

    let req = http::Request::get(&path)
        .header("accept", "application/vnd.kubernetes.protobuf")
        .body(kube::client::Body::empty())
        .unwrap();
    let body = server.client().send(req).await.unwrap().into_body().collect().await.unwrap().to_bytes();
    let mut reader = ListReader::new();
    reader.push(&body);
    let (mut meta, mut items) = (Vec::new(), 0);
    while let Some(part) = reader.next_part().unwrap() {
        match part {
            ListPart::Metadata(m) => meta = m.to_vec(),
            ListPart::Item(_) => items += 1,
            _ => {}
        }
    }
    assert_eq!(items, expected(shard, &made).len());
    // ShardInfo{selector: 1} as ListMeta field 5, length-delimited.
    let sel = shard.to_string();
    let mut want = vec![0x2a, (sel.len() + 2) as u8, 0x0a, sel.len() as u8];
    want.extend_from_slice(sel.as_bytes());
    assert!(meta.windows(want.len()).any(|w| w == want), "ListMeta without shardInfo: {meta:?}");

    let accept = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
    let (code, _, list) = raw(&server, "GET", &path, &[("accept", accept)], b"").await;
    assert_eq!((code, list["kind"].as_str()), (200, Some("PartialObjectMetadataList")));
    assert_eq!(names(&list), expected(shard, &made));
    assert!(list["metadata"].get("shardInfo").is_none(), "{}", list["metadata"]);
}

/// Paging a sharded list (cacher `GetList` with a limit, `PrepareContinueToken`): the pages
/// together are the shard; `remainingItemCount` counts the unfiltered items after the limit,
/// since `SelectionPredicate.Empty` does not look at the shard selector.
#[tokio::test]
async fn sharded_list_pages() {
    let (server, made) = seeded(24, true).await;
    let shard = &ShardSelector::split(ShardKey::Uid, 2)[0];
    let want = expected(shard, &made);
    let (_, _, first) =
        raw(&server, "GET", &format!("{CMS}?limit=2&shardSelector={}", enc(&shard.to_string())), &[], b"")
            .await;
    assert_eq!(first["metadata"]["remainingItemCount"], json!(24 - 2));
    let mut got = names(&first);
    let mut cont = first["metadata"]["continue"].as_str().map(str::to_owned);
    while let Some(token) = cont {
        let (code, _, page) = raw(
            &server,
            "GET",
            &format!("{CMS}?limit=2&continue={token}&shardSelector={}", enc(&shard.to_string())),
            &[],
            b"",
        )
        .await;
        assert_eq!(code, 200);
        assert_eq!(page["metadata"]["shardInfo"]["selector"], shard.to_string());
        got.extend(names(&page));
        cont = page["metadata"]["continue"].as_str().map(str::to_owned);
    }
    assert_eq!(got, want);
}

/// cacher `filterWithAttrsAndPrefixFunction`: a sharded watch delivers exactly the in-range
/// events, ADDED, MODIFIED and DELETED, in order. The end of the check is an in-range sentinel
/// created last: anything out of range would have come before it.
#[tokio::test]
async fn sharded_watch_delivers_only_in_range_events() {
    let (server, _) = seeded(0, true).await;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let shard = ShardSelector::split(ShardKey::Uid, 2).remove(0);
    let url = format!(
        "{CMS}?watch=true&resourceVersion={}&shardSelector={}",
        server.resource_version(),
        enc(&shard.to_string())
    );
    let req = http::Request::get(url).body(Vec::new()).unwrap();
    let mut events = server.client().request_events::<ConfigMap>(req).await.unwrap().boxed();

    let mut want = Vec::new();
    let mut made = Vec::new();
    for i in 0..12 {
        let c = api.create(&PostParams::default(), &cm(&format!("cm-{i:02}"), &[], "1")).await.unwrap();
        let mine = shard.matches(&c.metadata);
        made.push((c.metadata.name.clone().unwrap(), mine));
        if mine {
            want.push(("ADDED", c.metadata.name.unwrap()));
        }
    }
    for (name, mine) in &made {
        api.patch(name, &Default::default(), &kube::api::Patch::Merge(json!({"data": {"v": "2"}})))
            .await
            .unwrap();
        api.delete(name, &DeleteParams::default()).await.unwrap();
        if *mine {
            want.push(("MODIFIED", name.clone()));
            want.push(("DELETED", name.clone()));
        }
    }
    let sentinel = loop {
        let n = format!("sentinel-{}", made.len());
        let c = api.create(&PostParams::default(), &cm(&n, &[], "1")).await.unwrap();
        made.push((n.clone(), false));
        if shard.matches(&c.metadata) {
            break n;
        }
    };
    want.push(("ADDED", sentinel.clone()));

    let mut got = Vec::new();
    while got.last().is_none_or(|(_, n): &(&str, String)| *n != sentinel) {
        let (ty, c) = match events.try_next().await.unwrap().expect("stream ended") {
            WatchEvent::Added(c) => ("ADDED", c),
            WatchEvent::Modified(c) => ("MODIFIED", c),
            WatchEvent::Deleted(c) => ("DELETED", c),
            other => panic!("unexpected {other:?}"),
        };
        assert!(shard.matches(&c.metadata), "out-of-range event for {:?}", c.metadata.name);
        got.push((ty, c.metadata.name.unwrap()));
    }
    assert_eq!(got, want);
}

/// A sharded watch-list (`sendInitialEvents=true`): the initial events are the shard's
/// objects, and the initial-events-end bookmark carries no shardInfo (the cacher sends the same
/// bookmark as unsharded; observed on kube-apiserver v1.36.3).
#[tokio::test]
async fn sharded_watch_list_sends_the_shard_then_a_plain_end_bookmark() {
    let (server, made) = seeded(16, true).await;
    let shard = &ShardSelector::split(ShardKey::Uid, 2)[1];
    let url = format!(
        "{CMS}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&shardSelector={}",
        enc(&shard.to_string())
    );
    let req = http::Request::get(url).body(Vec::new()).unwrap();
    let mut lines = server.client().request_stream(req).await.unwrap().lines();
    let mut initial = BTreeSet::new();
    let bookmark = loop {
        let ev: Value = serde_json::from_str(&lines.next().await.unwrap().unwrap()).unwrap();
        match ev["type"].as_str().unwrap() {
            "ADDED" => initial.insert(ev["object"]["metadata"]["name"].as_str().unwrap().to_owned()),
            "BOOKMARK" => break ev["object"].clone(),
            other => panic!("unexpected {other}"),
        };
    };
    assert_eq!(initial, expected(shard, &made));
    assert_eq!(bookmark["metadata"]["annotations"]["k8s.io/initial-events-end"], "true");
    assert!(!bookmark.to_string().contains("shardInfo"), "{bookmark}");
}

/// A malformed selector (apiserver `sharding.Parse` failing in `Store.ListPredicate` /
/// `Store.Watch`) is a plain Go error, which `ErrorToAPIStatus` answers as 500 with no reason and
/// the message `invalid shard selector: <parse error>`; on LIST, WATCH and DELETECOLLECTION alike.
#[tokio::test]
async fn malformed_selectors_are_500_with_the_parsers_message() {
    let (server, _) = seeded(1, true).await;
    for (selector, message) in [
        ("bogus(x)", r#"unsupported function "bogus"; only shardRange() and || are allowed"#),
        ("   ", "empty shard selector is not allowed; omit the parameter for unfiltered lists"),
        (
            "shardRange(object.metadata.name, '0x0000000000000000', '0x10000000000000000')",
            r#"unsupported field path "object.metadata.name"; supported: object.metadata.uid, object.metadata.namespace"#,
        ),
        (
            "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')",
            r#"hexStart must be a 0x-prefixed 16-digit hex value, got "0x0" (did you mean "0x0000000000000000"?)"#,
        ),
        (
            "shardRange(object.metadata.uid, '0x8000000000000000', '0x0000000000000000')",
            "shard range start 0x8000000000000000 must be less than end 0x0000000000000000",
        ),
    ] {
        let q = enc(selector);
        for (method, path) in [
            ("GET", format!("{CMS}?shardSelector={q}")),
            ("GET", format!("{CMS}?watch=true&shardSelector={q}")),
            (
                "GET",
                format!(
                    "{CMS}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&shardSelector={q}"
                ),
            ),
            ("DELETE", format!("{CMS}?shardSelector={q}")),
        ] {
            let (code, _, status) = raw(&server, method, &path, &[], b"").await;
            assert_eq!(code, 500, "{method} {path}");
            assert_eq!(
                status,
                json!({
                    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": format!("invalid shard selector: {message}"), "code": 500,
                }),
                "{method} {path}"
            );
        }
    }
    let (_, _, list) = raw(&server, "GET", CMS, &[], b"").await;
    assert_eq!(names(&list).len(), 1, "the failed DELETECOLLECTIONs deleted nothing");
}

/// With the gate off (the default, as kube-apiserver's alpha gate) the parameter is ignored,
/// even malformed: everything is listed and watched, and no list carries shardInfo. The gate
/// can be switched on a running server.
#[tokio::test]
async fn gate_off_ignores_the_selector() {
    let (server, _) = seeded(10, false).await;
    let half = enc(&ShardSelector::split(ShardKey::Uid, 2)[0].to_string());
    for q in [half.as_str(), "bogus(x)"] {
        let (code, _, list) = raw(&server, "GET", &format!("{CMS}?shardSelector={q}"), &[], b"").await;
        assert_eq!((code, names(&list).len()), (200, 10), "{q}");
        assert!(list["metadata"].get("shardInfo").is_none());
    }
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let req = http::Request::get(format!("{CMS}?watch=true&resourceVersion=0&shardSelector=bogus(x)"))
        .body(Vec::new())
        .unwrap();
    let mut events = server.client().request_events::<ConfigMap>(req).await.unwrap().boxed();
    for _ in 0..10 {
        assert!(matches!(events.try_next().await.unwrap(), Some(WatchEvent::Added(_))));
    }

    server.set_sharded_list_and_watch(true);
    let (code, _, _) = raw(&server, "GET", &format!("{CMS}?shardSelector=bogus(x)"), &[], b"").await;
    assert_eq!(code, 500);
    let (_, _, list) = raw(&server, "GET", &format!("{CMS}?shardSelector={half}"), &[], b"").await;
    assert!(list["metadata"].get("shardInfo").is_some());
    assert!(api.list(&ListParams::default()).await.unwrap().items.len() == 10);
}

/// DELETECOLLECTION lists through `Store.List`, so a sharded one deletes only the shard.
#[tokio::test]
async fn sharded_deletecollection_deletes_only_the_shard() {
    let (server, made) = seeded(12, true).await;
    let shard = &ShardSelector::split(ShardKey::Uid, 2)[0];
    let (code, _, _) =
        raw(&server, "DELETE", &format!("{CMS}?shardSelector={}", enc(&shard.to_string())), &[], b"").await;
    assert_eq!(code, 200);
    let (_, _, list) = raw(&server, "GET", CMS, &[], b"").await;
    let other = ShardSelector::split(ShardKey::Uid, 2).remove(1);
    assert_eq!(names(&list), expected(&other, &made));
}

/// A namespace-keyed selector selects whole namespaces (objects of one namespace share a hash).
#[tokio::test]
async fn namespace_key_selects_whole_namespaces() {
    let server = TestServer::builder().sharded_list_and_watch(true).start().await;
    let namespaces = ["a", "b", "c", "d", "e", "f"];
    for ns in namespaces {
        let api: Api<ConfigMap> = Api::namespaced(server.client(), ns);
        for i in 0..2 {
            api.create(&PostParams::default(), &cm(&format!("cm-{i}"), &[], "1")).await.unwrap();
        }
    }
    let shard = &ShardSelector::split(ShardKey::Namespace, 2)[0];
    let (_, _, list) = raw(
        &server,
        "GET",
        &format!("/api/v1/configmaps?shardSelector={}", enc(&shard.to_string())),
        &[],
        b"",
    )
    .await;
    let got: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["namespace"].as_str().unwrap())
        .collect();
    let want: Vec<&str> =
        namespaces.iter().filter(|ns| shard.matches_value(ns)).flat_map(|ns| [*ns, *ns]).collect();
    assert_eq!(got, want);
}
