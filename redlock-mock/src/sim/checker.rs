//! The safety and liveness checker, the protected resource (fenced or
//! not), and the grant hook.

use std::fmt;
use std::time::Duration;

use super::fence::FenceRises;
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
    /// With [`Scenario::fencing`](super::Scenario::fencing): a holder of a
    /// resource got a fencing token not above the previous holder's (in the
    /// order the locks were acquired, in real time).
    FencingToken,
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
    pub const ALL: [ViolationKind; 8] = [
        ViolationKind::MutualExclusion,
        ViolationKind::LostUpdate,
        ViolationKind::QuorumLost,
        ViolationKind::ExtendResurrected,
        ViolationKind::FencingToken,
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
            ViolationKind::FencingToken => "fencing-token",
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
    /// When the lock was acquired (simulated real time): the decision of
    /// its acquire round, or of its fence-raising round.
    pub at: Duration,
    /// When the client's validity runs out (simulated real time).
    pub valid_until: Duration,
    /// The locked resources, as a bit mask (bit `k` for resource `k`).
    pub keys: u8,
    /// With [`Scenario::fencing`](super::Scenario::fencing): each granting
    /// node of the acquire round and the fencing counter it returned (the
    /// largest over the keys). Empty otherwise.
    pub fences: &'a [(usize, u64)],
    /// With [`Scenario::fencing`](super::Scenario::fencing): the lock's
    /// fencing token (by [`Scenario::fence_scheme`](super::Scenario::fence_scheme)).
    pub token: Option<u64>,
}

/// A hook called on every successful acquire (in the order of acquisition),
/// for checks the built-in checker does not make. An `Err` becomes a
/// [`ViolationKind::Observer`] violation.
///
/// # Examples
///
/// ```
/// use redlock_mock::sim::{run_observed, FenceRises, Scenario};
/// // The built-in token check, run a second time as an observer.
/// let mut check = FenceRises::default();
/// let outcome = run_observed(&Scenario::fencing(), 3, &mut check);
/// assert!(outcome.is_clean() && outcome.stats.acquired > 0);
/// ```
pub trait GrantObserver {
    /// Called when `grant` is decided.
    ///
    /// # Errors
    ///
    /// A description of what is wrong with the grant.
    fn on_grant(&mut self, grant: &Grant<'_>) -> Result<(), String>;
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
/// on the latest version, as Jepsen's lock-guarded set. A fenced register
/// also keeps the highest fencing token any access carried, and by which
/// lock.
#[derive(Debug, Clone, Copy, Default)]
struct Register {
    version: u64,
    writer: u32,
    written_at: u64,
    token: u64,
    token_lock: u32,
}

/// Collects violations; the world calls it at each event that matters.
#[derive(Debug)]
pub(crate) struct Checker {
    holds: Vec<Hold>,
    registers: [Register; MAX_KEYS],
    /// The resource rejects lower fencing tokens.
    fenced: bool,
    /// Tokens must rise from holder to holder.
    pub(crate) tokens: FenceRises,
    pub(crate) violations: Vec<Violation>,
    pub(crate) total: u64,
    pub(crate) progress_after: Option<u64>,
    pub(crate) progressed: bool,
}

const KEEP: usize = 16;

impl Checker {
    pub(crate) fn new(fenced: bool) -> Self {
        Checker {
            holds: Vec::with_capacity(8),
            registers: [Register::default(); MAX_KEYS],
            fenced,
            tokens: FenceRises::default(),
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

    /// The fenced resource's gate for an access to `mask` with `token`:
    /// rejected (a description) when some register has seen a higher token;
    /// otherwise every register of `mask` records the token. Unfenced
    /// resources and accesses without a token always pass.
    fn admit(&mut self, lock: u32, mask: u8, token: Option<u64>) -> Result<(), String> {
        let Some(token) = token.filter(|_| self.fenced) else {
            return Ok(());
        };
        let keys = (0..MAX_KEYS).filter(|k| mask & (1 << k) != 0);
        if let Some(key) = keys.clone().find(|&k| self.registers[k].token > token) {
            let reg = self.registers[key];
            return Err(format!(
                "r{key} rejects L{lock}'s token {token}: it has seen {} from L{}",
                reg.token, reg.token_lock
            ));
        }
        for key in keys {
            let reg = &mut self.registers[key];
            if token > reg.token {
                reg.token = token;
                reg.token_lock = lock;
            }
        }
        Ok(())
    }

    /// Reads the current version of every resource in `mask` into `seen`,
    /// unless the fenced resource rejects `token`.
    pub(crate) fn read(
        &mut self,
        lock: u32,
        mask: u8,
        token: Option<u64>,
        seen: &mut [u64; MAX_KEYS],
    ) -> Result<(), String> {
        self.admit(lock, mask, token)?;
        for (key, slot) in seen.iter_mut().enumerate() {
            if mask & (1 << key) != 0 {
                *slot = self.registers[key].version;
            }
        }
        Ok(())
    }

    /// Writes every resource in `mask`, based on the versions read earlier,
    /// unless the fenced resource rejects `token` (nothing is written then).
    pub(crate) fn write(
        &mut self,
        (lock, client): (u32, u8),
        mask: u8,
        token: Option<u64>,
        seen: &[u64; MAX_KEYS],
        now: u64,
    ) -> Result<(), String> {
        self.admit(lock, mask, token)?;
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
            let reg = &mut self.registers[key];
            reg.version = reg.version.max(based_on) + 1;
            reg.writer = lock;
            reg.written_at = now;
        }
        Ok(())
    }
}
