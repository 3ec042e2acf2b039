//! The driver: what `redlock_core`'s blocking shell (`Shared::drive`, the
//! guard, the keeper) does around a machine, in virtual time. Inputs go in
//! with the client's clock as `now`; each transmit goes to every node of the
//! view; a round's per-node timer starts when it is sent; the result is
//! taken when the machine has one.

use std::sync::Arc;

use redlock_core::backend::{AcquireOutcome, Response};
use redlock_core::engine::{
    Acquire, Acquired, Decided, Machine, Message, Single, Timer, Transmit, Until,
};
use redlock_core::{LockError, NodeFailure};

use super::entropy::SimEntropy;
use super::{Attempt, Client, Extending, Held, NodeDown, Sent};
use crate::sim::clock::duration_ns;
use crate::sim::ctx::{Ctx, Granted, Note};
use crate::sim::event::{Answer, Ev, Op, Slot, Step};
use crate::sim::locks::Fate;
use crate::sim::outcome::ViolationKind;
use crate::sim::scenario::{FenceScheme, MAX_KEYS};
use crate::sim::trace::fmt_time;

/// The request a message becomes on the wire (`None`: nothing the
/// simulated clients send).
fn op(t: &Transmit) -> Option<Op> {
    Some(match t.message() {
        Message::Acquire { ttl, fence } => Op::Acquire {
            ttl_ns: duration_ns(ttl.as_duration()),
            fence,
            queued: t.claim().queue(),
        },
        Message::Extend(ttl) => Op::Extend {
            ttl_ns: duration_ns(ttl.as_duration()),
        },
        Message::Release(_) => Op::Release(t.claim().queue()),
        Message::RaiseFence(at_least) => Op::RaiseFence(at_least),
        _ => return None,
    })
}

/// A node's answer as the machines take it.
fn result(
    answer: Answer,
    acquire: bool,
    counters: bool,
) -> Result<Response, NodeFailure<NodeDown>> {
    match answer {
        Answer::Granted(fence) if acquire => Ok(Response::Acquire(AcquireOutcome::Granted {
            fence: counters.then_some(fence),
        })),
        Answer::Granted(_) => Ok(Response::Held(true)),
        Answer::Refused if acquire => Ok(Response::Acquire(AcquireOutcome::HeldByOther)),
        Answer::Refused => Ok(Response::Held(false)),
        Answer::Failed => Err(NodeFailure::Backend(NodeDown)),
    }
}

impl Client {
    pub(super) fn machine(&mut self, slot: Slot) -> Option<&mut dyn Machine<NodeDown>> {
        match slot {
            Slot::Acquire => self
                .acquire
                .as_mut()
                .map(|a| &mut a.machine as &mut dyn Machine<NodeDown>),
            Slot::Extend => self
                .extend
                .as_mut()
                .map(|e| &mut e.machine as &mut dyn Machine<NodeDown>),
            Slot::Release => self
                .release
                .as_mut()
                .map(|r| &mut r.machine as &mut dyn Machine<NodeDown>),
        }
    }

    /// Runs `f` on the acquisition's machine with this client's entropy.
    fn with_entropy(
        &mut self,
        ctx: &mut Ctx<'_>,
        f: impl FnOnce(&mut Acquire<NodeDown>, &mut SimEntropy<'_>),
    ) {
        let Some(a) = self.acquire.as_mut() else {
            return;
        };
        let mut entropy = SimEntropy {
            rng: &mut self.rng,
            locks: ctx.locks,
            issued: &mut self.issued,
            client: self.id,
            mask: self.mask,
            cycle: self.cycle,
            unique: ctx.sc.unique_tokens,
        };
        f(&mut a.machine, &mut entropy);
    }

    /// Starts acquiring the cycle's resources, rounds until `deadline`.
    pub(super) fn start_acquire(&mut self, ctx: &mut Ctx<'_>, deadline: std::time::Instant) {
        let resources = match self.line_resources() {
            Ok(resources) => resources,
            Err(e) => {
                let c = self.id;
                ctx.line(|| format!("c{c} cannot lock: {e}"));
                ctx.process.unwant();
                return self.think(ctx);
            }
        };
        // A caller of a line queues, as `Redlock::lock` does.
        let queued = Self::lined(ctx).then(|| {
            redlock_core::backend::Queued::new(ctx.process.manager, ctx.process.mark_ttl, true)
                .with_ticket(ctx.now)
        });
        let mut machine = Acquire::new(
            self.settings.clone(),
            resources,
            self.ttl,
            Some(deadline),
            queued,
        );
        // What the manager does with release notifications, either way.
        if ctx.sc.wake_ups && queued.is_some() {
            match self.rng.below(3) {
                0 => machine.queue_first(),
                1 => machine.mark_at_once(),
                _ => {}
            }
        }
        self.run_acquire(ctx, machine);
    }

    /// Starts driving the acquisition `machine`.
    pub(super) fn run_acquire(&mut self, ctx: &mut Ctx<'_>, machine: Acquire<NodeDown>) {
        self.acquire = Some(Attempt {
            machine,
            claim: None,
            lock: u32::MAX,
            open: false,
            fences: Vec::new(),
            raising: false,
            wake: None,
            handed: false,
        });
        let now = self.now_at(ctx);
        self.with_entropy(ctx, |machine, entropy| machine.start(now, entropy));
        self.drive(ctx, Slot::Acquire, false);
    }

    /// Starts an extend of the held lock to `ttl` (by the keeper if `kept`);
    /// `false` when the lease refused to (lost or expired).
    pub(super) fn start_extend(
        &mut self,
        ctx: &mut Ctx<'_>,
        ttl: redlock_core::Ttl,
        kept: bool,
    ) -> bool {
        let now = self.now_at(ctx);
        let Some(h) = self.held.as_mut() else {
            return false;
        };
        let before = h.lease.valid_until();
        let message = match h.lease.begin_extend(now, ttl, &self.settings) {
            Ok(message) => message,
            Err(e) => {
                let (c, lock) = (self.id, h.lock);
                ctx.line(|| format!("c{c} L{lock} not extended: {e}"));
                return false;
            }
        };
        let lock = h.lock;
        // From now on the nodes may set the extend's TTL: the lease bounds
        // its validity by it (a shorter one shortens it), and so does the
        // checker.
        let shortened = (h.lease.valid_until() < before).then(|| {
            self.clock
                .real_at(ctx.time.local(h.lease.valid_until()), ctx.now)
        });
        if let Some(end) = shortened {
            ctx.checker.end(lock, end);
            self.watch_validity(ctx, lock, end);
        }
        let Some(h) = self.held.as_mut() else {
            return false;
        };
        let vanished = ctx.presence(&self.view, lock, self.mask)
            < redlock_core::decide::quorum(self.view.len());
        let mut machine = Single::new(
            &self.settings,
            message,
            Arc::clone(&h.claim),
            Until::Decided,
        )
        .skipping(h.lease.skips().cloned());
        machine.start(now);
        self.extend = Some(Extending {
            machine,
            lock,
            ttl,
            kept,
            vanished,
        });
        self.drive(ctx, Slot::Extend, false);
        true
    }

    /// Starts releasing the held lock.
    pub(super) fn start_release(&mut self, ctx: &mut Ctx<'_>) {
        let Some(mut h) = self.held.take() else {
            return self.think(ctx);
        };
        // A keeper's extend still under way is forgotten, as the keeper
        // forgets a released lock.
        if self.extend.take().is_some() {
            self.sent.retain(|s| s.slot != Slot::Extend);
            if self.reading(Slot::Extend) {
                self.own = None;
            }
        }
        let now = self.now_at(ctx);
        let message = h.lease.begin_release();
        ctx.locks.set_fate(h.lock, Fate::GivenUp);
        ctx.checker.end(h.lock, ctx.now);
        let (c, lock) = (self.id, h.lock);
        ctx.line(|| format!("c{c} releases L{lock}"));
        let handing = if Self::lined(ctx) {
            self.release_line(ctx)
        } else {
            None
        };
        let mut machine = Single::new(&self.settings, message, h.claim, Until::Decided)
            .skipping(h.lease.skips().cloned());
        machine.start(now);
        let first = handing.is_some().then(|| machine.poll_transmit()).flatten();
        self.release = Some(super::Releasing {
            machine,
            lease: h.lease,
            lock: h.lock,
        });
        let (Some(to), Some(first)) = (handing, first) else {
            return self.drive(ctx, Slot::Release, false);
        };
        // The hand-off (as `release_handing_off`): the engine's batch, the
        // release to every node first and the next waiter's first round
        // right behind it; no pause falls in between.
        let (next, ticket) = (to.0.who, to.0.ticket);
        if self.hand_off(ctx, to, first, lock) {
            ctx.stats.hand_offs += 1;
            ctx.line(|| format!("c{c} hands L{lock} over to c{next} (ticket {ticket})"));
        } else {
            self.send_outbox(ctx);
        }
        self.settle(ctx, Slot::Release);
    }

    /// Does what the machine in `slot` asks: sends its transmits (unless a
    /// pause falls first: then [`Step::Send`] continues after it), then
    /// takes its result or schedules its pause's end. `resumed`: after such
    /// a pause.
    pub(super) fn drive(&mut self, ctx: &mut Ctx<'_>, slot: Slot, resumed: bool) {
        self.collect(ctx, slot);
        if !self.outbox.is_empty() {
            if !resumed && self.maybe_pause(ctx) {
                self.step_at(ctx, self.paused_until, Step::Send(slot), true);
                return;
            }
            self.send_outbox(ctx);
        }
        // An own round being read: the result waits for its end.
        if !self.reading(slot) {
            self.settle(ctx, slot);
        }
    }

    /// Takes the machine's transmits into the outbox, with their lock
    /// numbers; notes what an acquisition's transmits mean for the counters
    /// and the checker.
    pub(super) fn collect(&mut self, ctx: &mut Ctx<'_>, slot: Slot) {
        while let Some(t) = self.machine(slot).and_then(Machine::poll_transmit) {
            self.take_transmit(ctx, slot, t);
        }
    }

    /// Puts a transmit of the machine in `slot` into the outbox, with its
    /// lock number.
    pub(super) fn take_transmit(&mut self, ctx: &mut Ctx<'_>, slot: Slot, t: Transmit) {
        let lock = match slot {
            Slot::Acquire => self.attempt_sends(ctx, &t),
            Slot::Extend => self.extend.as_ref().map_or(u32::MAX, |e| e.lock),
            Slot::Release => self.release.as_ref().map_or(u32::MAX, |r| r.lock),
        };
        self.outbox.push((slot, t, lock));
    }

    /// Bookkeeping for a transmit of the acquisition: a new claim is a new
    /// attempt (the token just made); returns its lock number.
    fn attempt_sends(&mut self, ctx: &mut Ctx<'_>, t: &Transmit) -> u32 {
        // A semaphore's or read-write lock's round names its slot.
        let slot = self.slot_mask(t.claim().resources());
        let c = self.id;
        let Some(a) = self.acquire.as_mut() else {
            return u32::MAX;
        };
        if a.claim
            .as_ref()
            .is_none_or(|claim| !Arc::ptr_eq(claim, t.claim()))
        {
            a.claim = Some(Arc::clone(t.claim()));
            a.lock = self.issued.take().unwrap_or(a.lock);
            a.fences.clear();
            a.raising = false;
            if let Some(rec) = ctx.locks.get_mut(a.lock) {
                rec.shared = t.claim().is_shared();
            }
            if let Some(mask) = slot {
                self.mask = mask;
                if let Some(rec) = ctx.locks.get_mut(a.lock) {
                    rec.mask = mask;
                }
            }
        }
        let mask = self.mask;
        a.open = false;
        let lock = a.lock;
        match t.message() {
            Message::Acquire { .. } => {
                a.open = true;
                ctx.line(|| format!("c{c} attempts L{lock} on mask {mask:#b}"));
            }
            Message::RaiseFence(target) => {
                a.raising = true;
                ctx.stats.raises += 1;
                ctx.line(|| format!("c{c} L{lock} raises the fences to {target}"));
            }
            Message::Release(_) => {
                if std::mem::take(&mut a.raising) {
                    ctx.stats.raise_failed += 1;
                }
                ctx.locks.set_fate(lock, Fate::GivenUp);
                ctx.line(|| format!("c{c} abandons L{lock}"));
            }
            _ => {}
        }
        lock
    }

    /// Sends every transmit of the outbox to every node of the view, and
    /// starts each one's per-node timer.
    pub(super) fn send_outbox(&mut self, ctx: &mut Ctx<'_>) {
        let mut outbox = std::mem::take(&mut self.outbox);
        let mut own_round = None;
        let mut sent = 0;
        for (slot, t, lock) in &outbox {
            // An own round is read before the next transmit goes out, as
            // the blocking manager reads each before it sends the next.
            if own_round.is_some() {
                break;
            }
            sent += 1;
            let Some(op) = op(t) else {
                continue;
            };
            let tx = self.next_tx;
            self.next_tx = self.next_tx.wrapping_add(1);
            // Only a machine's latest round takes replies.
            self.sent.retain(|s| s.slot != *slot);
            let wanted = (0..self.view.len())
                .filter(|&p| t.wants_reply(p))
                .fold(0u32, |m, p| m | (1 << p));
            let sends = (0..self.view.len())
                .filter(|&p| t.sends_to(p))
                .fold(0u32, |m, p| m | (1 << p));
            let own = self.own_positions(ctx, sends);
            if own != 0 {
                own_round = Some((tx, *slot, own));
            }
            self.sent.push(Sent {
                tx,
                slot: *slot,
                round: t.round(),
                acquire: matches!(op, Op::Acquire { .. }),
                wanted,
                own,
            });
            ctx.stats.rounds += 1;
            // The round's deadline, after which the workers drop it
            // unsent (`Message::stale`).
            let deadline = self.now_at(ctx) + ctx.sc.node_timeout;
            for (pos, &node) in self.view.iter().enumerate() {
                if t.sends_to(pos) {
                    if let Message::Release(ttl) = t.message() {
                        self.pending.push(super::kept::Pending::first(
                            tx,
                            node,
                            *lock,
                            op,
                            ttl.as_duration(),
                        ));
                    }
                    ctx.send(
                        (self.id, node, tx, *lock),
                        op,
                        Some((t.message(), deadline)),
                    );
                } else if matches!(op, Op::Release(_)) {
                    ctx.release_skipped(*lock, node);
                }
            }
            let at = self.after(ctx, ctx.node_timeout());
            ctx.push(
                at,
                Ev::Timer {
                    client: self.id,
                    tx,
                },
            );
        }
        // What is left waits for the own round's end.
        outbox.drain(..sent);
        self.outbox = outbox;
        if let Some((tx, slot, own)) = own_round {
            self.begin_own(ctx, tx, slot, own);
        }
    }

    /// Takes the machine's result, if it has one, or schedules the end of
    /// its pause.
    pub(super) fn settle(&mut self, ctx: &mut Ctx<'_>, slot: Slot) {
        match slot {
            Slot::Acquire => {
                let Some(a) = self.acquire.as_mut() else {
                    return;
                };
                if let Some(result) = a.machine.poll() {
                    self.sent.retain(|s| s.slot != Slot::Acquire);
                    if let Some(a) = self.acquire.take() {
                        match result {
                            Ok(acquired) => self.acquired(ctx, a, acquired),
                            Err(e) => self.failed(ctx, &a, &e),
                        }
                    }
                    return;
                }
                if let Some(Timer::At(at)) = a.machine.poll_timeout() {
                    if a.wake != Some(at) {
                        a.wake = Some(at);
                        self.wake_seq = self.wake_seq.wrapping_add(1);
                        let when = self.real_of(ctx, at);
                        self.step_at(ctx, when, Step::Wake(self.wake_seq), false);
                        // A release notification may end the pause sooner.
                        if ctx.sc.wake_ups && when > ctx.now && self.rng.chance(0.5) {
                            let sooner = self.rng.range(ctx.now, when);
                            self.step_at(ctx, sooner, Step::Released(self.wake_seq), false);
                        }
                    }
                }
            }
            Slot::Extend => {
                if let Some(decided) = self.extend.as_mut().and_then(|e| e.machine.poll()) {
                    self.sent.retain(|s| s.slot != Slot::Extend);
                    if let Some(e) = self.extend.take() {
                        self.extended(ctx, &e, decided);
                    }
                }
            }
            Slot::Release => {
                if let Some(decided) = self.release.as_mut().and_then(|r| r.machine.poll()) {
                    self.sent.retain(|s| s.slot != Slot::Release);
                    if let Some(r) = self.release.take() {
                        // Whether a quorum still held it changes nothing here.
                        let _ = r.lease.end_release(decided, &self.settings);
                    }
                    self.think(ctx);
                }
            }
        }
    }

    /// A node's answer to transmit `tx` arrives.
    pub(crate) fn on_reply(
        &mut self,
        ctx: &mut Ctx<'_>,
        node: u8,
        tx: u32,
        answer: Answer,
        resumed: bool,
    ) {
        let c = self.id;
        if self.kept_reply(ctx, node, tx, answer) {
            return;
        }
        let Some(sent) = self.sent.iter().find(|s| s.tx == tx).copied() else {
            ctx.stats.late_replies += 1;
            ctx.line(|| format!("c{c} ignores a late reply from n{node} (tx {tx})"));
            return;
        };
        let pos = self.pos[node as usize];
        if sent.own & (1 << pos) != 0 {
            return self.own_reply(ctx, tx, pos, answer);
        }
        self.saw_answer(pos, answer);
        if sent.wanted & (1 << pos) == 0 {
            return;
        }
        if !resumed && self.maybe_pause(ctx) {
            let ev = Ev::Reply {
                client: c,
                node,
                tx,
                answer,
                resumed: true,
            };
            ctx.push(self.paused_until, ev);
            return;
        }
        let now = self.now_at(ctx);
        self.feed(ctx, sent, node, answer, now);
        // While the client reads an own round, its machine waits.
        if !self.reading(sent.slot) {
            self.drive(ctx, sent.slot, false);
        }
    }

    /// Hands node `node`'s answer to transmit `sent` to its machine;
    /// whether the machine has something for its driver since.
    pub(super) fn feed(
        &mut self,
        ctx: &mut Ctx<'_>,
        sent: Sent,
        node: u8,
        answer: Answer,
        now: std::time::Instant,
    ) -> bool {
        if sent.slot == Slot::Acquire && sent.acquire {
            if let (Some(a), Answer::Granted(fence)) = (self.acquire.as_mut(), answer) {
                if a.open && ctx.sc.fencing {
                    a.fences.push((node as usize, fence));
                }
            }
        }
        let pos = self.pos[node as usize] as usize;
        let result = result(answer, sent.acquire, ctx.sc.fencing);
        match self.machine(sent.slot) {
            Some(machine) => {
                machine.handle_reply(now, sent.round, pos, result);
                machine.needs_driver()
            }
            None => false,
        }
    }

    /// The per-node timeout of transmit `tx` passed.
    pub(crate) fn on_timer(&mut self, ctx: &mut Ctx<'_>, tx: u32) {
        if self.kept_timer(ctx, tx) || self.own_expired(tx) {
            return;
        }
        let Some(sent) = self.sent.iter().find(|s| s.tx == tx).copied() else {
            return;
        };
        let now = self.now_at(ctx);
        if let Some(machine) = self.machine(sent.slot) {
            machine.handle_expired(now, sent.round);
        }
        self.drive(ctx, sent.slot, false);
    }

    /// The acquisition's pause may be over.
    pub(super) fn wake(&mut self, ctx: &mut Ctx<'_>, seq: u32) {
        if seq != self.wake_seq {
            return;
        }
        let now = self.now_at(ctx);
        self.with_entropy(ctx, |machine, entropy| machine.handle_timeout(now, entropy));
        self.drive(ctx, Slot::Acquire, false);
    }

    /// A release notification ends the acquisition's pause, if it is the
    /// one the notification came in.
    pub(super) fn released(&mut self, ctx: &mut Ctx<'_>, seq: u32) {
        if seq != self.wake_seq {
            return;
        }
        let now = self.now_at(ctx);
        ctx.stats.woken += 1;
        self.with_entropy(ctx, |machine, entropy| {
            machine.handle_released(now, entropy)
        });
        self.drive(ctx, Slot::Acquire, false);
    }

    /// The acquisition won the lock.
    fn acquired(&mut self, ctx: &mut Ctx<'_>, a: Attempt, acquired: Acquired) {
        let now = ctx.now;
        ctx.process.unwant();
        self.local_writers_on_grant(ctx);
        let (c, lock, mask) = (self.id, a.lock, self.mask);
        let token = match ctx.sc.fence_scheme {
            FenceScheme::Raise => acquired.fence.map(|f| f.value()),
            // The naive token: the largest counter granted, no raise.
            FenceScheme::MaxOnly => a.fences.iter().map(|&(_, f)| f).max(),
        };
        let token = token.filter(|_| ctx.sc.fencing);
        ctx.locks.set_fate(lock, Fate::Held);
        let end = self.real_of(ctx, acquired.valid_until);
        if end <= now && !Self::lined(ctx) {
            // Decided before a process pause and taken after it, its
            // validity over: the caller gets a lock it cannot use (the
            // lease says lost), skips its work and releases it.
            return self.acquired_expired(ctx, &a, &acquired);
        }
        ctx.stats.acquired += 1;
        if ctx.checker.progress_after.is_some_and(|t| now >= t) {
            ctx.checker.progressed = true;
        }
        ctx.checker.held((lock, c, self.role), mask, now, end);
        if self.role == crate::sim::checker::Role::Writer {
            ctx.stats.writers += 1;
        }
        let keep = ctx.sc.keep_alive.then(|| {
            redlock_core::engine::Keep::new(
                self.now_at(ctx),
                acquired.valid_until,
                ctx.sc.node_timeout,
                ctx.sc.keep_max_hold,
                u32::MAX,
            )
        });
        self.held = Some(Held {
            lock,
            lease: redlock_core::engine::Lease::new(acquired.ttl, acquired.valid_until)
                .skipping(acquired.refused),
            claim: acquired.claim,
            fence: token,
            keep,
            seen: [0; MAX_KEYS],
            gap2: 0,
            extended: false,
        });
        ctx.line(|| {
            format!(
                "c{c} holds L{lock} until {} (token {token:?})",
                fmt_time(end)
            )
        });
        self.check_quorum(ctx, "on acquire");
        self.watch_validity(ctx, lock, end);
        if Self::lined(ctx) {
            self.hold_line(ctx, a.handed);
        }
        ctx.notes.push(Note::Granted(Granted {
            client: c,
            lock,
            keys: mask,
            valid_until: end,
            fences: a.fences,
            token,
        }));
        if ctx.sc.keep_alive {
            self.schedule_keep(ctx);
        }
        self.step_at(ctx, now, Step::Read, false);
    }

    /// The acquisition won a lock whose validity was over when the caller
    /// took the result: it holds it only to release it.
    fn acquired_expired(&mut self, ctx: &mut Ctx<'_>, a: &Attempt, acquired: &Acquired) {
        let (c, lock) = (self.id, a.lock);
        ctx.stats.acquired_expired += 1;
        ctx.line(|| format!("c{c} L{lock} acquired, but its validity is over already"));
        self.held = Some(Held {
            lock,
            lease: redlock_core::engine::Lease::new(acquired.ttl, acquired.valid_until),
            claim: Arc::clone(&acquired.claim),
            fence: None,
            keep: None,
            seen: [0; MAX_KEYS],
            gap2: 0,
            extended: false,
        });
        self.step_at(ctx, ctx.now, Step::Read, false);
    }

    /// The acquisition failed (its failed rounds were released by it).
    fn failed(&mut self, ctx: &mut Ctx<'_>, a: &Attempt, error: &LockError<NodeDown>) {
        let (c, lock) = (self.id, a.lock);
        ctx.process.unwant();
        if let Some(seq) = self.writer_seq.take() {
            ctx.process.writer_done(seq);
        }
        self.reader_seq = None;
        if matches!(error, LockError::Timeout { .. }) {
            ctx.stats.gave_up += 1;
            ctx.line(|| format!("c{c} gives up (L{lock}): {error}"));
        } else {
            ctx.line(|| format!("c{c} fails (L{lock}): {error}"));
        }
        if Self::lined(ctx) {
            self.leave_line(ctx);
        }
        self.think(ctx);
    }

    /// An extend round is over: the lease says what it means.
    fn extended(&mut self, ctx: &mut Ctx<'_>, e: &Extending, decided: Decided<NodeDown>) {
        let (now, c, mask) = (ctx.now, self.id, self.mask);
        let at = self.now_at(ctx);
        if let Some(h) = self.held.as_mut().filter(|h| h.lock == e.lock) {
            let lock = h.lock;
            let result = h.lease.end_extend(e.ttl, decided, &self.settings);
            let valid_until = h.lease.valid_until();
            let end = self.clock.real_at(ctx.time.local(valid_until), now);
            match result {
                Ok(_) => {
                    if e.vanished {
                        ctx.checker.violation(ViolationKind::ExtendResurrected, now, || {
                            format!("c{c} L{lock} extended although its keys were gone from a quorum")
                        });
                    }
                    ctx.checker.held((lock, c, self.role), mask, now, end);
                    ctx.stats.extended += 1;
                    ctx.line(|| format!("c{c} extends L{lock} until {}", fmt_time(end)));
                    if let Some(keep) = h.keep.as_mut().filter(|_| e.kept) {
                        keep.extended(at, valid_until);
                    }
                    self.check_quorum(ctx, "after extend");
                    self.watch_validity(ctx, lock, end);
                    if e.kept {
                        self.schedule_keep(ctx);
                    }
                }
                Err(error) => {
                    // A failed round may still shorten the validity.
                    ctx.checker.end(lock, end);
                    ctx.line(|| format!("c{c} L{lock} extend failed: {error}"));
                    if e.kept {
                        self.lose(ctx, redlock_core::LostReason::ExtendFailed, Some(error));
                    }
                }
            }
        }
        if !e.kept {
            let gap2 = self.held.as_ref().map_or(0, |h| h.gap2);
            let at = self.after(ctx, gap2);
            self.step_at(ctx, at, Step::Write, false);
        }
    }
}

impl Client {
    /// A grant of a read-write lock in a process with several callers: a
    /// writer stops waiting; a reader must not have skipped a writer of its
    /// process that arrived before it and still waits, its deadline not
    /// passed (the checker's [`ViolationKind::WaiterSkipped`]).
    fn local_writers_on_grant(&mut self, ctx: &mut Ctx<'_>) {
        if let Some(seq) = self.writer_seq.take() {
            ctx.process.writer_done(seq);
        }
        let Some(seq) = self.reader_seq.take() else {
            return;
        };
        if let Some(writer) = ctx.process.reader_granted(seq, ctx.now) {
            let c = self.id;
            ctx.checker
                .violation(ViolationKind::WaiterSkipped, ctx.now, || {
                    format!(
                        "reader c{c} (arrived {seq}) is granted while writer c{} (arrived {}) of its process still waits",
                        writer.caller, writer.seq
                    )
                });
        }
    }
}
