//! Fuzz target: the streaming list decoder (`ListDecoder`, as a list request runs it) on
//! arbitrary bytes cut into arbitrary chunks.
//!
//! Checks: no panic; every failure is classified `Decode` (but for a `Status` body, which is
//! the error it describes); the outcome (the items, or the error's kind) does not depend on
//! where the body was cut into chunks; and whenever both the streaming decoder and serde's one pass
//! over the whole body (how lists were decoded before) accept a body, they agree on the items,
//! the resource version and the continue token.
#![no_main]

use kcache_reflector::{__fuzz, ErrorKind};
use libfuzzer_sys::fuzz_target;

#[path = "chunking.rs"]
mod chunking;

fuzz_target!(|data: &[u8]| {
    // The first byte chooses the chunking; the rest is the response body.
    let Some((&seed, body)) = data.split_first() else { return };
    let whole = __fuzz::list_page(&[body]);
    if let Err(e) = &whole
        && !is_status(body)
    {
        assert_eq!(e.kind(), ErrorKind::Decode, "a bad list must be a decode error: {e}");
    }
    let pieces = chunking::cut(seed, body);
    let chunked = __fuzz::list_page(&pieces);
    assert_eq!(summary(&whole), summary(&chunked), "outcome depends on chunk boundaries");
    if let (Ok(ours), Ok(oracle)) = (&whole, __fuzz::list_page_whole(body)) {
        assert_eq!(ours.items, oracle.items, "items differ from a whole-body decode");
        assert_eq!(ours.resource_version, oracle.resource_version);
        assert_eq!(ours.continue_token, oracle.continue_token);
    }
});

/// Whether `body` is a JSON object whose `kind` is `Status`: an error response, whose error is
/// the one the `Status` describes rather than a decode error.
fn is_status(body: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(body)
        .is_ok_and(|v| v.get("kind").and_then(serde_json::Value::as_str) == Some("Status"))
}

/// A comparable rendering of an outcome.
fn summary(outcome: &kcache_reflector::Result<kcache_reflector::ListPage<serde_json::Value>>) -> String {
    match outcome {
        Ok(page) => format!("ok {:?} {:?} {:?}", page.items, page.resource_version, page.continue_token),
        // The kind, not the message: a malformed body fails as a decode error however it is
        // cut, but where serde notices a fault can move with the cut (a string cut inside an
        // escape is reported at its end, a whole one at the bad byte), and with it the message's
        // position.
        Err(e) => format!("err {:?}", e.kind()),
    }
}
