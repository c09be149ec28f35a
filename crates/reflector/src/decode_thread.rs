//! Where responses are decoded: on a thread of their own on a multi-threaded runtime (a watch's for
//! the life of the watch, a list's for one response), in the calling task elsewhere.

use std::sync::Arc;

use futures::{FutureExt, StreamExt};
use serde::de::DeserializeOwned;

use crate::error::{ReflectorError, Result};
use crate::list_decode::ListDecoder;
use crate::lister_watcher::{ListPage, WatchEvent, WatchStream};
use crate::protobuf::{ProtoListDecoder, ProtobufKind};
use crate::watch_decode::{BodyChunks, Decoding, decode_in_task};

/// A list response's decoder, chosen by its `Content-Type`.
// One per list response, moved once onto the decoding thread: its size does not matter.
#[allow(clippy::large_enum_variant)]
pub(crate) enum ListBodyDecoder<K> {
    /// JSON ([`ListDecoder`]).
    Json(ListDecoder<K>),
    /// Kubernetes' protobuf ([`ProtoListDecoder`]).
    Protobuf(ProtoListDecoder<K>),
}

impl<K: DeserializeOwned + Send + Sync + 'static> ListBodyDecoder<K> {
    /// The decoder for a response in protobuf (when `protobuf` is set, with up to `helpers`
    /// threads decoding its items beside the list's own) or JSON, skipping each item's managed
    /// fields when `strip` is set.
    pub(crate) fn new(protobuf: Option<Arc<ProtobufKind>>, strip: bool, helpers: usize) -> Self {
        match protobuf {
            Some(pb) => Self::Protobuf(ProtoListDecoder::new(pb, strip, helpers, crate::list_helpers::BATCH)),
            None => Self::Json(ListDecoder::new(strip)),
        }
    }

    fn push(&mut self, chunk: &[u8]) -> Result<()> {
        match self {
            Self::Json(d) => d.push(chunk),
            Self::Protobuf(d) => d.push(chunk),
        }
    }

    fn finish(self) -> Result<ListPage<K>> {
        match self {
            Self::Json(d) => d.finish(),
            Self::Protobuf(d) => d.finish(),
        }
    }
}

/// The runtime to start decoding threads in: the current one if it is multi-threaded. On a
/// current-thread runtime (the paused-clock tests) or outside any, decoding stays in the
/// calling task.
pub(crate) fn multi_thread_runtime() -> Option<tokio::runtime::Handle> {
    tokio::runtime::Handle::try_current()
        .ok()
        .filter(|rt| rt.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread)
}

/// Runs `work` to completion on a new thread named `name`, inside `rt` (so its timers and I/O
/// work); if no thread can be started, as a task of `rt` instead.
fn run_on_thread<F>(rt: &tokio::runtime::Handle, name: &str, work: F)
where
    F: Future<Output = ()> + Send + 'static,
{
    // The closure holds the work in a slot it empties when it runs, so that the work can be
    // taken back when the thread is never started.
    let slot = Arc::new(std::sync::Mutex::new(Some(work)));
    let handed = Arc::clone(&slot);
    let thread_rt = rt.clone();
    let spawned = std::thread::Builder::new().name(name.into()).spawn(move || {
        let work = handed.lock().ok().and_then(|mut w| w.take());
        drop(handed);
        if let Some(work) = work {
            thread_rt.block_on(work);
        }
    });
    if let Err(e) = spawned {
        tracing::debug!(error = %e, thread = name, "cannot start a decoding thread; decoding in a runtime task");
        if let Some(work) = slot.lock().ok().and_then(|mut w| w.take()) {
            rt.spawn(work);
        }
    }
}

/// Reads and decodes a list response while it arrives ([`ListDecoder`]: never the whole body in
/// memory), on a thread of its own when the runtime is multi-threaded, for the reasons
/// [`events_from_chunks`] gives (and so that decoding a 50k-object list, a fraction of a second of
/// CPU, never holds up a runtime worker); in the calling task elsewhere. Dropping the future
/// ends the thread and drops the body.
pub(crate) async fn decode_list_body<K>(body: BodyChunks, decoder: ListBodyDecoder<K>) -> Result<ListPage<K>>
where
    K: DeserializeOwned + Send + Sync + 'static,
{
    let read = async move {
        let mut body = body;
        let mut decoder = decoder;
        while let Some(chunk) = body.next().await {
            decoder.push(&chunk.map_err(ReflectorError::transport)?)?;
        }
        decoder.finish()
    };
    let Some(rt) = multi_thread_runtime() else { return read.await };
    let (mut tx, rx) = tokio::sync::oneshot::channel();
    run_on_thread(&rt, "kcache-list-decode", async move {
        tokio::select! {
            biased;
            () = tx.closed() => {}
            page = read => {
                let _ = tx.send(page);
            }
        }
    });
    rx.await.unwrap_or_else(|_| Err(ReflectorError::decode("the list decoding thread ended early")))
}

/// How many batches of decoded events a watch's decoding thread may hold ahead of the reflector
/// before it stops reading the stream.
const BATCHES_AHEAD: usize = 4;

/// The most events one batch carries from the decoding thread to the reflector.
const BATCH: usize = 32;

/// The most events one batch of a watch-list's initial events carries. Up to this many, the
/// decoding thread waits (at most [`INITIAL_HOLD`]) for more bytes instead of handing over what
/// it has: the initial events are a burst that nobody sees before the bookmark that ends them,
/// and every batch handed over is a wake-up of the reflector's worker, which otherwise drains
/// each small batch and parks again (13% of a watch-list sync's samples were such hand-offs;
/// docs/benchmarks.md, "Watch-list sync: keys once, fewer hand-offs").
const INITIAL_BATCH: usize = 256;

/// How long the decoding thread holds a batch of initial events back, waiting for more, before
/// it hands it over anyway: a server that pauses mid-stream delays the reflector by this much
/// at most.
const INITIAL_HOLD: std::time::Duration = std::time::Duration::from_millis(2);

/// Splits a watch response's data chunks into frames and decodes each one, as `decoding` asks
/// (as protobuf when `protobuf` says the response is, see [`decode_in_task`]).
///
/// By default, on a multi-threaded tokio runtime, the whole watch is read and decoded on a
/// thread of its own: the stream it returns is fed through a channel of up to [`BATCHES_AHEAD`]
/// batches, each of the events already decoded (at most [`BATCH`]) when it is sent, so a burst
/// costs one hand-over per batch, not per event, and a watch-list's decoding runs beside the
/// reflector filling its temporary store, which is what makes a watch-list sync as fast as it
/// is. Every object a watch decodes is then allocated by one thread, so with glibc's per-thread
/// malloc arenas a cache's objects come from one arena and an updated object reuses the memory
/// of the one it replaces (docs/benchmarks.md, "Where the memory scenario's RSS goes").
///
/// With `live_events_in_task` ([`ApiListerWatcher::live_events_in_task`](crate::ApiListerWatcher::live_events_in_task))
/// only a watch-list's initial events (`initial_events`, the request's `sendInitialEvents`) are
/// decoded on the thread: at the bookmark that ends them it hands the rest of the stream back
/// and ends, and a plain watch (after a LIST) is decoded in the stream's own task from the
/// start. Live events arrive as the server writes them, a few per chunk, and on the thread every
/// chunk handed from the runtime's I/O to it and every batch handed back cost two thread
/// wake-ups. On a two-core VM those wake-ups, not the decoding, decided the CPU per event, which
/// swung between runs from 0.68 to 1.75 CPU seconds for 200k events with the number of context
/// switches; decoded in the stream's own task, next to hyper's connection task, a chunk wakes no
/// other thread (0.65 to 0.73 CPU seconds; docs/benchmarks.md, "The hand-off"). The price: a live
/// update's object is allocated by a runtime worker, so the memory its old object frees in the
/// decoding thread's arena is not reused by it (about 5 MiB more at the peak of the memory
/// benchmark, whose 5k updates follow the sync; same section).
///
/// On a current-thread runtime (the paused-clock tests) or outside any runtime everything is
/// decoded in the stream's own task. Dropping the stream ends the thread, even one waiting for
/// bytes that never come.
pub(crate) fn events_from_chunks<K>(
    data: BodyChunks,
    decoding: Decoding,
    protobuf: bool,
    initial_events: bool,
) -> WatchStream<K>
where
    K: DeserializeOwned + Send + Sync + 'static,
{
    let live_events_in_task = decoding.live_events_in_task;
    let rt = multi_thread_runtime();
    // Helpers only where waiting for one blocks the watch's own thread: a watch-list's initial
    // events, decoded on that thread.
    let helpers = if initial_events { decoding.decode_helpers(rt.is_some()) } else { 0 };
    let events = decode_in_task(data, decoding, protobuf, helpers, crate::list_helpers::BATCH);
    match rt {
        Some(rt) if !live_events_in_task => decode_on_thread(&rt, events, false, initial_events),
        Some(rt) if initial_events => decode_on_thread(&rt, events, true, true),
        _ => events,
    }
}

/// What a watch's decoding thread hands the reflector.
enum Handover<K> {
    /// Events decoded since the last hand-over.
    Batch(Vec<Result<WatchEvent<K>>>),
    /// The stream itself, after the bookmark that ends the initial events (when the thread
    /// hands it back): decoded in the reader's task from then on.
    Rest(WatchStream<K>),
}

/// Whether `ev` is the bookmark that ends a watch-list's initial events.
fn ends_initial_events<K>(ev: &Result<WatchEvent<K>>) -> bool {
    matches!(ev, Ok(WatchEvent::Bookmark(b)) if b.initial_events_end)
}

/// Whether `ev` is an initial event of a watch-list (an `ADDED`): up to [`INITIAL_BATCH`] of
/// them are held back for more. Anything else (the bookmark, a live change, an error) is handed
/// over at once, so that a server that ignores `sendInitialEvents` (a plain bookmark first) or
/// fails mid-stream is heard of without delay.
fn is_initial_event<K>(ev: &Result<WatchEvent<K>>) -> bool {
    matches!(ev, Ok(WatchEvent::Added(_)))
}

/// What [`fill_batch`] saw besides the events.
#[derive(Debug, PartialEq, Eq)]
struct Filled {
    /// The stream ended.
    finished: bool,
    /// The batch holds the bookmark that ends the initial events.
    ended: bool,
}

/// Adds to `batch` (which holds one event) the events `events` has decoded, up to `cap`:
/// whatever is decodable without waiting; with `hold`, while the batch holds only initial
/// events (see [`is_initial_event`]), also whatever arrives within [`INITIAL_HOLD`] of the
/// previous event. With `stop_at_end`, the bookmark that ends the initial events is the last
/// event of its batch.
async fn fill_batch<K>(
    events: &mut WatchStream<K>,
    batch: &mut Vec<Result<WatchEvent<K>>>,
    cap: usize,
    mut hold: bool,
    stop_at_end: bool,
) -> Filled {
    let mut ended = batch.iter().any(ends_initial_events);
    hold &= batch.iter().all(is_initial_event);
    while batch.len() < cap && !(stop_at_end && ended) {
        let next = match events.next().now_or_never() {
            Some(next) => next,
            None if hold => match tokio::time::timeout(INITIAL_HOLD, events.next()).await {
                Ok(next) => next,
                Err(_) => break,
            },
            None => break,
        };
        let Some(ev) = next else { return Filled { finished: true, ended } };
        ended |= ends_initial_events(&ev);
        hold &= is_initial_event(&ev);
        batch.push(ev);
    }
    Filled { finished: false, ended }
}

/// Polls `events` on a new thread (inside `rt`), handing them over in batches through a bounded
/// channel; with `hand_back`, only until the initial events have ended, then it hands the stream
/// itself over. While `initial_events` (a watch-list's) have not ended, batches are up to
/// [`INITIAL_BATCH`] events, held back up to [`INITIAL_HOLD`] for more. See
/// [`events_from_chunks`].
fn decode_on_thread<K>(
    rt: &tokio::runtime::Handle,
    mut events: WatchStream<K>,
    hand_back: bool,
    initial_events: bool,
) -> WatchStream<K>
where
    K: Send + Sync + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel::<Handover<K>>(BATCHES_AHEAD);
    run_on_thread(rt, "kcache-watch-decode", async move {
        let mut in_initial_events = initial_events;
        loop {
            let next = tokio::select! {
                biased;
                () = tx.closed() => return,
                next = events.next() => next,
            };
            let Some(first) = next else { return };
            let hold = in_initial_events && is_initial_event(&first);
            let cap = if hold { INITIAL_BATCH } else { BATCH };
            let mut batch = Vec::with_capacity(cap);
            batch.push(first);
            let Filled { finished, ended } = tokio::select! {
                biased;
                () = tx.closed() => return,
                filled = fill_batch(&mut events, &mut batch, cap, hold, hand_back) => filled,
            };
            if ended {
                in_initial_events = false;
            }
            let ended = hand_back && ended;
            if tx.send(Handover::Batch(batch)).await.is_err() || finished {
                return;
            }
            if ended {
                let _ = tx.send(Handover::Rest(events)).await;
                return;
            }
        }
    });
    /// Where the reader takes its next event from.
    enum Source<K> {
        /// The decoding thread's channel, and the batch being read.
        Thread(tokio::sync::mpsc::Receiver<Handover<K>>, std::vec::IntoIter<Result<WatchEvent<K>>>),
        /// The stream, handed back.
        Inline(WatchStream<K>),
    }
    futures::stream::unfold(Source::Thread(rx, Vec::new().into_iter()), |mut source| async move {
        loop {
            source = match source {
                Source::Inline(mut events) => {
                    return events.next().await.map(|ev| (ev, Source::Inline(events)));
                }
                Source::Thread(mut rx, mut batch) => {
                    if let Some(ev) = batch.next() {
                        return Some((ev, Source::Thread(rx, batch)));
                    }
                    match rx.recv().await? {
                        Handover::Batch(next) => Source::Thread(rx, next.into_iter()),
                        Handover::Rest(events) => Source::Inline(events),
                    }
                }
            };
        }
    })
    .boxed()
}

#[cfg(test)]
mod tests;
