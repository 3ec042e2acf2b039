//! What the world lends a client while it handles one event: the time, the
//! network to send on, the queue to schedule on, the nodes to look at (for
//! the checker only), the lock records, the checker, the trace and the
//! counters. The client hands back what concerns other clients as
//! [`Note`]s.

use super::checker::Checker;
use super::clock::{duration_ns, Timebase};
use super::event::{Ev, NodeDown, Op, Queue};
use super::locks::Locks;
use super::net::{Fate, Net, Pending};
use super::node::SimNode;
use super::outcome::Stats;
use super::process::Process;
use super::scenario::Scenario;
use super::trace::Trace;

/// A successful acquire, for the checks that look across clients.
#[derive(Debug, Clone)]
pub(crate) struct Granted {
    pub(crate) client: u8,
    pub(crate) lock: u32,
    pub(crate) keys: u8,
    /// When its validity ends (real time).
    pub(crate) valid_until: u64,
    /// The acquire round's granting nodes and their counters.
    pub(crate) fences: Vec<(usize, u64)>,
    pub(crate) token: Option<u64>,
}

/// A hand-off: the acquisition a releasing caller started for the next
/// caller of its line, and its first round, to go out right behind the
/// release (the rest of the engine's batch).
#[derive(Debug)]
pub(crate) struct HandOff {
    pub(crate) machine: redlock_core::engine::Acquire<NodeDown>,
    /// What of the batch the new owner sends, in order.
    pub(crate) first: Vec<redlock_core::engine::Transmit>,
    /// The lock number of the claim it was started with.
    pub(crate) lock: u32,
    /// The new owner's ticket.
    pub(crate) ticket: u64,
}

/// What a client's event means for the rest of the world.
#[derive(Debug)]
pub(crate) enum Note {
    Granted(Granted),
    /// The client finished its cycles, or crashed for good.
    Retired(u8),
    /// With [`Scenario::exit`](super::Scenario::exit): the client did its
    /// last write and keeps its lock until its process exits.
    Parked(u8),
    /// A caller of the same process waiting in a line should look at it
    /// (it may have been dropped as expired).
    Wake(u8),
    /// A caller of the same process owns its line now and acquires through
    /// the nodes itself.
    Turn(u8),
    /// A caller of the same process owns its line now, with an acquisition
    /// started for it: it sends that round at once, in the same batch as
    /// the release before it.
    HandOff(u8, Box<HandOff>),
}

/// The world, as lent to a client for one event.
pub(crate) struct Ctx<'w> {
    pub(crate) now: u64,
    pub(crate) sc: &'w Scenario,
    /// Liveness mode: the faults have stopped.
    pub(crate) calm: bool,
    /// Liveness mode: clients start no cycle after this.
    pub(crate) live_until: Option<u64>,
    pub(crate) time: Timebase,
    pub(crate) queue: &'w mut Queue,
    pub(crate) net: &'w mut Net,
    pub(crate) nodes: &'w [SimNode],
    pub(crate) locks: &'w mut Locks,
    pub(crate) checker: &'w mut Checker,
    pub(crate) trace: &'w mut Trace,
    pub(crate) stats: &'w mut Stats,
    pub(crate) notes: &'w mut Vec<Note>,
    /// The client's process (its callers' shared lines).
    pub(crate) process: &'w mut Process,
}

impl Ctx<'_> {
    /// Schedules `ev` at `at` (never before now).
    pub(crate) fn push(&mut self, at: u64, ev: Ev) {
        self.queue.push(self.now, at, ev);
    }

    /// Adds a trace line (built only when tracing).
    #[inline]
    pub(crate) fn line(&mut self, text: impl FnOnce() -> String) {
        self.trace.line(self.now, text);
    }

    /// Sends request `op` of transmit `tx` about `lock` from `client` to
    /// `node`, on their link.
    /// With [`Scenario::exit`](super::Scenario::exit) it goes through the
    /// process's worker for the node: out at once if the worker is free,
    /// else queued behind what is.
    pub(crate) fn send(
        &mut self,
        (client, node, tx, lock): (u8, u8, u32, u32),
        op: Op,
        job: Option<(redlock_core::engine::Message, std::time::Instant)>,
    ) {
        if self.sc.exit {
            let worker = self.net.worker(client, node);
            if worker.busy.is_some() {
                worker.queue.push_back(Pending {
                    client,
                    tx,
                    lock,
                    op,
                    job,
                });
                return;
            }
            worker.busy = Some((client, tx));
            let at = self.now + self.node_timeout();
            self.push(at, Ev::WorkerFree { client, node, tx });
        }
        self.transmit(client, node, tx, lock, op);
    }

    /// Notes that a release of `lock` was not sent to `node` (the node
    /// refused the lock's winning round).
    pub(crate) fn release_skipped(&mut self, lock: u32, node: u8) {
        if let Some(rec) = self.locks.get_mut(lock) {
            rec.release_skipped |= 1 << node;
        }
    }

    /// Puts request `op` on the link from `client`'s process to `node`.
    pub(crate) fn transmit(&mut self, client: u8, node: u8, tx: u32, lock: u32, op: Op) {
        let now = self.now;
        let sc = self.sc;
        match self.net.send_request(
            (client, node),
            now,
            sc.net.loss,
            self.calm,
            !sc.unordered_connections,
        ) {
            Fate::Arrives(at) => self.push(
                at,
                Ev::Deliver {
                    client,
                    node,
                    tx,
                    lock,
                    op,
                    sent: now,
                },
            ),
            Fate::Lost => {
                if matches!(op, Op::Release(_)) {
                    if let Some(rec) = self.locks.get_mut(lock) {
                        rec.release_lost |= 1 << node;
                    }
                }
                self.stats.lost_messages += 1;
                self.line(|| format!("c{client} {op:?} L{lock} to n{node} is lost"));
            }
        }
    }

    /// How many of `view`'s nodes count lock `lock` (keys `mask`) as present
    /// now (its token on its keys).
    pub(crate) fn presence(&self, view: &[u8], lock: u32, mask: u8) -> usize {
        let Some(token) = self.locks.get(lock).map(|rec| rec.token) else {
            return 0;
        };
        view.iter()
            .filter(|&&n| self.nodes[n as usize].counts_for(mask, &token, self.now))
            .count()
    }

    /// The scenario's per-node timeout in nanoseconds.
    pub(crate) fn node_timeout(&self) -> u64 {
        duration_ns(self.sc.node_timeout)
    }
}
