//! Unit tests of the decode threads: which thread decodes a watch or a list, that events, errors
//! and items cross in order, and that dropping the stream or the list ends the thread.

use std::time::Duration;

use bytes::Bytes;
use kube::core::DynamicObject;
use serde::Deserialize;
use serde_json::Value;

use super::*;
use crate::watch_decode::tests::{FRAMES, rv};

/// A body stream of `frames` (then, if `hang`, no end) that records the name of the thread
/// polling it and reports on `dropped` when it is dropped.
fn recorded_body(
    frames: Vec<&'static str>,
    hang: bool,
    polled_on: Arc<std::sync::Mutex<Vec<String>>>,
    dropped: std::sync::mpsc::Sender<()>,
) -> BodyChunks {
    struct OnDrop(std::sync::mpsc::Sender<()>);
    impl Drop for OnDrop {
        fn drop(&mut self) {
            let _ = self.0.send(());
        }
    }
    let guard = OnDrop(dropped);
    let chunks = futures::stream::iter(frames).map(move |f| {
        let name = std::thread::current().name().unwrap_or("").to_owned();
        polled_on.lock().unwrap().push(name);
        Ok(Bytes::from(format!("{f}\n")))
    });
    let tail = if hang { futures::stream::pending().boxed() } else { futures::stream::empty().boxed() };
    chunks
        .chain(tail)
        .map(move |c| {
            let _ = &guard;
            c
        })
        .boxed()
}

/// On a multi-threaded runtime a watch-list's initial events are read and decoded on a thread of
/// its own, which hands the events over in order and ends with the stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_is_decoded_on_a_thread_of_its_own_on_a_multi_threaded_runtime() {
    let polled_on = Arc::default();
    let (dropped, was_dropped) = std::sync::mpsc::channel();
    let body = recorded_body(FRAMES.to_vec(), false, Arc::clone(&polled_on), dropped);
    let events: Vec<_> =
        events_from_chunks::<DynamicObject>(body, Decoding::default(), false, true).collect::<Vec<_>>().await;
    let rvs: Vec<_> = events.iter().map(|e| rv(e.as_ref().unwrap()).to_owned()).collect();
    assert_eq!(rvs, ["1", "2", "3"]);
    assert_eq!(*polled_on.lock().unwrap(), ["kcache-watch-decode"; 3]);
    was_dropped.recv_timeout(Duration::from_secs(30)).expect("the thread drops the body when it ends");
}

/// The bookmark that ends a watch-list's initial events.
const END_BOOKMARK: &str = r#"{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"2","annotations":{"k8s.io/initial-events-end":"true"}}}}"#;

/// With `live_events_in_task`, a watch-list's initial events are decoded on the decoding thread;
/// at the bookmark that ends them the thread hands the stream back, and the live events after it are read and decoded in
/// the reader's task, where a chunk wakes no other thread. (client-go's `StreamWatcher.receive`
/// decodes every event in a goroutine of its own and hands each over on a channel; this is
/// kcache's own hand-off, with no upstream counterpart.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_events_after_a_watch_lists_initial_events_are_decoded_in_the_readers_task() {
    let polled_on = Arc::default();
    let (dropped, was_dropped) = std::sync::mpsc::channel();
    let frames = vec![FRAMES[0], END_BOOKMARK, FRAMES[1], FRAMES[2]];
    let body = recorded_body(frames, false, Arc::clone(&polled_on), dropped);
    let decoding = Decoding { live_events_in_task: true, ..Decoding::default() };
    let events: Vec<_> =
        events_from_chunks::<DynamicObject>(body, decoding, false, true).collect::<Vec<_>>().await;
    assert_eq!(events.len(), 4);
    assert!(matches!(events[1], Ok(WatchEvent::Bookmark(ref b)) if b.initial_events_end));
    let rvs: Vec<_> =
        [&events[0], &events[2], &events[3]].iter().map(|e| rv(e.as_ref().unwrap()).to_owned()).collect();
    assert_eq!(rvs, ["1", "2", "3"]);
    let polled_on = polled_on.lock().unwrap().clone();
    assert_eq!(polled_on[..2], ["kcache-watch-decode"; 2], "the initial events, on the thread");
    assert!(
        polled_on[2..].iter().all(|t| t != "kcache-watch-decode"),
        "the live events, in the reader's task: {polled_on:?}"
    );
    was_dropped.recv_timeout(Duration::from_secs(30)).expect("the body is dropped with the stream");
}

/// With `live_events_in_task`, a plain watch (after a LIST, no initial events) is decoded in the
/// reader's task from its first event, also on a multi-threaded runtime. (No upstream
/// counterpart, see above.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_watch_is_decoded_in_the_readers_task() {
    let polled_on = Arc::default();
    let (dropped, _was_dropped) = std::sync::mpsc::channel();
    let body = recorded_body(FRAMES.to_vec(), false, Arc::clone(&polled_on), dropped);
    let decoding = Decoding { live_events_in_task: true, ..Decoding::default() };
    let events: Vec<_> =
        events_from_chunks::<DynamicObject>(body, decoding, false, false).collect::<Vec<_>>().await;
    assert_eq!(events.len(), 3);
    let here = std::thread::current().name().unwrap_or("").to_owned();
    assert_eq!(*polled_on.lock().unwrap(), [here.clone(), here.clone(), here]);
}

/// Dropping the stream ends its decoding thread (and drops the body, closing the
/// connection) also while that thread waits for bytes that never come, as for a hung watch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_stream_ends_a_decoding_thread_that_waits_for_bytes() {
    let (dropped, was_dropped) = std::sync::mpsc::channel();
    let body = recorded_body(FRAMES[..1].to_vec(), true, Arc::default(), dropped);
    let mut events = events_from_chunks::<DynamicObject>(body, Decoding::default(), false, true);
    let first = events.next().await.unwrap().unwrap();
    assert_eq!(rv(&first), "1");
    assert!(was_dropped.try_recv().is_err(), "the body is still being read");
    drop(events);
    was_dropped.recv_timeout(Duration::from_secs(30)).expect("the body was never dropped");
}

/// Where the clock may be paused (a current-thread runtime) the stream decodes in its own
/// task; errors and the frame left at the end come through either way.
#[tokio::test(flavor = "current_thread")]
async fn a_current_thread_runtime_decodes_in_the_streams_task() {
    let polled_on = Arc::default();
    let (dropped, _was_dropped) = std::sync::mpsc::channel();
    let body = recorded_body(
        vec![FRAMES[0], r#"{"type":"SURPRISE","object":{}}"#],
        false,
        Arc::clone(&polled_on),
        dropped,
    );
    let events: Vec<_> =
        events_from_chunks::<DynamicObject>(body, Decoding::default(), false, true).collect::<Vec<_>>().await;
    assert_eq!(rv(events[0].as_ref().unwrap()), "1");
    assert!(matches!(&events[1], Err(ReflectorError::UnknownEventType(t)) if t == "SURPRISE"));
    let here = std::thread::current().name().unwrap_or("").to_owned();
    assert_eq!(*polled_on.lock().unwrap(), [here.clone(), here]);
}

/// Errors cross from the decoding thread like events: a bad frame ends the stream with
/// a classified error after the events before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decoding_threads_error_reaches_the_reflector_in_order() {
    let (dropped, _was_dropped) = std::sync::mpsc::channel();
    let body = recorded_body(
        vec![FRAMES[0], r#"{"type":"ADDED","object":{"#, FRAMES[1]],
        false,
        Arc::default(),
        dropped,
    );
    let events: Vec<_> =
        events_from_chunks::<DynamicObject>(body, Decoding::default(), false, true).collect::<Vec<_>>().await;
    assert_eq!(rv(events[0].as_ref().unwrap()), "1");
    assert_eq!(events[1].as_ref().unwrap_err().kind(), crate::ErrorKind::Decode);
}

/// An item that remembers the name of the thread that decoded it.
#[derive(Debug)]
struct DecodedOn(String);

impl<'de> Deserialize<'de> for DecodedOn {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(d)?;
        Ok(DecodedOn(std::thread::current().name().unwrap_or("").to_owned()))
    }
}

const LIST: &str = r#"{"metadata":{"resourceVersion":"7","continue":"c"},"items":[{},{}]}"#;

/// A list body in chunks of `size` bytes.
fn chunked(body: &'static [u8], size: usize) -> BodyChunks {
    futures::stream::iter(body.chunks(size).map(|c| Ok(Bytes::from_static(c)))).boxed()
}

/// On a multi-threaded runtime a list body is read and decoded on a thread of its own, never
/// on a runtime worker, while it arrives; the page is the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_is_decoded_off_the_runtime_on_a_multi_threaded_runtime() {
    let page =
        decode_list_body::<DecodedOn>(chunked(LIST.as_bytes(), 5), ListBodyDecoder::new(None, false, 0))
            .await
            .unwrap();
    assert_eq!(page.resource_version, "7");
    assert_eq!(page.continue_token.as_deref(), Some("c"));
    let threads: Vec<_> = page.items.iter().map(|i| i.0.as_str()).collect();
    assert_eq!(threads, ["kcache-list-decode"; 2]);
    let e = decode_list_body::<DecodedOn>(chunked(b"{\"items\":[{", 3), ListBodyDecoder::new(None, false, 0))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::Decode);
}

/// On a current-thread runtime (the paused-clock tests) the list is decoded in the task.
#[tokio::test(flavor = "current_thread")]
async fn a_current_thread_runtime_decodes_a_list_in_the_task() {
    let page =
        decode_list_body::<DecodedOn>(chunked(LIST.as_bytes(), 7), ListBodyDecoder::new(None, false, 0))
            .await
            .unwrap();
    let here = std::thread::current().name().unwrap_or("").to_owned();
    assert_eq!(page.items.len(), 2);
    assert!(page.items.iter().all(|i| i.0 == here));
}

/// Each item is decoded as soon as its last byte is in, before the rest of the body has
/// arrived: the decoder never holds the whole body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_items_are_decoded_while_the_body_arrives() {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<std::result::Result<Bytes, kube::Error>>();
    let body = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|c| (c, rx)) }).boxed();
    let decoding = tokio::spawn(decode_list_body::<DecodedOn>(body, ListBodyDecoder::new(None, false, 0)));
    let mut decoder = ListDecoder::<Value>::new(false);
    decoder.push(br#"{"metadata":{"resourceVersion":"9"},"items":[{"a":1},{"b":"]}"#).unwrap();
    assert_eq!(decoder.items_decoded(), 1, "the first item is decoded before the second is complete");
    decoder.push(br#""}]}"#).unwrap();
    assert_eq!(decoder.items_decoded(), 2);
    assert_eq!(decoder.buffered(), 0, "nothing of a decoded item is kept");
    let page = decoder.finish().unwrap();
    assert_eq!(page.resource_version, "9");
    tx.send(Ok(Bytes::from_static(LIST.as_bytes()))).unwrap();
    drop(tx);
    assert_eq!(decoding.await.unwrap().unwrap().items.len(), 2);
}

/// Dropping a list in progress ends its decoding thread and drops the body (closing the
/// connection), also while the thread waits for bytes that never come.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_list_in_progress_ends_its_decoding_thread() {
    let (dropped, was_dropped) = std::sync::mpsc::channel();
    let body = recorded_body(vec![r#"{"items":[{}"#], true, Arc::default(), dropped);
    let list = tokio::spawn(decode_list_body::<DecodedOn>(body, ListBodyDecoder::new(None, false, 0)));
    tokio::task::yield_now().await;
    list.abort();
    assert!(list.await.unwrap_err().is_cancelled());
    was_dropped.recv_timeout(Duration::from_secs(30)).expect("the body was never dropped");
}

/// A transport error while the body arrives is classified as one, not as a decode error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_body_that_breaks_is_a_transport_error() {
    let broken = futures::stream::iter(vec![
        Ok(Bytes::from_static(br#"{"items":[{}"#)),
        Err(kube::Error::Service("connection reset".into())),
    ])
    .boxed();
    let e = decode_list_body::<DecodedOn>(broken, ListBodyDecoder::new(None, false, 0)).await.unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::Transport);
}

/// By default the whole watch is decoded on its thread: a watch-list's live events after the
/// bookmark that ends its initial events, and every event of a plain watch. (No upstream
/// counterpart, see above.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_the_whole_watch_is_decoded_on_its_thread() {
    for (frames, initial_events) in
        [(vec![FRAMES[0], END_BOOKMARK, FRAMES[1], FRAMES[2]], true), (FRAMES.to_vec(), false)]
    {
        let polled_on = Arc::default();
        let (dropped, _was_dropped) = std::sync::mpsc::channel();
        let n = frames.len();
        let body = recorded_body(frames, false, Arc::clone(&polled_on), dropped);
        let events: Vec<_> =
            events_from_chunks::<DynamicObject>(body, Decoding::default(), false, initial_events)
                .collect::<Vec<_>>()
                .await;
        assert_eq!(events.len(), n);
        assert!(
            polled_on.lock().unwrap().iter().all(|t| t == "kcache-watch-decode"),
            "initial_events {initial_events}: {:?}",
            polled_on.lock().unwrap()
        );
    }
}

/// A stream of `items` that is not ready before each of them (it wakes itself at once): the
/// shape of a watch whose bytes come in many small chunks, each decoded as it arrives.
fn trickle<T: Send + 'static>(items: Vec<T>) -> futures::stream::BoxStream<'static, T> {
    let mut items = std::collections::VecDeque::from(items);
    let mut ready = false;
    futures::stream::poll_fn(move |cx| {
        if !ready {
            ready = true;
            cx.waker().wake_by_ref();
            return std::task::Poll::Pending;
        }
        ready = false;
        std::task::Poll::Ready(items.pop_front())
    })
    .boxed()
}

fn added(i: u32) -> Result<WatchEvent<u32>> {
    Ok(WatchEvent::Added(Arc::new(i)))
}

fn end_bookmark() -> Result<WatchEvent<u32>> {
    Ok(WatchEvent::Bookmark(crate::lister_watcher::Bookmark {
        resource_version: "9".into(),
        initial_events_end: true,
    }))
}

/// A watch-list's initial events trickling in, each in its own chunk, go to the reflector in
/// one batch up to the bookmark that ends them, not one batch (one wake-up of the reflector's
/// worker) per chunk; a live change ends a held batch. (No upstream counterpart: client-go's
/// `StreamWatcher.receive` hands every event over on a channel by itself.)
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_watch_lists_initial_events_are_handed_over_in_large_batches() {
    let mut events: Vec<_> = (0..100).map(added).collect();
    events.push(end_bookmark());
    events.push(added(100));
    let mut stream = trickle(events);
    let mut batch = vec![stream.next().await.unwrap()];
    let filled = fill_batch(&mut stream, &mut batch, INITIAL_BATCH, true, true).await;
    assert_eq!(filled, Filled { finished: false, ended: true });
    assert_eq!(batch.len(), 101, "the initial events and their bookmark in one batch");

    // Live events are handed over as they come, as before.
    let mut stream = trickle((0..10).map(added).collect());
    let mut batch = vec![stream.next().await.unwrap()];
    let filled = fill_batch(&mut stream, &mut batch, BATCH, false, true).await;
    assert_eq!(filled, Filled { finished: false, ended: false });
    assert_eq!(batch.len(), 1);

    // Anything but an initial event stops the holding: here a MODIFIED.
    let mut events: Vec<_> = (0..3).map(added).collect();
    events.push(Ok(WatchEvent::Modified(Arc::new(3))));
    events.extend((4..10).map(added));
    let mut stream = trickle(events);
    let mut batch = vec![stream.next().await.unwrap()];
    fill_batch(&mut stream, &mut batch, INITIAL_BATCH, true, true).await;
    assert_eq!(batch.len(), 4);
}

/// A held batch is handed over once the stream pauses for longer than `INITIAL_HOLD`: a server
/// that stops mid-way through the initial events delays them by that much at most, and the end
/// of the stream ends the batch.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_held_batch_goes_when_the_stream_pauses_or_ends() {
    let mut stream = futures::stream::iter((0..3).map(added)).chain(futures::stream::pending()).boxed();
    let mut batch = vec![stream.next().await.unwrap()];
    let filled = fill_batch(&mut stream, &mut batch, INITIAL_BATCH, true, true).await;
    assert_eq!((filled, batch.len()), (Filled { finished: false, ended: false }, 3));

    let mut stream = futures::stream::iter((0..3).map(added)).boxed();
    let mut batch = vec![stream.next().await.unwrap()];
    let filled = fill_batch(&mut stream, &mut batch, INITIAL_BATCH, true, true).await;
    assert_eq!((filled, batch.len()), (Filled { finished: true, ended: false }, 3));
}
