//! Fuzz target: the watch decoding path (frame splitter and event decoder, exactly as a live
//! watch stream runs them) on arbitrary bytes cut into arbitrary chunks.
//!
//! Checks: no panic; one outcome per non-blank line; every outcome is a decoded event or an
//! error classified as a bad frame (`Decode`, `UnknownEventType`, `MissingResourceVersion`);
//! the outcomes do not depend on where the body was cut into chunks.
#![no_main]

use bytes::Bytes;
use kcache_reflector::{__fuzz, ErrorKind, Result, WatchEvent};
use kube_core::DynamicObject;
use libfuzzer_sys::fuzz_target;

#[path = "chunking.rs"]
mod chunking;

fuzz_target!(|data: &[u8]| {
    // The first byte chooses the chunking; the rest is the response body.
    let Some((&seed, body)) = data.split_first() else { return };
    let whole = __fuzz::watch_events::<DynamicObject>(vec![Bytes::copy_from_slice(body)]);

    let lines = body.split(|b| *b == b'\n').filter(|l| !l.iter().all(u8::is_ascii_whitespace)).count();
    assert_eq!(whole.len(), lines, "one outcome per non-blank line");
    for outcome in &whole {
        if let Err(e) = outcome {
            assert!(
                matches!(
                    e.kind(),
                    ErrorKind::Decode | ErrorKind::UnknownEventType | ErrorKind::MissingResourceVersion
                ),
                "a bad frame must be classified as one, got {:?}: {e}",
                e.kind()
            );
        }
    }

    let chunked = __fuzz::watch_events::<DynamicObject>(
        chunking::cut(seed, body).into_iter().map(Bytes::copy_from_slice).collect(),
    );
    assert_eq!(summary(&whole), summary(&chunked), "outcome depends on chunk boundaries");
});

/// A comparable rendering of the outcomes.
fn summary(outcomes: &[Result<WatchEvent<DynamicObject>>]) -> Vec<String> {
    outcomes
        .iter()
        .map(|o| match o {
            Ok(ev) => format!("ok {ev:?}"),
            Err(e) => format!("err {:?} {e}", e.kind()),
        })
        .collect()
}
