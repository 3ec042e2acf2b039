//! A counting semaphore over the same nodes: at most `permits` holders at
//! once, each permit a Redlock lock of its own.
//!
//! Permit `i` of semaphore `name` is the lock on key `name`, U+001F,
//! `permit:i` (no resource name can be it: see [`crate::keys`]). A
//! caller holds a permit when it won that key's quorum round, so the
//! mutex's safety argument applies to each permit unchanged and at most
//! `permits` callers hold one at a time. (Sets of holders kept per node and
//! won on a majority of nodes are *not* safe for more than one permit:
//! majorities intersect pairwise, and `permits + 1` holders is no pairwise
//! conflict; docs/safety.md shows the simulator catching that design.)

use std::borrow::Borrow;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::api::guard::Lock;
use crate::api::redlock::{kept, Redlock};
use crate::engine::Slots;
use crate::KeepAlive;
use crate::{Cancel, ConfigError, LockBackend, LockError};

impl<B: LockBackend + 'static> Redlock<B> {
    /// The semaphore `name` with `permits` permits on this manager's nodes:
    /// at most `permits` callers, of any process, hold one at a time.
    ///
    /// Every process must use one number of permits for one name: the
    /// nodes do not store it, so processes that disagree admit as many
    /// holders as the largest number says. Within one manager a name is
    /// one semaphore: asking for it with another number, or locking it (or
    /// a permit key) as a mutex, is an error.
    ///
    /// # Errors
    ///
    /// [`ConfigError::NoPermits`], [`ConfigError::TooManyPermits`] (more
    /// than [`MAX_PERMITS`](crate::MAX_PERMITS)), [`ConfigError::EmptyKey`],
    /// [`ConfigError::SemaphoreName`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(3).backends())?;
    /// let api = locks.semaphore("partner-api", 2)?;
    /// let a = api.try_acquire(Duration::from_secs(10))?;
    /// let b = api.try_acquire(Duration::from_secs(10))?;
    /// assert_ne!(a.slot(), b.slot());
    /// assert!(api.try_acquire(Duration::from_secs(10)).is_err(), "both permits are taken");
    /// drop(a);
    /// let c = api.acquire(Duration::from_secs(10))?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn semaphore(&self, name: &str, permits: u32) -> Result<Semaphore<B>, ConfigError> {
        // The keys first: a name is recorded only for a semaphore made.
        let slots = Slots::permits(name, permits)?;
        self.manager.names.define(name, permits)?;
        Ok(Semaphore {
            locks: self.clone(),
            name: name.into(),
            slots,
        })
    }
}

/// A counting semaphore: at most [`Semaphore::permits`] holders at once,
/// across every process whose managers use the same nodes. Made by
/// [`Redlock::semaphore`]; cheap to clone.
///
/// Each permit is a lock of its own (key `name`, U+001F, `permit:i`: see
/// [`keys`](crate::keys)), taken with the
/// mutex's rounds, validity and release rules. A round tries one permit,
/// the first one at random; a permit refused because it is held moves the
/// call on to the next one at once, and a call pauses (with the manager's
/// random retry delay) only after every permit was refused in a row. So a
/// call that finds all `k` permits taken costs `k` rounds, and
/// [`Semaphore::try_acquire`] makes at most `k` rounds.
///
/// Waiting callers poll: the local lines, the waiting marks and the
/// release notifications of [`Redlock::lock`] are for mutexes. A waiter is
/// therefore not served in turn; it tries again after each random pause.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(5).backends())?;
/// let heavy_jobs = locks.semaphore("heavy-jobs", 3)?;
/// let done = heavy_jobs.with_permit(Duration::from_secs(30), |permit| {
///     // ... at most 3 of these run at once, fleet-wide ...
///     permit.ensure_held()?; // before committing
///     Ok::<_, redlock_core::LockError<_>>(permit.slot())
/// })??;
/// assert!(done < 3);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Semaphore<B: LockBackend> {
    locks: Redlock<B>,
    name: Arc<str>,
    /// The permits' keys.
    slots: Slots,
}

impl<B: LockBackend> Clone for Semaphore<B> {
    fn clone(&self) -> Self {
        Semaphore {
            locks: self.locks.clone(),
            name: Arc::clone(&self.name),
            slots: self.slots.clone(),
        }
    }
}

impl<B: LockBackend> fmt::Debug for Semaphore<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore")
            .field("name", &self.name)
            .field("permits", &self.slots.count())
            .finish_non_exhaustive()
    }
}

impl<B: LockBackend + 'static> Semaphore<B> {
    /// The semaphore's name.
    ///
    /// # Examples
    ///
    /// ```
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(1).backends())?;
    /// assert_eq!(locks.semaphore("s", 2)?.name(), "s");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How many holders it admits at once.
    ///
    /// # Examples
    ///
    /// ```
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(1).backends())?;
    /// assert_eq!(locks.semaphore("s", 2)?.permits(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn permits(&self) -> u32 {
        self.slots.count()
    }

    /// Takes a free permit without waiting: one round per permit at most,
    /// each bounded as [`Redlock::try_lock`]'s round.
    ///
    /// # Errors
    ///
    /// [`LockError::Contended`] when every permit is held (the last
    /// round's report), [`LockError::NoQuorum`] when too many nodes failed,
    /// and the other errors of [`Redlock::try_lock`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_core::LockError;
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(3).backends())?;
    /// let one = locks.semaphore("one", 1)?;
    /// let held = one.try_acquire(Duration::from_secs(5))?;
    /// assert!(matches!(one.try_acquire(Duration::from_secs(5)), Err(LockError::Contended(_))));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_acquire(&self, ttl: Duration) -> Result<Permit<B>, LockError<B::Error>> {
        crate::events::call_span!("redlock.semaphore.try_acquire", self.slots.slots()[0]);
        self.acquire_until(ttl, None)
    }

    /// Takes a permit, waiting up to the manager's acquire timeout (default
    /// 10 s), as [`Redlock::lock`] waits.
    ///
    /// # Errors
    ///
    /// [`LockError::Timeout`] carrying the last round's error, or a
    /// non-retryable error at once.
    ///
    /// # Examples
    ///
    /// See [`Redlock::semaphore`].
    pub fn acquire(&self, ttl: Duration) -> Result<Permit<B>, LockError<B::Error>> {
        let timeout = self.locks.manager.shared.config.acquire_timeout;
        self.acquire_timeout(ttl, timeout)
    }

    /// Takes a permit, waiting at most `timeout`.
    ///
    /// # Errors
    ///
    /// As [`Semaphore::acquire`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(3).backends())?;
    /// let s = locks.semaphore("s", 1)?;
    /// let permit = s.acquire_timeout(Duration::from_secs(5), Duration::from_millis(200))?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_timeout(
        &self,
        ttl: Duration,
        timeout: Duration,
    ) -> Result<Permit<B>, LockError<B::Error>> {
        let now = self.locks.manager.shared.config.clock.now();
        self.acquire_deadline(ttl, crate::decide::deadline::later(now, timeout))
    }

    /// Takes a permit, trying until `deadline` (an instant of the
    /// manager's clock). Rounds start only before the deadline.
    ///
    /// # Errors
    ///
    /// As [`Semaphore::acquire`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(3).backends())?;
    /// let s = locks.semaphore("s", 1)?;
    /// let permit = s.acquire_deadline(Duration::from_secs(5), Instant::now() + Duration::from_secs(1))?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_deadline(
        &self,
        ttl: Duration,
        deadline: Instant,
    ) -> Result<Permit<B>, LockError<B::Error>> {
        crate::events::call_span!("redlock.semaphore.acquire", self.slots.slots()[0]);
        self.acquire_until(ttl, Some(deadline))
    }

    /// Takes a permit as [`Semaphore::acquire_deadline`] (with no deadline
    /// when `deadline` is `None`), unless `cancel` is cancelled first, from
    /// any thread: then it returns [`LockError::Cancelled`] promptly and
    /// holds no permit, as [`Redlock::lock_cancellable`] does for a lock.
    ///
    /// # Errors
    ///
    /// As [`Semaphore::acquire`], and [`LockError::Cancelled`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_core::{Cancel, LockError};
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(3).backends())?;
    /// let s = locks.semaphore("s", 1)?;
    /// let cancel = Cancel::new();
    /// let held = s.acquire_cancellable(Duration::from_secs(5), None, &cancel)?;
    /// let stopper = cancel.clone();
    /// let waiter = std::thread::spawn(move || {
    ///     // No deadline: waits until the permit is free or the call is cancelled.
    ///     s.acquire_cancellable(Duration::from_secs(5), None, &cancel).map(|p| p.slot())
    /// });
    /// std::thread::sleep(Duration::from_millis(50));
    /// stopper.cancel();
    /// assert!(matches!(waiter.join().expect("no panic"), Err(LockError::Cancelled)));
    /// drop(held);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_cancellable(
        &self,
        ttl: Duration,
        deadline: Option<Instant>,
        cancel: &Cancel,
    ) -> Result<Permit<B>, LockError<B::Error>> {
        crate::events::call_span!("redlock.semaphore.acquire", self.slots.slots()[0]);
        if cancel.is_cancelled() {
            return Err(LockError::Cancelled);
        }
        let deadline = deadline.unwrap_or_else(|| {
            crate::decide::deadline::later(
                self.locks.manager.shared.config.clock.now(),
                Duration::MAX,
            )
        });
        let _watch = cancel.watch();
        let permit = acquire_one_of(
            &self.locks,
            &self.slots,
            ttl,
            Some(deadline),
            false,
            Some(cancel),
        )?;
        if cancel.is_cancelled() {
            // Won by a round already under way: not wanted any more.
            let _ = permit.release();
            return Err(LockError::Cancelled);
        }
        Ok(permit)
    }

    /// Takes a permit (waiting as [`Semaphore::acquire`]), keeps it alive
    /// while `f` runs and releases it when `f` returns or panics, as
    /// [`Redlock::with_lock`] does for a lock.
    ///
    /// # Errors
    ///
    /// As [`Semaphore::acquire`], and [`LockError::Lost`] when the permit
    /// was lost at any point while `f` ran.
    ///
    /// # Examples
    ///
    /// See [`Semaphore`].
    pub fn with_permit<T>(
        &self,
        ttl: Duration,
        f: impl FnOnce(&Permit<B>) -> T,
    ) -> Result<T, LockError<B::Error>> {
        self.with_permit_kept(ttl, KeepAlive::new(), f)
    }

    /// [`Semaphore::with_permit`] with other bounds on automatic extension.
    ///
    /// # Errors
    ///
    /// As [`Semaphore::with_permit`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_core::KeepAlive;
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(3).backends())?;
    /// let s = locks.semaphore("s", 2)?;
    /// let policy = KeepAlive::new().max_hold(Duration::from_secs(60));
    /// s.with_permit_kept(Duration::from_secs(5), policy, |permit| permit.slot())?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_permit_kept<T>(
        &self,
        ttl: Duration,
        policy: KeepAlive,
        f: impl FnOnce(&Permit<B>) -> T,
    ) -> Result<T, LockError<B::Error>> {
        kept(self.acquire(ttl)?, policy, f)
    }

    fn acquire_until(
        &self,
        ttl: Duration,
        deadline: Option<Instant>,
    ) -> Result<Permit<B>, LockError<B::Error>> {
        acquire_one_of(&self.locks, &self.slots, ttl, deadline, false, None)
    }
}

/// The rounds of one call for one of `slots`: the same `Acquire` machine as
/// a lock's, over the slots as alternatives ([`Slots::acquire_one`], which
/// the simulator drives too). With `queued`, every round (the first too)
/// carries the manager's waiting mark and gives way to other managers'
/// marks (a read-write lock's readers give way to waiting writers so). A
/// `cancel` stops the pauses between rounds.
pub(crate) fn acquire_one_of<B: LockBackend + 'static>(
    locks: &Redlock<B>,
    slots: &Slots,
    ttl: Duration,
    deadline: Option<Instant>,
    queued: bool,
    cancel: Option<&Cancel>,
) -> Result<Permit<B>, LockError<B::Error>> {
    let manager = &locks.manager;
    let shared = &manager.shared;
    let ttl = shared.config.check_ttl(ttl)?;
    let acquire = slots.acquire_one(
        shared.config.settings.clone(),
        ttl,
        deadline,
        queued.then(|| shared.queued(true)),
    );
    // Events name the slot won, or the first slot of a failed call.
    let acquired = locks.acquire_observed(acquire, cancel, |result| match result {
        Ok(acquired) => acquired.claim.resources().clone(),
        Err(_) => slots.slots()[0].clone(),
    })?;
    let slot = slots
        .slot_of(acquired.claim.resources())
        .unwrap_or_default();
    Ok(Permit {
        lock: Lock::new(Arc::clone(manager), acquired),
        slot,
    })
}

/// A permit of a [`Semaphore`]: a [`Lock`] on one permit's key, with the
/// lock's whole life (validity, [`Lock::extend`], [`Lock::keep_alive`],
/// release on drop, fencing token when fencing is on), which it
/// dereferences to.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(3).backends())?;
/// let mut permit = locks.semaphore("s", 4)?.try_acquire(Duration::from_secs(5))?;
/// assert!(permit.is_valid());
/// permit.extend(Duration::from_secs(10))?;
/// assert_eq!(permit.resources().keys(), [format!("s\u{1f}permit:{}", permit.slot())]);
/// permit.release()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "if unused the permit is released immediately"]
pub struct Permit<B: LockBackend> {
    lock: Lock<B>,
    slot: u32,
}

impl<B: LockBackend> Permit<B> {
    /// Which permit this is, from 0 to `permits - 1`.
    ///
    /// # Examples
    ///
    /// See [`Permit`].
    #[must_use]
    pub fn slot(&self) -> u32 {
        self.slot
    }

    /// Releases the permit on every node, as [`Lock::release`].
    ///
    /// # Errors
    ///
    /// As [`Lock::release`].
    ///
    /// # Examples
    ///
    /// See [`Permit`].
    pub fn release(self) -> Result<(), LockError<B::Error>> {
        self.lock.release()
    }

    /// The permit's lock, for code written against [`Lock`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(3).backends())?;
    /// let lock: redlock_core::Lock<_> = locks.semaphore("s", 1)?.try_acquire(Duration::from_secs(5))?.into_lock();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn into_lock(self) -> Lock<B> {
        self.lock
    }
}

impl<B: LockBackend> Deref for Permit<B> {
    type Target = Lock<B>;
    fn deref(&self) -> &Lock<B> {
        &self.lock
    }
}

impl<B: LockBackend> DerefMut for Permit<B> {
    fn deref_mut(&mut self) -> &mut Lock<B> {
        &mut self.lock
    }
}

impl<B: LockBackend> Borrow<Lock<B>> for Permit<B> {
    fn borrow(&self) -> &Lock<B> {
        &self.lock
    }
}

impl<B: LockBackend> From<Permit<B>> for Lock<B> {
    fn from(permit: Permit<B>) -> Self {
        permit.lock
    }
}

impl<B: LockBackend> fmt::Debug for Permit<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("slot", &self.slot)
            .field("lock", &self.lock)
            .finish()
    }
}
