//! An election observer's decisions, as a machine: what a reading of the
//! leader means ([`Leader::of_holder`]) and what the observer does with it
//! ([`Watch`]): report a change, or read again at an instant. The blocking
//! [`Observer`](crate::election::Observer) and the simulator's observers
//! both run it.

use std::fmt;
use std::time::{Duration, Instant};

use crate::backend::Holder;
use crate::Identity;

/// How many node timeouts a reading of who holds a lock
/// ([`Redlock::holder`](crate::Redlock::holder)) waits for the nodes'
/// answers; a node that has not answered by then counts as timed out.
pub const READ_TIMEOUTS: u32 = 2;

/// The leader of an election as the nodes see it
/// ([`Election::leader`](crate::election::Election::leader)).
#[derive(Clone, PartialEq, Eq)]
pub struct Leader {
    identity: Option<Identity>,
    term: u64,
    validity: Duration,
    /// What its keys hold: one leadership's, for telling two apart.
    value: Vec<u8>,
}

impl fmt::Debug for Leader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Leader")
            .field("identity", &self.identity)
            .field("term", &self.term)
            .field("validity", &self.validity)
            .finish_non_exhaustive()
    }
}

impl Leader {
    /// The leader a quorum's `holder` of the election's key shows, with
    /// the manager's `drift` allowance for the election's TTL taken off
    /// its time: `None` when the holder has no term (no fencing counter a
    /// quorum of its nodes agrees on).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_core::backend::{Holder, KeyView};
    /// use redlock_core::election::Leader;
    /// let held = |fence| KeyView::new(Some(vec![7; 20]), Some(Duration::from_millis(900)), Some(fence));
    /// let holder = Holder::of_views(&[Some(held(4)), Some(held(4)), Some(held(3))], 3).expect("held");
    /// let leader = Leader::of_holder(&holder, Duration::from_millis(100)).expect("a term");
    /// assert_eq!((leader.term(), leader.validity()), (4, Duration::from_millis(800)));
    /// ```
    #[must_use]
    pub fn of_holder(holder: &Holder, drift: Duration) -> Option<Leader> {
        holder.fence().map(|term| Leader {
            identity: holder.identity().cloned(),
            term,
            validity: holder.ttl().saturating_sub(drift),
            value: holder.value().to_vec(),
        })
    }

    /// The leader's manager's identity, when it has one.
    ///
    /// # Examples
    ///
    /// See [`Redlock::election`](crate::Redlock::election).
    #[must_use]
    pub fn identity(&self) -> Option<&Identity> {
        self.identity.as_ref()
    }

    /// Its term: its fencing token, larger than every earlier leader's.
    ///
    /// # Examples
    ///
    /// See [`Redlock::election`](crate::Redlock::election).
    #[must_use]
    pub fn term(&self) -> u64 {
        self.term
    }

    /// How long it still leads unless it extends (time a quorum still
    /// holds its key, less the drift allowance), as of the reading.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # let locks = redlock_core::Redlock::builder(redlock_mock::MockCluster::new(3).backends()).fencing(true).build()?;
    /// let election = locks.election("cron", Duration::from_secs(5))?;
    /// let _leadership = election.campaign()?;
    /// assert!(election.leader()?.expect("a leader").validity() <= Duration::from_secs(5));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn validity(&self) -> Duration {
        self.validity
    }

    /// What the leadership's keys hold (its token, then its manager's
    /// identity): two leaderships never hold the same.
    ///
    /// # Examples
    ///
    /// See [`Leader::of_holder`].
    #[must_use]
    pub fn value(&self) -> &[u8] {
        &self.value
    }
}

/// One thing an [`Observer`](crate::election::Observer) saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observed {
    /// A new leader (a higher term than the last one reported).
    Leader(Leader),
    /// Nobody leads on a quorum of the nodes (the last leader resigned,
    /// crashed past its TTL, or a new one is being elected).
    Vacant,
}

/// What a [`Watch`] makes of a reading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchStep {
    /// Report this change (then read again at once).
    Changed(Observed),
    /// Nothing to report yet: read again at this instant, or sooner when
    /// a node tells of a release.
    ReadAt(Instant),
}

/// An observer's memory and rules: what it reported last, the highest
/// term reported (no leader of a lower one is reported after it), and a
/// new leadership seen but not yet reported.
///
/// A new leader is reported once its term is settled: still the leader
/// two node timeouts after it was first seen. A leadership read between
/// its grant and its term's raise shows a lower term than its own (yet
/// higher than every earlier leader's); the raise comes one round after
/// the grant, within those two node timeouts, unless the leader's process
/// stops in between. A leader reported with such a lower term is reported
/// again, with its own, once a reading shows it raised.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// use redlock_core::backend::{Holder, KeyView};
/// use redlock_core::election::{Leader, Observed};
/// use redlock_core::engine::{Watch, WatchStep};
/// let (node_timeout, poll) = (Duration::from_millis(10), Duration::from_millis(100));
/// let mut watch = Watch::new(node_timeout, poll);
/// let settle = 2 * node_timeout;
/// let t0 = Instant::now();
/// assert_eq!(watch.saw(t0, None), WatchStep::Changed(Observed::Vacant));
/// assert_eq!(watch.saw(t0, None), WatchStep::ReadAt(t0 + poll));
/// let view = KeyView::new(Some(vec![7; 20]), Some(Duration::from_secs(1)), Some(9));
/// let holder = Holder::of_views(&[Some(view.clone()), Some(view.clone()), Some(view)], 3).expect("held");
/// let leader = Leader::of_holder(&holder, Duration::ZERO);
/// // First seen: read again once it is settled.
/// assert_eq!(watch.saw(t0, leader.clone()), WatchStep::ReadAt(t0 + settle));
/// match watch.saw(t0 + settle, leader) {
///     WatchStep::Changed(Observed::Leader(l)) => assert_eq!(l.term(), 9),
///     other => panic!("{other:?}"),
/// }
/// ```
#[derive(Debug, Clone)]
pub struct Watch {
    /// What was reported last: `None` nothing yet, `Some(None)` vacant,
    /// `Some(Some(value))` the leadership whose keys hold that value.
    last: Option<Option<Vec<u8>>>,
    /// The highest term reported: no leader of a lower one is.
    top: u64,
    /// A new leadership seen (its value) and when, not yet reported.
    pending: Option<(Vec<u8>, Instant)>,
    settle: Duration,
    poll: Duration,
}

impl Watch {
    /// A watch that has reported nothing, for a manager with
    /// `node_timeout`: it reports a new leader two node timeouts after it
    /// was first seen (the grant's round and the raise's), and reads every
    /// `poll` otherwise.
    ///
    /// # Examples
    ///
    /// See [`Watch`].
    #[must_use]
    pub fn new(node_timeout: Duration, poll: Duration) -> Self {
        Watch {
            last: None,
            top: 0,
            pending: None,
            settle: node_timeout.saturating_mul(2),
            poll,
        }
    }

    /// This watch, reporting a new leader `settle` after it was first
    /// seen instead.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_core::engine::Watch;
    /// let eager = Watch::new(Duration::from_millis(50), Duration::from_secs(1)).settle(Duration::ZERO);
    /// ```
    #[must_use]
    pub fn settle(mut self, settle: Duration) -> Self {
        self.settle = settle;
        self
    }

    /// How long after it first sees a new leader this watch reports it.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_core::engine::Watch;
    /// let watch = Watch::new(Duration::from_millis(50), Duration::from_secs(1));
    /// assert_eq!(watch.settles_after(), Duration::from_millis(100));
    /// ```
    #[must_use]
    pub fn settles_after(&self) -> Duration {
        self.settle
    }

    /// How long a reading watches the key for (the nodes tell the
    /// observer of a release until then): until the next reading is surely
    /// under way, two poll intervals and the settle time, at most a day.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_core::engine::Watch;
    /// let watch = Watch::new(Duration::from_millis(50), Duration::from_secs(1));
    /// assert_eq!(watch.watches_for(), Duration::from_millis(2_100));
    /// ```
    #[must_use]
    pub fn watches_for(&self) -> Duration {
        self.poll
            .saturating_mul(2)
            .saturating_add(self.settle)
            .min(Duration::from_secs(86_400))
    }

    /// How often an observer of an election with `ttl` reads the leader by
    /// default: a fifth of the TTL, at least 10 ms.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_core::engine::Watch;
    /// assert_eq!(Watch::default_poll(Duration::from_secs(5)), Duration::from_secs(1));
    /// ```
    #[must_use]
    pub fn default_poll(ttl: Duration) -> Duration {
        (ttl / 5).max(Duration::from_millis(10))
    }

    /// What the reading `seen` at `now` means: a change to report (it is
    /// then remembered as reported), or when to read again.
    ///
    /// # Examples
    ///
    /// See [`Watch`].
    pub fn saw(&mut self, now: Instant, seen: Option<Leader>) -> WatchStep {
        let poll = crate::decide::deadline::later(now, self.poll);
        match seen {
            Some(leader) if self.is_new(&leader) => {
                let settled = match &self.pending {
                    Some((value, at)) if *value == leader.value => {
                        crate::decide::deadline::later(*at, self.settle)
                    }
                    _ => {
                        self.pending = Some((leader.value.clone(), now));
                        crate::decide::deadline::later(now, self.settle)
                    }
                };
                if now < settled {
                    return WatchStep::ReadAt(settled.min(poll));
                }
                self.pending = None;
                self.top = leader.term;
                self.last = Some(Some(leader.value.clone()));
                WatchStep::Changed(Observed::Leader(leader))
            }
            // The same leader, or a stale reading of an older one: terms
            // never go back.
            Some(_) => {
                self.pending = None;
                WatchStep::ReadAt(poll)
            }
            None => {
                self.pending = None;
                if self.last == Some(None) {
                    return WatchStep::ReadAt(poll);
                }
                self.last = Some(None);
                WatchStep::Changed(Observed::Vacant)
            }
        }
    }

    /// Whether `leader` is news: a higher term than any reported (a new
    /// leader, or the last one again once its term is raised), or the
    /// first leader when nothing had a term yet.
    fn is_new(&self, leader: &Leader) -> bool {
        leader.term > self.top
            || (self.top == 0 && self.last.as_ref().and_then(Option::as_ref) != Some(&leader.value))
    }
}
