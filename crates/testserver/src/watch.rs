//! Watch streams: synthetic ADDED events, replay from the history, watch-list with its
//! initial-events-end bookmark, periodic bookmarks, selectors, timeouts and injected faults.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Response, header};
use kcache_protobuf::MessageType;
use kcache_shard_selector::ShardSelector;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::faults::{WatchFault, WatchListSupport};
use crate::media::Output;
use crate::request::{Query, Route};
use crate::response::{ResBody, partial_object_metadata, protobuf_object, protobuf_status, stored_protobuf};
use crate::selector::{FieldSelector, LabelSelector};
use crate::state::Shared;
use crate::status::ApiError;
use crate::store::{EventType, ResourceId, StoredObject};
use crate::validation::{forbidden, in_shard, invalid_list_options, parse_rv, selectors, shard_selector};

/// Default `timeoutSeconds` when the client gives none (kube-apiserver picks a random value
/// between `--min-request-timeout` and twice that; this is the lower end).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);
/// Flush the frame buffer when it grows past this.
const FLUSH_AT: usize = 64 * 1024;
/// Events taken from the history per lock acquisition.
const BATCH: usize = 4096;

/// What a watch shows: one resource, optionally one namespace, and selectors.
struct Filter {
    res: ResourceId,
    namespace: Option<String>,
    name: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
    /// The shard selector (the cacher's `filterWithAttrsAndPrefixFunction`).
    shard: Option<ShardSelector>,
}

impl Filter {
    fn matches(&self, o: &StoredObject) -> bool {
        self.namespace.as_deref().is_none_or(|ns| ns == o.namespace)
            && self.name.as_deref().is_none_or(|n| n == o.name)
            && in_shard(self.shard.as_ref(), o)
            && self.labels.matches(&o.labels)
            && self.fields.matches(o)
    }
}

/// The faults of one watch, resolved at open time.
#[derive(Default)]
struct Plan {
    close_after: Option<usize>,
    malformed_after: Option<usize>,
    unknown_after: Option<usize>,
    error: Option<(usize, ApiError)>,
    /// Raw bytes to send after so many events, in order.
    raw: Vec<(usize, Vec<u8>)>,
    hang: bool,
    rate: Option<u32>,
}

impl Plan {
    fn from_faults(faults: Vec<WatchFault>) -> Self {
        let mut p = Plan::default();
        for f in faults {
            match f {
                WatchFault::CloseAfter(n) => p.close_after = Some(p.close_after.map_or(n, |m| m.min(n))),
                WatchFault::MalformedFrame { after } => p.malformed_after = Some(after),
                WatchFault::UnknownEventType { after } => p.unknown_after = Some(after),
                WatchFault::Error { after, code, reason, message } => {
                    p.error = Some((after, ApiError::new(code, &reason, message, None)));
                }
                WatchFault::RawFrame { after, bytes } => p.raw.push((after, bytes)),
                WatchFault::Hang => p.hang = true,
                WatchFault::Slow { events_per_sec } => p.rate = Some(events_per_sec.max(1)),
            }
        }
        p
    }
}

/// Opens a watch: validates the options, takes the initial state, and spawns the stream task.
pub(crate) fn watch(
    shared: &Arc<Shared>,
    generation: CancellationToken,
    route: &Route,
    query: &Query,
    output: Output,
) -> Result<Response<ResBody>, ApiError> {
    // Each event's object is converted as `Accept` asked (the watch's embedded encoder). One
    // object cannot become a `PartialObjectMetadataList`: kube-apiserver logs the failed
    // conversion, then fails to encode the object itself with the meta.k8s.io encoder, and ends
    // the stream (200, no frames) at the first event or bookmark it would send.
    let (partial, unencodable) = match output {
        Output::Json | Output::Protobuf(_) => (None, false),
        Output::Partial { list, api_version, .. } => (Some(api_version), list),
    };
    let protobuf = output.protobuf();
    let (labels, fields) = selectors(query, &route.def)?;
    let rv = query.get("resourceVersion").unwrap_or_default().to_string();
    let mut rv_match = query.get("resourceVersionMatch").unwrap_or_default().to_string();
    let mut send_initial = query.flag("sendInitialEvents")?;
    let bookmarks = query.flag("allowWatchBookmarks")?.unwrap_or(false);
    let cont = query.get("continue").unwrap_or_default();
    let legacy_rv = rv.is_empty() || rv == "0";
    let support = shared.faults.lock().watch_list;

    let mut errs = Vec::new();
    match support {
        WatchListSupport::Enabled | WatchListSupport::GateDisabled => {
            let enabled = support == WatchListSupport::Enabled;
            // SetListOptionsDefaults: a legacy watch becomes a watch-list when the gate is on.
            if enabled && send_initial.is_none() && rv_match.is_empty() && legacy_rv {
                send_initial = Some(true);
                rv_match = "NotOlderThan".into();
            }
            // validateWatchOptions.
            if send_initial.is_some() {
                if rv_match != "NotOlderThan" {
                    errs.push(forbidden(
                        "resourceVersionMatch",
                        "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                    ));
                }
                if !enabled {
                    errs.push(forbidden(
                        "sendInitialEvents",
                        "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled",
                    ));
                }
            }
            if !rv_match.is_empty() {
                if send_initial.is_none() {
                    errs.push(forbidden(
                        "resourceVersionMatch",
                        "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                    ));
                }
                if rv_match != "NotOlderThan" {
                    errs.push((
                        "FieldValueNotSupported",
                        "resourceVersionMatch",
                        format!("Unsupported value: {rv_match:?}: supported values: \"NotOlderThan\""),
                    ));
                }
                if !cont.is_empty() {
                    errs.push(forbidden(
                        "resourceVersionMatch",
                        "resourceVersionMatch is forbidden when continue is provided",
                    ));
                }
            }
        }
        WatchListSupport::Legacy => {
            // 1.19 to 1.26: sendInitialEvents is not a known parameter.
            send_initial = None;
            if !rv_match.is_empty() {
                errs.push(forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden for watch"));
                if rv.is_empty() {
                    errs.push(forbidden(
                        "resourceVersionMatch",
                        "resourceVersionMatch is forbidden unless resourceVersion is provided",
                    ));
                }
            }
        }
        WatchListSupport::Ignored => {
            send_initial = None;
        }
    }
    if !errs.is_empty() {
        return Err(invalid_list_options(&errs));
    }
    let timeout = match query.get("timeoutSeconds") {
        None | Some("") => DEFAULT_TIMEOUT,
        Some(t) => match t.parse::<i64>() {
            // Clamped so that adding it to an Instant cannot overflow.
            Ok(s) if s > 0 => Duration::from_secs(s.min(10 * 365 * 86_400) as u64),
            // handlers/watch.go handleWatch: 0 means "pick the default"; a negative timeout
            // gives a context and a timer that have already expired, so the stream ends right
            // after the headers (real servers race the first events against the timer; this
            // one sends none).
            Ok(0) => DEFAULT_TIMEOUT,
            Ok(_) => Duration::ZERO,
            Err(_) => return Err(ApiError::bad_request(format!("timeoutSeconds: invalid value {t:?}"))),
        },
    };
    // Store.Watch parses the selector after the handler has decoded and validated the options.
    let shard = shard_selector(shared, query)?;
    let filter = Filter {
        res: route.res,
        namespace: route.namespace.clone(),
        name: route.name.clone(),
        labels,
        fields,
        shard,
    };

    let store = shared.store.lock();
    let current = store.rv;
    let removals = store.resources[route.res].removals;
    let snapshot = |store: &crate::store::Store| -> Vec<Arc<StoredObject>> {
        let mut objs: Vec<Arc<StoredObject>> = store
            .list_at(filter.res, filter.namespace.as_deref(), None, store.rv)
            .unwrap_or_default()
            .into_iter()
            .filter(|o| filter.matches(o))
            .collect();
        // Deliberately not in resourceVersion order: newest first.
        objs.sort_by_key(|o| std::cmp::Reverse(o.rv));
        objs
    };
    // A watch that is answered 200 with one ERROR event and then closed (the cacher's
    // `newErrWatcher`), instead of streaming.
    let mut only_error = None;
    let (initial, start_rv, end_bookmark) = match send_initial {
        Some(true) => {
            let n = if legacy_rv { 0 } else { parse_rv(&rv)? };
            if n > current {
                // The cacher's waitUntilWatchCacheFreshAndForceAllEvents waits up to 3 s
                // (blockTimeout) for the watch cache to reach `n`, then fails with
                // NewTooLargeResourceVersionError, which Watch wraps in newErrWatcher: the
                // client gets 200 and a single ERROR event. The store here is always current,
                // so there is nothing to wait for: the ERROR is sent at once.
                only_error = Some(ApiError::too_large_resource_version(n, current));
                (Vec::new(), current, false)
            } else {
                (snapshot(&store), current, bookmarks)
            }
        }
        Some(false) => (Vec::new(), if legacy_rv { current } else { parse_rv(&rv)? }, false),
        None if legacy_rv => (snapshot(&store), current, false),
        None => (Vec::new(), parse_rv(&rv)?, false),
    };
    drop(store);

    // A watch answered with only an ERROR event never streams: it leaves the injected watch
    // faults to the next watch.
    let plan = if only_error.is_some() {
        Plan::default()
    } else {
        Plan::from_faults(shared.faults.lock().take_watch_faults())
    };
    let (tx, rx) = mpsc::channel(16);
    let task = WatchTask {
        shared: shared.clone(),
        generation,
        rv_rx: shared.rv_tx.subscribe(),
        tx,
        filter,
        kind: if partial.is_some() { "PartialObjectMetadata".into() } else { route.def.kind.clone() },
        api_version: partial.map_or_else(|| route.def.api_version(), str::to_string),
        partial,
        unencodable,
        broken: false,
        protobuf,
        bookmarks,
        // tokio intervals need a non-zero period.
        bookmark_interval: (*shared.bookmark_interval.lock()).max(Duration::from_millis(1)),
        deadline: Instant::now() + timeout,
        plan,
        sent: 0,
        buf: Vec::with_capacity(FLUSH_AT + 4096),
        last: start_rv,
        removals,
        only_error,
    };
    tokio::spawn(task.run(initial, end_bookmark));
    Response::builder()
        .status(200)
        .header(
            header::CONTENT_TYPE,
            if protobuf.is_some() { kcache_protobuf::WATCH_MEDIA_TYPE } else { "application/json" },
        )
        .header("audit-id", "kcache-testserver")
        .body(ResBody::Stream(rx))
        .map_err(|e| ApiError::new(500, "InternalError", format!("Internal error occurred: {e}"), None))
}

/// Why the stream stops.
enum Stop {
    /// End cleanly (timeout, fault, ERROR sent).
    End,
    /// The client went away, or the server restarted.
    Gone,
}

struct WatchTask {
    shared: Arc<Shared>,
    generation: CancellationToken,
    rv_rx: watch::Receiver<u64>,
    tx: mpsc::Sender<Bytes>,
    filter: Filter,
    kind: String,
    api_version: String,
    /// Send `PartialObjectMetadata` of this apiVersion instead of whole objects.
    partial: Option<&'static str>,
    /// No event or bookmark can be encoded (`as=PartialObjectMetadataList`): the stream ends
    /// at the first one, which is not sent.
    unencodable: bool,
    /// A frame could not be encoded: end the stream at the next flush.
    broken: bool,
    /// Send protobuf frames of this message (objects are stored as JSON and encoded per event).
    protobuf: Option<MessageType>,
    bookmarks: bool,
    bookmark_interval: Duration,
    deadline: Instant,
    plan: Plan,
    /// Object events sent so far.
    sent: usize,
    /// Frames not yet handed to the connection.
    buf: Vec<u8>,
    /// Every event with a resourceVersion up to this has been considered.
    last: u64,
    /// [`crate::store::ResourceState::removals`] of the resource when the watch opened.
    removals: u64,
    /// Send this as an ERROR event and end the stream, instead of streaming anything.
    only_error: Option<ApiError>,
}

impl WatchTask {
    async fn run(mut self, initial: Vec<Arc<StoredObject>>, end_bookmark: bool) {
        if let Some(e) = self.only_error.take() {
            self.error_frame(&e);
            let _ = self.flush().await;
            return;
        }
        if Instant::now() >= self.deadline {
            // A negative timeoutSeconds: already timed out.
            return;
        }
        if self.plan.hang {
            // Headers go out with the response; the body never yields and never ends.
            tokio::select! {
                _ = self.tx.closed() => {}
                _ = self.generation.cancelled() => {}
            }
            return;
        }
        let _ = self.stream(initial, end_bookmark).await;
    }

    async fn stream(&mut self, initial: Vec<Arc<StoredObject>>, end_bookmark: bool) -> Result<(), Stop> {
        self.faults_due().await?;
        for obj in initial {
            self.event("ADDED", &obj).await?;
        }
        if end_bookmark {
            self.bookmark(true);
        }
        self.flush().await?;
        let mut ticker =
            tokio::time::interval_at(Instant::now() + self.bookmark_interval, self.bookmark_interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            if Instant::now() >= self.deadline {
                self.flush().await?;
                return Err(Stop::End);
            }
            self.rv_rx.borrow_and_update();
            let removed;
            let batch = {
                let store = self.shared.store.lock();
                removed = store.resources[self.filter.res].removals != self.removals;
                match store.events_since(self.last, BATCH) {
                    Ok(b) => {
                        if b.is_empty() {
                            self.last = self.last.max(store.rv);
                        }
                        Ok(b)
                    }
                    Err(too_old) => Err(too_old),
                }
            };
            let batch = match batch {
                Ok(b) => b,
                Err(too_old) => {
                    let e = ApiError::expired(format!(
                        "too old resource version: {} ({})",
                        self.last, too_old.oldest
                    ));
                    self.error_frame(&e);
                    self.flush().await?;
                    return Err(Stop::End);
                }
            };
            if batch.is_empty() && removed {
                // The resource's CRD was deleted (its objects' DELETED events were sent):
                // kube-apiserver tears the resource's storage down, ending its watches.
                self.flush().await?;
                return Err(Stop::End);
            }
            if batch.is_empty() {
                self.flush().await?;
                tokio::select! {
                    _ = self.rv_rx.changed() => {}
                    _ = ticker.tick(), if self.bookmarks => {
                        self.bookmark(false);
                        self.flush().await?;
                    }
                    _ = tokio::time::sleep_until(self.deadline) => {}
                    _ = self.tx.closed() => return Err(Stop::Gone),
                    _ = self.generation.cancelled() => return Err(Stop::Gone),
                }
                continue;
            }
            for ev in batch {
                self.last = ev.rv;
                if ev.resource != self.filter.res {
                    continue;
                }
                // The watch cache's convertToWatchEvent: an object entering the selector is
                // ADDED, one leaving it is DELETED (with its previous content at this rv).
                let cur = ev.kind != EventType::Deleted && self.filter.matches(&ev.object);
                let old = ev.prev.as_ref().is_some_and(|p| self.filter.matches(p));
                match (cur, old) {
                    (true, false) => self.event("ADDED", &ev.object).await?,
                    (true, true) => self.event("MODIFIED", &ev.object).await?,
                    (false, true) => {
                        if ev.kind == EventType::Deleted {
                            self.event("DELETED", &ev.object).await?;
                        } else if let Some(prev) = &ev.prev {
                            let gone = prev.with_rv(ev.rv);
                            self.event("DELETED", &gone).await?;
                        }
                    }
                    (false, false) => {}
                }
            }
        }
    }

    /// Writes one event of a stored object: as [`Self::frame`], but in protobuf the object's
    /// envelope is the one kept with it ([`stored_protobuf`]), written once for every watch.
    fn object_frame(&mut self, ty: &str, object: &StoredObject) {
        match self.protobuf {
            Some(message) if !self.unencodable => {
                let envelope = match stored_protobuf(message, object) {
                    Ok(form) => form.envelope,
                    Err(e) => {
                        let frame = kcache_protobuf::watch_frame("ERROR", &protobuf_status(&e.status));
                        self.buf.extend_from_slice(&frame);
                        return;
                    }
                };
                self.buf.extend_from_slice(&kcache_protobuf::watch_frame(ty, &envelope));
            }
            _ => self.frame(ty, &object.bytes),
        }
    }

    fn frame(&mut self, ty: &str, object: &[u8]) {
        if self.unencodable && ty != "ERROR" {
            self.broken = true;
            return;
        }
        if let Some(message) = self.protobuf {
            // kube-apiserver's protobuf watch: a length-prefixed WatchEvent whose object is the
            // object's envelope. An ERROR's object is a Status; an object that does not encode
            // (never one this server stored) is sent as an ERROR.
            let envelope = if ty == "ERROR" {
                serde_json::from_slice(object).map(|v| protobuf_status(&v)).unwrap_or_default()
            } else {
                match protobuf_object(message, object) {
                    Ok(e) => e,
                    Err(e) => {
                        let frame = kcache_protobuf::watch_frame("ERROR", &protobuf_status(&e.status));
                        self.buf.extend_from_slice(&frame);
                        return;
                    }
                }
            };
            self.buf.extend_from_slice(&kcache_protobuf::watch_frame(ty, &envelope));
            return;
        }
        self.buf.extend_from_slice(b"{\"type\":\"");
        self.buf.extend_from_slice(ty.as_bytes());
        self.buf.extend_from_slice(b"\",\"object\":");
        self.buf.extend_from_slice(object);
        self.buf.extend_from_slice(b"}\n");
    }

    fn error_frame(&mut self, e: &ApiError) {
        let body = e.body();
        self.frame("ERROR", &body);
    }

    fn bookmark(&mut self, initial_events_end: bool) {
        let annotations =
            if initial_events_end { ",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}" } else { "" };
        let obj = format!(
            "{{\"kind\":\"{}\",\"apiVersion\":\"{}\",\"metadata\":{{\"resourceVersion\":\"{}\"{annotations}}}}}",
            self.kind, self.api_version, self.last
        );
        self.frame("BOOKMARK", obj.as_bytes());
    }

    /// Applies the faults due once `self.sent` events have gone out: injected frames, or the
    /// end of the stream.
    async fn faults_due(&mut self) -> Result<(), Stop> {
        if self.plan.malformed_after == Some(self.sent) {
            self.plan.malformed_after = None;
            if self.protobuf.is_some() {
                // A frame whose object is not an envelope.
                self.buf
                    .extend_from_slice(&kcache_protobuf::watch_frame("MODIFIED", b"this is not protobuf"));
            } else {
                self.buf.extend_from_slice(b"{\"type\":\"MODIFIED\",\"object\":{this is not json\n");
            }
        }
        if self.plan.unknown_after == Some(self.sent) {
            self.plan.unknown_after = None;
            let obj = format!(
                "{{\"kind\":\"{}\",\"apiVersion\":\"{}\",\"metadata\":{{\"name\":\"surprise\",\"resourceVersion\":\"{}\"}}}}",
                self.kind, self.api_version, self.last
            );
            self.frame("SURPRISE", obj.as_bytes());
        }
        let sent = self.sent;
        for (_, bytes) in self.plan.raw.extract_if(.., |(after, _)| *after == sent) {
            self.buf.extend_from_slice(&bytes);
        }
        if let Some((after, e)) = &self.plan.error
            && *after == self.sent
        {
            let e = e.clone();
            self.error_frame(&e);
            self.flush().await?;
            return Err(Stop::End);
        }
        if self.plan.close_after == Some(self.sent) {
            self.flush().await?;
            return Err(Stop::End);
        }
        Ok(())
    }

    /// Sends one object event, then applies the faults that trigger at the new count.
    async fn event(&mut self, ty: &str, object: &StoredObject) -> Result<(), Stop> {
        if let Some(api_version) = self.partial {
            let partial = partial_object_metadata(&object.bytes, api_version);
            self.frame(ty, &partial);
        } else {
            self.object_frame(ty, object);
        }
        self.sent += 1;
        if self.broken {
            return Err(Stop::End);
        }
        self.faults_due().await?;
        if let Some(rate) = self.plan.rate {
            self.flush().await?;
            tokio::time::sleep(Duration::from_secs_f64(1.0 / f64::from(rate))).await;
        } else if self.buf.len() >= FLUSH_AT {
            self.flush().await?;
        }
        Ok(())
    }

    async fn flush(&mut self) -> Result<(), Stop> {
        if self.broken {
            return Err(Stop::End);
        }
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(FLUSH_AT + 4096)));
        tokio::select! {
            r = self.tx.send(chunk) => r.map_err(|_| Stop::Gone),
            _ = self.generation.cancelled() => Err(Stop::Gone),
        }
    }
}
