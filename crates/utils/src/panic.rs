//! The message of a caught panic, for logs and errors.

use std::any::Any;

/// The message of a panic payload, as `std::panic::catch_unwind` or tokio's
/// `JoinError::into_panic` hands it over: the text of a `panic!` with a literal (a
/// `&'static str` payload) or with a format string (a `String`), or `None` for any other payload
/// (`std::panic::panic_any`). std's `PanicHookInfo::payload_as_str` does the same inside a hook.
///
/// Pass the payload, not the box around it: `&*payload` for a `Box<dyn Any + Send>`. A
/// `&Box<dyn Any + Send>` is an `&dyn Any` too, and a box is no string.
///
/// # Examples
///
/// ```
/// use kcache_utils::panic_message;
///
/// let payload = std::panic::catch_unwind(|| panic!("reconcile {}", "failed")).unwrap_err();
/// assert_eq!(panic_message(&*payload), Some("reconcile failed"));
///
/// let payload = std::panic::catch_unwind(|| std::panic::panic_any(42)).unwrap_err();
/// assert_eq!(panic_message(&*payload), None);
/// ```
pub fn panic_message(payload: &dyn Any) -> Option<&str> {
    payload
        .downcast_ref::<&'static str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_and_formatted_messages() {
        let literal: Box<dyn Any + Send> = Box::new("boom");
        let formatted: Box<dyn Any + Send> = Box::new(format!("boom {}", 2));
        assert_eq!(panic_message(&*literal), Some("boom"));
        assert_eq!(panic_message(&*formatted), Some("boom 2"));
        assert_eq!(panic_message(&7_u8), None);
    }
}
