//! Faults as verbs: the schedule drawn from the seed, and what each fault
//! does to nodes, links and clients when its time comes.

use std::time::Duration;

use super::World;
use crate::sim::clock::{duration_ns as ns, signed};
use crate::sim::event::{Dir, Ev, ALL};
use crate::sim::rng::SimRng;
use crate::sim::scenario::{Cut, Fault, Persistence};
use crate::sim::trace::fmt_time;

/// Faults are drawn per 5 ms slot of the horizon (at most one of each kind
/// per node or client and slot), with plain arithmetic only.
const FAULT_SLOT: u64 = 5_000_000;

/// A clock rate error within `±max` ppm, at an extreme with `extreme`.
pub(crate) fn rate(rng: &mut SimRng, max: i64, extreme: f64) -> i64 {
    let max = max.abs();
    if rng.chance(extreme) {
        if rng.chance(0.5) {
            max
        } else {
            -max
        }
    } else {
        rng.range(0, 2 * max.unsigned_abs()) as i64 - max
    }
}

impl World<'_, '_> {
    /// Draws the whole fault schedule (and the clients' start) from the
    /// seed: per-node and per-client streams, and one for partitions.
    pub(crate) fn schedule(&mut self, seed: u64) {
        let sc = self.sc;
        let slots = ns(sc.horizon) / FAULT_SLOT;
        let nf = &sc.node_faults;
        for node in 0..sc.nodes {
            let mut rng = SimRng::stream(seed, 2_000 + node as u64);
            let n = node as u8;
            for s in 0..slots {
                let t = s * FAULT_SLOT + rng.below(FAULT_SLOT);
                let per_slot = FAULT_SLOT as f64 / 1e9;
                if rng.chance(nf.crash_rate * per_slot) {
                    self.push(t, Ev::Crash(n));
                }
                if rng.chance(nf.failover_rate * per_slot) {
                    self.push(t, Ev::Failover(n));
                }
                if rng.chance(nf.flush_rate * per_slot) {
                    self.push(t, Ev::Flush(n));
                }
                if rng.chance(sc.clocks.jump_rate * per_slot) {
                    self.push(t, Ev::Jump(n));
                }
            }
            if self.nodes[node].persistence == Persistence::EverySecond {
                self.push(rng.below(1_000_000_000), Ev::Fsync(n));
            }
        }
        for i in 0..sc.script.len() {
            let at = ns(sc.script[i].0);
            self.push(at, Ev::Scripted(i as u16));
        }
        let mut rng = SimRng::stream(seed, 0);
        for s in 0..slots {
            let t = s * FAULT_SLOT + rng.below(FAULT_SLOT);
            if !rng.chance(sc.net.partition_rate * FAULT_SLOT as f64 / 1e9) {
                continue;
            }
            let node = rng.below(sc.nodes as u64) as u8;
            let client = if rng.chance(sc.net.isolate) {
                ALL
            } else {
                rng.below(sc.clients as u64) as u8
            };
            let dir = if !rng.chance(sc.net.one_way) {
                Dir::Both
            } else if rng.chance(0.5) {
                Dir::Request
            } else {
                Dir::Reply
            };
            let until = t + rng.range(ns(sc.net.partition_min), ns(sc.net.partition_max));
            self.push(
                t,
                Ev::Cut {
                    client,
                    node,
                    dir,
                    on: true,
                },
            );
            self.push(
                until,
                Ev::Cut {
                    client,
                    node,
                    dir,
                    on: false,
                },
            );
        }
        for c in 0..sc.clients {
            let mut rng = SimRng::stream(seed, 3_000 + c as u64);
            let immune = sc.liveness.is_some() && c == 0;
            for s in 0..slots {
                let t = s * FAULT_SLOT + rng.below(FAULT_SLOT);
                if rng.chance(sc.client_faults.crash_rate * FAULT_SLOT as f64 / 1e9) && !immune {
                    self.push(t, Ev::ClientCrash(c as u8));
                }
            }
            let per = sc.callers_per_process;
            for caller in c * per..(c + 1) * per {
                self.with_client(caller as u8, |client, ctx| client.start(ctx));
            }
        }
        if let Some(stop) = sc.liveness {
            let stop = ns(stop);
            let deadline = stop + ns(sc.liveness_bound());
            self.live_until = Some(deadline);
            self.checker.progress_after = Some(stop);
            self.push(stop, Ev::FaultsEnd);
            self.push(deadline, Ev::LivenessDeadline);
        }
    }

    pub(crate) fn cut(&mut self, client: u8, node: u8, dir: Dir, on: bool) {
        if on && self.calm {
            return;
        }
        let per = self.sc.callers_per_process;
        for c in 0..self.sc.clients as u8 {
            if client != ALL && client != c {
                continue;
            }
            // The process's links (shared by its callers).
            let caller = (c as usize * per) as u8;
            let request = self.net.request(caller, node);
            if dir != Dir::Reply {
                request.cut = if on {
                    request.cut + 1
                } else {
                    request.cut.saturating_sub(1)
                };
            }
            let reply = self.net.reply(caller, node);
            if dir != Dir::Request {
                reply.cut = if on {
                    reply.cut + 1
                } else {
                    reply.cut.saturating_sub(1)
                };
            }
        }
        self.trace.line(self.now, || {
            let who = if client == ALL {
                "all".to_string()
            } else {
                format!("c{client}")
            };
            format!(
                "partition {who}<->n{node} {dir:?} {}",
                if on { "on" } else { "off" }
            )
        });
    }

    pub(crate) fn node_fault(&mut self, ev: Ev) {
        let now = self.now;
        let sc = self.sc;
        match ev {
            Ev::Restart(n, epoch) => {
                let node = &mut self.nodes[n as usize];
                if node.epoch == epoch && !node.up {
                    node.restart(now);
                    self.trace.line(now, || format!("n{n} up"));
                }
            }
            Ev::Fsync(n) => {
                let node = &mut self.nodes[n as usize];
                if node.up {
                    node.fsync();
                }
                self.push(now + 1_000_000_000, Ev::Fsync(n));
            }
            _ if self.calm => {}
            Ev::Crash(n) => self.crash_node(n, None),
            Ev::Failover(n) => self.fail_over(n),
            Ev::Jump(n) => {
                let clocks = &sc.clocks;
                let node = &mut self.nodes[n as usize];
                let by = if node.rng.chance(clocks.forward_chance) {
                    if clocks.forward_once && node.forward_jumped {
                        return;
                    }
                    node.forward_jumped = true;
                    signed(Duration::from_nanos(
                        node.rng
                            .range(ns(clocks.forward_min), ns(clocks.forward_max)),
                    ))
                } else {
                    -signed(Duration::from_nanos(
                        node.rng.range(0, ns(clocks.backward_max)),
                    ))
                };
                self.step_clock(n, by);
            }
            Ev::Flush(n) => self.flush(n),
            _ => {}
        }
    }

    /// Crashes node `n`; it restarts after `delay`, or a delay drawn from
    /// the scenario (never below the restart floor without fsync=always).
    fn crash_node(&mut self, n: u8, delay: Option<u64>) {
        let (now, nf) = (self.now, &self.sc.node_faults);
        let node = &mut self.nodes[n as usize];
        if !node.up {
            return;
        }
        node.crash();
        let delay = delay.unwrap_or_else(|| {
            let drawn = node.rng.range(ns(nf.restart_min), ns(nf.restart_max));
            if node.persistence == Persistence::Always {
                drawn
            } else {
                drawn.max(nf.restart_floor.map_or(0, ns))
            }
        });
        let (epoch, mode) = (node.epoch, node.persistence);
        self.stats.node_crashes += 1;
        self.push(now + delay, Ev::Restart(n, epoch));
        self.trace.line(now, || {
            format!("n{n} crash ({mode:?}), restart in {}", fmt_time(delay))
        });
    }

    /// Node `n` fails over to its replica, unreachable for 1–5 ms.
    fn fail_over(&mut self, n: u8) {
        let now = self.now;
        let node = &mut self.nodes[n as usize];
        if !node.up || node.replica.is_none() {
            return;
        }
        node.failover(now);
        let delay = node.rng.range(1_000_000, 5_000_000);
        let epoch = node.epoch;
        self.stats.failovers += 1;
        self.push(now + delay, Ev::Restart(n, epoch));
        self.trace
            .line(now, || format!("n{n} fails over to its replica"));
    }

    /// Steps node `n`'s clock by `by` nanoseconds (forward when positive).
    fn step_clock(&mut self, n: u8, by: i64) {
        let now = self.now;
        self.nodes[n as usize].clock.jump(now, by);
        self.stats.clock_jumps += 1;
        self.trace.line(now, || format!("n{n} clock steps {by}ns"));
    }

    /// Evicts every lock key and reader set on node `n` (fencing counters
    /// and waiting lines stay).
    fn flush(&mut self, n: u8) {
        let now = self.now;
        let node = &mut self.nodes[n as usize];
        if node.up {
            node.flush(now);
            self.stats.flushes += 1;
            self.trace
                .line(self.now, || format!("n{n} evicts every lock key"));
        }
    }

    /// Applies fault `i` of the scenario's script.
    pub(crate) fn scripted(&mut self, i: usize) {
        let Some(&(_, fault)) = self.sc.script.get(i) else {
            return;
        };
        let now = self.now;
        match fault {
            Fault::Crash {
                node,
                restart_after,
            } => self.crash_node(node as u8, Some(ns(restart_after))),
            Fault::Failover { node } => self.fail_over(node as u8),
            Fault::Partition {
                client,
                node,
                cut,
                length,
            } => {
                let client = client.map_or(ALL, |c| c as u8);
                let dir = match cut {
                    Cut::Both => Dir::Both,
                    Cut::Requests => Dir::Request,
                    Cut::Replies => Dir::Reply,
                };
                let node = node as u8;
                self.cut(client, node, dir, true);
                let on = false;
                self.push(
                    now + ns(length),
                    Ev::Cut {
                        client,
                        node,
                        dir,
                        on,
                    },
                );
            }
            Fault::ClockStep { node, forward, by } => {
                let by = if forward { signed(by) } else { -signed(by) };
                self.step_clock(node as u8, by);
            }
            Fault::Flush { node } => self.flush(node as u8),
            Fault::ClientCrash { client } => self.crash_client(client as u8),
            Fault::Pause { client, length } => {
                // A pause of a process's first caller pauses them all.
                let caller = (client * self.sc.callers_per_process) as u8;
                self.with_client(caller, |cl, ctx| cl.pause_for(ctx, ns(length)));
            }
        }
    }

    /// Process `p` crashes: every caller of it, and its lines.
    pub(crate) fn crash_client(&mut self, p: u8) {
        let per = self.sc.callers_per_process;
        for caller in p as usize * per..(p as usize + 1) * per {
            self.with_client(caller as u8, |cl, ctx| cl.crash(ctx));
        }
        if let Some(process) = self.processes.get_mut(p as usize) {
            process.crash();
        }
    }
}
