//! The simulated system: one virtual real-time clock, the event queue,
//! nodes, links, clients, faults (`faults.rs`) and the checker. The world
//! carries requests to the nodes (`deliver`: the node model runs them,
//! `SimNode::deliver`) and lends itself to one client per
//! client event ([`Ctx`]); what a client's event means for the others comes
//! back as [`Note`]s.

mod faults;
mod watch;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use redlock_core::{RetryDelay, Ttl};

use super::checker::{Checker, Grant, GrantObserver, Rule};
use super::client::{key_names, Client};
use super::clock::{duration_ns as ns, ClientClock, NodeClock, Timebase};
use super::ctx::{Ctx, Granted, Note};
use super::event::{Answer, Ev, Op, Queue};
use super::locks::{Fate as LockFate, Locks};
use super::net::{Fate, Net};
use super::node::{Names, Rules, SimNode};
use super::outcome::{Outcome, Stats, ViolationKind};
use super::process::Process;
use super::rng::SimRng;
use super::scenario::{Primitive, Scenario};
use super::trace::{fmt_time, Trace};

/// The whole simulated system.
pub(crate) struct World<'s, 'o> {
    sc: &'s Scenario,
    now: u64,
    queue: Queue,
    nodes: Vec<SimNode>,
    /// Every caller of every process (`callers_per_process` in a row each).
    clients: Vec<Client>,
    /// What the callers of each process share.
    processes: Vec<Process>,
    net: Net,
    locks: Locks,
    checker: Checker,
    trace: Trace,
    observer: Option<&'o mut dyn GrantObserver>,
    time: Timebase,
    /// Liveness mode: the faults have stopped.
    calm: bool,
    /// Liveness mode: clients start no cycle after this.
    live_until: Option<u64>,
    stats: Stats,
    live_clients: usize,
    notes: Vec<Note>,
    /// The election observers ([`Scenario::observers`]).
    watchers: Vec<watch::Watcher>,
    /// The leaders they reported, checked at the end.
    reports: Vec<watch::Report>,
    /// With observers: what the checker knows of each lock of the
    /// election.
    leaderships: HashMap<u32, watch::Leadership>,
    /// With observers: the largest term granted so far.
    top_term: u64,
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
        let names = Arc::new(Names::new(&key_names(sc)));
        let rules = Rules {
            fencing: sc.fencing,
            // Out of model (see `Rules`).
            holder_set: match sc.primitive {
                Primitive::Semaphore { holder_sets: true } => every_key(sc.keys),
                _ => 0,
            },
            blind: matches!(
                sc.primitive,
                Primitive::RwLock {
                    blind_readers: true,
                    ..
                }
            ),
        };
        let nodes = (0..n)
            .map(|i| {
                let mut rng = SimRng::stream(seed, 1 + i as u64);
                let ppm = faults::rate(&mut rng, sc.clocks.node_ppm, sc.clocks.extreme_chance);
                let offset = rng.range(0, 7_200_000_000_000) as i64 - 3_600_000_000_000;
                let modes = &sc.node_faults.persistence;
                let mode = modes[rng.below(modes.len() as u64) as usize];
                let clock = NodeClock::new(offset, ppm);
                SimNode::new(clock, mode, replicas, rng, Arc::clone(&names), rules)
            })
            .collect();
        let per = sc.callers_per_process;
        let mut clients = Vec::with_capacity(sc.clients * per);
        let mut processes = Vec::with_capacity(sc.clients);
        for p in 0..sc.clients {
            let mut rng = SimRng::stream(seed, 1_000 + p as u64);
            let ppm = faults::rate(&mut rng, sc.clocks.client_ppm, sc.clocks.extreme_chance);
            let offset = rng.range(0, 1_000_000_000_000) as i64;
            let view: Vec<u8> = match sc.views.get(p) {
                Some(view) => view.iter().map(|&v| v as u8).collect(),
                None => (0..n as u8).collect(),
            };
            // The callers of a process share its clock.
            let clock = ClientClock::new(offset, ppm);
            let first = p * per;
            for c in first..first + per {
                let rng = if c == first {
                    rng.clone()
                } else {
                    SimRng::stream(seed, 10_000 + c as u64)
                };
                clients.push(Client::new(
                    c as u8,
                    rng,
                    clock,
                    view.clone(),
                    sc,
                    (ttl, retry),
                ));
            }
            // As the core's manager: an owner is gone four node timeouts
            // past its deadline; passing yields after the longest pause.
            let lines = (sc.node_timeout.saturating_mul(4), sc.retry_max);
            processes.push(Process::new(p as u64 + 1, first as u8, per, ttl, lines));
        }
        Ok(World {
            sc,
            now: 0,
            queue: Queue::new(),
            nodes,
            clients,
            processes,
            net: Net::new(seed, (sc.clients, sc.observers), n, per, &sc.net),
            locks: Locks::new(),
            checker: Checker::new(sc.fenced_resource, rule(sc)),
            trace: Trace::new(text),
            observer,
            time: Timebase::new(),
            calm: false,
            live_until: None,
            stats: Stats::default(),
            live_clients: sc.clients * per,
            notes: Vec::new(),
            watchers: Self::watchers(sc, seed),
            reports: Vec::new(),
            leaderships: HashMap::new(),
            top_term: 0,
        })
    }

    fn push(&mut self, at: u64, ev: Ev) {
        self.queue.push(self.now, at, ev);
    }

    /// The process of caller `c`, and its callers' range.
    fn process_of(&self, c: u8) -> (usize, std::ops::Range<usize>) {
        let per = self.sc.callers_per_process.max(1);
        let p = c as usize / per;
        (p, p * per..(p + 1) * per)
    }

    /// Lends the world to client `c` for `f`, then handles its notes.
    fn with_client(&mut self, c: u8, f: impl FnOnce(&mut Client, &mut Ctx<'_>)) {
        let (p, callers) = self.process_of(c);
        let Some(process) = self.processes.get_mut(p) else {
            return;
        };
        if self.sc.callers_per_process > 1 {
            // What the line's `valid_until` reads: each caller's lock now.
            for (slot, client) in process.valid.iter_mut().zip(&self.clients[callers]) {
                *slot = client.validity(self.time, self.now);
            }
        }
        let Some(client) = self.clients.get_mut(c as usize) else {
            return;
        };
        let mut ctx = Ctx {
            now: self.now,
            sc: self.sc,
            calm: self.calm,
            live_until: self.live_until,
            time: self.time,
            queue: &mut self.queue,
            net: &mut self.net,
            nodes: &self.nodes,
            locks: &mut self.locks,
            checker: &mut self.checker,
            trace: &mut self.trace,
            stats: &mut self.stats,
            notes: &mut self.notes,
            process,
        };
        f(client, &mut ctx);
        self.handle_notes();
    }

    /// What the last client event means for the others.
    fn handle_notes(&mut self) {
        // Most client events note nothing.
        if self.notes.is_empty() {
            return;
        }
        for note in std::mem::take(&mut self.notes) {
            match note {
                Note::Granted(granted) => self.granted(&granted),
                Note::Retired(c) => {
                    self.live_clients = self.live_clients.saturating_sub(1);
                    if self.sc.exit {
                        self.maybe_exit(c);
                    }
                }
                Note::Parked(c) => self.maybe_exit(c),
                // A sibling in the same process (running, as this one is):
                // it acts at once, as a woken thread of the manager would.
                Note::Wake(other) => {
                    if self.runs(other) {
                        self.with_client(other, |cl, ctx| cl.look(ctx));
                    }
                }
                Note::Turn(other) => {
                    if self.runs(other) {
                        self.with_client(other, |cl, ctx| cl.turn(ctx));
                    }
                }
                Note::HandOff(other, hand) => {
                    if self.runs(other) {
                        self.with_client(other, |cl, ctx| cl.take_hand_off(ctx, *hand));
                    }
                }
            }
        }
    }

    /// The worker of `client`'s process for `node` is done with transmit
    /// `tx` (answered or timed out): the next queued request leaves, unless
    /// the process has exited and its exit deadline passed (then every
    /// queued request is lost).
    fn worker_free(&mut self, client: u8, node: u8, tx: u32) {
        if !self.sc.exit {
            return;
        }
        let now = self.now;
        let worker = self.net.worker(client, node);
        if worker.busy != Some((client, tx)) {
            return;
        }
        worker.busy = None;
        if worker.dies_at.is_some_and(|at| now > at) {
            let lost = worker.queue.len();
            for p in std::mem::take(&mut worker.queue) {
                if matches!(p.op, Op::Release(_)) {
                    if let Some(rec) = self.locks.get_mut(p.lock) {
                        rec.release_died |= 1 << node;
                    }
                }
            }
            if lost > 0 {
                self.stats.lost_messages += lost as u64;
                self.trace.line(now, || {
                    format!("c{client}'s process is gone: {lost} request(s) to n{node} never left")
                });
            }
            return;
        }
        // A request queued past its round's deadline is dropped unsent, as
        // the engine says (`Message::stale`); its round has timed out.
        let next = loop {
            let Some(next) = self.net.worker(client, node).queue.pop_front() else {
                return;
            };
            let Some(cl) = self.clients.get(next.client as usize) else {
                continue;
            };
            let at = cl.clock_at(self.time, now);
            if !next
                .job
                .is_some_and(|(message, after)| message.stale(at, after))
            {
                break next;
            }
            self.stats.stale_dropped += 1;
            let (c, tx) = (next.client, next.tx);
            self.trace.line(now, || {
                format!("c{c}'s worker drops tx {tx} to n{node} unsent: its round is over")
            });
        };
        self.net.worker(client, node).busy = Some((next.client, next.tx));
        self.with_client(next.client, |_, ctx| {
            let at = ctx.now + ctx.node_timeout();
            ctx.push(
                at,
                Ev::WorkerFree {
                    client: next.client,
                    node,
                    tx: next.tx,
                },
            );
            ctx.transmit(next.client, node, next.tx, next.lock, next.op);
        });
    }

    /// With [`Scenario::exit`](super::Scenario::exit): once every caller of
    /// `c`'s process is through (done, or parked on its last lock), the
    /// parked ones drop their guards at once and the process exits; its
    /// workers die at the engine's exit deadline.
    fn maybe_exit(&mut self, c: u8) {
        let (p, callers) = self.process_of(c);
        let through = self.clients[callers.clone()]
            .iter()
            .all(|cl| cl.done || cl.crashed || cl.parked);
        if !through || self.processes.get(p).is_none_or(|pr| pr.exited) {
            return;
        }
        self.processes[p].exited = true;
        let mut dies_at = self.now;
        for caller in callers {
            if self.clients[caller].parked {
                self.with_client(caller as u8, |cl, ctx| {
                    dies_at = dies_at.max(cl.exit(ctx));
                });
            }
        }
        self.trace.line(self.now, || {
            format!(
                "process {p} exits; its workers stop at {}",
                fmt_time(dies_at)
            )
        });
        for node in 0..self.sc.nodes as u8 {
            let worker = self.net.worker(c, node);
            worker.dies_at = Some(dies_at);
            // An idle worker with nothing queued has nothing to lose.
            if worker.busy.is_none() {
                worker.queue.clear();
            }
        }
    }

    /// Whether caller `c` is alive and not finished.
    fn runs(&self, c: u8) -> bool {
        self.clients
            .get(c as usize)
            .is_some_and(|cl| !cl.crashed && !cl.done)
    }

    /// The checks of a grant that look beyond its client: fencing tokens,
    /// the observer, and whether any other holder still believes it holds
    /// one of the resources.
    fn granted(&mut self, g: &Granted) {
        let now = self.now;
        let grant = Grant {
            client: g.client as usize,
            lock: g.lock,
            at: Duration::from_nanos(now),
            valid_until: Duration::from_nanos(g.valid_until),
            keys: g.keys,
            fences: &g.fences,
            token: g.token,
        };
        if let (Some(token), false) = (g.token, self.watchers.is_empty()) {
            self.led(g.lock, token);
        }
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
        self.fairness(g.client);
        // Nodes that keep holder sets grant a key to several holders by
        // design: the checker counts them instead.
        if self.nodes.iter().any(|node| node.rules.holder_set != 0) {
            return;
        }
        // Readers (shared claims) hold together by design.
        let shared = |lock: u32| self.locks.get(lock).is_some_and(|rec| rec.shared);
        for (other, client) in self.clients.iter().enumerate() {
            if other == g.client as usize {
                continue;
            }
            if let Some((lock, mask)) = client.belief(self.time, now) {
                if mask & g.keys != 0 && !(shared(lock) && shared(g.lock)) {
                    let (c, l) = (g.client, g.lock);
                    self.checker
                        .violation(ViolationKind::StaleHolder, now, || {
                            format!("c{c} L{l} is granted keys {:#b} while c{other} L{lock} still believes it holds {mask:#b}", g.keys)
                        });
                }
            }
        }
    }

    /// The fairness check at a grant to `client`'s process: every other
    /// process still trying must have been granted within the bound.
    fn fairness(&mut self, client: u8) {
        let now = self.now;
        let (p, _) = self.process_of(client);
        for (i, other) in self.processes.iter_mut().enumerate() {
            let Some(since) = other.starving_since.filter(|_| i != p && other.wanting > 0) else {
                continue;
            };
            let waited = Duration::from_nanos(now - since);
            self.stats.longest_starved = self.stats.longest_starved.max(waited);
            let Some(bound) = self.sc.fairness.filter(|&b| waited > b && !other.starved) else {
                continue;
            };
            other.starved = true;
            self.checker.violation(ViolationKind::Starved, now, || {
                format!(
                    "process {i} has kept trying without a grant since {} ({waited:?}, bound {bound:?}) while c{client} of process {p} is granted",
                    fmt_time(since)
                )
            });
        }
        if let Some(process) = self.processes.get_mut(p) {
            process.served(now);
        }
    }

    pub(crate) fn run(&mut self) {
        let hard_stop = ns(self.sc.horizon) + 100 * ns(self.sc.acquire_timeout + self.sc.ttl);
        while self.live_clients > 0 {
            let Some((at, ev)) = self.queue.pop() else {
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
        if self.sc.check_leftovers {
            self.drain();
        }
        self.stats.end = Duration::from_nanos(self.now);
    }

    /// Lets every request in flight land (nothing else happens any more),
    /// then requires that no node holds a key of a lock given up.
    fn drain(&mut self) {
        while let Some((at, ev)) = self.queue.pop() {
            match ev {
                Ev::Deliver { .. } => {
                    self.now = self.now.max(at);
                    let w = ev.words();
                    self.trace.mix(&[at, w[0], w[1], w[2]]);
                    self.dispatch(ev);
                }
                // The workers of exiting processes go on until they die.
                Ev::Reply {
                    client, node, tx, ..
                }
                | Ev::WorkerFree { client, node, tx }
                    if self.sc.exit =>
                {
                    self.now = self.now.max(at);
                    self.worker_free(client, node, tx);
                }
                _ => {}
            }
        }
        let now = self.now;
        for (n, node) in self.nodes.iter().enumerate() {
            if !node.up {
                continue;
            }
            // Sorted by key: the same order in every run.
            for (key, token) in node.held_tokens(now) {
                let Some(lock) = self.locks.by_token(&token) else {
                    continue;
                };
                let Some(rec) = self.locks.get(lock) else {
                    continue;
                };
                // A release still queued when its process's exit drain
                // ended is lost by design (`Settings::exit_deadline`).
                if rec.fate == LockFate::GivenUp && rec.release_died & (1 << n) == 0 {
                    let client = rec.client;
                    self.checker
                        .violation(ViolationKind::LeftBehind, now, || {
                            format!("n{n} still holds {key:?} for L{lock} of c{client} (given up) once every message has landed")
                        });
                }
            }
        }
    }

    fn dispatch(&mut self, ev: Ev) {
        match ev {
            Ev::Deliver {
                client,
                node,
                tx,
                lock,
                op,
                sent,
            } => {
                self.deliver(client, node, tx, lock, op, sent);
            }
            Ev::Reply {
                client,
                node,
                tx,
                answer,
                resumed,
            } => {
                if !resumed {
                    self.worker_free(client, node, tx);
                }
                if self.gate(client, ev) {
                    self.with_client(client, |cl, ctx| {
                        cl.on_reply(ctx, node, tx, answer, resumed);
                    });
                }
            }
            Ev::Step {
                client,
                step,
                resumed,
                life,
            } => {
                let alive = self
                    .clients
                    .get(client as usize)
                    .is_some_and(|c| c.life == life);
                if alive && self.gate(client, ev) {
                    self.with_client(client, |cl, ctx| cl.on_step(ctx, step, resumed));
                }
            }
            Ev::Timer { client, tx } => {
                if self.gate(client, ev) {
                    self.with_client(client, |cl, ctx| cl.on_timer(ctx, tx));
                }
            }
            Ev::ClientCrash(p) => {
                if !self.calm {
                    self.crash_client(p);
                }
            }
            Ev::ClientRestart(c) => self.with_client(c, |cl, ctx| cl.restart(ctx)),
            Ev::ValidityEnd { client, lock } => {
                if self
                    .clients
                    .get(client as usize)
                    .is_some_and(|c| !c.crashed)
                {
                    self.with_client(client, |cl, ctx| cl.validity_end(ctx, lock));
                }
            }
            Ev::FaultsEnd => {
                self.calm = true;
                self.net.heal();
                self.trace.line(self.now, || "faults end".into());
            }
            Ev::LivenessDeadline => {
                if !self.checker.progressed {
                    let after = self.checker.progress_after.unwrap_or(0);
                    self.checker
                        .violation(ViolationKind::NoProgress, self.now, || {
                            format!("no acquire since the faults stopped at {}", fmt_time(after))
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
            Ev::WorkerFree { client, node, tx } => self.worker_free(client, node, tx),
            Ev::Watch { watcher } => self.watch_start(watcher),
            Ev::Inspect {
                watcher,
                node,
                round,
                sent,
            } => self.inspect(watcher, node, round, sent),
            Ev::Viewed {
                watcher,
                node,
                round,
                view,
            } => self.viewed(watcher, node, round, view),
            Ev::WatchEnd { watcher, round } => self.watch_end(watcher, round),
            ev => self.node_fault(ev),
        }
    }

    /// Whether a client event runs now: not for a crashed or finished
    /// client; deferred to the end of a pause.
    /// A pause of any caller pauses its whole process.
    fn gate(&mut self, client: u8, ev: Ev) -> bool {
        let Some(c) = self.clients.get(client as usize) else {
            return false;
        };
        // An exiting process's caller is done but still takes its
        // releases' answers until its exit drain is through.
        if c.crashed || (c.done && !c.draining()) {
            return false;
        }
        let (_, callers) = self.process_of(client);
        let paused_until = self.clients[callers]
            .iter()
            .map(|c| c.paused_until)
            .max()
            .unwrap_or(0);
        if paused_until > self.now {
            let at = paused_until;
            self.push(at, ev);
            return false;
        }
        true
    }

    /// A request reaches its node: the node runs it (or is down) and
    /// answers on the reply link.
    fn deliver(&mut self, client: u8, n: u8, tx: u32, lock: u32, op: Op, sent: u64) {
        let now = self.now;
        let sc = self.sc;
        let Some(rec) = self.locks.get(lock).copied() else {
            return;
        };
        self.ordered_behind_release(n, lock, op, rec.handed_from);
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
            // The request runs on the node's model, as the command the
            // Redis backend sends for it (`SimNode::deliver`).
            let lag = match node.replica {
                Some(_) => {
                    let nf = &sc.node_faults;
                    node.rng
                        .range(ns(nf.replica_lag_min), ns(nf.replica_lag_max))
                }
                None => 0,
            };
            node.deliver(now, &rec.token, rec.mask, rec.shared, op, lag)
        };
        self.trace.line(now, || {
            format!("n{n} {op:?} L{lock} from c{client} -> {answer:?}")
        });
        self.left_behind(n, lock, op, answer);
        if let (Op::Acquire { .. }, Answer::Granted(_), false) =
            (op, answer, self.watchers.is_empty())
        {
            self.landed(n, lock);
        }
        match self.net.send_reply(
            (client, n),
            now,
            sc.net.reply_loss,
            self.calm,
            !sc.unordered_connections,
        ) {
            Fate::Arrives(at) => self.push(
                at,
                Ev::Reply {
                    client,
                    node: n,
                    tx,
                    answer,
                    resumed: false,
                },
            ),
            Fate::Lost => self.stats.lost_messages += 1,
        }
    }

    /// Records where a lock's release reached; a hand-off's acquire must
    /// reach each node after the release it was queued behind (unless that
    /// release was lost on the way, or not sent there because the node
    /// refused the lock: a key left there by mistake shows as left-behind).
    fn ordered_behind_release(&mut self, n: u8, lock: u32, op: Op, from: Option<u32>) {
        let bit = 1u32 << n;
        match (op, from) {
            (Op::Release(_), _) => {
                if let Some(rec) = self.locks.get_mut(lock) {
                    rec.release_landed |= bit;
                }
            }
            (Op::Acquire { .. }, Some(prev)) => {
                let Some(before) = self.locks.get(prev) else {
                    return;
                };
                let accounted =
                    before.release_landed | before.release_lost | before.release_skipped;
                if accounted & bit == 0 {
                    let client = before.client;
                    self.checker
                        .violation(ViolationKind::HandOffOvertook, self.now, || {
                            format!("n{n}: the hand-off acquire of L{lock} arrives before the release of L{prev} (c{client}) it was queued behind")
                        });
                }
            }
            _ => {}
        }
    }

    /// Records where a lock's release ran; an acquire of it granted on a
    /// node after its release ran there leaves its key behind.
    fn left_behind(&mut self, n: u8, lock: u32, op: Op, answer: Answer) {
        let now = self.now;
        let Some(rec) = self.locks.get_mut(lock) else {
            return;
        };
        match (op, answer) {
            (Op::Release(_), Answer::Granted(_) | Answer::Refused) => rec.released_on |= 1 << n,
            (Op::Acquire { .. }, Answer::Granted(_)) if rec.released_on & (1 << n) != 0 => {
                let (client, mask) = (rec.client, rec.mask);
                self.checker
                    .violation(ViolationKind::LeftBehind, now, || {
                        format!("n{n} grants L{lock} of c{client} (keys {mask:#b}) after its release ran there: the key stays for a TTL")
                    });
            }
            (Op::Acquire { .. }, Answer::Granted(_)) if rec.fate == LockFate::GivenUp => {
                self.stats.late_grants += 1;
            }
            _ => {}
        }
    }

    pub(crate) fn finish(mut self) -> (Outcome, Vec<String>) {
        self.check_reports();
        let outcome = Outcome {
            seed: 0,
            trace_hash: self.trace.hash(),
            violation_count: self.checker.total,
            violations: self.checker.violations,
            stats: Stats {
                most_holders: self.checker.most_holders,
                ..self.stats
            },
        };
        (outcome, self.trace.into_lines())
    }
}

/// The mask of the first `keys` keys.
fn every_key(keys: usize) -> u8 {
    (0..keys.min(super::scenario::MAX_KEYS)).fold(0, |mask, k| mask | (1 << k))
}

/// What the checker requires of the holders, by what the clients lock.
fn rule(sc: &Scenario) -> Rule {
    let group = every_key(sc.keys);
    match sc.primitive {
        Primitive::Mutex => Rule::Mutex,
        Primitive::Semaphore { .. } => Rule::Semaphore {
            group,
            permits: sc.keys,
        },
        Primitive::RwLock { .. } => Rule::RwLock { group },
    }
}
