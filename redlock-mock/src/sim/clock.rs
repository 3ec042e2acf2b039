//! Per-process clocks over the one virtual real-time clock, and the
//! client readings as the `Instant`s the core's machines take.
//!
//! Real (virtual) time is `u64` nanoseconds from the start of a run. Each
//! node and client reads its own local clock: an offset, a rate error in
//! parts per million, and (for nodes) jumps. Local readings are `i64`
//! nanoseconds so that backward jumps and negative offsets need no care.
//! The machines of `redlock_core::engine` take `Instant`s: a client's
//! reading `l` is `base + SHIFT + l` for one `base` per run ([`Timebase`]);
//! the machines only ever subtract or add durations, so nothing depends on
//! the base.

use std::time::{Duration, Instant};

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

/// `d` in nanoseconds (saturating).
pub(crate) fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// `d` in signed nanoseconds (saturating far below overflow).
pub(crate) fn signed(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX / 4)
}

/// How far past the base a reading of zero lies, so that no reading (the
/// offsets are non-negative, the rate errors small) maps before the base.
const SHIFT: i64 = 1 << 42;

/// Maps client clock readings to `Instant`s and back, for one run. The
/// base is the only real-clock read of a run; decisions only ever use
/// differences of the instants, and the trace never sees one.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timebase {
    base: Instant,
}

impl Timebase {
    pub(crate) fn new() -> Self {
        Timebase {
            base: Instant::now(),
        }
    }

    /// The instant of the client reading `local`.
    pub(crate) fn at(self, local: i64) -> Instant {
        let offset = u64::try_from(local.saturating_add(SHIFT)).unwrap_or(0);
        self.base
            .checked_add(Duration::from_nanos(offset))
            .unwrap_or(self.base)
    }

    /// The client reading of `at`.
    pub(crate) fn local(self, at: Instant) -> i64 {
        let since = at.saturating_duration_since(self.base).as_nanos();
        i64::try_from(since).unwrap_or(i64::MAX / 4) - SHIFT
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
    fn timebase_round_trips() {
        let time = Timebase::new();
        for local in [0i64, 1, 999_999_999_999, -5] {
            assert_eq!(time.local(time.at(local)), local);
        }
        assert_eq!(time.at(7) - time.at(2), Duration::from_nanos(5));
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
