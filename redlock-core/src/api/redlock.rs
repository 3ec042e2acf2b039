//! The blocking manager, [`Redlock`]: its calls run the engine's sans-IO
//! machines ([`crate::engine`]) through the shell (`runtime/context.rs`), which
//! sends each round to every node at once.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::{Acquire, Acquired};
use crate::runtime::context::Deadlines;
use crate::runtime::lines::{Baton, Place};
use crate::runtime::mailbox::Mailbox;
use crate::runtime::manager::Manager;
use crate::{
    Cancel, IntoResources, KeepAlive, Lock, LockBackend, LockError, LostReason, NodeId, Resources,
    RoundReport, Stats, Ttl,
};

/// The Redlock manager over `N` independent nodes of backend `B`.
///
/// Each node gets one long-lived worker thread. A round sends one request
/// to every node at once: for a caller alone on the manager, by the caller
/// itself ([`Builder::own_rounds`](crate::Builder::own_rounds)); with
/// several callers, through the node workers, or, while many callers
/// drive rounds at once ([`Builder::poller_from`](crate::Builder::poller_from)),
/// through one poller thread that sends each node all of their requests in
/// one batch ([`Builder::poller`](crate::Builder::poller)). It is decided
/// as soon as a quorum granted or can no longer grant. Cloning is cheap and shares the threads.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redlock_core::{LockError, Redlock};
/// use redlock_mock::MockCluster;
///
/// let cluster = MockCluster::new(5);
/// let locks = Redlock::new(cluster.backends())?;
///
/// let lock = locks.try_lock("invoice:42", Duration::from_secs(10))?;
/// assert!(lock.validity() > Duration::from_secs(9));
/// // A second holder is refused while the first holds the lock.
/// assert!(matches!(locks.try_lock("invoice:42", Duration::from_secs(10)), Err(LockError::Contended(_))));
/// lock.release()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Redlock<B: LockBackend> {
    pub(crate) manager: Arc<Manager<B::Error>>,
}

impl<B: LockBackend> Clone for Redlock<B> {
    fn clone(&self) -> Self {
        Redlock {
            manager: Arc::clone(&self.manager),
        }
    }
}

impl<B: LockBackend> fmt::Debug for Redlock<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redlock")
            .field(
                "nodes",
                &self
                    .manager
                    .shared
                    .workers
                    .iter()
                    .map(|w| &w.id)
                    .collect::<Vec<_>>(),
            )
            .field("config", &self.manager.shared.config)
            .finish()
    }
}

impl<B: LockBackend + 'static> Redlock<B> {
    /// One acquire round: the lock, or why not. Waits at most one per-node
    /// timeout for the round, plus at most one more to release a failed round
    /// on the nodes that may hold its key. With fencing over more than one
    /// node, a won round is followed by a raise round (one more per-node
    /// timeout) before its release if that fails: three in all at most.
    ///
    /// # Errors
    ///
    /// [`LockError::Contended`], [`LockError::NoQuorum`],
    /// [`LockError::ValidityExhausted`], [`LockError::Config`] for an empty
    /// key or a bad TTL, [`LockError::Entropy`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(3).backends())?;
    /// let lock = locks.try_lock(["account:1", "account:2"], Duration::from_secs(5))?;
    /// assert_eq!(lock.resources().keys(), ["account:1", "account:2"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_lock(
        &self,
        resources: impl IntoResources,
        ttl: Duration,
    ) -> Result<Lock<B>, LockError<B::Error>> {
        let resources = resources.into_resources()?;
        crate::events::call_span!("redlock.try_lock", resources);
        self.manager.names.check_lock(&resources)?;
        self.try_lock_resources(resources, ttl)
    }

    /// [`Redlock::try_lock`] on resources already checked.
    pub(crate) fn try_lock_resources(
        &self,
        resources: Resources,
        ttl: Duration,
    ) -> Result<Lock<B>, LockError<B::Error>> {
        let shared = &self.manager.shared;
        let ttl = shared.config.check_ttl(ttl)?;
        let started = Instant::now();
        let kept = shared.observer.wants_events().then(|| resources.clone());
        let result = self.acquire_with(
            Acquire::new(shared.config.settings.clone(), resources, ttl, None, None),
            None,
        );
        let rounds = result.as_ref().map_or(1, |acquired| acquired.attempts);
        shared.observe_lock(kept.as_ref(), started, rounds, &result);
        result.map(|acquired| Lock::new(Arc::clone(&self.manager), acquired))
    }

    /// Acquires, retrying with random pauses until the configured acquire
    /// timeout (default 10 s).
    ///
    /// Callers of one manager (and its clones) that wait for the same
    /// resources queue in a local line, first come first served: only the
    /// first acquires through the nodes (retrying with random pauses against
    /// other processes), and when it releases, the next one's acquire goes
    /// to each node in the same write as the release. A hand-off thus costs
    /// one round trip, and nobody starves. Each caller still wins its own
    /// quorum round; the line only schedules. A guard leaked with
    /// `mem::forget`, or a lock lost or expired while its guard lives, hands
    /// the line on once its validity is over. [`Redlock::try_lock`] never
    /// queues.
    ///
    /// # Errors
    ///
    /// [`LockError::Timeout`] carrying the last round's error, or a
    /// non-retryable error at once.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(3).backends())?;
    /// let lock = locks.lock("nightly-report", Duration::from_secs(30))?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn lock(
        &self,
        resources: impl IntoResources,
        ttl: Duration,
    ) -> Result<Lock<B>, LockError<B::Error>> {
        self.lock_timeout(resources, ttl, self.manager.shared.config.acquire_timeout)
    }

    /// Acquires, retrying with random pauses for at most `timeout`.
    ///
    /// # Errors
    ///
    /// As [`Redlock::lock`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(3).backends())?;
    /// let lock = locks.lock_timeout("k", Duration::from_secs(5), Duration::from_millis(500))?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn lock_timeout(
        &self,
        resources: impl IntoResources,
        ttl: Duration,
        timeout: Duration,
    ) -> Result<Lock<B>, LockError<B::Error>> {
        let now = self.manager.shared.config.clock.now();
        let deadline = crate::decide::deadline::later(now, timeout);
        self.lock_deadline(resources, ttl, deadline)
    }

    /// Acquires, retrying with random pauses until `deadline` (an instant of
    /// the configured clock). Rounds start only before the deadline.
    ///
    /// # Errors
    ///
    /// As [`Redlock::lock`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::{Duration, Instant};
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(3).backends())?;
    /// let deadline = Instant::now() + Duration::from_secs(1);
    /// let lock = locks.lock_deadline("k", Duration::from_secs(5), deadline)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn lock_deadline(
        &self,
        resources: impl IntoResources,
        ttl: Duration,
        deadline: Instant,
    ) -> Result<Lock<B>, LockError<B::Error>> {
        self.lock_until(resources.into_resources()?, ttl, deadline, None)
    }

    /// Acquires as [`Redlock::lock_deadline`] (with no deadline when
    /// `deadline` is `None`), unless `cancel` is cancelled first, from any
    /// thread: then it returns [`LockError::Cancelled`] promptly and leaves
    /// nothing held (see [`Cancel`] for how promptly). A handle cancelled
    /// before the call makes it return at once.
    ///
    /// # Errors
    ///
    /// As [`Redlock::lock`], and [`LockError::Cancelled`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_core::{Cancel, LockError, Redlock};
    /// # let locks = Redlock::new(redlock_mock::MockCluster::new(3).backends())?;
    /// let cancel = Cancel::new();
    /// // Free: acquired at once.
    /// let lock = locks.lock_cancellable("k", Duration::from_secs(5), None, &cancel)?;
    /// drop(lock);
    /// cancel.cancel();
    /// let refused = locks.lock_cancellable("k", Duration::from_secs(5), None, &cancel);
    /// assert!(matches!(refused, Err(LockError::Cancelled)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn lock_cancellable(
        &self,
        resources: impl IntoResources,
        ttl: Duration,
        deadline: Option<Instant>,
        cancel: &Cancel,
    ) -> Result<Lock<B>, LockError<B::Error>> {
        let resources = resources.into_resources()?;
        if cancel.is_cancelled() {
            return Err(LockError::Cancelled);
        }
        let deadline = deadline.unwrap_or_else(|| {
            crate::decide::deadline::later(self.manager.shared.config.clock.now(), Duration::MAX)
        });
        let _watch = cancel.watch();
        let lock = self.lock_until(resources, ttl, deadline, Some(cancel))?;
        if cancel.is_cancelled() {
            // Won by a round already under way: not wanted any more.
            let _ = lock.release();
            return Err(LockError::Cancelled);
        }
        Ok(lock)
    }

    /// The lock calls once the resources are known: checked, counted and
    /// reported.
    fn lock_until(
        &self,
        resources: Resources,
        ttl: Duration,
        deadline: Instant,
        cancel: Option<&Cancel>,
    ) -> Result<Lock<B>, LockError<B::Error>> {
        self.manager.names.check_lock(&resources)?;
        self.lock_resources(resources, ttl, deadline, cancel, false)
    }

    /// [`Redlock::lock_deadline`] on resources already checked: the local
    /// line, then the rounds. With `mark_first`, the first round already
    /// leaves the caller's waiting marks (a read-write lock's writer, so
    /// that no reader gets in while it pauses).
    pub(crate) fn lock_resources(
        &self,
        resources: Resources,
        ttl: Duration,
        deadline: Instant,
        cancel: Option<&Cancel>,
        mark_first: bool,
    ) -> Result<Lock<B>, LockError<B::Error>> {
        crate::events::call_span!("redlock.lock", resources);
        let ttl = self.manager.shared.config.check_ttl(ttl)?;
        let started = Instant::now();
        let result = self.lock_in_line(&resources, ttl, deadline, cancel, mark_first);
        let rounds = match &result {
            Ok((_, rounds)) | Err((_, rounds)) => *rounds,
        };
        let result = result.map(|(lock, _)| lock).map_err(|(e, _)| e);
        self.manager
            .shared
            .observe_lock(Some(&resources), started, rounds, &result);
        result
    }

    /// The line, then the rounds: the lock or the error, each with the
    /// rounds this caller ran.
    #[allow(clippy::type_complexity)]
    fn lock_in_line(
        &self,
        resources: &Resources,
        ttl: Ttl,
        deadline: Instant,
        cancel: Option<&Cancel>,
        mark_first: bool,
    ) -> Result<(Lock<B>, u32), (LockError<B::Error>, u32)> {
        let manager = &self.manager;
        let shared = &manager.shared;
        let (ticket, handed) = match manager.lines.join_line(resources, ttl, deadline) {
            Place::Owner(ticket) => (ticket, None),
            Place::Waiting(ticket, waiter) => {
                match manager.lines.await_turn(
                    shared,
                    resources,
                    ticket,
                    &waiter,
                    cancel.map(|c| (c, deadline)),
                ) {
                    Some(Baton::Turn) => (ticket, None),
                    Some(Baton::Round(mailbox, deadlines)) => (ticket, Some((mailbox, deadlines))),
                    None if cancel.is_some_and(Cancel::is_cancelled) => {
                        return Err((LockError::Cancelled, 0))
                    }
                    None => {
                        let error = LockError::Timeout {
                            attempts: 0,
                            last: Box::new(LockError::Contended(RoundReport::untried(
                                shared.workers.len(),
                            ))),
                        };
                        return Err((error, 0));
                    }
                }
            }
        };
        // From here this caller owns the line; it passes it on unless it
        // returns holding the lock.
        let line = LineTurn {
            manager,
            resources,
            ticket,
        };
        let with_rounds = |e: LockError<B::Error>| {
            let rounds = rounds_of(&e);
            (e, rounds)
        };
        let (acquired, handed) = match handed {
            // A hand-off started our acquisition behind the release.
            Some((mailbox, deadlines)) => {
                if let Some(cancel) = cancel {
                    mailbox.set_cancel(cancel);
                }
                let acquired = shared.drive(&mailbox, deadlines).map_err(with_rounds)?;
                let handed = acquired.attempts == 1;
                (acquired, handed)
            }
            // Cancelled before any round: the line goes on to the next.
            None if cancel.is_some_and(Cancel::is_cancelled) => {
                return Err((LockError::Cancelled, 0))
            }
            None => {
                let mut acquire = Acquire::new(
                    shared.config.settings.clone(),
                    resources.clone(),
                    ttl,
                    Some(deadline),
                    Some(shared.queued(true)),
                );
                // Other managers waited for it lately: a plain first round
                // would jump their line.
                if mark_first || shared.wakeups.is_contended(resources) {
                    acquire.queue_first();
                } else if shared.wakeups.enabled() {
                    acquire.mark_at_once();
                }
                let acquired = self.acquire_with(acquire, cancel).map_err(with_rounds)?;
                (acquired, false)
            }
        };
        std::mem::forget(line);
        let rounds = acquired.attempts;
        let mut lock = Lock::new(Arc::clone(manager), acquired);
        if manager
            .lines
            .hold_line(shared, resources, ticket, lock.state(), handed)
        {
            lock.set_line(ticket);
        }
        Ok((lock, rounds))
    }

    /// A snapshot of the manager's counters: per node, requests and
    /// failures by kind, failures in a row, the last error and the queue
    /// depth; for the manager, calls by outcome. Cheap (a few relaxed
    /// loads per node): fine to read every second.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// let cluster = redlock_mock::MockCluster::new(3);
    /// let locks = redlock_core::Redlock::new(cluster.backends())?;
    /// cluster.node(2).go_down();
    /// locks.try_lock("k", Duration::from_secs(5))?.release()?;
    /// // A quorum decided the calls; let the down node's answers come in too
    /// // (false: it is down, and keeps the release for another try).
    /// assert!(!locks.flush(Duration::from_secs(5)));
    /// let stats = locks.stats();
    /// assert_eq!(stats.manager.acquired, 1);
    /// assert!(stats.nodes[2].failures.backend >= 2);
    /// assert!(stats.nodes[2].last_error.as_deref().unwrap_or("").contains("down"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn stats(&self) -> Stats {
        let shared = &self.manager.shared;
        let mut stats = shared.observer.snapshot(
            shared
                .workers
                .iter()
                .map(|w| (&w.id, w.counters.as_ref(), w.queued())),
        );
        (stats.manager.releases_heard, stats.manager.woken) = shared.wakeups.counts();
        stats
    }

    /// The node ids, in configuration order.
    ///
    /// # Examples
    ///
    /// ```
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(3).backends())?;
    /// assert_eq!(locks.nodes().count(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn nodes(&self) -> impl Iterator<Item = &NodeId> {
        self.manager.shared.workers.iter().map(|w| &w.id)
    }

    /// Waits until every request queued before this call has run on every
    /// node, or `timeout` passes; returns whether all nodes got there.
    ///
    /// A round returns as soon as a quorum answered, and a dropped guard only
    /// queues its release, so some requests may still be running on the
    /// slower nodes. Call this before asserting on a particular node in a
    /// test. A frozen or very slow node makes it return `false` after
    /// `timeout`, and so does a node that has not yet answered a release
    /// that failed (releases that fail are kept and sent again until the
    /// node answers them or the lock's TTL has surely passed; past 4096
    /// kept on one node the oldest are dropped, left to their TTL, and no
    /// longer waited for here).
    ///
    /// Dropping the manager's last handle (guards hold one too) does the
    /// same for the releases it queued, bounded by twice the node timeout,
    /// so returning from `main` releases what its guards held. A manager
    /// in a `static`, or a leaked clone, is never dropped, and
    /// `std::process::exit` runs no destructors: call this before exiting,
    /// or the TTL frees the keys.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlock_core::Redlock;
    /// let cluster = redlock_mock::MockCluster::new(5);
    /// let locks = Redlock::new(cluster.backends())?;
    /// drop(locks.try_lock("k", Duration::from_secs(5))?);
    /// assert!(locks.flush(Duration::from_secs(5)));
    /// assert!(cluster.nodes().iter().all(|node| !node.is_locked("k")));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use = "false means some node did not catch up in time"]
    pub fn flush(&self, timeout: Duration) -> bool {
        self.manager.shared.flush(timeout)
    }

    /// How many nodes must grant: `n / 2 + 1`.
    ///
    /// # Examples
    ///
    /// ```
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(5).backends())?;
    /// assert_eq!(locks.quorum(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn quorum(&self) -> usize {
        crate::quorum(self.manager.shared.workers.len())
    }

    /// Runs `f` while holding the lock on `resources`, kept alive by the
    /// manager's keeper thread with the default [`KeepAlive`] bounds, and
    /// releases it when `f` returns or panics. Acquiring waits up to the
    /// configured acquire timeout, as [`Redlock::lock`].
    ///
    /// `f` gets the guard: call [`Lock::ensure_held`] before committing a
    /// side effect. Returns `f`'s result, or the lost-lock error when the
    /// lock was lost at any point while `f` ran (an extension failed, a bound
    /// was reached, or the release found it gone): then `f`'s result is
    /// dropped, because what it did was not protected throughout.
    ///
    /// # Errors
    ///
    /// As [`Redlock::lock`], and [`LockError::Lost`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(3).backends())?;
    /// let total = locks.with_lock("report", Duration::from_millis(300), |lock| {
    ///     std::thread::sleep(Duration::from_millis(500)); // longer than the TTL
    ///     lock.ensure_held()?;
    ///     Ok::<_, redlock_core::LockError<_>>(42)
    /// })??;
    /// assert_eq!(total, 42);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_lock<T>(
        &self,
        resources: impl IntoResources,
        ttl: Duration,
        f: impl FnOnce(&Lock<B>) -> T,
    ) -> Result<T, LockError<B::Error>> {
        self.with_lock_kept(resources, ttl, KeepAlive::new(), f)
    }

    /// [`Redlock::with_lock`] with other bounds on automatic extension, or a
    /// callback on loss.
    ///
    /// # Errors
    ///
    /// As [`Redlock::with_lock`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_core::{KeepAlive, LockError, LostReason};
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(3).backends())?;
    /// let policy = KeepAlive::new().max_extensions(0);
    /// let result = locks.with_lock_kept("job", Duration::from_millis(60), policy, |lock| {
    ///     while !lock.is_lost() {
    ///         std::thread::sleep(Duration::from_millis(5));
    ///     }
    /// });
    /// assert!(matches!(result, Err(LockError::Lost { reason: LostReason::ExtensionLimit, .. })));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_lock_kept<T>(
        &self,
        resources: impl IntoResources,
        ttl: Duration,
        policy: KeepAlive,
        f: impl FnOnce(&Lock<B>) -> T,
    ) -> Result<T, LockError<B::Error>> {
        kept(self.lock(resources, ttl)?, policy, f)
    }

    /// Drives `acquire` from its first round on this thread.
    pub(crate) fn acquire_with(
        &self,
        mut acquire: Acquire<B::Error>,
        cancel: Option<&Cancel>,
    ) -> Result<Acquired, LockError<B::Error>> {
        let shared = &self.manager.shared;
        let clock = &shared.config.clock;
        acquire.start(clock.now(), &mut shared.entropy());
        let mailbox = Arc::new(Mailbox::new(
            acquire,
            Arc::clone(clock),
            std::thread::current(),
        ));
        if let Some(cancel) = cancel {
            mailbox.set_cancel(cancel);
        }
        shared.drive(&mailbox, Deadlines::default())
    }

    /// [`Redlock::acquire_with`], counted and reported as an acquisition
    /// (`named` gives the resources its event names, asked only when a hook
    /// wants events).
    pub(crate) fn acquire_observed(
        &self,
        acquire: Acquire<B::Error>,
        cancel: Option<&Cancel>,
        named: impl FnOnce(&Result<Acquired, LockError<B::Error>>) -> Resources,
    ) -> Result<Acquired, LockError<B::Error>> {
        let shared = &self.manager.shared;
        let started = Instant::now();
        let result = self.acquire_with(acquire, cancel);
        let rounds = match &result {
            Ok(acquired) => acquired.attempts,
            Err(LockError::Timeout { attempts, .. }) => *attempts,
            Err(_) => 1,
        };
        let named = shared.observer.wants_events().then(|| named(&result));
        shared.observe_lock(named.as_ref(), started, rounds, &result);
        result
    }
}

/// Keeps `guard`'s lock alive while `f` runs, then releases it: `f`'s value,
/// or the lost-lock error when the lock was lost at any point (see
/// [`Redlock::with_lock`]). On a panic in `f`, unwinding drops the guard,
/// which releases it.
pub(crate) fn kept<B, G, T>(
    guard: G,
    policy: KeepAlive,
    f: impl FnOnce(&G) -> T,
) -> Result<T, LockError<B::Error>>
where
    B: LockBackend,
    G: std::borrow::Borrow<Lock<B>> + Into<Lock<B>>,
{
    guard.borrow().keep_alive(policy)?;
    let value = f(&guard);
    let lock: Lock<B> = guard.into();
    let lost = lock.lost_error();
    match (lost, lock.release()) {
        (Some(lost), _) => Err(lost),
        (None, Err(err @ LockError::NotHeld(_))) => Err(LockError::Lost {
            reason: LostReason::Expired,
            cause: Some(Arc::new(err)),
        }),
        // A release that some nodes missed still leaves their keys to expire.
        (None, _) => Ok(value),
    }
}

/// The rounds behind an acquisition's error.
fn rounds_of<E>(error: &LockError<E>) -> u32 {
    match error {
        LockError::Timeout { attempts, .. } => *attempts,
        _ => 1,
    }
}

/// A line's ownership on its way through `lock_deadline`: passed on to the
/// next waiter when the caller returns without the lock (also on a panic).
struct LineTurn<'a, E: std::error::Error + Send + Sync + 'static> {
    manager: &'a Manager<E>,
    resources: &'a Resources,
    ticket: u64,
}

impl<E: std::error::Error + Send + Sync + 'static> Drop for LineTurn<'_, E> {
    fn drop(&mut self) {
        let manager = self.manager;
        manager
            .lines
            .leave_line(&manager.shared, self.resources, self.ticket);
    }
}
