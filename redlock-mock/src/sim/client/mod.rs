//! A simulated client process: it holds the core's own machines
//! (`redlock_core::engine`) and drives them as the blocking manager's shell
//! does, in virtual time. Nothing of the manager's order of operations is
//! here: the machines decide when to send what to which nodes, when a round
//! is decided, what it means, what to release, when to pause and retry,
//! what an extend does to the validity, when a kept lock is due or lost.
//!
//! What is here is the shell's part, and the workload:
//!
//! - `drive.rs`: the driver. It feeds replies, per-node timeouts and pause
//!   ends into a machine, sends each transmit to every node of the client's
//!   view (one request per node, on the client's link to it), starts the
//!   per-node timer of a round when it sends it, and takes the result. A
//!   process pause may fall before a transmit is sent and before a reply is
//!   handled.
//! - `entropy.rs`: tokens, holder ids and jitter from the client's seeded
//!   stream.
//! - `work.rs`: the critical section against the protected resource.
//! - `keep.rs`: the keeper that runs the keep-alive schedule.
//! - `primitive.rs`: a cycle on a semaphore or a read-write lock, through
//!   the core's [`Slots`](redlock_core::engine::Slots) and
//!   [`Acquire::read`](redlock_core::engine::Acquire::read).
//!
//! Time: the client's clock reading (integer nanoseconds) becomes an
//! `Instant` through the run's [`Timebase`].

mod drive;
mod entropy;
mod keep;
mod kept;
mod line;
mod own;
mod primitive;
mod work;

use std::sync::Arc;
use std::time::Instant;

use redlock_core::backend::Claim;
use redlock_core::decide::quorum;
use redlock_core::engine::{Acquire, Keep, Lease, Settings, Single, Transmit};
use redlock_core::{NodeId, RetryDelay, Ttl};

use super::checker::Role;
use super::clock::{duration_ns, ClientClock, Timebase};
use super::ctx::{Ctx, Note};
pub(crate) use super::event::NodeDown;
use super::event::{Ev, Slot, Step};
use super::locks::Fate;
use super::outcome::ViolationKind;
use super::rng::SimRng;
use super::scenario::{FenceScheme, Scenario, MAX_KEYS, MAX_NODES};
use super::trace::fmt_time;
pub(crate) use primitive::key_names;

/// A transmit that was sent: which machine and round its replies belong to.
#[derive(Debug, Clone, Copy)]
struct Sent {
    tx: u32,
    slot: Slot,
    round: redlock_core::engine::RoundId,
    /// It was an acquire (its answers are acquire outcomes).
    acquire: bool,
    /// The view positions whose replies the machine wants.
    wanted: u32,
    /// The view positions the client sent to itself, in an own round
    /// ([`Scenario::own_rounds`]): their answers are read through it.
    own: u32,
}

/// The acquisition under way.
#[derive(Debug)]
struct Attempt {
    machine: Acquire<NodeDown>,
    /// The claim of the current attempt, as last seen in a transmit.
    claim: Option<Arc<Claim>>,
    /// Its lock number.
    lock: u32,
    /// The current acquire round is open (sent, not yet decided).
    open: bool,
    /// Its granting nodes and their counters, as the replies came in (for
    /// the grant hook; the machine keeps its own).
    fences: Vec<(usize, u64)>,
    /// A raise round was sent for the current attempt.
    raising: bool,
    /// The pause end a wake-up is scheduled for.
    wake: Option<Instant>,
    /// Started by a hand-off (its first round behind a release).
    handed: bool,
}

/// The lock held.
#[derive(Debug)]
struct Held {
    lock: u32,
    claim: Arc<Claim>,
    lease: Lease<NodeDown>,
    /// The fencing token.
    fence: Option<u64>,
    keep: Option<Keep>,
    seen: [u64; MAX_KEYS],
    gap2: u64,
    extended: bool,
}

/// An extend round under way.
#[derive(Debug)]
struct Extending {
    machine: Single<NodeDown>,
    lock: u32,
    ttl: Ttl,
    /// By the keeper (else by the critical section, which waits for it).
    kept: bool,
    /// The keys had vanished from a quorum when it started.
    vanished: bool,
}

/// A release round under way.
#[derive(Debug)]
struct Releasing {
    machine: Single<NodeDown>,
    lease: Lease<NodeDown>,
    lock: u32,
}

/// One client process.
#[derive(Debug)]
pub(crate) struct Client {
    id: u8,
    pub(crate) rng: SimRng,
    clock: ClientClock,
    /// The nodes this client is configured with.
    view: Vec<u8>,
    /// Each node's position in `view`.
    pos: [u8; MAX_NODES],
    settings: Settings,
    ttl: Ttl,
    pub(crate) crashed: bool,
    pub(crate) done: bool,
    /// With [`Scenario::exit`]: it did its last write and keeps its lock
    /// until its process exits.
    pub(crate) parked: bool,
    pub(crate) paused_until: u64,
    /// Incarnation: bumped by a restart after a crash.
    pub(crate) life: u16,
    cycle: u32,
    mask: u8,
    /// What the cycle's lock is for.
    role: Role,
    /// The semaphore's permits or the read-write lock
    /// ([`Scenario::primitive`]); `None` for mutexes.
    primitive: Option<primitive::Prim>,
    next_tx: u32,
    sent: Vec<Sent>,
    /// Transmits taken from a machine and not yet sent (a pause fell in
    /// between), with their lock numbers.
    outbox: Vec<(Slot, Transmit, u32)>,
    /// The lock number of the last token made.
    issued: Option<u32>,
    acquire: Option<Attempt>,
    held: Option<Held>,
    extend: Option<Extending>,
    release: Option<Releasing>,
    wake_seq: u32,
    keep_seq: u32,
    /// Its ticket as the owner of its process's line.
    ticket: Option<u64>,
    /// Its ticket and deadline while it waits in a line.
    waiting: Option<(u64, Instant)>,
    look_seq: u32,
    /// Releases sent and not answered yet, per node.
    pending: Vec<kept::Pending>,
    /// The releases each node failed, kept for another try.
    kept: Vec<kept::NodeKept>,
    /// The wake-up set for the next kept release due: its number and real
    /// time.
    kept_wake: Option<(u32, u64)>,
    kept_seq: u32,
    /// Once its process exits: the end of the exit drain, on its clock
    /// (the node workers' `shutdown_by`).
    closing: Option<Instant>,
    /// Its exit drain is through (it retired).
    drained: bool,
    /// The own round being read ([`Scenario::own_rounds`]).
    own: Option<own::OwnRead>,
    own_seq: u32,
    /// The view positions whose last own read failed: their requests go
    /// through the workers until they answer again.
    failing: u32,
    /// The retry pauses (for a reader waiting for its process's writers).
    retry: RetryDelay,
    /// As a writer of a process with several callers: its arrival number
    /// in the process's [`LocalWriters`](redlock_core::engine::LocalWriters)
    /// while it wants the lock.
    writer_seq: Option<u64>,
    /// As a reader: its arrival number (from arrival until its grant or
    /// give-up).
    reader_seq: Option<u64>,
    /// As a reader waiting for earlier writers: its deadline.
    read_wait: Option<Instant>,
    read_wait_seq: u32,
}

impl Client {
    pub(crate) fn new(
        id: u8,
        rng: SimRng,
        clock: ClientClock,
        view: Vec<u8>,
        sc: &Scenario,
        (ttl, retry): (Ttl, RetryDelay),
    ) -> Self {
        let mut pos = [u8::MAX; MAX_NODES];
        for (i, &n) in view.iter().enumerate() {
            pos[n as usize] = i as u8;
        }
        let nodes: Arc<[NodeId]> = view.iter().map(|n| NodeId::new(format!("n{n}"))).collect();
        let settings = Settings::new(nodes)
            .node_timeout(sc.node_timeout)
            .drift_factor(sc.drift_factor)
            .retry(retry)
            .fencing(sc.fencing && sc.fence_scheme == FenceScheme::Raise);
        Client {
            id,
            rng,
            clock,
            view,
            pos,
            settings,
            ttl,
            crashed: false,
            done: false,
            parked: false,
            paused_until: 0,
            life: 0,
            cycle: 0,
            mask: 0,
            role: Role::Lock,
            primitive: primitive::primitive(sc),
            next_tx: 0,
            sent: Vec::with_capacity(4),
            outbox: Vec::with_capacity(2),
            issued: None,
            acquire: None,
            held: None,
            extend: None,
            release: None,
            wake_seq: 0,
            keep_seq: 0,
            ticket: None,
            waiting: None,
            look_seq: 0,
            pending: Vec::new(),
            kept: Vec::new(),
            kept_wake: None,
            kept_seq: 0,
            closing: None,
            drained: false,
            own: None,
            own_seq: 0,
            failing: 0,
            retry,
            writer_seq: None,
            reader_seq: None,
            read_wait: None,
            read_wait_seq: 0,
        }
    }

    /// This client's clock now, as the machines' instant.
    fn now_at(&self, ctx: &Ctx<'_>) -> Instant {
        ctx.time.at(self.clock.local(ctx.now))
    }

    /// The real time at which this client's clock reaches `at` (never
    /// before now).
    fn real_of(&self, ctx: &Ctx<'_>, at: Instant) -> u64 {
        self.clock.real_at(ctx.time.local(at), ctx.now)
    }

    /// Real time when a local duration `d` from now ends on this clock.
    fn after(&self, ctx: &Ctx<'_>, d: u64) -> u64 {
        self.clock.after(ctx.now, d)
    }

    fn step_at(&self, ctx: &mut Ctx<'_>, at: u64, step: Step, resumed: bool) {
        let ev = Ev::Step {
            client: self.id,
            step,
            resumed,
            life: self.life,
        };
        ctx.push(at, ev);
    }

    /// The lock this client believes it holds at real time `now` (its lease
    /// valid, not marked lost, not released), with its keys.
    pub(crate) fn belief(&self, time: Timebase, now: u64) -> Option<(u32, u8)> {
        if self.crashed {
            return None;
        }
        let at = time.at(self.clock.local(now));
        self.held
            .as_ref()
            .filter(|h| !h.lease.is_lost(at))
            .map(|h| (h.lock, self.mask))
    }

    /// The validity of the lock this client holds at real time `now`, as
    /// its line's waiters read it (`None`: none, or lost).
    pub(crate) fn validity(&self, time: Timebase, now: u64) -> Option<Instant> {
        let at = time.at(self.clock.local(now));
        self.held
            .as_ref()
            .filter(|h| !self.crashed && !h.lease.is_lost(at))
            .map(|h| h.lease.valid_until())
    }

    /// This client's clock at real time `now`, as the machines' instant.
    pub(crate) fn clock_at(&self, time: Timebase, now: u64) -> Instant {
        time.at(self.clock.local(now))
    }

    fn believes(&self, ctx: &Ctx<'_>) -> bool {
        self.belief(ctx.time, ctx.now).is_some()
    }

    /// Maybe pauses here (a GC pause, swapping, SIGSTOP); returns whether
    /// it did. Pauses never reach past the end of the faults in liveness
    /// mode.
    fn maybe_pause(&mut self, ctx: &mut Ctx<'_>) -> bool {
        let faults = &ctx.sc.client_faults;
        if ctx.calm || !self.rng.chance(faults.pause_chance) {
            return false;
        }
        let max = duration_ns(faults.pause_max);
        let len = self.rng.pareto((max / 100).max(1), max.max(1));
        let mut until = ctx.now + len;
        if let Some(stop) = ctx.checker.progress_after {
            until = until.min(stop.max(ctx.now));
        }
        self.paused_until = until;
        ctx.stats.pauses += 1;
        let c = self.id;
        ctx.line(|| format!("c{c} pauses until {}", fmt_time(until)));
        until > ctx.now
    }

    /// A scripted pause of `len` from now.
    pub(crate) fn pause_for(&mut self, ctx: &mut Ctx<'_>, len: u64) {
        if self.crashed || self.done {
            return;
        }
        let until = ctx.now + len;
        self.paused_until = self.paused_until.max(until);
        ctx.stats.pauses += 1;
        let c = self.id;
        ctx.line(|| format!("c{c} pauses until {}", fmt_time(until)));
    }

    /// The checker's in-model invariant: a client that believes it holds
    /// has its token on a quorum of its nodes.
    fn check_quorum(&self, ctx: &mut Ctx<'_>, what: &'static str) {
        let Some(h) = &self.held else {
            return;
        };
        let (lock, need) = (h.lock, quorum(self.view.len()));
        let have = ctx.presence(&self.view, lock, self.mask);
        if have < need {
            let c = self.id;
            ctx.checker.violation(ViolationKind::QuorumLost, ctx.now, || {
                format!("c{c} L{lock} believes it holds ({what}) but only {have} of its nodes have its keys, quorum {need}")
            });
        }
    }

    /// Schedules a quorum check at the last instant of the validity that
    /// ends at real time `end`.
    fn watch_validity(&self, ctx: &mut Ctx<'_>, lock: u32, end: u64) {
        if end > ctx.now + 1 {
            let client = self.id;
            ctx.push(end - 1, Ev::ValidityEnd { client, lock });
        }
    }

    /// The last instant of a validity: if the client still believes it
    /// holds (paused or not), its token must still be on a quorum.
    pub(crate) fn validity_end(&self, ctx: &mut Ctx<'_>, lock: u32) {
        if self.held.as_ref().is_some_and(|h| h.lock == lock) && self.believes(ctx) {
            self.check_quorum(ctx, "at the end of its validity");
        }
    }

    pub(crate) fn on_step(&mut self, ctx: &mut Ctx<'_>, step: Step, resumed: bool) {
        let pausable = matches!(
            step,
            Step::Read | Step::MidWork | Step::Release | Step::KeepDue(_)
        );
        if pausable && !resumed && self.maybe_pause(ctx) {
            self.step_at(ctx, self.paused_until, step, true);
            return;
        }
        match step {
            Step::Begin => self.begin(ctx),
            Step::Send(slot) => self.drive(ctx, slot, true),
            Step::Wake(seq) => self.wake(ctx, seq),
            Step::Released(seq) => self.released(ctx, seq),
            Step::KeepDue(seq) => self.keep_due(ctx, seq),
            Step::Read => self.read(ctx),
            Step::MidWork => self.mid_work(ctx),
            Step::Write => self.write(ctx),
            Step::DoWrite => self.do_write(ctx),
            Step::Release => self.release(ctx),
            Step::Look(seq) => self.look_due(ctx, seq),
            Step::KeptDue(seq) => self.kept_due(ctx, seq),
            Step::OwnRead(seq) => self.own_wait_over(ctx, seq),
            Step::ReadWait(seq) => self.read_wait_due(ctx, seq),
        }
    }

    fn think(&mut self, ctx: &mut Ctx<'_>) {
        let d = self.rng.range(0, duration_ns(ctx.sc.think_max));
        let at = self.after(ctx, d);
        self.step_at(ctx, at, Step::Begin, false);
    }

    /// Schedules the first cycle, after up to one thinking time.
    pub(crate) fn start(&mut self, ctx: &mut Ctx<'_>) {
        let at = self.rng.below(duration_ns(ctx.sc.think_max) + 1);
        self.step_at(ctx, at, Step::Begin, false);
    }

    /// A new cycle: pick the resources and start acquiring them, with
    /// retries until the acquire timeout.
    fn begin(&mut self, ctx: &mut Ctx<'_>) {
        let sc = ctx.sc;
        let over = match ctx.live_until {
            Some(until) => ctx.now >= until,
            None => self.cycle >= sc.cycles,
        };
        let c = self.id;
        if over && (!self.pending.is_empty() || self.kept.iter().any(|k| !k.is_empty())) {
            // Its node workers still wait for releases, or try failed ones
            // again.
            let at = self.after(ctx, duration_ns(redlock_core::engine::LAST_RETRY));
            self.step_at(ctx, at, Step::Begin, false);
            return;
        }
        if over {
            self.done = true;
            ctx.notes.push(Note::Retired(self.id));
            ctx.line(|| format!("c{c} done"));
            return;
        }
        self.cycle += 1;
        if let Some(prim) = self.primitive.clone() {
            return self.begin_primitive(ctx, &prim);
        }
        let first = self.rng.below(sc.keys as u64) as u8;
        let mut mask = 1u8 << first;
        if sc.keys > 1 && self.rng.chance(sc.multi_key) {
            let other = (first as u64 + 1 + self.rng.below(sc.keys as u64 - 1)) % sc.keys as u64;
            mask |= 1 << other;
        }
        self.mask = mask;
        let local = self.clock.local(ctx.now);
        let deadline = local.saturating_add(super::clock::signed(sc.acquire_timeout));
        ctx.process.want(ctx.now);
        if Self::lined(ctx) {
            self.join_line(ctx, ctx.time.at(deadline));
        } else {
            self.start_acquire(ctx, ctx.time.at(deadline));
        }
    }
}

impl Client {
    /// A crash: the process forgets its machines and its lock; what it sent
    /// is still in flight. A restart follows if the scenario says so.
    pub(crate) fn crash(&mut self, ctx: &mut Ctx<'_>) {
        if self.crashed || self.done {
            return;
        }
        self.crashed = true;
        let now = ctx.now;
        if let Some(a) = self.acquire.take() {
            ctx.locks.set_fate(a.lock, Fate::Crashed);
        }
        for (_, _, lock) in self.outbox.drain(..) {
            // Its release never left: the keys wait for their TTL.
            if let Some(rec) = ctx.locks.get_mut(lock) {
                rec.fate = Fate::Crashed;
            }
        }
        if let Some(h) = self.held.take() {
            ctx.checker.end(h.lock, now);
            ctx.locks.set_fate(h.lock, Fate::Crashed);
        }
        self.extend = None;
        self.release = None;
        self.ticket = None;
        self.waiting = None;
        if let Some(seq) = self.writer_seq.take() {
            ctx.process.writer_done(seq);
        }
        self.reader_seq = None;
        self.read_wait = None;
        self.sent.clear();
        self.own = None;
        self.failing = 0;
        // Its kept releases go with the process: their keys wait for their
        // TTL.
        self.pending.clear();
        self.kept.clear();
        self.kept_wake = None;
        self.issued = None;
        ctx.stats.client_crashes += 1;
        match ctx.sc.client_faults.restart_max {
            Some(max) => {
                let delay = self.rng.range(0, duration_ns(max));
                ctx.push(now + delay, Ev::ClientRestart(self.id));
            }
            None => ctx.notes.push(Note::Retired(self.id)),
        }
        let c = self.id;
        ctx.line(|| format!("c{c} crashes"));
    }

    /// A crashed client comes back as a fresh process and starts a new
    /// cycle (the cycles it had done still count).
    pub(crate) fn restart(&mut self, ctx: &mut Ctx<'_>) {
        if !self.crashed {
            return;
        }
        self.crashed = false;
        self.paused_until = 0;
        self.life = self.life.wrapping_add(1);
        let c = self.id;
        ctx.line(|| format!("c{c} restarts"));
        self.step_at(ctx, ctx.now, Step::Begin, false);
    }
}
