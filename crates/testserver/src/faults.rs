//! What faults can be injected (failing requests, broken watch streams, servers without
//! watch-list, an unreachable server, slow responses) and the pending set the server consumes;
//! [`Faults`](crate::Faults) is the handle that sets them.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::sync::watch;

/// What a request asks the server to do, as RBAC names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verb {
    /// GET of one object.
    Get,
    /// GET of a collection.
    List,
    /// GET of a collection with `watch=true`.
    Watch,
    /// POST.
    Create,
    /// PUT.
    Update,
    /// PATCH.
    Patch,
    /// DELETE of one object.
    Delete,
    /// DELETE of a collection.
    DeleteCollection,
    /// Anything else (discovery, `/version`, unknown paths).
    Other,
}

impl Verb {
    /// The RBAC verb name (`get`, `list`, `watch`, ...).
    ///
    /// ```
    /// use kcache_testserver::Verb;
    ///
    /// assert_eq!(Verb::DeleteCollection.as_str(), "deletecollection");
    /// assert_eq!(Verb::Watch.as_str(), "watch");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
            Verb::Other => "other",
        }
    }
}

/// What the body of a [`RequestFault`]'s response is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FaultBody {
    /// A JSON `metav1.Status` (`application/json`), as the API handlers answer errors
    /// (responsewriters.ErrorNegotiated); `Retry-After` also goes into `details.retryAfterSeconds`.
    #[default]
    Status,
    /// The fault's `message` and a newline as `text/plain; charset=utf-8` with
    /// `X-Content-Type-Options: nosniff`, as Go's `http.Error` writes it: what the filters in
    /// front of the API handlers answer, such as API Priority and Fairness's 429. `reason` is not
    /// sent; `Retry-After` is only a header.
    PlainText,
}

/// A failure to answer matching requests with, instead of serving them.
///
/// # Examples
///
/// ```
/// use kcache_testserver::{FaultBody, RequestFault, Verb};
///
/// // The next watch of configmaps gets a 429 with `Retry-After: 2`.
/// let fault = RequestFault::too_many_requests(2).verb(Verb::Watch).path_contains("configmaps");
/// assert_eq!((fault.code, fault.body), (429, FaultBody::PlainText));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestFault {
    /// HTTP status code (and `Status.code`).
    pub code: u16,
    /// `Status.reason`.
    pub reason: String,
    /// `Status.message`, or the whole text of a [`FaultBody::PlainText`] body.
    pub message: String,
    /// `Retry-After` header (and, for a [`FaultBody::Status`], `details.retryAfterSeconds`), in
    /// seconds.
    pub retry_after: Option<u64>,
    /// The body's form: a JSON Status (the default) or plain text.
    pub body: FaultBody,
    /// Only requests with this verb match.
    pub verb: Option<Verb>,
    /// Only requests whose path contains this match.
    pub path_contains: Option<String>,
    /// Only requests authenticated as this user match (see [`Builder::token`](crate::Builder::token)).
    pub user: Option<String>,
    /// The HTTP status to answer with, when not `code` (see [`answered_with`](Self::answered_with)).
    pub http_code: Option<u16>,
}

impl RequestFault {
    /// Any Status.
    pub fn status(code: u16, reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code,
            reason: reason.into(),
            message: message.into(),
            retry_after: None,
            body: FaultBody::Status,
            verb: None,
            path_contains: None,
            user: None,
            http_code: None,
        }
    }

    /// 409 Conflict as kube-apiserver answers an update whose `metadata.resourceVersion` is not
    /// the stored one (the storage layer's `OptimisticLockErrorMsg`): a lost optimistic-concurrency
    /// race. `qualified_resource` is the resource and group, such as
    /// `leases.coordination.k8s.io`; `name` the object's name.
    ///
    /// ```
    /// use kcache_testserver::{RequestFault, Verb};
    ///
    /// // A conflict storm: the next 50 lease updates lose their race.
    /// let storm = RequestFault::conflict("leases.coordination.k8s.io", "my-lock").verb(Verb::Update);
    /// assert_eq!(
    ///     storm.message,
    ///     "Operation cannot be fulfilled on leases.coordination.k8s.io \"my-lock\": the object has been \
    ///      modified; please apply your changes to the latest version and try again"
    /// );
    /// ```
    pub fn conflict(qualified_resource: &str, name: &str) -> Self {
        Self::status(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {qualified_resource} \"{name}\": the object has been modified; \
                 please apply your changes to the latest version and try again"
            ),
        )
    }

    /// 500 InternalError, as a failing storage backend produces.
    pub fn internal_error() -> Self {
        Self::status(500, "InternalError", "Internal error occurred: injected fault")
    }

    /// 429 as API Priority and Fairness rejects a request (server/filters/priority-and-fairness.go
    /// `tooManyRequests`): a `Retry-After` header and the plain-text body
    /// `Too many requests, please try again later.` — no Status, so the delay is only in the
    /// header.
    pub fn too_many_requests(retry_after_secs: u64) -> Self {
        let mut f = Self::status(429, "TooManyRequests", "Too many requests, please try again later.");
        f.retry_after = Some(retry_after_secs);
        f.body = FaultBody::PlainText;
        f
    }

    /// 429 TooManyRequests as a JSON Status with `details.retryAfterSeconds` and the
    /// `Retry-After` header: what a watch cache that is still (re)initializing answers lists and
    /// watches (the cacher's `errors.NewTooManyRequests`, message `storage is (re)initializing`).
    pub fn too_many_requests_status(retry_after_secs: u64) -> Self {
        let mut f = Self::status(429, "TooManyRequests", "storage is (re)initializing");
        f.retry_after = Some(retry_after_secs);
        f
    }

    /// Sends the body as plain text instead of a JSON Status (see [`FaultBody::PlainText`]).
    pub fn plain_text(mut self) -> Self {
        self.body = FaultBody::PlainText;
        self
    }

    /// 401 Unauthorized.
    pub fn unauthorized() -> Self {
        Self::status(401, "Unauthorized", "Unauthorized")
    }

    /// 403 Forbidden (the message names the request like RBAC's denial does).
    pub fn forbidden() -> Self {
        Self::status(403, "Forbidden", "")
    }

    /// 410 Expired, as a list at a compacted resourceVersion gets.
    pub fn gone() -> Self {
        Self::status(410, "Expired", "The resourceVersion for the provided list is too old.")
    }

    /// Restricts the fault to one verb.
    pub fn verb(mut self, verb: Verb) -> Self {
        self.verb = Some(verb);
        self
    }

    /// Sends the Status with HTTP status `http_code` instead of its own `code`: `200` gives a
    /// failure Status in a success response, as some aggregated API servers and proxies send.
    ///
    /// ```
    /// use kcache_testserver::{RequestFault, Verb};
    ///
    /// let fault = RequestFault::gone().verb(Verb::List).answered_with(200);
    /// assert_eq!((fault.code, fault.http_code), (410, Some(200)));
    /// ```
    pub fn answered_with(mut self, http_code: u16) -> Self {
        self.http_code = Some(http_code);
        self
    }

    /// Restricts the fault to paths containing `s`.
    pub fn path_contains(mut self, s: impl Into<String>) -> Self {
        self.path_contains = Some(s.into());
        self
    }

    /// Restricts the fault to requests authenticated as `user`.
    pub fn user(mut self, user: impl Into<String>) -> Self {
        self.user = Some(user.into());
        self
    }

    pub(crate) fn matches(&self, verb: Verb, path: &str, user: Option<&str>) -> bool {
        let m = RequestMatch {
            verb: self.verb,
            path_contains: self.path_contains.clone(),
            user: self.user.clone(),
        };
        m.matches(verb, path, user)
    }
}

/// Which requests a fault applies to: every request unless narrowed by verb, path or user.
///
/// # Examples
///
/// ```
/// use kcache_testserver::{RequestMatch, Verb};
///
/// // The lease writes of one client (a token's user, see `Builder::token`).
/// let m = RequestMatch::all().user("candidate-a").path_contains("/leases/").verb(Verb::Update);
/// assert_eq!(m.user.as_deref(), Some("candidate-a"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestMatch {
    /// Only requests with this verb match.
    pub verb: Option<Verb>,
    /// Only requests whose path contains this match.
    pub path_contains: Option<String>,
    /// Only requests authenticated as this user match.
    pub user: Option<String>,
}

impl RequestMatch {
    /// Every request.
    pub fn all() -> Self {
        Self::default()
    }

    /// Only requests with this verb.
    pub fn verb(mut self, verb: Verb) -> Self {
        self.verb = Some(verb);
        self
    }

    /// Only requests whose path contains `s`.
    pub fn path_contains(mut self, s: impl Into<String>) -> Self {
        self.path_contains = Some(s.into());
        self
    }

    /// Only requests authenticated as `user`.
    pub fn user(mut self, user: impl Into<String>) -> Self {
        self.user = Some(user.into());
        self
    }

    pub(crate) fn matches(&self, verb: Verb, path: &str, user: Option<&str>) -> bool {
        self.verb.is_none_or(|v| v == verb)
            && self.path_contains.as_deref().is_none_or(|p| path.contains(p))
            && self.user.as_deref().is_none_or(|u| user == Some(u))
    }
}

/// A fault that lasts until removed: [`Faults::unreachable`](crate::Faults::unreachable),
/// [`Faults::slow_responses`](crate::Faults::slow_responses) and
/// [`Faults::fail_requests_until_removed`](crate::Faults::fail_requests_until_removed) return one, and
/// [`Faults::remove`](crate::Faults::remove) ends it (for request faults: whatever is left of
/// their count).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FaultId(pub(crate) u64);

/// A lasting fault.
#[derive(Debug, Clone)]
pub(crate) enum Lasting {
    /// Matching requests get no answer until the fault is removed; then their connection is
    /// dropped.
    Unreachable(RequestMatch),
    /// Matching requests are answered this much later than they were served.
    Slow(RequestMatch, Duration),
}

/// A way to break a watch stream. Counts ("after N events") are of object events (ADDED,
/// MODIFIED, DELETED) sent on that stream, bookmarks excluded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchFault {
    /// End the stream cleanly (terminating chunk) after this many events; 0 ends it at once with
    /// no events (a very short watch).
    CloseAfter(usize),
    /// After `after` events, send one line that is not JSON, then carry on.
    MalformedFrame {
        /// Events before the bad line.
        after: usize,
    },
    /// After `after` events, send one frame of type `"SURPRISE"` (with a valid object), then
    /// carry on.
    UnknownEventType {
        /// Events before the odd frame.
        after: usize,
    },
    /// After `after` events, send an ERROR event with this Status, then end the stream.
    Error {
        /// Events before the error.
        after: usize,
        /// `Status.code`, e.g. 500.
        code: u16,
        /// `Status.reason`, e.g. `InternalError`.
        reason: String,
        /// `Status.message`.
        message: String,
    },
    /// After `after` events, send `bytes` exactly as given, then carry on: any bad input a test
    /// needs (truncated JSON, objects of the wrong kind, odd ERROR Status, bookmarks without a
    /// resourceVersion, huge frames). No newline is added: end `bytes` with one to complete the
    /// frame, or leave it out and add [`WatchFault::CloseAfter`] with the same count to end the
    /// stream mid-frame. Several raw frames may be queued for one watch.
    RawFrame {
        /// Events before the bytes.
        after: usize,
        /// What to send.
        bytes: Vec<u8>,
    },
    /// Send the response headers, then nothing: no bytes and no close, until the client gives
    /// up (or the server restarts or drops).
    Hang,
    /// Send at most this many events per second.
    Slow {
        /// Rate limit.
        events_per_sec: u32,
    },
}

/// How the server treats watch-list requests (`sendInitialEvents`), to imitate older servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WatchListSupport {
    /// Kubernetes 1.34 and later (WatchList on): watch-list served; a plain watch from `""`/`"0"`
    /// is defaulted to `sendInitialEvents=true` (`SetListOptionsDefaults`), so with
    /// `allowWatchBookmarks` it also ends its initial events with the annotated bookmark.
    #[default]
    Enabled,
    /// Kubernetes 1.27 to 1.33 (WatchList gate off by default): `sendInitialEvents` is rejected
    /// with 422 "sendInitialEvents is forbidden for watch unless the WatchList feature gate is
    /// enabled"; no defaulting.
    GateDisabled,
    /// Kubernetes 1.19 to 1.26: `sendInitialEvents` is an unknown parameter (ignored) but
    /// `resourceVersionMatch` on a watch is rejected with 422 "resourceVersionMatch is forbidden
    /// for watch".
    Legacy,
    /// Before 1.19: both parameters are unknown and ignored; the request is served as a plain
    /// watch (synthetic ADDED events from `""`/`"0"`, and no initial-events-end bookmark).
    Ignored,
}

/// Mutable fault settings.
#[derive(Debug)]
pub(crate) struct FaultState {
    /// Request faults with how many more requests each may fail, by id (for
    /// [`Faults::remove`](crate::Faults::remove)).
    pub(crate) requests: Vec<(FaultId, RequestFault, usize)>,
    /// One-shot watch faults, each applied to one future watch, in order.
    pub(crate) watch_once: VecDeque<WatchFault>,
    /// Watch faults applied to every future watch.
    pub(crate) watch_always: Vec<WatchFault>,
    /// Watch-list behaviour.
    pub(crate) watch_list: WatchListSupport,
    /// Faults that last until removed, by id.
    pub(crate) lasting: Vec<(FaultId, Lasting)>,
    /// The id of the next lasting fault.
    pub(crate) next_id: u64,
    /// Bumped whenever a lasting fault is removed: requests held by an unreachable fault wait on
    /// it to learn they may go.
    pub(crate) removed: watch::Sender<u64>,
}

impl Default for FaultState {
    fn default() -> Self {
        Self {
            requests: Vec::new(),
            watch_once: VecDeque::new(),
            watch_always: Vec::new(),
            watch_list: WatchListSupport::default(),
            lasting: Vec::new(),
            next_id: 0,
            removed: watch::channel(0).0,
        }
    }
}

impl FaultState {
    /// A new fault id.
    fn next_fault_id(&mut self) -> FaultId {
        let id = FaultId(self.next_id);
        self.next_id += 1;
        id
    }

    /// Adds a lasting fault.
    pub(crate) fn add_lasting(&mut self, fault: Lasting) -> FaultId {
        let id = self.next_fault_id();
        self.lasting.push((id, fault));
        id
    }

    /// Adds a request fault for the next `count` matching requests.
    pub(crate) fn add_request_fault(&mut self, fault: RequestFault, count: usize) -> FaultId {
        let id = self.next_fault_id();
        if count > 0 {
            self.requests.push((id, fault, count));
        }
        id
    }

    /// Removes lasting faults and what is left of request faults (all of them with `None`), and
    /// releases the requests they held.
    pub(crate) fn remove_lasting(&mut self, id: Option<FaultId>) {
        self.lasting.retain(|(i, _)| id.is_some_and(|id| id != *i));
        self.requests.retain(|(i, _, _)| id.is_some_and(|id| id != *i));
        self.removed.send_modify(|n| *n += 1);
    }

    /// The unreachable fault a request falls under, if any.
    pub(crate) fn unreachable(&self, verb: Verb, path: &str, user: Option<&str>) -> Option<FaultId> {
        self.lasting.iter().find_map(|(id, f)| match f {
            Lasting::Unreachable(m) if m.matches(verb, path, user) => Some(*id),
            _ => None,
        })
    }

    /// How much later than served a request is answered: the sum of the slow faults it falls
    /// under.
    pub(crate) fn delay(&self, verb: Verb, path: &str, user: Option<&str>) -> Duration {
        self.lasting
            .iter()
            .filter_map(|(_, f)| match f {
                Lasting::Slow(m, d) if m.matches(verb, path, user) => Some(*d),
                _ => None,
            })
            .sum()
    }

    /// Whether lasting fault `id` is still in force.
    pub(crate) fn has_lasting(&self, id: FaultId) -> bool {
        self.lasting.iter().any(|(i, _)| *i == id)
    }

    /// Consumes one matching request fault.
    pub(crate) fn take_request_fault(
        &mut self,
        verb: Verb,
        path: &str,
        user: Option<&str>,
    ) -> Option<RequestFault> {
        let idx = self.requests.iter().position(|(_, f, n)| *n > 0 && f.matches(verb, path, user))?;
        let (_, fault, left) = &mut self.requests[idx];
        *left -= 1;
        let fault = fault.clone();
        self.requests.retain(|(_, _, n)| *n > 0);
        Some(fault)
    }

    /// The faults for a new watch.
    pub(crate) fn take_watch_faults(&mut self) -> Vec<WatchFault> {
        let mut v = self.watch_always.clone();
        if let Some(f) = self.watch_once.pop_front() {
            v.push(f);
        }
        v
    }
}
