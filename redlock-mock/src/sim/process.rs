//! A simulated process with several callers ([`Scenario::callers_per_process`]
//! above 1): they share one manager's local lines
//! ([`redlock_core::engine::Lines`], the very machine the blocking
//! `Redlock::lock` queues its callers in), the manager's id and mark TTL.
//! What is here is the shared state only; the callers drive it
//! (`client/line.rs`), and the world lends it to them with each event.
//!
//! It also keeps who waits in which line, for the checker's "no waiter is
//! skipped" ([`ViolationKind::WaiterSkipped`]).
//!
//! [`Scenario::callers_per_process`]: super::Scenario::callers_per_process
//! [`ViolationKind::WaiterSkipped`]: super::ViolationKind::WaiterSkipped

use std::time::{Duration, Instant};

use redlock_core::engine::{Lines, LocalWriters};
use redlock_core::Ttl;

/// A caller in a line that has not been granted yet.
#[derive(Debug, Clone, Copy)]
pub(crate) struct InLine {
    pub(crate) ticket: u64,
    pub(crate) caller: u8,
    /// The line's resources (a key mask).
    pub(crate) mask: u8,
    /// When it gives up (the process's clock).
    pub(crate) deadline: Instant,
}

/// A writer of the process's read-write lock that wants the lock (from
/// arrival until it acquired or gave up), as the checker sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LocalWriter {
    /// Its arrival number in [`Process::writers`].
    pub(crate) seq: u64,
    pub(crate) caller: u8,
    /// When it gives up (real time).
    pub(crate) deadline: u64,
}

/// The state the callers of one process share.
#[derive(Debug)]
pub(crate) struct Process {
    /// The manager's lines: waiters are caller ids; a holder is its caller
    /// id too (its validity is in `valid`).
    pub(crate) lines: Lines<u8, u8>,
    /// The manager's id (for its queued claims' marks).
    pub(crate) manager: u64,
    /// How long the manager's waiting marks live.
    pub(crate) mark_ttl: Ttl,
    /// The caller id of the process's first caller.
    pub(crate) first: u8,
    /// Each caller's lock validity when the current event began (`None`:
    /// it holds no valid lock), as the blocking shell reads it from the
    /// lock's state.
    pub(crate) valid: Vec<Option<Instant>>,
    /// The callers that joined a line and are not granted yet, in join
    /// order.
    pub(crate) in_line: Vec<InLine>,
    /// How many of its callers are trying to lock now (joined a line or
    /// acquiring), for the fairness check.
    pub(crate) wanting: usize,
    /// Since when (real time) its callers have been trying without the
    /// process being granted anything.
    pub(crate) starving_since: Option<u64>,
    /// A starvation of this episode was reported already.
    pub(crate) starved: bool,
    /// With [`Scenario::exit`](super::Scenario::exit): it has exited.
    pub(crate) exited: bool,
    /// The writers of the read-write lock waiting on this manager
    /// ([`LocalWriters`], the very state `RwLock::read` consults): a reader
    /// waits while one that arrived before it still waits.
    pub(crate) writers: LocalWriters,
    /// The same writers as the checker keeps them, with their deadlines,
    /// for "no reader skips a local writer".
    pub(crate) writing: Vec<LocalWriter>,
    grace: Duration,
    streak: Duration,
}

impl Process {
    /// The shared state of the process whose callers are `first..first +
    /// callers`; `grace` and `streak` as the manager's lines take them.
    pub(crate) fn new(
        id: u64,
        first: u8,
        callers: usize,
        mark_ttl: Ttl,
        (grace, streak): (Duration, Duration),
    ) -> Self {
        Process {
            lines: Lines::new(grace, streak),
            manager: id,
            mark_ttl,
            first,
            valid: vec![None; callers],
            in_line: Vec::new(),
            wanting: 0,
            starving_since: None,
            starved: false,
            exited: false,
            writers: LocalWriters::default(),
            writing: Vec::new(),
            grace,
            streak,
        }
    }

    /// The process crashed: its lines go with it.
    pub(crate) fn crash(&mut self) {
        self.lines = Lines::new(self.grace, self.streak);
        self.in_line.clear();
        self.writers = LocalWriters::default();
        self.writing.clear();
        self.valid.iter_mut().for_each(|v| *v = None);
        self.wanting = 0;
        self.starving_since = None;
        self.starved = false;
    }

    /// A caller starts trying to lock at real time `now`.
    pub(crate) fn want(&mut self, now: u64) {
        self.wanting += 1;
        if self.starving_since.is_none() {
            self.starving_since = Some(now);
        }
    }

    /// A caller stops trying (granted, gave up, left its line).
    pub(crate) fn unwant(&mut self) {
        self.wanting = self.wanting.saturating_sub(1);
    }

    /// The process was granted at real time `now`: whoever of it still
    /// tries waits from now.
    pub(crate) fn served(&mut self, now: u64) {
        self.starving_since = (self.wanting > 0).then_some(now);
        self.starved = false;
    }

    /// The validity of the lock `holder` (a caller id) holds, from the
    /// process's `valid` list (its callers from `first` on).
    pub(crate) fn validity(valid: &[Option<Instant>], first: u8, holder: u8) -> Option<Instant> {
        let at = usize::from(holder.checked_sub(first)?);
        valid.get(at).copied().flatten()
    }

    /// The writer that arrived as `seq` acquired or gave up.
    pub(crate) fn writer_done(&mut self, seq: u64) {
        self.writers.stop_waiting(seq);
        self.writing.retain(|w| w.seq != seq);
    }

    /// A reader that arrived as `seq` is granted at real time `now`: the
    /// writer that arrived before it and still waits, its deadline not
    /// passed, if any (it was skipped).
    pub(crate) fn reader_granted(&self, seq: u64, now: u64) -> Option<LocalWriter> {
        self.writing
            .iter()
            .find(|w| w.seq < seq && now < w.deadline)
            .copied()
    }

    /// `caller` is no longer waiting in a line.
    pub(crate) fn out_of_line(&mut self, caller: u8) {
        self.in_line.retain(|w| w.caller != caller);
    }

    /// `caller` is granted the lock of its line at `now`: the earlier
    /// joiner of the same line that still waits and whose deadline has not
    /// passed, if any (it was skipped).
    pub(crate) fn granted(&mut self, caller: u8, now: Instant) -> Option<InLine> {
        let me = *self.in_line.iter().find(|w| w.caller == caller)?;
        self.out_of_line(caller);
        self.in_line
            .iter()
            .find(|w| w.mask == me.mask && w.ticket < me.ticket && now < w.deadline)
            .copied()
    }
}
