//! A lock's fencing token, as its holder sees it: the value to pass to
//! the protected resource (how nodes reach it: [`crate::decide::fence_step`]).

use std::cmp::Ordering;
use std::fmt;

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
/// Values rise, but not one by one: every fenced grant increments each
/// node's counter it reaches and the raise lifts a quorum to the largest
/// plus one, so successive tokens on three nodes that all answer differ by
/// two, and failed attempts leave gaps too. A store must only compare them:
///
/// ```
/// # use std::time::Duration;
/// let locks = redlock_core::Redlock::builder(redlock_mock::MockCluster::new(3).backends())
///     .fencing(true)
///     .build()?;
/// let token = |_| -> Result<u64, Box<dyn std::error::Error>> {
///     let lock = locks.try_lock("ledger", Duration::from_secs(5))?;
///     let value = lock.fencing_token().expect("fencing is on").value();
///     lock.release()?;
///     Ok(value)
/// };
/// assert_eq!((token(1)?, token(2)?), (2, 4));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
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
