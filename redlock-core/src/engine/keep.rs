//! The keep-alive schedule of one lock: when to extend, and when to stop.

use std::time::{Duration, Instant};

use crate::decide::deadline::later;
use crate::LostReason;

/// What a kept lock needs at some instant.
///
/// # Examples
///
/// See [`Keep`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeepStep {
    /// Nothing before this instant.
    Wait(Instant),
    /// Extend it now.
    Extend,
    /// Stop: it is lost for this reason.
    Lose(LostReason),
}

/// The automatic extension schedule of one lock, bounded in total hold time
/// and in number of extensions.
///
/// Extensions are due when about a third of the validity is left, or
/// earlier, when two per-node timeouts are left, if that comes first (a
/// failing extend round takes up to one, and a loss must be known while
/// the lock is still valid); never before two thirds are left, so short
/// TTLs do not spin.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// use redlock_core::engine::{Keep, KeepStep};
/// let now = Instant::now();
/// let ms = Duration::from_millis;
/// let mut keep = Keep::new(now, now + ms(30_000), ms(50), Duration::from_secs(3600), u32::MAX);
/// assert_eq!(keep.step(now, now + ms(30_000)), KeepStep::Wait(now + ms(20_000)));
/// assert_eq!(keep.step(now + ms(20_000), now + ms(30_000)), KeepStep::Extend);
/// // The validity ended before the keeper got to it: lost, not extended.
/// assert!(matches!(keep.step(now + ms(31_000), now + ms(30_000)), KeepStep::Lose(_)));
/// ```
#[derive(Debug, Clone)]
pub struct Keep {
    hold_until: Instant,
    max_extensions: u32,
    extensions: u32,
    node_timeout: Duration,
    due: Instant,
}

impl Keep {
    /// Keeps a lock valid until `valid_until` from `now`, for at most
    /// `max_hold` and `max_extensions` extensions.
    ///
    /// # Examples
    ///
    /// See [`Keep`].
    #[must_use]
    pub fn new(
        now: Instant,
        valid_until: Instant,
        node_timeout: Duration,
        max_hold: Duration,
        max_extensions: u32,
    ) -> Self {
        Keep {
            hold_until: later(now, max_hold),
            max_extensions,
            extensions: 0,
            node_timeout,
            due: due(now, valid_until, node_timeout),
        }
    }

    /// When the next extension is due.
    ///
    /// # Examples
    ///
    /// See [`Keep`].
    #[must_use]
    pub fn due(&self) -> Instant {
        self.due
    }

    /// What the lock, valid until `valid_until`, needs at `now`.
    ///
    /// # Examples
    ///
    /// See [`Keep`].
    #[must_use]
    pub fn step(&self, now: Instant, valid_until: Instant) -> KeepStep {
        if now < self.due {
            return KeepStep::Wait(self.due);
        }
        if now >= valid_until {
            // Another client may have held it since: never extended back.
            return KeepStep::Lose(LostReason::Expired);
        }
        if now >= self.hold_until {
            return KeepStep::Lose(LostReason::HoldLimit);
        }
        if self.extensions >= self.max_extensions {
            return KeepStep::Lose(LostReason::ExtensionLimit);
        }
        KeepStep::Extend
    }

    /// An extension succeeded at `now`; the lock is now valid until
    /// `valid_until`.
    ///
    /// # Examples
    ///
    /// See [`Keep`].
    pub fn extended(&mut self, now: Instant, valid_until: Instant) {
        self.extensions = self.extensions.saturating_add(1);
        self.due = due(now, valid_until, self.node_timeout);
    }

    /// How many extensions ran.
    ///
    /// # Examples
    ///
    /// See [`Keep`].
    #[must_use]
    pub fn extensions(&self) -> u32 {
        self.extensions
    }
}

/// When to extend a lock valid until `valid_until`, at `now`.
pub(crate) fn due(now: Instant, valid_until: Instant, node_timeout: Duration) -> Instant {
    let remaining = valid_until.saturating_duration_since(now);
    let margin_point = remaining.saturating_sub(node_timeout.saturating_mul(2));
    later(now, margin_point.clamp(remaining / 3, remaining * 2 / 3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extensions_are_due_between_a_third_and_two_thirds_of_the_validity() {
        let now = Instant::now();
        let ms = Duration::from_millis;
        // A long TTL against the node timeout: a third left.
        assert_eq!(due(now, now + ms(30_000), ms(50)), now + ms(20_000));
        // The failing round must end before the validity does.
        assert_eq!(due(now, now + ms(300), ms(100)), now + ms(100));
        assert_eq!(due(now, now + ms(900), ms(200)), now + ms(500));
        // Never spinning, whatever the node timeout.
        assert_eq!(due(now, now + ms(300), ms(10_000)), now + ms(100));
        assert_eq!(due(now, now, ms(50)), now);
    }

    #[test]
    fn bounds_are_checked_when_due() {
        let now = Instant::now();
        let ms = Duration::from_millis;
        let mut keep = Keep::new(now, now + ms(300), ms(10), ms(250), 1);
        let at = keep.due();
        assert_eq!(keep.step(at, now + ms(300)), KeepStep::Extend);
        keep.extended(at, at + ms(300));
        let at = keep.due();
        assert_eq!(
            keep.step(at, at + ms(100)),
            KeepStep::Lose(LostReason::HoldLimit)
        );
        let mut keep = Keep::new(now, now + ms(300), ms(10), ms(10_000), 1);
        keep.extended(now, now + ms(300));
        assert_eq!(
            keep.step(keep.due(), now + ms(300)),
            KeepStep::Lose(LostReason::ExtensionLimit)
        );
    }
}
