//! The prelude resolves every name it promises, next to kube's prelude.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kcache::prelude::*;
use kube::prelude::*;

/// An informer, a lister, an index and a workqueue, through the prelude alone (kube's prelude
/// imported too: no name is ambiguous).
#[tokio::test]
async fn the_prelude_names_an_informer_controller_pipeline() {
    let server = kcache_testserver::TestServer::start().await;
    let api = kube::Api::<ConfigMap>::namespaced(server.client(), "default");
    let informer = SharedIndexInformer::from_api(api, Duration::ZERO);
    let by_name = index_func(|cm: &ConfigMap| Ok(vec![cm.name_any()]));
    informer.add_indexers(Indexers::from([("by-name".to_owned(), by_name)])).unwrap();
    let queue = RateLimitingQueue::new(default_controller_rate_limiter());
    let q = queue.clone();
    informer
        .add_event_handler(EventHandlerFuncs::new().on_add(move |cm: &Arc<ConfigMap>, _| {
            q.add(meta_namespace_key(&cm.namespace().unwrap_or_default(), &cm.name_any()));
        }))
        .unwrap();
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let (informer, cancel) = (informer.clone(), cancel.clone());
        async move { informer.run(cancel).await }
    });
    assert!(wait_for_cache_sync(&cancel, &[&informer]).await);
    let lister: Lister<ConfigMap> = informer.lister();
    assert!(lister.list().is_empty());
    let key: ObjectKey<ConfigMap> = ObjectKey::from_cache_key("default/web");
    assert_eq!(split_meta_namespace_key(key.as_str()).unwrap(), ("default", "web"));
    assert_eq!(Action::await_change(), kcache::controller::Action::await_change());
    let _ = (Retry::RateLimited, Requeue::Never, Watch::all(), NAMESPACE_INDEX);
    queue.shut_down();
    cancel.cancel();
    run.await.unwrap().unwrap();
}
