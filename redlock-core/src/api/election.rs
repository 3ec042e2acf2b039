//! Leader election over the manager's nodes: a kept-alive, fenced lock on
//! the election's name is the leadership, its fencing token the term.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use parking_lot::Mutex;

use crate::backend::{Fencing, Inspect, Watcher};
use crate::engine::{Leader, Observed, Watch, WatchStep};
use crate::{
    Cancel, ConfigError, KeepAlive, Lock, LockBackend, LockError, LostReason, Redlock, Resources,
};

/// What runs when a leadership is lost (see [`Election::on_lost`]).
type OnLost = Arc<dyn Fn(LostReason) + Send + Sync>;

impl<B: Fencing + Inspect + 'static> Redlock<B> {
    /// The election `name` among every candidate that campaigns on it on
    /// this manager's nodes, from any process: at most one
    /// [`Leadership`] at a time, each with a term (its fencing token) that
    /// rises from one leader to the next. A leader is kept alive for `ttl`
    /// at a time by the manager's keeper thread; a leader that crashes is
    /// replaced within about `ttl`.
    ///
    /// The manager must have fencing on ([`Builder::fencing`]): the term
    /// is a fencing token. Give it an [identity](crate::Builder::identity),
    /// so that [`Election::leader`] can say who leads.
    ///
    /// [`Builder::fencing`]: crate::Builder::fencing
    ///
    /// # Errors
    ///
    /// [`ConfigError::ElectionNeedsFencing`] on a manager without fencing;
    /// [`ConfigError::EmptyKey`] or [`ConfigError::ReservedChar`] for a
    /// name no lock can have; a `ttl` no lock can have
    /// ([`ConfigError::TtlZero`], [`ConfigError::TtlWithinDrift`], ...).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_core::{Identity, Redlock};
    /// let cluster = redlock_mock::MockCluster::new(3);
    /// let locks = Redlock::builder(cluster.backends())
    ///     .fencing(true)
    ///     .identity(Identity::new("scheduler-1")?)
    ///     .build()?;
    /// let election = locks.election("scheduler", Duration::from_secs(5))?;
    /// let leadership = election.campaign()?;
    /// // ... run the scheduler while leadership.ensure_held() is Ok ...
    /// let leader = election.leader()?.expect("a leader");
    /// assert_eq!(leader.term(), leadership.term());
    /// assert_eq!(leader.identity().map(Identity::as_str), Some("scheduler-1"));
    /// leadership.resign()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn election(&self, name: &str, ttl: Duration) -> Result<Election<B>, ConfigError> {
        crate::keys::check_name(name)?;
        let config = &self.manager.shared.config;
        if !config.settings.fencing {
            return Err(ConfigError::ElectionNeedsFencing {
                name: name.to_owned(),
            });
        }
        config.check_ttl(ttl)?;
        Ok(Election {
            locks: self.clone(),
            // Its releases tell the observers that watch it.
            name: Resources::one(name)?.watched(),
            ttl,
            poll: Watch::default_poll(ttl),
            on_lost: None,
        })
    }
}

/// One leader election: see [`Redlock::election`].
pub struct Election<B: LockBackend> {
    locks: Redlock<B>,
    name: Resources,
    ttl: Duration,
    /// How often an observer reads the leader when no notification comes.
    poll: Duration,
    on_lost: Option<OnLost>,
}

impl<B: LockBackend> fmt::Debug for Election<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Election")
            .field("name", &self.name.keys()[0])
            .field("ttl", &self.ttl)
            .field("poll", &self.poll)
            .finish_non_exhaustive()
    }
}

impl<B: Fencing + Inspect + 'static> Election<B> {
    /// The election's name.
    ///
    /// # Examples
    ///
    /// ```
    /// # let locks = redlock_core::Redlock::builder(redlock_mock::MockCluster::new(3).backends()).fencing(true).build()?;
    /// let election = locks.election("cron", std::time::Duration::from_secs(5))?;
    /// assert_eq!(election.name(), "cron");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name.keys()[0]
    }

    /// How often an [`Observer`] reads the leader when no node tells it of
    /// a release (default: a fifth of the TTL, at least 10 ms).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # let locks = redlock_core::Redlock::builder(redlock_mock::MockCluster::new(3).backends()).fencing(true).build()?;
    /// let election = locks.election("cron", Duration::from_secs(5))?.poll_interval(Duration::from_millis(200));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn poll_interval(mut self, every: Duration) -> Self {
        self.poll = every.max(Duration::from_millis(1));
        self
    }

    /// Runs `callback` (on the keeper thread, once per leadership) when a
    /// leadership won from this election is lost, as
    /// [`KeepAlive::on_lost`] does for a lock.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # let locks = redlock_core::Redlock::builder(redlock_mock::MockCluster::new(3).backends()).fencing(true).build()?;
    /// let election = locks
    ///     .election("cron", Duration::from_secs(5))?
    ///     .on_lost(|reason| eprintln!("no longer the leader: {reason}"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn on_lost(mut self, callback: impl Fn(LostReason) + Send + Sync + 'static) -> Self {
        self.on_lost = Some(Arc::new(callback));
        self
    }

    /// Waits, as long as it takes, until this candidate leads; the
    /// leadership is kept alive until it is resigned, dropped or lost.
    ///
    /// # Errors
    ///
    /// As [`Redlock::lock`], but never a timeout: an error that no
    /// waiting cures ([`LockError::Config`], [`LockError::Entropy`],
    /// [`LockError::Spawn`]).
    ///
    /// # Examples
    ///
    /// See [`Redlock::election`].
    pub fn campaign(&self) -> Result<Leadership<B>, LockError<B::Error>> {
        self.campaign_until(None, &Cancel::new())
    }

    /// [`Election::campaign`], giving up after `timeout`.
    ///
    /// # Errors
    ///
    /// As [`Redlock::lock_timeout`]: [`LockError::Timeout`] when another
    /// candidate led throughout.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # let locks = redlock_core::Redlock::builder(redlock_mock::MockCluster::new(3).backends()).fencing(true).build()?;
    /// let election = locks.election("cron", Duration::from_secs(5))?;
    /// let first = election.campaign()?;
    /// assert!(election.campaign_timeout(Duration::from_millis(50)).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn campaign_timeout(
        &self,
        timeout: Duration,
    ) -> Result<Leadership<B>, LockError<B::Error>> {
        let now = self.locks.manager.shared.config.clock.now();
        let deadline = crate::decide::deadline::later(now, timeout);
        self.campaign_until(Some(deadline), &Cancel::new())
    }

    /// [`Election::campaign`], giving up at `deadline` (an instant of the
    /// manager's [clock](crate::Builder::clock)).
    ///
    /// # Errors
    ///
    /// As [`Election::campaign_timeout`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::{Duration, Instant};
    /// # let locks = redlock_core::Redlock::builder(redlock_mock::MockCluster::new(3).backends()).fencing(true).build()?;
    /// let election = locks.election("cron", Duration::from_secs(5))?;
    /// let leadership = election.campaign_deadline(Instant::now() + Duration::from_secs(1))?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn campaign_deadline(
        &self,
        deadline: Instant,
    ) -> Result<Leadership<B>, LockError<B::Error>> {
        self.campaign_until(Some(deadline), &Cancel::new())
    }

    /// [`Election::campaign`] until `deadline` (`None`: as long as it
    /// takes), stopped early by `cancel` from another thread.
    ///
    /// # Errors
    ///
    /// [`LockError::Cancelled`] once cancelled (a leadership won by a round
    /// already under way is resigned); otherwise as
    /// [`Election::campaign_timeout`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlock_core::{Cancel, LockError};
    /// # let locks = redlock_core::Redlock::builder(redlock_mock::MockCluster::new(3).backends()).fencing(true).build()?;
    /// let election = locks.election("cron", Duration::from_secs(5))?;
    /// let _leader = election.campaign()?;
    /// let cancel = Cancel::new();
    /// let stop = cancel.clone();
    /// std::thread::spawn(move || { std::thread::sleep(Duration::from_millis(20)); stop.cancel() });
    /// assert!(matches!(election.campaign_cancellable(None, &cancel), Err(LockError::Cancelled)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn campaign_cancellable(
        &self,
        deadline: Option<Instant>,
        cancel: &Cancel,
    ) -> Result<Leadership<B>, LockError<B::Error>> {
        self.campaign_until(deadline, cancel)
    }

    fn campaign_until(
        &self,
        deadline: Option<Instant>,
        cancel: &Cancel,
    ) -> Result<Leadership<B>, LockError<B::Error>> {
        let lock = self
            .locks
            .lock_cancellable(&self.name, self.ttl, deadline, cancel)?;
        let Some(term) = lock.fencing_token().map(|t| t.value()) else {
            // Fencing is on (checked when the election was made).
            return Err(LockError::NoFencingCounters);
        };
        let (tx, lost) = crossbeam_channel::bounded(1);
        let callback = self.on_lost.clone();
        // A leader leads until it resigns or loses: no bound on the hold.
        let policy = KeepAlive::new()
            .max_hold(Duration::MAX)
            .on_lost(move |reason| {
                let _ = tx.send(reason);
                if let Some(callback) = callback {
                    callback(reason);
                }
            });
        lock.keep_alive(policy)?;
        Ok(Leadership {
            lock,
            term,
            lost,
            reason: Mutex::new(None),
        })
    }

    /// Who leads now, as a quorum of the nodes sees it: the leader's
    /// identity, term and remaining validity; `None` when nobody leads
    /// (or a leadership is being won right now). A leadership read
    /// between its grant and its term's raise (one round, at most two node
    /// timeouts, unless the leader's process stops in between) shows a
    /// term lower than its own, yet higher than every earlier leader's; an
    /// [`Observer`] waits that out. A snapshot, for showing and watching:
    /// the leader itself decides with [`Leadership::ensure_held`], and a
    /// store with the term.
    ///
    /// # Errors
    ///
    /// As [`Redlock::holder`].
    ///
    /// # Examples
    ///
    /// See [`Redlock::election`].
    pub fn leader(&self) -> Result<Option<Leader>, LockError<B::Error>> {
        self.read_leader(None)
    }

    /// [`Election::leader`], for `watcher` to watch the election's key
    /// from then on.
    fn read_leader(&self, watcher: Option<Watcher>) -> Result<Option<Leader>, LockError<B::Error>> {
        let Some(holder) = self.locks.read_holder(self.name(), watcher)? else {
            return Ok(None);
        };
        let settings = &self.locks.manager.shared.config.settings;
        let drift = self
            .locks
            .manager
            .shared
            .config
            .check_ttl(self.ttl)
            .map(|ttl| settings.drift(ttl))
            .unwrap_or_default();
        Ok(Leader::of_holder(&holder, drift))
    }

    /// An observer of this election's leaders: see [`Observer`].
    ///
    /// # Examples
    ///
    /// See [`Observer`].
    #[must_use]
    pub fn observe(&self) -> Observer<'_, B> {
        Observer {
            election: self,
            watch: Watch::new(
                self.locks.manager.shared.config.settings.timeout(),
                self.poll,
            ),
        }
    }
}

/// Leadership of an election, won by [`Election::campaign`]: kept alive by
/// the manager's keeper thread until it is resigned, dropped (which
/// resigns) or lost.
///
/// A leader checks [`Leadership::ensure_held`] before each side effect and
/// passes [`Leadership::term`] to the store it writes, which refuses a
/// term lower than one it has seen (a fencing token: see
/// [`FencingToken`](crate::FencingToken)).
pub struct Leadership<B: LockBackend> {
    lock: Lock<B>,
    term: u64,
    lost: Receiver<LostReason>,
    /// The reason once [`Leadership::wait_lost`] received it.
    reason: Mutex<Option<LostReason>>,
}

impl<B: LockBackend> fmt::Debug for Leadership<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Leadership")
            .field("term", &self.term)
            .field("lock", &self.lock)
            .finish()
    }
}

impl<B: LockBackend> Leadership<B> {
    /// The term: this leadership's fencing token, larger than every earlier
    /// leader's.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # let locks = redlock_core::Redlock::builder(redlock_mock::MockCluster::new(3).backends()).fencing(true).build()?;
    /// let election = locks.election("cron", Duration::from_secs(5))?;
    /// let first = election.campaign()?.term();
    /// let second = election.campaign()?.term();
    /// assert!(second > first);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn term(&self) -> u64 {
        self.term
    }

    /// Whether the leadership is lost (an extension failed, or its validity
    /// ran out, as after a long pause of this process).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # let locks = redlock_core::Redlock::builder(redlock_mock::MockCluster::new(3).backends()).fencing(true).build()?;
    /// let leadership = locks.election("cron", Duration::from_secs(5))?.campaign()?;
    /// assert!(!leadership.is_lost());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn is_lost(&self) -> bool {
        self.lock.is_lost()
    }

    /// `Ok` while this candidate leads: call it right before each side
    /// effect of the leader.
    ///
    /// # Errors
    ///
    /// [`LockError::Lost`] with the reason.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # let locks = redlock_core::Redlock::builder(redlock_mock::MockCluster::new(3).backends()).fencing(true).build()?;
    /// let leadership = locks.election("cron", Duration::from_secs(5))?.campaign()?;
    /// leadership.ensure_held()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn ensure_held(&self) -> Result<(), LockError<B::Error>> {
        self.lock.ensure_held()
    }

    /// Waits up to `timeout` for the keeper to find the leadership lost;
    /// the reason (every call after it was found), or `None` if it is
    /// still held then. A leader thread can
    /// block here while others work, and stop them when it returns.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # let locks = redlock_core::Redlock::builder(redlock_mock::MockCluster::new(3).backends()).fencing(true).build()?;
    /// let leadership = locks.election("cron", Duration::from_secs(5))?.campaign()?;
    /// assert_eq!(leadership.wait_lost(Duration::from_millis(10)), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn wait_lost(&self, timeout: Duration) -> Option<LostReason> {
        let mut known = self.reason.lock();
        if known.is_none() {
            *known = self.lost.recv_timeout(timeout).ok();
        }
        *known
    }

    /// The time the leadership is still valid without another extension.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # let locks = redlock_core::Redlock::builder(redlock_mock::MockCluster::new(3).backends()).fencing(true).build()?;
    /// let leadership = locks.election("cron", Duration::from_secs(5))?.campaign()?;
    /// assert!(leadership.validity() <= Duration::from_secs(5));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn validity(&self) -> Duration {
        self.lock.validity()
    }

    /// Gives the leadership up: releases it on every node, so that another
    /// candidate can win at once.
    ///
    /// # Errors
    ///
    /// As [`Lock::release`]: [`LockError::NotHeld`] when it had already
    /// been lost.
    ///
    /// # Examples
    ///
    /// See [`Redlock::election`].
    pub fn resign(self) -> Result<(), LockError<B::Error>> {
        self.lock.release()
    }
}

/// Watches an election's leaders ([`Election::observe`]): each change in
/// order, terms never going back.
///
/// It reads [`Election::leader`] again as soon as a node tells this
/// manager that the leader resigned (each reading also watches the
/// election's key on the nodes until the next reading is due, and a
/// release of the election's lock tells its watchers; with
/// [wake-ups](crate::Builder::wake_ups) on, the default, on nodes that
/// notify), and otherwise every [poll interval](Election::poll_interval):
/// a leader that crashes, or a new leader, is seen at the next poll. A new leader is reported
/// once its term is settled: still the leader two node timeouts after it
/// was first seen. A leadership shorter than that may go unseen. A leader
/// whose process stopped between winning and raising its term for longer
/// than that is reported with a lower term than its own (still higher
/// than every earlier leader's), then again with its own once raised.
/// The decisions are the core's [`Watch`](crate::engine::Watch), which the
/// simulator's `election` scenario checks.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redlock_core::election::Observed;
/// # let locks = redlock_core::Redlock::builder(redlock_mock::MockCluster::new(3).backends()).fencing(true).build()?;
/// let election = locks.election("cron", Duration::from_secs(5))?;
/// let mut observer = election.observe();
/// assert_eq!(observer.next_timeout(Duration::from_millis(50))?, Some(Observed::Vacant));
/// let leadership = election.campaign()?;
/// match observer.next_timeout(Duration::from_secs(5))? {
///     Some(Observed::Leader(leader)) => assert_eq!(leader.term(), leadership.term()),
///     other => panic!("{other:?}"),
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Observer<'a, B: LockBackend> {
    election: &'a Election<B>,
    /// What it reported and what it waits to report.
    watch: Watch,
}

impl<B: LockBackend> fmt::Debug for Observer<'_, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Observer")
            .field("election", self.election)
            .field("watch", &self.watch)
            .finish()
    }
}

impl<B: Fencing + Inspect + 'static> Observer<'_, B> {
    /// Waits up to `timeout` for the leader to change from the last one
    /// reported (the first call reports the current state at once): the
    /// change, or `None` when nothing changed in time.
    ///
    /// # Errors
    ///
    /// As [`Election::leader`], when a reading fails.
    ///
    /// # Examples
    ///
    /// See [`Observer`].
    pub fn next_timeout(
        &mut self,
        timeout: Duration,
    ) -> Result<Option<Observed>, LockError<B::Error>> {
        let shared = &self.election.locks.manager.shared;
        let deadline = crate::decide::deadline::later(Instant::now(), timeout);
        shared.wakeups.start();
        loop {
            let since = Instant::now();
            // Registered before the reading: a release after it wakes us.
            let registration = shared.wakeups.wait_for(&self.election.name, since);
            // The reading also watches the key until the next one is due:
            // a release of it then wakes this observer.
            let watcher = shared.wakeups.manager().map(|manager| Watcher {
                manager,
                ttl_ms: u64::try_from(self.watch.watches_for().as_millis()).unwrap_or(u64::MAX),
            });
            let seen = self.election.read_leader(watcher)?;
            let again = match self.watch.saw(Instant::now(), seen) {
                WatchStep::Changed(change) => return Ok(Some(change)),
                WatchStep::ReadAt(at) => at,
            };
            let until = deadline.min(again);
            while !registration.flag().take() {
                let now = Instant::now();
                if now >= until {
                    break;
                }
                std::thread::park_timeout(until - now);
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
        }
    }
}

impl<B: Fencing + Inspect + 'static> Iterator for Observer<'_, B> {
    type Item = Result<Observed, LockError<B::Error>>;

    /// The next change, waiting as long as it takes.
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            match self.next_timeout(Duration::from_secs(3600)) {
                Ok(Some(change)) => return Some(Ok(change)),
                Ok(None) => {}
                Err(e) => return Some(Err(e)),
            }
        }
    }
}
