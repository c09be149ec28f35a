//! [`Captured`]: what a tracing subscriber writes, collected for a test to read.

use std::io::Write;
use std::sync::{Arc, Mutex};

use tracing_subscriber::fmt::MakeWriter;

/// Collects everything written to it, from every thread; give it to a `tracing_subscriber::fmt`
/// subscriber as its writer and read the lines back with [`text`](Self::text).
///
/// ```
/// use kcache_test_support::capture::Captured;
///
/// let captured = Captured::default();
/// let subscriber = tracing_subscriber::fmt().with_ansi(false).with_writer(captured.clone()).finish();
/// tracing::subscriber::with_default(subscriber, || tracing::info!("hello"));
/// assert!(captured.text().contains("hello"));
/// ```
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

impl std::fmt::Debug for Captured {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Captured")
            .field("bytes", &self.0.lock().unwrap_or_else(|e| e.into_inner()).len())
            .finish()
    }
}

impl Captured {
    /// Everything written so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }
}
