//! A read-write lock over the same nodes: any number of readers, or one
//! writer.
//!
//! Read-write lock `name` lives at the key `name`. A writer holds it as a
//! mutex holds its key. A reader holds a *shared claim* on it
//! ([`Claim::shared`](crate::backend::Claim::shared)): each node keeps the
//! key's readers, each with its own time-to-live, and grants a read only
//! while no writer holds the key, and a write only while no reader does.
//! A writer's quorum and a reader's quorum meet on a node, which cannot
//! have granted both; two writers conflict as two mutex holders do. So the
//! mutex's argument applies to every pair that must not meet, and readers
//! never need to count each other (see `docs/safety.md`).
//!
//! Writers and readers wait in one line per key, in arrival order (see
//! [`RwLock`], "Policy"): a refused round leaves its manager's place in
//! the key's line on the nodes (a writer's or a reader's); a writer gives
//! way to whoever is first, a reader only to the writers ahead of it, so
//! neither a stream of readers nor a stream of writers can starve the
//! other; within one manager, a reader waits for the writers of the
//! manager that came before it.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::api::guard::Lock;
use crate::api::redlock::{kept, Redlock};
use crate::backend::SharedClaims;
use crate::engine::{Acquire, Entropy};
use crate::runtime::names::Writers;
use crate::KeepAlive;
use crate::{ConfigError, LockBackend, LockError, Resources, RoundReport};

impl<B: SharedClaims + 'static> Redlock<B> {
    /// The read-write lock `name` on this manager's nodes: any number of
    /// readers at once, or one writer, across every process.
    ///
    /// Within one manager a name is one read-write lock: asking for it as
    /// a semaphore, or locking it as a mutex, is an error.
    ///
    /// # Errors
    ///
    /// [`ConfigError::EmptyKey`], [`ConfigError::RwLockName`]. Only for
    /// backends with the [`SharedClaims`] ability.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_core::LockError;
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(3).backends())?;
    /// let doc = locks.rwlock("doc:7")?;
    /// let a = doc.try_read(Duration::from_secs(10))?;
    /// let b = doc.try_read(Duration::from_secs(10))?;
    /// assert!(matches!(doc.try_write(Duration::from_secs(10)), Err(LockError::Contended(_))));
    /// drop((a, b));
    /// let w = doc.write(Duration::from_secs(10))?;
    /// assert!(doc.try_read(Duration::from_secs(10)).is_err(), "the writer excludes readers");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn rwlock(&self, name: &str) -> Result<RwLock<B>, ConfigError> {
        // The key first: a name is recorded only for a lock made.
        let resources = Resources::one(name)?;
        let writers = self.manager.names.define_rwlock(name)?;
        Ok(RwLock {
            locks: self.clone(),
            resources,
            writers,
        })
    }

    /// Reads the read-write lock `name` without waiting:
    /// [`RwLock::try_read`] on [`Redlock::rwlock`]`(name)`.
    ///
    /// # Errors
    ///
    /// Those of [`Redlock::rwlock`] and [`RwLock::try_read`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(3).backends())?;
    /// let a = locks.try_read("config", Duration::from_secs(5))?;
    /// let b = locks.try_read("config", Duration::from_secs(5))?;
    /// assert!(locks.try_write("config", Duration::from_secs(5)).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_read(&self, name: &str, ttl: Duration) -> Result<Lock<B>, LockError<B::Error>> {
        self.rwlock(name)?.try_read(ttl)
    }

    /// Reads the read-write lock `name`, waiting up to the manager's
    /// acquire timeout: [`RwLock::read`] on [`Redlock::rwlock`]`(name)`.
    ///
    /// # Errors
    ///
    /// Those of [`Redlock::rwlock`] and [`RwLock::read`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(3).backends())?;
    /// let read = locks.read("config", Duration::from_secs(5))?;
    /// assert!(read.is_valid());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read(&self, name: &str, ttl: Duration) -> Result<Lock<B>, LockError<B::Error>> {
        self.rwlock(name)?.read(ttl)
    }

    /// Reads the read-write lock `name`, waiting at most `timeout`.
    ///
    /// # Errors
    ///
    /// Those of [`Redlock::rwlock`] and [`RwLock::read`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(3).backends())?;
    /// let read = locks.read_timeout("config", Duration::from_secs(5), Duration::from_secs(1))?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read_timeout(
        &self,
        name: &str,
        ttl: Duration,
        timeout: Duration,
    ) -> Result<Lock<B>, LockError<B::Error>> {
        self.rwlock(name)?.read_timeout(ttl, timeout)
    }

    /// Reads the read-write lock `name`, trying until `deadline` (an
    /// instant of the manager's clock).
    ///
    /// # Errors
    ///
    /// Those of [`Redlock::rwlock`] and [`RwLock::read`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(3).backends())?;
    /// let by = Instant::now() + Duration::from_secs(1);
    /// let read = locks.read_deadline("config", Duration::from_secs(5), by)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read_deadline(
        &self,
        name: &str,
        ttl: Duration,
        deadline: Instant,
    ) -> Result<Lock<B>, LockError<B::Error>> {
        self.rwlock(name)?.read_deadline(ttl, deadline)
    }

    /// Writes the read-write lock `name` without waiting:
    /// [`RwLock::try_write`] on [`Redlock::rwlock`]`(name)`.
    ///
    /// # Errors
    ///
    /// Those of [`Redlock::rwlock`] and [`RwLock::try_write`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(3).backends())?;
    /// let write = locks.try_write("config", Duration::from_secs(5))?;
    /// assert!(locks.try_read("config", Duration::from_secs(5)).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_write(&self, name: &str, ttl: Duration) -> Result<Lock<B>, LockError<B::Error>> {
        self.rwlock(name)?.try_write(ttl)
    }

    /// Writes the read-write lock `name`, waiting up to the manager's
    /// acquire timeout: [`RwLock::write`] on [`Redlock::rwlock`]`(name)`.
    ///
    /// # Errors
    ///
    /// Those of [`Redlock::rwlock`] and [`RwLock::write`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(3).backends())?;
    /// let write = locks.write("config", Duration::from_secs(5))?;
    /// write.release()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn write(&self, name: &str, ttl: Duration) -> Result<Lock<B>, LockError<B::Error>> {
        self.rwlock(name)?.write(ttl)
    }

    /// Writes the read-write lock `name`, waiting at most `timeout`.
    ///
    /// # Errors
    ///
    /// Those of [`Redlock::rwlock`] and [`RwLock::write`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(3).backends())?;
    /// let write = locks.write_timeout("config", Duration::from_secs(5), Duration::from_secs(1))?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn write_timeout(
        &self,
        name: &str,
        ttl: Duration,
        timeout: Duration,
    ) -> Result<Lock<B>, LockError<B::Error>> {
        self.rwlock(name)?.write_timeout(ttl, timeout)
    }

    /// Writes the read-write lock `name`, trying until `deadline` (an
    /// instant of the manager's clock).
    ///
    /// # Errors
    ///
    /// Those of [`Redlock::rwlock`] and [`RwLock::write`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(3).backends())?;
    /// let by = Instant::now() + Duration::from_secs(1);
    /// let write = locks.write_deadline("config", Duration::from_secs(5), by)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn write_deadline(
        &self,
        name: &str,
        ttl: Duration,
        deadline: Instant,
    ) -> Result<Lock<B>, LockError<B::Error>> {
        self.rwlock(name)?.write_deadline(ttl, deadline)
    }
}

/// A read-write lock: any number of readers at once, or one writer, across
/// every process whose managers use the same nodes. Made by
/// [`Redlock::rwlock`]; cheap to clone.
///
/// A read and a write are both a [`Lock`] on the lock's name, with a
/// lock's whole life (validity, extend, keep-alive, release on drop,
/// fencing token when fencing is on): a write an ordinary one, a read a
/// shared claim ([`Claim::shared`](crate::backend::Claim::shared)). A read
/// costs one round however many readers there are.
///
/// **Policy: one line, in arrival order; readers in it go in together.**
///
/// - Writers and readers that are refused wait in the key's line on the
///   nodes, in ticket (arrival) order, from their first refused round on:
///   a writer with a writer's place, a reader with a reader's. Writers
///   take turns through it (and through the manager's local line) as
///   [`Redlock::lock`] callers do, and a release tells the first live
///   manager in it, writer or reader, to try at once.
/// - A writer gives way to whoever is first in the line; a reader gives
///   way only to the writers ahead of it (not to readers: the readers at
///   the head of the line go in together). Within one manager, a reader
///   also waits while a writer of the manager that started before it still
///   waits.
/// - So a waiting writer is passed over only by the readers that held
///   the key or stood in the line before it (and those of their managers
///   while those managers' places live: the marks' TTL after their last
///   refused round), and a stream of later readers cannot starve it. A
///   waiting reader is passed over only by the writers that held the key
///   or stood in the line before it, each once: its wait is bounded by
///   their turns, however many writers come after it
///   (`rwlock::a_waiting_reader_goes_before_the_writers_of_other_managers_that_came_after_it`,
///   on in-memory and on real Redis nodes).
/// - A line holds 16 waiters: one that finds it full waits outside it (no
///   entry: it gives way to every writer in the line) until there is room
///   (`model::tests::a_reader_that_finds_the_line_full_waits_outside_it`).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(5).backends())?;
/// let config = locks.rwlock("config")?;
/// let value = config.with_read(Duration::from_secs(10), |_read| "read the config")?;
/// config.with_write(Duration::from_secs(10), |write| {
///     write.ensure_held()?; // before committing
///     Ok::<_, redlock_core::LockError<_>>(())
/// })??;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RwLock<B: LockBackend> {
    locks: Redlock<B>,
    /// The lock's one key.
    resources: Resources,
    writers: Arc<Writers>,
}

impl<B: LockBackend> Clone for RwLock<B> {
    fn clone(&self) -> Self {
        RwLock {
            locks: self.locks.clone(),
            resources: self.resources.clone(),
            writers: Arc::clone(&self.writers),
        }
    }
}

impl<B: LockBackend> fmt::Debug for RwLock<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RwLock")
            .field("name", &self.name())
            .finish_non_exhaustive()
    }
}

impl<B: LockBackend> RwLock<B> {
    /// The lock's name (its key on the nodes).
    ///
    /// # Examples
    ///
    /// ```
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(1).backends())?;
    /// assert_eq!(locks.rwlock("r")?.name(), "r");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn name(&self) -> &str {
        self.resources.keys().first().map_or("", String::as_str)
    }
}

impl<B: LockBackend + 'static> RwLock<B> {
    /// Reads without waiting: one round.
    ///
    /// # Errors
    ///
    /// [`LockError::Contended`] when a writer holds the lock or another
    /// manager's writer waits for it, and the other errors of
    /// [`Redlock::try_lock`].
    ///
    /// # Examples
    ///
    /// See [`Redlock::rwlock`].
    pub fn try_read(&self, ttl: Duration) -> Result<Lock<B>, LockError<B::Error>> {
        crate::events::call_span!("redlock.rwlock.try_read", self.resources);
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
    /// let read = locks.rwlock("r")?.read(Duration::from_secs(5))?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read(&self, ttl: Duration) -> Result<Lock<B>, LockError<B::Error>> {
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
    /// let read = locks.rwlock("r")?.read_timeout(Duration::from_secs(5), Duration::from_secs(1))?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read_timeout(
        &self,
        ttl: Duration,
        timeout: Duration,
    ) -> Result<Lock<B>, LockError<B::Error>> {
        let now = self.locks.manager.shared.config.clock.now();
        self.read_deadline(ttl, crate::decide::deadline::later(now, timeout))
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
    /// let read = locks.rwlock("r")?.read_deadline(Duration::from_secs(5), Instant::now() + Duration::from_secs(1))?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read_deadline(
        &self,
        ttl: Duration,
        deadline: Instant,
    ) -> Result<Lock<B>, LockError<B::Error>> {
        crate::events::call_span!("redlock.rwlock.read", self.resources);
        self.read_until(ttl, Some(deadline))
    }

    /// Writes without waiting: one round.
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
        self.locks.try_lock_resources(self.resources.clone(), ttl)
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
    /// let write = locks.rwlock("r")?.write_timeout(Duration::from_secs(5), Duration::from_secs(1))?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn write_timeout(
        &self,
        ttl: Duration,
        timeout: Duration,
    ) -> Result<Lock<B>, LockError<B::Error>> {
        let now = self.locks.manager.shared.config.clock.now();
        self.write_deadline(ttl, crate::decide::deadline::later(now, timeout))
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
    /// let write = locks.rwlock("r")?.write_deadline(Duration::from_secs(5), Instant::now() + Duration::from_secs(1))?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn write_deadline(
        &self,
        ttl: Duration,
        deadline: Instant,
    ) -> Result<Lock<B>, LockError<B::Error>> {
        let _waiting = self.writers.wait(self.writers.arrive());
        self.locks
            .lock_resources(self.resources.clone(), ttl, deadline, None, true)
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
        f: impl FnOnce(&Lock<B>) -> T,
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
    /// the rounds of a shared claim (queued, giving way to the marks of
    /// other managers' waiting writers).
    fn read_until(
        &self,
        ttl: Duration,
        deadline: Option<Instant>,
    ) -> Result<Lock<B>, LockError<B::Error>> {
        let manager = &self.locks.manager;
        let shared = &manager.shared;
        let ttl = shared.config.check_ttl(ttl)?;
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
            let pause = shared.config.settings.retry.pick(shared.entropy().jitter());
            clock.sleep(pause.min(deadline - now).max(Duration::from_millis(1)));
        }
        let acquire = Acquire::read(
            shared.config.settings.clone(),
            self.resources.clone(),
            ttl,
            deadline,
            shared.queued(true),
        );
        let acquired = self
            .locks
            .acquire_observed(acquire, None, |_| self.resources.clone())?;
        Ok(Lock::new(Arc::clone(manager), acquired))
    }
}
