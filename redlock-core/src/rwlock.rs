//! A read-write lock over the same nodes: any number of readers up to its
//! reader slots, or one writer.
//!
//! Reader slot `i` of read-write lock `name` is the key `name:read:i`. A
//! reader holds one slot (as a semaphore's permit); a writer holds every
//! slot, taken in one multi-key round (all keys or none, atomically per
//! node). A writer's quorum and a reader's quorum intersect on a node,
//! which cannot grant both (the writer's keys include the reader's), and
//! two writers conflict on every key: the mutex's argument, key by key.
//!
//! Waiting writers go first: a writer that was refused leaves its waiting
//! mark on every slot, and readers' rounds are queued acquires that give
//! way to another manager's mark, so readers that come after a waiting
//! writer wait for it; within one manager, a reader waits for the writers
//! of the manager that came before it.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::driver::{kept, Redlock};
use crate::engine::{Entropy, Slots};
use crate::guard::Lock;
use crate::keeper::KeepAlive;
use crate::names::Writers;
use crate::semaphore::{acquire_one_of, Permit};
use crate::{ConfigError, LockBackend, LockError, RoundReport};

impl<B: LockBackend + 'static> Redlock<B> {
    /// The read-write lock `name` with `readers` reader slots on this
    /// manager's nodes: at most `readers` readers at once, or one writer,
    /// across every process.
    ///
    /// Every process must use one number of reader slots for one name.
    /// Within one manager a name is one read-write lock: asking for it with
    /// another number, as a semaphore, or locking it (or a reader-slot key)
    /// as a mutex, is an error.
    ///
    /// # Errors
    ///
    /// [`ConfigError::NoReaders`], [`ConfigError::TooManyReaders`] (more
    /// than [`MAX_PERMITS`](crate::MAX_PERMITS)), [`ConfigError::EmptyKey`],
    /// [`ConfigError::RwLockName`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_core::LockError;
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(3).backends())?;
    /// let doc = locks.rwlock("doc:7", 8)?;
    /// let a = doc.try_read(Duration::from_secs(10))?;
    /// let b = doc.try_read(Duration::from_secs(10))?;
    /// assert!(matches!(doc.try_write(Duration::from_secs(10)), Err(LockError::Contended(_))));
    /// drop((a, b));
    /// let w = doc.write(Duration::from_secs(10))?;
    /// assert!(doc.try_read(Duration::from_secs(10)).is_err(), "the writer excludes readers");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn rwlock(&self, name: &str, readers: u32) -> Result<RwLock<B>, ConfigError> {
        // The keys first: a name is recorded only for a lock made.
        let slots = Slots::readers(name, readers)?;
        let writers = self.manager.names.define_rwlock(name, readers)?;
        Ok(RwLock {
            locks: self.clone(),
            name: name.into(),
            slots,
            writers,
        })
    }
}

/// A read-write lock: up to [`RwLock::readers`] readers at once, or one
/// writer, across every process whose managers use the same nodes. Made by
/// [`Redlock::rwlock`]; cheap to clone.
///
/// A read is a [`Permit`] on one reader slot (taken as a semaphore's
/// permit: one round per slot at most, starting at a random one); a write
/// is a [`Lock`] on every reader slot at once. Both have a lock's whole
/// life (validity, extend, keep-alive, release on drop, fencing token).
///
/// **Policy: waiting writers go first.** A writer refused by the nodes
/// leaves its waiting mark on every slot; readers' rounds give way to
/// other managers' marks, so a reader that starts after a writer began
/// to wait waits for that writer, and a stream of readers cannot starve
/// it. Within one manager, a reader waits while a writer of the manager
/// that started before it still waits. Readers that started before the
/// writer go first. Writers take turns through the manager's local line
/// and the marks as [`Redlock::lock`] callers do; readers poll with the
/// random pause.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(5).backends())?;
/// let config = locks.rwlock("config", 16)?;
/// let value = config.with_read(Duration::from_secs(10), |_read| "read the config")?;
/// config.with_write(Duration::from_secs(10), |write| {
///     write.ensure_held()?; // before committing
///     Ok::<_, redlock_core::LockError<_>>(())
/// })??;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RwLock<B: LockBackend> {
    locks: Redlock<B>,
    name: Arc<str>,
    /// The reader slots' keys; a writer locks all of them.
    slots: Slots,
    writers: Arc<Writers>,
}

impl<B: LockBackend> Clone for RwLock<B> {
    fn clone(&self) -> Self {
        RwLock {
            locks: self.locks.clone(),
            name: Arc::clone(&self.name),
            slots: self.slots.clone(),
            writers: Arc::clone(&self.writers),
        }
    }
}

impl<B: LockBackend> fmt::Debug for RwLock<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RwLock")
            .field("name", &self.name)
            .field("readers", &self.slots.count())
            .finish_non_exhaustive()
    }
}

impl<B: LockBackend + 'static> RwLock<B> {
    /// The lock's name.
    ///
    /// # Examples
    ///
    /// ```
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(1).backends())?;
    /// assert_eq!(locks.rwlock("r", 2)?.name(), "r");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How many readers it admits at once.
    ///
    /// # Examples
    ///
    /// ```
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(1).backends())?;
    /// assert_eq!(locks.rwlock("r", 2)?.readers(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn readers(&self) -> u32 {
        self.slots.count()
    }

    /// Reads without waiting: one round per reader slot at most.
    ///
    /// # Errors
    ///
    /// [`LockError::Contended`] when a writer holds or waits for the lock
    /// or every slot is taken, and the other errors of
    /// [`Redlock::try_lock`].
    ///
    /// # Examples
    ///
    /// See [`Redlock::rwlock`].
    pub fn try_read(&self, ttl: Duration) -> Result<Permit<B>, LockError<B::Error>> {
        crate::events::call_span!("redlock.rwlock.try_read", self.slots.all());
        self.read_until(ttl, None)
    }

    /// Reads, waiting up to the manager's acquire timeout (default 10 s).
    ///
    /// # Errors
    ///
    /// [`LockError::Timeout`] carrying the last round's error, or a
    /// non-retryable error at once.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(3).backends())?;
    /// let read = locks.rwlock("r", 4)?.read(Duration::from_secs(5))?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read(&self, ttl: Duration) -> Result<Permit<B>, LockError<B::Error>> {
        self.read_timeout(ttl, self.locks.manager.shared.config.acquire_timeout)
    }

    /// Reads, waiting at most `timeout`.
    ///
    /// # Errors
    ///
    /// As [`RwLock::read`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(3).backends())?;
    /// let read = locks.rwlock("r", 4)?.read_timeout(Duration::from_secs(5), Duration::from_secs(1))?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read_timeout(
        &self,
        ttl: Duration,
        timeout: Duration,
    ) -> Result<Permit<B>, LockError<B::Error>> {
        let now = self.locks.manager.shared.config.clock.now();
        self.read_deadline(ttl, crate::config::later(now, timeout))
    }

    /// Reads, trying until `deadline` (an instant of the manager's clock).
    ///
    /// # Errors
    ///
    /// As [`RwLock::read`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(3).backends())?;
    /// let read = locks.rwlock("r", 4)?.read_deadline(Duration::from_secs(5), Instant::now() + Duration::from_secs(1))?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read_deadline(
        &self,
        ttl: Duration,
        deadline: Instant,
    ) -> Result<Permit<B>, LockError<B::Error>> {
        crate::events::call_span!("redlock.rwlock.read", self.slots.all());
        self.read_until(ttl, Some(deadline))
    }

    /// Writes without waiting: one round over every reader slot.
    ///
    /// # Errors
    ///
    /// [`LockError::Contended`] while anyone reads or writes, and the
    /// other errors of [`Redlock::try_lock`].
    ///
    /// # Examples
    ///
    /// See [`Redlock::rwlock`].
    pub fn try_write(&self, ttl: Duration) -> Result<Lock<B>, LockError<B::Error>> {
        self.locks.try_lock_resources(self.slots.all().clone(), ttl)
    }

    /// Writes, waiting up to the manager's acquire timeout (default 10 s).
    ///
    /// # Errors
    ///
    /// As [`Redlock::lock`].
    ///
    /// # Examples
    ///
    /// See [`Redlock::rwlock`].
    pub fn write(&self, ttl: Duration) -> Result<Lock<B>, LockError<B::Error>> {
        self.write_timeout(ttl, self.locks.manager.shared.config.acquire_timeout)
    }

    /// Writes, waiting at most `timeout`.
    ///
    /// # Errors
    ///
    /// As [`Redlock::lock`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(3).backends())?;
    /// let write = locks.rwlock("r", 4)?.write_timeout(Duration::from_secs(5), Duration::from_secs(1))?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn write_timeout(
        &self,
        ttl: Duration,
        timeout: Duration,
    ) -> Result<Lock<B>, LockError<B::Error>> {
        let now = self.locks.manager.shared.config.clock.now();
        self.write_deadline(ttl, crate::config::later(now, timeout))
    }

    /// Writes, trying until `deadline` (an instant of the manager's clock).
    /// While it waits, readers that come later wait for it.
    ///
    /// # Errors
    ///
    /// As [`Redlock::lock`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(3).backends())?;
    /// let write = locks.rwlock("r", 4)?.write_deadline(Duration::from_secs(5), Instant::now() + Duration::from_secs(1))?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn write_deadline(
        &self,
        ttl: Duration,
        deadline: Instant,
    ) -> Result<Lock<B>, LockError<B::Error>> {
        let _waiting = self.writers.wait(self.writers.arrive());
        self.locks
            .lock_resources(self.slots.all().clone(), ttl, deadline, None)
    }

    /// Reads (waiting as [`RwLock::read`]) while `f` runs, keeping the
    /// read alive and releasing it when `f` returns or panics.
    ///
    /// # Errors
    ///
    /// As [`RwLock::read`], and [`LockError::Lost`] when the read was lost
    /// at any point while `f` ran.
    ///
    /// # Examples
    ///
    /// See [`RwLock`].
    pub fn with_read<T>(
        &self,
        ttl: Duration,
        f: impl FnOnce(&Permit<B>) -> T,
    ) -> Result<T, LockError<B::Error>> {
        kept(self.read(ttl)?, KeepAlive::new(), f)
    }

    /// Writes (waiting as [`RwLock::write`]) while `f` runs, keeping the
    /// write alive and releasing it when `f` returns or panics.
    ///
    /// # Errors
    ///
    /// As [`RwLock::write`], and [`LockError::Lost`] when the write was
    /// lost at any point while `f` ran.
    ///
    /// # Examples
    ///
    /// See [`RwLock`].
    pub fn with_write<T>(
        &self,
        ttl: Duration,
        f: impl FnOnce(&Lock<B>) -> T,
    ) -> Result<T, LockError<B::Error>> {
        kept(self.write(ttl)?, KeepAlive::new(), f)
    }

    /// A read: first the writers of this manager that came before it, then
    /// the rounds over the reader slots (queued, giving way to the marks of
    /// other managers' waiting writers).
    fn read_until(
        &self,
        ttl: Duration,
        deadline: Option<Instant>,
    ) -> Result<Permit<B>, LockError<B::Error>> {
        let shared = &self.locks.manager.shared;
        let seq = self.writers.arrive();
        let waited = || LockError::Contended(RoundReport::untried(shared.workers.len()));
        while self.writers.ahead_of(seq) {
            let Some(deadline) = deadline else {
                return Err(waited());
            };
            let clock = &shared.config.clock;
            let now = clock.now();
            if now >= deadline {
                return Err(LockError::Timeout {
                    attempts: 0,
                    last: Box::new(waited()),
                });
            }
            let pause = shared.settings.retry.pick(shared.entropy().jitter());
            clock.sleep(pause.min(deadline - now).max(Duration::from_millis(1)));
        }
        acquire_one_of(&self.locks, &self.slots, ttl, deadline, true, None)
    }
}
