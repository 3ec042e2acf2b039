//! The simulation engine: one virtual real-time clock, an event queue
//! ordered by (time, sequence number), nodes, links, clients and faults.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::time::Duration;

use redlock_core::{drift, RetryDelay, Ttl};

use super::checker::{duration_ns, Checker, GrantObserver, ViolationKind};
use super::client::Client;
use super::clock::{ClientClock, NodeClock};
use super::net::{Fate, Link};
use super::node::SimNode;
use super::rng::SimRng;
use super::run::{Outcome, Stats};
use super::scenario::Scenario;
use super::trace::Trace;

/// A request kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Acquire,
    Extend,
    Release,
    /// Raise the fencing counters to at least this, if the keys still hold
    /// the lock's token.
    RaiseFence(u64),
}

impl Op {
    /// A number for the trace hash.
    fn code(self) -> u64 {
        match self {
            Op::Acquire => 0,
            Op::Extend => 1,
            Op::Release => 2,
            Op::RaiseFence(t) => 3 | (t << 2),
        }
    }
}

/// A node's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// Done; the fencing counter for a fenced acquire (else 0).
    Granted(u64),
    Refused,
    /// Connection refused or reset.
    Failed,
}

/// A point in a client's program where it continues (and may pause).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    Begin,
    Send,
    AfterSleep,
    Read,
    MidWork,
    Write,
    DoWrite,
    Release,
    /// A fenced acquire's raise round.
    Raise,
}

/// Which direction(s) of a link a partition cuts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dir {
    Request,
    Reply,
    Both,
}

/// Every client (in a partition).
pub(crate) const ALL: u8 = u8::MAX;

#[derive(Debug, Clone, Copy)]
pub(crate) enum Ev {
    Deliver {
        client: u8,
        node: u8,
        round: u32,
        lock: u32,
        op: Op,
        sent: u64,
    },
    Reply {
        client: u8,
        node: u8,
        round: u32,
        answer: Answer,
        resumed: bool,
    },
    Step {
        client: u8,
        step: Step,
        resumed: bool,
        /// The client incarnation it belongs to (a restart starts anew).
        life: u16,
    },
    Timer {
        client: u8,
        round: u32,
    },
    Crash(u8),
    Restart(u8, u32),
    Failover(u8),
    Jump(u8),
    Flush(u8),
    Fsync(u8),
    Cut {
        client: u8,
        node: u8,
        dir: Dir,
        on: bool,
    },
    ClientCrash(u8),
    ClientRestart(u8),
    /// The last instant of a lock's validity (a checkpoint for the checker).
    ValidityEnd {
        client: u8,
        lock: u32,
    },
    /// Fault number `i` of the scenario's script.
    Scripted(u16),
    FaultsEnd,
    LivenessDeadline,
}

impl Ev {
    /// The words this event contributes to the trace hash.
    fn words(&self) -> [u64; 3] {
        let pack = |a: u8, b: u8, c: u64| (u64::from(a) << 56) | (u64::from(b) << 48) | c;
        match *self {
            Ev::Deliver {
                client,
                node,
                round,
                lock,
                op,
                sent,
            } => [
                pack(1, client, u64::from(node)),
                (u64::from(round) << 32) | u64::from(lock),
                sent ^ op.code(),
            ],
            Ev::Reply {
                client,
                node,
                round,
                answer,
                resumed,
            } => {
                let a = match answer {
                    Answer::Granted(f) => f << 2,
                    Answer::Refused => 1,
                    Answer::Failed => 2,
                };
                [
                    pack(2, client, u64::from(node)),
                    u64::from(round) | (u64::from(resumed) << 40),
                    a,
                ]
            }
            Ev::Step {
                client,
                step,
                resumed,
                life,
            } => [
                pack(3, client, step as u64),
                u64::from(resumed),
                u64::from(life),
            ],
            Ev::Timer { client, round } => [pack(4, client, 0), u64::from(round), 0],
            Ev::Crash(n) => [pack(5, n, 0), 0, 0],
            Ev::Restart(n, e) => [pack(6, n, 0), u64::from(e), 0],
            Ev::Failover(n) => [pack(7, n, 0), 0, 0],
            Ev::Jump(n) => [pack(8, n, 0), 0, 0],
            Ev::Flush(n) => [pack(9, n, 0), 0, 0],
            Ev::Fsync(n) => [pack(10, n, 0), 0, 0],
            Ev::Cut {
                client,
                node,
                dir,
                on,
            } => [pack(11, client, u64::from(node)), dir as u64, u64::from(on)],
            Ev::ClientCrash(c) => [pack(12, c, 0), 0, 0],
            Ev::ClientRestart(c) => [pack(15, c, 0), 0, 0],
            Ev::ValidityEnd { client, lock } => [pack(16, client, 0), u64::from(lock), 0],
            Ev::Scripted(i) => [pack(17, 0, u64::from(i)), 0, 0],
            Ev::FaultsEnd => [pack(13, 0, 0), 0, 0],
            Ev::LivenessDeadline => [pack(14, 0, 0), 0, 0],
        }
    }
}

struct Queued {
    at: u64,
    seq: u64,
    ev: Ev,
}

impl PartialEq for Queued {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Queued {}
impl PartialOrd for Queued {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Queued {
    /// Reversed, so that the max-heap pops the earliest (time, seq) first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// One lock attempt: its token and resources, shared by its messages.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LockRec {
    pub(crate) token: [u8; redlock_core::TOKEN_LEN],
    pub(crate) mask: u8,
}

/// The whole simulated system.
pub(crate) struct World<'s, 'o> {
    pub(crate) sc: &'s Scenario,
    pub(crate) now: u64,
    seq: u64,
    queue: BinaryHeap<Queued>,
    pub(crate) nodes: Vec<SimNode>,
    pub(crate) clients: Vec<Client>,
    pub(crate) req: Vec<Link>,
    pub(crate) rep: Vec<Link>,
    pub(crate) locks: Vec<LockRec>,
    pub(crate) checker: Checker,
    pub(crate) trace: Trace,
    pub(crate) observer: Option<&'o mut dyn GrantObserver>,
    pub(crate) ttl: Ttl,
    pub(crate) ttl_ns: i64,
    pub(crate) drift: Duration,
    pub(crate) retry: RetryDelay,
    /// Liveness mode: the faults have stopped.
    pub(crate) calm: bool,
    /// Liveness mode: clients start no cycle after this.
    pub(crate) live_until: Option<u64>,
    pub(crate) stats: Stats,
    pub(crate) live_clients: usize,
}

pub(crate) fn ns(d: Duration) -> u64 {
    duration_ns(d)
}

pub(crate) fn signed(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX / 4)
}

impl<'s, 'o> World<'s, 'o> {
    pub(crate) fn new(
        sc: &'s Scenario,
        seed: u64,
        observer: Option<&'o mut dyn GrantObserver>,
        text: bool,
    ) -> Result<Self, String> {
        sc.validate()?;
        let ttl = Ttl::new(sc.ttl).map_err(|e| e.to_string())?;
        let retry = RetryDelay::new(sc.retry_min, sc.retry_max).map_err(|e| e.to_string())?;
        let n = sc.nodes;
        let replicas = sc.node_faults.failover_rate > 0.0
            || sc
                .script
                .iter()
                .any(|(_, f)| matches!(f, super::scenario::Fault::Failover { .. }));
        let nodes = (0..n)
            .map(|i| {
                let mut rng = SimRng::stream(seed, 1 + i as u64);
                let ppm =
                    super::faults::rate(&mut rng, sc.clocks.node_ppm, sc.clocks.extreme_chance);
                let offset = rng.range(0, 7_200_000_000_000) as i64 - 3_600_000_000_000;
                let modes = &sc.node_faults.persistence;
                let mode = modes[rng.below(modes.len() as u64) as usize];
                SimNode::new(NodeClock::new(offset, ppm), mode, replicas, rng)
            })
            .collect();
        let clients = (0..sc.clients)
            .map(|c| {
                let mut rng = SimRng::stream(seed, 1_000 + c as u64);
                let ppm =
                    super::faults::rate(&mut rng, sc.clocks.client_ppm, sc.clocks.extreme_chance);
                let offset = rng.range(0, 1_000_000_000_000) as i64;
                let view: Vec<u8> = match sc.views.get(c) {
                    Some(view) => view.iter().map(|&v| v as u8).collect(),
                    None => (0..n as u8).collect(),
                };
                Client::new(rng, ClientClock::new(offset, ppm), view)
            })
            .collect();
        let link = |dir: u64| {
            (0..sc.clients * n)
                .map(|i| Link::new(SimRng::stream(seed, 1_000_000 + 2 * i as u64 + dir)))
                .collect::<Vec<_>>()
        };
        Ok(World {
            sc,
            now: 0,
            seq: 0,
            queue: BinaryHeap::with_capacity(256),
            nodes,
            clients,
            req: link(0),
            rep: link(1),
            locks: Vec::with_capacity(64),
            checker: Checker::new(sc.fenced_resource),
            trace: Trace::new(text),
            observer,
            ttl,
            ttl_ns: signed(ttl.as_duration()),
            drift: drift(ttl.as_duration(), sc.drift_factor),
            retry,
            calm: false,
            live_until: None,
            stats: Stats::default(),
            live_clients: sc.clients,
        })
    }

    pub(crate) fn push(&mut self, at: u64, ev: Ev) {
        self.seq += 1;
        self.queue.push(Queued {
            at: at.max(self.now),
            seq: self.seq,
            ev,
        });
    }

    /// Schedules `step` of client `c` (of its current incarnation).
    pub(crate) fn step_at(&mut self, at: u64, c: u8, step: Step, resumed: bool) {
        let life = self.clients[c as usize].life;
        self.push(
            at,
            Ev::Step {
                client: c,
                step,
                resumed,
                life,
            },
        );
    }

    /// A client has finished or crashed.
    pub(crate) fn retire(&mut self) {
        self.live_clients = self.live_clients.saturating_sub(1);
    }

    pub(crate) fn run(&mut self) {
        let hard_stop = ns(self.sc.horizon) + 100 * ns(self.sc.acquire_timeout + self.sc.ttl);
        while self.live_clients > 0 {
            let Some(Queued { at, ev, .. }) = self.queue.pop() else {
                break;
            };
            if at > hard_stop {
                break;
            }
            self.now = at;
            self.stats.events += 1;
            let w = ev.words();
            self.trace.mix(&[at, w[0], w[1], w[2]]);
            self.dispatch(ev);
        }
        self.stats.end = Duration::from_nanos(self.now);
    }

    fn dispatch(&mut self, ev: Ev) {
        match ev {
            Ev::Deliver {
                client,
                node,
                round,
                lock,
                op,
                sent,
            } => {
                self.deliver(client, node, round, lock, op, sent);
            }
            Ev::Reply {
                client,
                node,
                round,
                answer,
                resumed,
            } => {
                if self.gate(client, ev) {
                    self.on_reply(client, node, round, answer, resumed);
                }
            }
            Ev::Step {
                client,
                step,
                resumed,
                life,
            } => {
                if self.clients[client as usize].life == life && self.gate(client, ev) {
                    self.on_step(client, step, resumed);
                }
            }
            Ev::Timer { client, round } => {
                if self.gate(client, ev) {
                    self.on_timer(client, round);
                }
            }
            Ev::ClientCrash(c) => {
                if !self.calm {
                    self.crash_client(c);
                }
            }
            Ev::ClientRestart(c) => self.restart_client(c),
            Ev::ValidityEnd { client, lock } => self.validity_end(client, lock),
            Ev::FaultsEnd => {
                self.calm = true;
                for link in self.req.iter_mut().chain(self.rep.iter_mut()) {
                    link.cut = 0;
                }
                self.trace.line(self.now, || "faults end".into());
            }
            Ev::LivenessDeadline => {
                if !self.checker.progressed {
                    let after = self.checker.progress_after.unwrap_or(0);
                    self.checker
                        .violation(ViolationKind::NoProgress, self.now, || {
                            format!(
                                "no acquire since the faults stopped at {}",
                                super::trace::fmt_time(after)
                            )
                        });
                }
            }
            Ev::Cut {
                client,
                node,
                dir,
                on,
            } => self.cut(client, node, dir, on),
            Ev::Scripted(i) => self.scripted(usize::from(i)),
            ev => self.node_fault(ev),
        }
    }

    /// Whether a client event runs now: not for a crashed or finished
    /// client; deferred to the end of a pause.
    fn gate(&mut self, client: u8, ev: Ev) -> bool {
        let c = &self.clients[client as usize];
        if c.crashed || c.done {
            return false;
        }
        if c.paused_until > self.now {
            let at = c.paused_until;
            self.push(at, ev);
            return false;
        }
        true
    }

    /// A request reaches its node.
    fn deliver(&mut self, client: u8, n: u8, round: u32, lock: u32, op: Op, sent: u64) {
        let now = self.now;
        let fencing = self.sc.fencing;
        let rec = self.locks[lock as usize];
        let ttl_ns = self.ttl_ns;
        let node = &mut self.nodes[n as usize];
        let answer = if !node.up || sent < node.reset_at {
            // Connection refused or reset: an error, or silence.
            if node.rng.chance(0.5) {
                Answer::Failed
            } else {
                self.stats.lost_messages += 1;
                self.trace.line(now, || {
                    format!("n{n} is down: drops {op:?} L{lock} from c{client}")
                });
                return;
            }
        } else {
            let local = node.clock.local(now);
            node.store.purge(local);
            let answer = match op {
                Op::Acquire => {
                    match node
                        .store
                        .acquire(rec.mask, &rec.token, lock, local + ttl_ns, fencing)
                    {
                        Some(fence) => Answer::Granted(fence),
                        None => Answer::Refused,
                    }
                }
                Op::Extend => match node.store.extend(rec.mask, &rec.token, local + ttl_ns) {
                    true => Answer::Granted(0),
                    false => Answer::Refused,
                },
                Op::Release => match node.store.release(rec.mask, &rec.token) {
                    true => Answer::Granted(0),
                    false => Answer::Refused,
                },
                Op::RaiseFence(at_least) => {
                    match node.store.raise_fence(rec.mask, &rec.token, at_least) {
                        true => Answer::Granted(0),
                        false => Answer::Refused,
                    }
                }
            };
            if node.replica.is_some() {
                let nf = &self.sc.node_faults;
                let lag = node
                    .rng
                    .range(ns(nf.replica_lag_min), ns(nf.replica_lag_max));
                node.replicate(now, lag);
            }
            answer
        };
        self.trace.line(now, || {
            format!("n{n} {op:?} L{lock} from c{client} -> {answer:?}")
        });
        let i = client as usize * self.sc.nodes + n as usize;
        match self.rep[i].send(now, &self.sc.net, self.sc.net.reply_loss, self.calm) {
            Fate::Arrives(at) => self.push(
                at,
                Ev::Reply {
                    client,
                    node: n,
                    round,
                    answer,
                    resumed: false,
                },
            ),
            Fate::Lost => self.stats.lost_messages += 1,
        }
    }

    /// Sends a request from a client to a node.
    pub(crate) fn send(&mut self, client: u8, node: u8, round: u32, lock: u32, op: Op) {
        let now = self.now;
        let i = client as usize * self.sc.nodes + node as usize;
        match self.req[i].send(now, &self.sc.net, self.sc.net.loss, self.calm) {
            Fate::Arrives(at) => self.push(
                at,
                Ev::Deliver {
                    client,
                    node,
                    round,
                    lock,
                    op,
                    sent: now,
                },
            ),
            Fate::Lost => {
                self.stats.lost_messages += 1;
                self.trace.line(now, || {
                    format!("c{client} {op:?} L{lock} to n{node} is lost")
                });
            }
        }
    }

    /// How many nodes of `client`'s view count lock `lock` as present now.
    pub(crate) fn presence(&self, client: u8, lock: u32, mask: u8) -> usize {
        let now = self.now;
        self.clients[client as usize]
            .view
            .iter()
            .filter(|&&n| self.nodes[n as usize].counts_for(mask, lock, now))
            .count()
    }

    pub(crate) fn finish(self) -> (Outcome, Vec<String>) {
        let outcome = Outcome {
            seed: 0,
            trace_hash: self.trace.hash(),
            violation_count: self.checker.total,
            violations: self.checker.violations,
            stats: self.stats,
        };
        (outcome, self.trace.into_lines())
    }
}
