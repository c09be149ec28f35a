//! The reflector's backoff: client-go's defaults, with full jitter and a reset after quiet.

use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::Instant;

/// Backoff parameters. The default is client-go's reflector backoff.
///
/// | parameter | default | client-go |
/// |---|---|---|
/// | `initial` | 800 ms | `defaultBackoffInit` |
/// | `factor` | 2.0 | `defaultBackoffFactor` |
/// | `jitter` | 1.0 | `defaultBackoffJitter`: each sleep is uniform in `[d, d + jitter*d)` |
/// | `cap` | 30 s | `defaultBackoffMax` |
/// | `reset_after` | 2 min | `defaultBackoffReset` |
///
/// The nominal delays are 0.8, 1.6, 3.2, 6.4, 12.8, 25.6 s and then 30 s for ever, each drawn
/// uniformly from `[d, 2d)`, so a reflector that keeps failing settles at one request every
/// 30 to 60 seconds (about 0.02 QPS, the 98% reduction client-go's comment aims for).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BackoffConfig {
    /// First delay.
    pub initial: Duration,
    /// Multiplier between consecutive nominal delays.
    pub factor: f64,
    /// Jitter factor: a delay `d` becomes uniform in `[d, d + jitter * d)`.
    pub jitter: f64,
    /// Largest nominal delay.
    pub cap: Duration,
    /// After this long without any backoff, the sequence starts again from `initial`.
    pub reset_after: Duration,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(800),
            factor: 2.0,
            jitter: 1.0,
            cap: Duration::from_secs(30),
            reset_after: Duration::from_secs(120),
        }
    }
}

/// Stateful backoff: call [`next_delay`](Backoff::next_delay) each time the caller must wait.
///
/// Reset rule: if more than `reset_after` passed since the previous delay was handed out, the
/// sequence restarts at `initial` ("if we don't backoff for 2 min, assume the API server is
/// healthy"). client-go 1.30+'s `StepWithReset` instead resets every `reset_after` since the last
/// *reset*, which under a persistent failure drops back to 800 ms every two minutes; the rule here
/// keeps the [30 s, 60 s) steady state that client-go's own comment promises.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use kcache_reflector::{Backoff, BackoffConfig};
///
/// let mut backoff = Backoff::with_seed(BackoffConfig::default(), 7);
/// let now = tokio::time::Instant::now();
/// let first = backoff.next_delay(now);
/// assert!(first >= Duration::from_millis(800) && first < Duration::from_millis(1600));
/// ```
#[derive(Debug)]
pub struct Backoff {
    config: BackoffConfig,
    /// The next nominal delay (before jitter).
    current: Duration,
    /// Whether the cap was reached: from then on every delay is `jitter(cap)`.
    capped: bool,
    /// When the previous delay was handed out.
    last: Option<Instant>,
    rng: StdRng,
}

impl Backoff {
    /// A backoff with a random seed.
    ///
    /// ```
    /// use std::time::Duration;
    /// use kcache_reflector::{Backoff, BackoffConfig};
    ///
    /// let config = BackoffConfig { initial: Duration::from_secs(1), ..BackoffConfig::default() };
    /// let mut backoff = Backoff::new(config);
    /// assert_eq!(backoff.config(), &config);
    /// let first = backoff.next_delay(tokio::time::Instant::now());
    /// assert!(first >= Duration::from_secs(1) && first < Duration::from_secs(2), "{first:?}");
    /// ```
    pub fn new(config: BackoffConfig) -> Self {
        Self::with_seed(config, rand::random())
    }

    /// A backoff whose jitter is reproducible from `seed`.
    pub fn with_seed(config: BackoffConfig, seed: u64) -> Self {
        Self { config, current: config.initial, capped: false, last: None, rng: StdRng::seed_from_u64(seed) }
    }

    /// The parameters.
    pub fn config(&self) -> &BackoffConfig {
        &self.config
    }

    /// Starts the sequence again from the initial delay.
    ///
    /// ```
    /// use std::time::Duration;
    /// use kcache_reflector::{Backoff, BackoffConfig};
    ///
    /// let mut backoff = Backoff::with_seed(BackoffConfig::default(), 1);
    /// let now = tokio::time::Instant::now();
    /// for _ in 0..5 {
    ///     backoff.next_delay(now); // nominal 0.8, 1.6, 3.2, 6.4, 12.8 s; 25.6 s comes next
    /// }
    /// backoff.reset();
    /// let d = backoff.next_delay(now);
    /// assert!(d >= Duration::from_millis(800) && d < Duration::from_millis(1600), "{d:?}");
    /// ```
    pub fn reset(&mut self) {
        self.current = self.config.initial;
        self.capped = false;
    }

    /// The next delay to wait, given the current time.
    pub fn next_delay(&mut self, now: Instant) -> Duration {
        if let Some(last) = self.last
            && now.saturating_duration_since(last) > self.config.reset_after
        {
            self.reset();
        }
        self.last = Some(now);
        let nominal = self.current;
        if !self.capped {
            // A factor that is negative, not a number, or so large that the delay no longer fits
            // in a `Duration` goes straight to the cap rather than panicking.
            match Duration::try_from_secs_f64(nominal.as_secs_f64() * self.config.factor) {
                Ok(next) if next <= self.config.cap => self.current = next,
                _ => {
                    self.current = self.config.cap;
                    self.capped = true;
                }
            }
        }
        self.jitter(nominal)
    }

    fn jitter(&mut self, d: Duration) -> Duration {
        if self.config.jitter.is_nan() || self.config.jitter <= 0.0 {
            return d; // zero, negative or not a number: no jitter
        }
        let r: f64 = self.rng.random();
        let extra =
            Duration::try_from_secs_f64(d.as_secs_f64() * r * self.config.jitter).unwrap_or(Duration::MAX);
        d.saturating_add(extra)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The nominal sequence and its jitter ranges: [0.8,1.6), [1.6,3.2), ... [25.6,51.2), then
    /// [30,60) for ever.
    #[test]
    fn sequence_matches_client_go_defaults() {
        for seed in 0..50 {
            let mut b = Backoff::with_seed(BackoffConfig::default(), seed);
            let mut now = Instant::now();
            let nominal = [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0, 30.0, 30.0];
            for d in nominal {
                let got = b.next_delay(now).as_secs_f64();
                assert!(got >= d && got < 2.0 * d, "seed {seed}: {got} not in [{d}, {})", 2.0 * d);
                now += Duration::from_secs_f64(got);
            }
        }
    }

    #[test]
    fn resets_after_two_quiet_minutes_only() {
        let mut b = Backoff::with_seed(BackoffConfig { jitter: 0.0, ..Default::default() }, 1);
        let t0 = Instant::now();
        assert_eq!(b.next_delay(t0), Duration::from_millis(800));
        assert_eq!(b.next_delay(t0 + Duration::from_secs(60)), Duration::from_millis(1600));
        // Exactly two minutes later: not more than reset_after, no reset.
        assert_eq!(b.next_delay(t0 + Duration::from_secs(180)), Duration::from_millis(3200));
        // More than two minutes of quiet: back to the start.
        assert_eq!(b.next_delay(t0 + Duration::from_secs(301)), Duration::from_millis(800));
    }

    /// Parameters that make no sense (a factor or jitter that is negative, infinite or not a
    /// number; delays as long as `Duration` allows) give capped delays, never a panic.
    #[test]
    fn odd_parameters_never_panic() {
        let odd = [f64::NAN, -1.0, 0.0, 1e300, f64::INFINITY, f64::NEG_INFINITY];
        let long = [Duration::ZERO, Duration::from_millis(800), Duration::MAX];
        for factor in odd {
            for jitter in odd {
                for initial in long {
                    for cap in long {
                        let config = BackoffConfig { initial, factor, jitter, cap, ..Default::default() };
                        let mut b = Backoff::with_seed(config, 3);
                        let now = Instant::now();
                        for _ in 0..4 {
                            let d = b.next_delay(now);
                            if factor >= 1.0 {
                                assert!(d >= initial.min(cap), "{config:?}: {d:?}");
                            }
                        }
                    }
                }
            }
        }
        let mut b =
            Backoff::with_seed(BackoffConfig { factor: f64::NAN, jitter: 0.0, ..Default::default() }, 1);
        assert_eq!(b.next_delay(Instant::now()), Duration::from_millis(800));
        assert_eq!(b.next_delay(Instant::now()), Duration::from_secs(30), "a NaN factor goes to the cap");
    }

    #[test]
    fn seeded_jitter_is_reproducible() {
        let run = |seed| {
            let mut b = Backoff::with_seed(BackoffConfig::default(), seed);
            (0..10).map(|_| b.next_delay(Instant::now())).collect::<Vec<_>>()
        };
        assert_eq!(run(42), run(42));
        assert_ne!(run(42), run(43));
    }
}
