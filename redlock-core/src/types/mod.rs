//! Plain values: resources, tokens, TTL and retry policy, node names, the
//! clock, errors and reports.

pub(crate) mod cancel;
pub(crate) mod clock;
pub(crate) mod config;
pub(crate) mod error;
pub mod keys;
pub(crate) mod node;
pub(crate) mod report;
pub(crate) mod resource;
pub(crate) mod token;
