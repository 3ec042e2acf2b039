//! The sans-IO verdict on a round: the same rule for the blocking manager and
//! for simulations.

use std::time::Duration;

use crate::{validity, Decision, Tally};

/// What a decided round means for the caller.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redlock_core::decide::{judge, Tally, Verdict, Vote};
/// let mut tally = Tally::new(3);
/// tally.record(0, Vote::Granted);
/// tally.record(1, Vote::Granted);
/// let ms = Duration::from_millis;
/// assert_eq!(judge(&tally, ms(1000), ms(10), ms(12)), Some(Verdict::Held { validity: ms(978) }));
/// assert_eq!(judge(&tally, ms(1000), ms(990), ms(12)), Some(Verdict::ValidityExhausted));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// A quorum granted with validity left: the operation succeeded.
    Held {
        /// `ttl - elapsed - drift`, measured from the round's start.
        validity: Duration,
    },
    /// A quorum granted, too slowly to leave any validity.
    ValidityExhausted,
    /// Lost because too many nodes refused (another holder, or our token gone).
    Refused,
    /// Lost because the failed nodes alone make a quorum unreachable.
    NoQuorum,
}

/// Judges a round that started `elapsed` ago: `None` while the tally is
/// still pending.
///
/// The elapsed time must be read when the deciding vote arrived (or later),
/// from a monotonic clock on the client.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redlock_core::decide::{judge, Tally, Verdict, Vote};
/// let mut tally = Tally::new(3);
/// tally.record(0, Vote::Failed);
/// assert_eq!(judge(&tally, Duration::from_secs(1), Duration::ZERO, Duration::ZERO), None);
/// tally.record(1, Vote::Failed);
/// let verdict = judge(&tally, Duration::from_secs(1), Duration::ZERO, Duration::ZERO);
/// assert_eq!(verdict, Some(Verdict::NoQuorum));
/// ```
#[must_use]
pub fn judge(tally: &Tally, ttl: Duration, elapsed: Duration, drift: Duration) -> Option<Verdict> {
    match tally.decision() {
        Decision::Pending => None,
        Decision::Won => Some(match validity(ttl, elapsed, drift) {
            Some(validity) => Verdict::Held { validity },
            None => Verdict::ValidityExhausted,
        }),
        Decision::Lost if tally.failures_prevent_quorum() => Some(Verdict::NoQuorum),
        Decision::Lost => Some(Verdict::Refused),
    }
}
