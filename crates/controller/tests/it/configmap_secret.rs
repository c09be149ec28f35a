//! The ConfigMap -> Secret example (`examples/configmap_secret.rs`, issue #35's benchmark
//! controller) against kcache-testserver: the six cases the issue lists. The controller is the
//! example's own `run`, included below, unmodified.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kcache_testserver::{RequestFault, TestServer, Verb};
use kube::api::{Api, DeleteParams, PostParams};

use crate::common::{Observer, Running, cm, create};

#[allow(unreachable_pub)] // `pub` in the example crate
#[path = "../../examples/configmap_secret.rs"]
mod example;

/// The Secret data a ConfigMap's data becomes.
fn secret_data(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, ByteString>> {
    Some(pairs.iter().map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec()))).collect())
}

struct Setup {
    server: TestServer,
    cms: Api<ConfigMap>,
    secrets: Api<Secret>,
    observed: Observer<Secret>,
    controller: Running,
}

async fn setup() -> Setup {
    let server = TestServer::start().await;
    let cms = Api::<ConfigMap>::namespaced(server.client(), "default");
    let secrets = Api::<Secret>::namespaced(server.client(), "default");
    let observed = Observer::start(secrets.clone()).await;
    let client = server.client();
    let controller = Running::spawn(move |cancel| example::run(client, cancel));
    Setup { server, cms, secrets, observed, controller }
}

/// A labelled ConfigMap gets a Secret of the same name, controlled by it and holding its data;
/// an unlabelled one gets none. (controller-runtime's envtest-style "creates the owned object"
/// scenario.) The unlabelled ConfigMap is created between two labelled ones: whether the
/// controller's informer sees them as its initial list (newest first) or as events (in order),
/// a controller that ignored the label would have written its Secret before the last labelled
/// one's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_labelled_configmap_gets_a_secret_and_an_unlabelled_one_does_not() {
    let s = setup().await;
    let labelled = create(&s.cms, &cm("a-labelled", &[("app", "x")], &[("v", "1")])).await;
    create(&s.cms, &cm("b-plain", &[], &[("v", "1")])).await;
    create(&s.cms, &cm("c-labelled", &[("app", "x")], &[("v", "1")])).await;
    s.observed
        .wait_for("the labelled ConfigMaps' Secrets", |l| {
            l.get("default/a-labelled").is_some() && l.get("default/c-labelled").is_some()
        })
        .await;
    let secret = s.observed.get("a-labelled").unwrap();
    assert_eq!(secret.data, secret_data(&[("v", "1")]));
    let owner = &secret.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("ConfigMap", "a-labelled", Some(true))
    );
    assert_eq!(Some(&owner.uid), labelled.metadata.uid.as_ref());
    assert_eq!(s.observed.lister().list().len(), 2, "no Secret for the unlabelled ConfigMap");
    assert!(s.secrets.get_opt("b-plain").await.unwrap().is_none());
    s.controller.stop().await.unwrap();
}

/// An update of the ConfigMap's data reaches the Secret: keys changed, added and removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_updates_propagate() {
    let s = setup().await;
    create(&s.cms, &cm("web", &[("app", "x")], &[("v", "1"), ("gone", "soon")])).await;
    s.observed.wait_for("the Secret", |l| l.get("default/web").is_some()).await;
    let mut current = s.cms.get("web").await.unwrap();
    current.data = Some([("v".to_string(), "2".to_string()), ("new".to_string(), "yes".to_string())].into());
    s.cms.replace("web", &PostParams::default(), &current).await.unwrap();
    let want = secret_data(&[("new", "yes"), ("v", "2")]);
    s.observed
        .wait_for("the Secret's new data", |l| l.get("default/web").is_some_and(|s| s.data == want))
        .await;
    s.controller.stop().await.unwrap();
}

/// A Secret deleted by someone else is recreated: its delete event maps to its owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_secret_is_recreated() {
    let s = setup().await;
    create(&s.cms, &cm("web", &[("app", "x")], &[("v", "1")])).await;
    s.observed.wait_for("the Secret", |l| l.get("default/web").is_some()).await;
    let first = s.observed.get("web").unwrap().metadata.uid.clone();
    s.secrets.delete("web", &DeleteParams::default()).await.unwrap();
    s.observed
        .wait_for("a new Secret", |l| l.get("default/web").is_some_and(|s| s.metadata.uid != first))
        .await;
    assert_eq!(s.observed.get("web").unwrap().data, secret_data(&[("v", "1")]));
    s.controller.stop().await.unwrap();
}

/// Deleting the ConfigMap deletes its Secret (through `on_gone`: kcache-testserver has no
/// garbage collector, and a real cluster's would do the same through the owner reference).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_configmap_deletes_the_secret() {
    let s = setup().await;
    create(&s.cms, &cm("web", &[("app", "x")], &[("v", "1")])).await;
    create(&s.cms, &cm("other", &[("app", "x")], &[("v", "1")])).await;
    s.observed.wait_for("both Secrets", |l| l.list().len() == 2).await;
    s.cms.delete("web", &DeleteParams::default()).await.unwrap();
    s.observed.wait_for("web's Secret deleted", |l| l.get("default/web").is_none()).await;
    assert!(s.observed.get("other").is_some(), "the other ConfigMap keeps its Secret");
    s.controller.stop().await.unwrap();
}

/// Removing the label deletes the Secret, and the ConfigMap stays: the server-side selector
/// sends the departure as a delete, and the key is gone from the controller's cache.
/// (kube-runtime and controller-runtime versions of this controller miss this case: their label
/// predicates drop the update.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_the_label_deletes_the_secret() {
    let s = setup().await;
    create(&s.cms, &cm("web", &[("app", "x")], &[("v", "1")])).await;
    s.observed.wait_for("the Secret", |l| l.get("default/web").is_some()).await;
    let mut current = s.cms.get("web").await.unwrap();
    current.metadata.labels = None;
    s.cms.replace("web", &PostParams::default(), &current).await.unwrap();
    s.observed.wait_for("the Secret deleted", |l| l.get("default/web").is_none()).await;
    assert!(s.cms.get_opt("web").await.unwrap().is_some(), "the ConfigMap stays");
    s.controller.stop().await.unwrap();
}

/// Injected 500s on the Secret's create are retried with the rate limiter until it succeeds
/// (client-go's `AddRateLimited` on error; controller-runtime's default): the request log shows
/// the failures, then the create that worked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injected_500s_are_retried() {
    let s = setup().await;
    let fault = RequestFault::internal_error().verb(Verb::Create).path_contains("/secrets");
    s.server.faults().fail_requests(3, fault);
    create(&s.cms, &cm("web", &[("app", "x")], &[("v", "1")])).await;
    s.observed.wait_for("the Secret, after the failures", |l| l.get("default/web").is_some()).await;
    // The server writes a request's log record once its answer is ready, after the watch event
    // of what it stored: stopping the controller first (its reconcile has read the 201) makes
    // the record of the create that worked certain to be there.
    s.controller.stop().await.unwrap();
    let creates: Vec<u16> = s
        .server
        .request_log()
        .filter(|r| r.verb == Verb::Create && r.path.ends_with("/secrets"))
        .iter()
        .map(|r| r.status)
        .collect();
    assert_eq!(creates, [500, 500, 500, 201]);
}
