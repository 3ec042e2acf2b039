//! What is measured: the modes, the implementations, and one cell (an
//! implementation in a mode) as the implementations see it.

use std::fmt;
use std::time::Duration;

use crate::measure::{FairRecord, ProcsRecord, Recorder, SharedRecord, Usage};
use crate::runner::Setup;

/// The TTL of every lock (the measurements used 10 s).
pub(crate) const TTL: Duration = Duration::from_secs(10);
/// How many clients contend in the hot-key mode.
pub(crate) const HOT_CLIENTS: usize = 8;
/// How many managers share the key in the fair mode.
pub(crate) const FAIR_SIDES: usize = 2;
/// Client threads per manager in the fair mode.
pub(crate) const FAIR_THREADS: usize = 4;
/// How many processes contend for one key in the procs mode.
pub(crate) const PROCS: usize = 8;
/// Managers in the semaphore mode and its mutex twin, as that many
/// processes would have.
pub(crate) const SEM_MANAGERS: usize = 4;
/// Client threads per manager in the semaphore mode and its mutex twin.
pub(crate) const SEM_THREADS: usize = 4;
/// Permits of the semaphore mode's semaphore.
pub(crate) const SEM_PERMITS: u32 = 4;
/// Which master the frozen mode stops (SIGSTOP).
pub(crate) const FROZEN_NODE: usize = 0;

/// A benchmark mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// One thread, one key, 5 masters.
    One,
    /// `k` threads on distinct keys, 5 masters.
    Distinct(usize),
    /// `HOT_CLIENTS` threads on one key, 5 masters.
    Hot,
    /// One thread, one key, 5 masters of which one is frozen.
    Frozen,
    /// One thread, one key, `n` masters.
    Nodes(usize),
    /// Two managers built separately (as two processes would), each with
    /// `FAIR_THREADS` threads, on one key, 5 masters: who gets the lock.
    Fair,
    /// `PROCS` processes, each with a manager of default settings and one
    /// thread, on one key, 5 masters: contention across processes, where no
    /// local line helps.
    Procs,
    /// `SEM_MANAGERS` managers built separately, each with `SEM_THREADS`
    /// threads, on one semaphore of `SEM_PERMITS` permits, 5 masters.
    Semaphore,
    /// The semaphore mode's layout on one mutex (one key): its mutex
    /// figures of the same run.
    Mutex4x4,
}

impl Mode {
    /// Every mode in run order, with their command-line names.
    pub(crate) const ALL: [(Mode, &'static str); 12] = [
        (Mode::One, "1x1"),
        (Mode::Distinct(8), "8x"),
        (Mode::Distinct(32), "32x"),
        (Mode::Hot, "hot"),
        (Mode::Frozen, "frozen"),
        (Mode::Nodes(3), "n3"),
        (Mode::Nodes(7), "n7"),
        (Mode::Nodes(9), "n9"),
        (Mode::Fair, "fair"),
        (Mode::Procs, "procs"),
        (Mode::Semaphore, "semaphore"),
        (Mode::Mutex4x4, "mutex4x4"),
    ];

    /// The name used on the command line and in keys.
    pub(crate) fn cli_name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(mode, _)| *mode == self)
            .map_or("other", |(_, name)| name)
    }

    /// How many masters the mode runs on.
    pub(crate) fn nodes(self) -> usize {
        match self {
            Mode::Nodes(n) => n,
            _ => 5,
        }
    }

    /// How many clients (threads or tasks) run cycles.
    pub(crate) fn clients(self) -> usize {
        match self {
            Mode::One | Mode::Frozen | Mode::Nodes(_) => 1,
            Mode::Distinct(k) => k,
            Mode::Hot => HOT_CLIENTS,
            Mode::Fair => FAIR_SIDES * FAIR_THREADS,
            Mode::Procs => PROCS,
            Mode::Semaphore | Mode::Mutex4x4 => SEM_MANAGERS * SEM_THREADS,
        }
    }

    /// Whether this is the hot-key mode (one manager, its clients on one key).
    pub(crate) fn is_hot(self) -> bool {
        self == Mode::Hot
    }

    /// Whether all clients share one key.
    pub(crate) fn one_key(self) -> bool {
        matches!(
            self,
            Mode::Hot | Mode::Fair | Mode::Procs | Mode::Semaphore | Mode::Mutex4x4
        )
    }

    /// The implementations measured in this mode, in run order.
    pub(crate) fn impls(self) -> Vec<Impl> {
        use Impl::*;
        match self {
            Mode::One => vec![RawSeq, RawFloor, Ours, Rslock, Redlock],
            Mode::Distinct(k) => {
                let mut impls = vec![
                    RawFloor,
                    RawCeiling,
                    RawCeilingOurs,
                    RawParked,
                    RawParkedOurs,
                    RawParkedNodes,
                    RawParkedPipelined,
                    Ours,
                    Rslock,
                    Redlock,
                ];
                if k == 8 {
                    // What reading the counters and recording metrics cost.
                    impls.splice(8..8, [OursStats, OursMetrics]);
                }
                impls
            }
            Mode::Hot => vec![Ours, OursDefaultJitter, Rslock, Redlock],
            Mode::Frozen => vec![Ours, Rslock, Redlock],
            Mode::Nodes(_) => vec![RawFloor, Ours, Rslock],
            Mode::Fair | Mode::Procs | Mode::Semaphore | Mode::Mutex4x4 => vec![Ours],
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mode::One => write!(f, "1×1"),
            Mode::Distinct(k) => write!(f, "{k}× distinct"),
            Mode::Hot => write!(f, "{HOT_CLIENTS}× hot key"),
            Mode::Frozen => write!(f, "1×1, 1 of 5 frozen"),
            Mode::Nodes(n) => write!(f, "1×1, N={n}"),
            Mode::Fair => write!(f, "fair: {FAIR_SIDES} managers × {FAIR_THREADS}, one key"),
            Mode::Procs => write!(f, "{PROCS} processes, one key"),
            Mode::Semaphore => write!(
                f,
                "semaphore: {SEM_MANAGERS} managers × {SEM_THREADS}, {SEM_PERMITS} permits"
            ),
            Mode::Mutex4x4 => write!(f, "mutex: {SEM_MANAGERS} managers × {SEM_THREADS}, one key"),
        }
    }
}

/// An implementation under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Impl {
    /// Our manager on `redlock-redis`, configured for the benchmark.
    Ours,
    /// Our manager with the default retry jitter (hot-key mode only).
    OursDefaultJitter,
    /// Our manager while another thread reads `Redlock::stats` every
    /// second (8x distinct only): what reading the counters costs.
    OursStats,
    /// Our manager with `MetricsEvents` (feature `metrics`) recording into
    /// an in-process registry that another thread scrapes every second
    /// (8x distinct only): what recording the metrics costs.
    OursMetrics,
    /// `rslock` on a tokio multi-thread runtime, its defaults.
    Rslock,
    /// `redlock` (sync), its defaults.
    Redlock,
    /// Raw: persistent connections, one node after the other.
    RawSeq,
    /// Raw: persistent connections, all nodes at once (the floor).
    RawFloor,
    /// Raw: one thread playing all clients in lockstep, one write per node
    /// per phase (the pipelining ceiling).
    RawCeiling,
    /// Raw: a thread per client, parked while one I/O thread sends the
    /// handed commands in one write per node (the bound of a blocking API).
    RawParked,
    /// Raw: the same with an I/O thread per node.
    RawParkedNodes,
    /// Raw: the same with a writer and a reader thread, batches written
    /// while earlier ones are out.
    RawParkedPipelined,
    /// Raw: the ceiling with our manager's commands (`SET … GET`, our
    /// release script).
    RawCeilingOurs,
    /// Raw: the parked shape with our manager's commands: the bound of a
    /// blocking API that keeps our node semantics.
    RawParkedOurs,
}

impl Impl {
    /// Every implementation with its command-line name.
    pub(crate) const ALL: [(Impl, &'static str); 14] = [
        (Impl::Ours, "ours"),
        (Impl::OursDefaultJitter, "ours-default-jitter"),
        (Impl::OursStats, "ours-stats"),
        (Impl::OursMetrics, "ours-metrics"),
        (Impl::Rslock, "rslock"),
        (Impl::Redlock, "redlock"),
        (Impl::RawSeq, "raw-seq"),
        (Impl::RawFloor, "raw-floor"),
        (Impl::RawCeiling, "raw-ceiling"),
        (Impl::RawParked, "raw-parked"),
        (Impl::RawParkedNodes, "raw-parked-nodes"),
        (Impl::RawParkedPipelined, "raw-parked-pipelined"),
        (Impl::RawCeilingOurs, "raw-ceiling-ours"),
        (Impl::RawParkedOurs, "raw-parked-ours"),
    ];

    pub(crate) fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(i, _)| *i == self)
            .map_or("other", |(_, name)| name)
    }
}

/// One implementation in one mode, as the implementation sees it.
#[derive(Debug)]
pub(crate) struct Cell<'a> {
    pub(crate) mode: Mode,
    pub(crate) imp: Impl,
    /// `redis://127.0.0.1:<port>` of every master.
    pub(crate) urls: Vec<String>,
    pub(crate) setup: Setup<'a>,
}

impl Cell<'_> {
    /// The key client `client` locks.
    pub(crate) fn key(&self, client: usize) -> String {
        let prefix = format!("bench:{}:{}", self.mode.cli_name(), self.imp.name());
        if self.mode.one_key() {
            format!("{prefix}:hot")
        } else {
            format!("{prefix}:{client}")
        }
    }

    pub(crate) fn clients(&self) -> usize {
        self.mode.clients()
    }
}

/// What a cell measured.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub(crate) record: Recorder,
    pub(crate) usage: Usage,
    /// Hot-key and fair modes: critical sections entered while another was
    /// running.
    pub(crate) overlaps: Option<u64>,
    /// Fair mode: each manager's acquisitions and the hand-offs between them.
    pub(crate) fair: Option<FairRecord>,
    /// Procs mode: each process's acquisitions and the waits.
    pub(crate) procs: Option<ProcsRecord>,
    /// Semaphore and mutex4x4 modes: each manager's acquisitions, the
    /// waits, and the most holders inside at once.
    pub(crate) shared: Option<SharedRecord>,
    /// Our manager: its node timeouts in the cell (warm-up included), and
    /// how many of them were requests still queued for a node worker when
    /// their round stopped waiting (`NodeStats::queued_past_deadline`).
    pub(crate) node_timeouts: Option<(u64, u64)>,
}
