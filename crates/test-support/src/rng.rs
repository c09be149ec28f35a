//! SplitMix64 (Steele, Lea and Flood, 2014): a tiny, well-mixed generator whose output is fixed
//! by its definition, so a seed gives the same sequence on every machine, in every build and in
//! every language.
//!
//! The seeded chaos schedules (`kcache-chaos`) and the benchmark workloads (`kcache-bench`, in
//! step with `xtask/bench-go`'s `splitMix64`) draw from it rather than from `rand`, whose
//! `StdRng` algorithm may change between releases: a changed sequence would make old chaos seeds
//! replay different schedules and the two benchmark sides draw different workloads.
//!
//! ```
//! use kcache_test_support::rng::SplitMix64;
//!
//! let mut rng = SplitMix64::new(0);
//! assert_eq!(rng.next_u64(), 0xe220_a839_7b1d_cdaf);
//! assert!(rng.below(10) < 10);
//! ```

/// The generator: 64 bits of state, advanced by a fixed odd constant and mixed on output.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    /// The last state; the next output mixes `state + 0x9e37_79b9_7f4a_7c15`.
    state: u64,
}

impl SplitMix64 {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`; the tiny modulo bias is irrelevant here).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `num / den`.
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }

    /// One element of a non-empty slice.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    /// Overwrites `count` bytes of `bytes` (non-empty), at random places, with random values:
    /// a well-formed input made a little broken, for the decoders' tests.
    pub fn scramble(&mut self, bytes: &mut [u8], count: usize) {
        for _ in 0..count {
            let at = self.below(bytes.len() as u64) as usize;
            bytes[at] = self.next_u64() as u8;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::SplitMix64;

    #[test]
    fn reference_sequence_from_seed_0() {
        // The published reference values, also asserted by xtask/bench-go's common_test.go.
        let mut rng = SplitMix64::new(0);
        assert_eq!(rng.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(rng.next_u64(), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn reference_sequence_from_seed_1234567() {
        // If these change, old chaos seeds no longer replay.
        let mut r = SplitMix64::new(1_234_567);
        assert_eq!(r.next_u64(), 6_457_827_717_110_365_317);
        assert_eq!(r.next_u64(), 3_203_168_211_198_807_973);
    }

    #[test]
    fn helpers_are_fixed_functions_of_the_sequence() {
        let (mut a, mut b) = (SplitMix64::new(7), SplitMix64::new(7));
        for _ in 0..100 {
            let n = b.next_u64();
            assert_eq!(a.clone().below(10), n % 10);
            assert_eq!(a.clone().range(5, 9), 5 + n % 5);
            assert_eq!(a.clone().chance(1, 4), n % 4 < 1);
            assert_eq!(*a.clone().pick(&[1, 2, 3]), [1, 2, 3][(n % 3) as usize]);
            a.next_u64();
        }
        assert_eq!(SplitMix64::new(1).below(0), 0, "n = 0 is treated as 1");
    }
}
