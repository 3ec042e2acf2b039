//! The releases each node failed, kept and tried again on the client's
//! clock through the engine's [`Kept`], as the blocking manager's node
//! workers do (`redlock_core`'s `runtime/worker.rs`): a release sent to a
//! node that answers with a failure, or not within the per-node timeout
//! (reply lost, node down, link cut), is kept for that node and sent again
//! when due, until the node answers it or its keys have surely expired.

use std::time::Duration;

use redlock_core::engine::{Kept, Retry};

use super::Client;
use crate::sim::clock::duration_ns;
use crate::sim::ctx::Ctx;
use crate::sim::event::{Answer, Ev, Op, Step};

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

    /// Sets a wake-up for the next kept release due, if none comes sooner.
    fn schedule_kept(&mut self, ctx: &mut Ctx<'_>) {
        let Some(next) = self.kept.iter().filter_map(|k| k.kept.next_due()).min() else {
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

    /// The kept releases due now are sent again.
    pub(super) fn kept_due(&mut self, ctx: &mut Ctx<'_>, seq: u32) {
        if self.kept_wake.is_none_or(|(s, _)| s != seq) {
            return;
        }
        self.kept_wake = None;
        let now = self.now_at(ctx);
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
