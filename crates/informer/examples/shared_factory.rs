//! Two controllers sharing one factory: both ask for the ConfigMap informer of a namespace and get
//! the same one, so the process holds one watch connection for both.
//!
//! `cargo run -p kcache-informer --example shared_factory` (in-process test server, no cluster).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kcache_informer::{
    EventHandlerFuncs, HandlerRegistration, InformerScope, SharedInformerFactory, wait_for_cache_sync,
};
use kcache_testserver::{TestServer, Verb};
use kube::api::{Api, ObjectMeta, PostParams};
use tokio_util::sync::CancellationToken;

/// A toy controller that counts the ConfigMaps it has seen.
fn controller(
    name: &'static str,
    factory: &SharedInformerFactory,
) -> (Arc<AtomicUsize>, HandlerRegistration<ConfigMap>) {
    let seen = Arc::new(AtomicUsize::new(0));
    let informer = factory.informer::<ConfigMap>(&InformerScope::namespace("default"));
    let s = Arc::clone(&seen);
    let registration = informer
        .add_event_handler(EventHandlerFuncs::new().on_add(move |cm: &Arc<ConfigMap>, _| {
            s.fetch_add(1, Ordering::SeqCst);
            println!("{name}: saw {:?}", cm.metadata.name);
        }))
        .expect("informer is not stopped");
    (seen, registration)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let server = TestServer::start().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    for i in 0..3 {
        let cm = ConfigMap {
            metadata: ObjectMeta { name: Some(format!("cm-{i}")), ..Default::default() },
            ..Default::default()
        };
        api.create(&PostParams::default(), &cm).await?;
    }

    let factory = SharedInformerFactory::new(server.client(), Duration::ZERO);
    let (a, reg_a) = controller("controller-a", &factory);
    let (b, reg_b) = controller("controller-b", &factory);
    factory.start();
    // Each registration is synced once its handler received every object of the initial list.
    wait_for_cache_sync(&CancellationToken::new(), &[&reg_a, &reg_b]).await;
    assert_eq!((a.load(Ordering::SeqCst), b.load(Ordering::SeqCst)), (3, 3));
    let watches = server.request_log().count(Verb::Watch);
    println!("informers: {}, watch connections: {watches}", factory.len());
    factory.shutdown().await;
    Ok(())
}
