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
//! The clients hold and drive the machines of [`redlock_core::engine`],
//! the very code the blocking [`Redlock`](redlock_core::Redlock) drives:
//! [`Acquire`](redlock_core::engine::Acquire) for each acquisition (rounds
//! to every node decided by the tally and judge, the fencing raise round,
//! the release of a failed round on every node that did not refuse it
//! while waiting for the nodes that may hold, random retry pauses until
//! the deadline),
//! [`Single`](redlock_core::engine::Single) rounds for extends and releases,
//! the holder's [`Lease`](redlock_core::engine::Lease) (validity, loss,
//! what a failed extend does to it) and, with [`Scenario::keep_alive`], the
//! keep-alive schedule [`Keep`](redlock_core::engine::Keep). The simulated
//! client is only the shell around them, as `Shared::drive` is in the
//! core: it feeds replies, per-node timeouts and pause ends in with its own
//! clock reading as `now` (an `Instant` at a fixed offset from one base per
//! run, so nothing depends on the real clock), sends each transmit to every
//! node of its view, starts a round's per-node timer when it sends it, and
//! takes the result. Tokens, fencing holder ids and jitter come from the
//! client's seeded stream ([`redlock_core::engine::Entropy`]). Process
//! pauses may fall before a transmit is sent, before a reply is handled and
//! at the steps of the critical section.
//!
//! With [`Scenario::callers_per_process`] above 1, a process hosts several
//! callers that share one [`Lines`](redlock_core::engine::Lines) (the local
//! lines of `Redlock::lock`): they join, the owner acquires, waiters look
//! at the line when woken or told and take over from a gone owner, and a
//! release with waiters starts the next caller's acquisition and sends its
//! first round right behind the release, in one batch on the process's
//! ordered links. The checker flags a skipped waiter
//! ([`ViolationKind::WaiterSkipped`]) and a hand-off round that reaches a
//! node before its release ([`ViolationKind::HandOffOvertook`]).
//!
//! With [`Scenario::primitive`] the clients take a semaphore's permits or a
//! read-write lock's reads and writes instead of plain locks, through the
//! core's own [`Slots`](redlock_core::engine::Slots) and
//! [`Acquire::read`](redlock_core::engine::Acquire::read) (the keys and the
//! acquisitions `Semaphore::acquire`, `RwLock::read` and `RwLock::write`
//! make; the simulated nodes keep shared claims as Redis does), and
//! the checker checks the primitive's promise:
//! [`ViolationKind::TooManyHolders`] and [`ViolationKind::WriterShared`].
//!
//! What the simulator itself adds is the world: nodes, links, clocks,
//! faults, the scheduler, the critical-section workload and the checker.
//! With [`Scenario::fencing`] the checker requires tokens to rise from
//! holder to holder ([`FenceRises`]), and [`Scenario::fenced_resource`]
//! makes the protected resource reject lower tokens. A holder must know of
//! a loss before anyone else is granted its resources
//! ([`ViolationKind::StaleHolder`]), and a lock given up must leave no key
//! behind ([`ViolationKind::LeftBehind`]).
//!
//! Each node is the reference model of a Redis master
//! ([`redlock_core::model`], which [`MockNode`](crate::MockNode) runs too
//! and the differential tests hold equal to the Redis scripts): a request
//! becomes the command the Redis backend sends for it
//! ([`Command::of`](redlock_core::model::Command::of) over the lock's
//! claim), run at the node's own clock in milliseconds (expiry follows
//! each node's clock, as Redis does). The simulator adds only persistence
//! (crash/restart under three modes, of the model's whole key space), an
//! asynchronous replica for failover (the master's commands replayed after
//! a lag), and key eviction; two deliberately out-of-model node rules
//! (holder sets, blind readers) serve the scenarios that show the checker
//! catches a wrong design. Random faults are configured by
//! [`Scenario`]'s fields; exact stories are scripted with [`Fault`] verbs
//! (crash, failover, partition, clock step, flush, client crash, pause) in
//! [`Scenario::script`]. The checker's findings are [`ViolationKind`]s. `docs/safety.md`
//! says what each named scenario shows.
//!
//! # Examples
//!
//! ```
//! use redlock_mock::sim::{run, run_traced, sweep, Scenario, ViolationKind};
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
//!
//! // A release that overtakes its acquire (no ordered connection) leaves
//! // the acquire's key behind.
//! let unordered = sweep(&Scenario::late_grants_unordered(), 0..50, 2);
//! assert!(unordered.runs_with(ViolationKind::LeftBehind) > 0);
//! ```
//!
//! # Layout
//!
//! The vocabulary of the run (`event.rs`: requests, answers, events, the
//! queue), its results (`outcome.rs`), the checker (`checker/`), the lock
//! records (`locks.rs`) and the leaves (`clock.rs`, `rng.rs`, `trace.rs`,
//! `net.rs`, `node.rs`, `scenario.rs`) import nothing of the parts that use
//! them. A client (`client/`) sees the world only through what it is lent
//! for one event (`ctx.rs`); the world (`world/`) owns the clients and
//! calls them, and lends each the shared state of its process
//! (`process.rs`: the lines); `run.rs` and `sweep.rs` run worlds.

mod checker;
mod client;
mod clock;
mod ctx;
mod event;
mod locks;
mod net;
mod node;
mod outcome;
mod presets;
mod process;
mod rng;
mod run;
mod scenario;
mod sweep;
mod trace;
mod world;

pub use checker::{FenceRises, Grant, GrantObserver};
pub use outcome::{Outcome, Stats, Violation, ViolationKind};
pub use rng::SimRng;
pub use run::{run, run_observed, run_traced};
pub use scenario::{
    ClientFaults, ClockFaults, Cut, Fault, FenceScheme, NetFaults, NodeFaults, Persistence,
    Primitive, Scenario, MAX_CLIENTS, MAX_KEYS, MAX_NODES, MAX_OBSERVERS,
};
pub use sweep::{sweep, SeedPlan, SweepReport};
