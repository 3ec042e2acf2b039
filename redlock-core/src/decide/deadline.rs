//! Deadlines that never overflow.

use std::time::{Duration, Instant};

/// `now + after`, or the farthest instant this platform can represent
/// within that (so `Duration::MAX` means "practically never"), never a panic.
pub(crate) fn later(now: Instant, after: Duration) -> Instant {
    if let Some(at) = now.checked_add(after) {
        return at;
    }
    // Halve what is left until it fits: at most 64 steps.
    let mut step = after;
    let mut at = now;
    while !step.is_zero() {
        step /= 2;
        if let Some(next) = at.checked_add(step) {
            at = next;
        }
    }
    at
}
