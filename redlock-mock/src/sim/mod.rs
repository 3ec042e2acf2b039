//! A deterministic simulator of Redlock: many clients, faulty nodes and
//! links, virtual time, one seed; a checker for safety and liveness; the
//! specification's scenarios.
//!
//! In the style of turmoil, madsim and FoundationDB's simulation: one
//! virtual real-time clock and an event queue ordered by (time, sequence
//! number); no threads, no real time, no hash-map iteration; every random
//! choice comes from the run's seed, with independent streams per node,
//! client and link ([`SimRng`]). The same seed gives the same run and the
//! same trace hash.
//!
//! The clients drive the core's own decision code — [`redlock_core::Tally`],
//! [`redlock_core::judge`] (validity = TTL − elapsed − drift, with
//! [`redlock_core::drift`]), [`redlock_core::RetryDelay::pick`] and
//! [`redlock_core::Ttl`] — in the order the blocking manager follows: start
//! time read before sending, every node at once, decision at the first
//! decisive vote, release on every node after a failed round, random retry
//! pauses until a deadline, extend by the same rule. Fenced acquires
//! ([`Scenario::fencing`]) follow the core's [`redlock_core::fence_step`]:
//! on several nodes a raise round judged from the acquire's start, whose
//! failure abandons the acquire; the checker requires tokens to rise from
//! holder to holder, and [`Scenario::fenced_resource`] makes the protected
//! resource reject lower tokens.
//!
//! The nodes have the semantics of [`MockNode`](crate::MockNode) on their
//! own clocks (expiry follows each node's clock, as Redis does), with
//! crash/restart under three persistence modes, an asynchronous replica
//! for failover, and key eviction. Random faults are configured by
//! [`Scenario`]'s fields; exact stories are scripted with [`Fault`] verbs
//! (crash, failover, partition, clock step, flush, client crash, pause) in
//! [`Scenario::script`]. The checker's findings are [`ViolationKind`]s. `docs/safety.md`
//! says what each named scenario shows.
//!
//! # Examples
//!
//! ```
//! use redlock_mock::sim::{run, run_traced, sweep, Scenario};
//!
//! // In-model faults: no violations, and a seed replays exactly.
//! let report = sweep(&Scenario::in_model(), 0..50, 2);
//! assert_eq!(report.violations, 0);
//! assert_eq!(run(&Scenario::in_model(), 49).trace_hash, report.trace_hash);
//!
//! // Restarting without persistence breaks mutual exclusion; the failing
//! // seed replays with its trace.
//! let broken = sweep(&Scenario::restart_without_persistence(), 0..300, 2);
//! let seed = broken.first_violation_seed.expect("a violation");
//! let (outcome, trace) = run_traced(&Scenario::restart_without_persistence(), seed);
//! assert!(!outcome.is_clean() && !trace.is_empty());
//!
//! // Fencing: tokens rise; a fencing resource turns paused holders away.
//! assert_eq!(sweep(&Scenario::fencing(), 0..50, 2).violations, 0);
//! let fenced = sweep(&Scenario::fenced_resource(), 0..50, 2);
//! assert!(fenced.violations == 0 && fenced.fenced_off > 0);
//! ```

mod checker;
mod client;
mod clock;
mod faults;
mod fence;
mod net;
mod node;
mod presets;
mod rng;
mod run;
mod scenario;
mod sweep;
mod trace;
mod work;
mod world;

pub use checker::{Grant, GrantObserver, Violation, ViolationKind};
pub use fence::FenceRises;
pub use rng::SimRng;
pub use run::{run, run_observed, run_traced, Outcome, Stats};
pub use scenario::{
    ClientFaults, ClockFaults, Cut, Fault, FenceScheme, NetFaults, NodeFaults, Persistence,
    Scenario, MAX_CLIENTS, MAX_KEYS, MAX_NODES,
};
pub use sweep::{sweep, SeedPlan, SweepReport};
