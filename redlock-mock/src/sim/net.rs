//! Links between clients and nodes: FIFO per direction (as a TCP
//! connection), heavy-tailed delays, loss, and partitions.

use super::checker::duration_ns;
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
    pub(crate) fn send(&mut self, now: u64, net: &NetFaults, loss: f64, calm: bool) -> Fate {
        if self.cut > 0 {
            return Fate::Lost;
        }
        if !calm && self.rng.chance(loss) {
            return Fate::Lost;
        }
        let mut delay = self
            .rng
            .range(duration_ns(net.delay_min), duration_ns(net.delay_max));
        if !calm && self.rng.chance(net.tail_chance) {
            delay = delay.max(
                self.rng
                    .pareto(duration_ns(net.tail_scale), duration_ns(net.tail_max)),
            );
        }
        let arrival = (now + delay).max(self.last);
        self.last = arrival;
        Fate::Arrives(arrival)
    }
}
