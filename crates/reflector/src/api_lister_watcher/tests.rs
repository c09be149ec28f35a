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
    let list0 = ListOptions { resource_version: "0".into(), limit: Some(500), continue_token: None, shard_selector: None };
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
