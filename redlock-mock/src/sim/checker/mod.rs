//! The safety and liveness checker, the protected resource (fenced or
//! not), and the grant hook with its ready-made fencing check.

mod fence;

use std::time::Duration;

pub use fence::FenceRises;

use super::outcome::{Violation, ViolationKind};
use super::scenario::MAX_KEYS;
use super::trace::fmt_time;

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
    /// With [`Scenario::fencing`](crate::sim::Scenario::fencing): each granting
    /// node of the acquire round and the fencing counter it returned (the
    /// largest over the keys). Empty otherwise.
    pub fences: &'a [(usize, u64)],
    /// With [`Scenario::fencing`](crate::sim::Scenario::fencing): the lock's
    /// fencing token (by [`Scenario::fence_scheme`](crate::sim::Scenario::fence_scheme)).
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
                        fmt_time(now),
                        other.client,
                        other.lock,
                        fmt_time(other.start),
                        fmt_time(other.end)
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
    /// crash, a loss it learned of), or earlier if it already did.
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
                        fmt_time(reg.written_at)
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
