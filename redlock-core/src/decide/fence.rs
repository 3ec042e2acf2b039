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

use std::cmp::Ordering;
use std::fmt;

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

/// A lock's fencing token: pass [`FencingToken::value`] to the protected
/// resource with every write, and have it reject values lower than the
/// highest it has seen.
///
/// Values rise across successive holders under Redlock's timing assumptions
/// and with durable counters (see `docs/safety.md`). Should those
/// assumptions fail and two holders obtain the same value, the random
/// [`FencingToken::holder`] still tells them apart; tokens order by value,
/// then holder.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redlock_core::Redlock;
/// let locks = Redlock::builder(redlock_mock::MockCluster::new(3).backends()).fencing(true).build()?;
/// let first = locks.try_lock("ledger", Duration::from_secs(5))?;
/// let a = first.fencing_token().expect("fencing is on");
/// drop(first);
/// let b = locks.try_lock("ledger", Duration::from_secs(5))?.fencing_token().expect("fencing is on");
/// assert!(b.value() > a.value() && b > a);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct FencingToken {
    value: u64,
    holder: u64,
}

impl FencingToken {
    pub(crate) fn new(value: u64, holder: u64) -> Self {
        FencingToken { value, holder }
    }

    /// The rising number.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// let locks = redlock_core::Redlock::builder(redlock_mock::MockCluster::new(1).backends()).fencing(true).build()?;
    /// let token = locks.try_lock("k", Duration::from_secs(1))?.fencing_token().expect("fencing is on");
    /// assert_eq!(token.value(), 1); // the first grant of the one node's counter
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn value(&self) -> u64 {
        self.value
    }

    /// A random number chosen by this holder, to keep tokens unique even
    /// when the timing assumptions fail.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// let locks = redlock_core::Redlock::builder(redlock_mock::MockCluster::new(1).backends()).fencing(true).build()?;
    /// let token = locks.try_lock("k", Duration::from_secs(1))?.fencing_token().expect("fencing is on");
    /// let _random = token.holder();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn holder(&self) -> u64 {
        self.holder
    }
}

impl PartialOrd for FencingToken {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for FencingToken {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.value, self.holder).cmp(&(other.value, other.holder))
    }
}

impl fmt::Debug for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FencingToken({}/{:08x})", self.value, self.holder >> 32)
    }
}

impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.value)
    }
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
