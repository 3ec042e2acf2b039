//! Fencing tokens: numbers that rise across successive holders of a lock.
//!
//! Each node keeps a durable counter per resource, incremented by every
//! fenced grant. One node (N = 1): the token is that counter, strictly
//! increasing. N nodes: the client takes `t = max(granted counters) + 1`
//! and raises the counter to `t` on the nodes that still hold its lock; the
//! token exists only once a quorum did so within the lock's validity. A later
//! holder's grant quorum shares a node with that raise quorum, whose counter
//! is then at least `t`, so the later holder's maximum, and token, is larger.
//! That argument needs Redlock's own timing assumptions (the earlier holder's
//! keys outlive its validity on a quorum) and durable counters.
//!
//! Taking the maximum of the grants alone is not enough: a failed minority
//! attempt increments counters too, so a holder may see no larger value than
//! a predecessor whose quorum it does not intersect in the grant step.

/// The largest fencing token: 2^53 - 1, the largest integer the servers'
/// Lua numbers (doubles) keep exactly. A node refuses, with a typed error
/// and before it writes anything, a fenced acquire whose counter is
/// `FENCE_LIMIT - 1` or more (its increment and the quorum's raise, `+ 1`,
/// could pass the limit), and a raise above it. No counter gets there by
/// use (a million fenced acquisitions a second take 285 years to), only
/// by another writer.
///
/// # Examples
///
/// ```
/// assert_eq!(redlock_core::decide::FENCE_LIMIT, 9_007_199_254_740_991);
/// ```
pub const FENCE_LIMIT: u64 = (1 << 53) - 1;

/// What a decided, fenced acquire round needs next.
///
/// # Examples
///
/// ```
/// use redlock_core::decide::{fence_step, FenceStep};
/// assert_eq!(fence_step(&[7], 1), Some(FenceStep::Done(7)));
/// assert_eq!(fence_step(&[4, 9, 6], 5), Some(FenceStep::Raise(10)));
/// assert_eq!(fence_step(&[], 5), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FenceStep {
    /// One node: its counter is the token.
    Done(u64),
    /// Raise the counters to this value on a quorum; it is then the token.
    Raise(u64),
}

/// The fencing step for the counters returned by the granting nodes of a
/// round over `nodes` nodes; `None` when no node returned a counter.
///
/// # Examples
///
/// ```
/// assert_eq!(redlock_core::decide::fence_step(&[u64::MAX], 3), Some(redlock_core::decide::FenceStep::Raise(u64::MAX)));
/// ```
#[must_use]
pub fn fence_step(counters: &[u64], nodes: usize) -> Option<FenceStep> {
    let top = counters.iter().copied().max()?;
    Some(if nodes == 1 {
        FenceStep::Done(top)
    } else {
        FenceStep::Raise(top.saturating_add(1))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn raise_target_exceeds_every_counter(counters in proptest::collection::vec(0u64..u64::MAX - 1, 1..9), n in 2usize..9) {
            let step = fence_step(&counters, n);
            prop_assert!(matches!(step, Some(FenceStep::Raise(t)) if counters.iter().all(|c| t > *c)), "{step:?}");
        }
    }
}
