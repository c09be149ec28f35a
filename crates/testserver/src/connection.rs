//! One connection to the server (TCP, or an in-memory pipe): hyper serving it, a restart's
//! `Connection: close`, and in-flight accounting.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::response::ResBody;
use crate::state::{Connection, Shared};

/// Serves one connection (TCP, or in memory) on a task of its own until it closes, the server
/// restarts or it is dropped.
pub(crate) fn serve_connection<I>(shared: Arc<Shared>, io: I)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let token = shared.generation.lock().clone();
    let id = shared.connections.fetch_add(1, Ordering::Relaxed);
    let state = Arc::new(Connection { in_flight: AtomicUsize::new(0), watching: AtomicBool::new(false) });
    shared.open.lock().insert(id, state.clone());
    let shared = shared.clone();
    tokio::spawn(async move {
        let svc_shared = shared.clone();
        let conn_token = token.clone();
        let svc_state = state.clone();
        let service = service_fn(move |req| {
            let shared = svc_shared.clone();
            let token = conn_token.clone();
            let state = svc_state.clone();
            state.in_flight.fetch_add(1, Ordering::AcqRel);
            let guard = InFlight(state);
            async move {
                // A request that arrives on a connection of a restarted generation is served
                // by the restarted server: its watches belong to the current generation.
                let serving =
                    if token.is_cancelled() { shared.generation.lock().clone() } else { token.clone() };
                // `Err(Dropped)`: an unreachable fault; hyper drops the connection unanswered.
                let mut response = crate::handler::handle(shared, serving, id, req).await?;
                if matches!(response.body(), ResBody::Stream(_)) {
                    guard.0.watching.store(true, Ordering::Release);
                }
                if token.is_cancelled() {
                    // A connection of a generation that was restarted: this response is its
                    // last (hyper closes the connection after a `Connection: close` reply).
                    response
                        .headers_mut()
                        .insert(http::header::CONNECTION, http::HeaderValue::from_static("close"));
                }
                Ok::<_, crate::handler::Dropped>(response.map(|body| Tracked { body, _guard: guard }))
            }
        });
        let conn = http1::Builder::new().keep_alive(true).serve_connection(TokioIo::new(io), service);
        tokio::pin!(conn);
        tokio::select! {
            biased;
            _ = token.cancelled() => {
                // A restart cuts a watch: dropping the connection closes the socket
                // mid-stream. Any other connection serves one more response, with
                // `Connection: close` (see `Faults::restart`), unless the server itself is
                // dropped, which closes every connection.
                if !state.watching.load(Ordering::Acquire) {
                    tokio::select! {
                        _ = conn => {}
                        _ = shared.shutdown.cancelled() => {}
                    }
                }
            }
            _ = conn.as_mut() => {}
        }
        shared.open.lock().remove(&id);
    });
}

/// Counts a request as in flight on its connection until its response body is dropped (hyper
/// drops it once written, or with the connection).
struct InFlight(Arc<Connection>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.watching.store(false, Ordering::Release);
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that keeps its request counted as in flight.
struct Tracked {
    body: ResBody,
    _guard: InFlight,
}

impl hyper::body::Body for Tracked {
    type Data = bytes::Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<bytes::Bytes>, Infallible>>> {
        std::pin::Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}
