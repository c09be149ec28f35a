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
