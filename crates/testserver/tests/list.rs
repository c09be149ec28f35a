//! Lists: pagination with consistent continue tokens, expired tokens, resourceVersion semantics
//! ("", "0", exact, too large), selectors and namespaces.

mod common;

use common::{cm, status_of};
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_testserver::TestServer;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, VersionMatch};
use serde_json::json;

async fn seeded(n: usize) -> (TestServer, Api<ConfigMap>) {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    for i in 0..n {
        let labels: &[(&str, &str)] = if i % 2 == 0 { &[("parity", "even")] } else { &[("parity", "odd")] };
        cms.create(&PostParams::default(), &cm(&format!("cm-{i:02}"), labels, "1")).await.unwrap();
    }
    (server, cms)
}

fn names(list: &kube::api::ObjectList<ConfigMap>) -> Vec<String> {
    list.items.iter().map(|c| c.metadata.name.clone().unwrap()).collect()
}

#[tokio::test]
async fn list_resource_version_is_the_current_one_and_items_are_in_key_order() {
    let (server, cms) = seeded(3).await;
    let list = cms.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.metadata.resource_version, Some(server.resource_version().to_string()));
    assert_eq!(names(&list), ["cm-00", "cm-01", "cm-02"]);
}

#[tokio::test]
async fn pages_are_a_consistent_snapshot_even_when_objects_change_between_them() {
    let (_server, cms) = seeded(5).await;
    let first = cms.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(names(&first), ["cm-00", "cm-01"]);
    assert_eq!(first.metadata.remaining_item_count, Some(3));
    let token = first.metadata.continue_.clone().unwrap();

    // Changes after the first page must not show in later pages.
    cms.delete("cm-03", &DeleteParams::default()).await.unwrap();
    cms.patch("cm-02", &PatchParams::default(), &Patch::Merge(json!({"data": {"v": "changed"}})))
        .await
        .unwrap();
    cms.create(&PostParams::default(), &cm("cm-05", &[], "1")).await.unwrap();

    let second = cms.list(&ListParams::default().limit(2).continue_token(&token)).await.unwrap();
    assert_eq!(names(&second), ["cm-02", "cm-03"]);
    assert_eq!(second.items[0].data.as_ref().unwrap()["v"], "1", "old content of cm-02");
    assert_eq!(second.metadata.resource_version, first.metadata.resource_version);
    let third = cms
        .list(&ListParams::default().limit(2).continue_token(second.metadata.continue_.as_ref().unwrap()))
        .await
        .unwrap();
    assert_eq!(names(&third), ["cm-04"]);
    assert_eq!(third.metadata.continue_, None);
}

#[tokio::test]
async fn an_expired_continue_token_is_410_with_the_real_message_and_a_fresh_token() {
    let (server, cms) = seeded(4).await;
    let first = cms.list(&ListParams::default().limit(2)).await.unwrap();
    cms.create(&PostParams::default(), &cm("cm-99", &[], "1")).await.unwrap();
    server.compact();
    let token = first.metadata.continue_.unwrap();
    let s = status_of(cms.list(&ListParams::default().limit(2).continue_token(&token)).await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (410, "Expired"));
    assert_eq!(
        s.message,
        "The provided continue parameter is too old to display a consistent list result. You can start a new \
         list without the continue parameter, or use the continue token in this response to retrieve the \
         remainder of the results. Continuing with the provided token results in an inconsistent list - objects \
         that were created, modified, or deleted between the time the first chunk was returned and now may show \
         up in the list."
    );
    let fresh = s.metadata.and_then(|m| m.continue_).expect("an inconsistent continue token");
    let rest = cms.list(&ListParams::default().limit(10).continue_token(&fresh)).await.unwrap();
    assert_eq!(names(&rest), ["cm-02", "cm-03", "cm-99"]);
}

#[tokio::test]
async fn resource_version_zero_is_served_unpaginated() {
    let (_server, cms) = seeded(5).await;
    // kube's ListParams drops resourceVersion=0 when a limit is set, so send both by hand.
    let req = http::Request::get("/api/v1/namespaces/default/configmaps?limit=2&resourceVersion=0")
        .body(Vec::new())
        .unwrap();
    let list: kube::api::ObjectList<ConfigMap> = cms.clone().into_client().request(req).await.unwrap();
    assert_eq!(list.items.len(), 5);
    assert_eq!(list.metadata.continue_, None);
}

#[tokio::test]
async fn exact_reads_reconstruct_old_state_and_expire_after_compaction() {
    let (server, cms) = seeded(3).await;
    let rv = server.resource_version().to_string();
    cms.delete("cm-00", &DeleteParams::default()).await.unwrap();
    let lp = ListParams::default().at(&rv).matching(VersionMatch::Exact);
    let old = cms.list(&lp).await.unwrap();
    assert_eq!(names(&old), ["cm-00", "cm-01", "cm-02"]);
    assert_eq!(old.metadata.resource_version, Some(rv.clone()));

    // Not-older-than is served at the current state.
    let now = cms.list(&ListParams::default().at(&rv).matching(VersionMatch::NotOlderThan)).await.unwrap();
    assert_eq!(names(&now), ["cm-01", "cm-02"]);

    server.compact();
    let s = status_of(cms.list(&lp).await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (410, "Expired"));
    assert_eq!(s.message, "The resourceVersion for the provided list is too old.");
    // With a limit and no match, resourceVersion N is an exact read too.
    let s = status_of(cms.list(&ListParams::default().at(&rv).limit(1)).await.unwrap_err());
    assert_eq!(s.code, 410);
}

#[tokio::test]
async fn a_resource_version_newer_than_the_server_is_504_too_large() {
    let (server, cms) = seeded(1).await;
    let future = (server.resource_version() + 5).to_string();
    let s = status_of(cms.list(&ListParams::default().at(&future)).await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (504, "Timeout"));
    assert_eq!(
        s.message,
        format!("Timeout: Too large resource version: {future}, current: {}", server.resource_version())
    );
    let details = s.details.unwrap();
    assert_eq!(details.causes[0].reason, "ResourceVersionTooLarge");
    assert_eq!(details.causes[0].message, "Too large resource version");
}

#[tokio::test]
async fn label_and_field_selectors_filter_lists_and_pages() {
    let (_server, cms) = seeded(6).await;
    let even = cms.list(&ListParams::default().labels("parity=even")).await.unwrap();
    assert_eq!(names(&even), ["cm-00", "cm-02", "cm-04"]);
    let set = cms.list(&ListParams::default().labels("parity in (odd),parity!=even")).await.unwrap();
    assert_eq!(names(&set), ["cm-01", "cm-03", "cm-05"]);
    assert_eq!(names(&cms.list(&ListParams::default().labels("!parity")).await.unwrap()).len(), 0);
    assert_eq!(names(&cms.list(&ListParams::default().labels("parity")).await.unwrap()).len(), 6);
    assert_eq!(names(&cms.list(&ListParams::default().labels("parity notin (odd)")).await.unwrap()).len(), 3);

    let page = cms.list(&ListParams::default().labels("parity=odd").limit(2)).await.unwrap();
    assert_eq!(names(&page), ["cm-01", "cm-03"]);
    assert_eq!(page.metadata.remaining_item_count, None, "no count when a selector is used");

    let by_name = cms.list(&ListParams::default().fields("metadata.name=cm-04")).await.unwrap();
    assert_eq!(names(&by_name), ["cm-04"]);
    let not = cms
        .list(&ListParams::default().fields("metadata.name!=cm-04,metadata.namespace==default"))
        .await
        .unwrap();
    assert_eq!(names(&not).len(), 5);
    let s = status_of(cms.list(&ListParams::default().fields("spec.nodeName=x")).await.unwrap_err());
    assert_eq!((s.code, s.message.as_str()), (400, "field label not supported: spec.nodeName"));
}

#[tokio::test]
async fn all_namespace_lists_span_namespaces_in_key_order() {
    let server = TestServer::start().await;
    let client = server.client();
    for ns in ["b", "a"] {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        api.create(&PostParams::default(), &cm("x", &[], "1")).await.unwrap();
    }
    let all: Api<ConfigMap> = Api::all(client.clone());
    let list = all.list(&ListParams::default()).await.unwrap();
    let keys: Vec<_> = list.items.iter().map(|c| c.metadata.namespace.clone().unwrap()).collect();
    assert_eq!(keys, ["a", "b"]);
    let only_b: Api<ConfigMap> = Api::namespaced(client, "b");
    assert_eq!(only_b.list(&ListParams::default()).await.unwrap().items.len(), 1);
}
