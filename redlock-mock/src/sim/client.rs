//! A simulated client: the blocking manager's order of operations, driven
//! by the core's own decision code (`Tally`, `judge`, `RetryDelay::pick`).
//!
//! Acquire: read the start time, send to every node at once, decide at the
//! first decisive vote (or the per-node timeout), judge with the TTL, the
//! elapsed time and the drift. Held: valid until `decided + validity`.
//! Otherwise release on every node and wait (bounded) for the nodes that may
//! hold the key, then sleep `RetryDelay::pick` and retry until the deadline.
//! Extend: the same rule, validity from the extend's own start. Fenced
//! acquires: `fence.rs` (a raise round between the won acquire round and
//! the lock); the critical section: `work.rs`.

use std::time::Duration;

use redlock_core::{judge, quorum, Decision, Tally, Token, Verdict, Vote, TOKEN_LEN};

use super::checker::{duration_ns, Grant, GrantObserver, ViolationKind};
use super::clock::ClientClock;
use super::fence::Raise;
use super::rng::SimRng;
use super::scenario::{MAX_KEYS, MAX_NODES};
use super::world::{Answer, Ev, LockRec, Op, Step, World};

/// What a round is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Acquire,
    /// The release of a failed acquire: waits for the nodes that may hold.
    Abandon,
    Extend,
    Release,
    /// A fenced acquire's second step: raise the counters to the token.
    Raise,
}

#[derive(Debug)]
pub(super) struct Round {
    id: u32,
    kind: Kind,
    pub(super) tally: Tally,
    started: i64,
    /// Abandon: view positions still to answer.
    waiting: u32,
    /// Extend: the keys had vanished from a quorum when it started.
    pub(super) vanished: bool,
    /// Acquire: each granting node and the counter it returned.
    pub(super) fences: Vec<(usize, u64)>,
    /// Raise: what it raises, for which acquire.
    pub(super) raise: Option<Raise>,
}

/// One client process.
#[derive(Debug)]
pub(crate) struct Client {
    pub(crate) rng: SimRng,
    pub(super) clock: ClientClock,
    /// The nodes this client is configured with.
    pub(crate) view: Vec<u8>,
    pos: [u8; MAX_NODES],
    pub(super) quorum: usize,
    pub(crate) crashed: bool,
    pub(crate) done: bool,
    pub(crate) paused_until: u64,
    /// Incarnation: bumped by a restart after a crash.
    pub(crate) life: u16,
    cycle: u32,
    pub(super) mask: u8,
    pub(super) lock: u32,
    deadline: i64,
    started: i64,
    round_seq: u32,
    pub(super) round: Option<Round>,
    holding: bool,
    pub(super) valid_until: i64,
    /// The held lock's fencing token.
    pub(super) fence: Option<u64>,
    /// A won fenced acquire waiting to start its raise round.
    pub(super) raising: Option<Raise>,
    pub(super) seen: [u64; MAX_KEYS],
    pub(super) extended: bool,
    pub(super) gap2: u64,
}

impl Client {
    pub(crate) fn new(rng: SimRng, clock: ClientClock, view: Vec<u8>) -> Self {
        let mut pos = [u8::MAX; MAX_NODES];
        for (i, &n) in view.iter().enumerate() {
            pos[n as usize] = i as u8;
        }
        Client {
            rng,
            clock,
            quorum: quorum(view.len()),
            view,
            pos,
            crashed: false,
            done: false,
            paused_until: 0,
            life: 0,
            cycle: 0,
            mask: 0,
            lock: 0,
            deadline: 0,
            started: 0,
            round_seq: 0,
            round: None,
            holding: false,
            valid_until: 0,
            fence: None,
            raising: None,
            seen: [0; MAX_KEYS],
            extended: false,
            gap2: 0,
        }
    }
}

impl Client {
    /// A crash: the process forgets its round and its lock. Returns the
    /// lock it believed it held, if any.
    pub(crate) fn forget(&mut self) -> Option<u32> {
        self.round = None;
        self.raising = None;
        std::mem::take(&mut self.holding).then_some(self.lock)
    }
}

/// The view positions that granted or had not answered in `tally`: where a
/// failed acquire may have left its key.
pub(super) fn abandon_set(tally: &Tally) -> u32 {
    (0..tally.nodes())
        .filter(|&pos| matches!(tally.vote(pos), None | Some(Vote::Granted)))
        .fold(0u32, |acc, pos| acc | (1 << pos))
}

fn local_ns(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX / 4)
}

impl World<'_, '_> {
    pub(super) fn local(&self, c: u8) -> i64 {
        self.clients[c as usize].clock.local(self.now)
    }

    /// Real time when a local duration `d` from now ends on `c`'s clock.
    pub(super) fn after(&self, c: u8, d: u64) -> u64 {
        self.clients[c as usize].clock.after(self.now, d)
    }

    pub(super) fn valid(&self, c: u8) -> bool {
        let cl = &self.clients[c as usize];
        cl.holding && cl.clock.local(self.now) < cl.valid_until
    }

    /// Maybe pauses `c` here (a GC pause, swapping, SIGSTOP); returns whether
    /// it did. Pauses never reach past the end of the faults in liveness mode.
    fn maybe_pause(&mut self, c: u8) -> bool {
        let faults = &self.sc.client_faults;
        if self.calm || !self.clients[c as usize].rng.chance(faults.pause_chance) {
            return false;
        }
        let max = duration_ns(faults.pause_max);
        let len = self.clients[c as usize]
            .rng
            .pareto((max / 100).max(1), max.max(1));
        let mut until = self.now + len;
        if let Some(stop) = self.checker.progress_after {
            until = until.min(stop.max(self.now));
        }
        self.clients[c as usize].paused_until = until;
        self.stats.pauses += 1;
        self.trace.line(self.now, || {
            format!("c{c} pauses until {}", super::trace::fmt_time(until))
        });
        until > self.now
    }

    pub(super) fn check_quorum(&mut self, c: u8, what: &'static str) {
        let cl = &self.clients[c as usize];
        let (lock, mask, need) = (cl.lock, cl.mask, cl.quorum);
        let have = self.presence(c, lock, mask);
        if have < need {
            self.checker.violation(ViolationKind::QuorumLost, self.now, || {
                format!("c{c} L{lock} believes it holds ({what}) but only {have} of its nodes have its keys, quorum {need}")
            });
        }
    }

    /// Starts a round of `kind` on every node of `c`'s view. Acquire and
    /// raise rounds count from the acquire's start reading, the others from
    /// now.
    pub(super) fn start_round(&mut self, c: u8, kind: Kind, op: Op) {
        let started = if matches!(kind, Kind::Acquire | Kind::Raise) {
            self.clients[c as usize].started
        } else {
            self.local(c)
        };
        let cl = &mut self.clients[c as usize];
        cl.round_seq += 1;
        let (id, lock, len) = (cl.round_seq, cl.lock, cl.view.len());
        cl.round = Some(Round {
            id,
            kind,
            tally: Tally::new(len),
            started,
            waiting: 0,
            vanished: false,
            fences: Vec::new(),
            raise: None,
        });
        self.stats.rounds += 1;
        for i in 0..len {
            let node = self.clients[c as usize].view[i];
            self.send(c, node, id, lock, op);
        }
        let at = self.after(c, duration_ns(self.sc.node_timeout));
        self.push(
            at,
            Ev::Timer {
                client: c,
                round: id,
            },
        );
    }

    fn finish_client(&mut self, c: u8) {
        self.clients[c as usize].done = true;
        self.retire();
        self.trace.line(self.now, || format!("c{c} done"));
    }

    fn think(&mut self, c: u8) {
        let d = {
            let cl = &mut self.clients[c as usize];
            cl.rng.range(0, duration_ns(self.sc.think_max))
        };
        let at = self.after(c, d);
        self.step_at(at, c, Step::Begin, false);
    }

    pub(crate) fn on_step(&mut self, c: u8, step: Step, resumed: bool) {
        let pausable = matches!(
            step,
            Step::Send | Step::Raise | Step::Read | Step::MidWork | Step::Release
        );
        if pausable && !resumed && self.maybe_pause(c) {
            let at = self.clients[c as usize].paused_until;
            self.step_at(at, c, step, true);
            return;
        }
        match step {
            Step::Begin => self.begin(c),
            Step::Send => self.start_round(c, Kind::Acquire, Op::Acquire),
            Step::Raise => self.start_raise(c),
            Step::AfterSleep => {
                if self.local(c) >= self.clients[c as usize].deadline {
                    self.give_up(c);
                } else {
                    self.attempt(c);
                }
            }
            Step::Read => self.read(c),
            Step::MidWork => self.mid_work(c),
            Step::Write => self.write(c),
            Step::DoWrite => self.do_write(c),
            Step::Release => {
                let now = self.now;
                let cl = &mut self.clients[c as usize];
                cl.holding = false;
                let lock = cl.lock;
                self.checker.end(lock, now);
                self.trace.line(now, || format!("c{c} releases L{lock}"));
                self.start_round(c, Kind::Release, Op::Release);
            }
        }
    }

    fn begin(&mut self, c: u8) {
        let sc = self.sc;
        let over = match self.live_until {
            Some(until) => self.now >= until,
            None => self.clients[c as usize].cycle >= sc.cycles,
        };
        if over {
            self.finish_client(c);
            return;
        }
        let local = self.local(c);
        let cl = &mut self.clients[c as usize];
        cl.cycle += 1;
        let first = cl.rng.below(sc.keys as u64) as u8;
        let mut mask = 1u8 << first;
        if sc.keys > 1 && cl.rng.chance(sc.multi_key) {
            let other = (first as u64 + 1 + cl.rng.below(sc.keys as u64 - 1)) % sc.keys as u64;
            mask |= 1 << other;
        }
        cl.mask = mask;
        cl.deadline = local + local_ns(sc.acquire_timeout);
        self.attempt(c);
    }

    /// One acquire attempt: a fresh token, the start time read before
    /// sending (a pause may fall in between).
    fn attempt(&mut self, c: u8) {
        let lock = self.locks.len() as u32;
        let local = self.local(c);
        let unique = self.sc.unique_tokens;
        let cl = &mut self.clients[c as usize];
        let mut bytes = [0u8; TOKEN_LEN];
        if unique {
            bytes[..4].copy_from_slice(&lock.to_le_bytes());
            bytes[4] = c;
            for chunk in bytes[5..].chunks_mut(8) {
                let r = cl.rng.next_u64().to_le_bytes();
                chunk.copy_from_slice(&r[..chunk.len()]);
            }
        } else {
            bytes = [cl.cycle as u8; TOKEN_LEN];
        }
        let token = Token::from_bytes(bytes);
        self.locks.push(LockRec {
            token: *token.as_bytes(),
            mask: cl.mask,
        });
        cl.lock = lock;
        cl.started = local;
        let mask = cl.mask;
        self.trace.line(self.now, || {
            format!("c{c} attempts L{lock} on mask {mask:#b}")
        });
        self.step_at(self.now, c, Step::Send, false);
    }

    pub(crate) fn on_reply(&mut self, c: u8, node: u8, round: u32, answer: Answer, resumed: bool) {
        let now = self.now;
        let fencing = self.sc.fencing;
        let cl = &mut self.clients[c as usize];
        let pos = cl.pos[node as usize];
        let Some(r) = cl.round.as_mut().filter(|r| r.id == round) else {
            self.trace.line(now, || {
                format!("c{c} ignores a late reply from n{node} (round {round})")
            });
            return;
        };
        if r.kind == Kind::Abandon {
            r.waiting &= !(1u32 << pos);
            if r.waiting == 0 {
                self.after_abandon(c);
            }
            return;
        }
        if !resumed && self.maybe_pause(c) {
            let at = self.clients[c as usize].paused_until;
            self.push(
                at,
                Ev::Reply {
                    client: c,
                    node,
                    round,
                    answer,
                    resumed: true,
                },
            );
            return;
        }
        let Some(r) = self.clients[c as usize].round.as_mut() else {
            return;
        };
        let vote = match answer {
            Answer::Granted(fence) => {
                if fencing && r.kind == Kind::Acquire {
                    r.fences.push((node as usize, fence));
                }
                Vote::Granted
            }
            Answer::Refused => Vote::Refused,
            Answer::Failed => Vote::Failed,
        };
        if r.tally.record(pos as usize, vote) != Decision::Pending {
            self.decide(c);
        }
    }

    pub(crate) fn on_timer(&mut self, c: u8, round: u32) {
        let cl = &mut self.clients[c as usize];
        let Some(r) = cl.round.as_mut().filter(|r| r.id == round) else {
            return;
        };
        if r.kind == Kind::Abandon {
            self.after_abandon(c);
            return;
        }
        for pos in 0..r.tally.nodes() {
            r.tally.record(pos, Vote::Failed);
        }
        self.decide(c);
    }

    /// A round is decided: the core's `judge` says what it means.
    fn decide(&mut self, c: u8) {
        let now = self.now;
        let local = self.local(c);
        let Some(r) = self.clients[c as usize].round.take() else {
            return;
        };
        let elapsed = Duration::from_nanos(u64::try_from(local - r.started).unwrap_or(0));
        let verdict = judge(&r.tally, self.ttl.as_duration(), elapsed, self.drift)
            .unwrap_or(Verdict::NoQuorum);
        let lock = self.clients[c as usize].lock;
        self.trace.line(now, || {
            format!("c{c} {:?} L{lock}: {verdict:?} after {elapsed:?}", r.kind)
        });
        match (r.kind, verdict) {
            (Kind::Acquire, Verdict::Held { validity }) if self.sc.fencing => {
                self.fence(c, r, local, validity);
            }
            (Kind::Acquire, Verdict::Held { validity }) => {
                self.acquired(c, &r.fences, local, validity, None);
            }
            (Kind::Acquire, _) => self.abandon(c, abandon_set(&r.tally)),
            (Kind::Raise, verdict) => self.raised(c, r, local, verdict),
            (Kind::Extend, verdict) => {
                match verdict {
                    Verdict::Held { validity } => {
                        let cl = &mut self.clients[c as usize];
                        cl.valid_until = local + local_ns(validity);
                        let (mask, until) = (cl.mask, cl.valid_until);
                        let end = cl.clock.real_at(until, now);
                        if r.vanished {
                            self.checker.violation(ViolationKind::ExtendResurrected, now, || {
                                format!("c{c} L{lock} extended although its keys were gone from a quorum")
                            });
                        }
                        self.checker.held(lock, c, mask, now, end);
                        self.check_quorum(c, "after extend");
                        self.watch_validity(c, lock, end);
                        self.stats.extended += 1;
                    }
                    Verdict::Refused => {
                        let cl = &mut self.clients[c as usize];
                        cl.valid_until = cl.valid_until.min(local);
                        self.checker.end(lock, now);
                    }
                    _ => {}
                }
                let at = self.after(c, self.clients[c as usize].gap2);
                self.step_at(at, c, Step::Write, false);
            }
            (Kind::Release | Kind::Abandon, _) => self.think(c),
        }
    }

    /// The lock is acquired (decided at `local` on `c`'s clock, valid for
    /// `validity` from then) with the acquire's per-node counters and its
    /// fencing token.
    pub(super) fn acquired(
        &mut self,
        c: u8,
        fences: &[(usize, u64)],
        local: i64,
        validity: Duration,
        token: Option<u64>,
    ) {
        let now = self.now;
        let cl = &mut self.clients[c as usize];
        cl.holding = true;
        cl.extended = false;
        cl.fence = token;
        cl.valid_until = local + local_ns(validity);
        let (lock, mask) = (cl.lock, cl.mask);
        let end = cl.clock.real_at(cl.valid_until, now);
        self.stats.acquired += 1;
        if self.checker.progress_after.is_some_and(|t| now >= t) {
            self.checker.progressed = true;
        }
        self.checker.held(lock, c, mask, now, end);
        self.check_quorum(c, "on acquire");
        self.watch_validity(c, lock, end);
        let grant = Grant {
            client: c as usize,
            lock,
            at: Duration::from_nanos(now),
            valid_until: Duration::from_nanos(end),
            keys: mask,
            fences,
            token,
        };
        if let Err(problem) = self.checker.tokens.on_grant(&grant) {
            self.checker
                .violation(ViolationKind::FencingToken, now, || problem);
        }
        if let Some(observer) = self.observer.as_deref_mut() {
            if let Err(problem) = observer.on_grant(&grant) {
                self.checker
                    .violation(ViolationKind::Observer, now, || problem);
            }
        }
        self.step_at(now, c, Step::Read, false);
    }

    /// A failed acquire: release on every node, wait for those that granted
    /// or had not answered in the acquire round (`waiting`, from
    /// [`abandon_set`]; bounded by the per-node timeout).
    pub(super) fn abandon(&mut self, c: u8, waiting: u32) {
        self.start_round(c, Kind::Abandon, Op::Release);
        match self.clients[c as usize].round.as_mut() {
            Some(r) if waiting != 0 => r.waiting = waiting,
            _ => self.after_abandon(c),
        }
    }

    /// After a failed attempt: sleep `RetryDelay::pick` (cut at the
    /// deadline) and try again, or give up at the deadline.
    fn after_abandon(&mut self, c: u8) {
        let local = self.local(c);
        let cl = &mut self.clients[c as usize];
        cl.round = None;
        if local >= cl.deadline {
            self.give_up(c);
            return;
        }
        let pause = self.retry.pick(cl.rng.next_u64());
        let left = u64::try_from(cl.deadline - local).unwrap_or(0);
        let at = self.after(c, duration_ns(pause).min(left));
        self.step_at(at, c, Step::AfterSleep, false);
    }

    fn give_up(&mut self, c: u8) {
        self.stats.gave_up += 1;
        self.trace.line(self.now, || format!("c{c} gives up"));
        self.think(c);
    }

    /// Schedules a quorum check at the last instant of the validity that
    /// ends at real time `end`.
    fn watch_validity(&mut self, c: u8, lock: u32, end: u64) {
        if end > self.now + 1 {
            self.push(end - 1, Ev::ValidityEnd { client: c, lock });
        }
    }

    /// The last instant of a validity: if the client still believes it
    /// holds (paused or not), its token must still be on a quorum.
    pub(crate) fn validity_end(&mut self, c: u8, lock: u32) {
        let cl = &self.clients[c as usize];
        if !cl.crashed && cl.lock == lock && self.valid(c) {
            self.check_quorum(c, "at the end of its validity");
        }
    }
}
