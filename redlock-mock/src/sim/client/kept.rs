//! The releases each node failed, kept and tried again on the client's
//! clock through the engine's [`Kept`], as the blocking manager's node
//! workers do (`redlock_core`'s `runtime/worker.rs`): a release sent to a
//! node that answers with a failure, or not within the per-node timeout
//! (reply lost, node down, link cut), is kept for that node and sent again
//! when due, until the node answers it or its keys have surely expired.

use std::time::{Duration, Instant};

use redlock_core::engine::{Idle, Kept, Retry};

use super::Client;
use crate::sim::clock::duration_ns;
use crate::sim::ctx::Ctx;
use crate::sim::event::{Answer, Ev, Op, Step};
use crate::sim::outcome::ViolationKind;
use crate::sim::trace::fmt_time;

/// A release on its way to one node, not answered yet.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pending {
    tx: u32,
    node: u8,
    release: Release,
    /// Set when it is itself a try again.
    retry: Option<Retry>,
}

/// What it takes to send a kept release again.
#[derive(Debug, Clone, Copy)]
pub(super) struct Release {
    lock: u32,
    op: Op,
    ttl: Duration,
}

/// One node's kept releases.
#[derive(Debug)]
pub(super) struct NodeKept {
    node: u8,
    kept: Kept<Release>,
}

impl NodeKept {
    /// Whether none is kept.
    pub(super) fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }
}

impl Pending {
    /// Release `op` of `lock` (keys set for at most `ttl`), sent to `node`
    /// in transmit `tx`.
    pub(super) fn first(tx: u32, node: u8, lock: u32, op: Op, ttl: Duration) -> Self {
        Pending {
            tx,
            node,
            release: Release { lock, op, ttl },
            retry: None,
        }
    }
}

impl Client {
    /// `node`'s answer to transmit `tx`: a failed release is kept. Whether
    /// `tx` was only a try again of kept releases (nobody else waits for
    /// it).
    pub(super) fn kept_reply(
        &mut self,
        ctx: &mut Ctx<'_>,
        node: u8,
        tx: u32,
        answer: Answer,
    ) -> bool {
        let Some(i) = self
            .pending
            .iter()
            .position(|p| p.tx == tx && p.node == node)
        else {
            return false;
        };
        let p = self.pending.swap_remove(i);
        if answer == Answer::Failed {
            self.keep_failed(ctx, p);
        }
        self.maybe_drained(ctx);
        p.retry.is_some()
    }

    /// Transmit `tx`'s per-node timeout passed: the releases in it that no
    /// node answered are kept. Whether `tx` was only a try again.
    pub(super) fn kept_timer(&mut self, ctx: &mut Ctx<'_>, tx: u32) -> bool {
        let mut retry_only = false;
        while let Some(i) = self.pending.iter().position(|p| p.tx == tx) {
            let p = self.pending.swap_remove(i);
            retry_only |= p.retry.is_some();
            self.keep_failed(ctx, p);
        }
        self.maybe_drained(ctx);
        retry_only
    }

    fn keep_failed(&mut self, ctx: &mut Ctx<'_>, p: Pending) {
        if ctx.sc.kept_one_retry && p.retry.is_some() {
            // The deliberately wrong twin: no second try again.
            ctx.stats.releases_dropped += 1;
            return;
        }
        let now = self.now_at(ctx);
        let i = match self.kept.iter().position(|k| k.node == p.node) {
            Some(i) => i,
            None => {
                self.kept.push(NodeKept {
                    node: p.node,
                    kept: Kept::new(),
                });
                self.kept.len() - 1
            }
        };
        let k = &mut self.kept[i].kept;
        k.failed(now, p.release, p.release.ttl, p.retry);
        ctx.stats.releases_dropped += k.take_dropped();
        self.schedule_kept(ctx);
    }

    /// Sets a wake-up for the next kept release due, if none comes sooner,
    /// as each node's worker waits ([`Kept::idle`]); once its process
    /// exits, a node none of whose releases is due before the drain ends
    /// leaves them to their TTL.
    pub(super) fn schedule_kept(&mut self, ctx: &mut Ctx<'_>) {
        let now = self.now_at(ctx);
        let mut next = None;
        for i in 0..self.kept.len() {
            match self.kept[i].kept.idle(now, self.closing) {
                Idle::Until(at) => next = Some(next.map_or(at, |n: Instant| n.min(at))),
                Idle::Park => {}
                Idle::Exit => self.lost_at_exit(ctx, i, now),
            }
        }
        let Some(next) = next else {
            return;
        };
        let at = self.real_of(ctx, next);
        if self.kept_wake.is_some_and(|(_, w)| w <= at && w >= ctx.now) {
            return;
        }
        self.kept_seq = self.kept_seq.wrapping_add(1);
        self.kept_wake = Some((self.kept_seq, at));
        self.step_at(ctx, at, Step::KeptDue(self.kept_seq), false);
    }

    /// The exit drain ended with node `i`'s kept releases not sent again:
    /// their keys stay until their TTL, by design
    /// (`Settings::exit_deadline`), so they do not count as left behind.
    fn lost_at_exit(&mut self, ctx: &mut Ctx<'_>, i: usize, now: Instant) {
        let node = self.kept[i].node;
        // The checker's own rule, not the engine's: a release due again
        // before the drain ended had to be sent.
        if let (Some(due), Some(by)) = (self.kept[i].kept.next_due(), self.closing) {
            if due < by && now < by {
                let (c, due, by) = (self.id, self.real_of(ctx, due), self.real_of(ctx, by));
                ctx.checker.violation(ViolationKind::LeftBehind, ctx.now, || {
                    format!(
                        "c{c}'s exit drain dropped a release to n{node} due again at {}, before the drain's end at {}",
                        fmt_time(due),
                        fmt_time(by)
                    )
                });
            }
        }
        for (release, _) in self.kept[i].kept.take_all(now) {
            ctx.stats.kept_lost_at_exit += 1;
            if let Some(rec) = ctx.locks.get_mut(release.lock) {
                rec.release_died |= 1 << node;
            }
            let (c, lock) = (self.id, release.lock);
            ctx.line(|| format!("c{c}'s process is gone: the kept release of L{lock} on n{node} is not sent again"));
        }
    }

    /// Whether its process exited and its exit drain is not through.
    pub(crate) fn draining(&self) -> bool {
        self.closing.is_some() && !self.drained
    }

    /// An exiting process's client is through once its drain has nothing
    /// left: no release unanswered, none kept (or the drain ended).
    pub(super) fn maybe_drained(&mut self, ctx: &mut Ctx<'_>) {
        if self.closing.is_none() || self.drained {
            return;
        }
        let ended = self.closing.is_some_and(|by| self.now_at(ctx) >= by);
        if ended || (self.pending.is_empty() && self.kept.iter().all(NodeKept::is_empty)) {
            self.drained = true;
            ctx.notes.push(crate::sim::ctx::Note::Retired(self.id));
        }
    }

    /// The kept releases due now are sent again.
    pub(super) fn kept_due(&mut self, ctx: &mut Ctx<'_>, seq: u32) {
        let now = self.now_at(ctx);
        if self.closing.is_some_and(|by| now >= by) {
            // The drain is over: its workers are gone.
            for i in 0..self.kept.len() {
                self.lost_at_exit(ctx, i, now);
            }
            // So are the releases still on their way: nobody reads their
            // answers.
            for p in std::mem::take(&mut self.pending) {
                ctx.stats.kept_lost_at_exit += 1;
                if let Some(rec) = ctx.locks.get_mut(p.release.lock) {
                    rec.release_died |= 1 << p.node;
                }
            }
            self.maybe_drained(ctx);
            return;
        }
        if self.kept_wake.is_none_or(|(s, _)| s != seq) {
            return;
        }
        self.kept_wake = None;
        let mut due = Vec::new();
        for k in &mut self.kept {
            for (release, retry) in k.kept.take_due(now) {
                due.push((k.node, release, retry));
            }
        }
        for (node, release, retry) in due {
            let tx = self.next_tx;
            self.next_tx = self.next_tx.wrapping_add(1);
            let (c, lock) = (self.id, release.lock);
            ctx.stats.release_retries += 1;
            if self.closing.is_some() {
                ctx.stats.drain_retries += 1;
            }
            ctx.line(|| format!("c{c} tries the release of L{lock} on n{node} again"));
            self.pending.push(Pending {
                tx,
                node,
                release,
                retry: Some(retry),
            });
            ctx.send((self.id, node, tx, lock), release.op, None);
            let at = self.after(ctx, duration_ns(ctx.sc.node_timeout));
            ctx.push(
                at,
                Ev::Timer {
                    client: self.id,
                    tx,
                },
            );
        }
        self.schedule_kept(ctx);
    }
}
