//! The lock guard: validity, extend, release, the lost-lock signal, and
//! release on drop.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::engine::{Acquired, Decided, Lease, Message, Single, Until};
use crate::runtime::manager::Manager;
use crate::runtime::state::{self, LockState};
use crate::KeepAlive;
use crate::{FencingToken, LockBackend, LockError, Resources};

/// A held Redlock. Releases on all nodes when dropped.
///
/// The lock is only safe to act on while [`Lock::is_valid`]: mutual exclusion
/// holds for the validity measured when it was acquired (TTL minus the time
/// the round took minus clock drift), not for as long as the guard exists.
/// With automatic extension ([`Lock::keep_alive`], [`Redlock::with_lock`](crate::Redlock::with_lock))
/// check [`Lock::ensure_held`] before committing a side effect.
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
    manager: Arc<Manager<B::Error>>,
    state: Arc<LockState<B::Error>>,
    fence: Option<FencingToken>,
    released: bool,
    /// The ticket of the local line this lock owns, if it came through one.
    line: Option<u64>,
}

impl<B: LockBackend> Lock<B> {
    pub(crate) fn new(manager: Arc<Manager<B::Error>>, acquired: Acquired) -> Self {
        let state = Arc::new(LockState {
            claim: acquired.claim,
            life: Mutex::new(
                Lease::new(acquired.ttl, acquired.valid_until).skipping(acquired.refused),
            ),
            extending: Mutex::new(()),
        });
        Lock {
            manager,
            state,
            fence: acquired.fence,
            released: false,
            line: None,
        }
    }

    pub(crate) fn state(&self) -> &Arc<LockState<B::Error>> {
        &self.state
    }

    /// Marks the lock as the owner of local line `ticket`, which it hands
    /// over when released.
    pub(crate) fn set_line(&mut self, ticket: u64) {
        self.line = Some(ticket);
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
        self.state.claim.resources()
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
        self.state.life.lock().ttl().as_duration()
    }

    /// The fencing token, when the manager was built with
    /// [`fencing(true)`](crate::Builder::fencing).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(1).backends())?;
    /// let lock = locks.try_lock("a", Duration::from_secs(3))?;
    /// assert!(lock.fencing_token().is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn fencing_token(&self) -> Option<FencingToken> {
        self.fence
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
        let now = self.manager.shared.config.clock.now();
        self.state.life.lock().validity(now)
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

    /// Whether the lock is lost: automatic extension failed or hit its bound,
    /// or the validity ran out.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(3).backends())?;
    /// let lock = locks.try_lock("a", Duration::from_secs(10))?;
    /// assert!(!lock.is_lost());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn is_lost(&self) -> bool {
        let now = self.manager.shared.config.clock.now();
        self.state.life.lock().is_lost(now)
    }

    /// `Ok` while the lock is held and valid: call it right before committing
    /// a side effect that the lock protects.
    ///
    /// # Errors
    ///
    /// [`LockError::Lost`] with the reason (and the failed round, if any).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(3).backends())?;
    /// let lock = locks.try_lock("a", Duration::from_secs(10))?;
    /// lock.ensure_held()?;
    /// // ... commit ...
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn ensure_held(&self) -> Result<(), LockError<B::Error>> {
        let now = self.manager.shared.config.clock.now();
        self.state.life.lock().ensure_held(now)
    }

    /// Keeps the lock alive from the manager's shared keeper thread: it
    /// extends the lock whenever about a third of its validity remains, with
    /// the same quorum and validity rules as [`Lock::extend`], until the
    /// guard is released or dropped, an extension fails, or a bound of
    /// `policy` is reached; then the lock is marked lost
    /// ([`Lock::is_lost`], [`Lock::ensure_held`], the policy's callback).
    ///
    /// # Errors
    ///
    /// [`LockError::Spawn`] when the keeper thread cannot be started.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlock_core::KeepAlive;
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(3).backends())?;
    /// let lock = locks.try_lock("a", Duration::from_millis(300))?;
    /// lock.keep_alive(KeepAlive::new().max_hold(Duration::from_secs(60)))?;
    /// std::thread::sleep(Duration::from_millis(600)); // twice the TTL
    /// lock.ensure_held()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn keep_alive(&self, policy: KeepAlive) -> Result<(), LockError<B::Error>> {
        let manager = &self.manager;
        manager
            .keeper
            .register(&manager.shared, &self.state, policy)
            .map_err(LockError::Spawn)
    }

    /// Resets the TTL to `ttl` on every node that still holds this lock, and
    /// counts it as extended when a quorum did so in time. The new validity
    /// is `ttl - elapsed - drift`, measured from this call's start, and is
    /// returned. Extensions of one lock (this call's and the keeper's) run
    /// one at a time.
    ///
    /// A failed round may still have set the new TTL on some nodes, so
    /// after any failure the validity is at most what `ttl` allows from
    /// this call's start (`start + ttl - drift`): a failed extend with a
    /// shorter TTL shortens the lock, and one with a longer TTL leaves the
    /// previous validity.
    ///
    /// # Errors
    ///
    /// [`LockError::NotHeld`] when the lock's validity had already ended (no
    /// round is sent: an expired lock stays lost) or a quorum no longer
    /// holds our token (the guard is then marked invalid),
    /// [`LockError::Lost`] when the lock was marked lost by its keep-alive,
    /// [`LockError::NoQuorum`] when too many nodes failed,
    /// [`LockError::ValidityExhausted`] when the round was too slow,
    /// [`LockError::Config`] for a bad TTL.
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
        crate::events::call_span!("redlock.extend", self.state.claim.resources());
        let ttl = self.manager.shared.config.check_ttl(ttl)?;
        state::extend(&self.manager.shared, &self.state, ttl)
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
        crate::events::call_span!("redlock.release", self.state.claim.resources());
        let started = Instant::now();
        self.released = true;
        let (message, skips) = {
            let mut life = self.state.life.lock();
            (life.begin_release(), life.skips().cloned())
        };
        let shared = &self.manager.shared;
        let claim = &self.state.claim;
        let sent = (message, skips.clone());
        let decided = match self.release_round(sent, true) {
            Some(decided) => decided,
            None => shared.run_single(
                Single::new(
                    &shared.config.settings,
                    message,
                    Arc::clone(claim),
                    Until::Decided,
                )
                .skipping(skips),
            ),
        };
        let result = self
            .state
            .life
            .lock()
            .end_release(decided, &shared.config.settings);
        shared.observe_release(claim.resources(), started, Some(&result));
        result
    }

    /// Sends the release round `sent`: handing the lock over to the line's
    /// next waiter when the lock is a line's, plainly otherwise; with
    /// `wait`, its decided round.
    fn release_round(
        &self,
        sent: (Message, Option<Arc<[bool]>>),
        wait: bool,
    ) -> Option<Decided<B::Error>> {
        let (manager, claim) = (&self.manager, &self.state.claim);
        match self.line {
            Some(ticket) => {
                manager
                    .lines
                    .release_handing_off(&manager.shared, claim, sent, ticket, wait)
            }
            None => manager.shared.release(claim, sent, wait),
        }
    }

    /// The loss recorded so far, as an error (used by `with_lock`).
    pub(crate) fn lost_error(&self) -> Option<LockError<B::Error>> {
        self.ensure_held().err()
    }
}

impl<B: LockBackend> Drop for Lock<B> {
    fn drop(&mut self) {
        if !self.released {
            let started = Instant::now();
            let sent = {
                let mut life = self.state.life.lock();
                (life.begin_release(), life.skips().cloned())
            };
            let _ = self.release_round(sent, false);
            self.manager
                .shared
                .observe_release(self.state.claim.resources(), started, None);
        }
    }
}

impl<B: LockBackend> fmt::Debug for Lock<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lock")
            .field("resources", self.state.claim.resources())
            .field("token", self.state.claim.token())
            .field("fence", &self.fence)
            .field("validity", &self.validity())
            .field("lost", &self.state.life.lock().lost())
            .finish_non_exhaustive()
    }
}
