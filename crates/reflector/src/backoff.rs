//! The reflector's backoff: apimachinery's `wait.Backoff` stepped by the reset-every-interval
//! `backoffManager` that client-go's reflector builds with `DelayWithReset`.

use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::Instant;

/// Backoff parameters. The default is client-go's reflector backoff (reflector.go's
/// `defaultBackoff*` constants, `NewReflectorWithOptions`).
///
/// | parameter | default | client-go |
/// |---|---|---|
/// | `initial` | 800 ms | `defaultBackoffInit` (`wait.Backoff.Duration`) |
/// | `factor` | 2.0 | `defaultBackoffFactor` |
/// | `jitter` | 1.0 | `defaultBackoffJitter`: each sleep is uniform in `[d, d + jitter*d)` |
/// | `cap` | 30 s | `defaultBackoffMax` (`wait.Backoff.Cap`) |
/// | `reset_interval` | 2 min | `defaultBackoffReset` (`DelayWithReset`'s `resetInterval`) |
///
/// The nominal delays are 0.8, 1.6, 3.2, 6.4, 12.8, 25.6 s and then 30 s, each slept for a
/// duration drawn uniformly from `[d, 2d)`: the cap bounds the nominal delay, the jitter comes
/// on top, so a single sleep lasts up to 60 s. As in client-go the growth may change the
/// nominal delay at most `ceil(cap / initial)` times (`Steps`, 38 by default, more than the
/// default sequence needs); a zero cap means no growth at all.
///
/// The sequence starts again from `initial` at the first delay asked for more than
/// `reset_interval` after the last start (see [`Backoff`]), however recent the last failure: a
/// reflector failing every 30 s waits about 0.8, 1.6, 3.2 s, then 0.8 s again once two minutes
/// have passed since the sequence started.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BackoffConfig {
    /// First delay.
    pub initial: Duration,
    /// Multiplier between consecutive nominal delays; zero keeps every delay at `initial`.
    pub factor: f64,
    /// Jitter factor: a delay `d` becomes uniform in `[d, d + jitter * d)`; zero or less: none.
    pub jitter: f64,
    /// Largest nominal delay (the jitter comes on top); zero: `initial` for ever.
    pub cap: Duration,
    /// The sequence restarts from `initial` at the first delay asked for more than this long
    /// after it last started (client-go's `resetInterval`); zero: every delay is the first.
    pub reset_interval: Duration,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(800),
            factor: 2.0,
            jitter: 1.0,
            cap: Duration::from_secs(30),
            reset_interval: Duration::from_secs(120),
        }
    }
}

/// Stateful backoff: call [`next_delay`](Backoff::next_delay) each time the caller must wait.
///
/// This is apimachinery's `wait.Backoff` (`Step` and its `delay` function) inside the
/// `backoffManager` that `Backoff.DelayWithReset(clock, resetInterval)` returns, which is what
/// client-go v0.37's reflector waits with after every list-and-watch attempt and before every
/// watch retry:
///
/// * **Reset.** The window starts when the backoff is created (`lastStart: c.Now()`). The first
///   delay asked for more than `reset_interval` after the window's start restarts the sequence
///   at `initial` and starts a new window. The window is *not* moved by failures: the delay drops
///   back to `initial` every `reset_interval` even under a failure that never stops (the
///   "if we don't backoff for 2min" comment in reflector.go describes the older
///   `NewExponentialBackoffManager`, whose window moved with every delay).
/// * **Growth.** Each delay returns the current nominal delay `d` (jittered) and sets the next
///   one to `d * factor`; once that would exceed `cap` it becomes `cap` and stays there.
/// * **Jitter** (`wait.Jitter`): `d + r * jitter * d` with `r` uniform in `[0, 1)`, truncated to
///   whole nanoseconds as Go's `time.Duration` conversion does.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use kcache_reflector::{Backoff, BackoffConfig};
///
/// let start = tokio::time::Instant::now();
/// let mut backoff = Backoff::with_seed(BackoffConfig::default(), 7, start);
/// let first = backoff.next_delay(start);
/// assert!(first >= Duration::from_millis(800) && first < Duration::from_millis(1600));
/// let second = backoff.next_delay(start + Duration::from_secs(30));
/// assert!(second >= Duration::from_millis(1600) && second < Duration::from_millis(3200));
/// // More than two minutes after the start, however recent the last failure: back to 800 ms.
/// let third = backoff.next_delay(start + Duration::from_secs(121));
/// assert!(third >= Duration::from_millis(800) && third < Duration::from_millis(1600));
/// ```
#[derive(Debug)]
pub struct Backoff {
    config: BackoffConfig,
    /// The nominal delay the next [`next_delay`](Backoff::next_delay) returns (before jitter):
    /// `wait.Backoff.Duration`.
    duration: Duration,
    /// How many more delays may change `duration` (`wait.Backoff.Steps`); zero once the cap
    /// was reached, after which every delay is `jitter(duration)`.
    steps: u64,
    /// When the current window began: creation, or the last reset (`backoffManager.lastStart`).
    last_start: Instant,
    rng: StdRng,
}

impl Backoff {
    /// A backoff with a random seed, whose reset window starts at `now`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use kcache_reflector::{Backoff, BackoffConfig};
    ///
    /// let config = BackoffConfig { initial: Duration::from_secs(1), ..BackoffConfig::default() };
    /// let now = tokio::time::Instant::now();
    /// let mut backoff = Backoff::new(config, now);
    /// assert_eq!(backoff.config(), &config);
    /// let first = backoff.next_delay(now);
    /// assert!(first >= Duration::from_secs(1) && first < Duration::from_secs(2), "{first:?}");
    /// ```
    pub fn new(config: BackoffConfig, now: Instant) -> Self {
        Self::with_seed(config, rand::random(), now)
    }

    /// A backoff whose jitter is reproducible from `seed`, whose reset window starts at `now`.
    pub fn with_seed(config: BackoffConfig, seed: u64, now: Instant) -> Self {
        Self {
            config,
            duration: config.initial,
            steps: initial_steps(&config),
            last_start: now,
            rng: StdRng::seed_from_u64(seed),
        }
    }

    /// The parameters.
    pub fn config(&self) -> &BackoffConfig {
        &self.config
    }

    /// Starts the sequence again from the initial delay, and a new reset window at `now`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use kcache_reflector::{Backoff, BackoffConfig};
    ///
    /// let now = tokio::time::Instant::now();
    /// let mut backoff = Backoff::with_seed(BackoffConfig::default(), 1, now);
    /// for _ in 0..5 {
    ///     backoff.next_delay(now); // nominal 0.8, 1.6, 3.2, 6.4, 12.8 s; 25.6 s comes next
    /// }
    /// backoff.reset(now);
    /// let d = backoff.next_delay(now);
    /// assert!(d >= Duration::from_millis(800) && d < Duration::from_millis(1600), "{d:?}");
    /// ```
    pub fn reset(&mut self, now: Instant) {
        self.duration = self.config.initial;
        self.steps = initial_steps(&self.config);
        self.last_start = now;
    }

    /// The next delay to wait, given the current time (`backoffManager.Step`).
    pub fn next_delay(&mut self, now: Instant) -> Duration {
        // A zero interval resets before every delay (`case b.resetInterval == 0`); otherwise only
        // strictly more than the interval after the window's start (`Sub(lastStart) > interval`).
        if self.config.reset_interval.is_zero()
            || now.saturating_duration_since(self.last_start) > self.config.reset_interval
        {
            self.reset(now);
        }
        self.step()
    }

    /// apimachinery's `delay`: the jittered current duration; the next one grows by `factor`
    /// up to `cap` while steps remain.
    fn step(&mut self) -> Duration {
        if self.steps == 0 {
            return self.jitter(self.duration);
        }
        self.steps -= 1;
        let current = self.duration;
        let cap = self.config.cap;
        let factor = self.config.factor;
        if factor != 0.0 {
            let next = current.as_nanos() as f64 * factor;
            // A negative or not-a-number factor (Go would compute a nonsense duration) goes to
            // the cap like an overflow, rather than panicking or shrinking below zero.
            let sane = next >= 0.0;
            if !cap.is_zero() && (!sane || next > cap.as_nanos() as f64) {
                self.duration = cap;
                self.steps = 0;
            } else if sane {
                self.duration = nanos(next);
            } else {
                self.steps = 0;
            }
        }
        self.jitter(current)
    }

    /// `wait.Jitter(d, jitter)`, applied only when `jitter > 0`.
    fn jitter(&mut self, d: Duration) -> Duration {
        // `delay` jitters only `if jitter > 0`: zero, negative and not-a-number are no jitter.
        if self.config.jitter.is_nan() || self.config.jitter <= 0.0 {
            return d;
        }
        let r: f64 = self.rng.random();
        d.saturating_add(nanos(r * self.config.jitter * d.as_nanos() as f64))
    }
}

/// client-go's `Steps: int(math.Ceil(float64(defaultBackoffMax) / float64(defaultBackoffInit)))`,
/// so that the growth can reach the cap; unlimited when the initial delay is zero.
fn initial_steps(config: &BackoffConfig) -> u64 {
    if config.initial.is_zero() {
        return u64::MAX;
    }
    let steps = (config.cap.as_nanos() as f64 / config.initial.as_nanos() as f64).ceil();
    // `as` saturates: a huge ratio is as good as unlimited.
    steps as u64
}

/// Nanoseconds to a `Duration`, truncated as Go's `time.Duration(float)` and saturating.
fn nanos(ns: f64) -> Duration {
    Duration::from_nanos(ns as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NS: Duration = Duration::from_nanos(1);

    fn no_jitter(initial: Duration, cap: Duration, reset_interval: Duration) -> BackoffConfig {
        BackoffConfig { initial, factor: 2.0, jitter: 0.0, cap, reset_interval }
    }

    /// The nominal sequence and its jitter ranges when every delay is asked for at once (no
    /// reset): [0.8,1.6), [1.6,3.2), ... [25.6,51.2), then [30,60) for ever.
    #[test]
    fn sequence_matches_client_go_defaults() {
        for seed in 0..50 {
            let now = Instant::now();
            let mut b = Backoff::with_seed(BackoffConfig::default(), seed, now);
            let nominal = [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0, 30.0, 30.0];
            for d in nominal {
                let got = b.next_delay(now).as_secs_f64();
                assert!(got >= d && got < 2.0 * d, "seed {seed}: {got} not in [{d}, {})", 2.0 * d);
            }
        }
    }

    /// Mirrors apimachinery wait_test.go `TestBackoffDelayWithResetExponential`: 1, 2, 4, 8 ns,
    /// then the 10 ns cap; 11 ns later (more than the 10 ns interval) back to 1 ns.
    #[test]
    fn delay_with_reset_exponential() {
        let fc = Instant::now();
        let mut b = Backoff::with_seed(no_jitter(NS, 10 * NS, 10 * NS), 1, fc);
        let got: Vec<_> = (0..7).map(|_| b.next_delay(fc).as_nanos()).collect();
        assert_eq!(got, [1, 2, 4, 8, 10, 10, 10]);
        assert_eq!(b.next_delay(fc + 11 * NS), NS);
    }

    /// Mirrors `TestBackoffDelayWithResetEmpty`: a zero reset interval resets before every delay.
    #[test]
    fn delay_with_reset_empty() {
        let fc = Instant::now();
        let mut b = Backoff::with_seed(no_jitter(NS, 10 * NS, Duration::ZERO), 1, fc);
        let got: Vec<_> = (0..7).map(|_| b.next_delay(fc).as_nanos()).collect();
        assert_eq!(got, [1; 7]);
        assert_eq!(b.next_delay(fc + 11 * NS), NS);
    }

    /// Mirrors `TestBackoffDelayWithResetJitter`: a positive jitter stays within [d, 2d]; a
    /// negative one is no jitter at all.
    #[test]
    fn delay_with_reset_jitter() {
        let fc = Instant::now();
        let base = BackoffConfig {
            initial: NS,
            factor: 0.0,
            jitter: 1.0,
            cap: Duration::ZERO,
            reset_interval: Duration::ZERO,
        };
        let mut b = Backoff::with_seed(base, 1, fc);
        for _ in 0..5 {
            let d = b.next_delay(fc);
            assert!(d >= NS && d <= 2 * NS, "{d:?}");
        }
        let mut b = Backoff::with_seed(BackoffConfig { jitter: -1.0, ..base }, 1, fc);
        assert_eq!(b.next_delay(fc), NS);
    }

    /// Mirrors apimachinery wait_test.go `TestBackoff_Step` for the cases a `BackoffConfig` can
    /// express (steps are `ceil(cap / initial)`, no cap means no growth): 1 s, 2 s, then the 3 s
    /// cap; with jitter 0.5 each delay is within half of its nominal value above it.
    #[test]
    fn step_like_wait_backoff() {
        let fc = Instant::now();
        let s = Duration::from_secs(1);
        let config =
            BackoffConfig { initial: s, factor: 2.0, jitter: 0.0, cap: 3 * s, reset_interval: 3600 * s };
        let mut b = Backoff::with_seed(config, 0, fc);
        let got: Vec<_> = (0..4).map(|_| b.next_delay(fc)).collect();
        assert_eq!(got, [s, 2 * s, 3 * s, 3 * s]);
        // A zero cap: zero steps, the initial delay for ever (`Steps: 0`).
        let mut b = Backoff::with_seed(BackoffConfig { cap: Duration::ZERO, ..config }, 0, fc);
        assert_eq!((0..3).map(|_| b.next_delay(fc)).collect::<Vec<_>>(), [s, s, s]);
        for seed in 0..5 {
            let mut b = Backoff::with_seed(BackoffConfig { jitter: 0.5, ..config }, seed, fc);
            for want in [s, 2 * s, 3 * s, 3 * s] {
                let got = b.next_delay(fc);
                assert!(got >= want && got < want.mul_f64(1.5), "seed {seed}: {got:?} for {want:?}");
            }
        }
    }

    /// client-go's `backoffManager.Step`: the window starts at creation and moves only when it
    /// resets; a delay asked for exactly `reset_interval` after its start does not reset.
    #[test]
    fn resets_every_interval_since_the_last_reset() {
        let ms = Duration::from_millis;
        let s = Duration::from_secs;
        let t0 = Instant::now();
        let mut b = Backoff::with_seed(BackoffConfig { jitter: 0.0, ..Default::default() }, 1, t0);
        assert_eq!(b.next_delay(t0 + s(30)), ms(800));
        assert_eq!(b.next_delay(t0 + s(60)), ms(1600));
        assert_eq!(b.next_delay(t0 + s(120)), ms(3200), "exactly the interval: no reset");
        assert_eq!(b.next_delay(t0 + s(121)), ms(800), "past it: reset, whatever came before");
        assert_eq!(b.next_delay(t0 + s(200)), ms(1600));
        assert_eq!(b.next_delay(t0 + s(241)), ms(3200), "the window began at the reset (121 s)");
        assert_eq!(b.next_delay(t0 + s(242)), ms(800));
        // After a long quiet spell too.
        for _ in 0..6 {
            b.next_delay(t0 + s(242));
        }
        assert_eq!(b.next_delay(t0 + s(242)), s(30));
        assert_eq!(b.next_delay(t0 + s(3600)), ms(800));
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
                        for reset_interval in long {
                            let config = BackoffConfig { initial, factor, jitter, cap, reset_interval };
                            let now = Instant::now();
                            let mut b = Backoff::with_seed(config, 3, now);
                            for i in 0..4 {
                                let d = b.next_delay(now + Duration::from_secs(i));
                                if factor >= 1.0 {
                                    assert!(d >= initial.min(cap), "{config:?}: {d:?}");
                                }
                            }
                        }
                    }
                }
            }
        }
        let now = Instant::now();
        let config = BackoffConfig { factor: f64::NAN, jitter: 0.0, ..Default::default() };
        let mut b = Backoff::with_seed(config, 1, now);
        assert_eq!(b.next_delay(now), Duration::from_millis(800));
        assert_eq!(b.next_delay(now), Duration::from_secs(30), "a NaN factor goes to the cap");
    }

    #[test]
    fn seeded_jitter_is_reproducible() {
        let run = |seed| {
            let now = Instant::now();
            let mut b = Backoff::with_seed(BackoffConfig::default(), seed, now);
            (0..10).map(|_| b.next_delay(now)).collect::<Vec<_>>()
        };
        assert_eq!(run(42), run(42));
        assert_ne!(run(42), run(43));
    }
}
