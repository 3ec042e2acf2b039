//! A lone caller's own round ([`Scenario::own_rounds`]), as the blocking
//! manager's `Sent::finish` reads it: the client sends the round to the
//! nodes itself, and the engine's [`OwnRound`] says which node's answer it
//! waits for next and until when. An answer that came in while the client
//! waited for another node's is taken when its turn comes; a node with no
//! answer by the round's deadline counts as failed for the round, its late
//! answer is dropped as the backend drops it, and its requests go through
//! the worker until it answers again. Once the round is decided, the
//! answers not read yet are left (as the Redis backend leaves them on
//! their connections, `Started::detach`): they are dropped when they come,
//! and the nodes do not count as failed. Until the reading is over, the
//! machine's new transmits and its result wait, as the caller's thread is
//! busy reading.
//!
//! [`Scenario::own_rounds`]: crate::sim::Scenario::own_rounds

use std::time::Instant;

use redlock_core::engine::OwnRound;

use super::Client;
use crate::sim::ctx::Ctx;
use crate::sim::event::{Answer, Slot, Step};

/// An own round being read.
#[derive(Debug)]
pub(crate) struct OwnRead {
    tx: u32,
    pub(super) slot: Slot,
    round: OwnRound<()>,
    /// Answers in, not taken yet: view position and answer.
    arrived: Vec<(u8, Answer)>,
    /// The wait under way: its number.
    waiting: Option<u32>,
    /// The round's per-node timeout passed while it was read.
    expired: bool,
}

impl Client {
    /// The view positions a transmit sent now to the positions in `sends`
    /// goes to by the client itself: none unless the scenario has own
    /// rounds and no other own round is being read; then every position
    /// whose last own read did not fail.
    pub(super) fn own_positions(&self, ctx: &Ctx<'_>, sends: u32) -> u32 {
        // A lone caller: it is the one driver the manager knows of.
        if self.own.is_some() || !OwnRound::applies(ctx.sc.own_rounds, 1, 1) {
            return 0;
        }
        (0..self.view.len())
            .filter(|&p| sends & (1 << p) != 0)
            .filter(|&p| OwnRound::takes(0, self.failing & (1 << p) != 0))
            .fold(0u32, |m, p| m | (1 << p))
    }

    /// Starts reading the own round `tx` of `slot`, sent now to the
    /// positions in `own`.
    pub(super) fn begin_own(&mut self, ctx: &mut Ctx<'_>, tx: u32, slot: Slot, own: u32) {
        let now = self.now_at(ctx);
        let deadline = now + ctx.sc.node_timeout;
        let nodes = (0..self.view.len())
            .filter(|&p| own & (1 << p) != 0)
            .map(|p| (p, ()))
            .collect();
        self.own = Some(OwnRead {
            tx,
            slot,
            round: OwnRound::new(now, deadline, nodes),
            arrived: Vec::new(),
            waiting: None,
            expired: false,
        });
        ctx.stats.own_rounds += 1;
        self.own_pump(ctx);
    }

    /// An answer to an own round arrives at view position `pos`.
    pub(super) fn own_reply(&mut self, ctx: &mut Ctx<'_>, tx: u32, pos: u8, answer: Answer) {
        let Some(own) = self.own.as_mut().filter(|o| o.tx == tx) else {
            // The reading gave up on it: the backend dropped it.
            ctx.stats.late_replies += 1;
            return;
        };
        own.arrived.push((pos, answer));
        self.own_pump(ctx);
    }

    /// The per-node timeout of transmit `tx` passed; whether it is the own
    /// round being read (its expiry then waits for the reading's end).
    pub(super) fn own_expired(&mut self, tx: u32) -> bool {
        match self.own.as_mut().filter(|o| o.tx == tx) {
            Some(own) => {
                own.expired = true;
                true
            }
            None => false,
        }
    }

    /// Whether the machine in `slot` waits for an own round's reading (its
    /// driver is busy reading).
    pub(super) fn reading(&self, slot: Slot) -> bool {
        self.own.as_ref().is_some_and(|o| o.slot == slot)
    }

    /// A wait for an answer is over (the slice or the round's end).
    pub(super) fn own_wait_over(&mut self, ctx: &mut Ctx<'_>, seq: u32) {
        let Some(own) = self.own.as_mut().filter(|o| o.waiting == Some(seq)) else {
            return;
        };
        own.waiting = None;
        // Whatever came in during the wait is taken next round of reading.
        own.round.not_yet();
        self.own_pump(ctx);
    }

    /// Reads as far as the engine says: takes the answers in, waits for the
    /// next one, or ends the reading and lets the machine go on.
    fn own_pump(&mut self, ctx: &mut Ctx<'_>) {
        loop {
            let now = self.now_at(ctx);
            let Some(own) = self.own.as_mut() else {
                return;
            };
            let Some(read) = own.round.next(now) else {
                return self.own_done(ctx, now);
            };
            let pos = read.node as u8;
            let answer = match own.arrived.iter().position(|&(p, _)| p == pos) {
                Some(i) => own.arrived.swap_remove(i).1,
                None if read.until > now => {
                    if own.waiting.is_none() {
                        self.own_seq = self.own_seq.wrapping_add(1);
                        own.waiting = Some(self.own_seq);
                        let at = self.real_of(ctx, read.until);
                        self.step_at(ctx, at, Step::OwnRead(self.own_seq), false);
                    }
                    return;
                }
                // Nothing by the round's end: a timeout.
                None => {
                    ctx.stats.own_timeouts += 1;
                    Answer::Failed
                }
            };
            own.waiting = None;
            own.round.take();
            let tx = own.tx;
            let decided = self.own_take(ctx, tx, pos, answer, now);
            if let Some(own) = self.own.as_mut().filter(|_| decided) {
                // The rest is left unread.
                own.round.decided(now);
                let left = own.round.rest().len();
                ctx.stats.own_left += left as u64;
            }
        }
    }

    /// Takes position `pos`'s answer to own round `tx`; whether the machine
    /// has something for its driver since.
    fn own_take(
        &mut self,
        ctx: &mut Ctx<'_>,
        tx: u32,
        pos: u8,
        answer: Answer,
        now: Instant,
    ) -> bool {
        let node = self.view[pos as usize];
        if answer == Answer::Failed {
            self.failing |= 1 << pos;
            // A release that failed is kept, as `Worker::finish` queues it.
            self.kept_reply(ctx, node, tx, Answer::Failed);
        } else {
            self.failing &= !(1 << pos);
        }
        let Some(sent) = self.sent.iter().find(|s| s.tx == tx).copied() else {
            return false;
        };
        if sent.wanted & (1 << pos) == 0 {
            return false;
        }
        self.feed(ctx, sent, node, answer, now)
    }

    /// The reading is over: a per-node timeout that passed meanwhile is
    /// handed to the machine, and its driver goes on.
    fn own_done(&mut self, ctx: &mut Ctx<'_>, now: Instant) {
        let Some(own) = self.own.take() else {
            return;
        };
        let (c, tx, timeouts) = (self.id, own.tx, self.failing.count_ones());
        ctx.line(|| format!("c{c} has read its own round (tx {tx}; {timeouts} node(s) failing)"));
        if own.expired {
            if let Some(sent) = self.sent.iter().find(|s| s.tx == own.tx).copied() {
                if let Some(machine) = self.machine(sent.slot) {
                    machine.handle_expired(now, sent.round);
                }
            }
        }
        self.drive(ctx, own.slot, false);
    }

    /// Notes a node's answer outside an own round: a failure makes its
    /// next requests go through its worker, an answer lets it take own
    /// rounds again.
    pub(super) fn saw_answer(&mut self, pos: u8, answer: Answer) {
        if answer == Answer::Failed {
            self.failing |= 1 << pos;
        } else {
            self.failing &= !(1 << pos);
        }
    }
}
