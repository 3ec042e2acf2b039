//! The ready-made fencing check: tokens rise from holder to holder.

use std::time::Duration;

use super::{Grant, GrantObserver};
use crate::sim::clock::duration_ns;
use crate::sim::scenario::MAX_KEYS;
use crate::sim::trace::fmt_time;

/// The holder of one resource, as far as fencing goes.
#[derive(Debug, Clone, Copy)]
struct Holder {
    client: usize,
    lock: u32,
    token: u64,
    at: Duration,
}

/// A [`GrantObserver`] that requires the fencing token ([`Grant::token`])
/// to rise strictly from holder to holder of each resource, in the order
/// the grants are handed to it (the order of acquisition in real time). The
/// simulator's checker runs one whenever [`Scenario::fencing`] is on; its
/// errors are [`ViolationKind::FencingToken`] violations. Grants without a
/// token pass.
///
/// [`Scenario::fencing`]: crate::sim::Scenario::fencing
/// [`ViolationKind::FencingToken`]: crate::sim::ViolationKind::FencingToken
///
/// # Examples
///
/// ```
/// use redlock_mock::sim::{FenceRises, Grant, GrantObserver};
/// let mut check = FenceRises::default();
/// let fences = [(0, 4), (2, 6)];
/// let mut grant = Grant {
///     client: 0, lock: 0, at: Default::default(), valid_until: Default::default(),
///     keys: 0b1, fences: &fences, token: Some(7),
/// };
/// assert!(check.on_grant(&grant).is_ok());
/// // The next holder of resource 0 with the same token: not a rise.
/// grant.lock = 1;
/// let err = check.on_grant(&grant).unwrap_err();
/// assert!(err.contains("L1") && err.contains("L0"), "{err}");
/// ```
#[derive(Debug, Clone, Default)]
pub struct FenceRises {
    last: [Option<Holder>; MAX_KEYS],
}

impl GrantObserver for FenceRises {
    fn on_grant(&mut self, grant: &Grant<'_>) -> Result<(), String> {
        let Some(token) = grant.token else {
            return Ok(());
        };
        let mut problem = None;
        for (key, last) in self.last.iter_mut().enumerate() {
            if grant.keys & (1 << key) == 0 {
                continue;
            }
            if let Some(prev) = last.filter(|p| token <= p.token) {
                problem.get_or_insert_with(|| {
                    format!(
                        "c{} L{} acquired r{key} with token {token}, not above token {} of the previous holder c{} L{} (acquired at {})",
                        grant.client,
                        grant.lock,
                        prev.token,
                        prev.client,
                        prev.lock,
                        fmt_time(duration_ns(prev.at)),
                    )
                });
            }
            *last = Some(Holder {
                client: grant.client,
                lock: grant.lock,
                token,
                at: grant.at,
            });
        }
        problem.map_or(Ok(()), Err)
    }
}
