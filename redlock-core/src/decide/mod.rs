//! The pure math and decisions of the algorithm: no clock, no I/O.
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//! use redlock_core::decide::{drift, quorum, validity};
//! assert_eq!(quorum(5), 3);
//! let ttl = Duration::from_secs(10);
//! assert_eq!(drift(ttl, 0.01), Duration::from_millis(102));
//! assert_eq!(
//!     validity(ttl, Duration::from_millis(98), drift(ttl, 0.01)),
//!     Some(Duration::from_millis(9800))
//! );
//! ```

pub(crate) mod deadline;
pub(crate) mod fence;
pub(crate) mod node_set;
pub(crate) mod quorum;
pub(crate) mod tally;
pub(crate) mod verdict;

pub use fence::{fence_step, FenceStep, FENCE_LIMIT};
pub use quorum::{drift, quorum, validity, DRIFT_FLOOR};
pub use tally::{Decision, Tally, Vote};
pub use verdict::{judge, Verdict};
