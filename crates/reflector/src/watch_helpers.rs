//! A watch-list's initial events decoded on more than one thread: the watch's decoding thread
//! cuts the stream into frames, hands batches of `ADDED` frames to a helper thread while it reads
//! on, and yields every event in the order the server sent it.
//!
//! Why: a watch-list sync is its initial events, one `ADDED` per object, and decoding them was
//! nearly all of the decoding thread's work, on one core, while the reflector's side (filing each
//! object in the temporary store) is light. Frames are cut apart without decoding them (a length
//! prefix in protobuf, a newline in JSON), and each decodes on its own.
//!
//! How: as for a protobuf list ([`crate::list_helpers`]), the first 256 `ADDED` frames are
//! decoded on the watch's thread, then `ADDED` frames go into numbered batches, each handed to a
//! helper with room or decoded on the spot. Anything else (the bookmark, an error, a frame that
//! does not start as kube-apiserver writes an `ADDED`) is decoded on the watch's thread after
//! the batch being filled is handed over, and queued behind it. The bookmark that ends the
//! initial events ends the helpers: live events are decoded one by one as before. Every frame's
//! outcome, error or not, is yielded in its place, exactly as on one thread
//! (`parallel_and_serial_watch_lists_agree`).
//!
//! Waiting for a helper blocks the watch's own decoding thread, never a runtime worker: the
//! helpers are used only there.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::error::{ReflectorError, Result};
use crate::list_helpers::{BACKLOG, Batch};
use crate::lister_watcher::WatchEvent;

/// How one frame becomes an event (the watch's JSON or protobuf decoding).
pub(crate) type FrameDecode<K> = Arc<dyn Fn(&[u8]) -> Result<WatchEvent<K>> + Send + Sync>;

/// Whether `frame` is an `ADDED` event as kube-apiserver writes one: in protobuf a `WatchEvent`
/// whose first field is `type: "ADDED"`, in JSON `{"type":"ADDED",...`. Only such frames are
/// batched; any other frame is decoded in its place on the watch's thread.
pub(crate) fn is_added_frame(frame: &[u8], protobuf: bool) -> bool {
    if protobuf { frame.starts_with(b"\x0a\x05ADDED") } else { frame.starts_with(b"{\"type\":\"ADDED\"") }
}

/// How long a wait for a helper's answer lasts before the helper is checked for having ended.
const CHECK_EVERY: Duration = Duration::from_millis(50);

/// Decodes every frame of `batch`, keeping each outcome.
fn decode_batch<K>(decode: &FrameDecode<K>, batch: &Batch) -> Vec<Result<WatchEvent<K>>> {
    batch.items().map(|frame| decode(frame)).collect()
}

/// What the watch yields next, in order: events already decoded, or a batch out with a helper.
enum Unit<K> {
    Ready(VecDeque<Result<WatchEvent<K>>>),
    Pending { seq: usize, helper: usize },
}

/// A helper thread.
struct Helper {
    /// Where its batches go; `None` once the initial events have ended (which ends the thread).
    tx: Option<Sender<Batch>>,
    /// Batches sent and not answered yet.
    waiting: usize,
    thread: JoinHandle<()>,
}

/// A helper's answer: which helper, which batch, and an outcome per frame.
type Answer<K> = (usize, usize, Vec<Result<WatchEvent<K>>>);

/// The events of one watch-list stream, decoded by the watch's thread and up to `wanted` helpers
/// until its initial events end.
pub(crate) struct EventHelpers<K> {
    decode: FrameDecode<K>,
    protobuf: bool,
    wanted: usize,
    batch: usize,
    helpers: Vec<Helper>,
    done_tx: Sender<Answer<K>>,
    done_rx: Receiver<Answer<K>>,
    /// Answers that arrived before their turn.
    answers: HashMap<usize, Vec<Result<WatchEvent<K>>>>,
    units: VecDeque<Unit<K>>,
    filling: Batch,
    /// `ADDED` frames decoded on the watch's thread before the first batch.
    inline_added: usize,
    /// Whether `ADDED` frames are batched (until the initial events end).
    active: bool,
}

impl<K: Send + Sync + 'static> EventHelpers<K> {
    /// The events of a stream whose frames `decode` decodes, with up to `wanted` helpers, in
    /// batches of `batch` frames (`list_helpers::BATCH` but in tests).
    pub(crate) fn new(decode: FrameDecode<K>, protobuf: bool, wanted: usize, batch: usize) -> Self {
        let (done_tx, done_rx) = channel();
        Self {
            decode,
            protobuf,
            wanted,
            batch: batch.max(1),
            helpers: Vec::new(),
            done_tx,
            done_rx,
            answers: HashMap::new(),
            units: VecDeque::new(),
            filling: Batch::new(0),
            inline_added: 0,
            active: wanted > 0,
        }
    }

    /// The helpers' part is over and every event has been yielded: the stream can go on
    /// without them.
    pub(crate) fn is_spent(&self) -> bool {
        !self.active && self.units.is_empty() && self.filling.len() == 0
    }

    /// Takes the next frame of the stream.
    pub(crate) fn push_frame(&mut self, frame: &[u8]) {
        if self.active && is_added_frame(frame, self.protobuf) {
            if self.inline_added >= self.batch {
                self.filling.push(frame);
                if self.filling.len() >= self.batch {
                    self.hand_over();
                }
                return;
            }
            self.inline_added += 1;
        }
        let ev = (self.decode)(frame);
        if matches!(&ev, Ok(WatchEvent::Bookmark(b)) if b.initial_events_end) {
            self.end_helpers();
        }
        self.push_event(ev);
    }

    /// Queues an outcome that is not a frame's (an error of the stream), behind every frame
    /// before it.
    pub(crate) fn push_event(&mut self, ev: Result<WatchEvent<K>>) {
        self.hand_over();
        match self.units.back_mut() {
            Some(Unit::Ready(events)) => events.push_back(ev),
            _ => self.units.push_back(Unit::Ready(VecDeque::from([ev]))),
        }
    }

    /// No more batching: the helpers end once they have answered what they have.
    fn end_helpers(&mut self) {
        self.hand_over();
        self.active = false;
        for h in &mut self.helpers {
            h.tx = None;
        }
    }

    /// Hands the batch being filled to a helper with room, or decodes it here.
    pub(crate) fn hand_over(&mut self) {
        let Some(batch) = self.filling.take() else { return };
        if self.helpers.len() < self.wanted {
            self.start_helper();
        }
        let seq = batch.seq;
        let room = self
            .helpers
            .iter_mut()
            .enumerate()
            .filter(|(_, h)| h.waiting < BACKLOG)
            .min_by_key(|(_, h)| h.waiting);
        let batch = match room {
            Some((index, Helper { tx: Some(tx), waiting, .. })) => match tx.send(batch) {
                Ok(()) => {
                    *waiting += 1;
                    self.units.push_back(Unit::Pending { seq, helper: index });
                    return;
                }
                Err(e) => e.0,
            },
            _ => batch,
        };
        let events = decode_batch(&self.decode, &batch);
        self.units.push_back(Unit::Ready(events.into()));
    }

    fn start_helper(&mut self) {
        let (tx, rx) = channel::<Batch>();
        let done = self.done_tx.clone();
        let decode = Arc::clone(&self.decode);
        let index = self.helpers.len();
        let started =
            std::thread::Builder::new().name("kcache-watch-decode-helper".into()).spawn(move || {
                while let Ok(batch) = rx.recv() {
                    if done.send((index, batch.seq, decode_batch(&decode, &batch))).is_err() {
                        return;
                    }
                }
            });
        match started {
            Ok(thread) => self.helpers.push(Helper { tx: Some(tx), waiting: 0, thread }),
            Err(e) => {
                tracing::debug!(error = %e, "cannot start a watch decoding helper; decoding on one thread");
                self.wanted = self.helpers.len();
            }
        }
    }

    /// Files the answers that have arrived.
    fn collect_ready(&mut self) {
        while let Ok(answer) = self.done_rx.try_recv() {
            self.file(answer);
        }
    }

    fn file(&mut self, (helper, seq, events): Answer<K>) {
        if let Some(h) = self.helpers.get_mut(helper) {
            h.waiting = h.waiting.saturating_sub(1);
        }
        self.answers.insert(seq, events);
    }

    /// The next event, if it is decoded already (without waiting).
    pub(crate) fn next_ready(&mut self) -> Option<Result<WatchEvent<K>>> {
        loop {
            match self.units.front_mut()? {
                Unit::Ready(events) => match events.pop_front() {
                    Some(ev) => return Some(ev),
                    None => {
                        self.units.pop_front();
                    }
                },
                Unit::Pending { seq, .. } => {
                    let seq = *seq;
                    if !self.answers.contains_key(&seq) {
                        self.collect_ready();
                    }
                    let events = self.answers.remove(&seq)?;
                    self.units[0] = Unit::Ready(events.into());
                }
            }
        }
    }

    /// The next event, waiting for the helper that has it; `None` when nothing is queued.
    pub(crate) fn wait_next(&mut self) -> Option<Result<WatchEvent<K>>> {
        loop {
            if let Some(ev) = self.next_ready() {
                return Some(ev);
            }
            let Unit::Pending { helper, .. } = self.units.front()? else { continue };
            let helper = *helper;
            match self.done_rx.recv_timeout(CHECK_EVERY) {
                Ok(answer) => self.file(answer),
                Err(RecvTimeoutError::Timeout) => {
                    if self.helpers.get(helper).is_none_or(|h| h.thread.is_finished()) {
                        // It ended without answering (a decoder that panicked), unless its
                        // answer came in meanwhile.
                        self.collect_ready();
                        if self.next_ready_is_pending() {
                            self.units.pop_front();
                            return Some(Err(ReflectorError::decode("a watch decoding helper ended early")));
                        }
                    }
                }
                // Unreachable while `self` holds a sender.
                Err(RecvTimeoutError::Disconnected) => {
                    self.units.pop_front();
                    return Some(Err(ReflectorError::decode("a watch decoding helper ended early")));
                }
            }
        }
    }

    /// Whether the front unit is a batch still out with its helper.
    fn next_ready_is_pending(&self) -> bool {
        matches!(self.units.front(), Some(Unit::Pending { seq, .. }) if !self.answers.contains_key(seq))
    }
}
