//! The simulation's vocabulary: the requests and answers on the wire, the
//! points where a client continues, the events of the queue, and the queue
//! itself, ordered by (time, sequence number).

use std::fmt;

/// A request to a node: what a machine's [`Message`] becomes on the wire.
///
/// [`Message`]: redlock_core::engine::Message
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// Set the lock's keys if free, for `ttl_ns`, bumping the fencing
    /// counters when the node keeps them; a `queued` one gives way to, or
    /// waits in, the keys' waiting lines (the queued acquire script).
    Acquire {
        ttl_ns: u64,
        fence: bool,
        queued: Option<redlock_core::backend::Queued>,
    },
    /// Reset the keys' expiry to `ttl_ns` where they hold the token.
    Extend { ttl_ns: u64 },
    /// Delete the keys that hold the token; the lock's own release (not a
    /// failed round's) carries its claim's `Queued`, and takes its manager
    /// out of the keys' lines.
    Release(Option<redlock_core::backend::Queued>),
    /// Raise the fencing counters to at least this, if the keys still hold
    /// the lock's token.
    RaiseFence(u64),
}

impl Op {
    /// A number for the trace hash.
    pub(crate) fn code(self) -> u64 {
        match self {
            // Whether it is queued changes what the node does, not the
            // request's code (the trace hash of runs without lines).
            Op::Acquire { ttl_ns, fence, .. } => (ttl_ns << 3) | (u64::from(fence) << 2),
            Op::Extend { ttl_ns } => (ttl_ns << 3) | 1,
            Op::Release(_) => 2,
            Op::RaiseFence(t) => 3 | (t << 3),
        }
    }
}

/// A node's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// Done; the fencing counter for an acquire on a node that keeps them
    /// (else 0).
    Granted(u64),
    Refused,
    /// Connection refused or reset.
    Failed,
}

/// A node's failure as the machines see it: the connection was refused or
/// reset (the node is down, or restarted since the request was sent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NodeDown;

impl fmt::Display for NodeDown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("connection refused or reset")
    }
}

impl std::error::Error for NodeDown {}

/// A node's answer to an election observer's inspect request
/// ([`Command::Inspect`](redlock_core::model::Command::Inspect)), packed:
/// the lock whose token the key holds, its time left, and the fencing
/// counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct View {
    /// The lock number (`u32::MAX`: free, or a value no lock has).
    pub(crate) lock: u32,
    /// `PTTL` in milliseconds (`u32::MAX`: no expiry).
    pub(crate) ttl_ms: u32,
    /// The fencing counter (0: none; counters start at 1).
    pub(crate) fence: u64,
}

/// Which of a client's machines a message or timer belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    /// The acquisition under way (`engine::Acquire`).
    Acquire,
    /// An extend round of the held lock (`engine::Single`), by the critical
    /// section or by the keeper.
    Extend,
    /// The release round of the held lock (`engine::Single`).
    Release,
}

/// A point in a client's program where it continues (and may pause).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    Begin,
    /// Send what a machine asked to send, after a pause (then let the
    /// machine's result, if any, be taken).
    Send(Slot),
    /// The acquisition's pause is over (`Timer::At`); carries the wake-up's
    /// number, so that a stale one is told apart.
    Wake(u32),
    /// The acquisition's pause is cut short, as by a release notification;
    /// carries the number of the wake-up it comes before.
    Released(u32),
    /// The keep-alive schedule is due; carries its number.
    KeepDue(u32),
    Read,
    MidWork,
    Write,
    DoWrite,
    Release,
    /// A caller waiting in its process's line looks at it again; carries
    /// the look's number, so that a stale one is told apart.
    Look(u32),
    /// The kept failed releases are due again; carries the wake-up's
    /// number, so that a stale one is told apart.
    KeptDue(u32),
    /// The wait for an answer of a lone caller's own round is over;
    /// carries the wait's number, so that a stale one is told apart.
    OwnRead(u32),
    /// A reader waiting for its process's earlier writers looks again;
    /// carries the look's number, so that a stale one is told apart.
    ReadWait(u32),
}

impl Step {
    /// A number for the trace hash.
    fn code(self) -> u64 {
        match self {
            Step::Begin => 0,
            Step::Send(slot) => 1 | ((slot as u64) << 8),
            Step::Wake(n) => 2 | (u64::from(n) << 8),
            Step::KeepDue(n) => 3 | (u64::from(n) << 8),
            Step::Read => 4,
            Step::MidWork => 5,
            Step::Write => 6,
            Step::DoWrite => 7,
            Step::Release => 8,
            Step::Look(n) => 9 | (u64::from(n) << 8),
            Step::Released(n) => 10 | (u64::from(n) << 8),
            Step::KeptDue(n) => 11 | (u64::from(n) << 8),
            Step::OwnRead(n) => 12 | (u64::from(n) << 8),
            Step::ReadWait(n) => 13 | (u64::from(n) << 8),
        }
    }
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

/// Something that happens at an instant of the run.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Ev {
    /// A request reaches its node. `tx` names the client's transmit it
    /// belongs to; `lock` the lock attempt (token and keys).
    Deliver {
        client: u8,
        node: u8,
        tx: u32,
        lock: u32,
        op: Op,
        sent: u64,
    },
    Reply {
        client: u8,
        node: u8,
        tx: u32,
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
    /// The per-node timeout of transmit `tx`, counted from its sending.
    Timer {
        client: u8,
        tx: u32,
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
    /// With [`Scenario::exit`](super::Scenario::exit): the node timeout of
    /// the message `tx` of `client` that its process's worker for `node`
    /// sent (the worker moves on if it is still waiting for it).
    WorkerFree {
        client: u8,
        node: u8,
        tx: u32,
    },
    /// The last instant of a lock's validity (a checkpoint for the checker).
    ValidityEnd {
        client: u8,
        lock: u32,
    },
    /// Fault number `i` of the scenario's script.
    Scripted(u16),
    /// Election observer `watcher` starts a reading.
    Watch {
        watcher: u8,
    },
    /// A reading's inspect request reaches its node.
    Inspect {
        watcher: u8,
        node: u8,
        round: u32,
        sent: u64,
    },
    /// A node's answer to a reading reaches its observer (`None`: the
    /// connection was refused or reset).
    Viewed {
        watcher: u8,
        node: u8,
        round: u32,
        view: Option<View>,
    },
    /// A reading's deadline: nodes that have not answered count as failed.
    WatchEnd {
        watcher: u8,
        round: u32,
    },
    FaultsEnd,
    LivenessDeadline,
}

impl Ev {
    /// The words this event contributes to the trace hash.
    #[inline]
    pub(crate) fn words(&self) -> [u64; 3] {
        let pack = |a: u8, b: u8, c: u64| (u64::from(a) << 56) | (u64::from(b) << 48) | c;
        match *self {
            Ev::Deliver {
                client,
                node,
                tx,
                lock,
                op,
                sent,
            } => [
                pack(1, client, u64::from(node)),
                (u64::from(tx) << 32) | u64::from(lock),
                sent ^ op.code(),
            ],
            Ev::Reply {
                client,
                node,
                tx,
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
                    u64::from(tx) | (u64::from(resumed) << 40),
                    a,
                ]
            }
            Ev::Step {
                client,
                step,
                resumed,
                life,
            } => [
                pack(3, client, step.code() & 0xffff_ffff_ffff),
                u64::from(resumed),
                u64::from(life),
            ],
            Ev::Timer { client, tx } => [pack(4, client, 0), u64::from(tx), 0],
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
            Ev::WorkerFree { client, node, tx } => {
                [pack(18, client, u64::from(node)), u64::from(tx), 0]
            }
            Ev::Watch { watcher } => [pack(19, watcher, 0), 0, 0],
            Ev::Inspect {
                watcher,
                node,
                round,
                sent,
            } => [pack(20, watcher, u64::from(node)), u64::from(round), sent],
            Ev::Viewed {
                watcher,
                node,
                round,
                view,
            } => {
                let v = view.map_or(u64::MAX, |v| {
                    (u64::from(v.lock) << 32 | u64::from(v.ttl_ms)) ^ v.fence
                });
                [pack(21, watcher, u64::from(node)), u64::from(round), v]
            }
            Ev::WatchEnd { watcher, round } => [pack(22, watcher, 0), u64::from(round), 0],
            Ev::FaultsEnd => [pack(13, 0, 0), 0, 0],
            Ev::LivenessDeadline => [pack(14, 0, 0), 0, 0],
        }
    }
}

/// The event queue: earliest time first, ties in the order pushed. Each
/// event has one 128-bit key (time, sequence number, slot), compared in one
/// step; the events wait in slots, so that the keys move, not the events.
///
/// The keys are kept sorted, latest first: the next event's key is the
/// last, taken in one step. A push finds its key's place by a binary search
/// and moves the keys of the events due before it. A run's queue holds tens
/// of events (at most a few hundred), and a new one mostly falls among the
/// next few, so that this costs fewer instructions than a binary heap's
/// sifts down at each pop.
pub(crate) struct Queue {
    seq: u64,
    /// Every waiting event's key, in descending order.
    keys: Vec<u128>,
    slots: Vec<Ev>,
    free: Vec<usize>,
}

/// The bits of a key below the time: the sequence number, then the slot
/// in the low [`SLOT_BITS`]. A run pushes fewer than 2^40 events, with
/// fewer than 2^24 waiting at once.
const SLOT_BITS: u32 = 24;

impl Queue {
    pub(crate) fn new() -> Self {
        Queue {
            seq: 0,
            keys: Vec::with_capacity(256),
            slots: Vec::with_capacity(256),
            free: Vec::with_capacity(256),
        }
    }

    /// Schedules `ev` at `at`, never before `now`.
    pub(crate) fn push(&mut self, now: u64, at: u64, ev: Ev) {
        self.seq += 1;
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot] = ev;
                slot
            }
            None => {
                self.slots.push(ev);
                self.slots.len() - 1
            }
        };
        debug_assert!(self.seq < 1 << (64 - SLOT_BITS) && slot < 1 << SLOT_BITS);
        let low = (self.seq << SLOT_BITS) | slot as u64;
        let key = (u128::from(at.max(now)) << 64) | u128::from(low);
        // Its place: after every later key (keys are distinct, by their
        // sequence numbers).
        let place = self.keys.partition_point(|&k| k > key);
        self.keys.insert(place, key);
    }

    /// The next event and its time.
    pub(crate) fn pop(&mut self) -> Option<(u64, Ev)> {
        let key = self.keys.pop()?;
        let at = (key >> 64) as u64;
        let slot = (key as u64 & ((1 << SLOT_BITS) - 1)) as usize;
        self.free.push(slot);
        self.slots.get(slot).map(|ev| (at, *ev))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::SimRng;

    #[test]
    fn queue_pops_by_time_then_push_order() {
        let mut rng = SimRng::stream(1, 2);
        let (mut queue, mut expected) = (Queue::new(), Vec::new());
        let mut now = 0;
        for i in 0..5_000u32 {
            // Mostly near events, some far ones, many ties.
            let at = now + rng.below(if i % 7 == 0 { 1_000 } else { 20 });
            queue.push(now, at, Ev::Timer { client: 0, tx: i });
            expected.push((at, i));
            if i % 3 == 0 {
                let (at, ev) = queue.pop().expect("an event");
                now = at;
                let first = *expected.iter().min().expect("expected");
                assert!(matches!(ev, Ev::Timer { tx, .. } if (at, tx) == first));
                expected.retain(|&e| e != first);
            }
        }
        expected.sort_unstable();
        for want in expected {
            let (at, ev) = queue.pop().expect("an event");
            assert!(matches!(ev, Ev::Timer { tx, .. } if (at, tx) == want));
        }
        assert!(queue.pop().is_none());
    }
}
