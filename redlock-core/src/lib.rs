//! The backend-agnostic core of a synchronous [Redlock]: the distributed lock
//! over `N` independent nodes that is safe while a majority of them is up. It is safe under Redlock's own conditions: masters that
//! persist their keys or restart only after the longest TTL, masters'
//! clocks that are never stepped, and a client that acts within the
//! validity (`docs/safety.md` names each and what breaks without it).
//!
//! A lock is acquired when a quorum (`N/2 + 1`) of nodes store its random
//! token within a round whose duration leaves validity:
//! `validity = ttl - elapsed - drift`, with `drift = ttl * factor + 2 ms`.
//! Failed rounds are released on every node that did not refuse them (a
//! refusal sets nothing); retries pause for a random
//! delay; every request of a round goes to all nodes at once.
//!
//! This crate holds the algorithm and the blocking API; the nodes come from a
//! backend crate (`redlock-redis` for Redis masters, `redlock-mock` for
//! in-memory nodes in tests).
//!
//! # Where things are
//!
//! - At the top level, what applications use: the manager [`Redlock`] and
//!   its [`Builder`], the guard [`Lock`], [`KeepAlive`], fencing tokens,
//!   the errors, [`Cancel`], the event hook and [`Stats`], and
//!   [`DynRedlock`] for code that runs over Redis and the mock alike.
//! - [`backend`]: the per-node contract for backend authors
//!   ([`backend::LockBackend`], its requests and answers, the
//!   [`backend::Claim`] a node stores).
//! - [`decide`]: the pure math and decisions, no clock, no I/O (quorum,
//!   drift, validity, the vote counter and the round verdict, the fencing
//!   step). Simulations drive exactly this code.
//! - [`engine`]: the manager's protocol as sans-IO state machines, which the
//!   blocking manager and the simulator of `redlock-mock` both drive.
//! - Time through one [`Clock`] trait: validity never uses wall-clock time.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use redlock_core::{LockError, Redlock};
//! use redlock_mock::MockCluster;
//!
//! let cluster = MockCluster::new(5);
//! let locks = Redlock::new(cluster.backends())?;
//!
//! let lock = locks.lock("invoice:42", Duration::from_secs(10))?;
//! // ... the critical section, while lock.is_valid() ...
//! lock.release()?;
//!
//! // Two of five nodes down: a quorum of three remains.
//! cluster.node(0).go_down();
//! cluster.node(1).go_down();
//! let lock = locks.try_lock("invoice:42", Duration::from_secs(10))?;
//! drop(lock);
//!
//! // Three down: the error names them.
//! cluster.node(2).go_down();
//! match locks.try_lock("invoice:42", Duration::from_secs(10)) {
//!     Err(LockError::NoQuorum(report)) => assert_eq!(report.failures().len(), 3),
//!     other => panic!("expected NoQuorum, got {other:?}"),
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [Redlock]: https://redis.io/docs/latest/develop/use/patterns/distributed-locks/
#![cfg_attr(docsrs, feature(doc_cfg))]
#![cfg_attr(
    not(test),
    deny(clippy::panic, clippy::print_stdout, clippy::print_stderr)
)]

// The folders are the layers: decide, types, events, backend, model,
// engine, runtime, api, lowest first; a folder imports only the layers
// before it (tests/tests/integration/layering.rs checks it).
mod api;
pub mod backend;
pub mod decide;
pub mod engine;
mod events;
pub mod model;
mod runtime;
mod types;

pub use api::builder::{Builder, POLLER_FROM};
pub use api::dynamic::{connect_dyn, DynBackend, DynError, DynRedlock};
pub use api::guard::Lock;
pub use api::redlock::Redlock;
pub use api::rwlock::RwLock;
pub use api::semaphore::{Permit, Semaphore};
pub(crate) use backend::{AcquireOutcome, Connect, LockBackend, Request, Response};
pub(crate) use decide::{
    drift, fence_step, judge, quorum, validity, Decision, FenceStep, Tally, Verdict, Vote,
};
pub use engine::MAX_PERMITS;
#[cfg(feature = "metrics")]
pub use events::MetricsEvents;
#[cfg(feature = "tracing")]
pub use events::TracingEvents;
pub use events::{
    CallKind, CallOutcome, Event, EventHandler, FailureCounts, FailureKind, ManagerStats, NoEvents,
    NodeStats, RoundSummary, Stats,
};
pub use types::cancel::Cancel;
pub use types::clock::{Clock, SystemClock};
pub use types::error::{BuildError, ConfigError, ConnectError, LockError, LostReason, SpawnError};
pub use types::fencing::FencingToken;
pub use types::identity::Identity;

/// Leader election: [`Redlock::election`], the [`Leadership`](election::Leadership)
/// a candidate wins, the [`Leader`](election::Leader) everyone can read and
/// the [`Observer`](election::Observer) of its changes.
pub mod election {
    pub use crate::api::election::{Election, Leadership, Observer};
    pub use crate::engine::{Leader, Observed};
}
pub use types::keep_alive::KeepAlive;
pub use types::keys;
pub use types::node_id::NodeId;
pub use types::report::{NodeError, NodeFailure, RoundReport};
pub(crate) use types::resource::{Claim, Queued};
pub use types::resource::{IntoResources, Resources};
pub use types::timing::{RetryDelay, Ttl, MAX_NODE_TIMEOUT};
pub use types::token::EntropyError;
pub(crate) use types::token::{Token, TOKEN_LEN};
