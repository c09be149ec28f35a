//! What a reconcile asks for next: kube-runtime's `Action`, used as is, and [`Retry`], the error
//! policy's answer.

use std::time::Duration;

pub use kube_runtime::controller::Action;

/// What happens to a key whose reconcile failed: the answer of an
/// [`error_policy`](crate::Controller::error_policy).
///
/// Without an error policy every failure is [`RateLimited`](Self::RateLimited), as in client-go's
/// and controller-runtime's controllers.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use kcache_controller::Retry;
///
/// #[derive(Debug)]
/// enum Error { Invalid, Transient }
///
/// fn policy(error: &Error) -> Retry {
///     match error {
///         // Retrying cannot help: wait for the object to change (controller-runtime's TerminalError).
///         Error::Invalid => Retry::Never,
///         // kube-runtime's usual error_policy: a fixed delay.
///         Error::Transient => Retry::After(Duration::from_secs(5)),
///     }
/// }
/// assert_eq!(policy(&Error::Invalid), Retry::Never);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Retry {
    /// Requeue after the rate limiter's delay for this key: per-key exponential backoff
    /// (client-go's `AddRateLimited`, controller-runtime's behaviour on an error). The default.
    #[default]
    RateLimited,
    /// Requeue after this delay (kube-runtime's `error_policy` returning `Action::requeue`). The
    /// key's backoff history is kept, so a later rate-limited retry continues from it.
    After(Duration),
    /// Do not retry: the key's backoff history is forgotten, and the key waits for its next
    /// event (controller-runtime's `reconcile.TerminalError`; kube-runtime's `error_policy`
    /// returning `Action::await_change()`).
    Never,
}

/// Requeue delay used when an [`Action`]'s delay cannot be read (see [`requeue_after`]).
pub const FALLBACK_REQUEUE: Duration = Duration::from_secs(300);

/// The delay an [`Action`] asks for: `Some(d)` for `Action::requeue(d)`, `None` for
/// `Action::await_change()`.
///
/// kube-runtime keeps the delay private (only its own `Controller` reads it), so it is read from
/// `Action`'s `Debug` output (`Action { requeue_after: Some(5s) }`), in which `Duration` prints
/// every significant digit: the round trip is exact. This crate's tests pin that format for
/// kube-runtime 5; should a later kube-runtime print something else, the delay becomes
/// [`FALLBACK_REQUEUE`] and an error is logged, rather than a requeue being lost.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use kcache_controller::{Action, requeue_after};
///
/// assert_eq!(requeue_after(&Action::await_change()), None);
/// assert_eq!(requeue_after(&Action::requeue(Duration::from_millis(1500))), Some(Duration::from_millis(1500)));
/// ```
pub fn requeue_after(action: &Action) -> Option<Duration> {
    if *action == Action::await_change() {
        return None;
    }
    let text = format!("{action:?}");
    match parse_action_debug(&text) {
        Some(d) => d,
        None => {
            tracing::error!(
                action = %text,
                fallback = ?FALLBACK_REQUEUE,
                "cannot read the requeue delay of kube-runtime's Action; requeueing after the fallback"
            );
            Some(FALLBACK_REQUEUE)
        }
    }
}

/// Parses `Action { requeue_after: None }` or `Action { requeue_after: Some(<duration>) }`.
fn parse_action_debug(text: &str) -> Option<Option<Duration>> {
    let inner = text.strip_prefix("Action { requeue_after: ")?.strip_suffix(" }")?;
    if inner == "None" {
        return Some(None);
    }
    let d = inner.strip_prefix("Some(")?.strip_suffix(')')?;
    parse_duration_debug(d).map(Some)
}

/// Parses `Duration`'s `Debug` output: a decimal number and one of `s`, `ms`, `µs`, `ns`.
fn parse_duration_debug(text: &str) -> Option<Duration> {
    let (number, nanos_per_unit) = if let Some(n) = text.strip_suffix("ns") {
        (n, 1u128)
    } else if let Some(n) = text.strip_suffix("µs") {
        (n, 1_000)
    } else if let Some(n) = text.strip_suffix("ms") {
        (n, 1_000_000)
    } else {
        (text.strip_suffix('s')?, 1_000_000_000)
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty()
        || !whole.bytes().all(|b| b.is_ascii_digit())
        || !fraction.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let mut nanos = whole.parse::<u128>().ok()?.checked_mul(nanos_per_unit)?;
    let mut scale = nanos_per_unit;
    for digit in fraction.bytes() {
        scale /= 10;
        if scale == 0 {
            // More digits than the unit has nanoseconds: not Duration's output.
            return None;
        }
        nanos += u128::from(digit - b'0') * scale;
    }
    let secs = u64::try_from(nanos / 1_000_000_000).ok()?;
    Some(Duration::new(secs, (nanos % 1_000_000_000) as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_duration_round_trips() {
        let cases = [
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::from_nanos(999),
            Duration::from_micros(1),
            Duration::from_nanos(1_500),
            Duration::from_millis(5),
            Duration::from_nanos(5_000_001),
            Duration::from_secs(1),
            Duration::from_millis(1_500),
            Duration::new(1, 1),
            Duration::from_secs(3600),
            Duration::new(u64::MAX, 999_999_999),
        ];
        for d in cases {
            assert_eq!(requeue_after(&Action::requeue(d)), Some(d), "{d:?}");
        }
        assert_eq!(requeue_after(&Action::await_change()), None);
    }

    #[test]
    fn unknown_formats_are_rejected() {
        for text in [
            "",
            "Action { requeue_after: Some(5) }",
            "Action { requeue_after: Some(1.5h) }",
            "Action { next: None }",
        ] {
            assert_eq!(parse_action_debug(text), None, "{text}");
        }
    }
}
