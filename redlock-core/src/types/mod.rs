//! Plain values: resources, tokens, TTL and retry policy, node names, the
//! clock, errors and reports.

pub(crate) mod cancel;
pub(crate) mod clock;
pub(crate) mod error;
pub(crate) mod fencing;
pub(crate) mod identity;
pub(crate) mod keep_alive;
pub mod keys;
pub(crate) mod node_id;
pub(crate) mod report;
pub(crate) mod resource;
pub(crate) mod timing;
pub(crate) mod token;
