//! Fencing tokens in the simulator: the client's second step after a won,
//! fenced acquire round (as the core's `Shared::fence`), and the check that
//! tokens rise from holder to holder.
//!
//! With [`FenceScheme::Raise`] the client asks the core's own
//! [`fence_step`] what the granted counters mean: on one node the counter is
//! the token; otherwise it starts a raise round `RaiseFence(t)` to every node
//! of its view, counted from the *acquire's* start reading, and judged by
//! the core's `judge` like any round. `Held { validity }`: the lock is
//! acquired with token `t`, valid until the raise's decision plus that
//! validity. Anything else: the acquire is abandoned (released on every
//! node) and retried, as a failed acquire. A pause may fall between the
//! acquire's decision and the raise ([`Step::Raise`] is a pause point).
//! [`FenceScheme::MaxOnly`] takes the largest counter as the token, no raise.

use std::time::Duration;

use redlock_core::{fence_step, FenceStep, Verdict};

use super::checker::{Grant, GrantObserver};
use super::client::{abandon_set, Kind, Round};
use super::scenario::{FenceScheme, MAX_KEYS};
use super::world::{Op, Step, World};

/// A won fenced acquire waiting for (or running) its raise round.
#[derive(Debug)]
pub(crate) struct Raise {
    /// The token to raise the counters to.
    target: u64,
    /// The acquire round's granting nodes and their counters.
    fences: Vec<(usize, u64)>,
    /// Where the acquire may have left keys (for abandoning it).
    abandon: u32,
}

impl World<'_, '_> {
    /// A fenced acquire round won at `local` with `validity`: the token by
    /// the scenario's scheme, directly or after a raise round.
    pub(super) fn fence(&mut self, c: u8, won: Round, local: i64, validity: Duration) {
        let counters: Vec<u64> = won.fences.iter().map(|&(_, f)| f).collect();
        let nodes = self.clients[c as usize].view.len();
        let step = match self.sc.fence_scheme {
            FenceScheme::Raise => fence_step(&counters, nodes),
            FenceScheme::MaxOnly => counters.iter().max().map(|&top| FenceStep::Done(top)),
        };
        let lock = self.clients[c as usize].lock;
        match step {
            Some(FenceStep::Done(token)) => {
                self.acquired(c, &won.fences, local, validity, Some(token));
            }
            Some(FenceStep::Raise(target)) => {
                self.trace.line(self.now, || {
                    format!("c{c} L{lock} raises the fences to {target}")
                });
                self.clients[c as usize].raising = Some(Raise {
                    target,
                    fences: won.fences,
                    abandon: abandon_set(&won.tally),
                });
                self.step_at(self.now, c, Step::Raise, false);
            }
            // No counters although fencing was asked for (cannot happen
            // here: every grant carries one); the core gives up likewise.
            None => self.abandon(c, abandon_set(&won.tally)),
        }
    }

    /// Sends the raise round of the won acquire (after a possible pause).
    pub(super) fn start_raise(&mut self, c: u8) {
        let Some(raise) = self.clients[c as usize].raising.take() else {
            return;
        };
        self.stats.raises += 1;
        self.start_round(c, Kind::Raise, Op::RaiseFence(raise.target));
        if let Some(round) = self.clients[c as usize].round.as_mut() {
            round.raise = Some(raise);
        }
    }

    /// The raise round is decided (`verdict` by `judge`, validity counted
    /// from the acquire's start): the lock with its token, or abandoned.
    pub(super) fn raised(&mut self, c: u8, round: Round, local: i64, verdict: Verdict) {
        let Some(raise) = round.raise else {
            return;
        };
        match verdict {
            Verdict::Held { validity } => {
                self.acquired(c, &raise.fences, local, validity, Some(raise.target));
            }
            _ => {
                self.stats.raise_failed += 1;
                self.abandon(c, raise.abandon);
            }
        }
    }

    /// The fenced resource rejected `c`'s `what` (a read or write): the
    /// lock is stale; the client skips the rest and releases.
    pub(super) fn fenced_off(&mut self, c: u8, what: &'static str, why: String) {
        self.stats.fenced_off += 1;
        self.trace
            .line(self.now, || format!("c{c} {what} fenced off: {why}"));
        self.on_step(c, Step::Release, false);
    }
}

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
/// [`Scenario::fencing`]: super::Scenario::fencing
/// [`ViolationKind::FencingToken`]: super::ViolationKind::FencingToken
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
                        super::trace::fmt_time(super::checker::duration_ns(prev.at)),
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
