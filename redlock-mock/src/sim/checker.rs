//! The safety and liveness checker, the protected resource, and the grant
//! hook for fencing checks.

use std::fmt;
use std::time::Duration;

use super::scenario::MAX_KEYS;

/// What went wrong in a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ViolationKind {
    /// Two locks believed (inside their validity) that they held the same
    /// resource at overlapping real times.
    MutualExclusion,
    /// A write to the protected resource was based on a read that another
    /// write had overtaken (a lost or interleaved update).
    LostUpdate,
    /// A client that believed it held a lock did not have its token on a
    /// quorum of its nodes (a down node counts with what it held when it
    /// went down).
    QuorumLost,
    /// An extend won although the lock's keys had vanished from a quorum
    /// when the extend started.
    ExtendResurrected,
    /// Liveness mode: no contender acquired within the bound after the
    /// faults stopped.
    NoProgress,
    /// The [`GrantObserver`] rejected a grant (e.g. a fencing token that did
    /// not rise).
    Observer,
    /// The scenario is outside what the simulator supports (see
    /// [`Scenario::validate`](super::Scenario::validate)); nothing ran.
    InvalidScenario,
}

impl ViolationKind {
    /// Every kind, in a fixed order.
    pub const ALL: [ViolationKind; 7] = [
        ViolationKind::MutualExclusion,
        ViolationKind::LostUpdate,
        ViolationKind::QuorumLost,
        ViolationKind::ExtendResurrected,
        ViolationKind::NoProgress,
        ViolationKind::Observer,
        ViolationKind::InvalidScenario,
    ];

    /// A short stable name.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(redlock_mock::sim::ViolationKind::LostUpdate.name(), "lost-update");
    /// ```
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            ViolationKind::MutualExclusion => "mutual-exclusion",
            ViolationKind::LostUpdate => "lost-update",
            ViolationKind::QuorumLost => "quorum-lost",
            ViolationKind::ExtendResurrected => "extend-resurrected",
            ViolationKind::NoProgress => "no-progress",
            ViolationKind::Observer => "observer",
            ViolationKind::InvalidScenario => "invalid-scenario",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// One violation found by the checker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// What kind.
    pub kind: ViolationKind,
    /// When, in simulated real time since the start of the run.
    pub at: Duration,
    /// What happened, naming clients (`c0`...), locks (`L7`) and resources.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at {}: {}",
            self.kind.name(),
            super::trace::fmt_time(duration_ns(self.at)),
            self.detail
        )
    }
}

pub(crate) fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// One successful acquire, as handed to a [`GrantObserver`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant<'a> {
    /// The client.
    pub client: usize,
    /// The lock (one per acquire attempt, numbered in the order created).
    pub lock: u32,
    /// When the round was decided (simulated real time).
    pub at: Duration,
    /// When the client's validity runs out (simulated real time).
    pub valid_until: Duration,
    /// The locked resources, as a bit mask (bit `k` for resource `k`).
    pub keys: u8,
    /// With [`Scenario::fencing`](super::Scenario::fencing): each granting
    /// node and the fencing counter it returned (the largest over the
    /// keys). Empty otherwise.
    pub fences: &'a [(usize, u64)],
}

/// A hook called on every successful acquire, for checks the built-in
/// checker does not make (fencing tokens). An `Err` becomes a
/// [`ViolationKind::Observer`] violation.
///
/// # Examples
///
/// ```
/// use redlock_mock::sim::{run_observed, FenceRises, Scenario};
/// let scenario = Scenario { fencing: true, ..Scenario::in_model() };
/// let mut check = FenceRises::default();
/// let outcome = run_observed(&scenario, 3, &mut check);
/// assert!(outcome.stats.acquired > 0);
/// ```
pub trait GrantObserver {
    /// Called when `grant` is decided.
    ///
    /// # Errors
    ///
    /// A description of what is wrong with the grant.
    fn on_grant(&mut self, grant: &Grant<'_>) -> Result<(), String>;
}

/// A [`GrantObserver`] that requires each resource's fencing token (the
/// largest counter any granting node returned) to rise strictly from grant
/// to grant. Without the fence-raising step of the lock-lifetime work, node
/// restarts that lose counters make this fail: that is what it is for.
///
/// # Examples
///
/// ```
/// use redlock_mock::sim::{FenceRises, Grant, GrantObserver};
/// let mut check = FenceRises::default();
/// let fences = [(0, 1), (2, 1)];
/// let grant = Grant {
///     client: 0, lock: 0, at: Default::default(), valid_until: Default::default(),
///     keys: 0b1, fences: &fences,
/// };
/// assert!(check.on_grant(&grant).is_ok());
/// // The same fence again for resource 0: not a rise.
/// assert!(check.on_grant(&grant).is_err());
/// ```
#[derive(Debug, Clone, Default)]
pub struct FenceRises {
    last: [u64; MAX_KEYS],
}

impl GrantObserver for FenceRises {
    fn on_grant(&mut self, grant: &Grant<'_>) -> Result<(), String> {
        let fence = grant.fences.iter().map(|&(_, f)| f).max().unwrap_or(0);
        for key in 0..MAX_KEYS {
            if grant.keys & (1 << key) == 0 {
                continue;
            }
            if fence <= self.last[key] {
                return Err(format!(
                    "L{} got fence {fence} on r{key}, not above {}",
                    grant.lock, self.last[key]
                ));
            }
            self.last[key] = fence;
        }
        Ok(())
    }
}

/// A belief, held by one lock, that it holds one resource from `start`
/// until `end` (real times).
#[derive(Debug, Clone, Copy)]
struct Hold {
    key: u8,
    lock: u32,
    client: u8,
    start: u64,
    end: u64,
}

/// The protected resource (one register per key): each write must be based
/// on the latest version, as Jepsen's lock-guarded set.
#[derive(Debug, Clone, Copy, Default)]
struct Register {
    version: u64,
    writer: u32,
    written_at: u64,
}

/// Collects violations; the world calls it at each event that matters.
#[derive(Debug)]
pub(crate) struct Checker {
    holds: Vec<Hold>,
    registers: [Register; MAX_KEYS],
    pub(crate) violations: Vec<Violation>,
    pub(crate) total: u64,
    pub(crate) progress_after: Option<u64>,
    pub(crate) progressed: bool,
}

const KEEP: usize = 16;

impl Checker {
    pub(crate) fn new() -> Self {
        Checker {
            holds: Vec::with_capacity(8),
            registers: [Register::default(); MAX_KEYS],
            violations: Vec::new(),
            total: 0,
            progress_after: None,
            progressed: false,
        }
    }

    pub(crate) fn violation(
        &mut self,
        kind: ViolationKind,
        at: u64,
        detail: impl FnOnce() -> String,
    ) {
        self.total += 1;
        if self.violations.len() < KEEP {
            self.violations.push(Violation {
                kind,
                at: Duration::from_nanos(at),
                detail: detail(),
            });
        }
    }

    /// Lock `lock` of `client` believes, from `now` until `end`, that it
    /// holds `mask` (after an acquire or an extend).
    pub(crate) fn held(&mut self, lock: u32, client: u8, mask: u8, now: u64, end: u64) {
        self.holds.retain(|h| h.end > now || h.lock == lock);
        for key in 0..MAX_KEYS as u8 {
            if mask & (1 << key) == 0 {
                continue;
            }
            let clash = self
                .holds
                .iter()
                .find(|h| h.key == key && h.lock != lock && h.end > now)
                .copied();
            if let Some(other) = clash {
                self.violation(ViolationKind::MutualExclusion, now, || {
                    format!(
                        "c{client} L{lock} holds r{key} from {} while c{} L{} holds it from {} until {}",
                        super::trace::fmt_time(now),
                        other.client,
                        other.lock,
                        super::trace::fmt_time(other.start),
                        super::trace::fmt_time(other.end)
                    )
                });
            }
            match self
                .holds
                .iter_mut()
                .find(|h| h.key == key && h.lock == lock)
            {
                Some(h) => h.end = end,
                None => self.holds.push(Hold {
                    key,
                    lock,
                    client,
                    start: now,
                    end,
                }),
            }
        }
    }

    /// Lock `lock` stops believing it holds anything at `now` (release,
    /// crash, a refused extend).
    pub(crate) fn end(&mut self, lock: u32, now: u64) {
        for h in self.holds.iter_mut().filter(|h| h.lock == lock) {
            h.end = h.end.min(now);
        }
    }

    /// Reads the current version of every resource in `mask`.
    pub(crate) fn read(&self, mask: u8, seen: &mut [u64; MAX_KEYS]) {
        for (key, slot) in seen.iter_mut().enumerate() {
            if mask & (1 << key) != 0 {
                *slot = self.registers[key].version;
            }
        }
    }

    /// Writes every resource in `mask`, based on the versions read earlier.
    pub(crate) fn write(
        &mut self,
        lock: u32,
        client: u8,
        mask: u8,
        seen: &[u64; MAX_KEYS],
        now: u64,
    ) {
        for (key, &based_on) in seen.iter().enumerate() {
            if mask & (1 << key) == 0 {
                continue;
            }
            let reg = self.registers[key];
            if reg.version != based_on {
                self.violation(ViolationKind::LostUpdate, now, || {
                    format!(
                        "c{client} L{lock} writes r{key} based on version {based_on} but L{} wrote version {} at {}",
                        reg.writer,
                        reg.version,
                        super::trace::fmt_time(reg.written_at)
                    )
                });
            }
            self.registers[key] = Register {
                version: reg.version.max(based_on) + 1,
                writer: lock,
                written_at: now,
            };
        }
    }
}
