//! The live display: indicatif lines on a terminal, plain periodic log lines otherwise. Both
//! read the same [`Snapshot`]s of the pipeline's counters.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::controller::lock;
use crate::metrics::DemoMetrics;
use crate::snapshot::{Probe, Snapshot};

/// How often the display and the metrics gauges are refreshed.
const TICK: Duration = Duration::from_millis(250);
/// How often a plain log line is printed when stdout is not a terminal.
const PLAIN_EVERY: Duration = Duration::from_secs(2);

/// Where messages go: above the live lines on a terminal, plain stdout otherwise.
#[derive(Debug, Clone)]
pub(crate) struct Console {
    multi: Option<MultiProgress>,
    phase: Arc<Mutex<String>>,
}

impl Console {
    /// A console for a terminal (`tty`) or a log.
    pub(crate) fn new(tty: bool) -> Self {
        let multi = tty.then(|| MultiProgress::with_draw_target(ProgressDrawTarget::stdout_with_hz(8)));
        Self { multi, phase: Arc::new(Mutex::new("starting".to_owned())) }
    }

    /// Prints a line.
    pub(crate) fn say(&self, msg: impl AsRef<str>) {
        match &self.multi {
            Some(m) if !m.is_hidden() => {
                let _ = m.println(msg);
            }
            _ => println!("{}", msg.as_ref()),
        }
    }

    /// Sets the phase shown on the live lines.
    pub(crate) fn set_phase(&self, phase: &str) {
        phase.clone_into(&mut lock(&self.phase));
    }

    fn phase(&self) -> String {
        lock(&self.phase).clone()
    }
}

/// The running display task.
#[derive(Debug)]
pub(crate) struct LiveDisplay {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl LiveDisplay {
    /// Starts refreshing every [`TICK`]; `churn_for` sizes the progress bar; `churning` is false
    /// for a watch-only run.
    pub(crate) fn start(
        console: Console,
        probe: Arc<Probe>,
        (churn_for, churning): (Duration, bool),
        metrics: Option<DemoMetrics>,
    ) -> Self {
        let (stop, mut stopped) = oneshot::channel();
        let task = tokio::spawn(async move {
            let mut view = View::new(&console, churn_for, churning);
            let mut history: VecDeque<Snapshot> = VecDeque::new();
            let mut tick = tokio::time::interval(TICK);
            loop {
                let done = tokio::select! {
                    _ = &mut stopped => true,
                    _ = tick.tick() => false,
                };
                let now = probe.snapshot();
                if let Some(m) = &metrics {
                    m.observe(&now);
                }
                let oldest = history.front().cloned().unwrap_or_else(|| now.clone());
                view.update(&console, &now, &oldest, done);
                history.push_back(now);
                // A window of about one second for the rates.
                while history.len() > 4 {
                    history.pop_front();
                }
                if done {
                    return;
                }
            }
        });
        Self { stop, task }
    }

    /// Draws a last time and stops.
    pub(crate) async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

enum View {
    Bars {
        churn: ProgressBar,
        lines: [ProgressBar; 3],
    },
    /// The next plain line is due when the elapsed time reaches `next`; `churning` is false for
    /// a watch-only run.
    Plain {
        next: Duration,
        churning: bool,
    },
}

impl View {
    fn new(console: &Console, churn_for: Duration, churning: bool) -> Self {
        let Some(multi) = &console.multi else { return Self::Plain { next: Duration::ZERO, churning } };
        let bar_style = ProgressStyle::with_template(
            "{spinner:.green} {prefix:<9.bold} [{bar:30.cyan/blue}] {elapsed:>3} {wide_msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
        let line_style = ProgressStyle::with_template("  {prefix:<9.bold} {wide_msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner());
        let churn = multi.add(ProgressBar::new(churn_for.as_millis().try_into().unwrap_or(u64::MAX)));
        churn.set_style(bar_style);
        churn.set_prefix("churn");
        let lines = ["informer", "workqueue", "listeners"].map(|p| {
            let pb = multi.add(ProgressBar::new_spinner());
            pb.set_style(line_style.clone());
            pb.set_prefix(p);
            pb
        });
        Self::Bars { churn, lines }
    }

    fn update(&mut self, console: &Console, now: &Snapshot, window_start: &Snapshot, last: bool) {
        let secs = now.elapsed.saturating_sub(window_start.elapsed).as_secs_f64();
        let rate = |a: u64, b: u64| if secs > 0.0 { a.saturating_sub(b) as f64 / secs } else { 0.0 };
        let ops_rate = rate(now.churn_ops, window_start.churn_ops);
        let ev_rate = rate(now.events, window_start.events);
        let phase = console.phase();
        match self {
            Self::Bars { churn, lines } => {
                churn.set_position(now.elapsed.as_millis().try_into().unwrap_or(u64::MAX));
                churn.set_message(format!(
                    "{phase}: {} ops ({ops_rate:.0}/s), {} errors",
                    now.churn_ops, now.churn_errors
                ));
                lines[0].set_message(informer_line(now, ev_rate));
                lines[1].set_message(queue_line(now));
                lines[2].set_message(listeners_line(now));
                if last {
                    churn.finish();
                    for l in lines.iter() {
                        l.finish();
                    }
                }
            }
            Self::Plain { next, churning } => {
                if now.elapsed >= *next || last {
                    while *next <= now.elapsed {
                        *next += PLAIN_EVERY;
                    }
                    let churn = if *churning {
                        format!("churn {} ops ({ops_rate:.0}/s) | ", now.churn_ops)
                    } else {
                        String::new()
                    };
                    println!(
                        "[{:>5.1}s] {phase:<8} | {churn}{} | {} | {}",
                        now.elapsed.as_secs_f64(),
                        informer_line(now, ev_rate),
                        queue_line(now),
                        listeners_line(now),
                    );
                }
            }
        }
    }
}

fn informer_line(s: &Snapshot, ev_rate: f64) -> String {
    format!("events {} ({ev_rate:.0}/s), cache {}, fifo {}", s.events, s.cache_size, s.fifo_len)
}

fn queue_line(s: &Snapshot) -> String {
    format!(
        "depth {} +{} delayed | done {} ({} gone) | retries {} (streak {}) | busy {}",
        s.queue_len,
        s.queue_delayed,
        s.reconciled,
        s.reconciled_absent,
        s.failures,
        s.max_requeues,
        s.in_flight
    )
}

fn listeners_line(s: &Snapshot) -> String {
    let mut out = String::from("pending");
    for (i, l) in s.listeners.iter().enumerate() {
        let sep = if i == 0 { " " } else { ", " };
        let _ = write!(out, "{sep}{} {} (max {})", l.name, l.pending, l.high_water);
    }
    out
}
