//! Shared helpers for the workspace's integration tests: checks shared by
//! several tests, and the harness that starts real
//! `redis-server` processes.
//!
//! The READMEs' code (the workspace's and each published crate's) and the
//! guide's (docs/guide.md) are compiled and run as doc tests here.

pub mod checks;
pub mod harness;

#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../redlock-core/README.md")]
struct CoreReadmeDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../redlock-mock/README.md")]
struct MockReadmeDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../redlock-redis/README.md")]
struct RedisReadmeDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../docs/guide.md")]
struct GuideDoctests;
