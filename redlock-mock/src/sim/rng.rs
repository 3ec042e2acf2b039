//! Seeded randomness with independent streams, and the stable trace hash.
//!
//! Both are written out here rather than taken from a crate so that a seed
//! replays the same run on every platform and every future build: the
//! generator is xoshiro256++ seeded through SplitMix64, and the hash is
//! FNV-1a's step taken a 64-bit word at a time, with an xorshift. Neither
//! uses floating-point functions beyond plain IEEE arithmetic.

/// One step of SplitMix64: the seed expander and stream mixer.
const fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A small, fast, seedable generator (xoshiro256++). Every random choice of
/// a simulation comes from one of these, derived from the run's seed with
/// [`SimRng::stream`], so that each node, client and link draws from its own
/// stream: a change in one client's behaviour does not shift the numbers any
/// other part of the run sees.
///
/// # Examples
///
/// ```
/// use redlock_mock::sim::SimRng;
/// let mut a = SimRng::stream(42, 7);
/// let mut b = SimRng::stream(42, 7);
/// assert_eq!(a.next_u64(), b.next_u64());
/// assert_ne!(SimRng::stream(42, 8).next_u64(), SimRng::stream(42, 7).next_u64());
/// let roll = a.range(1, 6);
/// assert!((1..=6).contains(&roll));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimRng {
    s: [u64; 4],
}

impl SimRng {
    /// A generator for stream `stream` of the run seeded with `seed`.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut rng = redlock_mock::sim::SimRng::stream(1, 0);
    /// assert!(rng.below(10) < 10);
    /// ```
    #[must_use]
    pub const fn stream(seed: u64, stream: u64) -> Self {
        let mut mix = seed;
        let salt = splitmix(&mut mix);
        let mut state = salt ^ stream.wrapping_mul(0xd605_bbb5_8c8a_bbc1);
        let s = [
            splitmix(&mut state),
            splitmix(&mut state),
            splitmix(&mut state),
            splitmix(&mut state),
        ];
        SimRng { s }
    }

    /// The next 64 random bits.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut rng = redlock_mock::sim::SimRng::stream(0, 0);
    /// let _ = rng.next_u64();
    /// ```
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// A number in `0..n` (`0` when `n` is `0`).
    ///
    /// # Examples
    ///
    /// ```
    /// let mut rng = redlock_mock::sim::SimRng::stream(3, 1);
    /// assert_eq!(rng.below(1), 0);
    /// assert_eq!(rng.below(0), 0);
    /// ```
    pub fn below(&mut self, n: u64) -> u64 {
        // Multiply-shift: unbiased enough for a simulation, and branch-free.
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// A number in `lo..=hi` (`lo` when `hi <= lo`).
    ///
    /// # Examples
    ///
    /// ```
    /// let mut rng = redlock_mock::sim::SimRng::stream(3, 1);
    /// assert_eq!(rng.range(5, 5), 5);
    /// assert!(rng.range(5, 9) >= 5);
    /// ```
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        match (hi - lo).checked_add(1) {
            Some(span) => lo + self.below(span),
            None => self.next_u64(),
        }
    }

    /// A uniform number in `[0, 1)` with 53 random bits.
    ///
    /// # Examples
    ///
    /// ```
    /// let x = redlock_mock::sim::SimRng::stream(9, 9).unit();
    /// assert!((0.0..1.0).contains(&x));
    /// ```
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// `true` with probability `p` (never for `p <= 0`, always for `p >= 1`).
    ///
    /// # Examples
    ///
    /// ```
    /// let mut rng = redlock_mock::sim::SimRng::stream(9, 9);
    /// assert!(!rng.chance(0.0));
    /// assert!(rng.chance(1.0));
    /// ```
    pub fn chance(&mut self, p: f64) -> bool {
        if p <= 0.0 {
            return false;
        }
        self.unit() < p
    }

    /// A heavy-tailed (Pareto, shape 1) number: at least `scale`, at most
    /// `cap`, and above `k * scale` with probability `1 / k`.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut rng = redlock_mock::sim::SimRng::stream(5, 5);
    /// let x = rng.pareto(1_000, 50_000);
    /// assert!((1_000..=50_000).contains(&x));
    /// ```
    pub fn pareto(&mut self, scale: u64, cap: u64) -> u64 {
        // scale / u with u uniform in (0, 1], in integers: scale * 2^32 / (r + 1).
        let r = self.next_u64() >> 32;
        let x = (u128::from(scale) << 32) / (u128::from(r) + 1);
        u64::try_from(x)
            .unwrap_or(u64::MAX)
            .clamp(scale.min(cap), cap)
    }
}

/// The rolling hash of a run's events: FNV-1a's step (xor, multiply by
/// the 64-bit FNV prime) a whole word at a time, then an xorshift so that
/// high bits reach the low ones. Each step is a bijection of the state for
/// a given word, so two traces that differ in one word never hash alike.
/// Stable across platforms and builds, independent of tracing; a word at a
/// time, not a byte (FNV-1a proper), since it runs for every event of
/// every simulated run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TraceHash(u64);

impl TraceHash {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;

    pub(crate) const fn new() -> Self {
        TraceHash(Self::OFFSET)
    }

    pub(crate) fn word(&mut self, x: u64) {
        let h = (self.0 ^ x).wrapping_mul(Self::PRIME);
        self.0 = h ^ (h >> 29);
    }

    pub(crate) const fn value(self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_reproducible_and_distinct() {
        let a: Vec<u64> = {
            let mut r = SimRng::stream(7, 3);
            (0..4).map(|_| r.next_u64()).collect()
        };
        let b: Vec<u64> = {
            let mut r = SimRng::stream(7, 3);
            (0..4).map(|_| r.next_u64()).collect()
        };
        assert_eq!(a, b);
        assert_ne!(SimRng::stream(7, 4).next_u64(), a[0]);
        assert_ne!(SimRng::stream(8, 3).next_u64(), a[0]);
    }

    #[test]
    fn trace_hash_known_value_and_order() {
        // Written out so that a change of the hash is a decision.
        let mut h = TraceHash::new();
        h.word(0);
        let p = TraceHash::OFFSET.wrapping_mul(TraceHash::PRIME);
        assert_eq!(h.value(), p ^ (p >> 29));
        h.word(1);
        let mut g = TraceHash::new();
        g.word(1);
        g.word(0);
        assert_ne!(h.value(), g.value(), "order counts");
    }
}
