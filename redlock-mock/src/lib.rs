//! In-memory Redlock nodes for tests: swap them in for Redis and inject
//! faults on demand, with no server.
//!
//! ```
//! use std::time::Duration;
//! use redlock_core::{LockError, Redlock};
//! use redlock_mock::MockCluster;
//!
//! let cluster = MockCluster::new(5);
//! let locks = Redlock::builder(cluster.backends())
//!     .node_timeout(Duration::from_millis(20))
//!     .build()?;
//!
//! cluster.node(0).freeze(); // as SIGSTOP: requests hang until thawed
//! cluster.node(1).go_down(); // requests fail at once
//! let lock = locks.try_lock("k", Duration::from_secs(5))?; // 3 of 5 still grant
//! lock.release()?;
//!
//! cluster.node(2).go_down();
//! assert!(matches!(locks.try_lock("k", Duration::from_secs(5)), Err(LockError::NoQuorum(_))));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Expiry follows an injectable clock: [`ManualClock`] makes TTLs pass
//! without waiting.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![cfg_attr(
    not(test),
    deny(clippy::panic, clippy::print_stdout, clippy::print_stderr)
)]

mod clock;
mod cluster;
#[cfg(feature = "conformance")]
#[cfg_attr(docsrs, doc(cfg(feature = "conformance")))]
pub mod conformance;
mod node;

pub use clock::ManualClock;
pub use cluster::MockCluster;
pub use node::{MockError, MockNode, MockStats};

#[cfg(feature = "sim")]
#[cfg_attr(docsrs, doc(cfg(feature = "sim")))]
pub mod sim;
