//! The named presets: the in-model baseline and the scenarios that keep
//! or break one assumption each (`docs/safety.md`).

use std::time::Duration;

use super::scenario::{
    ClientFaults, ClockFaults, FenceScheme, NetFaults, NodeFaults, Persistence, Primitive, Scenario,
};

const fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

impl Scenario {
    /// The named scenarios, as accepted by [`Scenario::by_name`].
    pub const NAMES: [&'static str; 33] = [
        "in-model",
        "delayed-restart",
        "restart-without-persistence",
        "lagging-replica-failover",
        "clock-jump",
        "client-pause",
        "single-instance",
        "liveness",
        "fencing",
        "fenced-resource",
        "fencing-max-only",
        "keep-alive",
        "late-grants",
        "late-grants-unordered",
        "kept-releases",
        "kept-releases-one-retry",
        "own-rounds",
        "own-rounds-liveness",
        "local-line",
        "extend-ttl",
        "local-line-fair",
        "process-exit",
        "process-exit-slow",
        "process-exit-outages",
        "wake-ups",
        "semaphore",
        "semaphore-holder-sets",
        "rwlock",
        "rwlock-blind-readers",
        "rwlock-local",
        "election",
        "election-max-term",
        "election-eager-observer",
    ];

    /// The scenario called `name`, if there is one.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_mock::sim::Scenario;
    /// assert!(Scenario::by_name("clock-jump").is_some_and(|s| s.out_of_model));
    /// assert!(Scenario::by_name("nope").is_none());
    /// ```
    #[must_use]
    pub fn by_name(name: &str) -> Option<Scenario> {
        Some(match name {
            "in-model" => Self::in_model(),
            "delayed-restart" => Self::delayed_restart(),
            "restart-without-persistence" => Self::restart_without_persistence(),
            "lagging-replica-failover" => Self::lagging_replica_failover(),
            "clock-jump" => Self::clock_jump(),
            "client-pause" => Self::client_pause(),
            "single-instance" => Self::single_instance(),
            "liveness" => Self::liveness_mode(),
            "fencing" => Self::fencing(),
            "fenced-resource" => Self::fenced_resource(),
            "fencing-max-only" => Self::fencing_max_only(),
            "keep-alive" => Self::keep_alive(),
            "late-grants" => Self::late_grants(),
            "kept-releases" => Self::kept_releases(),
            "kept-releases-one-retry" => Self::kept_releases_one_retry(),
            "own-rounds" => Self::own_rounds(),
            "own-rounds-liveness" => Self::own_rounds_liveness(),
            "late-grants-unordered" => Self::late_grants_unordered(),
            "local-line" => Self::local_line(),
            "extend-ttl" => Self::extend_ttl(),
            "local-line-fair" => Self::local_line_fair(),
            "process-exit" => Self::process_exit(),
            "process-exit-slow" => Self::process_exit_slow(),
            "process-exit-outages" => Self::process_exit_outages(),
            "wake-ups" => Self::wake_ups(),
            "semaphore" => Self::semaphore(),
            "semaphore-holder-sets" => Self::semaphore_holder_sets(),
            "rwlock" => Self::rwlock(),
            "rwlock-blind-readers" => Self::rwlock_blind_readers(),
            "rwlock-local" => Self::rwlock_local(),
            "election" => Self::election(),
            "election-max-term" => Self::election_max_term(),
            "election-eager-observer" => Self::election_eager_observer(),
            _ => return None,
        })
    }

    /// Every fault within the algorithm's model, at once: five nodes, three
    /// clients; crashes that restart with fsync=always or no sooner than the
    /// TTL, partitions, loss, heavy-tailed delays, drift within the drift
    /// budget, backward clock steps, client crashes, and pauses that end
    /// inside validity. Expect zero violations.
    #[must_use]
    pub fn in_model() -> Scenario {
        Scenario {
            name: "in-model".into(),
            out_of_model: false,
            nodes: 5,
            clients: 3,
            callers_per_process: 1,
            cycles: 3,
            keys: 2,
            multi_key: 0.25,
            ttl: ms(100),
            drift_factor: 0.01,
            node_timeout: ms(10),
            retry_min: ms(1),
            retry_max: ms(20),
            acquire_timeout: ms(300),
            work_min: ms(5),
            work_max: ms(60),
            linger: 0.3,
            think_max: ms(20),
            extend: true,
            extend_ttl: None,
            keep_alive: false,
            keep_max_hold: Duration::from_secs(3600),
            fencing: false,
            fence_scheme: FenceScheme::Raise,
            fenced_resource: false,
            unique_tokens: true,
            unordered_connections: false,
            check_leftovers: false,
            kept_one_retry: false,
            own_rounds: false,
            views: Vec::new(),
            fairness: None,
            exit: false,
            wake_ups: false,
            observers: 0,
            observer_settle: None,
            primitive: Primitive::Mutex,
            horizon: ms(600),
            script: Vec::new(),
            liveness: None,
            net: NetFaults {
                delay_min: Duration::from_micros(100),
                delay_max: ms(1),
                tail_chance: 0.03,
                tail_scale: ms(1),
                tail_max: ms(150),
                loss: 0.01,
                reply_loss: 0.01,
                partition_rate: 4.0,
                partition_min: ms(5),
                partition_max: ms(200),
                one_way: 0.5,
                isolate: 0.3,
            },
            clocks: ClockFaults {
                node_ppm: 4_000,
                client_ppm: 4_000,
                extreme_chance: 0.5,
                jump_rate: 1.0,
                forward_chance: 0.5,
                forward_min: Duration::ZERO,
                forward_max: ms(1),
                forward_once: true,
                backward_max: ms(200),
            },
            node_faults: NodeFaults {
                crash_rate: 0.5,
                persistence: vec![
                    Persistence::Always,
                    Persistence::None,
                    Persistence::EverySecond,
                ],
                restart_min: Duration::ZERO,
                restart_max: ms(150),
                restart_floor: Some(ms(105)),
                failover_rate: 0.0,
                replica_lag_min: Duration::ZERO,
                replica_lag_max: Duration::ZERO,
                flush_rate: 0.0,
            },
            client_faults: ClientFaults {
                crash_rate: 0.5,
                restart_max: Some(ms(50)),
                pause_chance: 0.03,
                pause_max: ms(250),
                check_pause_chance: 0.1,
                check_pause_past_validity: false,
            },
        }
    }

    /// The in-model workload (five nodes, three clients) with no faults at
    /// all: no loss, no tail delays, exact clocks, no crashes or pauses. A
    /// base for [`Scenario::script`]ed stories.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_mock::sim::{run, Scenario};
    /// let outcome = run(&Scenario::quiet(), 0);
    /// assert!(outcome.is_clean() && outcome.stats.lost_messages == 0);
    /// ```
    #[must_use]
    pub fn quiet() -> Scenario {
        let base = Self::in_model();
        Scenario {
            name: "quiet".into(),
            net: NetFaults {
                tail_chance: 0.0,
                loss: 0.0,
                reply_loss: 0.0,
                partition_rate: 0.0,
                ..base.net.clone()
            },
            clocks: ClockFaults {
                node_ppm: 0,
                client_ppm: 0,
                jump_rate: 0.0,
                ..base.clocks.clone()
            },
            node_faults: NodeFaults {
                crash_rate: 0.0,
                persistence: vec![Persistence::None],
                ..base.node_faults.clone()
            },
            client_faults: ClientFaults {
                crash_rate: 0.0,
                pause_chance: 0.0,
                check_pause_chance: 0.0,
                ..base.client_faults.clone()
            },
            ..base
        }
    }

    /// No persistence at all, frequent crashes, every restart delayed past
    /// the TTL (the specification's "delayed restarts"). Expect zero
    /// violations.
    #[must_use]
    pub fn delayed_restart() -> Scenario {
        let base = Self::in_model();
        Scenario {
            name: "delayed-restart".into(),
            node_faults: NodeFaults {
                crash_rate: 2.0,
                persistence: vec![Persistence::None],
                restart_min: ms(105),
                restart_max: ms(250),
                restart_floor: Some(ms(105)),
                ..base.node_faults.clone()
            },
            ..base
        }
    }

    /// No persistence and immediate restarts: a node forgets the keys of a
    /// live lock and grants them again. Out of model.
    #[must_use]
    pub fn restart_without_persistence() -> Scenario {
        let base = Self::in_model();
        Scenario {
            name: "restart-without-persistence".into(),
            out_of_model: true,
            node_faults: NodeFaults {
                crash_rate: 3.0,
                persistence: vec![Persistence::None],
                restart_min: Duration::ZERO,
                restart_max: ms(5),
                restart_floor: None,
                ..base.node_faults.clone()
            },
            ..base
        }
    }

    /// The specification's race: one master with an asynchronous replica; the
    /// master fails over to the replica before a grant was replicated.
    /// Out of model.
    #[must_use]
    pub fn lagging_replica_failover() -> Scenario {
        let base = Self::in_model();
        Scenario {
            name: "lagging-replica-failover".into(),
            out_of_model: true,
            nodes: 1,
            node_faults: NodeFaults {
                crash_rate: 0.0,
                failover_rate: 4.0,
                replica_lag_min: ms(1),
                replica_lag_max: ms(40),
                ..base.node_faults.clone()
            },
            ..base
        }
    }

    /// Node clocks step forward by more than the drift budget, so keys
    /// expire early. Out of model.
    #[must_use]
    pub fn clock_jump() -> Scenario {
        let base = Self::in_model();
        Scenario {
            name: "clock-jump".into(),
            out_of_model: true,
            clocks: ClockFaults {
                jump_rate: 4.0,
                forward_chance: 1.0,
                forward_min: ms(20),
                forward_max: ms(100),
                forward_once: false,
                ..base.clocks.clone()
            },
            ..base
        }
    }

    /// A holder checks its validity, pauses past it (GC, swap, SIGSTOP),
    /// then writes. Lost updates, which fencing tokens exist to stop.
    /// Out of model.
    #[must_use]
    pub fn client_pause() -> Scenario {
        let base = Self::in_model();
        Scenario {
            name: "client-pause".into(),
            out_of_model: true,
            client_faults: ClientFaults {
                check_pause_chance: 0.3,
                check_pause_past_validity: true,
                ..base.client_faults.clone()
            },
            ..base
        }
    }

    /// One node (N = 1), the in-model faults other than crashes. Expect zero
    /// violations.
    #[must_use]
    pub fn single_instance() -> Scenario {
        let base = Self::in_model();
        Scenario {
            name: "single-instance".into(),
            nodes: 1,
            node_faults: NodeFaults {
                crash_rate: 0.0,
                ..base.node_faults.clone()
            },
            ..base
        }
    }

    /// In-model faults until 400 ms, then none (all nodes back, links
    /// healed, no loss, tail delays or pauses): some contender must acquire
    /// within [`Scenario::liveness_bound`]. Client 0 never crashes, so a
    /// contender remains; clients keep cycling until the bound has passed.
    /// No extends, so a legitimate holder keeps a lock at most one TTL.
    #[must_use]
    pub fn liveness_mode() -> Scenario {
        let base = Self::in_model();
        Scenario {
            name: "liveness".into(),
            extend: false,
            liveness: Some(ms(400)),
            horizon: ms(400),
            clocks: ClockFaults {
                backward_max: ms(20),
                ..base.clocks.clone()
            },
            ..base
        }
    }

    /// Fencing tokens by the library's scheme under the in-model faults,
    /// with node crashes only under `appendfsync always` (durable counters,
    /// the scheme's assumption: a restart without persistence, however
    /// delayed, forgets the counters). Expect zero violations: tokens rise
    /// strictly from holder to holder of each resource.
    #[must_use]
    pub fn fencing() -> Scenario {
        let base = Self::in_model();
        Scenario {
            name: "fencing".into(),
            fencing: true,
            node_faults: NodeFaults {
                persistence: vec![Persistence::Always],
                ..base.node_faults.clone()
            },
            ..base
        }
    }

    /// [`Scenario::client_pause`]'s faults (holders that pause past their
    /// validity, then write) against a resource that fences: it rejects
    /// accesses with a lower token than it has seen. Durable counters, as
    /// in [`Scenario::fencing`]. Expect zero violations, lost updates
    /// included.
    #[must_use]
    pub fn fenced_resource() -> Scenario {
        let base = Self::client_pause();
        Scenario {
            name: "fenced-resource".into(),
            out_of_model: false,
            fencing: true,
            fenced_resource: true,
            node_faults: Self::fencing().node_faults,
            ..base
        }
    }

    /// [`Scenario::fencing`] with the naive token (the largest granted
    /// counter, no raise): attempts that fail with grants on a minority
    /// still increment counters there, so a later holder whose quorum
    /// misses those nodes gets a token no larger than an earlier one.
    /// Out of model (for the token, not for the lock).
    #[must_use]
    pub fn fencing_max_only() -> Scenario {
        let base = Self::fencing();
        Scenario {
            name: "fencing-max-only".into(),
            out_of_model: true,
            fence_scheme: FenceScheme::MaxOnly,
            multi_key: 0.0,
            ..base
        }
    }

    /// Long critical sections (up to four TTLs) under locks kept alive by
    /// the core's keep-alive schedule, against the in-model faults with
    /// more and longer client pauses (past the TTL: the keeper stalls with
    /// its process) and more partitions; a keeper gives up after 300 ms of
    /// total hold. A holder checks its lease before each access. Expect
    /// zero violations: in particular a holder always knows its lock is lost
    /// before another client is granted it
    /// ([`ViolationKind::StaleHolder`](super::ViolationKind::StaleHolder)).
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_mock::sim::{sweep, Scenario};
    /// let report = sweep(&Scenario::keep_alive(), 0..20, 1);
    /// assert_eq!(report.violations, 0);
    /// ```
    #[must_use]
    pub fn keep_alive() -> Scenario {
        let base = Self::in_model();
        Scenario {
            name: "keep-alive".into(),
            extend: false,
            keep_alive: true,
            keep_max_hold: ms(300),
            work_min: ms(20),
            work_max: ms(400),
            linger: 0.0,
            horizon: ms(1_200),
            net: NetFaults {
                partition_rate: 8.0,
                ..base.net.clone()
            },
            client_faults: ClientFaults {
                pause_chance: 0.06,
                pause_max: ms(300),
                ..base.client_faults.clone()
            },
            ..base
        }
    }

    /// Leader election as [`Redlock::election`](redlock_core::Redlock::election)
    /// runs it: two candidates in each of three processes campaign on one
    /// name with fencing (durable counters, as in [`Scenario::fencing`]);
    /// a leader is kept alive by the core's keep-alive schedule with no
    /// bound on its hold, leads up to four TTLs, and checks its leadership
    /// before each access; the in-model faults with
    /// [`Scenario::keep_alive`]'s longer pauses and partitions. Expect zero
    /// violations: never two leaders in their validity at once
    /// ([`ViolationKind::MutualExclusion`](super::ViolationKind::MutualExclusion)),
    /// terms strictly rising from leader to leader
    /// ([`ViolationKind::FencingToken`](super::ViolationKind::FencingToken)),
    /// a paused leader told of its loss before another is elected
    /// ([`ViolationKind::StaleHolder`](super::ViolationKind::StaleHolder)).
    /// Two observers ([`Scenario::observers`]) never see a term go back
    /// ([`ViolationKind::ObservedTermBack`](super::ViolationKind::ObservedTermBack))
    /// and report each leader with its own term unless it paused between
    /// its grant and its raise
    /// ([`ViolationKind::ObservedWrongTerm`](super::ViolationKind::ObservedWrongTerm)).
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_mock::sim::{sweep, Scenario};
    /// assert_eq!(sweep(&Scenario::election(), 0..20, 1).violations, 0);
    /// ```
    #[must_use]
    pub fn election() -> Scenario {
        let base = Self::keep_alive();
        Scenario {
            name: "election".into(),
            fencing: true,
            keys: 1,
            multi_key: 0.0,
            callers_per_process: 2,
            keep_max_hold: Duration::MAX,
            node_faults: Self::fencing().node_faults,
            observers: 2,
            ..base
        }
    }

    /// [`Scenario::election`] with terms taken from the grants alone (the
    /// largest counter the granting nodes returned, no raise on a quorum):
    /// deliberately wrong (out of model, for the term). A failed campaign's
    /// grants on a minority raise counters there, so a later leader whose
    /// quorum misses those nodes gets a term no larger than an earlier
    /// leader's: the checker finds it.
    #[must_use]
    pub fn election_max_term() -> Scenario {
        Scenario {
            name: "election-max-term".into(),
            out_of_model: true,
            fence_scheme: FenceScheme::MaxOnly,
            // The leaders' terms are what this twin gets wrong; what
            // observers would report of them is beside the point.
            observers: 0,
            ..Self::election()
        }
    }

    /// [`Scenario::election`] with observers that report a new leader as
    /// soon as they see it, not two node timeouts later: deliberately
    /// wrong (out of model). A reading between a leader's grant and its
    /// term's raise shows a lower term than the leader's own; the checker
    /// finds the report
    /// ([`ViolationKind::ObservedWrongTerm`](super::ViolationKind::ObservedWrongTerm)).
    #[must_use]
    pub fn election_eager_observer() -> Scenario {
        Scenario {
            name: "election-eager-observer".into(),
            out_of_model: true,
            observer_settle: Some(Duration::ZERO),
            ..Self::election()
        }
    }

    /// Replies that come after their round was decided: heavy-tailed
    /// delays both ways (a fifth of the messages up to 60 ms, against a
    /// 10 ms node timeout) and 5 % of the replies lost after the command
    /// ran, so acquires are granted on nodes whose answer the client never
    /// waited for. No request is lost and no node or client crashes, so
    /// every release runs; at the end, once every message has landed, no
    /// key of a lock that was given up (released, or abandoned after a
    /// failed round) may be left on any node
    /// ([`ViolationKind::LeftBehind`](super::ViolationKind::LeftBehind)).
    /// Expect zero violations.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_mock::sim::{sweep, Scenario};
    /// let report = sweep(&Scenario::late_grants(), 0..20, 1);
    /// assert_eq!(report.violations, 0);
    /// ```
    #[must_use]
    pub fn late_grants() -> Scenario {
        let base = Self::in_model();
        Scenario {
            name: "late-grants".into(),
            check_leftovers: true,
            net: NetFaults {
                tail_chance: 0.2,
                tail_scale: ms(2),
                tail_max: ms(60),
                loss: 0.0,
                reply_loss: 0.05,
                partition_rate: 0.0,
                ..base.net.clone()
            },
            node_faults: NodeFaults {
                crash_rate: 0.0,
                ..base.node_faults.clone()
            },
            client_faults: ClientFaults {
                crash_rate: 0.0,
                ..base.client_faults.clone()
            },
            ..base
        }
    }

    /// Releases that fail while a node is down or cut off, kept and tried
    /// again (the engine's [`Kept`](redlock_core::engine::Kept), as the node
    /// workers do): a TTL of 30 s, long against the outages (nodes down, with
    /// persistence, for 300 ms to 2 s; links cut as long), so a key whose
    /// release was lost would stay far longer than the run. A client lives
    /// on after its last cycle while it keeps failed releases. At the end,
    /// once every message has landed, no key of a released lock may be left
    /// on any node
    /// ([`ViolationKind::LeftBehind`](super::ViolationKind::LeftBehind)).
    /// Expect zero violations.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_mock::sim::{sweep, Scenario};
    /// let report = sweep(&Scenario::kept_releases(), 0..20, 1);
    /// assert_eq!(report.violations, 0);
    /// ```
    #[must_use]
    pub fn kept_releases() -> Scenario {
        let base = Self::in_model();
        Scenario {
            name: "kept-releases".into(),
            check_leftovers: true,
            ttl: Duration::from_secs(30),
            horizon: ms(3000),
            net: NetFaults {
                partition_rate: 1.0,
                partition_min: ms(300),
                partition_max: ms(2000),
                ..base.net.clone()
            },
            node_faults: NodeFaults {
                crash_rate: 1.0,
                persistence: vec![Persistence::Always],
                restart_min: ms(300),
                restart_max: ms(2000),
                restart_floor: None,
                ..base.node_faults.clone()
            },
            client_faults: ClientFaults {
                crash_rate: 0.0,
                ..base.client_faults.clone()
            },
            ..base
        }
    }

    /// The `in-model` workload with lone callers on their own rounds
    /// ([`Scenario::own_rounds`]): each process has one caller, which sends
    /// its rounds to the nodes itself and reads the answers in the order
    /// and within the bounds the engine's
    /// [`OwnRound`](redlock_core::engine::OwnRound) gives, as the blocking
    /// manager's default path does. Expect zero violations.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_mock::sim::{sweep, Scenario};
    /// let report = sweep(&Scenario::own_rounds(), 0..20, 1);
    /// assert_eq!(report.violations, 0);
    /// ```
    #[must_use]
    pub fn own_rounds() -> Scenario {
        Scenario {
            name: "own-rounds".into(),
            own_rounds: true,
            ..Self::in_model()
        }
    }

    /// [`Scenario::liveness_mode`] with lone callers on their own rounds:
    /// once the faults stop, some contender acquires within the bound.
    /// Expect zero violations.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_mock::sim::{sweep, Scenario};
    /// let report = sweep(&Scenario::own_rounds_liveness(), 0..20, 1);
    /// assert_eq!(report.violations, 0);
    /// ```
    #[must_use]
    pub fn own_rounds_liveness() -> Scenario {
        Scenario {
            name: "own-rounds-liveness".into(),
            own_rounds: true,
            ..Self::liveness_mode()
        }
    }

    /// The deliberately wrong twin of [`Scenario::kept_releases`]: a failed
    /// release is dropped after one try again
    /// ([`Scenario::kept_one_retry`]), so a node down or cut off for longer
    /// keeps the key for its whole TTL. Out of model: expect
    /// [`ViolationKind::LeftBehind`](super::ViolationKind::LeftBehind).
    #[must_use]
    pub fn kept_releases_one_retry() -> Scenario {
        Scenario {
            name: "kept-releases-one-retry".into(),
            out_of_model: true,
            kept_one_retry: true,
            ..Self::kept_releases()
        }
    }

    /// [`Scenario::late_grants`] with each client's requests to a node on
    /// several connections, in no order
    /// ([`Scenario::unordered_connections`]): a release can overtake the
    /// acquire it undoes, which then leaves its key for a whole TTL.
    /// Out of model.
    #[must_use]
    pub fn late_grants_unordered() -> Scenario {
        Scenario {
            name: "late-grants-unordered".into(),
            out_of_model: true,
            unordered_connections: true,
            ..Self::late_grants()
        }
    }

    /// Several callers per process on one or two keys: each process's
    /// callers queue in its manager's local lines
    /// ([`redlock_core::engine::Lines`]) and hand the lock over, the
    /// release and the next caller's first acquire round in one batch on
    /// the process's ordered links. Under the in-model faults (node
    /// crashes, partitions, loss, heavy-tailed delays, drift, client
    /// crashes that take a process's line with them, and pauses of whole
    /// processes), expect zero violations: no mutual-exclusion breach, no
    /// waiter skipped in its line ([`ViolationKind::WaiterSkipped`]), and no
    /// hand-off acquire ahead of its release on any node
    /// ([`ViolationKind::HandOffOvertook`]).
    ///
    /// [`ViolationKind::WaiterSkipped`]: super::ViolationKind::WaiterSkipped
    /// [`ViolationKind::HandOffOvertook`]: super::ViolationKind::HandOffOvertook
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_mock::sim::{sweep, Scenario};
    /// let report = sweep(&Scenario::local_line(), 0..20, 2);
    /// assert_eq!(report.violations, 0);
    /// ```
    #[must_use]
    pub fn local_line() -> Scenario {
        let base = Self::in_model();
        Scenario {
            name: "local-line".into(),
            clients: 3,
            callers_per_process: 3,
            keys: 2,
            multi_key: 0.1,
            work_max: ms(40),
            acquire_timeout: ms(400),
            ..base
        }
    }

    /// The local-line scenario with callers woken early, as release
    /// notifications wake them ([`Scenario::wake_ups`]): pauses between
    /// rounds cut short at random instants, first rounds queued or followed
    /// at once by a queued one. Notifications only change when rounds start
    /// and which kind the first is; this tries every such choice under the
    /// in-model faults. Expect zero violations, no waiter skipped, and no
    /// hand-off acquire ahead of its release.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_mock::sim::{sweep, Scenario};
    /// let report = sweep(&Scenario::wake_ups(), 0..20, 2);
    /// assert_eq!(report.violations, 0);
    /// ```
    #[must_use]
    pub fn wake_ups() -> Scenario {
        let base = Self::local_line();
        Scenario {
            name: "wake-ups".into(),
            wake_ups: true,
            ..base
        }
    }

    /// Extends that ask for another TTL than the lock's
    /// ([`Scenario::extend_ttl`]): from a fifth of it to twice it, under
    /// the in-model faults with more slow and lost replies, so that many
    /// extends fail without a quorum after some nodes set the new TTL. A
    /// failed shorter extend shortens the keys on those nodes: the holder
    /// must stop believing in its old, longer validity before another
    /// client can win a quorum ([`Lease::end_extend`] bounds it by the
    /// round's start plus the new TTL less the drift). Expect zero
    /// violations.
    ///
    /// [`Lease::end_extend`]: redlock_core::engine::Lease::end_extend
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_mock::sim::{sweep, Scenario};
    /// let report = sweep(&Scenario::extend_ttl(), 0..20, 2);
    /// assert_eq!(report.violations, 0);
    /// ```
    #[must_use]
    pub fn extend_ttl() -> Scenario {
        let base = Self::in_model();
        Scenario {
            name: "extend-ttl".into(),
            extend_ttl: Some((ms(20), ms(200))),
            work_min: ms(30),
            work_max: ms(120),
            net: NetFaults {
                tail_chance: 0.1,
                reply_loss: 0.05,
                ..base.net.clone()
            },
            // A node without full persistence restarts no sooner than the
            // longest TTL set, the extends' included.
            node_faults: NodeFaults {
                restart_floor: Some(ms(205)),
                restart_max: ms(250),
                ..base.node_faults.clone()
            },
            ..base
        }
    }

    /// Two processes of four callers each (the shape of the real-Redis
    /// test of issue 10), all on one key, with short critical sections and
    /// hardly a pause between cycles: each process's line could pass the
    /// lock from caller to caller for ever (a release and the next caller's
    /// acquire in one batch leave the key free on no node) while the other
    /// process polls. The line's streak bound (hand-offs yield after
    /// `streak` of local passing) and the waiting marks that queued
    /// acquires leave on the nodes keep both served: a process whose
    /// callers keep trying may not go without a grant for longer than
    /// [`Scenario::fairness`] while the other is granted
    /// ([`ViolationKind::Starved`](super::ViolationKind::Starved)). The
    /// bound is the acquire timeout (300 ms): starved longer, a process's
    /// callers give up. With the streak of 20 ms (the longest retry
    /// pause), critical sections of at most 5 ms and retry pauses of at
    /// most 20 ms, a waiting process is served within about 75 ms. No
    /// faults but delays and drift (a partition or a crash may keep a
    /// process from the lock for good reasons). Expect zero violations.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_mock::sim::{sweep, Scenario};
    /// let report = sweep(&Scenario::local_line_fair(), 0..20, 2);
    /// assert_eq!(report.violations, 0);
    /// ```
    #[must_use]
    pub fn local_line_fair() -> Scenario {
        let base = Self::quiet();
        Scenario {
            name: "local-line-fair".into(),
            clients: 2,
            callers_per_process: 4,
            cycles: 20,
            keys: 1,
            multi_key: 0.0,
            work_min: ms(1),
            work_max: ms(5),
            linger: 0.0,
            think_max: ms(2),
            extend: false,
            acquire_timeout: ms(300),
            fairness: Some(ms(300)),
            clocks: ClockFaults {
                node_ppm: 4_000,
                client_ppm: 4_000,
                ..base.clocks.clone()
            },
            ..base
        }
    }

    /// Processes that exit after their last cycle ([`Scenario::exit`]):
    /// three processes of three callers on four keys; each caller keeps
    /// its last lock until every caller of its process is through, then
    /// they all drop their guards at once and the process exits, its
    /// releases queued behind each other on its node workers (one request
    /// out per node at a time). The workers keep going until the engine's
    /// exit deadline ([`Settings::exit_deadline`]); no request is lost on
    /// the way and no node or process crashes, so every release must run:
    /// once every message has landed, no key of a lock given up is left
    /// ([`ViolationKind::LeftBehind`](super::ViolationKind::LeftBehind)).
    /// Expect zero violations.
    ///
    /// [`Settings::exit_deadline`]: redlock_core::engine::Settings::exit_deadline
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_mock::sim::{sweep, Scenario};
    /// let report = sweep(&Scenario::process_exit(), 0..20, 2);
    /// assert_eq!(report.violations, 0);
    /// ```
    #[must_use]
    pub fn process_exit() -> Scenario {
        let base = Self::quiet();
        Scenario {
            name: "process-exit".into(),
            clients: 3,
            callers_per_process: 3,
            keys: 4,
            multi_key: 0.25,
            exit: true,
            check_leftovers: true,
            clocks: ClockFaults {
                node_ppm: 4_000,
                client_ppm: 4_000,
                ..base.clocks.clone()
            },
            ..base
        }
    }

    /// [`Scenario::process_exit`] over slow links: a fifth of the messages
    /// delayed up to 60 ms against a 10 ms node timeout, so requests queue
    /// behind slow ones on the processes' node workers past their round's
    /// deadline, and the workers drop those unsent as the engine says
    /// ([`Message::stale`](redlock_core::engine::Message::stale): acquires,
    /// extends and fence raises, never releases). Every release still runs:
    /// no key of a lock given up is left once every message has landed.
    /// Expect zero violations.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_mock::sim::{sweep, Scenario};
    /// let report = sweep(&Scenario::process_exit_slow(), 0..20, 2);
    /// assert_eq!(report.violations, 0);
    /// ```
    #[must_use]
    pub fn process_exit_slow() -> Scenario {
        let base = Self::process_exit();
        Scenario {
            name: "process-exit-slow".into(),
            net: NetFaults {
                tail_chance: 0.2,
                tail_scale: ms(2),
                tail_max: ms(60),
                ..base.net.clone()
            },
            ..base
        }
    }

    /// [`Scenario::process_exit`] with brief node outages (each node down
    /// about once a second, for 5–40 ms, keys kept), so that releases fail
    /// at once and are kept ([`Kept`](redlock_core::engine::Kept)), also
    /// the last ones an exiting process sends: its exit drain tries them
    /// again while it lasts and leaves the rest to their TTL, as
    /// [`Kept::idle`](redlock_core::engine::Kept::idle) decides for the
    /// blocking manager's node workers at exit. A kept release dropped at
    /// exit although it was due before the drain ended is a
    /// [`ViolationKind::LeftBehind`](super::ViolationKind::LeftBehind).
    /// Expect zero violations.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_mock::sim::{sweep, Scenario};
    /// let report = sweep(&Scenario::process_exit_outages(), 0..20, 2);
    /// assert_eq!(report.violations, 0);
    /// ```
    #[must_use]
    pub fn process_exit_outages() -> Scenario {
        let base = Self::process_exit();
        Scenario {
            name: "process-exit-outages".into(),
            node_faults: NodeFaults {
                crash_rate: 1.0,
                persistence: vec![Persistence::Always],
                restart_min: ms(5),
                restart_max: ms(40),
                restart_floor: None,
                ..base.node_faults.clone()
            },
            ..base
        }
    }

    /// A semaphore of three permits ([`Primitive::Semaphore`]: keys
    /// `sem:permit:0..3`, the three resources the simulator's bit masks
    /// allow with room to spare) wanted by seven processes, under the
    /// in-model faults (node crashes with persistence or delayed restarts,
    /// partitions, loss, heavy-tailed delays, drift within the budget,
    /// clock steps back, client crashes and pauses). Each process runs the
    /// core's own acquisition of a permit
    /// ([`Slots::acquire_one`](redlock_core::engine::Slots::acquire_one)),
    /// extends it when its validity runs low and releases it. Expect zero
    /// violations: never more than three clients believe, within their
    /// validity, that they hold a permit
    /// ([`ViolationKind::TooManyHolders`](super::ViolationKind::TooManyHolders)).
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_mock::sim::{sweep, Scenario};
    /// let report = sweep(&Scenario::semaphore(), 0..20, 2);
    /// assert_eq!(report.violations, 0);
    /// ```
    #[must_use]
    pub fn semaphore() -> Scenario {
        let base = Self::in_model();
        Scenario {
            name: "semaphore".into(),
            clients: 7,
            keys: 3,
            multi_key: 0.0,
            acquire_timeout: ms(400),
            primitive: Primitive::Semaphore { holder_sets: false },
            ..base
        }
    }

    /// [`Scenario::semaphore`] on nodes that keep each semaphore as one set
    /// of holders of capacity three and grant any permit while the set is
    /// not full, the clients winning on a majority of nodes: the design
    /// the semaphore does not use. Majorities intersect pairwise, but four
    /// holders are no pairwise conflict: once faults leave holders on
    /// different majorities, a node whose set is not full admits a fourth.
    /// Out of model.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_mock::sim::{sweep, Scenario, ViolationKind};
    /// let report = sweep(&Scenario::semaphore_holder_sets(), 0..300, 2);
    /// assert!(report.runs_with(ViolationKind::TooManyHolders) > 0);
    /// ```
    #[must_use]
    pub fn semaphore_holder_sets() -> Scenario {
        Scenario {
            name: "semaphore-holder-sets".into(),
            out_of_model: true,
            primitive: Primitive::Semaphore { holder_sets: true },
            ..Self::semaphore()
        }
    }

    /// A read-write lock ([`Primitive::RwLock`]: key `rw`) used by six
    /// processes, three tenths of whose cycles write, under the in-model
    /// faults. Reads run the core's read acquisition
    /// ([`Acquire::read`](redlock_core::engine::Acquire::read): a shared
    /// claim, queued so that it gives way to waiting writers); writes lock
    /// the key as a mutex. Expect zero violations: never a writer together
    /// with a reader or another writer
    /// ([`ViolationKind::WriterShared`](super::ViolationKind::WriterShared)).
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_mock::sim::{sweep, Scenario};
    /// let report = sweep(&Scenario::rwlock(), 0..20, 2);
    /// assert_eq!(report.violations, 0);
    /// ```
    #[must_use]
    pub fn rwlock() -> Scenario {
        let base = Self::in_model();
        Scenario {
            name: "rwlock".into(),
            clients: 6,
            keys: 1,
            multi_key: 0.0,
            acquire_timeout: ms(400),
            primitive: Primitive::RwLock {
                write: 0.3,
                blind_readers: false,
            },
            ..base
        }
    }

    /// [`Scenario::rwlock`] on nodes whose read grants a shared claim
    /// without looking for a writer (a read script that only adds the
    /// reader to the key's set). Out of model: a reader and a writer then
    /// both win their quorums.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_mock::sim::{sweep, Scenario, ViolationKind};
    /// let report = sweep(&Scenario::rwlock_blind_readers(), 0..100, 2);
    /// assert!(report.runs_with(ViolationKind::WriterShared) > 0);
    /// ```
    #[must_use]
    pub fn rwlock_blind_readers() -> Scenario {
        Scenario {
            name: "rwlock-blind-readers".into(),
            out_of_model: true,
            primitive: Primitive::RwLock {
                write: 0.3,
                blind_readers: true,
            },
            ..Self::rwlock()
        }
    }

    /// [`Scenario::rwlock`] with three processes of three callers each,
    /// two fifths of whose cycles write, under the in-model faults. A
    /// reader first waits while a writer of its own process that arrived
    /// before it still waits
    /// ([`LocalWriters`](redlock_core::engine::LocalWriters), the state
    /// `RwLock::read` consults), re-checking after retry pauses until its
    /// deadline. A writer is `Redlock::lock` on the key: it joins its
    /// process's local line for it. Expect zero violations: no reader is granted
    /// while an earlier writer of its process still waits
    /// ([`ViolationKind::WaiterSkipped`](super::ViolationKind::WaiterSkipped)),
    /// and never a writer together with a reader or another writer.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_mock::sim::{sweep, Scenario};
    /// let report = sweep(&Scenario::rwlock_local(), 0..20, 2);
    /// assert_eq!(report.violations, 0);
    /// ```
    #[must_use]
    pub fn rwlock_local() -> Scenario {
        Scenario {
            name: "rwlock-local".into(),
            clients: 3,
            callers_per_process: 3,
            primitive: Primitive::RwLock {
                write: 0.4,
                blind_readers: false,
            },
            ..Self::rwlock()
        }
    }
}
