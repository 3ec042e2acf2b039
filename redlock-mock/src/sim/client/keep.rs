//! The keeper: runs the core's keep-alive schedule
//! ([`Keep`](redlock_core::engine::Keep)) for the held lock, as the
//! blocking manager's keeper thread does, and marks the lease lost when the
//! schedule or an extension says so.

use redlock_core::engine::KeepStep;
use redlock_core::{LockError, LostReason};

use super::{Client, NodeDown};
use crate::sim::ctx::Ctx;
use crate::sim::event::Step;

impl Client {
    /// Wakes the keeper when the held lock's next extension is due.
    pub(super) fn schedule_keep(&mut self, ctx: &mut Ctx<'_>) {
        let Some(due) = self
            .held
            .as_ref()
            .and_then(|h| h.keep.as_ref())
            .map(redlock_core::engine::Keep::due)
        else {
            return;
        };
        self.keep_seq = self.keep_seq.wrapping_add(1);
        let at = self.real_of(ctx, due);
        self.step_at(ctx, at, Step::KeepDue(self.keep_seq), false);
    }

    /// The keeper's wake-up number `seq`: does what the schedule says.
    pub(super) fn keep_due(&mut self, ctx: &mut Ctx<'_>, seq: u32) {
        if seq != self.keep_seq || self.extend.is_some() {
            return;
        }
        let now = self.now_at(ctx);
        let Some(h) = self.held.as_ref() else {
            return;
        };
        let Some(keep) = h.keep.as_ref() else {
            return;
        };
        if h.lease.lost().is_some() {
            return;
        }
        match keep.step(now, h.lease.valid_until()) {
            KeepStep::Wait(_) => self.schedule_keep(ctx),
            KeepStep::Extend => {
                let ttl = h.lease.ttl();
                if !self.start_extend(ctx, ttl, true) {
                    self.lose(ctx, LostReason::Expired, None);
                }
            }
            KeepStep::Lose(reason) => self.lose(ctx, reason, None),
        }
    }

    /// The keeper stops: the held lock is lost (the first reason recorded
    /// stands), and the holder knows it from now on.
    pub(super) fn lose(
        &mut self,
        ctx: &mut Ctx<'_>,
        reason: LostReason,
        cause: Option<LockError<NodeDown>>,
    ) {
        let Some(h) = self.held.as_mut() else {
            return;
        };
        h.lease.mark_lost(reason, cause);
        let (c, lock, lost) = (self.id, h.lock, h.lease.lost());
        ctx.stats.keep_lost += 1;
        ctx.checker.end(lock, ctx.now);
        ctx.line(|| format!("c{c} L{lock} is lost: {lost:?}"));
    }
}
