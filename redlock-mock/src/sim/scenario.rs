//! What a simulation runs: the cluster, the workload and the faults.

use std::time::Duration;

/// The most resources a scenario may use (keys are a bit mask per lock).
pub const MAX_KEYS: usize = 4;
/// The most nodes a scenario may use.
pub const MAX_NODES: usize = 31;
/// The most clients a scenario may use.
pub const MAX_CLIENTS: usize = 63;
/// The most election observers a scenario may have.
pub const MAX_OBSERVERS: usize = 8;

/// How a node keeps its keys across a crash (Redis `appendfsync`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Persistence {
    /// No persistence: a restarted node comes back empty (keys and fencing
    /// counters lost).
    None,
    /// `appendfsync everysec`: a restart comes back with the state of the
    /// last fsync, taken once a second.
    EverySecond,
    /// `appendfsync always`: a restart loses nothing. Keys keep expiring by
    /// the node's clock while it is down, as Redis does.
    Always,
}

/// How a fenced acquire turns the grants' per-node counters into a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FenceScheme {
    /// The library's scheme ([`redlock_core::decide::fence_step`]): the counter
    /// itself on one node; otherwise `t = max + 1`, raised on a quorum within
    /// the validity before the lock counts as acquired.
    Raise,
    /// The naive scheme: the largest counter the granting nodes returned, no
    /// raise (the clients run the core's acquisition without fencing and
    /// take the largest counter the nodes returned). Not monotonic (a
    /// demonstration of why the raise exists).
    MaxOnly,
}

/// Which directions of a link a scripted partition cuts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cut {
    /// Requests and replies.
    Both,
    /// Requests only (the node never hears).
    Requests,
    /// Replies only (the node applies, the client never learns).
    Replies,
}

/// A scripted fault, applied at a fixed simulated time (see
/// [`Scenario::script`]): the verbs of turmoil-style tests, for spelling out
/// one exact story on top of (or instead of) the random faults.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redlock_mock::sim::{run, Fault, Scenario};
/// let ms = Duration::from_millis;
/// // Two of three nodes restart at once, empty, while a lock is held.
/// let story = Scenario::quiet().with(|s| {
///     s.nodes = 3;
///     s.script = vec![
///         (ms(30), Fault::Crash { node: 0, restart_after: ms(1) }),
///         (ms(30), Fault::Crash { node: 1, restart_after: ms(1) }),
///     ];
/// });
/// assert!(run(&story, 0).stats.node_crashes == 2);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    /// The node crashes (losing what its persistence does not keep) and
    /// restarts after `restart_after`.
    Crash {
        /// The node.
        node: usize,
        /// Its restart delay.
        restart_after: Duration,
    },
    /// The node fails over to its asynchronous replica.
    Failover {
        /// The node.
        node: usize,
    },
    /// Cuts the link between a client (`None`: every client) and a node.
    Partition {
        /// The client, or all.
        client: Option<usize>,
        /// The node.
        node: usize,
        /// Which directions.
        cut: Cut,
        /// How long until it heals.
        length: Duration,
    },
    /// Steps the node's clock.
    ClockStep {
        /// The node.
        node: usize,
        /// Forward (keys expire early) or backward.
        forward: bool,
        /// By how much.
        by: Duration,
    },
    /// Evicts (or FLUSHes) every lock key on the node.
    Flush {
        /// The node.
        node: usize,
    },
    /// The client crashes without releasing.
    ClientCrash {
        /// The client.
        client: usize,
    },
    /// The client's process stops for `length` (GC, SIGSTOP) wherever it is.
    Pause {
        /// The client.
        client: usize,
        /// How long.
        length: Duration,
    },
}

/// What the clients lock: the scenario's resources as mutexes, the permits
/// of one semaphore, or one read-write lock, taken by the very acquisition
/// the core makes of them ([`Slots`], [`Acquire::read`]).
///
/// A semaphore's permits are the scenario's [`Scenario::keys`] resources
/// (at most [`MAX_KEYS`]; keys `sem:permit:i`); a read-write lock is the
/// first resource (key `rw`), its readers shared holders of it. With a
/// primitive, each process has one caller
/// ([`Scenario::callers_per_process`] is 1), and the checker checks the
/// primitive's promise instead of mutual exclusion per key: at most
/// `keys` holders of a permit at once ([`ViolationKind::TooManyHolders`]);
/// no writer together with anyone ([`ViolationKind::WriterShared`]).
///
/// [`Slots`]: redlock_core::engine::Slots
/// [`Acquire::read`]: redlock_core::engine::Acquire::read
/// [`ViolationKind::TooManyHolders`]: super::ViolationKind::TooManyHolders
/// [`ViolationKind::WriterShared`]: super::ViolationKind::WriterShared
///
/// # Examples
///
/// ```
/// use redlock_mock::sim::{run, Primitive, Scenario};
/// let semaphore = Scenario::semaphore();
/// assert_eq!(semaphore.primitive, Primitive::Semaphore { holder_sets: false });
/// assert!(run(&semaphore, 0).is_clean());
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Primitive {
    /// Each cycle locks one resource, or two with [`Scenario::multi_key`],
    /// through `Redlock::lock`'s acquisition.
    Mutex,
    /// Each cycle takes a permit of the semaphore: the core's
    /// `Semaphore::acquire` ([`Slots::acquire_one`] over the permits, not
    /// queued).
    ///
    /// [`Slots::acquire_one`]: redlock_core::engine::Slots::acquire_one
    Semaphore {
        /// Out of model: each node keeps the permits as one set of
        /// holders of capacity `keys` and grants any permit key while the
        /// set is not full (the design the semaphore does not use). The
        /// clients are unchanged.
        holder_sets: bool,
    },
    /// Each cycle reads (the core's `RwLock::read`: [`Acquire::read`], a
    /// shared claim whose rounds are all queued and give way to other
    /// managers' waiting marks) or, with chance `write`, writes (the core's
    /// `RwLock::write`: an ordinary lock of the key whose rounds after the
    /// first leave waiting marks).
    ///
    /// [`Acquire::read`]: redlock_core::engine::Acquire::read
    RwLock {
        /// The chance that a cycle writes.
        write: f64,
        /// Out of model: the nodes grant a read even while a writer holds
        /// the key (a read script that forgot to look at the writer). The
        /// clients are unchanged.
        blind_readers: bool,
    },
}

/// Network faults, per message and per link (one link per client and node,
/// each direction FIFO like a TCP connection unless
/// [`Scenario::unordered_connections`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct NetFaults {
    /// Smallest one-way delay.
    pub delay_min: Duration,
    /// Largest ordinary one-way delay (uniform between min and max).
    pub delay_max: Duration,
    /// Chance that a message instead takes a heavy-tailed delay.
    pub tail_chance: f64,
    /// Scale of the heavy tail (Pareto, shape 1): exceeds `k * scale` with
    /// probability `1/k`.
    pub tail_scale: Duration,
    /// Cap of the heavy tail.
    pub tail_max: Duration,
    /// Chance that a request is lost before it reaches the node.
    pub loss: f64,
    /// Chance that a reply is lost after the node applied the command (the
    /// client never learns the result).
    pub reply_loss: f64,
    /// Partitions per second of simulated time, over the whole cluster.
    pub partition_rate: f64,
    /// Shortest partition.
    pub partition_min: Duration,
    /// Longest partition.
    pub partition_max: Duration,
    /// Chance that a partition cuts one direction only.
    pub one_way: f64,
    /// Chance that a partition cuts a node from every client rather than
    /// from one.
    pub isolate: f64,
}

/// Clock faults: rate errors, offsets and steps.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ClockFaults {
    /// Largest rate error of a node's clock, parts per million either way.
    pub node_ppm: i64,
    /// Largest rate error of a client's (monotonic) clock, ppm either way.
    pub client_ppm: i64,
    /// Chance that a clock's rate error is at the extreme (`+max` or
    /// `-max`) rather than uniform in between.
    pub extreme_chance: f64,
    /// Clock steps per node per second.
    pub jump_rate: f64,
    /// Chance that a step goes forward (keys expire early) rather than back.
    pub forward_chance: f64,
    /// Smallest forward step.
    pub forward_min: Duration,
    /// Largest forward step.
    pub forward_max: Duration,
    /// At most one forward step per node and run (so that steps cannot add
    /// up past the drift budget).
    pub forward_once: bool,
    /// Largest backward step (keys live longer: costs liveness only).
    pub backward_max: Duration,
}

/// Node faults: crashes, restarts, failovers and key loss.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct NodeFaults {
    /// Crashes per node per second.
    pub crash_rate: f64,
    /// Each node's persistence is drawn from these (uniformly).
    pub persistence: Vec<Persistence>,
    /// Shortest restart delay.
    pub restart_min: Duration,
    /// Longest restart delay.
    pub restart_max: Duration,
    /// Nodes without [`Persistence::Always`] stay down at least this long
    /// (the specification's delayed restart).
    pub restart_floor: Option<Duration>,
    /// Failovers to the node's asynchronous replica per node per second.
    pub failover_rate: f64,
    /// Smallest replication lag.
    pub replica_lag_min: Duration,
    /// Largest replication lag.
    pub replica_lag_max: Duration,
    /// Evictions (or FLUSH) of every lock key on a node, per node per second.
    pub flush_rate: f64,
}

/// Client faults: crashes and process pauses.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ClientFaults {
    /// Client crashes (without releasing) per client per second.
    pub crash_rate: f64,
    /// A crashed client restarts as a fresh process (new locks, no memory
    /// of the old ones) after up to this long; `None`: it stays down.
    pub restart_max: Option<Duration>,
    /// Chance of a pause at each step: before sending a round, between
    /// replies, mid critical section, before release.
    pub pause_chance: f64,
    /// Longest such pause (heavy-tailed).
    pub pause_max: Duration,
    /// Chance of a pause between the validity check and the write.
    pub check_pause_chance: f64,
    /// Whether that pause may outlast the validity (out of model: the
    /// holder then writes after its lock expired).
    pub check_pause_past_validity: bool,
}

/// One simulation setup. Build one from a named preset
/// ([`Scenario::by_name`], [`Scenario::in_model`], ...) and adjust its
/// fields with [`Scenario::with`] (or by assignment): the struct is
/// `#[non_exhaustive]`, so that new fields do not break callers.
///
/// # Examples
///
/// ```
/// use redlock_mock::sim::{run, Scenario};
/// let scenario = Scenario::in_model().with(|s| s.clients = 2);
/// let outcome = run(&scenario, 7);
/// assert!(outcome.violations.is_empty());
/// assert_eq!(run(&scenario, 7).trace_hash, outcome.trace_hash);
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Scenario {
    /// The name printed in reports.
    pub name: String,
    /// Whether safety violations are expected (the setup breaks an
    /// assumption of the algorithm).
    pub out_of_model: bool,
    /// Number of lock nodes, `1..=31`.
    pub nodes: usize,
    /// Number of client processes; with their callers at most 63 in all.
    pub clients: usize,
    /// Callers per process (1 by default: one caller, no line). Above 1,
    /// the callers of a process share one manager's local lines
    /// ([`redlock_core::engine::Lines`]), its links to the nodes, its
    /// clock, its pauses and its crashes; they queue for the same
    /// resources and hand the lock over as `Redlock::lock` does.
    pub callers_per_process: usize,
    /// Lock cycles per client (acquire, critical section, release).
    pub cycles: u32,
    /// Number of resources, `1..=4`; a cycle locks resource 0 or another.
    pub keys: usize,
    /// Chance that a cycle locks two resources at once (multi-key lock).
    pub multi_key: f64,
    /// The lock TTL.
    pub ttl: Duration,
    /// The drift factor given to the core's `drift`.
    pub drift_factor: f64,
    /// The per-node timeout of a round.
    pub node_timeout: Duration,
    /// Smallest retry pause.
    pub retry_min: Duration,
    /// Largest retry pause.
    pub retry_max: Duration,
    /// How long one acquire keeps retrying.
    pub acquire_timeout: Duration,
    /// Shortest critical section (read, gap, write).
    pub work_min: Duration,
    /// Longest critical section.
    pub work_max: Duration,
    /// Chance that a holder, after its write, keeps the lock until its
    /// validity runs out before releasing (a lease held to the end).
    pub linger: f64,
    /// Largest pause between cycles.
    pub think_max: Duration,
    /// Extend once mid critical section when less than half the TTL is left
    /// (not with [`Scenario::keep_alive`], whose keeper does the extending).
    pub extend: bool,
    /// With [`Scenario::extend`]: each extend asks for a TTL drawn
    /// uniformly from this range (shorter or longer than [`Scenario::ttl`])
    /// rather than the lock's TTL (`None`). A failed extend may still have
    /// set its TTL on the nodes that granted it or did not answer, so a
    /// failed shorter one shortens the lock.
    pub extend_ttl: Option<(Duration, Duration)>,
    /// Holders keep their locks alive: a keeper extends each held lock on
    /// the core's keep-alive schedule ([`redlock_core::engine::Keep`]) until
    /// it is released, an extension fails or [`Scenario::keep_max_hold`] is
    /// reached; then the lock is marked lost, and the holder checks that
    /// before each access. The checker requires a holder to know of a loss
    /// before anyone else is granted its resources
    /// ([`ViolationKind::StaleHolder`](super::ViolationKind::StaleHolder)).
    pub keep_alive: bool,
    /// With [`Scenario::keep_alive`]: the longest total hold time of a kept
    /// lock (the keeper's bound).
    pub keep_max_hold: Duration,
    /// Acquire with fencing counters and compute each lock's fencing token
    /// by [`Scenario::fence_scheme`]; the checker then requires tokens to
    /// rise strictly from holder to holder of each resource
    /// ([`ViolationKind::FencingToken`](super::ViolationKind::FencingToken)),
    /// and each grant's token and per-node counters go to the
    /// [`GrantObserver`](super::GrantObserver).
    pub fencing: bool,
    /// How tokens are computed (with [`Scenario::fencing`]).
    pub fence_scheme: FenceScheme,
    /// The protected resource fences (needs [`Scenario::fencing`]): it
    /// remembers the highest token seen per resource on every read and
    /// write and rejects an access with a lower one (the access then does
    /// not happen; counted in [`Stats::fenced_off`](super::Stats::fenced_off)).
    pub fenced_resource: bool,
    /// Fresh random token per attempt. `false` reuses one token per cycle
    /// number across clients (out of model).
    pub unique_tokens: bool,
    /// Model each client's requests to a node as travelling on several
    /// connections with no order between them (out of model: the backends
    /// keep one ordered connection per node, so that a release runs after
    /// the acquire it undoes). A stale acquire may then run after its own
    /// release and leave its key for a whole TTL.
    pub unordered_connections: bool,
    /// At the end of the run, let every message in flight land (every
    /// release run) and require that no key of a lock its client gave up,
    /// or never got, is left on any node
    /// ([`ViolationKind::LeftBehind`](super::ViolationKind::LeftBehind)).
    /// Meaningful without request loss, request partitions, node crashes
    /// and client crashes, which leave keys to their TTL by design. (Whether
    /// or not this is set, an acquire that runs on a node after its own
    /// release did is a `LeftBehind` violation.)
    pub check_leftovers: bool,
    /// Deliberately wrong: a failed release is dropped after one try
    /// again instead of being kept until its node answers or its keys
    /// expire (the breakage [`Scenario::kept_releases_one_retry`] shows).
    pub kept_one_retry: bool,
    /// Lone callers send their rounds to the nodes themselves and read the
    /// answers on their own thread, as a manager with
    /// [`Builder::own_rounds`](redlock_core::Builder::own_rounds) does when
    /// nobody else drives a machine: the engine's
    /// [`OwnRound`](redlock_core::engine::OwnRound) says which nodes take a
    /// round that way (not one whose last own read failed) and in which
    /// order and for how long each answer is waited for; a node silent past
    /// the decided round's grace counts as failed for the round. Needs one
    /// caller per process and no [`Scenario::exit`].
    pub own_rounds: bool,
    /// The nodes each client is configured with (node indices); empty means
    /// every client uses every node. Different lists are a broken setup.
    pub views: Vec<Vec<usize>>,
    /// Processes exit after their last cycle, as a program returning from
    /// `main`: each process's requests leave through one worker per node
    /// (a message leaves once the one before it to that node was answered
    /// or timed out, as the manager's node workers send); a caller that
    /// has done its last write keeps its lock until every caller of its
    /// process is through, then all of them drop their guards at once (the
    /// releases are queued, nobody waits for them) and the process exits.
    /// Its workers keep sending until the engine's exit deadline
    /// ([`redlock_core::engine::Settings::exit_deadline`]) and then die:
    /// what has not left by then is lost, and its keys stay for a TTL
    /// (with [`Scenario::check_leftovers`], a
    /// [`ViolationKind::LeftBehind`](super::ViolationKind::LeftBehind)).
    pub exit: bool,
    /// Check fairness across processes: no process whose callers keep
    /// trying may go longer than this without a grant while another process
    /// is granted ([`ViolationKind::Starved`](super::ViolationKind::Starved)).
    /// `None`: no check.
    pub fairness: Option<Duration>,
    /// Callers woken early, as release notifications wake them
    /// ([`Builder::wake_ups`](redlock_core::Builder::wake_ups)): a pause
    /// between rounds may end at any earlier instant
    /// ([`Acquire::handle_released`](redlock_core::engine::Acquire::handle_released)),
    /// and a waiting caller's first round is queued
    /// ([`Acquire::queue_first`](redlock_core::engine::Acquire::queue_first))
    /// or followed at once by a queued one
    /// ([`Acquire::mark_at_once`](redlock_core::engine::Acquire::mark_at_once)),
    /// chosen at random: everything notifications can change (when rounds
    /// start, and which kind the first is), and more.
    pub wake_ups: bool,
    /// Election observers, each a process of its own that watches resource
    /// 0's leader as [`Observer`](redlock_core::election::Observer) does:
    /// it asks every node at once ([`Command::Inspect`]), counts a node
    /// that has not answered within twice the node timeout as failed (as
    /// [`Redlock::holder`](redlock_core::Redlock::holder)), and hands the
    /// reading to the core's [`Watch`](redlock_core::engine::Watch), which
    /// says what to report and when to read again. Observers read on real
    /// time (their clocks' rate error is not simulated), are never paused
    /// and are not cut off by partitions; their links delay and lose
    /// messages as the clients' do. Needs [`Scenario::fencing`] (the term
    /// is the fencing counter).
    ///
    /// [`Command::Inspect`]: redlock_core::model::Command::Inspect
    pub observers: usize,
    /// How long after an observer first sees a new leader it reports it;
    /// `None`: as the core's [`Watch`](redlock_core::engine::Watch) for
    /// this node timeout. Anything else is out of model (an observer that
    /// does not wait for the term's raise).
    pub observer_settle: Option<Duration>,
    /// What the clients lock: mutexes, or one semaphore or read-write
    /// lock over the [`Scenario::keys`] resources.
    pub primitive: Primitive,
    /// Faults are scheduled within this much simulated time.
    pub horizon: Duration,
    /// Faults at fixed times, in addition to the random ones.
    pub script: Vec<(Duration, Fault)>,
    /// Liveness mode: faults stop at this time and some contender must
    /// acquire within [`Scenario::liveness_bound`] after it.
    pub liveness: Option<Duration>,
    /// Network faults.
    pub net: NetFaults,
    /// Clock faults.
    pub clocks: ClockFaults,
    /// Node faults.
    pub node_faults: NodeFaults,
    /// Client faults.
    pub client_faults: ClientFaults,
}

impl Scenario {
    /// This scenario changed by `change`.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_mock::sim::Scenario;
    /// let three = Scenario::in_model().with(|s| {
    ///     s.name = "three-nodes".into();
    ///     s.nodes = 3;
    /// });
    /// assert_eq!(three.nodes, 3);
    /// ```
    #[must_use]
    pub fn with(mut self, change: impl FnOnce(&mut Self)) -> Self {
        change(&mut self);
        self
    }

    /// In liveness mode, how long after the faults stop some contender must
    /// have acquired: the longest a stale key can live (a delayed request,
    /// the TTL on a slow clock stepped back), plus the longest restart
    /// delay, plus a retry budget of three rounds (retry pause, round and
    /// release).
    ///
    /// # Examples
    ///
    /// ```
    /// let s = redlock_mock::sim::Scenario::liveness_mode();
    /// assert!(s.liveness_bound() > s.ttl);
    /// ```
    #[must_use]
    pub fn liveness_bound(&self) -> Duration {
        let slow = 1.0 + 2.0 * self.clocks.node_ppm as f64 / 1e6;
        let key_life = self.net.tail_max + self.ttl.mul_f64(slow) + self.clocks.backward_max;
        let restart = self
            .node_faults
            .restart_max
            .max(self.node_faults.restart_floor.unwrap_or_default());
        let round = self.retry_max + 3 * self.node_timeout + 2 * self.net.delay_max;
        key_life + restart + 3 * round
    }

    /// Checks the sizes the simulator supports.
    ///
    /// # Errors
    ///
    /// A description of the first bad field.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_mock::sim::Scenario;
    /// assert!(Scenario::in_model().validate().is_ok());
    /// assert!(Scenario::in_model().with(|s| s.nodes = 0).validate().is_err());
    /// ```
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=MAX_NODES).contains(&self.nodes) {
            return Err(format!("nodes must be 1..={MAX_NODES}"));
        }
        if !(1..=MAX_CLIENTS).contains(&self.clients) {
            return Err(format!("clients must be 1..={MAX_CLIENTS}"));
        }
        if self.callers_per_process == 0
            || self.clients.saturating_mul(self.callers_per_process) > MAX_CLIENTS
        {
            return Err(format!(
                "callers_per_process must be at least 1, and clients × callers_per_process at most {MAX_CLIENTS}"
            ));
        }
        if !(1..=MAX_KEYS).contains(&self.keys) {
            return Err(format!("keys must be 1..={MAX_KEYS}"));
        }
        if redlock_core::Ttl::new(self.ttl).is_err() {
            return Err("ttl must be at least 1 ms".into());
        }
        if let Some((lo, hi)) = self.extend_ttl {
            if lo > hi || redlock_core::Ttl::new(lo).is_err() {
                return Err("extend_ttl must be a range of TTLs of at least 1 ms".into());
            }
        }
        if self.retry_min > self.retry_max {
            return Err("retry_min exceeds retry_max".into());
        }
        if !self.views.is_empty() && self.views.len() != self.clients {
            return Err("views needs one node list per client".into());
        }
        for view in &self.views {
            let mut sorted = view.clone();
            sorted.sort_unstable();
            sorted.dedup();
            if view.is_empty()
                || sorted.len() != view.len()
                || view.iter().any(|&n| n >= self.nodes)
            {
                return Err("a view lists no node, a node twice or an unknown node".into());
            }
        }
        if self.script.len() > usize::from(u16::MAX) {
            return Err("the script has too many faults".into());
        }
        for (_, fault) in &self.script {
            let (node, client) = match *fault {
                Fault::Crash { node, .. }
                | Fault::Failover { node }
                | Fault::ClockStep { node, .. }
                | Fault::Flush { node } => (Some(node), None),
                Fault::Partition { client, node, .. } => (Some(node), client),
                Fault::ClientCrash { client } | Fault::Pause { client, .. } => (None, Some(client)),
            };
            if node.is_some_and(|n| n >= self.nodes) || client.is_some_and(|c| c >= self.clients) {
                return Err(format!(
                    "the script names an unknown node or client: {fault:?}"
                ));
            }
        }
        if self.fenced_resource && !self.fencing {
            return Err("fenced_resource needs fencing".into());
        }
        if self.own_rounds && (self.callers_per_process != 1 || self.exit) {
            return Err(
                "own_rounds needs one caller per process (a lone caller) and no exit".into(),
            );
        }
        if self.primitive != Primitive::Mutex {
            // A read-write lock may have several callers per process: its
            // readers wait for the process's earlier writers.
            let several_ok = matches!(self.primitive, Primitive::RwLock { .. });
            if (self.callers_per_process != 1 && !several_ok) || self.exit {
                return Err(
                    "a semaphore needs one caller per process, a semaphore or read-write lock no exit"
                        .into(),
                );
            }
            if matches!(self.primitive, Primitive::Semaphore { holder_sets: true }) && self.fencing
            {
                return Err("holder sets keep no fencing counters".into());
            }
        }
        if self.observers > MAX_OBSERVERS || (self.observers > 0 && !self.fencing) {
            return Err(format!(
                "observers must be at most {MAX_OBSERVERS}, and need fencing"
            ));
        }
        if self.node_faults.persistence.is_empty() {
            return Err("node_faults.persistence lists no mode".into());
        }
        Ok(())
    }
}
