//! Shared helpers for the workspace's integration tests: the conformance
//! suite any `LockBackend` can run, and the harness that starts real
//! `redis-server` processes.
//!
//! The README's code is compiled and run as a doc test here.

pub mod checks;
pub mod conformance;
pub mod harness;

#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;
