//! Links between clients and nodes: FIFO per direction (one ordered
//! connection, as the backends keep), or with no order at all (several
//! connections), heavy-tailed delays, loss, and partitions.

use super::clock::duration_ns;
use super::rng::SimRng;
use super::scenario::NetFaults;

/// One direction of one client–node connection.
#[derive(Debug, Clone)]
pub(crate) struct Link {
    /// Arrival time of the last message sent on it (FIFO).
    last: u64,
    /// Active partitions cutting this direction.
    pub(crate) cut: u16,
    rng: SimRng,
}

/// What happened to a message handed to a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fate {
    /// It arrives at this real time.
    Arrives(u64),
    /// It is lost (partition or loss).
    Lost,
}

impl Link {
    pub(crate) fn new(rng: SimRng) -> Self {
        Link {
            last: 0,
            cut: 0,
            rng,
        }
    }

    /// Sends a message at `now`: `loss` is the chance to lose it; with
    /// `calm`, no loss and no tail (liveness mode after the faults stop).
    /// `ordered`: it arrives no earlier than the message sent before it.
    pub(crate) fn send(
        &mut self,
        now: u64,
        net: &Delays,
        loss: f64,
        calm: bool,
        ordered: bool,
    ) -> Fate {
        if self.cut > 0 {
            return Fate::Lost;
        }
        if !calm && self.rng.chance(loss) {
            return Fate::Lost;
        }
        let mut delay = self.rng.range(net.min, net.max);
        if !calm && self.rng.chance(net.tail_chance) {
            delay = delay.max(self.rng.pareto(net.tail_scale, net.tail_max));
        }
        let arrival = if ordered {
            (now + delay).max(self.last)
        } else {
            now + delay
        };
        self.last = self.last.max(arrival);
        Fate::Arrives(arrival)
    }
}

/// A scenario's delays ([`NetFaults`]) in nanoseconds, converted once.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Delays {
    min: u64,
    max: u64,
    tail_chance: f64,
    tail_scale: u64,
    tail_max: u64,
}

impl Delays {
    pub(crate) fn of(net: &NetFaults) -> Self {
        Delays {
            min: duration_ns(net.delay_min),
            max: duration_ns(net.delay_max),
            tail_chance: net.tail_chance,
            tail_scale: duration_ns(net.tail_scale),
            tail_max: duration_ns(net.tail_max),
        }
    }
}

/// Every link of a run: one per process and node, each direction; the
/// callers of a process share its links (one ordered connection per node,
/// as a manager keeps).
#[derive(Debug)]
pub(crate) struct Net {
    nodes: usize,
    /// Callers per process.
    callers: usize,
    req: Vec<Link>,
    rep: Vec<Link>,
    /// The scenario's delays.
    delays: Delays,
    /// With [`Scenario::exit`](super::Scenario::exit): each process's
    /// worker per node.
    pub(crate) workers: Vec<Worker>,
    /// Each election observer's links to the nodes (request, reply), never
    /// cut by partitions.
    watch: Vec<(Link, Link)>,
}

/// A request waiting in a worker's queue.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pending {
    pub(crate) client: u8,
    pub(crate) tx: u32,
    pub(crate) lock: u32,
    pub(crate) op: super::event::Op,
    /// The request as the engine sent it and its round's deadline on the
    /// client's clock, for [`Message::stale`](redlock_core::engine::Message::stale)
    /// (`None` for a kept release tried again, which is never stale).
    pub(crate) job: Option<(redlock_core::engine::Message, std::time::Instant)>,
}

/// A process's worker for one node: one request out at a time, the rest
/// queued in order.
#[derive(Debug, Clone, Default)]
pub(crate) struct Worker {
    /// The request out (its client and transmit), until answered or timed
    /// out.
    pub(crate) busy: Option<(u8, u32)>,
    pub(crate) queue: std::collections::VecDeque<Pending>,
    /// The process exited: nothing leaves after this real time.
    pub(crate) dies_at: Option<u64>,
}

impl Net {
    /// The links of `processes` × `nodes`, each with its own stream of the
    /// run's `seed`, for processes of `callers` callers each, and of
    /// `observers` × `nodes`.
    pub(crate) fn new(
        seed: u64,
        (processes, observers): (usize, usize),
        nodes: usize,
        callers: usize,
        net: &NetFaults,
    ) -> Self {
        let link = |dir: u64| {
            (0..processes * nodes)
                .map(|i| Link::new(SimRng::stream(seed, 1_000_000 + 2 * i as u64 + dir)))
                .collect::<Vec<_>>()
        };
        Net {
            nodes,
            callers: callers.max(1),
            req: link(0),
            rep: link(1),
            delays: Delays::of(net),
            workers: vec![Worker::default(); processes * nodes],
            watch: (0..observers * nodes)
                .map(|i| {
                    let stream = |dir: u64| SimRng::stream(seed, 3_000_000 + 2 * i as u64 + dir);
                    (Link::new(stream(0)), Link::new(stream(1)))
                })
                .collect(),
        }
    }

    fn index(&self, client: u8, node: u8) -> usize {
        client as usize / self.callers * self.nodes + node as usize
    }

    /// The request direction from `client` (a caller: its process's link)
    /// to `node`.
    pub(crate) fn request(&mut self, client: u8, node: u8) -> &mut Link {
        let i = self.index(client, node);
        &mut self.req[i]
    }

    /// The reply direction from `node` to `client`.
    pub(crate) fn reply(&mut self, client: u8, node: u8) -> &mut Link {
        let i = self.index(client, node);
        &mut self.rep[i]
    }

    /// Sends a request from `client` to `node` at `now` (see
    /// [`Link::send`]).
    pub(crate) fn send_request(
        &mut self,
        (client, node): (u8, u8),
        now: u64,
        loss: f64,
        calm: bool,
        ordered: bool,
    ) -> Fate {
        let i = self.index(client, node);
        self.req[i].send(now, &self.delays, loss, calm, ordered)
    }

    /// Sends a reply from `node` to `client` at `now` (see [`Link::send`]).
    pub(crate) fn send_reply(
        &mut self,
        (client, node): (u8, u8),
        now: u64,
        loss: f64,
        calm: bool,
        ordered: bool,
    ) -> Fate {
        let i = self.index(client, node);
        self.rep[i].send(now, &self.delays, loss, calm, ordered)
    }

    /// Sends an inspect request of observer `watcher` to `node` at `now`,
    /// or (`reply`) the node's answer back (see [`Link::send`]; ordered).
    pub(crate) fn send_watch(
        &mut self,
        (watcher, node): (u8, u8),
        reply: bool,
        now: u64,
        (loss, calm): (f64, bool),
    ) -> Fate {
        let i = watcher as usize * self.nodes + node as usize;
        let Some((req, rep)) = self.watch.get_mut(i) else {
            return Fate::Lost;
        };
        let link = if reply { rep } else { req };
        link.send(now, &self.delays, loss, calm, true)
    }

    /// The worker of `client`'s process for `node`.
    pub(crate) fn worker(&mut self, client: u8, node: u8) -> &mut Worker {
        let i = self.index(client, node);
        &mut self.workers[i]
    }

    /// Heals every partition.
    pub(crate) fn heal(&mut self) {
        for link in self.req.iter_mut().chain(self.rep.iter_mut()) {
            link.cut = 0;
        }
    }
}
