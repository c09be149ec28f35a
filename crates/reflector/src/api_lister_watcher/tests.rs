//! Unit tests of [`ApiListerWatcher`](super::ApiListerWatcher): how it reads error responses.

use super::*;

fn error_response(code: u16, body: Vec<u8>) -> http::Response<kube::client::Body> {
    http::Response::builder().status(code).body(kube::client::Body::from(body)).unwrap()
}

/// An error response is its `Status` only when the body says it is one, and only the first
/// 64 KiB of it are read: a proxy's JSON with a `message` of its own never reaches the
/// error's text (it could quote anything), and an endless error page is not held in memory.
#[tokio::test]
async fn an_error_body_is_read_only_if_it_is_a_small_status() {
    let status = br#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"configmaps is forbidden","reason":"Forbidden","code":403}"#;
    let e = error_from_response(error_response(403, status.to_vec())).await;
    assert_eq!(e.kind(), crate::ErrorKind::Forbidden);
    assert!(e.to_string().contains("configmaps is forbidden"), "{e}");

    for body in [
        br#"{"message":"hunter2","code":403}"#.to_vec(),
        br#"{"kind":"Other","message":"hunter2"}"#.to_vec(),
        b"<html>hunter2</html>".to_vec(),
    ] {
        let e = error_from_response(error_response(403, body)).await;
        assert_eq!(e.kind(), crate::ErrorKind::Forbidden, "classified by the HTTP code");
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }

    let mut huge = br#"{"kind":"Status","code":500,"reason":"InternalError","message":""#.to_vec();
    huge.resize(MAX_ERROR_BODY + 1, b'x');
    huge.extend_from_slice(br#""}"#);
    let e = error_from_response(error_response(500, huge)).await;
    assert_eq!(e.kind(), crate::ErrorKind::InternalError);
    assert!(e.to_string().contains("non-Status body") && !e.to_string().contains("xxxx"), "{e}");
}

/// A client that is never called: building requests needs one, sending them is not tested here.
fn client() -> kube::Client {
    let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
    kube::Client::try_from(config).unwrap()
}

/// client-go's `metadata` client (`List`, `Watch`: `Accept:
/// ...;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1` and `as=PartialObjectMetadata`), here
/// with kube's media types (its `list_metadata` / `watch_metadata`): a `PartialObjectMeta`
/// lister-watcher asks for the metadata, any other for JSON objects, and both keep the
/// reflector's query (the first list at "0" stays at "0" with its limit).
#[tokio::test]
async fn metadata_requests_negotiate_partial_object_metadata() {
    use k8s_openapi::api::core::v1::Pod;
    use kube::core::PartialObjectMeta;

    let accept = |r: &http::Request<kube::client::Body>| {
        r.headers().get(http::header::ACCEPT).unwrap().to_str().unwrap().to_owned()
    };
    let list0 = ListOptions {
        resource_version: "0".into(),
        limit: Some(500),
        continue_token: None,
        shard_selector: None,
    };
    let watch = WatchOptions {
        resource_version: "7".into(),
        timeout_seconds: 300,
        allow_bookmarks: true,
        send_initial_events: true,
        shard_selector: None,
    };

    let meta = ApiListerWatcher::new(kube::Api::<PartialObjectMeta<Pod>>::namespaced(client(), "ns"));
    assert!(meta.is_metadata_only());
    let req = meta.list_request(&list0).unwrap();
    assert_eq!(accept(&req), "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1");
    assert_eq!(req.uri(), "/api/v1/namespaces/ns/pods?limit=500&resourceVersion=0");
    let req = meta.watch_request(&watch).unwrap();
    assert_eq!(accept(&req), "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1");
    assert_eq!(
        req.uri(),
        "/api/v1/namespaces/ns/pods?watch=true&resourceVersion=7&timeoutSeconds=300\
         &allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
    );
    assert_eq!(req.headers().get(http::header::ACCEPT_ENCODING).unwrap(), "identity");

    let full = ApiListerWatcher::new(kube::Api::<Pod>::namespaced(client(), "ns"));
    assert!(!full.is_metadata_only());
    assert_eq!(accept(&full.list_request(&list0).unwrap()), "application/json");
    assert_eq!(accept(&full.watch_request(&watch).unwrap()), "application/json");

    let ar = kube::core::ApiResource::erase::<Pod>(&());
    let url = <kube::core::DynamicObject as kube::Resource>::url_path(&ar, None);
    let dynamic_meta = ApiListerWatcher::<PartialObjectMeta>::with_url(client(), url);
    assert!(dynamic_meta.is_metadata_only());
}

/// `shardSelector` (KEP-5866) goes on LIST, WATCH and watch-list requests, for whole objects,
/// protobuf and metadata alike, in apimachinery's rendering and form-encoded: the request's own
/// selector first (the reflector's), else the lister-watcher's; none without either. client-go
/// sends `ListOptions.ShardSelector` as the query parameter `shardSelector` the same way.
#[tokio::test]
async fn shard_selector_is_sent_on_every_request() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kcache_shard_selector::{ShardKey, ShardSelector};
    use kube::core::PartialObjectMeta;

    let shards = ShardSelector::split(ShardKey::Uid, 2);
    let sent = |uri: &http::Uri| {
        form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes())
            .find(|(k, _)| k == "shardSelector")
            .map(|(_, v)| v.into_owned())
    };
    let list = ListOptions { resource_version: "0".into(), limit: Some(500), ..ListOptions::default() };
    let watch = WatchOptions { send_initial_events: true, ..WatchOptions::default() };
    let with = |s: &ShardSelector| {
        (
            ListOptions { shard_selector: Some(s.clone()), ..list.clone() },
            WatchOptions { shard_selector: Some(s.clone()), ..watch.clone() },
        )
    };

    let plain = ApiListerWatcher::new(kube::Api::<ConfigMap>::all(client())).protobuf(true);
    assert_eq!(sent(plain.list_request(&list).unwrap().uri()), None);
    assert_eq!(sent(plain.watch_request(&watch).unwrap().uri()), None);
    let (l, w) = with(&shards[1]);
    assert_eq!(sent(plain.list_request(&l).unwrap().uri()), Some(shards[1].to_string()));
    assert_eq!(sent(plain.watch_request(&w).unwrap().uri()), Some(shards[1].to_string()));

    let own = ApiListerWatcher::new(kube::Api::<PartialObjectMeta<ConfigMap>>::all(client()))
        .shard_selector(Some(shards[0].clone()));
    assert_eq!(ListerWatcher::shard_selector(&own), Some(shards[0].clone()));
    assert_eq!(sent(own.list_request(&list).unwrap().uri()), Some(shards[0].to_string()));
    assert_eq!(sent(own.watch_request(&watch).unwrap().uri()), Some(shards[0].to_string()));
    assert_eq!(sent(own.list_request(&l).unwrap().uri()), Some(shards[1].to_string()), "the request's wins");
}
