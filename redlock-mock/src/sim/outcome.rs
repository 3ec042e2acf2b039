//! What a run produces: its violations, counters and trace hash.

use std::fmt;
use std::time::Duration;

use super::clock::duration_ns;
use super::trace::fmt_time;

/// What went wrong in a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ViolationKind {
    /// Two locks believed (inside their validity) that they held the same
    /// resource at overlapping real times.
    MutualExclusion,
    /// A write to the protected resource was based on a read that another
    /// write had overtaken (a lost or interleaved update).
    LostUpdate,
    /// A client that believed it held a lock did not have its token on a
    /// quorum of its nodes (a down node counts with what it held when it
    /// went down).
    QuorumLost,
    /// An extend won although the lock's keys had vanished from a quorum
    /// when the extend started.
    ExtendResurrected,
    /// With [`Scenario::fencing`](super::Scenario::fencing): a holder of a
    /// resource got a fencing token not above the previous holder's (in the
    /// order the locks were acquired, in real time).
    FencingToken,
    /// A holder still believed it held a lock (its
    /// [`Lease`](redlock_core::engine::Lease) valid, not marked lost, not
    /// released) at the instant another client was granted one of its
    /// resources: it had not learned that it lost the lock.
    StaleHolder,
    /// A key of a lock that its client gave up (released, or abandoned after
    /// a failed round) stayed on a node: an acquire of it ran on a node
    /// after its release had, or (with
    /// [`Scenario::check_leftovers`](super::Scenario::check_leftovers)) a key
    /// of it was still there once every message had landed.
    LeftBehind,
    /// With [`Scenario::callers_per_process`](super::Scenario::callers_per_process):
    /// a caller was granted its line's lock while a caller of the same
    /// process that joined the line before it still waited, its deadline
    /// not passed; or, with a read-write lock, a reader was granted while a
    /// writer of the same process that arrived before it still waited, its
    /// deadline not passed (`RwLock::read` waits for them,
    /// [`LocalWriters`](redlock_core::engine::LocalWriters)).
    WaiterSkipped,
    /// A hand-off's first acquire ran on a node before the release it was
    /// queued behind had reached that node (a node the release skipped,
    /// because it refused the released lock, excepted).
    HandOffOvertook,
    /// Liveness mode: no contender acquired within the bound after the
    /// faults stopped.
    NoProgress,
    /// With [`Scenario::fairness`](super::Scenario::fairness): another
    /// process was granted while a process whose callers kept trying had
    /// gone without a grant for longer than the bound (one process's line
    /// passing the lock among its callers starves the others).
    Starved,
    /// With a semaphore ([`Primitive::Semaphore`](super::Primitive::Semaphore)):
    /// more clients than it has permits believed (inside their validity)
    /// that they held one at the same real time.
    TooManyHolders,
    /// With a read-write lock ([`Primitive::RwLock`](super::Primitive::RwLock)):
    /// a writer believed (inside its validity) that it held the lock at the
    /// same real time as another writer or a reader.
    WriterShared,
    /// With [`Scenario::observers`](super::Scenario::observers): an
    /// election observer reported a leader whose term is not above the
    /// term it reported before.
    ObservedTermBack,
    /// With [`Scenario::observers`](super::Scenario::observers): an
    /// election observer reported a leader that led with another term
    /// than the one reported (read before its term was raised).
    ObservedWrongTerm,
    /// The [`GrantObserver`](super::GrantObserver) rejected a grant (e.g. a
    /// fencing token that did not rise).
    Observer,
    /// The scenario is outside what the simulator supports (see
    /// [`Scenario::validate`](super::Scenario::validate)); nothing ran.
    InvalidScenario,
}

impl ViolationKind {
    /// Every kind, in a fixed order.
    pub const ALL: [ViolationKind; 17] = [
        ViolationKind::MutualExclusion,
        ViolationKind::LostUpdate,
        ViolationKind::QuorumLost,
        ViolationKind::ExtendResurrected,
        ViolationKind::FencingToken,
        ViolationKind::StaleHolder,
        ViolationKind::LeftBehind,
        ViolationKind::WaiterSkipped,
        ViolationKind::HandOffOvertook,
        ViolationKind::NoProgress,
        ViolationKind::Starved,
        ViolationKind::TooManyHolders,
        ViolationKind::WriterShared,
        ViolationKind::ObservedTermBack,
        ViolationKind::ObservedWrongTerm,
        ViolationKind::Observer,
        ViolationKind::InvalidScenario,
    ];

    /// A short stable name.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_mock::sim::ViolationKind;
    /// assert_eq!(ViolationKind::LostUpdate.name(), "lost-update");
    /// assert_eq!(ViolationKind::LeftBehind.name(), "left-behind");
    /// ```
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            ViolationKind::MutualExclusion => "mutual-exclusion",
            ViolationKind::LostUpdate => "lost-update",
            ViolationKind::QuorumLost => "quorum-lost",
            ViolationKind::ExtendResurrected => "extend-resurrected",
            ViolationKind::FencingToken => "fencing-token",
            ViolationKind::StaleHolder => "stale-holder",
            ViolationKind::LeftBehind => "left-behind",
            ViolationKind::WaiterSkipped => "waiter-skipped",
            ViolationKind::HandOffOvertook => "hand-off-overtook",
            ViolationKind::NoProgress => "no-progress",
            ViolationKind::Starved => "starved",
            ViolationKind::TooManyHolders => "too-many-holders",
            ViolationKind::WriterShared => "writer-shared",
            ViolationKind::ObservedTermBack => "observed-term-back",
            ViolationKind::ObservedWrongTerm => "observed-wrong-term",
            ViolationKind::Observer => "observer",
            ViolationKind::InvalidScenario => "invalid-scenario",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// One violation found by the checker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// What kind.
    pub kind: ViolationKind,
    /// When, in simulated real time since the start of the run.
    pub at: Duration,
    /// What happened, naming clients (`c0`...), locks (`L7`) and resources.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at {}: {}",
            self.kind.name(),
            fmt_time(duration_ns(self.at)),
            self.detail
        )
    }
}

/// Counters of what a run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Events processed.
    pub events: u64,
    /// Rounds started (acquire, extend, release).
    pub rounds: u64,
    /// Acquires that ended `Held`.
    pub acquired: u64,
    /// Extends that ended `Held`.
    pub extended: u64,
    /// Acquire calls that timed out (gave up after retrying).
    pub gave_up: u64,
    /// Writes to the protected resource.
    pub writes: u64,
    /// Writes skipped because the validity had run out.
    pub skipped_writes: u64,
    /// Fence-raising rounds started (fenced acquires on several nodes).
    pub raises: u64,
    /// Fence-raising rounds that failed (the acquire was then abandoned).
    pub raise_failed: u64,
    /// Accesses (reads or writes) the fenced resource rejected for carrying
    /// a lower fencing token than one it had seen.
    pub fenced_off: u64,
    /// Kept-alive locks that their holder learned were lost (a failed
    /// extension, a bound reached, or the validity over before the keeper
    /// got to it).
    pub keep_lost: u64,
    /// Node crashes.
    pub node_crashes: u64,
    /// Failovers to a replica.
    pub failovers: u64,
    /// Node clock steps.
    pub clock_jumps: u64,
    /// Lock-key evictions (FLUSH).
    pub flushes: u64,
    /// Client crashes.
    pub client_crashes: u64,
    /// Client pauses.
    pub pauses: u64,
    /// Messages lost (loss, partition, refused).
    pub lost_messages: u64,
    /// Replies that reached their client after the round they answered was
    /// over (the machine had decided it, or moved on).
    pub late_replies: u64,
    /// Acquires granted on a node after their client had given the attempt
    /// up (abandoned its round, its release on the way): the grants that a
    /// failed round's release must undo.
    pub late_grants: u64,
    /// Failed releases sent again to their node (kept as the node
    /// workers keep them, [`redlock_core::engine::Kept`]).
    pub release_retries: u64,
    /// Failed releases dropped for the bound on how many are kept.
    pub releases_dropped: u64,
    /// Requests a process's node worker dropped unsent, queued past their
    /// round's deadline
    /// ([`Message::stale`](redlock_core::engine::Message::stale)).
    pub stale_dropped: u64,
    /// Leaders the election observers reported
    /// ([`Scenario::observers`](super::Scenario::observers)).
    pub observed_leaders: u64,
    /// Reported leaders whose acquisition then failed (their keys were on
    /// a quorum with a term, yet the candidate never led).
    pub observed_phantoms: u64,
    /// Reported leaders whose term was not raised yet when they were
    /// read: their leader stopped between its grant and its raise for
    /// longer than the observer waits (reported with a lower term than
    /// its own, above every earlier leader's).
    pub observed_early: u64,
    /// Observers' readings that fewer than a quorum of nodes answered.
    pub watch_failed: u64,
    /// Releases an exiting process left to their keys' TTL: kept ones
    /// not due again before its exit drain ended
    /// ([`Kept::idle`](redlock_core::engine::Kept::idle)), and ones whose
    /// answer had not come when it ended.
    pub kept_lost_at_exit: u64,
    /// Kept releases sent again during an exiting process's drain.
    pub drain_retries: u64,
    /// Acquisitions decided before a process pause and taken after it,
    /// their validity over: the caller never believes it holds them.
    pub acquired_expired: u64,
    /// Rounds a lone caller sent to the nodes itself and read on its own
    /// ([`Scenario::own_rounds`](super::Scenario::own_rounds)).
    pub own_rounds: u64,
    /// Nodes of such rounds with no answer by the round's deadline.
    pub own_timeouts: u64,
    /// Nodes of such rounds whose answers were left unread, the round
    /// decided without them.
    pub own_left: u64,
    /// Releases that handed their lock over to the next caller of the
    /// process's line (the next acquire queued right behind the release).
    pub hand_offs: u64,
    /// Waiters that took their line over from an owner that was gone.
    pub took_over: u64,
    /// Pauses between rounds cut short, as by a release notification
    /// ([`Scenario::wake_ups`](super::Scenario::wake_ups)).
    pub woken: u64,
    /// With a semaphore: the most clients that believed at once that they
    /// held a permit; with a read-write lock, the most readers at once (as
    /// the checker counts them, at each grant and extension).
    pub most_holders: u64,
    /// With a read-write lock: writes acquired.
    pub writers: u64,
    /// With a read-write lock and several callers per process: retry
    /// pauses readers took because a writer of their process that arrived
    /// before them still waited.
    pub readers_waited: u64,
    /// The longest a process kept trying to lock without a grant, counted
    /// at another process's grant (the fairness check's measure).
    pub longest_starved: Duration,
    /// Simulated time at the end of the run.
    pub end: Duration,
}

impl Stats {
    /// Adds `other`'s counters to these (for totals over many runs); the
    /// most holders, the longest starvation and the end take the larger.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_mock::sim::{run, Scenario, Stats};
    /// let mut total = Stats::default();
    /// for seed in 0..3 {
    ///     total.absorb(&run(&Scenario::quiet(), seed).stats);
    /// }
    /// assert!(total.acquired >= run(&Scenario::quiet(), 0).stats.acquired);
    /// ```
    pub fn absorb(&mut self, other: &Stats) {
        let Stats {
            events,
            rounds,
            acquired,
            extended,
            gave_up,
            writes,
            skipped_writes,
            raises,
            raise_failed,
            fenced_off,
            keep_lost,
            node_crashes,
            failovers,
            clock_jumps,
            flushes,
            client_crashes,
            pauses,
            lost_messages,
            late_replies,
            late_grants,
            release_retries,
            releases_dropped,
            stale_dropped,
            kept_lost_at_exit,
            observed_leaders,
            observed_phantoms,
            observed_early,
            watch_failed,
            drain_retries,
            acquired_expired,
            own_rounds,
            own_timeouts,
            own_left,
            hand_offs,
            took_over,
            woken,
            most_holders,
            writers,
            readers_waited,
            longest_starved,
            end,
        } = *other;
        self.events += events;
        self.rounds += rounds;
        self.acquired += acquired;
        self.extended += extended;
        self.gave_up += gave_up;
        self.writes += writes;
        self.skipped_writes += skipped_writes;
        self.raises += raises;
        self.raise_failed += raise_failed;
        self.fenced_off += fenced_off;
        self.keep_lost += keep_lost;
        self.node_crashes += node_crashes;
        self.failovers += failovers;
        self.clock_jumps += clock_jumps;
        self.flushes += flushes;
        self.client_crashes += client_crashes;
        self.pauses += pauses;
        self.lost_messages += lost_messages;
        self.late_replies += late_replies;
        self.late_grants += late_grants;
        self.release_retries += release_retries;
        self.releases_dropped += releases_dropped;
        self.stale_dropped += stale_dropped;
        self.kept_lost_at_exit += kept_lost_at_exit;
        self.observed_leaders += observed_leaders;
        self.observed_phantoms += observed_phantoms;
        self.observed_early += observed_early;
        self.watch_failed += watch_failed;
        self.drain_retries += drain_retries;
        self.acquired_expired += acquired_expired;
        self.own_rounds += own_rounds;
        self.own_timeouts += own_timeouts;
        self.own_left += own_left;
        self.hand_offs += hand_offs;
        self.took_over += took_over;
        self.woken += woken;
        self.writers += writers;
        self.readers_waited += readers_waited;
        self.most_holders = self.most_holders.max(most_holders);
        self.longest_starved = self.longest_starved.max(longest_starved);
        self.end = self.end.max(end);
    }
}

/// The result of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The seed.
    pub seed: u64,
    /// Hash of every event processed: equal seeds give equal hashes.
    pub trace_hash: u64,
    /// Violations found (the first 16; see `violation_count`).
    pub violations: Vec<Violation>,
    /// Violations found in all.
    pub violation_count: u64,
    /// What the run did.
    pub stats: Stats,
}

impl Outcome {
    /// Whether the run found no violation.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_mock::sim::{run, Scenario};
    /// assert!(run(&Scenario::quiet(), 0).is_clean());
    /// ```
    #[must_use]
    pub fn is_clean(&self) -> bool {
        self.violation_count == 0
    }
}
