//! In-memory connections: HTTP/1.1 over a tokio duplex pipe instead of TCP, served exactly like
//! an accepted connection, and the `tower::Service` a kube client sends its requests through.
//!
//! Why: with tokio's paused clock (`start_paused`), the runtime auto-advances time whenever it
//! has nothing to run. Over TCP that happens while the kernel moves a request's bytes, so a
//! timeout in the client can fire "before" the server answers. Over a pipe every byte wakes its
//! reader directly: the runtime idles only when every task waits for time, and a test on the
//! paused clock runs the same way every time, in no real time at all.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::header::{AUTHORIZATION, HeaderValue};
use http::{Request, Response};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;

use crate::connection::serve_connection;
use crate::state::Shared;

/// Buffer of each direction of an in-memory connection.
const PIPE_BUFFER: usize = 64 * 1024;

/// A new in-memory connection to the server: the client's end of the pipe.
pub(crate) fn connect(shared: &Arc<Shared>) -> tokio::io::DuplexStream {
    let (client, server) = tokio::io::duplex(PIPE_BUFFER);
    serve_connection(shared.clone(), server);
    client
}

/// Sends requests over in-memory connections, with a bearer token when given. Connections are
/// kept alive and reused, as a TCP client's pool would: a request takes an idle connection, or
/// opens one when every connection is busy (a watch, a slow answer) or gone (a restart).
#[derive(Clone)]
pub(crate) struct InMemory {
    pub(crate) shared: Arc<Shared>,
    pub(crate) token: Option<String>,
    pub(crate) idle: Arc<parking_lot::Mutex<Vec<SendRequest<kube::client::Body>>>>,
}

impl tower::Service<Request<kube::client::Body>> for InMemory {
    type Response = Response<Incoming>;
    type Error = Box<dyn std::error::Error + Send + Sync>;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut req: Request<kube::client::Body>) -> Self::Future {
        let (shared, token, idle) = (self.shared.clone(), self.token.clone(), self.idle.clone());
        Box::pin(async move {
            if let Some(token) = token {
                req.headers_mut().insert(AUTHORIZATION, HeaderValue::from_str(&format!("Bearer {token}"))?);
            }
            // An idle connection that can take a request now; busy and closed ones are dropped
            // from the pool (a busy one goes on serving its response).
            let pooled = {
                let mut idle = idle.lock();
                std::iter::from_fn(|| idle.pop()).find(|s| s.is_ready())
            };
            let mut sender = match pooled {
                Some(s) => s,
                None => {
                    let io = connect(&shared);
                    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io)).await?;
                    // Drives the connection for as long as it lives.
                    tokio::spawn(conn);
                    sender
                }
            };
            let response = sender.send_request(req).await?;
            idle.lock().push(sender);
            Ok(response)
        })
    }
}
