//! Per-process clocks over the one virtual real-time clock.
//!
//! Real (virtual) time is `u64` nanoseconds from the start of a run. Each
//! node and client reads its own local clock: an offset, a rate error in
//! parts per million, and (for nodes) jumps. Local readings are `i64`
//! nanoseconds so that backward jumps and negative offsets need no care.

/// Parts per million.
const PPM: i64 = 1_000_000;

/// A node's wall clock, which is what Redis expires keys by: it may run fast
/// or slow and be stepped forward or backward.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NodeClock {
    base_real: u64,
    base_local: i64,
    ppm: i64,
}

impl NodeClock {
    pub(crate) fn new(offset: i64, ppm: i64) -> Self {
        NodeClock {
            base_real: 0,
            base_local: offset,
            ppm,
        }
    }

    /// The node's reading at real time `t` (`t` never precedes the last jump).
    pub(crate) fn local(&self, t: u64) -> i64 {
        let dt = i64::try_from(t.saturating_sub(self.base_real)).unwrap_or(i64::MAX / 4);
        self.base_local + dt + dt * self.ppm / PPM
    }

    /// Steps the clock by `by` (forward when positive) at real time `t`.
    pub(crate) fn jump(&mut self, t: u64, by: i64) {
        self.base_local = self.local(t) + by;
        self.base_real = t;
    }
}

/// A client's monotonic clock (what the manager measures elapsed time and
/// validity with): an offset and a constant rate error, never stepped.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClientClock {
    offset: i64,
    ppm: i64,
}

impl ClientClock {
    pub(crate) fn new(offset: i64, ppm: i64) -> Self {
        ClientClock { offset, ppm }
    }

    /// The reading at real time `t`.
    pub(crate) fn local(&self, t: u64) -> i64 {
        let t = i64::try_from(t).unwrap_or(i64::MAX / 4);
        self.offset + t + t * self.ppm / PPM
    }

    /// The first real time at which the clock reads at least `local`
    /// (never before `now`).
    pub(crate) fn real_at(&self, local: i64, now: u64) -> u64 {
        let span = i128::from(local) - i128::from(self.offset);
        if span <= 0 {
            return now;
        }
        let rate = i128::from(PPM + self.ppm);
        // ceil(span * PPM / rate), then nudged to the exact first instant
        // (the integer division in `local` may be off by a nanosecond).
        let mut t =
            u64::try_from((span * i128::from(PPM) + rate - 1) / rate).unwrap_or(u64::MAX / 4);
        while t > 0 && self.local(t - 1) >= local {
            t -= 1;
        }
        while self.local(t) < local {
            t += 1;
        }
        t.max(now)
    }

    /// The real time at which a local duration `d` started at real `now`
    /// ends.
    pub(crate) fn after(&self, now: u64, d: u64) -> u64 {
        let local = self.local(now) + i64::try_from(d).unwrap_or(i64::MAX / 4);
        self.real_at(local, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_clock_rate_and_jumps() {
        let mut c = NodeClock::new(1_000, 10_000); // +1 %
        assert_eq!(c.local(1_000_000), 1_000 + 1_010_000);
        c.jump(1_000_000, -500);
        assert_eq!(c.local(1_000_000), 1_010_500);
        assert_eq!(c.local(2_000_000), 1_010_500 + 1_010_000);
    }

    #[test]
    fn client_inverse_is_tight() {
        for ppm in [-3_000, 0, 1, 2_500] {
            let c = ClientClock::new(-77, ppm);
            for t in [0u64, 1, 999, 123_456_789] {
                let l = c.local(t);
                let back = c.real_at(l, 0);
                assert!(back <= t && c.local(back) >= l, "ppm={ppm} t={t}");
                if back > 0 {
                    assert!(c.local(back - 1) < l);
                }
            }
        }
    }
}
