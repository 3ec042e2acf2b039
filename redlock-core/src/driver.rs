//! The blocking manager: fans each round out to every node's worker at once
//! and decides it with the sans-IO [`Tally`] and [`judge`].

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::config::Config;
use crate::worker::{Answer, Job, Op, Worker};
use crate::{
    judge, Builder, Claim, ConfigError, Lock, LockBackend, LockError, NodeError, NodeFailure,
    NodeId, Resources, RoundReport, Tally, Token, Ttl, Verdict, Vote,
};

/// Anything that names the resources of a lock: a `&str` or `String` for one,
/// an array, slice or `Vec` of names for a multi-resource lock, or a ready
/// [`Resources`].
///
/// # Examples
///
/// ```
/// use redlock_core::IntoResources;
/// assert_eq!("a".into_resources()?.keys(), ["a"]);
/// assert_eq!(["b", "a"].into_resources()?.keys(), ["a", "b"]);
/// assert!(Vec::<String>::new().into_resources().is_err());
/// # Ok::<(), redlock_core::ConfigError>(())
/// ```
pub trait IntoResources {
    /// Validates the names.
    ///
    /// # Errors
    ///
    /// [`ConfigError::EmptyKey`] or [`ConfigError::NoKeys`].
    fn into_resources(self) -> Result<Resources, ConfigError>;
}

impl IntoResources for Resources {
    fn into_resources(self) -> Result<Resources, ConfigError> {
        Ok(self)
    }
}
impl IntoResources for &Resources {
    fn into_resources(self) -> Result<Resources, ConfigError> {
        Ok(self.clone())
    }
}
impl IntoResources for &str {
    fn into_resources(self) -> Result<Resources, ConfigError> {
        Resources::one(self)
    }
}
impl IntoResources for String {
    fn into_resources(self) -> Result<Resources, ConfigError> {
        Resources::one(self)
    }
}
impl IntoResources for &String {
    fn into_resources(self) -> Result<Resources, ConfigError> {
        Resources::one(self.as_str())
    }
}
impl<S: AsRef<str>, const N: usize> IntoResources for [S; N] {
    fn into_resources(self) -> Result<Resources, ConfigError> {
        Resources::new(self.iter().map(|s| s.as_ref().to_owned()))
    }
}
impl<S: AsRef<str>> IntoResources for &[S] {
    fn into_resources(self) -> Result<Resources, ConfigError> {
        Resources::new(self.iter().map(|s| s.as_ref().to_owned()))
    }
}
impl<S: AsRef<str>> IntoResources for Vec<S> {
    fn into_resources(self) -> Result<Resources, ConfigError> {
        self.as_slice().into_resources()
    }
}

/// The Redlock manager over `N` independent nodes of backend `B`.
///
/// Each node gets one long-lived worker thread; a round hands one request to
/// every worker at once and is decided as soon as a quorum granted or can no
/// longer grant. Cloning is cheap and shares the workers.
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
    shared: Arc<Shared<B::Error>>,
}

impl<B: LockBackend> Clone for Redlock<B> {
    fn clone(&self) -> Self {
        Redlock {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<B: LockBackend> fmt::Debug for Redlock<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redlock")
            .field(
                "nodes",
                &self
                    .shared
                    .workers
                    .iter()
                    .map(|w| &w.id)
                    .collect::<Vec<_>>(),
            )
            .field("config", &self.shared.config)
            .finish()
    }
}

/// What the manager and its guards share: the workers and the settings.
pub(crate) struct Shared<E> {
    workers: Vec<Worker<E>>,
    /// The (never executed) claim carried by flush barriers.
    flush_claim: Arc<Claim>,
    pub(crate) config: Config,
    rng: Mutex<fastrand::Rng>,
}

impl<B: LockBackend + 'static> Redlock<B> {
    /// A manager over `backends` with the default settings (see [`Builder`]).
    ///
    /// # Errors
    ///
    /// [`ConfigError::NoNodes`] or [`ConfigError::DuplicateNode`].
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_core::{ConfigError, Redlock};
    /// use redlock_mock::{MockCluster, MockNode};
    /// let locks = Redlock::new(MockCluster::new(3).backends())?;
    /// assert!(matches!(Redlock::new(Vec::<MockNode>::new()), Err(ConfigError::NoNodes)));
    /// # Ok::<(), ConfigError>(())
    /// ```
    pub fn new(backends: impl IntoIterator<Item = B>) -> Result<Self, ConfigError> {
        Self::builder(backends).build()
    }

    /// A manager with the default settings over one backend per address
    /// (for Redis, one URL per master).
    ///
    /// # Errors
    ///
    /// [`ConnectError::Address`](crate::ConnectError::Address) for an address
    /// the backend rejects, [`ConnectError::Config`](crate::ConnectError::Config)
    /// for no addresses or the same node twice.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_core::Redlock;
    /// let locks = Redlock::<redlock_mock::MockNode>::connect(["n1", "n2", "n3"])?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn connect<I>(addresses: I) -> Result<Self, crate::ConnectError<B::Error>>
    where
        B: crate::Connect,
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        Self::builder([]).connect(addresses)
    }

    /// A builder over `backends`, for settings other than the defaults.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_core::Redlock;
    /// let locks = Redlock::builder(redlock_mock::MockCluster::new(3).backends())
    ///     .node_timeout(Duration::from_millis(10))
    ///     .build()?;
    /// # Ok::<(), redlock_core::ConfigError>(())
    /// ```
    pub fn builder(backends: impl IntoIterator<Item = B>) -> Builder<B> {
        Builder::new(backends.into_iter().collect())
    }

    pub(crate) fn start(backends: Vec<B>, config: Config) -> Result<Self, ConfigError> {
        let depth = config.queue_depth;
        let workers = backends
            .into_iter()
            .enumerate()
            .map(|(i, backend)| Worker::spawn(i, backend, depth))
            .collect::<Result<Vec<_>, _>>()?;
        let rng = match config.jitter_seed {
            Some(seed) => fastrand::Rng::with_seed(seed),
            None => fastrand::Rng::new(),
        };
        let flush_claim = Arc::new(Claim::new(
            Resources::one("redlock:flush")?,
            Token::from_bytes([0; crate::TOKEN_LEN]),
        ));
        Ok(Redlock {
            shared: Arc::new(Shared {
                workers,
                flush_claim,
                config,
                rng: Mutex::new(rng),
            }),
        })
    }

    /// One acquire round: the lock, or why not. Waits at most one per-node
    /// timeout for the round, plus at most one more to release a failed round
    /// on the nodes that may hold its key.
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
        let ttl = self.shared.config.check_ttl(ttl)?;
        self.attempt(&resources, ttl)
    }

    /// Acquires, retrying with random pauses until the configured acquire
    /// timeout (default 10 s).
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
        self.lock_timeout(resources, ttl, self.shared.config.acquire_timeout)
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
        let now = self.shared.config.clock.now();
        let deadline = now.checked_add(timeout).unwrap_or(now + Ttl::MAX);
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
        let resources = resources.into_resources()?;
        let config = &self.shared.config;
        let ttl = config.check_ttl(ttl)?;
        let mut attempts = 0u32;
        loop {
            attempts = attempts.saturating_add(1);
            let err = match self.attempt(&resources, ttl) {
                Ok(lock) => return Ok(lock),
                Err(err) if err.is_retryable() => err,
                Err(err) => return Err(err),
            };
            let now = config.clock.now();
            if now >= deadline {
                return Err(LockError::Timeout {
                    attempts,
                    last: Box::new(err),
                });
            }
            let pause = config.retry.pick(self.shared.rng.lock().u64(..));
            config.clock.sleep(pause.min(deadline - now));
            if config.clock.now() >= deadline {
                return Err(LockError::Timeout {
                    attempts,
                    last: Box::new(err),
                });
            }
        }
    }

    /// The node ids, in configuration order.
    ///
    /// # Examples
    ///
    /// ```
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(3).backends())?;
    /// assert_eq!(locks.nodes().count(), 3);
    /// # Ok::<(), redlock_core::ConfigError>(())
    /// ```
    pub fn nodes(&self) -> impl Iterator<Item = &NodeId> {
        self.shared.workers.iter().map(|w| &w.id)
    }

    /// Waits until every request queued before this call has run on every
    /// node, or `timeout` passes; returns whether all nodes got there.
    ///
    /// A round returns as soon as a quorum answered, and a dropped guard only
    /// queues its release, so some requests may still be running on the
    /// slower nodes. Call this before asserting on a particular node in a
    /// test, or before the process exits so that releases queued by dropped
    /// guards reach the nodes. A frozen or very slow node makes it return
    /// `false` after `timeout`.
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
        let deadline = Instant::now() + timeout;
        let n = self.shared.workers.len();
        let (reply, replies) = crossbeam_channel::bounded(n);
        let mut waiting = 0;
        for (node, worker) in self.shared.workers.iter().enumerate() {
            let job = Job {
                op: Op::Flush,
                claim: Arc::clone(&self.shared.flush_claim),
                node,
                stale_after: deadline,
                reply: Some(reply.clone()),
            };
            if worker.submit(job).is_err() {
                return false;
            }
            waiting += 1;
        }
        drop(reply);
        (0..waiting).all(|_| replies.recv_deadline(deadline).is_ok())
    }

    /// How many nodes must grant: `n / 2 + 1`.
    ///
    /// # Examples
    ///
    /// ```
    /// # let locks = redlock_core::Redlock::new(redlock_mock::MockCluster::new(5).backends())?;
    /// assert_eq!(locks.quorum(), 3);
    /// # Ok::<(), redlock_core::ConfigError>(())
    /// ```
    #[must_use]
    pub fn quorum(&self) -> usize {
        crate::quorum(self.shared.workers.len())
    }

    fn attempt(&self, resources: &Resources, ttl: Ttl) -> Result<Lock<B>, LockError<B::Error>> {
        let claim = Arc::new(Claim::new(resources.clone(), Token::random()?));
        let shared = &self.shared;
        let round = shared.run(Op::Acquire { ttl, fence: false }, &claim);
        match shared.judge(&round, ttl) {
            Verdict::Held { validity } => Ok(Lock::new(
                Arc::clone(shared),
                claim,
                ttl,
                round.decided_at + validity,
            )),
            verdict => {
                shared.abandon(&claim, &round);
                Err(shared.failure(verdict, round, ttl, LockError::Contended))
            }
        }
    }
}

/// The state of one round, as far as it got.
pub(crate) struct Round<E> {
    pub(crate) tally: Tally,
    pub(crate) started: Instant,
    /// Clock reading when the round was decided (or gave up waiting).
    pub(crate) decided_at: Instant,
    failures: Vec<(usize, NodeFailure<E>)>,
}

impl<E> Shared<E> {
    fn node_error(&self, (node, failure): (usize, NodeFailure<E>)) -> NodeError<E> {
        NodeError::new(self.workers[node].id.clone(), failure)
    }

    /// Sends `op` to every node at once and collects replies until the tally
    /// decides or the per-node timeout passes; nodes silent by then are
    /// counted as timed out.
    pub(crate) fn run(&self, op: Op, claim: &Arc<Claim>) -> Round<E> {
        let n = self.workers.len();
        let clock = &self.config.clock;
        let started = clock.now();
        let wait_until = Instant::now() + self.config.node_timeout;
        let mut round = Round {
            tally: Tally::new(n),
            started,
            decided_at: started,
            failures: Vec::new(),
        };
        let (reply, replies) = crossbeam_channel::bounded(n);
        for (node, worker) in self.workers.iter().enumerate() {
            let job = Job {
                op,
                claim: Arc::clone(claim),
                node,
                stale_after: wait_until,
                reply: Some(reply.clone()),
            };
            if let Err(failure) = worker.submit(job) {
                round.record(node, Err(failure));
            }
        }
        drop(reply);
        while round.tally.decision() == crate::Decision::Pending {
            match replies.recv_deadline(wait_until) {
                Ok((node, result)) => round.record(node, result),
                Err(_) => {
                    for node in 0..n {
                        round.record(node, Err(NodeFailure::TimedOut));
                    }
                }
            }
        }
        round.decided_at = clock.now();
        round
    }

    /// Sends `op` to every node without waiting for any answer.
    pub(crate) fn send_detached(&self, op: Op, claim: &Arc<Claim>) {
        let stale_after = Instant::now() + self.config.node_timeout;
        for (node, worker) in self.workers.iter().enumerate() {
            let job = Job {
                op,
                claim: Arc::clone(claim),
                node,
                stale_after,
                reply: None,
            };
            // A full queue means the node is stuck; the key then expires by TTL.
            let _ = worker.submit(job);
        }
    }

    /// Releases a failed acquire round on every node, and waits (bounded by
    /// one per-node timeout) for the nodes that granted or had not answered
    /// when the round was decided, so that a failed round leaves no key on a
    /// responsive node. A node that stays silent gets its release queued
    /// behind the acquire, so a grant that arrives late is undone too.
    fn abandon(&self, claim: &Arc<Claim>, round: &Round<E>) {
        let wait_until = Instant::now() + self.config.node_timeout;
        let (reply, replies) = crossbeam_channel::bounded(self.workers.len());
        let mut waiting = 0usize;
        for (node, worker) in self.workers.iter().enumerate() {
            let may_hold = matches!(round.tally.vote(node), None | Some(Vote::Granted));
            let job = Job {
                op: Op::Release,
                claim: Arc::clone(claim),
                node,
                stale_after: wait_until,
                reply: may_hold.then(|| reply.clone()),
            };
            if worker.submit(job).is_ok() && may_hold {
                waiting += 1;
            }
        }
        drop(reply);
        for _ in 0..waiting {
            if replies.recv_deadline(wait_until).is_err() {
                break;
            }
        }
    }

    pub(crate) fn judge(&self, round: &Round<E>, ttl: Ttl) -> Verdict {
        let elapsed = round.decided_at.saturating_duration_since(round.started);
        judge(
            &round.tally,
            ttl.as_duration(),
            elapsed,
            self.config.drift(ttl),
        )
        .unwrap_or(Verdict::NoQuorum)
    }

    /// The typed error for a failed round. `refused` builds the error for a
    /// round lost to refusals (contention on acquire, not-held otherwise).
    pub(crate) fn failure(
        &self,
        verdict: Verdict,
        round: Round<E>,
        ttl: Ttl,
        refused: fn(RoundReport<E>) -> LockError<E>,
    ) -> LockError<E> {
        let elapsed = round.decided_at.saturating_duration_since(round.started);
        let report = RoundReport {
            nodes: round.tally.nodes(),
            quorum: round.tally.quorum(),
            granted: round.tally.granted(),
            refused: round.tally.refused(),
            failures: {
                let mut failures = round.failures;
                failures.sort_by_key(|(node, _)| *node);
                failures.into_iter().map(|f| self.node_error(f)).collect()
            },
        };
        match verdict {
            Verdict::NoQuorum => LockError::NoQuorum(report),
            Verdict::ValidityExhausted => LockError::ValidityExhausted {
                elapsed,
                ttl: ttl.as_duration(),
            },
            Verdict::Refused | Verdict::Held { .. } => refused(report),
        }
    }
}

impl<E> Round<E> {
    fn record(&mut self, node: usize, result: Result<Answer, NodeFailure<E>>) {
        if self.tally.has_voted(node) {
            return;
        }
        let vote = match result {
            Ok(Answer::Acquire(outcome)) if outcome.is_granted() => Vote::Granted,
            Ok(Answer::Held(true)) => Vote::Granted,
            Ok(_) => Vote::Refused,
            Err(failure) => {
                self.failures.push((node, failure));
                Vote::Failed
            }
        };
        self.tally.record(node, vote);
    }
}
