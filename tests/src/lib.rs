//! Shared helpers for the workspace's integration tests.
//!
//! The README's code is compiled and run as a doc test here.

#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;
