//! The request log: what clients asked for and what they got.

use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use parking_lot::Mutex;

use crate::faults::Verb;
use crate::request::Query;

/// One served request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRecord {
    /// HTTP method.
    pub method: http::Method,
    /// URL path.
    pub path: String,
    /// Raw query string (undecoded; see [`RequestRecord::query_param`]).
    pub query: String,
    /// The verb the request was classified as.
    pub verb: Verb,
    /// Whether it was a watch (the response is then a stream; `status` is the status of its
    /// headers).
    pub watch: bool,
    /// Which TCP connection carried it: connections are numbered from 0 in accept order, so
    /// tests can count connections (a watch-list sync needs one, LIST + WATCH at least one
    /// request more).
    pub connection: u64,
    /// HTTP status code of the response; 0 for a request that got none because
    /// [`Faults::unreachable`](crate::Faults::unreachable) held it until its connection was
    /// dropped (one whose client hung up first is not logged).
    pub status: u16,
    /// The response's `Content-Type` (`application/vnd.kubernetes.protobuf` when it was
    /// protobuf; empty for a request that got no answer).
    pub content_type: String,
    /// The user the request was served as, when [`Builder::token`](crate::Builder::token)
    /// turned authentication on (`system:anonymous` for anonymous requests, with
    /// [`Builder::anonymous_auth`](crate::Builder::anonymous_auth)); `None` without
    /// authentication and for requests refused with 401 or 403.
    pub user: Option<String>,
    /// When the request arrived, on the server's clock ([`Builder::clock`](crate::Builder::clock);
    /// tokio's by default, so it follows a paused test clock).
    pub at: tokio::time::Instant,
    /// When the request arrived, on the wall clock.
    pub time: SystemTime,
}

impl RequestRecord {
    /// A decoded query parameter.
    pub fn query_param(&self, key: &str) -> Option<String> {
        Query::parse(&self.query).get(key).map(str::to_string)
    }
}

/// Read access to the request log. Cheap to clone.
///
/// # Examples
///
/// A request is recorded once its answer is ready, just before it is sent. A write's watch
/// event can therefore reach a watcher before the write's record is here: to read the record of
/// a write, wait until its client has the answer, not until a watcher has seen the change.
///
/// ```no_run
/// # async fn demo() {
/// use kcache_testserver::{TestServer, Verb};
///
/// let server = TestServer::start().await;
/// // ... drive a client ...
/// let watches = server.request_log().filter(|r| r.verb == Verb::Watch);
/// assert!(watches.iter().all(|r| r.status == 200));
/// # }
/// ```
#[derive(Clone)]
pub struct RequestLog {
    /// The server's records, oldest first.
    pub(crate) records: Arc<Mutex<Vec<RequestRecord>>>,
}

impl fmt::Debug for RequestLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestLog").field("len", &self.records.lock().len()).finish()
    }
}

impl RequestLog {
    /// Every request so far, oldest first.
    pub fn entries(&self) -> Vec<RequestRecord> {
        self.records.lock().clone()
    }

    /// Requests that satisfy `pred`.
    pub fn filter(&self, pred: impl Fn(&RequestRecord) -> bool) -> Vec<RequestRecord> {
        self.records.lock().iter().filter(|r| pred(r)).cloned().collect()
    }

    /// How many requests had this verb.
    pub fn count(&self, verb: Verb) -> usize {
        self.records.lock().iter().filter(|r| r.verb == verb).count()
    }

    /// Forgets everything logged so far.
    pub fn clear(&self) {
        self.records.lock().clear();
    }
}
