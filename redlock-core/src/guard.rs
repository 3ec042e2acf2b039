//! The lock guard: validity, extend, release, and release on drop.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::driver::Shared;
use crate::worker::Op;
use crate::{Claim, LockBackend, LockError, Resources, Ttl, Verdict};

/// A held Redlock. Releases on all nodes when dropped.
///
/// The lock is only safe to act on while [`Lock::is_valid`]: mutual exclusion
/// holds for the validity measured when it was acquired (TTL minus the time
/// the round took minus clock drift), not for as long as the guard exists.
///
/// Dropping the guard queues a release on every node and returns at once
/// (bounded, never panics); [`Lock::release`] does the same and waits for a
/// quorum's answer to report whether the lock was still held.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redlock_core::Redlock;
/// let locks = Redlock::new(redlock_mock::MockCluster::new(3).backends())?;
/// {
///     let lock = locks.try_lock("cache-rebuild", Duration::from_secs(5))?;
///     assert!(lock.is_valid());
/// } // released here
/// let again = locks.try_lock("cache-rebuild", Duration::from_secs(5))?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "if unused the lock is released immediately"]
pub struct Lock<B: LockBackend> {
    shared: Arc<Shared<B::Error>>,
    claim: Arc<Claim>,
    ttl: Ttl,
    valid_until: Instant,
    released: bool,
}

impl<B: LockBackend> Lock<B> {
    pub(crate) fn new(
        shared: Arc<Shared<B::Error>>,
        claim: Arc<Claim>,
        ttl: Ttl,
        valid_until: Instant,
    ) -> Self {
        Lock {
            shared,
            claim,
            ttl,
            valid_until,
            released: false,
        }
    }

    /// The locked resources.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(1).backends())?;
    /// let lock = locks.try_lock("a", Duration::from_secs(1))?;
    /// assert_eq!(lock.resources().keys(), ["a"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn resources(&self) -> &Resources {
        self.claim.resources()
    }

    /// The TTL of the last successful acquire or extend.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(1).backends())?;
    /// let lock = locks.try_lock("a", Duration::from_secs(3))?;
    /// assert_eq!(lock.ttl(), Duration::from_secs(3));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn ttl(&self) -> Duration {
        self.ttl.as_duration()
    }

    /// Time left before the lock may be taken by someone else (zero once
    /// expired), by the manager's clock.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(3).backends())?;
    /// let lock = locks.try_lock("a", Duration::from_secs(10))?;
    /// assert!(lock.validity() <= Duration::from_secs(10));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn validity(&self) -> Duration {
        self.valid_until
            .saturating_duration_since(self.shared.config.clock.now())
    }

    /// Whether any validity is left.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(3).backends())?;
    /// let lock = locks.try_lock("a", Duration::from_secs(10))?;
    /// assert!(lock.is_valid());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn is_valid(&self) -> bool {
        !self.validity().is_zero()
    }

    /// Resets the TTL to `ttl` on every node that still holds this lock, and
    /// counts it as extended when a quorum did so in time. The new validity
    /// is `ttl - elapsed - drift`, measured from this call's start, and is
    /// returned.
    ///
    /// # Errors
    ///
    /// [`LockError::NotHeld`] when a quorum no longer holds our token (the
    /// lock expired; the guard is then marked invalid), [`LockError::NoQuorum`]
    /// when too many nodes failed, [`LockError::ValidityExhausted`] when the
    /// round was too slow, [`LockError::Config`] for a bad TTL. On failures
    /// other than `NotHeld` the previous validity still stands.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(3).backends())?;
    /// let mut lock = locks.try_lock("a", Duration::from_secs(1))?;
    /// let validity = lock.extend(Duration::from_secs(30))?;
    /// assert!(validity > Duration::from_secs(29));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn extend(&mut self, ttl: Duration) -> Result<Duration, LockError<B::Error>> {
        let ttl = self.shared.config.check_ttl(ttl)?;
        let round = self.shared.run(Op::Extend(ttl), &self.claim);
        match self.shared.judge(&round, ttl) {
            Verdict::Held { validity } => {
                self.ttl = ttl;
                self.valid_until = round.decided_at + validity;
                Ok(validity)
            }
            verdict => {
                if verdict == Verdict::Refused {
                    self.valid_until = round.decided_at.min(self.valid_until);
                }
                Err(self.shared.failure(verdict, round, ttl, LockError::NotHeld))
            }
        }
    }

    /// Releases the lock on all nodes and reports whether a quorum still held
    /// it. Waits at most about one per-node timeout.
    ///
    /// # Errors
    ///
    /// [`LockError::NotHeld`] when a quorum no longer held our token (it had
    /// expired), [`LockError::NoQuorum`] when too many nodes failed to answer
    /// (their keys expire by TTL).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(3).backends())?;
    /// let lock = locks.try_lock("a", Duration::from_secs(10))?;
    /// lock.release()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn release(mut self) -> Result<(), LockError<B::Error>> {
        self.released = true;
        let round = self.shared.run(Op::Release, &self.claim);
        match self.shared.judge(&round, self.ttl) {
            Verdict::Held { .. } | Verdict::ValidityExhausted => Ok(()),
            verdict => Err(self
                .shared
                .failure(verdict, round, self.ttl, LockError::NotHeld)),
        }
    }
}

impl<B: LockBackend> Drop for Lock<B> {
    fn drop(&mut self) {
        if !self.released {
            self.shared.send_detached(Op::Release, &self.claim);
        }
    }
}

impl<B: LockBackend> fmt::Debug for Lock<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lock")
            .field("resources", self.claim.resources())
            .field("token", self.claim.token())
            .field("ttl", &self.ttl)
            .field("validity", &self.validity())
            .finish_non_exhaustive()
    }
}
