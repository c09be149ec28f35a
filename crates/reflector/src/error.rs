//! The reflector's classified errors.

use std::time::Duration;

use kube::core::Status;

/// Result alias for this crate.
pub type Result<T, E = ReflectorError> = std::result::Result<T, E>;

/// The longest delay a 429's `Retry-After` can impose on the reflector: 60 s, its longest
/// backoff sleep (a 30 s nominal delay with jitter 1.0).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Everything that can go wrong in a list, a watch, or writing to the store, classified so callers
/// (and the watch error handler) can match on what happened.
///
/// Status-carrying variants keep the server's [`Status`] so nothing the server said is lost.
/// Object bodies are never part of an error (they may be Secrets).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReflectorError {
    /// The request got no HTTP answer: connection refused or reset, TLS failure, or the body
    /// stream broke mid-way.
    #[error("transport error: {message}")]
    Transport {
        /// What the transport said.
        message: String,
        /// Whether the connection was refused (client-go retries those with backoff).
        connection_refused: bool,
        /// The underlying error.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// 401: the credentials were rejected.
    #[error("unauthorized (401): {}", .0.message)]
    Unauthorized(Box<Status>),
    /// 403: the user may not list or watch this resource.
    #[error("forbidden (403): {}", .0.message)]
    Forbidden(Box<Status>),
    /// 410 Gone / reason Expired: the resource version (or continue token) is older than the
    /// server's history. A watch that ends so is followed by a relist at the last synced
    /// version; a LIST answered so is retried at once from "".
    #[error("resource version expired (410): {}", .0.message)]
    Expired(Box<Status>),
    /// The requested resource version is newer than the server has (504 with cause
    /// `ResourceVersionTooLarge`). A LIST answered so is retried at once from ""; a watch
    /// refused so is followed by a relist.
    #[error("too large resource version: {}", .0.message)]
    TooLargeResourceVersion(Box<Status>),
    /// 429: throttled. `retry_after` comes from the `Retry-After` header or the Status details.
    #[error("too many requests (429): {}", .status.message)]
    TooManyRequests {
        /// The server's Status.
        status: Box<Status>,
        /// How long the server asked us to wait, if it said.
        retry_after: Option<Duration>,
    },
    /// 500 Internal Server Error.
    #[error("internal server error (500): {}", .0.message)]
    InternalError(Box<Status>),
    /// Any other 5xx.
    #[error("server error ({}): {}", .0.code, .0.message)]
    Server(Box<Status>),
    /// 404: the resource type is not served.
    #[error("not found (404): {}", .0.message)]
    NotFound(Box<Status>),
    /// Any other non-success answer (400, 422, ...).
    #[error("request rejected ({}): {}", .0.code, .0.message)]
    Rejected(Box<Status>),
    /// A response or watch frame could not be decoded (malformed JSON, wrong shape, an object
    /// that is not the watched type, a frame over the size limit).
    #[error("decode error: {message}")]
    Decode {
        /// What could not be decoded, never the payload itself.
        message: String,
    },
    /// A watch frame had an event type other than ADDED, MODIFIED, DELETED, BOOKMARK or ERROR.
    #[error("unknown watch event type {0:?}")]
    UnknownEventType(String),
    /// The server sent an ERROR event whose Status is none of the classified kinds.
    #[error("watch ERROR event: code {}, reason {:?}: {}", .0.code, .0.reason, .0.message)]
    ErrorEvent(Box<Status>),
    /// A watch closed within one second without delivering any event (client-go's
    /// `VeryShortWatchError`): treated as a failure so it goes through backoff.
    #[error("very short watch: the watch closed within 1s without any event")]
    VeryShortWatch,
    /// A watch was still open this long after it was requested: its `timeoutSeconds` plus the
    /// hung-watch grace. The server closes every watch at its timeout, so the connection is no
    /// longer being served (whether or not events came before). The reflector drops it and
    /// watches again from its last synced resource version.
    #[error("watch stream hung: still open {0:?} after it was requested (its timeout plus grace)")]
    WatchHung(Duration),
    /// A watch-list stream ended before the bookmark that marks the end of initial events. The
    /// reflector falls back to LIST + WATCH for that cycle (client-go would open another
    /// watch-list at once, without backoff).
    #[error("watch-list stream ended before the initial-events-end bookmark")]
    WatchListIncomplete,
    /// The server does not do watch-list: it ignored `sendInitialEvents` (a plain bookmark came
    /// before the initial-events-end bookmark; changes before it are applied to the temporary
    /// store, as client-go does). The reflector falls back to LIST + WATCH.
    #[error("watch-list not supported by the server: {0}")]
    WatchListUnsupported(&'static str),
    /// The object or list had no usable resource version.
    #[error("missing resource version in {0}")]
    MissingResourceVersion(&'static str),
    /// The store rejected a write (e.g. an index function failed).
    #[error("store error: {0}")]
    Store(String),
    /// The request could not be built (bad selector, bad parameters).
    #[error("cannot build request: {0}")]
    BuildRequest(String),
}

/// A coarse, copyable classification of [`ReflectorError`], for metrics labels and quick matching.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// [`ReflectorError::Transport`].
    Transport,
    /// [`ReflectorError::Unauthorized`].
    Unauthorized,
    /// [`ReflectorError::Forbidden`].
    Forbidden,
    /// [`ReflectorError::Expired`].
    Expired,
    /// [`ReflectorError::TooLargeResourceVersion`].
    TooLargeResourceVersion,
    /// [`ReflectorError::TooManyRequests`].
    TooManyRequests,
    /// [`ReflectorError::InternalError`].
    InternalError,
    /// [`ReflectorError::Server`].
    Server,
    /// [`ReflectorError::NotFound`].
    NotFound,
    /// [`ReflectorError::Rejected`].
    Rejected,
    /// [`ReflectorError::Decode`].
    Decode,
    /// [`ReflectorError::UnknownEventType`].
    UnknownEventType,
    /// [`ReflectorError::ErrorEvent`].
    ErrorEvent,
    /// [`ReflectorError::VeryShortWatch`].
    VeryShortWatch,
    /// [`ReflectorError::WatchHung`].
    WatchHung,
    /// [`ReflectorError::WatchListIncomplete`].
    WatchListIncomplete,
    /// [`ReflectorError::WatchListUnsupported`].
    WatchListUnsupported,
    /// [`ReflectorError::MissingResourceVersion`].
    MissingResourceVersion,
    /// [`ReflectorError::Store`].
    Store,
    /// [`ReflectorError::BuildRequest`].
    BuildRequest,
}

impl ErrorKind {
    /// A short snake_case name, used as a metrics label and in logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Transport => "transport",
            Self::Unauthorized => "unauthorized",
            Self::Forbidden => "forbidden",
            Self::Expired => "expired",
            Self::TooLargeResourceVersion => "too_large_resource_version",
            Self::TooManyRequests => "too_many_requests",
            Self::InternalError => "internal_error",
            Self::Server => "server_error",
            Self::NotFound => "not_found",
            Self::Rejected => "rejected",
            Self::Decode => "decode",
            Self::UnknownEventType => "unknown_event_type",
            Self::ErrorEvent => "error_event",
            Self::VeryShortWatch => "very_short_watch",
            Self::WatchHung => "watch_hung",
            Self::WatchListIncomplete => "watch_list_incomplete",
            Self::WatchListUnsupported => "watch_list_unsupported",
            Self::MissingResourceVersion => "missing_resource_version",
            Self::Store => "store",
            Self::BuildRequest => "build_request",
        }
    }
}

impl ReflectorError {
    /// The coarse classification of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Transport { .. } => ErrorKind::Transport,
            Self::Unauthorized(_) => ErrorKind::Unauthorized,
            Self::Forbidden(_) => ErrorKind::Forbidden,
            Self::Expired(_) => ErrorKind::Expired,
            Self::TooLargeResourceVersion(_) => ErrorKind::TooLargeResourceVersion,
            Self::TooManyRequests { .. } => ErrorKind::TooManyRequests,
            Self::InternalError(_) => ErrorKind::InternalError,
            Self::Server(_) => ErrorKind::Server,
            Self::NotFound(_) => ErrorKind::NotFound,
            Self::Rejected(_) => ErrorKind::Rejected,
            Self::Decode { .. } => ErrorKind::Decode,
            Self::UnknownEventType(_) => ErrorKind::UnknownEventType,
            Self::ErrorEvent(_) => ErrorKind::ErrorEvent,
            Self::VeryShortWatch => ErrorKind::VeryShortWatch,
            Self::WatchHung(_) => ErrorKind::WatchHung,
            Self::WatchListIncomplete => ErrorKind::WatchListIncomplete,
            Self::WatchListUnsupported(_) => ErrorKind::WatchListUnsupported,
            Self::MissingResourceVersion(_) => ErrorKind::MissingResourceVersion,
            Self::Store(_) => ErrorKind::Store,
            Self::BuildRequest(_) => ErrorKind::BuildRequest,
        }
    }

    /// client-go's `isExpiredError`: reason Expired or Gone, or code 410.
    pub fn is_expired(&self) -> bool {
        matches!(self, Self::Expired(_))
    }

    /// apimachinery's `IsResourceExpired`: reason `Expired` only (not `Gone`, not a bare 410), the
    /// test client-go's pager applies before its full-list fallback.
    pub(crate) fn is_resource_expired(&self) -> bool {
        matches!(self, Self::Expired(s) if s.reason == "Expired")
    }

    /// client-go's `isTooLargeResourceVersionError`.
    pub fn is_too_large_resource_version(&self) -> bool {
        matches!(self, Self::TooLargeResourceVersion(_))
    }

    /// client-go's `apierrors.IsInternalError`: reason `InternalError`, or a 500 whose reason is
    /// none of the known ones. A 500 with another known reason (such as `StoreReadError`, sent
    /// when a corrupt object was deleted unsafely) is not one: retrying the watch would skip the
    /// deletion, so the reflector relists instead.
    pub fn is_internal_error(&self) -> bool {
        match self {
            Self::InternalError(s) => {
                s.reason == "InternalError" || !KNOWN_REASONS.contains(&s.reason.as_str())
            }
            Self::ErrorEvent(s) | Self::Server(s) | Self::Rejected(s) => s.reason == "InternalError",
            _ => false,
        }
    }

    /// The delay a 429 asked for, if any, capped at [`MAX_RETRY_AFTER`]: a server (or a proxy)
    /// asking for hours must not park the reflector that long.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::TooManyRequests { retry_after, .. } => retry_after.map(|d| d.min(MAX_RETRY_AFTER)),
            _ => None,
        }
    }

    /// client-go's `isWatchErrorRetriable`: a refused connection or a 429 is retried with backoff
    /// on the same resource version instead of relisting.
    pub fn is_watch_retriable(&self) -> bool {
        matches!(self, Self::Transport { connection_refused: true, .. } | Self::TooManyRequests { .. })
    }

    /// Classifies a Status the server returned, either as the body of an error response (with the
    /// HTTP code and any `Retry-After` header) or inside a watch ERROR event (`http_code` None).
    pub fn from_status(status: Status, http_code: Option<u16>, retry_after: Option<Duration>) -> Self {
        let mut status = status;
        if status.code == 0
            && let Some(code) = http_code
        {
            status.code = code;
        }
        let status = Box::new(status);
        if is_too_large_resource_version(&status) {
            return Self::TooLargeResourceVersion(status);
        }
        if status.reason == "Expired" || status.reason == "Gone" || status.code == 410 {
            return Self::Expired(status);
        }
        match status.code {
            401 => Self::Unauthorized(status),
            403 => Self::Forbidden(status),
            404 => Self::NotFound(status),
            429 => {
                let retry_after = retry_after.or_else(|| {
                    status
                        .details
                        .as_ref()
                        .map(|d| d.retry_after_seconds)
                        .filter(|s| *s > 0)
                        .map(|s| Duration::from_secs(u64::from(s)))
                });
                Self::TooManyRequests { status, retry_after }
            }
            500 => Self::InternalError(status),
            501..=599 => Self::Server(status),
            400..=499 => Self::Rejected(status),
            // An ERROR event (or an error body) with no usable code: keep it whole.
            _ => Self::ErrorEvent(status),
        }
    }

    pub(crate) fn transport(err: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::transport_boxed(Box::new(err))
    }

    pub(crate) fn transport_boxed(err: Box<dyn std::error::Error + Send + Sync>) -> Self {
        let connection_refused = chain_has_io_kind(&*err, std::io::ErrorKind::ConnectionRefused);
        Self::Transport { message: err.to_string(), connection_refused, source: Some(err) }
    }

    pub(crate) fn decode(message: impl Into<String>) -> Self {
        Self::Decode { message: message.into() }
    }
}

/// client-go's `isTooLargeResourceVersionError`: a cause of type `ResourceVersionTooLarge`
/// (1.18.6 and later), whatever the code; otherwise only a timeout (`apierrors.IsTimeout`) that has
/// details and says "Too large resource version" in a cause's message (exactly: 1.17.0 to 1.18.5)
/// or in its own message (before 1.17.0). The same words in any other Status are not this error.
fn is_too_large_resource_version(status: &Status) -> bool {
    const MESSAGE: &str = "Too large resource version";
    let Some(details) = &status.details else {
        return false;
    };
    if details.causes.iter().any(|c| c.reason == "ResourceVersionTooLarge") {
        return true;
    }
    let timeout = status.reason == "Timeout"
        || (!KNOWN_REASONS.contains(&status.reason.as_str()) && status.code == 504);
    timeout && (details.causes.iter().any(|c| c.message == MESSAGE) || status.message.contains(MESSAGE))
}

/// apimachinery's `knownReasons`: the Status reasons with a meaning of their own. Its
/// `StatusReasonUnknown` is the empty reason, and is not one of them.
const KNOWN_REASONS: &[&str] = &[
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "AlreadyExists",
    "Conflict",
    "Gone",
    "Invalid",
    "ServerTimeout",
    "StoreReadError",
    "Timeout",
    "TooManyRequests",
    "BadRequest",
    "MethodNotAllowed",
    "NotAcceptable",
    "RequestEntityTooLarge",
    "UnsupportedMediaType",
    "InternalError",
    "Expired",
    "ServiceUnavailable",
];

fn chain_has_io_kind(err: &(dyn std::error::Error + 'static), kind: std::io::ErrorKind) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cur {
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && io.kind() == kind
        {
            return true;
        }
        if e.to_string().to_ascii_lowercase().contains("connection refused") {
            return true;
        }
        cur = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16, reason: &str, message: &str) -> Status {
        let mut s = Status::failure(message, reason);
        s.code = code;
        s
    }

    #[test]
    fn classifies_like_client_go() {
        assert!(ReflectorError::from_status(status(410, "Expired", "too old"), None, None).is_expired());
        assert!(ReflectorError::from_status(status(0, "Gone", ""), None, None).is_expired());
        assert!(ReflectorError::from_status(status(410, "", ""), None, None).is_expired());
        let mut too_large = status(504, "Timeout", "Too large resource version: 10, current: 5");
        too_large.details = Some(kube::core::response::StatusDetails {
            name: String::new(),
            group: String::new(),
            kind: String::new(),
            uid: String::new(),
            causes: vec![kube::core::response::StatusCause {
                reason: "ResourceVersionTooLarge".into(),
                message: "Too large resource version".into(),
                field: String::new(),
            }],
            retry_after_seconds: 0,
        });
        assert!(ReflectorError::from_status(too_large, None, None).is_too_large_resource_version());
        assert_eq!(
            ReflectorError::from_status(status(403, "Forbidden", ""), None, None).kind(),
            ErrorKind::Forbidden
        );
        assert_eq!(
            ReflectorError::from_status(status(401, "", ""), None, None).kind(),
            ErrorKind::Unauthorized
        );
        assert_eq!(
            ReflectorError::from_status(status(500, "", ""), None, None).kind(),
            ErrorKind::InternalError
        );
        assert!(
            ReflectorError::from_status(status(500, "InternalError", ""), None, None).is_internal_error()
        );
        assert!(ReflectorError::from_status(status(500, "", ""), None, None).is_internal_error());
        assert!(
            !ReflectorError::from_status(status(500, "StoreReadError", ""), None, None).is_internal_error()
        );
        assert!(
            !ReflectorError::from_status(status(503, "ServiceUnavailable", ""), None, None)
                .is_internal_error()
        );
        assert_eq!(ReflectorError::from_status(status(503, "", ""), None, None).kind(), ErrorKind::Server);
        assert_eq!(ReflectorError::from_status(status(422, "", ""), None, None).kind(), ErrorKind::Rejected);
        assert_eq!(ReflectorError::from_status(status(0, "", ""), None, None).kind(), ErrorKind::ErrorEvent);
        // An error body without a code takes the HTTP status.
        assert_eq!(
            ReflectorError::from_status(status(0, "", ""), Some(404), None).kind(),
            ErrorKind::NotFound
        );
        // apimachinery's `StatusReasonUnknown` is "", so a reason spelled "Unknown" is not a
        // known one: a 500 with it is an InternalError (`IsInternalError`).
        assert!(ReflectorError::from_status(status(500, "Unknown", ""), None, None).is_internal_error());
    }

    /// client-go's `isTooLargeResourceVersionError`, case by case.
    #[test]
    fn too_large_resource_version_like_client_go() {
        use kube::core::response::{StatusCause, StatusDetails};
        let with = |code: u16, reason: &str, message: &str, cause: Option<(&str, &str)>| {
            let mut s = status(code, reason, message);
            s.details = Some(StatusDetails {
                name: String::new(),
                group: String::new(),
                kind: String::new(),
                uid: String::new(),
                causes: cause
                    .map(|(r, m)| StatusCause { reason: r.into(), message: m.into(), field: String::new() })
                    .into_iter()
                    .collect(),
                retry_after_seconds: 1,
            });
            ReflectorError::from_status(s, None, None).is_too_large_resource_version()
        };
        // The cause type says it whatever the code (`HasStatusCause`).
        assert!(with(504, "Timeout", "", Some(("ResourceVersionTooLarge", ""))));
        assert!(with(500, "InternalError", "", Some(("ResourceVersionTooLarge", ""))));
        // A timeout's cause message, exactly; or a timeout's own message.
        assert!(with(504, "Timeout", "Timeout: x", Some(("", "Too large resource version"))));
        assert!(with(504, "Timeout", "Timeout: Too large resource version", None));
        // An unknown reason with code 504 is a timeout too.
        assert!(with(504, "", "Too large resource version: 9, current: 3", None));
        // Not a timeout, or another wording: not this error.
        assert!(!with(500, "InternalError", "Too large resource version", None));
        assert!(!with(410, "Expired", "Too large resource version", None));
        assert!(!with(504, "Timeout", "too large resource version", None));
        assert!(!with(504, "Timeout", "x", Some(("", "too large resource version: 9"))));
        // A timeout without details is not checked further.
        let no_details = status(504, "Timeout", "Timeout: Too large resource version");
        assert!(!ReflectorError::from_status(no_details, None, None).is_too_large_resource_version());
    }

    #[test]
    fn retry_after_is_capped() {
        let e = ReflectorError::from_status(
            status(429, "TooManyRequests", ""),
            None,
            Some(Duration::from_secs(999_999_999)),
        );
        assert_eq!(e.retry_after(), Some(MAX_RETRY_AFTER));
    }

    #[test]
    fn too_many_requests_carries_retry_after() {
        let e = ReflectorError::from_status(
            status(429, "TooManyRequests", ""),
            None,
            Some(Duration::from_secs(3)),
        );
        assert_eq!(e.retry_after(), Some(Duration::from_secs(3)));
        assert!(e.is_watch_retriable());
        let refused =
            ReflectorError::transport(std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "no"));
        assert!(refused.is_watch_retriable());
        let reset =
            ReflectorError::transport(std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset"));
        assert!(!reset.is_watch_retriable());
    }
}
