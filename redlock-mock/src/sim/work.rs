//! A holder's critical section against the protected resource: read, a
//! gap that faults stretch, an extend when the validity runs low, the
//! validity check, a pause that may follow it, the write; with a fencing
//! resource each access carries the lock's token and may be turned away.

use super::checker::duration_ns;
use super::client::Kind;
use super::world::{Op, Step, World};

impl World<'_, '_> {
    pub(super) fn read(&mut self, c: u8) {
        if !self.valid(c) {
            self.stats.skipped_writes += 1;
            self.on_step(c, Step::Release, true);
            return;
        }
        self.check_quorum(c, "on read");
        let sc = self.sc;
        let cl = &mut self.clients[c as usize];
        if let Err(why) = self.checker.read(cl.lock, cl.mask, cl.fence, &mut cl.seen) {
            self.fenced_off(c, "read", why);
            return;
        }
        let cl = &mut self.clients[c as usize];
        let work = cl
            .rng
            .range(duration_ns(sc.work_min), duration_ns(sc.work_max));
        let gap1 = cl.rng.range(0, work);
        cl.gap2 = work - gap1;
        let at = self.after(c, gap1);
        self.step_at(at, c, Step::MidWork, false);
    }

    pub(super) fn mid_work(&mut self, c: u8) {
        let local = self.local(c);
        let half = self.ttl_ns / 2;
        let cl = &self.clients[c as usize];
        let low = cl.valid_until - local < half;
        if self.sc.extend && !cl.extended && self.valid(c) && low {
            let (lock, mask, need) = (cl.lock, cl.mask, cl.quorum);
            self.clients[c as usize].extended = true;
            let vanished = self.presence(c, lock, mask) < need;
            self.start_round(c, Kind::Extend, Op::Extend);
            if let Some(r) = self.clients[c as usize].round.as_mut() {
                r.vanished = vanished;
            }
            return;
        }
        let at = self.after(c, cl.gap2);
        self.step_at(at, c, Step::Write, false);
    }

    /// The validity check before the write; a pause may follow it.
    pub(super) fn write(&mut self, c: u8) {
        if !self.valid(c) {
            self.stats.skipped_writes += 1;
            self.on_step(c, Step::Release, false);
            return;
        }
        self.check_quorum(c, "before write");
        let faults = &self.sc.client_faults;
        let local = self.local(c);
        let cl = &mut self.clients[c as usize];
        if !self.calm && cl.rng.chance(faults.check_pause_chance) {
            let left = u64::try_from(cl.valid_until - local).unwrap_or(0);
            let len = if faults.check_pause_past_validity {
                cl.rng.range(left, left + duration_ns(faults.pause_max))
            } else {
                cl.rng.range(0, left.saturating_sub(1))
            };
            let until = cl.clock.after(self.now, len);
            cl.paused_until = until;
            self.stats.pauses += 1;
            self.trace.line(self.now, || {
                format!(
                    "c{c} pauses after its validity check until {}",
                    super::trace::fmt_time(until)
                )
            });
            self.step_at(until, c, Step::DoWrite, true);
        } else {
            self.do_write(c);
        }
    }

    pub(super) fn do_write(&mut self, c: u8) {
        let now = self.now;
        let cl = &self.clients[c as usize];
        let (lock, mask, seen, token) = (cl.lock, cl.mask, cl.seen, cl.fence);
        match self.checker.write((lock, c), mask, token, &seen, now) {
            Ok(()) => {
                self.stats.writes += 1;
                self.trace.line(now, || format!("c{c} L{lock} writes"));
            }
            Err(why) => return self.fenced_off(c, "write", why),
        }
        let cl = &mut self.clients[c as usize];
        if cl.rng.chance(self.sc.linger) {
            let at = cl.clock.real_at(cl.valid_until, now);
            self.step_at(at, c, Step::Release, false);
        } else {
            self.on_step(c, Step::Release, false);
        }
    }
}
