//! The workspace's integration tests, built as one binary.

mod bad_input;
mod conformance;
mod events;
mod harness_selftest;
mod layering;
mod lifetime;
mod line;
mod manager;
mod redis_common;
mod redis_dyn;
mod redis_errors;
mod redis_events;
mod redis_exit;
mod redis_faults;
mod redis_ghost;
mod redis_interop;
mod redis_lifetime;
mod redis_regressions;
mod redis_semaphore;
mod redis_wake;
mod regressions;
mod semaphore;
mod sim;
mod sim_fencing;
mod wake;
