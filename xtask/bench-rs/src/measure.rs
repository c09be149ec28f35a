//! Wall time, CPU time and peak RSS of a timed section, measured as the Go side measures them.

use std::time::{Duration, Instant};

/// Times one section of a scenario: call [`Timer::start`] right before it and [`Timer::stop`]
/// right after it.
#[derive(Debug, Default)]
pub(crate) struct Timer {
    started: Option<(Instant, f64, u64)>,
    result: Option<Measurement>,
}

/// What a [`Timer`] measured.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Measurement {
    /// Wall time of the section.
    pub(crate) wall: Duration,
    /// User + system CPU time of the whole process (every thread) during the section.
    pub(crate) cpu_seconds: f64,
    /// How much the process's peak RSS grew during the section.
    pub(crate) rss_growth_bytes: u64,
}

impl Timer {
    /// Starts the section.
    pub(crate) fn start(&mut self) {
        perf_control("enable");
        let rss = peak_rss_bytes();
        let cpu = cpu_seconds();
        self.started = Some((Instant::now(), cpu, rss));
    }

    /// Ends the section (a no-op if it was not started).
    pub(crate) fn stop(&mut self) {
        let Some((t0, cpu0, rss0)) = self.started else { return };
        let wall = t0.elapsed();
        let cpu_seconds = cpu_seconds() - cpu0;
        let rss_growth_bytes = peak_rss_bytes().saturating_sub(rss0);
        self.result = Some(Measurement { wall, cpu_seconds, rss_growth_bytes });
        perf_control("disable");
    }

    /// The measurement, once the section was started and stopped.
    pub(crate) fn measurement(&self) -> Option<Measurement> {
        self.result
    }
}

/// Profiles only the timed section: with `KCACHE_BENCH_PERF_CTL=CTL,ACK` (the two FIFOs of
/// `perf record -D -1 --control fifo:CTL,ACK`), writes `cmd` (`enable` at the start, `disable`
/// at the end) to perf's control FIFO and waits for its acknowledgement, so that the samples are
/// the section's and not the process's set-up or teardown (dropping a 50k-object cache is a
/// quarter of the process's CPU). Unset (every `cargo xtask bench` run): nothing.
fn perf_control(cmd: &str) {
    use std::io::{Read, Write};
    let Ok(fifos) = std::env::var("KCACHE_BENCH_PERF_CTL") else { return };
    let Some((ctl, ack)) = fifos.split_once(',') else {
        panic!("KCACHE_BENCH_PERF_CTL={fifos}: expected CTL_FIFO,ACK_FIFO")
    };
    let sent = std::fs::OpenOptions::new().write(true).open(ctl).and_then(|mut f| writeln!(f, "{cmd}"));
    if let Err(e) = sent {
        panic!("perf control FIFO {ctl}: {e}");
    }
    let mut reply = [0u8; 5];
    if let Err(e) = std::fs::File::open(ack).and_then(|mut f| f.read_exact(&mut reply)) {
        panic!("perf ack FIFO {ack}: {e}");
    }
}

/// `getrusage(RUSAGE_SELF)`.
#[allow(unsafe_code)]
fn rusage() -> libc::rusage {
    // SAFETY: `rusage` is a plain C struct for which all-zero bytes are a valid value, and
    // getrusage only writes into the struct we pass; RUSAGE_SELF is always a valid `who`.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        let rc = libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        assert_eq!(rc, 0, "getrusage(RUSAGE_SELF) failed");
        ru
    }
}

fn timeval_seconds(tv: libc::timeval) -> f64 {
    tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6
}

/// User + system CPU seconds used by the process so far.
pub(crate) fn cpu_seconds() -> f64 {
    let ru = rusage();
    timeval_seconds(ru.ru_utime) + timeval_seconds(ru.ru_stime)
}

/// The process's peak resident set size in bytes (Linux reports `ru_maxrss` in KiB).
pub(crate) fn peak_rss_bytes() -> u64 {
    u64::try_from(rusage().ru_maxrss).unwrap_or(0) * 1024
}
