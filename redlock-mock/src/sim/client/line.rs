//! A caller's part in its process's local lines
//! ([`redlock_core::engine::Lines`]), as `Redlock::lock` and the core's
//! `line.rs` shell take it: join; the owner acquires through the nodes;
//! a waiter looks at the line when woken or at the instant the line names,
//! and takes over when the owner is gone; a release by an owner with
//! waiters starts the next waiter's acquisition with a fresh token and
//! queues its first round on every node right behind the release, in the
//! same batch (on the process's ordered links), as
//! `Lines::release_handing_off` does.

use std::time::Instant;

use redlock_core::backend::Queued;
use redlock_core::engine::{HandOff, Handing, Joined, Look, Message, Transmit, Waiting};
use redlock_core::Resources;

use super::entropy::SimEntropy;
use super::{Attempt, Client};
use crate::sim::ctx::{Ctx, HandOff as HandOffNote, Note};
use crate::sim::event::NodeDown;
use crate::sim::event::{Slot, Step};
use crate::sim::outcome::ViolationKind;
use crate::sim::process::{InLine, Process};
use crate::sim::scenario::MAX_KEYS;

/// The resources of a key mask.
pub(super) fn resources_of(mask: u8) -> Result<Resources, redlock_core::ConfigError> {
    Resources::new(
        (0..MAX_KEYS)
            .filter(|k| mask & (1 << k) != 0)
            .map(|k| format!("r{k}")),
    )
}

impl Client {
    /// The resources the cycle locks and queues for in its line: the
    /// read-write lock's key for a writer (`RwLock::write` is
    /// `Redlock::lock` on it), the key mask's otherwise.
    pub(super) fn line_resources(&self) -> Result<Resources, redlock_core::ConfigError> {
        match &self.primitive {
            Some(super::primitive::Prim::RwLock(key)) => Ok(key.clone()),
            _ => resources_of(self.mask),
        }
    }

    /// Whether this client's process has several callers (and a line).
    pub(super) fn lined(ctx: &Ctx<'_>) -> bool {
        ctx.sc.callers_per_process > 1
    }

    /// Joins the line for the cycle's resources: the owner acquires at
    /// once, a waiter looks at the line.
    pub(super) fn join_line(&mut self, ctx: &mut Ctx<'_>, deadline: Instant) {
        let c = self.id;
        let resources = match self.line_resources() {
            Ok(resources) => resources,
            Err(e) => {
                ctx.line(|| format!("c{c} cannot lock: {e}"));
                ctx.process.unwant();
                return self.think(ctx);
            }
        };
        let joined = ctx.process.lines.join(&resources, self.ttl, deadline, c);
        let ticket = match joined {
            Joined::Owner(t) | Joined::Waiting(t) => t,
        };
        ctx.process.in_line.push(InLine {
            ticket,
            caller: c,
            mask: self.mask,
            deadline,
        });
        match joined {
            Joined::Owner(_) => {
                self.ticket = Some(ticket);
                self.start_acquire(ctx, deadline);
            }
            Joined::Waiting(_) => {
                ctx.line(|| format!("c{c} waits in line (ticket {ticket})"));
                self.waiting = Some((ticket, deadline));
                self.look(ctx);
            }
        }
    }

    /// The scheduled look number `seq` is due.
    pub(super) fn look_due(&mut self, ctx: &mut Ctx<'_>, seq: u32) {
        if seq == self.look_seq {
            self.look(ctx);
        }
    }

    /// A waiter looks at its line (woken, or at the instant it was told).
    pub(crate) fn look(&mut self, ctx: &mut Ctx<'_>) {
        let Some((ticket, deadline)) = self.waiting else {
            return;
        };
        let Ok(resources) = self.line_resources() else {
            return;
        };
        let now = self.now_at(ctx);
        let process = &mut *ctx.process;
        let (valid, first) = (&process.valid, process.first);
        let look = process.lines.look(&resources, ticket, now, |&holder| {
            Process::validity(valid, first, holder)
        });
        let c = self.id;
        match look {
            Look::Wait(at) => {
                self.look_seq = self.look_seq.wrapping_add(1);
                let when = self.real_of(ctx, at);
                self.step_at(ctx, when, Step::Look(self.look_seq), false);
            }
            Look::TakeOver => {
                self.waiting = None;
                self.ticket = Some(ticket);
                ctx.stats.took_over += 1;
                ctx.line(|| format!("c{c} takes over its line"));
                self.start_acquire(ctx, deadline);
            }
            Look::Left => {
                self.waiting = None;
                ctx.process.unwant();
                ctx.process.out_of_line(c);
                if let Some(seq) = self.writer_seq.take() {
                    ctx.process.writer_done(seq);
                }
                ctx.stats.gave_up += 1;
                ctx.line(|| format!("c{c} leaves its line (deadline)"));
                self.think(ctx);
            }
        }
    }

    /// The line was given to this waiter: it acquires through the nodes.
    pub(crate) fn turn(&mut self, ctx: &mut Ctx<'_>) {
        let Some((ticket, deadline)) = self.waiting.take() else {
            return;
        };
        self.ticket = Some(ticket);
        let c = self.id;
        ctx.line(|| format!("c{c} owns its line now"));
        self.start_acquire(ctx, deadline);
    }

    /// The line was handed to this waiter with an acquisition started for
    /// it: its first round goes out now, right behind the release (no
    /// pause falls in between: they are one batch).
    pub(crate) fn take_hand_off(&mut self, ctx: &mut Ctx<'_>, hand: HandOffNote) {
        if self.waiting.take().is_none() {
            return;
        }
        self.ticket = Some(hand.ticket);
        self.issued = Some(hand.lock);
        self.acquire = Some(Attempt {
            machine: hand.machine,
            claim: None,
            lock: u32::MAX,
            open: false,
            fences: Vec::new(),
            raising: false,
            wake: None,
            handed: true,
        });
        for t in hand.first {
            self.take_transmit(ctx, Slot::Acquire, t);
        }
        self.collect(ctx, Slot::Acquire);
        self.send_outbox(ctx);
        self.settle(ctx, Slot::Acquire);
    }

    /// The owner acquired: it holds the line while its lock lasts; the
    /// checker's "no waiter is skipped".
    pub(super) fn hold_line(&mut self, ctx: &mut Ctx<'_>, handed: bool) {
        let c = self.id;
        let now = self.now_at(ctx);
        if let Some(skipped) = ctx.process.granted(c, now) {
            let (ticket, other) = (self.ticket, skipped.caller);
            ctx.checker
                .violation(ViolationKind::WaiterSkipped, ctx.now, || {
                    format!("c{c} (ticket {ticket:?}) is granted while c{other} (ticket {}) joined the line before it and still waits", skipped.ticket)
                });
        }
        let Some(ticket) = self.ticket else {
            return;
        };
        let Ok(resources) = self.line_resources() else {
            return;
        };
        if !ctx.process.lines.hold(&resources, ticket, c, now, handed) {
            // Taken for gone meanwhile: its release is a plain one.
            self.ticket = None;
        }
    }

    /// The owner gives up without a lock: the next waiter acquires itself.
    pub(super) fn leave_line(&mut self, ctx: &mut Ctx<'_>) {
        ctx.process.out_of_line(self.id);
        let Some(ticket) = self.ticket.take() else {
            return;
        };
        let Ok(resources) = self.line_resources() else {
            return;
        };
        let now = self.now_at(ctx);
        let mut expired = Vec::new();
        let next = ctx
            .process
            .lines
            .leave(&resources, ticket, now, &mut expired);
        if let Some(next) = next {
            ctx.notes.push(Note::Turn(next.who));
        }
        ctx.notes.extend(expired.into_iter().map(Note::Wake));
    }

    /// The owner releases: what the line says; on `Handing::Next`, the
    /// new owner and whether its hand-off round yields.
    pub(super) fn release_line(&mut self, ctx: &mut Ctx<'_>) -> Option<(Waiting<u8>, bool)> {
        let ticket = self.ticket.take();
        ticket?;
        let resources = self.line_resources().ok()?;
        let now = self.now_at(ctx);
        let mut expired = Vec::new();
        let handing = ctx
            .process
            .lines
            .release(&resources, ticket, now, &mut expired);
        ctx.notes.extend(expired.into_iter().map(Note::Wake));
        match handing {
            Handing::Next { waiter, yields } => Some((waiter, yields)),
            Handing::Plain | Handing::Freed => None,
        }
    }

    /// Hands the line over to `waiter` as the manager does
    /// ([`engine::HandOff`](redlock_core::engine::HandOff)): the engine
    /// starts its acquisition with a fresh token and gives the batch, which
    /// goes out in its order: the release (`release`, of lock `lock`) from
    /// here, the acquire round from the new owner at once (no pause falls
    /// in between: one batch on the process's ordered links). `false`
    /// when no hand-off was made: the release is then in the outbox alone
    /// and the new owner acquires itself.
    pub(super) fn hand_off(
        &mut self,
        ctx: &mut Ctx<'_>,
        (waiter, yields): (Waiting<u8>, bool),
        release: Transmit,
        lock: u32,
    ) -> bool {
        let now = self.now_at(ctx);
        let queued =
            Queued::new(ctx.process.manager, ctx.process.mark_ttl, true).with_ticket(ctx.now);
        let mut issued = None;
        let mut entropy = SimEntropy {
            rng: &mut self.rng,
            locks: ctx.locks,
            issued: &mut issued,
            client: waiter.who,
            mask: self.mask,
            cycle: self.cycle,
            unique: ctx.sc.unique_tokens,
        };
        let started = HandOff::<NodeDown>::start(
            release,
            &waiter,
            yields,
            &self.settings,
            queued,
            now,
            &mut entropy,
        );
        let hand = match started {
            Ok(hand) => hand,
            Err(release) => {
                // No token for them: it acquires itself.
                self.outbox.push((Slot::Release, release, lock));
                ctx.notes.push(Note::Turn(waiter.who));
                return false;
            }
        };
        let theirs = issued.unwrap_or(u32::MAX);
        if let Some(rec) = ctx.locks.get_mut(theirs) {
            rec.handed_from = Some(lock);
        }
        let mut first = Vec::new();
        for t in hand.batch {
            match t.message() {
                Message::Release(_) => {
                    self.outbox.push((Slot::Release, t, lock));
                    self.send_outbox(ctx);
                }
                _ => first.push(t),
            }
        }
        ctx.notes.push(Note::HandOff(
            waiter.who,
            Box::new(HandOffNote {
                machine: hand.acquire,
                first,
                lock: theirs,
                ticket: waiter.ticket,
            }),
        ));
        true
    }
}
