//! Issue 34's sharding scenario (item 7): one replica of N, syncing its shard of the
//! collection, with server-side sharding, client-side filtering or no sharding at all. kcache
//! only: client-go has no sharding of its own to compare with (it passes `shardSelector`
//! through), so `cargo xtask bench` compares the modes with each other.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;

use k8s_openapi::api::core::v1::ConfigMap;
use kcache_reflector::{Reflector, ReflectorMetrics, ShardMode};
use kcache_shard_selector::{ShardKey, ShardSelector};
use kube::Api;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::Outcome;
use super::informer::kcache_lister_watcher;
use crate::measure::Timer;

/// How many shards the collection is split into (`KCACHE_BENCH_SHARDS`, default 1); the replica
/// measured is the first. `0` means no shard selector at all (unsharded).
fn shards() -> usize {
    std::env::var("KCACHE_BENCH_SHARDS").ok().and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// A response body that counts the bytes of its data frames into a shared counter.
struct Counted<B> {
    inner: B,
    count: Arc<AtomicU64>,
}

impl<B: http_body::Body<Data = Bytes> + Unpin> http_body::Body for Counted<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, B::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(data) = frame.data_ref()
        {
            self.count.fetch_add(data.len() as u64, Ordering::Relaxed);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// The scenario's client (the one every scenario uses, see `crate::client`) with a layer that
/// counts the bytes of every response body into `count`: what the server sent, after TLS and
/// before any decoding.
fn counting_client(rt: &tokio::runtime::Runtime, count: Arc<AtomicU64>) -> kube::Client {
    let config = rt.block_on(crate::config());
    // kube's stack spawns its buffer's worker: it must be built inside the runtime.
    let _entered = rt.enter();
    let builder = kube::client::ClientBuilder::try_from(config).unwrap_or_else(|e| panic!("client: {e}"));
    builder.with_layer(&CountLayer(count)).build()
}

/// Wraps each response body of the service in [`Counted`].
struct CountLayer(Arc<AtomicU64>);

impl<S> tower::Layer<S> for CountLayer {
    type Service = CountService<S>;

    fn layer(&self, inner: S) -> CountService<S> {
        CountService { inner, count: Arc::clone(&self.0) }
    }
}

/// [`CountLayer`]'s service.
struct CountService<S> {
    inner: S,
    count: Arc<AtomicU64>,
}

type ResponseFuture<B, E> = Pin<Box<dyn Future<Output = Result<http::Response<Counted<B>>, E>> + Send>>;

impl<S, B> tower::Service<http::Request<kube::client::Body>> for CountService<S>
where
    S: tower::Service<http::Request<kube::client::Body>, Response = http::Response<B>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: Send + 'static,
{
    type Response = http::Response<Counted<B>>;
    type Error = S::Error;
    type Future = ResponseFuture<B, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<kube::client::Body>) -> Self::Future {
        let count = Arc::clone(&self.count);
        let response = self.inner.call(req);
        Box::pin(async move { response.await.map(|res| res.map(|inner| Counted { inner, count })) })
    }
}

/// Remembers the last [`ShardMode`] reported.
#[derive(Debug, Default)]
struct LastMode(std::sync::Mutex<Option<ShardMode>>);

impl ReflectorMetrics for LastMode {
    fn shard_mode(&self, _: &str, mode: ShardMode) {
        *self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(mode);
    }
}

/// sharding_sync_50k on kcache: timed, as `reflector_synced_list_50k`: a reflector (LIST +
/// WATCH, the `ApiListerWatcher` of every scenario, protobuf as `KCACHE_BENCH_PROTOBUF` says)
/// into a plain store, with the shard selector of shard 0 of `ShardSelector::split(Uid,
/// KCACHE_BENCH_SHARDS)` (none when unset), until its first `replace`. Whether the server filters
/// (server-side) or not (client-side) is the server's business: `cargo xtask bench` points the
/// scenario at a kube-apiserver with or without `ShardedListAndWatch`. ops = objects in the
/// store; extra: the bytes of the response bodies received while syncing, the mode the reflector ended in, the shards.
pub(super) fn kcache_sharded_sync(_n: usize, t: &mut Timer) -> Outcome {
    let shards = shards();
    let selector = (shards > 0).then(|| ShardSelector::split(ShardKey::Uid, shards).swap_remove(0));
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => panic!("runtime: {e}"),
    };
    let received = Arc::new(AtomicU64::new(0));
    let client = counting_client(&rt, Arc::clone(&received));
    let modes = Arc::new(LastMode::default());
    let (items, bytes) = rt.block_on(async {
        let api: Api<ConfigMap> = Api::all(client);
        let cancel = CancellationToken::new();
        t.start();
        let (store, [replaced, _, _]) = super::reflector::signalling_store();
        let lw = kcache_lister_watcher(api).shard_selector(selector.clone());
        let reflector = Reflector::new(lw, Arc::clone(&store))
            .use_watch_list(false)
            .metrics(Arc::clone(&modes) as Arc<dyn ReflectorMetrics>);
        let task = tokio::spawn(reflector.run(cancel.clone()));
        let synced = tokio::time::timeout(Duration::from_secs(120), replaced).await;
        t.stop();
        let bytes = received.load(Ordering::Relaxed);
        cancel.cancel();
        let _ = task.await;
        match synced {
            Ok(Ok(())) => (store.len(), bytes),
            _ => panic!("reflector not synced within 120 s"),
        }
    });
    let mode = modes.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).map(ShardMode::as_str);
    Outcome {
        ops: items as u64,
        extra: json!({
            "items": items,
            "shards": shards,
            "selector": selector.map(|s| s.to_string()),
            "shard_mode": mode,
            "bytes_received": bytes,
        })
        .as_object()
        .cloned()
        .unwrap_or_default(),
    }
}
