//! Pure quorum, drift and validity arithmetic. No clock, no I/O.
//!
//! Everything is computed on [`Duration`] with checked arithmetic, never on
//! unsigned milliseconds, so no value can wrap around.

use std::time::Duration;

/// The fixed part of the clock-drift allowance, added to `ttl * drift_factor`.
pub const DRIFT_FLOOR: Duration = Duration::from_millis(2);

/// The number of nodes that must agree for a round to succeed: `n / 2 + 1`.
///
/// Any two quorums of the same `n` nodes share at least one node, which is
/// what makes two simultaneous holders impossible.
///
/// # Examples
///
/// ```
/// use redlock_core::decide::quorum;
/// assert_eq!(quorum(1), 1);
/// assert_eq!(quorum(4), 3);
/// assert_eq!(quorum(5), 3);
/// ```
#[must_use]
pub const fn quorum(n: usize) -> usize {
    n / 2 + 1
}

/// The clock-drift allowance for a lock of `ttl`: `ttl * drift_factor + 2 ms`.
///
/// `drift_factor` is validated by the configuration to lie in `[0, 0.5)`;
/// out-of-range or non-finite factors are treated as `0` here so that this
/// function never panics.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redlock_core::decide::drift;
/// assert_eq!(drift(Duration::from_secs(10), 0.01), Duration::from_millis(102));
/// ```
#[must_use]
pub fn drift(ttl: Duration, drift_factor: f64) -> Duration {
    let factor = if drift_factor.is_finite() && (0.0..1.0).contains(&drift_factor) {
        drift_factor
    } else {
        0.0
    };
    // `factor < 1`, so the product never exceeds `ttl` and cannot overflow.
    ttl.mul_f64(factor).saturating_add(DRIFT_FLOOR)
}

/// The remaining validity of a round that started `elapsed` ago:
/// `ttl - elapsed - drift`, or `None` when that is zero or negative.
///
/// A lock (or an extension) counts only when this is `Some`.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redlock_core::decide::validity;
/// let ms = Duration::from_millis;
/// assert_eq!(validity(ms(1000), ms(100), ms(12)), Some(ms(888)));
/// assert_eq!(validity(ms(1000), ms(990), ms(12)), None);
/// ```
#[must_use]
pub fn validity(ttl: Duration, elapsed: Duration, drift: Duration) -> Option<Duration> {
    ttl.checked_sub(elapsed)?
        .checked_sub(drift)
        .filter(|left| !left.is_zero())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn drift_examples() {
        assert_eq!(drift(ms(0), 0.01), ms(2));
        assert_eq!(drift(ms(30_000), 0.01), ms(302));
        // Bad factors never panic.
        assert_eq!(drift(ms(1000), f64::NAN), ms(2));
        assert_eq!(drift(ms(1000), -1.0), ms(2));
        assert_eq!(
            drift(Duration::MAX, 0.49),
            Duration::MAX.mul_f64(0.49) + ms(2)
        );
    }

    #[test]
    fn validity_boundary_is_none() {
        assert_eq!(validity(ms(100), ms(90), ms(10)), None);
        assert_eq!(validity(ms(100), ms(89), ms(10)), Some(ms(1)));
        assert_eq!(validity(ms(100), ms(200), ms(0)), None);
    }

    proptest! {
        #[test]
        fn quorum_is_a_strict_majority(n in 1usize..10_000) {
            let q = quorum(n);
            prop_assert!(2 * q > n);
            prop_assert!(q <= n);
            // The smallest strict majority: one fewer would not be one.
            prop_assert!(2 * (q - 1) <= n);
        }

        #[test]
        fn validity_none_exactly_when_budget_spent(
            ttl in 0u64..10_000_000_000,
            elapsed in 0u64..10_000_000_000,
            d in 0u64..10_000_000_000,
        ) {
            let (ttl, elapsed, d) = (Duration::from_nanos(ttl), Duration::from_nanos(elapsed), Duration::from_nanos(d));
            let v = validity(ttl, elapsed, d);
            prop_assert_eq!(v.is_none(), elapsed + d >= ttl);
            if let Some(v) = v {
                prop_assert_eq!(v + elapsed + d, ttl);
            }
        }

        #[test]
        fn validity_shrinks_as_time_passes(
            ttl in 0u64..1_000_000, a in 0u64..1_000_000, b in 0u64..1_000_000, d in 0u64..1_000,
        ) {
            let (early, late) = (a.min(b), a.max(b));
            let v_early = validity(ms(ttl), ms(early), ms(d));
            let v_late = validity(ms(ttl), ms(late), ms(d));
            prop_assert!(v_late <= v_early);
        }

        #[test]
        fn drift_is_at_least_the_floor_and_below_ttl_share(
            ttl in 0u64..u64::MAX / 4, factor in 0.0f64..0.5,
        ) {
            let ttl = Duration::from_nanos(ttl);
            let d = drift(ttl, factor);
            prop_assert!(d >= DRIFT_FLOOR);
            prop_assert!(d <= ttl / 2 + DRIFT_FLOOR);
        }
    }
}
