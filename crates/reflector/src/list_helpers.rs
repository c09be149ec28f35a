//! A protobuf list's items decoded on more than one thread: the list's decoding thread hands
//! batches of items to helper threads while it reads on, and puts the objects back together in
//! the order the server sent them.
//!
//! Why: on a protobuf list, decoding the items is nearly all of a sync's CPU (73% of the client
//! process's instructions for 50k ConfigMaps; the store's replace is 7.5%), and it ran on one
//! thread. Protobuf frames every item with its length, so the items can be cut apart without
//! parsing them, and each decodes on its own.
//!
//! How: the first [`BATCH`] items are decoded on the list's thread as they arrive (a list of up
//! to 256 items starts no thread). After that, items are gathered into batches. A full batch
//! goes to a helper that has fewer than [`BACKLOG`] batches waiting, else the list's thread
//! decodes it itself, so the work balances whether or not a helper gets a core. Every batch is
//! numbered; [`Helpers::finish`] waits for the helpers and returns the objects in the server's
//! order.
//!
//! Errors keep their order too. A batch stops at its first bad item; the error returned is that
//! of the earliest bad item in the list, whichever thread found it, and before a framing error
//! found further on is returned, every batch before it is settled. So the list decodes to the
//! same items, or the same error, as on one thread (`parallel_and_serial_lists_agree`).

use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, channel};

use kcache_protobuf::{DecodeOptions, Decoder};
use serde::de::DeserializeOwned;

use crate::error::{ReflectorError, Result};

/// Items in a batch.
pub(crate) const BATCH: usize = 256;

/// Batches a helper may have waiting before the list's own thread decodes the next one itself.
pub(crate) const BACKLOG: usize = 2;

/// A batch of items, copied out of the body: `bytes[ends[i - 1]..ends[i]]` is item `i`.
pub(crate) struct Batch {
    pub(crate) seq: usize,
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Batch {
    pub(crate) fn new(seq: usize) -> Self {
        Self { seq, bytes: Vec::new(), ends: Vec::new() }
    }

    /// Appends an item.
    pub(crate) fn push(&mut self, item: &[u8]) {
        self.bytes.extend_from_slice(item);
        self.ends.push(self.bytes.len());
    }

    /// The batch filled so far, if it holds any item, leaving the next one (numbered one more,
    /// empty) in its place.
    pub(crate) fn take(&mut self) -> Option<Batch> {
        if self.ends.is_empty() {
            return None;
        }
        Some(std::mem::replace(self, Batch::new(self.seq + 1)))
    }

    /// How many items it holds.
    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    /// Its items, in order.
    pub(crate) fn items(&self) -> impl Iterator<Item = &[u8]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts.zip(self.ends.iter().copied()).map(|(s, e)| &self.bytes[s..e])
    }
}

/// A helper's answer: which helper, which batch, and the batch's objects or the error of its
/// first bad item.
type Decoded<K> = (usize, usize, Result<Vec<Arc<K>>>);

/// Decodes every item of `batch`, stopping at the first bad one.
fn decode_batch<K: DeserializeOwned + 'static>(
    decoder: Decoder<K>,
    options: DecodeOptions,
    batch: &Batch,
) -> Result<Vec<Arc<K>>> {
    let mut out = Vec::with_capacity(batch.len());
    for item in batch.items() {
        let obj = decoder.decode(item, options).map_err(|e| item_error(&e))?;
        out.push(Arc::new(obj));
    }
    Ok(out)
}

/// The error of an item that does not decode (as the list's thread reports it).
pub(crate) fn item_error(e: &kcache_protobuf::Error) -> ReflectorError {
    ReflectorError::decode(format!("protobuf list item: {e}"))
}

/// One helper thread: where its batches go (`None` once the list is settled, which ends the
/// thread), and how many it has not answered yet.
struct Helper {
    tx: Option<Sender<Batch>>,
    waiting: usize,
}

/// The items of one protobuf list, decoded by the list's thread and up to `wanted` helpers.
pub(crate) struct Helpers<K> {
    decoder: Decoder<K>,
    options: DecodeOptions,
    /// Helper threads to start once the list has more than `batch` items.
    wanted: usize,
    /// Items per batch ([`BATCH`]; smaller in tests).
    batch: usize,
    helpers: Vec<Helper>,
    /// Where the helpers send their decoded batches; `None` once the list is settled, so that
    /// the channel closes when the last helper ends (one that panicked included) and waiting
    /// for it cannot hang.
    done_tx: Option<Sender<Decoded<K>>>,
    done_rx: Receiver<Decoded<K>>,
    /// Items decoded before any batch: the start of the list.
    head: Vec<Arc<K>>,
    /// Whether items now go into batches (after the first `batch` items, with helpers wanted).
    batching: bool,
    /// The batch being filled.
    filling: Batch,
    /// Decoded batches, in any order.
    decoded: Vec<(usize, Vec<Arc<K>>)>,
    /// The earliest bad batch seen so far, with its error.
    failed: Option<(usize, ReflectorError)>,
}

impl<K: DeserializeOwned + Send + Sync + 'static> Helpers<K> {
    /// Items decoded with `decoder` and `options`, by up to `wanted` helper threads besides the
    /// caller's (none: all on the caller's), in batches of `batch` items.
    pub(crate) fn new(decoder: Decoder<K>, options: DecodeOptions, wanted: usize, batch: usize) -> Self {
        let (done_tx, done_rx) = channel();
        Self {
            decoder,
            options,
            wanted,
            batch: batch.max(1),
            helpers: Vec::new(),
            done_tx: Some(done_tx),
            done_rx,
            head: Vec::new(),
            batching: false,
            filling: Batch::new(0),
            decoded: Vec::new(),
            failed: None,
        }
    }

    /// Takes the next item of the list.
    ///
    /// # Errors
    ///
    /// The error of the earliest bad item found so far (on any thread): the list stops there.
    pub(crate) fn push(&mut self, item: &[u8]) -> Result<()> {
        if !self.batching && (self.wanted == 0 || self.head.len() < self.batch) {
            let obj = self.decoder.decode(item, self.options).map_err(|e| item_error(&e))?;
            self.head.push(Arc::new(obj));
            return Ok(());
        }
        self.batching = true;
        self.filling.push(item);
        if self.filling.len() < self.batch {
            return Ok(());
        }
        self.hand_over();
        self.collect_ready();
        if self.failed.is_some() {
            // Every batch before the bad one must be decoded, to return the first bad item.
            return self.settle();
        }
        Ok(())
    }

    /// Sends the batch being filled to a helper with room, or decodes it here.
    fn hand_over(&mut self) {
        let Some(batch) = self.filling.take() else { return };
        if self.helpers.len() < self.wanted {
            self.start_helper();
        }
        let batch = match self.helpers.iter_mut().filter(|h| h.waiting < BACKLOG).min_by_key(|h| h.waiting) {
            Some(Helper { tx: Some(tx), waiting }) => match tx.send(batch) {
                Ok(()) => {
                    *waiting += 1;
                    return;
                }
                // The helper is gone (it never is before the list ends): decode it here.
                Err(e) => e.0,
            },
            Some(_) => batch,
            None => batch,
        };
        let seq = batch.seq;
        let decoded = decode_batch(self.decoder, self.options, &batch);
        self.record(seq, decoded);
    }

    /// Starts one helper thread; if none can be started, the list's thread decodes everything.
    fn start_helper(&mut self) {
        let Some(done) = self.done_tx.clone() else {
            self.wanted = self.helpers.len();
            return;
        };
        let (tx, rx) = channel::<Batch>();
        let index = self.helpers.len();
        let (decoder, options) = (self.decoder, self.options);
        let started = std::thread::Builder::new().name("kcache-list-decode-helper".into()).spawn(move || {
            while let Ok(batch) = rx.recv() {
                let decoded = decode_batch(decoder, options, &batch);
                if done.send((index, batch.seq, decoded)).is_err() {
                    return;
                }
            }
        });
        match started {
            Ok(_) => self.helpers.push(Helper { tx: Some(tx), waiting: 0 }),
            Err(e) => {
                tracing::debug!(error = %e, "cannot start a list decoding helper; decoding on one thread");
                self.wanted = self.helpers.len();
            }
        }
    }

    /// Keeps a decoded batch (or its error, if it is the earliest so far).
    fn record(&mut self, seq: usize, decoded: Result<Vec<Arc<K>>>) {
        match decoded {
            Ok(objects) => self.decoded.push((seq, objects)),
            Err(e) => {
                if self.failed.as_ref().is_none_or(|(first, _)| seq < *first) {
                    self.failed = Some((seq, e));
                }
            }
        }
    }

    /// Takes the batches the helpers have finished, without waiting.
    fn collect_ready(&mut self) {
        while let Ok((helper, seq, decoded)) = self.done_rx.try_recv() {
            self.answered(helper);
            self.record(seq, decoded);
        }
    }

    /// Counts an answer from helper `index`.
    fn answered(&mut self, index: usize) {
        if let Some(h) = self.helpers.get_mut(index) {
            h.waiting = h.waiting.saturating_sub(1);
        }
    }

    /// Decodes the batch being filled, waits for every batch still out, and returns the
    /// earliest error if there is one.
    ///
    /// # Errors
    ///
    /// The error of the earliest bad item, or that a helper ended without answering.
    pub(crate) fn settle(&mut self) -> Result<()> {
        self.hand_over();
        // No batch follows: each helper ends once it has answered what it has, and the answers'
        // channel closes with the last one.
        self.wanted = 0;
        self.done_tx = None;
        for h in &mut self.helpers {
            h.tx = None;
        }
        while self.helpers.iter().any(|h| h.waiting > 0) {
            match self.done_rx.recv() {
                Ok((helper, seq, decoded)) => {
                    self.answered(helper);
                    self.record(seq, decoded);
                }
                // A helper ended without answering (a decoder that panicked): an error, not a hang.
                Err(_) => return Err(ReflectorError::decode("a list decoding helper ended early")),
            }
        }
        match self.failed.take() {
            Some((_, e)) => Err(e),
            None => Ok(()),
        }
    }

    /// Every item's object, in the order the items came.
    ///
    /// # Errors
    ///
    /// As [`Self::settle`].
    pub(crate) fn finish(mut self) -> Result<Vec<Arc<K>>> {
        self.settle()?;
        let mut decoded = std::mem::take(&mut self.decoded);
        decoded.sort_unstable_by_key(|(seq, _)| *seq);
        let mut items = std::mem::take(&mut self.head);
        items.reserve(decoded.iter().map(|(_, b)| b.len()).sum());
        for (_, batch) in decoded {
            items.extend(batch);
        }
        Ok(items)
    }
}
