//! The lock guard: validity, extend, release, the lost-lock signal, and
//! release on drop.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::config::later;
use crate::fanout::Shared;
use crate::keeper::KeepAlive;
use crate::worker::Op;
use crate::{
    Claim, FencingToken, LockBackend, LockError, LostReason, Resources, RoundReport, Ttl, Verdict,
};

/// What the guard and the keeper thread share about one held lock.
pub(crate) struct LockState<E> {
    pub(crate) claim: Arc<Claim>,
    pub(crate) life: Mutex<Lifetime<E>>,
    /// Held for the whole of an extend round, so that the keeper's and the
    /// caller's extensions never interleave (each sets the validity from
    /// its own round).
    extending: Mutex<()>,
}

pub(crate) struct Lifetime<E> {
    pub(crate) ttl: Ttl,
    /// The longest TTL ever sent for this lock: how long a key may outlive
    /// a failed release.
    pub(crate) longest: Ttl,
    pub(crate) valid_until: Instant,
    pub(crate) released: bool,
    pub(crate) lost: Option<(LostReason, Option<Arc<LockError<E>>>)>,
}

impl<E> LockState<E> {
    /// Records a loss (the first one wins) and returns whether it was new.
    pub(crate) fn mark_lost(&self, reason: LostReason, cause: Option<LockError<E>>) -> bool {
        let mut life = self.life.lock();
        if life.lost.is_some() || life.released {
            return false;
        }
        life.lost = Some((reason, cause.map(Arc::new)));
        true
    }
}

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
    shared: Arc<Shared<B::Error>>,
    state: Arc<LockState<B::Error>>,
    fence: Option<FencingToken>,
    released: bool,
    /// The ticket of the local line this lock owns, if it came through one.
    line: Option<u64>,
}

impl<B: LockBackend> Lock<B> {
    pub(crate) fn new(
        shared: Arc<Shared<B::Error>>,
        claim: Arc<Claim>,
        ttl: Ttl,
        valid_until: Instant,
        fence: Option<FencingToken>,
    ) -> Self {
        let life = Lifetime {
            ttl,
            longest: ttl,
            valid_until,
            released: false,
            lost: None,
        };
        let state = Arc::new(LockState {
            claim,
            life: Mutex::new(life),
            extending: Mutex::new(()),
        });
        Lock {
            shared,
            state,
            fence,
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
        self.state.life.lock().ttl.as_duration()
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
        let valid_until = self.state.life.lock().valid_until;
        valid_until.saturating_duration_since(self.shared.config.clock.now())
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
        self.state.life.lock().lost.is_some() || !self.is_valid()
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
        if let Some((reason, cause)) = &self.state.life.lock().lost {
            return Err(LockError::Lost {
                reason: *reason,
                cause: cause.clone(),
            });
        }
        if self.is_valid() {
            Ok(())
        } else {
            Err(LockError::Lost {
                reason: LostReason::Expired,
                cause: None,
            })
        }
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
    /// [`LockError::Config`] when the keeper thread cannot be started.
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
        let shared = &self.shared;
        crate::keeper::register(shared, &self.state, policy).map_err(LockError::Config)
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
        let ttl = self.shared.config.check_ttl(ttl)?;
        extend(&self.shared, &self.state, ttl)
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
        let (ttl, longest) = {
            let mut life = self.state.life.lock();
            life.released = true;
            (life.ttl, life.longest)
        };
        let shared = &self.shared;
        let fencing = shared.config.fencing;
        let claim = &self.state.claim;
        let round = match shared.release_handing_off(claim, longest, self.line, fencing, true) {
            Some(launched) => shared.finish(&launched),
            None => shared.run(Op::Release(longest), claim),
        };
        match self.shared.judge(&round, ttl) {
            Verdict::Held { .. } | Verdict::ValidityExhausted => Ok(()),
            verdict => Err(self.shared.failure(verdict, round, ttl, LockError::NotHeld)),
        }
    }

    /// The loss recorded so far, as an error (used by `with_lock`).
    pub(crate) fn lost_error(&self) -> Option<LockError<B::Error>> {
        self.ensure_held().err()
    }
}

/// One extend round for `state`; shared by [`Lock::extend`] and the keeper.
pub(crate) fn extend<E>(
    shared: &Shared<E>,
    state: &LockState<E>,
    ttl: Ttl,
) -> Result<Duration, LockError<E>> {
    let _turn = state.extending.lock();
    {
        let mut life = state.life.lock();
        if let Some((reason, cause)) = &life.lost {
            return Err(LockError::Lost {
                reason: *reason,
                cause: cause.clone(),
            });
        }
        if shared.config.clock.now() >= life.valid_until {
            // Expired: another client may have held the lock since, so it
            // is not extended back to life.
            life.lost = Some((LostReason::Expired, None));
            return Err(LockError::NotHeld(RoundReport::untried(
                shared.workers.len(),
            )));
        }
        life.longest = life.longest.max(ttl);
    }
    let round = shared.run(Op::Extend(ttl), &state.claim);
    match shared.judge(&round, ttl) {
        Verdict::Held { validity } => {
            let mut life = state.life.lock();
            life.ttl = ttl;
            life.valid_until = later(round.decided_at, validity);
            Ok(validity)
        }
        verdict => {
            let mut life = state.life.lock();
            // Nodes that granted, or did not answer, may now hold the key
            // for just `ttl` from some time after the round started.
            let bound = ttl
                .as_duration()
                .checked_sub(shared.config.drift(ttl))
                .map_or(round.started, |left| later(round.started, left));
            life.valid_until = life.valid_until.min(bound);
            if verdict == Verdict::Refused {
                life.valid_until = round.decided_at.min(life.valid_until);
            }
            drop(life);
            Err(shared.failure(verdict, round, ttl, LockError::NotHeld))
        }
    }
}

impl<B: LockBackend> Drop for Lock<B> {
    fn drop(&mut self) {
        if !self.released {
            let longest = {
                let mut life = self.state.life.lock();
                life.released = true;
                life.longest
            };
            let fencing = self.shared.config.fencing;
            let _ = self.shared.release_handing_off(
                &self.state.claim,
                longest,
                self.line,
                fencing,
                false,
            );
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
            .field(
                "lost",
                &self
                    .state
                    .life
                    .lock()
                    .lost
                    .as_ref()
                    .map(|(reason, _)| *reason),
            )
            .finish_non_exhaustive()
    }
}
