//! The pure math and decisions of the algorithm: no clock, no I/O.

pub(crate) mod fence;
pub(crate) mod quorum;
pub(crate) mod tally;
pub(crate) mod verdict;
