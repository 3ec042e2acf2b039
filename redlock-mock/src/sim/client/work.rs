//! A holder's critical section against the protected resource: read, a
//! gap that faults stretch, an extend when the validity runs low, the
//! validity check, a pause that may follow it, the write; with a fencing
//! resource each access carries the lock's token and may be turned away.
//! "Valid" is what the holder's [`Lease`](redlock_core::engine::Lease)
//! says now.

use std::time::Duration;

use redlock_core::Ttl;

use super::Client;
use crate::sim::clock::duration_ns;
use crate::sim::ctx::Ctx;
use crate::sim::event::Step;
use crate::sim::trace::fmt_time;

impl Client {
    pub(super) fn read(&mut self, ctx: &mut Ctx<'_>) {
        if !self.believes(ctx) {
            ctx.stats.skipped_writes += 1;
            return self.on_step(ctx, Step::Release, true);
        }
        self.check_quorum(ctx, "on read");
        let mask = self.access(false);
        let Some(h) = self.held.as_mut() else {
            return self.think(ctx);
        };
        if let Err(why) = ctx.checker.read(h.lock, mask, h.fence, &mut h.seen) {
            return self.fenced_off(ctx, "read", &why);
        }
        let sc = ctx.sc;
        let work = self
            .rng
            .range(duration_ns(sc.work_min), duration_ns(sc.work_max));
        let gap1 = self.rng.range(0, work);
        h.gap2 = work - gap1;
        let at = self.after(ctx, gap1);
        self.step_at(ctx, at, Step::MidWork, false);
    }

    pub(super) fn mid_work(&mut self, ctx: &mut Ctx<'_>) {
        let sc = ctx.sc;
        let local = self.clock.local(ctx.now);
        let half = crate::sim::clock::signed(sc.ttl) / 2;
        let believes = self.believes(ctx);
        let Some(h) = self.held.as_mut() else {
            return self.think(ctx);
        };
        let low = ctx.time.local(h.lease.valid_until()) - local < half;
        if sc.extend && !sc.keep_alive && !h.extended && believes && low {
            h.extended = true;
            let ttl = match sc.extend_ttl {
                Some((lo, hi)) => {
                    let ns = self.rng.range(duration_ns(lo), duration_ns(hi));
                    Ttl::new(Duration::from_nanos(ns)).unwrap_or(self.ttl)
                }
                None => self.ttl,
            };
            // The critical section waits for the extend (see `extended`).
            if self.start_extend(ctx, ttl, false) {
                return;
            }
        }
        let gap2 = self.held.as_ref().map_or(0, |h| h.gap2);
        let at = self.after(ctx, gap2);
        self.step_at(ctx, at, Step::Write, false);
    }

    /// The validity check before the write; a pause may follow it.
    pub(super) fn write(&mut self, ctx: &mut Ctx<'_>) {
        if !self.believes(ctx) {
            ctx.stats.skipped_writes += 1;
            return self.on_step(ctx, Step::Release, false);
        }
        self.check_quorum(ctx, "before write");
        let faults = &ctx.sc.client_faults;
        let local = self.clock.local(ctx.now);
        let valid_until = self
            .held
            .as_ref()
            .map_or(local, |h| ctx.time.local(h.lease.valid_until()));
        if !ctx.calm && self.rng.chance(faults.check_pause_chance) {
            let left = u64::try_from(valid_until - local).unwrap_or(0);
            let len = if faults.check_pause_past_validity {
                self.rng.range(left, left + duration_ns(faults.pause_max))
            } else {
                self.rng.range(0, left.saturating_sub(1))
            };
            let until = self.clock.after(ctx.now, len);
            self.paused_until = until;
            ctx.stats.pauses += 1;
            let c = self.id;
            ctx.line(|| {
                format!(
                    "c{c} pauses after its validity check until {}",
                    fmt_time(until)
                )
            });
            self.step_at(ctx, until, Step::DoWrite, true);
        } else {
            self.do_write(ctx);
        }
    }

    pub(super) fn do_write(&mut self, ctx: &mut Ctx<'_>) {
        let now = ctx.now;
        let (c, mask) = (self.id, self.access(true));
        let Some(h) = self.held.as_ref() else {
            return self.think(ctx);
        };
        let (lock, seen, token) = (h.lock, h.seen, h.fence);
        match ctx.checker.write((lock, c), mask, token, &seen, now) {
            Ok(()) => {
                ctx.stats.writes += 1;
                ctx.line(|| format!("c{c} L{lock} writes"));
            }
            Err(why) => return self.fenced_off(ctx, "write", &why),
        }
        if self.rng.chance(ctx.sc.linger) {
            let at = self.real_of(ctx, h.lease.valid_until());
            self.step_at(ctx, at, Step::Release, false);
        } else {
            self.on_step(ctx, Step::Release, false);
        }
    }

    /// The fenced resource rejected the holder's `what` (a read or write):
    /// the lock is stale; the client skips the rest and releases.
    fn fenced_off(&mut self, ctx: &mut Ctx<'_>, what: &'static str, why: &str) {
        ctx.stats.fenced_off += 1;
        let c = self.id;
        ctx.line(|| format!("c{c} {what} fenced off: {why}"));
        self.on_step(ctx, Step::Release, false);
    }

    pub(super) fn release(&mut self, ctx: &mut Ctx<'_>) {
        if ctx.sc.exit && self.cycle >= ctx.sc.cycles && self.held.is_some() {
            // The program keeps its last guard until it returns from main.
            self.parked = true;
            let c = self.id;
            ctx.line(|| format!("c{c} keeps its last lock until its process exits"));
            ctx.notes.push(crate::sim::ctx::Note::Parked(c));
            return;
        }
        self.start_release(ctx);
    }

    /// Its process exits: it drops its guard (the release is queued on the
    /// workers, nobody waits for it) and is done. Its releases' answers
    /// are still taken, and failed ones tried again, until the exit drain
    /// ends (the engine's exit deadline from now: [`Kept::idle`] decides,
    /// as for the node workers of `Shared::drop`). Returns the real time
    /// its workers die: that deadline.
    ///
    /// [`Kept::idle`]: redlock_core::engine::Kept::idle
    pub(crate) fn exit(&mut self, ctx: &mut Ctx<'_>) -> u64 {
        self.parked = false;
        self.done = true;
        let deadline = self.settings.exit_deadline(self.now_at(ctx));
        self.closing = Some(deadline);
        self.start_release(ctx);
        // Nobody waits for the release: the process is gone.
        self.release = None;
        self.sent.clear();
        let at = self.real_of(ctx, deadline);
        // The drain's end, whatever is kept by then.
        self.step_at(ctx, at, Step::KeptDue(self.kept_seq), false);
        self.schedule_kept(ctx);
        self.maybe_drained(ctx);
        at
    }
}
